"""``ckptfix state repartition`` proven with real Spark 4.3 (local[2]) for an aggregation, dropDuplicates, a
stream-stream join (its four stores), applyInPandasWithState and a session window, on HDFS, RocksDB and RocksDB with
changelog checkpointing, and with row checksums (``rowChecksum.enabled``) on HDFS and RocksDB:

- a query runs 3 batches with 4 partitions; a copy of its checkpoint is the run that never repartitions;
- ``ckptfix state repartition --partitions M --apply`` (CLI, engine: backup + journal) moves the state;
- Spark's ``statestore`` reader then returns the same (key, value) rows as before, and every ``partition_id``
  equals ``pmod(hash(partitioning columns), M)`` computed by Spark SQL over the reader's own key columns;
- both checkpoints get 2 more input files and restart: the repartitioned one runs with M tasks per stateful
  stage, its sink receives exactly the rows the never-repartitioned run's sink receives, batch by batch, and its
  final state equals the other's;
For RocksDB, Spark's own ``OfflineStateRepartitionRunner`` (PySpark 4.3: ``spark._streamingCheckpointManager``)
runs on a third copy: the same offset and commit files byte for byte, the same rows in the same partitions.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ckptfix.cli.main import app
from tests.state.scenarios import HDFS, ROCKSDB, session_confs
from tests.support.settle import settle

pytestmark = pytest.mark.spark

ROW_CHECKSUM = "spark.sql.streaming.stateStore.rowChecksum.enabled"
FORMAT_V2 = {"spark.sql.streaming.stateStore.checkpointFormatVersion": "2"}  # not in the offset log: read with it
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
PROVIDERS = {
    "hdfs": {"spark.sql.streaming.stateStore.providerClass": HDFS},
    "rocksdb": {
        "spark.sql.streaming.stateStore.providerClass": ROCKSDB,
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "false",
    },
    "rocksdb_cl": {
        "spark.sql.streaming.stateStore.providerClass": ROCKSDB,
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
    },
    "hdfs_rc": {"spark.sql.streaming.stateStore.providerClass": HDFS, ROW_CHECKSUM: "true"},
    "rocksdb_rc": {
        "spark.sql.streaming.stateStore.providerClass": ROCKSDB,
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        ROW_CHECKSUM: "true",
    },
    "rocksdb_v2": {
        "spark.sql.streaming.stateStore.providerClass": ROCKSDB,
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        **FORMAT_V2,
    },
}
CONF_KEYS = sorted({k for c in PROVIDERS.values() for k in c} | {"spark.sql.shuffle.partitions"})
KEYS = ["alpha", "beta", "γ", "", "k 5", "\U0001f600", "zeta", "eta", "theta", "iota", "kappa", "lambda", "mu"]
BEFORE = 4
SINK: dict[str, dict[int, list[str]]] = {}


def _write_input(root: Path, batch: int) -> None:
    for side, salt in (("left", 0), ("right", 7)):
        d = root / side
        d.mkdir(parents=True, exist_ok=True)
        rows = [
            {
                "key": KEYS[(batch * 5 + r * 3 + salt) % len(KEYS)],
                "grp": (batch + r) % 3,
                "amount": batch * 100 + r,
                "ts": f"2024-01-01T00:{batch * 5 + r % 5:02d}:00Z",
            }
            for r in range(12)
        ]
        path = d / f"part-{batch:04d}.json"
        path.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in rows))
        os.utime(path, (1_700_000_000 + 60 * batch,) * 2)


def _source(spark: Any, root: Path, side: str) -> Any:
    from pyspark.sql import functions as F

    df = (
        spark.readStream.format("json")
        .schema("key STRING, grp INT, amount LONG, ts STRING")
        .option("maxFilesPerTrigger", 1)
        .load(str(root / side))
    )
    return df.withColumn("ts", F.col("ts").cast("timestamp"))


def _query(kind: str, spark: Any, root: Path) -> tuple[Any, str]:
    """(streaming DataFrame, output mode)."""
    from pyspark.sql import functions as F

    left = _source(spark, root, "left")
    if kind == "agg":
        return left.groupBy("key", "grp").agg(F.count("*").alias("cnt"), F.sum("amount").alias("total")), "update"
    if kind == "dedup":
        return left.dropDuplicates(["key", "grp"]), "append"
    if kind == "join":
        right = _source(spark, root, "right").select(
            F.col("key").alias("rkey"), F.col("grp").alias("rgrp"), F.col("amount").alias("ramount")
        )
        return left.join(right, F.expr("key = rkey AND grp = rgrp")), "append"
    if kind == "apiws":
        return left.groupBy("key", "grp").applyInPandasWithState(
            _count_state, "key STRING, grp INT, cnt LONG, total LONG", "cnt LONG, total LONG", "update", "NoTimeout"
        ), "update"
    if kind == "session":
        df = left.withWatermark("ts", "2 minutes")
        out = df.groupBy(F.session_window("ts", "1 minute"), "key").agg(F.count("*").alias("cnt"))
        return out, "append"
    raise AssertionError(kind)


def _count_state(key: tuple[Any, ...], pdfs: Any, state: Any) -> Any:
    import pandas as pd

    cnt, total = state.get if state.exists else (0, 0)
    for pdf in pdfs:
        cnt += len(pdf)
        total += int(pdf["amount"].sum())
    state.update((cnt, total))
    yield pd.DataFrame({"key": [key[0]], "grp": [key[1]], "cnt": [cnt], "total": [total]})


def _run(spark: Any, kind: str, provider: str, root: Path, ckpt: Path, name: str, partitions: int) -> None:
    def collect(df: Any, batch_id: int) -> None:
        SINK.setdefault(name, {})[batch_id] = sorted(json.dumps(r.asDict(), default=str) for r in df.collect())

    with session_confs(spark, {**PROVIDERS[provider], "spark.sql.shuffle.partitions": str(partitions)}, CONF_KEYS):
        df, mode = _query(kind, spark, root)
        q = (
            df.writeStream.foreachBatch(collect)
            .outputMode(mode)
            .option("checkpointLocation", str(ckpt))
            .trigger(availableNow=True)
            .start()
        )
        try:
            assert q.awaitTermination(600)
            assert q.exception() is None, q.exception()
        finally:
            q.stop()
    settle(spark, ckpt)  # Spark's maintenance thread writes into the checkpoint after the query stopped


def _store_names(kind: str) -> list[str]:
    if kind == "join":
        return [f"{s}-{t}" for s in ("left", "right") for t in ("keyToNumValues", "keyWithIndexToValue")]
    return ["default"]


def _state(spark: Any, ckpt: Path, store: str, batch: int | None = None) -> list[tuple[str, str, int]]:
    """(key json, value json, partition_id) per row of Spark's statestore reader."""
    reader = spark.read.format("statestore").option("storeName", store)
    if batch is not None:
        reader = reader.option("batchId", batch)
    rows = reader.load(str(ckpt)).collect()
    return sorted(
        (json.dumps(r["key"].asDict(), default=str), json.dumps(r["value"].asDict(), default=str), r["partition_id"])
        for r in rows
    )


