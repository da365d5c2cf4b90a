"""Spark's placement of state keys, proven against live Spark: :mod:`ckptfix.state.placement` (the partitioning
columns of each operator's stores + ``ckptfix.formats.sparkhash``, whose Murmur3 is compared with Spark's ``hash()``
value by value in tests/formats/test_sparkhash_live.py) names the partition Spark's own stateful operators stored
every key in: state written by real queries with 5 and 7 partitions (a windowed aggregation over keys of eight
types, -0.0 included, dropDuplicates, a stream-stream join's four stores, a session window), HDFS and RocksDB,
every key of every store read back from the files of its partition."""

from __future__ import annotations

import datetime as dt
import json
import os
import random
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.spark

UTC = dt.timezone.utc


# ------------------------------------------------------------------------------------------ real state stores


def _rows(batch: int) -> list[dict[str, Any]]:
    rng = random.Random(batch)
    base = dt.datetime(2024, 1, 1, tzinfo=UTC) + dt.timedelta(minutes=10 * batch)
    return [
        {
            "key": rng.choice(["alpha", "beta", "γ", "", "k 5", "\U0001f600x", "longer key value"]),
            "grp": rng.randint(-3, 3),
            "n": rng.randint(-(2**40), 2**40),
            "amount": rng.choice([-0.0, 0.0, 1.5, rng.gauss(0, 100)]),
            "price": f"{rng.randint(-99999, 99999) / 100:.2f}",
            "big": f"{rng.randint(-(10**20), 10**20)}.{rng.randint(0, 99999):05d}",
            "ts": (base + dt.timedelta(seconds=rng.randint(0, 599))).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "d": (dt.date(2024, 1, 1) + dt.timedelta(days=rng.randint(-500, 500))).isoformat(),
            "flag": rng.random() < 0.5,
        }
        for _ in range(40)
    ]


def _typed(spark: Any, path: Path) -> Any:
    from pyspark.sql import functions as F

    ddl = "key STRING, grp INT, n LONG, amount DOUBLE, price STRING, big STRING, ts STRING, d STRING, flag BOOLEAN"
    df = spark.readStream.format("json").schema(ddl).option("maxFilesPerTrigger", 1).load(str(path))
    return df.select(
        "key",
        "grp",
        "n",
        "amount",
        F.col("price").cast("decimal(10,2)").alias("price"),
        F.col("big").cast("decimal(25,5)").alias("big"),
        F.col("ts").cast("timestamp").alias("ts"),
        F.col("d").cast("date").alias("d"),
        "flag",
    )


def _run(spark: Any, writer: Any, ckpt: Path, partitions: int, confs: dict[str, str] | None = None) -> None:
    from tests.state.scenarios import session_confs

    with session_confs(spark, {"spark.sql.shuffle.partitions": str(partitions), **(confs or {})}):
        q = writer.option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start()
        try:
            assert q.awaitTermination(600)
            assert q.exception() is None, q.exception()
        finally:
            q.stop()


@pytest.fixture(scope="module")
def typed_inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("placement-input")
    for side in ("main", "right"):
        d = root / side
        d.mkdir()
        for b in range(3):
            rows = _rows(b if side == "main" else b + 100)
            (d / f"part-{b:04d}.json").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
            os.utime(d / f"part-{b:04d}.json", (1_700_000_000 + 60 * b,) * 2)
    return root


def _check_partition_ids(ckpt: Path, operator: int = 0, **kw: Any) -> int:
    """Every key of every store is in the partition ckptfix's placement gives it; returns the number checked."""
    from ckptfix.checkpoint import Checkpoint
    from ckptfix.repair.rebuild import read_version
    from ckptfix.state.decode import Decoder
    from ckptfix.state.placement import placement
    from ckptfix.state.read import select, store_chain
    from ckptfix.state.schemas import store_schema

    ck = Checkpoint.open(str(ckpt))
    checked, wrong = 0, []
    for name in ck.state.operators[operator].store_names or ["default"]:
        sel = select(ck, operator=operator, store_name=name)
        n = len(sel.op.partitions)
        sch = store_schema(ck, sel.op, sel.info, name)
        where = placement(sel.info, sch)
        for part in sel.partitions:
            store = sel.op.partitions[part][name]
            pairs, _ = read_version(sel, store_chain(sel, store))
            dec = Decoder(sch, sel.provider, store.rel)
            for k, _ in pairs:
                key = dec.key(k)
                checked += 1
                got = where.partition(key, n)
                if got != part:
                    wrong.append(f"{name} {key}: stored in {part}, placed in {got}")
    assert not wrong, wrong[:10]
    return checked


@pytest.mark.parametrize("provider", ["hdfs", "rocksdb"])
def test_placement_equals_where_spark_stored_aggregation_and_dedup(
    spark: Any, typed_inputs: Path, tmp_path: Path, provider: str
) -> None:
    from pyspark.sql import functions as F

    from tests.state.scenarios import PROVIDERS

    df = _typed(spark, typed_inputs / "main")
    agg = df.groupBy(F.window("ts", "10 minutes"), "key", "grp", "price", "big", "d", "flag", "amount").agg(
        F.count("*").alias("cnt")
    )
    _run(spark, agg.writeStream.format("noop").outputMode("update"), tmp_path / "agg", 7, PROVIDERS[provider])
    assert _check_partition_ids(tmp_path / "agg") > 60
    dedup = df.dropDuplicates(["key", "n", "d", "big"])
    _run(spark, dedup.writeStream.format("noop"), tmp_path / "dedup", 5, PROVIDERS[provider])
    assert _check_partition_ids(tmp_path / "dedup") > 60


def test_placement_equals_where_spark_stored_join_and_session(spark: Any, typed_inputs: Path, tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    left = _typed(spark, typed_inputs / "main").withWatermark("ts", "1 hour")
    right = _typed(spark, typed_inputs / "right").select(
        F.col("key").alias("rkey"), F.col("grp").alias("rgrp"), F.col("ts").alias("rts")
    )
    right = right.withWatermark("rts", "1 hour")
    cond = F.expr("key = rkey AND grp = rgrp AND rts >= ts - interval 1 hour AND rts <= ts + interval 1 hour")
    _run(spark, left.join(right, cond).writeStream.format("noop"), tmp_path / "join", 5)
    assert _check_partition_ids(tmp_path / "join") > 60
    session = left.groupBy(F.session_window("ts", "5 minutes"), "key", "grp").agg(F.count("*").alias("c"))
    _run(spark, session.writeStream.format("noop").outputMode("append"), tmp_path / "session", 7)
    assert _check_partition_ids(tmp_path / "session") > 20
