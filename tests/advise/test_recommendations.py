"""Each recommendation fires at its documented threshold, with the numbers behind it (hand-computed here)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ckptfix.advise import advise
from tests.advise.helpers import progress_event


def analyse(tmp_path: Path, events: list[dict[str, Any]], concurrency: int | None = None) -> Any:
    path = tmp_path / "p.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return advise([str(path)], concurrency=concurrency)


def recs(q: Any) -> dict[str, Any]:
    return {r.id: r for r in q.recommendations}


def stateless(batch_id: int, trigger_ms: int, wal: int, co: int) -> dict[str, Any]:
    e = progress_event(batch_id=batch_id, trigger_ms=trigger_ms, wal_ms=wal, commit_offsets_ms=co)
    e["stateOperators"] = []
    return e


def test_async_progress_for_stateless(tmp_path: Path) -> None:
    # 150 + 100 = 250 ms of 2000 ms = 12.5 % >= 10 %; interval 10 x 2 s = 20000 ms
    (q,) = analyse(tmp_path, [stateless(i, 2000, 150, 100) for i in range(3)]).queries
    assert q.provider == "stateless"
    r = recs(q)["ASYNC-PROGRESS"]
    assert r.level == "warning"
    assert r.numbers["offset_log_share_median"] == pytest.approx(0.125)
    assert r.settings == {"asyncProgressTrackingEnabled": "true", "asyncProgressTrackingCheckpointIntervalMs": "20000"}
    assert "STATE-COMMIT-SHARE" not in recs(q)


def test_async_progress_below_threshold(tmp_path: Path) -> None:
    # 100 + 80 = 180 ms of 2000 ms = 9 % < 10 %
    (q,) = analyse(tmp_path, [stateless(i, 2000, 100, 80) for i in range(3)]).queries
    assert "ASYNC-PROGRESS" not in recs(q)


def test_async_progress_not_offered_to_stateful(tmp_path: Path) -> None:
    events = [
        progress_event(batch_id=i, trigger_ms=2000, commit_ms=64, wal_ms=150, commit_offsets_ms=100) for i in range(3)
    ]
    (q,) = analyse(tmp_path, events).queries
    r = recs(q)["ASYNC-PROGRESS"]
    assert r.level == "info" and r.settings == {} and "stateful" in r.text


def test_commit_share_levels(tmp_path: Path) -> None:
    # per task = commit / 64; share = per task / 100000 ms
    for commit, level in ((64 * 4000, None), (64 * 5000, "info"), (64 * 10000, "warning"), (64 * 25000, "high")):
        (q,) = analyse(tmp_path, [progress_event(trigger_ms=100_000, commit_ms=commit)]).queries
        got = recs(q).get("STATE-COMMIT-SHARE")
        assert (got.level if got else None) == level, commit


def test_rocksdb_changelog_and_async_checkpoint(tmp_path: Path) -> None:
    custom = {
        "rocksdbCommitFlushLatency": 100_000,
        "rocksdbCommitCheckpointLatency": 200_000,
        "rocksdbCommitFileSyncLatencyMs": 2_500_000,
        "rocksdbCommitCompactLatency": 0,
        "rocksdbFilesCopied": 64,
    }
    (q,) = analyse(tmp_path, [progress_event(custom=custom)], concurrency=32).queries
    assert q.provider == "rocksdb" and q.changelog is False
    r = recs(q)
    # (100000 + 200000 + 2500000) / 3186626 = 87.87 %
    assert r["ROCKSDB-CHANGELOG"].numbers["upload_phases_share_of_commit"] == pytest.approx(0.8787, abs=1e-4)
    assert r["ROCKSDB-CHANGELOG"].settings == {
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true"
    }
    assert "Databricks" in r["ASYNC-STATE-CHECKPOINT"].availability
    assert q.rocksdb_commit_shares["rocksdbCommitFileSyncLatencyMs"] == pytest.approx(2_500_000 / 3186626)


def test_rocksdb_memory(tmp_path: Path) -> None:
    e = progress_event(custom={"rocksdbFilesCopied": 0, "rocksdbPinnedBlocksMemoryUsage": 1})
    e["stateOperators"][0]["memoryUsedBytes"] = 64 * 300 * 2**20  # 300 MiB per instance >= 256 MiB
    (q,) = analyse(tmp_path, [e]).queries
    r = recs(q)["ROCKSDB-MEMORY"]
    assert r.numbers["memory_per_instance_bytes_max"] == 300 * 2**20
    assert r.settings["spark.sql.streaming.stateStore.rocksdb.boundedMemoryUsage"] == "true"
    e["stateOperators"][0]["memoryUsedBytes"] = 64 * 200 * 2**20  # 12.5 GiB total >= 1 GiB
    assert "ROCKSDB-MEMORY" in recs(analyse(tmp_path, [e]).queries[0])
    e["stateOperators"][0]["memoryUsedBytes"] = 64 * 10 * 2**20  # 640 MiB total, 10 MiB each: under both
    assert "ROCKSDB-MEMORY" not in recs(analyse(tmp_path, [e]).queries[0])


def test_snapshot_lag(tmp_path: Path) -> None:
    custom = {"rocksdbFilesCopied": 0, "SnapshotLastUploaded.partition_0_default": 5}
    (q,) = analyse(tmp_path, [progress_event(batch_id=40, commit_ms=64, custom=custom)]).queries
    assert q.snapshot_lag == 36  # batch 40 commits version 41; 41 - 5
    assert recs(q)["SNAPSHOT-LAG"].numbers == {"versions_since_snapshot": 36}
    custom["SnapshotLastUploaded.partition_0_default"] = 20  # 41 - 20 = 21 < 30
    assert "SNAPSHOT-LAG" not in recs(analyse(tmp_path, [progress_event(batch_id=40, custom=custom)]).queries[0])


def test_idle_triggers_and_runs(tmp_path: Path) -> None:
    idle = progress_event(batch_id=1)
    idle["durationMs"] = {"latestOffset": 3, "triggerExecution": 3}
    idle["stateOperators"] = []
    idle["timestamp"] = "2026-01-01T00:00:00.500Z"
    restarted = progress_event(batch_id=1, run_id="1b2d3c4e-0000-4000-8000-00000000ffff")
    restarted["timestamp"] = "2026-01-01T00:10:00.000Z"
    other = progress_event(batch_id=0, query_id="another", name="other")
    (q1, q2) = analyse(tmp_path, [progress_event(batch_id=0), idle, restarted, other]).queries
    assert q1.idle_triggers == 1
    assert [r.batch_id for r in q1.batches] == [0, 1]
    assert q1.run_ids == ["1b2d3c4e-0000-4000-8000-000000000002", "1b2d3c4e-0000-4000-8000-00000000ffff"]
    assert q2.name == "other" and len(q2.batches) == 1


def test_no_partitions_field(tmp_path: Path) -> None:
    """Old Spark without numShufflePartitions: totals only, no per-task figure, no crash."""
    e = progress_event()
    del e["stateOperators"][0]["numShufflePartitions"]
    (q,) = analyse(tmp_path, [e], concurrency=32).queries
    row = q.batches[0]
    assert row.ops[0].commit_ms == 3186626 and row.ops[0].per_task_ms is None and row.share_full is None
    assert "STATE-COMMIT-SHARE" not in recs(q)