def _spark_placement(spark: Any, ckpt: Path, store: str, partitions: int) -> list[tuple[int, int]]:
    """(partition_id, pmod(hash(partitioning columns), M)) per row, both from Spark."""
    from pyspark.sql import functions as F

    df = spark.read.format("statestore").option("storeName", store).load(str(ckpt))
    names = df.schema["key"].dataType.names
    cols = names[:-1] if store.endswith("keyWithIndexToValue") else [n for n in names if n != "sessionStartTime"]
    placed = F.pmod(F.hash(*[F.col(f"key.{c}") for c in cols]), F.lit(partitions))
    return [(r[0], r[1]) for r in df.select("partition_id", placed).collect()]


def _digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "_ckptfix" not in p.parts
    }


CASES = [
    ("agg", "hdfs", 8),
    ("agg", "rocksdb", 2),
    ("dedup", "hdfs", 2),
    ("dedup", "rocksdb_cl", 8),
    ("join", "hdfs", 3),
    ("join", "rocksdb", 8),
    ("apiws", "hdfs", 5),
    ("apiws", "rocksdb_cl", 2),
    ("session", "rocksdb", 3),
    ("agg", "hdfs_rc", 3),
    ("join", "rocksdb_rc", 5),
    ("agg", "rocksdb_v2", 8),
    ("join", "rocksdb_v2", 3),
]


@pytest.mark.parametrize(("kind", "provider", "after"), CASES, ids=[f"{k}-{p}-{BEFORE}to{m}" for k, p, m in CASES])
def test_repartition_restarts_with_the_same_state_and_output(
    spark: Any, tmp_path: Path, kind: str, provider: str, after: int
) -> None:
    with session_confs(spark, FORMAT_V2 if provider.endswith("_v2") else {}, CONF_KEYS):
        _repartition_and_restart(spark, tmp_path, kind, provider, after)


