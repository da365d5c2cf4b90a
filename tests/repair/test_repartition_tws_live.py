"""``state repartition`` of a transformWithState operator (PySpark 4.3, ``transformWithStateInPandas`` with a
ValueState, a ListState, a MapState and event-time timers; RocksDB; the scenario of tests/state/scenarios.py, and the
same with a TTL on every variable, so with Spark's TTL index families), 2 -> 5 partitions, proven three ways on copies
of one checkpoint:

- against Spark's own ``OfflineStateRepartitionRunner``: the same operator metadata v2 file, offset and commit
  files, and Spark's ``statestore`` reader shows the same rows in the same partitions for every state variable
  (flattened or not) and for the registered timers, and every column family (the TTL indexes included) holds the
  same keys in the same partitions;
- against the checkpoint before: the same rows (only ``partition_id`` differs);
- restarted with two more input files next to a never-repartitioned copy: the same output, batch by batch.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ckptfix.cli.main import app
from tests.state import scenarios as S

pytestmark = pytest.mark.spark

AFTER = 5
ENCODING = "spark.sql.streaming.stateStore.encodingFormat"


def _rows(spark: Any, ckpt: Path, options: dict[str, str]) -> list[tuple[str, int]]:
    reader = spark.read.format("statestore")
    for k, v in options.items():
        reader = reader.option(k, v)
    df = reader.load(str(ckpt))
    cols = [c for c in df.columns if c != "partition_id"]
    return sorted((json.dumps([_plain(r[c]) for c in cols], default=str), r["partition_id"]) for r in df.collect())


def _plain(v: Any) -> Any:
    """A collected value with JSON-able keys: rows as lists, maps as sorted [key, value] pairs."""
    if hasattr(v, "__fields__"):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return sorted(([_plain(k), _plain(x)] for k, x in v.items()), key=lambda kv: json.dumps(kv, default=str))
    if isinstance(v, list):
        return [_plain(x) for x in v]
    return v


def _restart(spark: Any, ckpt: Path, inputs: Path, operator: str) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}

    def collect(df: Any, batch_id: int) -> None:
        out[batch_id] = sorted(json.dumps(r.asDict(), default=str) for r in df.collect())

    op = S.OPERATORS[operator]
    with S.session_confs(spark, {**S.COMMON_CONFS, **S.PROVIDERS["rocksdb"]}, S.CONF_KEYS):
        q = op.build(spark, inputs).foreachBatch(collect).option("checkpointLocation", str(ckpt))
        q = q.trigger(availableNow=True).start()
        try:
            assert q.awaitTermination(600)
            assert q.exception() is None, q.exception()
        finally:
            q.stop()
    return out


def _families(ckpt: Path) -> dict[str, list[str]]:
    """Every column family's rows as ckptfix decodes them (partition_id included), the TTL indexes among them."""
    from ckptfix.api import read_state
    from ckptfix.checkpoint import Checkpoint
    from ckptfix.state.schemas import operator_info

    c = Checkpoint.open(str(ckpt))
    names = sorted(operator_info(c, c.state.operators[0]).column_families)
    return {
        n: sorted(
            json.dumps(r, default=str, sort_keys=True) for r in read_state(str(ckpt), as_arrow=False, state_var=n)
        )
        for n in names
    }


@pytest.mark.parametrize("encoding", ["unsaferow", "avro"])
def test_transform_with_state_like_sparks_runner_and_restarts(spark: Any, tmp_path: Path, encoding: str) -> None:
    """``encoding``: the state's ``encodingFormat`` (recorded in the offset log, so only the first run sets it)."""
    operator = "tws"
    with S.session_confs(spark, {ENCODING: encoding}):
        built = S.build(spark, f"{operator}-rocksdb", tmp_path / "w")
    assert f'"{ENCODING}":"{encoding}"' in (built.ckpt / "offsets" / "0").read_text()
    last = built.batches[-1]
    ours, theirs, kept = tmp_path / "ours", tmp_path / "theirs", tmp_path / "kept"
    for d in (ours, theirs, kept):
        shutil.copytree(built.ckpt, d)

    result = CliRunner().invoke(
        app, ["state", "repartition", str(ours), "--partitions", str(AFTER), "--apply", "--idle-seconds", "0"]
    )
    assert result.exit_code == 0, result.output
    spark._streamingCheckpointManager.repartition(str(theirs), AFTER, True)

    n = last + 1
    for rel in (f"offsets/{n}", f"commits/{n}", f"state/0/_metadata/v2/{n}"):
        assert (ours / rel).read_bytes() == (theirs / rel).read_bytes(), rel
    for options in S.TWS_OPTIONS:
        mine = _rows(spark, ours, options)
        assert mine, options
        assert mine == _rows(spark, theirs, options), options
        assert sorted(r for r, _ in mine) == sorted(r for r, _ in _rows(spark, kept, options)), options
        assert {p for _, p in mine} <= set(range(AFTER))
    assert _families(ours) == _families(theirs)

    S.write_inputs(S.OPERATORS[operator], tmp_path / "w" / "input", batches=S.BATCHES + 2)
    out_ours = _restart(spark, ours, tmp_path / "w" / "input", operator)
    out_kept = _restart(spark, kept, tmp_path / "w" / "input", operator)
    assert sorted(out_ours) == [n + 1, n + 2] and sorted(out_kept) == [n, n + 1]
    assert [out_ours[b] for b in sorted(out_ours)] == [out_kept[b] for b in sorted(out_kept)]
    assert any(out_ours.values())


