"""``state delete`` / ``state put`` proven on real Spark 4.x: the edit is what Spark loads on restart.

Per provider (HDFS; RocksDB; RocksDB + changelog checkpointing) the ``groupBy(key).agg(count, sum)`` query of
``test_rebuild_live`` runs 5 micro-batches (one JSON file each, 2 shuffle partitions). On copies of that
checkpoint:

* delete key ``a`` (through the CLI with ``--keys``, and with ``--where``): Spark's ``statestore`` reader shows the
  state computed here from the input files without ``a``; after 2 more input files the query's complete output
  has ``a`` counted from the new files only, every other key from all files;
* a window aggregation (HDFS): ``--where "window.start = '...' AND key = 'b'"`` over the struct key, and a
  seeded window (a struct key of timestamps) that the later input fills: counted from the seed;
* put: key ``a`` gets a new (count, sum) and key ``e``, which only the later files hold, is seeded: the reader
  shows exactly those values, and after more input both go on from them (a seeded key in the wrong partition or
  with other bytes would be counted from zero, or show up twice).

Expected values come from the input rows (``file_rows``), never from ckptfix.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ckptfix.repair import engine
from ckptfix.repair.surgery import plan_state_delete, plan_state_put
from ckptfix.storage import Location
from tests.spark.harness import await_available_now
from tests.state import scenarios
from tests.state.test_rebuild_live import (
    BASE_FILES,
    CONF_KEYS,
    HDFS,
    MORE_FILES,
    PROVIDER,
    SHUFFLE,
    file_rows,
    run_query,
    spark_state,
    write_inputs,
)
from tests.state.test_rebuild_live import bases as bases  # noqa: F401 - the module's base checkpoints (a fixture)

pytestmark = pytest.mark.spark

PROVIDERS = ["hdfs", "rocksdb", "rocksdb_cl"]


def aggregate(files: range, keys: set[str] | None = None) -> dict[str, tuple[int, int]]:
    """key -> (count, sum) over the given input files (optionally only these keys)."""
    out: dict[str, tuple[int, int]] = {}
    for i in files:
        for row in file_rows(i):
            if keys is None or row["key"] in keys:
                n, s = out.get(row["key"], (0, 0))
                out[row["key"]] = (n + 1, s + row["value"])
    return out


def apply(plan: Any, ckpt: Path) -> str:
    return engine.apply(plan, Location(str(ckpt)), Location(str(ckpt / "_ckptfix")), idle_seconds=0)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ckptfix.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "200"},
    )


def restart_and_check(spark: Any, provider: str, ckpt: Path, inputs: Path, expect: Any) -> None:
    """Two more files; ``expect(batch)`` is the complete output after each new batch."""
    write_inputs(inputs, BASE_FILES, MORE_FILES)
    try:
        outputs = run_query(spark, provider, ckpt, inputs)
    except RuntimeError as exc:
        pytest.fail(f"[{provider}] Spark rejected the edited checkpoint:\n{exc}")
    assert sorted(outputs) == list(range(BASE_FILES, BASE_FILES + MORE_FILES)), "no batch may be re-run"
    for batch, rows in outputs.items():
        assert rows == expect(batch), f"[{provider}] batch {batch}"
    assert spark_state(spark, provider, ckpt) == expect(BASE_FILES + MORE_FILES - 1)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_deleted_key_starts_again_from_new_input(spark: Any, bases: Any, provider: str, tmp_path: Path) -> None:
    base = bases(provider)
    ckpt, inputs = base.copy(tmp_path / "deleted")
    before = aggregate(range(BASE_FILES))
    assert "a" in before and spark_state(spark, provider, ckpt) == before

    part_a = partition_of(spark, ckpt, "a")
    keys = tmp_path / "keys.jsonl"
    keys.write_text(json.dumps({"key": {"key": "a"}}) + "\n")
    dry = cli("state", "delete", str(ckpt), "--keys", str(keys))
    assert dry.returncode == 0, dry.stderr
    assert "STATE-DELETE" in dry.stdout and "dry run: nothing written" in dry.stderr
    assert spark_state(spark, provider, ckpt) == before, "a dry run writes nothing"
    done = cli("state", "delete", str(ckpt), "--keys", str(keys), "--apply", "--idle-seconds", "0", "-f", "json")
    assert done.returncode == 0, done.stderr + done.stdout
    doc = json.loads(done.stdout)
    written = [a["path"] for a in doc["plan"]["actions"] if a["op"] == "write"]
    suffix = ".snapshot" if provider == "hdfs" else ".zip"
    assert [w for w in written if w.endswith(suffix)] == [f"state/0/{part_a}/{BASE_FILES}{suffix}"]

    without_a = {k: v for k, v in before.items() if k != "a"}
    assert spark_state(spark, provider, ckpt) == without_a

    def expect(batch: int) -> dict[str, tuple[int, int]]:
        out = aggregate(range(batch + 1))
        out.update(aggregate(range(BASE_FILES, batch + 1), {"a"}))
        return out

    restart_and_check(spark, provider, ckpt, inputs, expect)


def partition_of(spark: Any, ckpt: Path, key: str) -> int:
    """The partition Spark stored ``key`` in, as Spark's own reader tells."""
    rows = spark.read.format("statestore").load(str(ckpt)).collect()
    return int(next(r["partition_id"] for r in rows if r["key"][0] == key))