def _repartition_and_restart(spark: Any, tmp_path: Path, kind: str, provider: str, after: int) -> None:
    root = tmp_path / "input"
    for b in range(3):
        _write_input(root, b)
    moved, kept = tmp_path / "moved", tmp_path / "kept"
    tag = f"{kind}-{provider}-{after}-{time.time_ns()}"
    _run(spark, kind, provider, root, moved, f"first-{tag}", BEFORE)
    shutil.copytree(moved, kept)
    stores = _store_names(kind)
    before = {s: _state(spark, moved, s) for s in stores}
    assert all(before[s] for s in stores), "the query kept no state"

    result = CliRunner().invoke(
        app, ["state", "repartition", str(moved), "--partitions", str(after), "--apply", "--idle-seconds", "0"]
    )
    assert result.exit_code == 0, result.output
    assert "STATE-REPARTITION" in result.output

    for s in stores:
        now = _state(spark, moved, s)
        assert [(k, v) for k, v, _ in now] == [(k, v) for k, v, _ in before[s]], s
        assert {p for *_, p in now} <= set(range(after))
        placed = _spark_placement(spark, moved, s, after)
        assert placed and all(pid == want for pid, want in placed), (s, placed[:5])

    for b in range(3, 5):
        _write_input(root, b)
    _run(spark, kind, provider, root, moved, f"moved-{tag}", BEFORE)  # the session's count is overridden by Spark
    _run(spark, kind, provider, root, kept, f"kept-{tag}", BEFORE)
    out_moved, out_kept = SINK[f"moved-{tag}"], SINK[f"kept-{tag}"]
    assert (sorted(out_moved), sorted(out_kept)) == ([4, 5], [3, 4])
    assert [out_moved[b] for b in sorted(out_moved)] == [out_kept[b] for b in sorted(out_kept)]
    assert any(out_moved.values()), "the new input produced no output"
    for batch in (3, 5):
        offsets = json.loads((moved / "offsets" / str(batch)).read_text().splitlines()[1])
        assert offsets["conf"]["spark.sql.shuffle.partitions"] == str(after)
    for s in stores:
        final_moved, final_kept = _state(spark, moved, s), _state(spark, kept, s)
        assert [(k, v) for k, v, _ in final_moved] == [(k, v) for k, v, _ in final_kept], s
        assert all(pid == want for pid, want in _spark_placement(spark, moved, s, after))


@pytest.mark.parametrize("provider", ["rocksdb", "rocksdb_cl", "rocksdb_v2"])
def test_same_result_as_sparks_own_runner(spark: Any, tmp_path: Path, provider: str) -> None:
    with session_confs(spark, FORMAT_V2 if provider == "rocksdb_v2" else {}, CONF_KEYS):
        _compare_with_runner(spark, tmp_path, provider)


def _compare_with_runner(spark: Any, tmp_path: Path, provider: str) -> None:
    root = tmp_path / "input"
    for b in range(3):
        _write_input(root, b)
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    _run(spark, "agg", provider, root, ours, f"runner-{provider}-{time.time_ns()}", BEFORE)
    shutil.copytree(ours, theirs)
    before = _digest(ours)

    t0 = time.perf_counter()
    result = CliRunner().invoke(
        app, ["state", "repartition", str(ours), "--partitions", "6", "--apply", "--idle-seconds", "0"]
    )
    ours_s = time.perf_counter() - t0
    assert result.exit_code == 0, result.output
    t0 = time.perf_counter()
    spark._streamingCheckpointManager.repartition(str(theirs), 6, True)
    theirs_s = time.perf_counter() - t0
    print(f"\nrepartition 4 -> 6 ({provider}): ckptfix {ours_s:.2f}s, Spark's runner {theirs_s:.2f}s")

    for rel in ("offsets/3", "commits/3"):  # checkpoint format v2: the unique ids are new on each side
        assert UUID.sub("*", (ours / rel).read_text()) == UUID.sub("*", (theirs / rel).read_text()), rel
    assert _state(spark, ours, "default") == _state(spark, theirs, "default")
    new_ours = {r for r in set(_digest(ours)) - set(before) if not r.startswith("_ckptfix") and not r.endswith(".crc")}
    new_theirs = {r for r in set(_digest(theirs)) - set(before) if not r.endswith(".crc")}

    def shape(rels: set[str]) -> list[str]:
        return sorted(r.split("/SSTs/")[0] + "/SSTs/*" if "/SSTs/" in r else UUID.sub("*", r) for r in rels)

    assert shape(new_ours) == shape(new_theirs)