TTL_FAMILIES = ("$ttl_cnt", "$ttl_events", "$ttl_tags", "$min_events", "$count_events")


def _run_ttl(spark: Any, ckpt: Path, inputs: Path) -> list[str]:
    """Run the TTL query over what is in ``inputs`` and stop (processing time: Spark runs a no-data batch after
    every batch, so availableNow never ends); its output rows, sorted."""
    rows: list[str] = []

    def collect(df: Any, batch_id: int) -> None:
        rows.extend(json.dumps(r.asDict(), default=str) for r in df.collect())

    op = S.OPERATORS["tws_ttl"]
    with S.session_confs(spark, {**S.COMMON_CONFS, **S.PROVIDERS["rocksdb"]}, S.CONF_KEYS):
        q = op.build(spark, inputs).foreachBatch(collect).option("checkpointLocation", str(ckpt)).start()
        try:
            q.processAllAvailable()
            assert q.exception() is None, q.exception()
        finally:
            q.stop()
    return sorted(rows)


def test_ttl_families_like_sparks_runner_and_restarts(spark: Any, tmp_path: Path) -> None:
    """Every variable with a TTL: Spark keeps ``$ttl_<var>`` indexes (expiry + the element's key), and for a
    ListState ``$min_``/``$count_`` keyed by the grouping key. Each goes where Spark's runner puts it."""
    inputs, ckpt = tmp_path / "input", tmp_path / "ckpt"
    S.write_inputs(S.OPERATORS["tws_ttl"], inputs)
    _run_ttl(spark, ckpt, inputs)
    # stopped in a no-data batch: drop it as the refusal says (Spark's runner refuses it too, LAST_BATCH_FAILED)
    last = max(int(p.name) for p in (ckpt / "commits").iterdir() if p.name.isdigit())
    if (ckpt / "offsets" / str(last + 1)).exists():
        cmd = ["rollback", str(ckpt), "--to-batch", str(last), "--apply", "--idle-seconds", "0"]
        result = CliRunner().invoke(app, cmd)
        assert result.exit_code == 0, result.output
    ours, theirs, kept = tmp_path / "ours", tmp_path / "theirs", tmp_path / "kept"
    for d in (ours, theirs, kept):
        shutil.copytree(ckpt, d, ignore=shutil.ignore_patterns(".ckptfix*"))

    result = CliRunner().invoke(
        app, ["state", "repartition", str(ours), "--partitions", str(AFTER), "--apply", "--idle-seconds", "0"]
    )
    assert result.exit_code == 0, result.output
    spark._streamingCheckpointManager.repartition(str(theirs), AFTER, True)
    for options in S.TWS_OPTIONS[:-1]:  # no timers in this variant
        mine = _rows(spark, ours, options)
        assert mine, options
        assert mine == _rows(spark, theirs, options), options
        assert sorted(r for r, _ in mine) == sorted(r for r, _ in _rows(spark, kept, options)), options
    families = _families(ours)
    assert families == _families(theirs)
    assert all(families[f] for f in TTL_FAMILIES), {f: len(families.get(f, [])) for f in TTL_FAMILIES}
    assert {json.loads(r)["partition_id"] for f in TTL_FAMILIES for r in families[f]} <= set(range(AFTER))

    S.write_inputs(S.OPERATORS["tws_ttl"], inputs, batches=S.BATCHES + 2)
    out_ours, out_kept = _run_ttl(spark, ours, inputs), _run_ttl(spark, kept, inputs)
    assert out_ours and out_ours == out_kept