@pytest.mark.parametrize("provider", PROVIDERS)
def test_delete_where_leaves_other_partitions_alone(spark: Any, bases: Any, provider: str, tmp_path: Path) -> None:
    ckpt, _ = bases(provider).copy(tmp_path / "where")
    part_a = partition_of(spark, ckpt, "a")
    result = plan_state_delete(str(ckpt), where="key IN ('a', 'b') AND key != 'b'")
    assert [(s.partition, s.deleted) for s in result.stores] == [(part_a, 1)]
    apply(result.plan, ckpt)
    assert spark_state(spark, provider, ckpt) == {k: v for k, v in aggregate(range(BASE_FILES)).items() if k != "a"}


@pytest.mark.parametrize("provider", PROVIDERS)
def test_put_updates_and_seeds_keys(spark: Any, bases: Any, provider: str, tmp_path: Path) -> None:
    ckpt, inputs = bases(provider).copy(tmp_path / "put")
    before = aggregate(range(BASE_FILES))
    assert "e" not in before, "e only appears in the later files"
    rows = tmp_path / "rows.jsonl"
    rows.write_text(
        json.dumps({"key": {"key": "a"}, "value": {"count": 1000, "sum": 7}})
        + "\n"
        + json.dumps({"key": {"key": "e"}, "value": {"count": 100, "sum": 1000}})
        + "\n"
    )
    result = plan_state_put(str(ckpt), rows_file=str(rows))
    assert sum(s.updated for s in result.stores) == 1 and sum(s.inserted for s in result.stores) == 1
    apply(result.plan, ckpt)
    assert spark_state(spark, provider, ckpt) == {**before, "a": (1000, 7), "e": (100, 1000)}

    def expect(batch: int) -> dict[str, tuple[int, int]]:
        out = aggregate(range(batch + 1))
        later = aggregate(range(BASE_FILES, batch + 1), {"a", "e"})
        for key, (n0, s0) in (("a", (1000, 7)), ("e", (100, 1000))):
            n, s = later.get(key, (0, 0))
            out[key] = (n0 + n, s0 + s)
        return out

    restart_and_check(spark, provider, ckpt, inputs, expect)
    # the query ran on the edit: undoing it now would leave the put in the versions Spark wrote since (hunt 11, F5:
    # undo said every file was restored, and the state kept the put); refused, nothing changed
    files = {p.relative_to(ckpt): p.read_bytes() for p in ckpt.rglob("*") if p.is_file() and "_ckptfix" not in p.parts}
    undone = cli("undo", str(ckpt), "--idle-seconds", "0")
    assert undone.returncode == 2 and "the query ran after the run" in undone.stderr, undone.stderr
    assert len(undone.stderr.strip().splitlines()) == 1, undone.stderr
    now = {p.relative_to(ckpt): p.read_bytes() for p in ckpt.rglob("*") if p.is_file() and "_ckptfix" not in p.parts}
    assert now == files


