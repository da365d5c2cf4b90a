"""Live: the progress events of a query run now by the installed PySpark (4.3 in the dev venv) go through
``ckptfix advise`` unchanged. Lean: one RocksDB aggregation with changelog checkpointing, 2 micro-batches."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.advise.helpers import run

ROCKS = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
CONFS = {
    "spark.sql.streaming.stateStore.providerClass": ROCKS,
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
}


def test_live_progress_events(spark: Any, tmp_path: Path) -> None:
    src = tmp_path / "input"
    src.mkdir()
    for b in range(2):
        rows = [json.dumps({"id": b * 10 + i, "key": f"k{i % 3}"}) for i in range(10)]
        (src / f"part-{b}.json").write_text("\n".join(rows) + "\n")
    for k, v in CONFS.items():
        spark.conf.set(k, v)
    try:
        df = spark.readStream.schema("id LONG, key STRING").option("maxFilesPerTrigger", 1).json(str(src))
        q = (
            df.groupBy("key")
            .count()
            .writeStream.format("noop")
            .outputMode("update")
            .queryName("advise_live")
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .trigger(availableNow=True)
            .start()
        )
        assert q.awaitTermination(300)
        events = [e.json() for e in q._jsq.recentProgress()]
        partitions = int(spark.conf.get("spark.sql.shuffle.partitions"))
    finally:
        for k in CONFS:
            spark.conf.unset(k)
    path = tmp_path / "progress.jsonl"
    path.write_text("".join(e + "\n" for e in events))
    raw = [json.loads(e) for e in events]
    code, stdout, stderr = run(str(path), "--format", "json", "--concurrency", "1")
    assert code == 0, stderr
    (qa,) = json.loads(stdout)["queries"]
    assert qa["name"] == "advise_live" and qa["query_id"] == str(q.id)
    assert [b["batch_id"] for b in qa["batches"]] == [0, 1]
    assert qa["provider"] == "rocksdb" and qa["changelog"] is True
    for b, r in zip(qa["batches"], raw, strict=True):
        commit = r["stateOperators"][0]["commitTimeMs"]
        assert r["stateOperators"][0]["numShufflePartitions"] == partitions
        assert b["commit_full_ms"] == commit / partitions
        assert b["ops"][0]["waves"] == partitions  # one slot: one wave per partition
        assert b["commit_limited_ms"] == commit


pytestmark = pytest.mark.spark  # starts Spark (checked by tests/spark/plugin.py)
