"""Live Spark 4.x proof of ``ckptfix migrate relocate``: a relocated transformWithState checkpoint restarts
and produces exactly the rows the unmoved query would have; the same move by a plain copy fails; a relocated
checkpoint whose input moved fails (``Wrong basePath``) unless ``--input-from/--input-to`` rewrote the source log.

One tiny base (transformWithStateInPandas counting rows per key, file source with one file per batch,
RocksDB, foreachBatch sink writing one JSON file per batch id) is built once; three restarts use copies.
Expected rows come from the input files alone (running count per key, batch i = file i).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ckptfix.audit import audit
from tests.spark.harness import error_text

ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
PROVIDER_CONF = "spark.sql.streaming.stateStore.providerClass"
BASE_FILES = 3
ROWS = 4


def write_input(input_dir: Path, i: int) -> None:
    input_dir.mkdir(parents=True, exist_ok=True)
    rows = [{"id": i * ROWS + r, "key": f"k{(i + r) % 3}"} for r in range(ROWS)]
    tmp = input_dir / f".part-{i:04d}.tmp"
    tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    os.utime(tmp, (1_700_000_000 + 60 * i,) * 2)  # distinct mtimes: batch i reads file i
    tmp.rename(input_dir / f"part-{i:04d}.json")


def expected_batches(input_dir: Path) -> dict[int, list[list[Any]]]:
    """Batch i = file i; each key of the file with its running count over files 0..i."""
    counts: dict[str, int] = {}
    out: dict[int, list[list[Any]]] = {}
    for i, path in enumerate(sorted(input_dir.glob("part-*.json"))):
        keys: set[str] = set()
        for line in path.read_text().splitlines():
            key = json.loads(line)["key"]
            counts[key] = counts.get(key, 0) + 1
            keys.add(key)
        out[i] = sorted([k, counts[k]] for k in keys)
    return out


def sink_batches(out_dir: Path) -> dict[int, list[list[Any]]]:
    return {int(p.stem.split("-")[1]): json.loads(p.read_text()) for p in sorted(out_dir.glob("batch-*.json"))}


def run_query(spark: Any, ckpt: Path, input_dir: Path, out_dir: Path, timeout: float = 180) -> str | None:
    """Run the TWS query with availableNow; None when it finished cleanly, else the error text."""
    import pandas as pd
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor

    class Counter(StatefulProcessor):
        def init(self, handle: Any) -> None:
            self.cnt = handle.getValueState("cnt", "n LONG")

        def handleInputRows(self, key: Any, rows: Any, timerValues: Any) -> Iterator[Any]:
            n = self.cnt.get()[0] if self.cnt.exists() else 0
            for pdf in rows:
                n += len(pdf)
            self.cnt.update((n,))
            yield pd.DataFrame({"key": [key[0]], "n": [n]})

        def close(self) -> None:
            pass

    out_dir.mkdir(parents=True, exist_ok=True)

    def sink(df: Any, batch_id: int) -> None:
        rows = sorted([r["key"], int(r["n"])] for r in df.collect())
        (out_dir / f"batch-{batch_id:03d}.json").write_text(json.dumps(rows))

    previous = spark.conf.get(PROVIDER_CONF, None)
    spark.conf.set(PROVIDER_CONF, ROCKSDB)
    try:
        df = (
            spark.readStream.format("json")
            .schema("id LONG, key STRING")
            .option("maxFilesPerTrigger", 1)
            .load(str(input_dir))
        )
        counted = df.groupBy("key").transformWithStateInPandas(
            statefulProcessor=Counter(), outputStructType="key STRING, n LONG", outputMode="Update", timeMode="None"
        )
        query = (
            counted.writeStream.foreachBatch(sink)
            .outputMode("update")
            .option("checkpointLocation", str(ckpt))
            .trigger(availableNow=True)
            .start()
        )
        try:
            if not query.awaitTermination(timeout):
                query.stop()
                return f"timeout after {timeout} s"
        except Exception as exc:  # the query failed: Spark's own message
            return error_text(exc)
        return None
    finally:
        if previous is None:
            spark.conf.unset(PROVIDER_CONF)
        else:
            spark.conf.set(PROVIDER_CONF, previous)


@pytest.fixture(scope="module")
def tws_base(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    root = tmp_path_factory.mktemp("relocate-tws")
    ckpt, inp, out = root / "ckpt", root / "input", root / "out"
    for i in range(BASE_FILES):
        write_input(inp, i)
    failure = run_query(spark, ckpt, inp, out)
    assert failure is None, failure
    assert sink_batches(out) == expected_batches(inp)
    return ckpt, inp, out


def cli(*args: str) -> tuple[int, str]:
    from typer.testing import CliRunner

    from ckptfix.cli.main import app

    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


def test_relocated_tws_checkpoint_restarts_and_plain_copy_fails(
    spark: Any, tws_base: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    base_ckpt, base_in, base_out = tws_base
    code, output = cli("migrate", "relocate", str(base_ckpt), str(tmp_path / "moved" / "ckpt"), "--apply", "--force")
    assert code == 0, output
    shutil.copytree(base_ckpt, tmp_path / "plain" / "ckpt")  # the control: a plain copy, no rewrite
    sides = {d: tmp_path / d / "out" for d in ("moved", "plain")}
    for d in sides.values():
        shutil.copytree(base_out, d)
    old_exists = audit(str(tmp_path / "plain" / "ckpt"), "4.3")  # the copy silently reads the original's files
    outside = [f for f in old_exists.findings if f.rule_id == "STATE-SCHEMA-PATH-OUTSIDE"]
    assert outside and all(f.severity == "warning" for f in outside) and old_exists.verdict.restarts
    # the source goes away (renamed): nothing may still point into it
    hidden = base_ckpt.with_name("ckpt.gone")
    base_ckpt.rename(hidden)
    try:
        # the audit sees what a plain copy does to the schema paths, and that relocate's copy is whole
        moved_report = audit(str(tmp_path / "moved" / "ckpt"), "4.3")
        assert moved_report.verdict.restarts
        assert "STATE-SCHEMA-PATH-OUTSIDE" not in {f.rule_id for f in moved_report.findings}
        predicted = audit(str(tmp_path / "plain" / "ckpt"), "4.3")
        assert predicted.verdict.blocking_rule == "STATE-SCHEMA-PATH-OUTSIDE"
        write_input(base_in, BASE_FILES)
        failure = run_query(spark, tmp_path / "moved" / "ckpt", base_in, sides["moved"])
        assert failure is None, failure
        assert sink_batches(sides["moved"]) == expected_batches(base_in)
        plain = run_query(spark, tmp_path / "plain" / "ckpt", base_in, sides["plain"])
        assert plain is not None and "does not exist" in plain, plain
        assert str(base_ckpt) in plain
        assert predicted.verdict.error is not None and predicted.verdict.error.message in plain
        # ckptfix repairs the plain copy too: its schema paths name a root that is gone, whose
        # state/<op>/_stateSchema/... tail exists in the copy (the failed run added a metadata file)
        fixed = tmp_path / "fixed" / "ckpt"
        code, output = cli("migrate", "relocate", str(tmp_path / "plain" / "ckpt"), str(fixed), "--apply", "--force")
        assert code == 0, output
        assert "state/0/_metadata/v2/" in output
        shutil.copytree(base_out, fixed.parent / "out")
        failure = run_query(spark, fixed, base_in, fixed.parent / "out")
        assert failure is None, failure
        assert sink_batches(fixed.parent / "out") == expected_batches(base_in)
    finally:
        (base_in / f"part-{BASE_FILES:04d}.json").unlink(missing_ok=True)
        if base_ckpt.exists():  # the failed control run mkdirs state/0/_stateSchema/default at the old path
            assert not [p for p in base_ckpt.rglob("*") if p.is_file()]
            shutil.rmtree(base_ckpt)
        hidden.rename(base_ckpt)


def test_moved_input_needs_the_source_log_rewrite(
    spark: Any, tws_base: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    base_ckpt, base_in, base_out = tws_base
    new_in = tmp_path / "input-moved"
    shutil.copytree(base_in, new_in)  # copytree keeps the mtimes (copy2)
    write_input(new_in, BASE_FILES)
    with_rw, without = tmp_path / "with" / "ckpt", tmp_path / "without" / "ckpt"
    code, output = cli(
        "migrate", "relocate", str(base_ckpt), str(with_rw), "--apply", "--force",
        "--input-from", str(base_in), "--input-to", str(new_in),
    )  # fmt: skip
    assert code == 0, output
    code, output = cli("migrate", "relocate", str(base_ckpt), str(without), "--apply", "--force")
    assert code == 0, output
    outs = {d: d.parent / "out" for d in (with_rw, without)}
    for d in outs.values():
        shutil.copytree(base_out, d)
    failure = run_query(spark, with_rw, new_in, outs[with_rw])
    assert failure is None, failure
    assert sink_batches(outs[with_rw]) == expected_batches(new_in)  # batch 3 = file 3 only, counts go on
    # what Spark 4.3 does without the rewrite: on restart the file source replays the last batch's file list
    # from its log, and the old input path is not under the new load path
    failure = run_query(spark, without, new_in, outs[without])
    assert failure is not None and "Wrong basePath" in failure, failure
    assert str(base_in) in failure
    assert sink_batches(outs[without]) == sink_batches(base_out)  # nothing new written


pytestmark = pytest.mark.spark  # starts Spark (checked by tests/spark/plugin.py)
