"""``state repartition --sink OUT``: a stateful query that writes to a file sink, repartitioned, restarted in real
Spark (the session fixture's 4.x) past the sink log's next compaction.

The query: ``dropDuplicates(key)`` over a JSON file source (one file per batch), appended to a JSON file sink, the
sink's log compacting every 3 batches (``spark.sql.streaming.fileSink.log.compactInterval=3``). After the
repartition batch N:

* without ``--sink`` the sink's log has no entry for N, and the restart fails when the log compacts across N (the
  failure the docs warned about, now shown here);
* with ``--sink`` the restart passes the compaction and the output path holds every distinct key exactly once.

Two shapes of N: a plain entry (``_spark_metadata/4``: 4 batches ran, 2.compact exists) and a compaction entry
(``_spark_metadata/5.compact``: 5 batches ran, so N = 5 is a compaction batch under interval 3 and the entry holds
the files of batches 2..4). The first case also stops between the two plans (the checkpoint repartitioned without
``--sink``), then runs the command with ``--sink``, which plans the sink's entry alone.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ckptfix.cli.main import app
from tests.state.scenarios import session_confs
from tests.support.settle import settle

pytestmark = pytest.mark.spark

CONFS = {
    "spark.sql.shuffle.partitions": "3",
    "spark.sql.streaming.fileSink.log.compactInterval": "3",
    "spark.sql.streaming.stateStore.providerClass": (
        "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
    ),
}
KEYS = list(CONFS)


def write_file(input_dir: Path, i: int) -> None:
    """Input file i: keys k{i}, k{i+1} (each key but the first is seen twice: the dedup state matters)."""
    rows = [{"key": f"k{i}", "v": i}, {"key": f"k{i + 1}", "v": i}]
    (input_dir / f"part-{i:04d}.json").write_text("".join(json.dumps(r) + "\n" for r in rows))


def run(spark: Any, ckpt: Path, input_dir: Path, out: Path) -> Exception | None:
    query = (
        spark.readStream.schema("key STRING, v LONG")
        .option("maxFilesPerTrigger", 1)
        .json(str(input_dir))
        .dropDuplicates(["key"])
        .writeStream.format("json")
        .option("path", str(out))
        .option("checkpointLocation", str(ckpt))
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination(180)
    except Exception as exc:  # the StreamingQueryException of a failed batch
        return exc
    return query.exception()


def keys_in(spark: Any, out: Path) -> list[str]:
    return sorted(r.key for r in spark.read.json(str(out)).collect())


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


@pytest.mark.parametrize(("batches", "entry"), [(4, "4"), (5, "5.compact")])
def test_the_sink_gets_its_entry_and_passes_the_next_compaction(
    spark: Any, tmp_path: Path, batches: int, entry: str
) -> None:
    input_dir = tmp_path / "input"
    input_dir.mkdir()
    for i in range(batches):
        write_file(input_dir, i)
    roots = {with_sink: tmp_path / ("with" if with_sink else "without") for with_sink in (False, True)}
    for root in roots.values():  # each its own run: a file sink's log names its files by absolute path
        with session_confs(spark, CONFS, KEYS):
            assert run(spark, root / "ckpt", input_dir, root / "out") is None
        settle(spark, root)
        names = sorted(p.name for p in (root / "out" / "_spark_metadata").iterdir() if not p.name.startswith("."))
        assert names == ["0", "1", "2.compact", "3"] + (["4"] if batches == 5 else [])
    for i in range(batches, batches + 4):  # the restart's input: 4 more batches, across the next compaction
        write_file(input_dir, i)
    want = sorted({f"k{j}" for i in range(batches + 4) for j in (i, i + 1)})
    results = {}
    for with_sink, root in roots.items():
        ckpt, out = root / "ckpt", root / "out"
        args = ["state", "repartition", str(ckpt), "--partitions", "5", "--apply", "--force"]
        if with_sink and batches == 4:  # as if a run stopped between its two plans: the checkpoint's done first
            assert invoke(*args).exit_code == 0
        done = invoke(*args, *(["--sink", str(out), "--sink-compact-interval", "3", "-f", "json"] if with_sink else []))
        assert done.exit_code == 0, done.output
        if with_sink:
            doc = json.loads(done.stdout)
            assert doc["sink_applied_run"]
            # the same command again writes only what is missing: the sink's entry
            assert (doc["applied_run"] is None) == (batches == 4) and (doc["plan"]["actions"] == []) == (batches == 4)
            (action,) = doc["sink_plan"]["actions"]
            assert action["path"] == f"_spark_metadata/{entry}"
            written = (out / "_spark_metadata" / entry).read_text().splitlines()
            assert written[0] == "v1"
            if entry.endswith(".compact"):  # the files of batches 2..4, as Spark's compaction lists them
                listed = [
                    json.loads(ln)["path"]
                    for name in ("2.compact", "3", "4")
                    for ln in (out / "_spark_metadata" / name).read_text().splitlines()[1:]
                ]
                assert [json.loads(ln)["path"] for ln in written[1:]] == listed
            else:
                assert written == ["v1"]
        with session_confs(spark, CONFS, KEYS):
            results[with_sink] = run(spark, ckpt, input_dir, out)
        settle(spark, root)
        if with_sink:
            assert results[True] is None, results[True]
            assert keys_in(spark, out) == want  # every distinct key exactly once
    assert results[False] is not None and "_spark_metadata" in str(results[False]), results[False]