def test_undo_restores_every_byte(spark: Any, bases: Any, tmp_path: Path) -> None:
    ckpt, _ = bases("rocksdb_cl").copy(tmp_path / "undo")
    before = {p.relative_to(ckpt): p.read_bytes() for p in ckpt.rglob("*") if p.is_file()}
    apply(plan_state_delete(str(ckpt), where="key = 'a'").plan, ckpt)
    engine.undo(Location(str(ckpt)), Location(str(ckpt / "_ckptfix")), force=True)
    after = {p.relative_to(ckpt): p.read_bytes() for p in ckpt.rglob("*") if p.is_file() and "_ckptfix" not in p.parts}
    assert after == before
    assert spark_state(spark, "rocksdb_cl", ckpt) == aggregate(range(BASE_FILES))


# ------------------------------------------------------------------------------------------ a window aggregation

HOUR0, HOUR1 = "2024-01-01T00:00:00Z", "2024-01-01T01:00:00Z"
EPOCH0 = 1_704_067_200  # HOUR0 in seconds


def window_rows(i: int) -> list[dict[str, Any]]:
    """Files 0..2: keys a and b in hour 0; files 3..4 also key a in hour 1 (a window the state has not seen)."""
    rows = [{"ts": HOUR0, "key": k} for k in ("a", "b", "a")]
    return rows + ([{"ts": "2024-01-01T01:30:00Z", "key": "a"}] if i >= 3 else [])


def run_windows(spark: Any, ckpt: Path, inputs: Path, files: int) -> dict[int, dict[tuple[int, str], int]]:
    from pyspark.sql import functions as F

    inputs.mkdir(parents=True, exist_ok=True)
    for i in range(files):
        path = inputs / f"part-{i:04d}.json"
        if not path.exists():
            tmp = inputs / f".part-{i:04d}.tmp"
            tmp.write_text("".join(json.dumps(r) + "\n" for r in window_rows(i)))
            os.utime(tmp, (1_700_000_000 + 60 * i,) * 2)
            tmp.rename(path)
    out: dict[int, dict[tuple[int, str], int]] = {}

    def sink(df: Any, batch_id: int) -> None:
        rows = df.select(F.col("window.start").cast("long").alias("s"), "key", "count").collect()
        out[batch_id] = {(r["s"], r["key"]): r["count"] for r in rows}

    with scenarios.session_confs(spark, {PROVIDER: HDFS, SHUFFLE: "2"}, list(CONF_KEYS)):
        counts = (
            spark.readStream.format("json")
            .schema("ts TIMESTAMP, key STRING")
            .option("maxFilesPerTrigger", 1)
            .load(str(inputs))
            .groupBy(F.window("ts", "1 hour"), "key")
            .count()
        )
        query = (
            counts.writeStream.outputMode("complete")
            .foreachBatch(sink)
            .option("checkpointLocation", str(ckpt))
            .trigger(availableNow=True)
            .start()
        )
        await_available_now(query, 240)
    return out


def test_window_keys_where_on_a_struct_field_and_a_seeded_window(spark: Any, tmp_path: Path) -> None:
    ckpt, inputs = tmp_path / "ckpt", tmp_path / "input"
    first = run_windows(spark, ckpt, inputs, 3)
    assert first[2] == {(EPOCH0, "a"): 6, (EPOCH0, "b"): 3}
    deleted = plan_state_delete(str(ckpt), where=f"window.start = '{HOUR0}' AND key = 'b'")
    assert sum(s.deleted for s in deleted.stores) == 1
    apply(deleted.plan, ckpt)
    rows = tmp_path / "rows.jsonl"
    seeded = {"window": {"start": HOUR1, "end": "2024-01-01T02:00:00Z"}, "key": "a"}
    rows.write_text(json.dumps({"key": seeded, "value": {"count": 100}}) + "\n")
    put = plan_state_put(str(ckpt), rows_file=str(rows))
    assert sum(s.inserted for s in put.stores) == 1
    apply(put.plan, ckpt)
    more = run_windows(spark, ckpt, inputs, 5)
    assert sorted(more) == [3, 4], "no batch may be re-run"
    # (hour 0, a): every file; (hour 0, b): files 3..4 only; (hour 1, a): the seed + files 3..4
    assert more[3] == {(EPOCH0, "a"): 8, (EPOCH0, "b"): 1, (EPOCH0 + 3600, "a"): 101}
    assert more[4] == {(EPOCH0, "a"): 10, (EPOCH0, "b"): 2, (EPOCH0 + 3600, "a"): 102}


def test_float_and_nan_keys_are_edited_as_state_read_prints_them(spark: Any, tmp_path: Path) -> None:
    """Hunt 11, F3: a FLOAT key column prints as 0.33333334 (the float32), and NaN as "NaN"; `state delete --keys`
    with those very lines said the keys were not in the state, and a put of such a key inserted it a second time.
    Every key of a groupBy over a float and a double column (NaN included) is found from its `state read` line; a
    put updates, and Spark's reader shows the deleted key gone and the put value."""
    ckpt, inputs = tmp_path / "ckpt", tmp_path / "input"
    inputs.mkdir()
    rows = [{"f": f, "d": d} for f, d in [(1 / 3, 0.1), (2 / 3, 0.1), (1 / 3, 0.1), (0.5, None), (None, 2.0)]]
    (inputs / "part-0.json").write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"f": "NaN", "d": "NaN"}\n')
    from pyspark.sql import functions as F

    df = (
        spark.readStream.schema("f STRING, d STRING")
        .json(str(inputs))
        .select(F.col("f").cast("float").alias("f"), F.col("d").cast("double").alias("d"))
        .groupBy("f", "d")
        .count()
    )
    query = (
        df.writeStream.format("noop")
        .outputMode("update")
        .option("checkpointLocation", str(ckpt))
        .trigger(availableNow=True)
        .start()
    )
    await_available_now(query, 240)
    read = cli("state", "read", str(ckpt), "-f", "jsonl")
    assert read.returncode == 0, read.stderr
    lines = read.stdout.splitlines()
    assert len(lines) == 5 and any('"NaN"' in line for line in lines), lines
    for i, line in enumerate(lines):
        keys = tmp_path / f"key{i}.jsonl"
        keys.write_text(line + "\n")
        result = plan_state_delete(str(ckpt), keys_file=str(keys))
        assert sum(s.deleted for s in result.stores) == 1, line
    third = next(line for line in lines if "0.33333334" in line)
    apply(plan_state_delete(str(ckpt), where="f = 0.33333334 AND d = 0.1").plan, ckpt)
    nan = json.loads(next(line for line in lines if '"NaN"' in line))
    put = tmp_path / "put.jsonl"
    put.write_text(json.dumps({"key": nan["key"], "value": {"count": 100}}) + "\n")
    result = plan_state_put(str(ckpt), rows_file=str(put))
    assert [(s.updated, s.inserted) for s in result.stores if s.updated or s.inserted] == [(1, 0)]
    apply(result.plan, ckpt)
    state = {
        (r["key"]["f"], r["key"]["d"]): r["value"]["count"]
        for r in spark.read.format("statestore").load(str(ckpt)).collect()
    }
    assert len(state) == 4 and not any(f is not None and abs(f - 1 / 3) < 1e-6 for f, _ in state), (third, state)
    assert [c for (f, _), c in state.items() if f is not None and f != f] == [100]
