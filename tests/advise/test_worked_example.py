"""The worked example of issue 5: triggerExecution 547730 ms, commitTimeMs 3186626, 64 partitions.

Expected values are computed by hand here, not by the code under test:
3186626 / 64 = 49791.03 ms per task; 49791.03 / 547730 = 9.09 %; at 32 task slots 64 tasks run in
ceil(64 / 32) = 2 waves, so 2 x 49791.03 / 547730 = 18.18 %; at 20 slots ceil(64 / 20) = 4 waves -> 36.36 %.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ckptfix.advise import advise
from tests.advise.helpers import progress_event, run, write_json

PER_TASK_MS = 49791.03
SHARE_FULL = 0.0909
SHARE_32 = 0.1818
SHARE_20 = 0.3636


@pytest.fixture
def example(tmp_path: Path) -> Path:
    return write_json(tmp_path / "progress.json", progress_event())


def test_library_numbers(example: Path) -> None:
    a = advise([str(example)], concurrency=32)
    (q,) = a.queries
    (row,) = q.batches
    (op,) = row.ops
    assert op.commit_ms == 3186626 and op.partitions == 64
    assert op.per_task_ms == pytest.approx(PER_TASK_MS, abs=0.01)
    assert op.waves == 2
    assert row.batch_ms == 547730
    assert row.share_full == pytest.approx(SHARE_FULL, abs=1e-4)
    assert row.share_limited == pytest.approx(SHARE_32, abs=1e-4)
    rec = {r.id: r for r in q.recommendations}["STATE-COMMIT-SHARE"]
    assert rec.level == "warning"  # 18.2 % is >= 10 % and < 25 %
    assert rec.numbers["share_median"] == pytest.approx(SHARE_32, abs=1e-4)
    # no customMetrics: provider unknown, so the Databricks-only option is named, marked as such
    assert q.provider == "unknown"
    assert "not in Apache Spark" in {r.id: r for r in q.recommendations}["ASYNC-STATE-CHECKPOINT"].availability


def test_waves_model(example: Path) -> None:
    assert advise([str(example)], concurrency=20).queries[0].batches[0].share_limited == pytest.approx(
        SHARE_20, abs=1e-4
    )
    # as many slots as partitions (or more): one wave, same as full concurrency
    for slots in (64, 200):
        row = advise([str(example)], concurrency=slots).queries[0].batches[0]
        assert row.ops[0].waves == 1
        assert row.share_limited == pytest.approx(SHARE_FULL, abs=1e-4)
    # without --concurrency: one slot per partition, no limited figure
    row = advise([str(example)]).queries[0].batches[0]
    assert row.ops[0].waves == 1 and row.share_limited is None


def test_cli_text(example: Path) -> None:
    code, stdout, stderr = run(str(example), "--concurrency", "32")
    assert code == 0, stderr
    assert "49.8 s" in stdout  # per task
    assert "547.7 s" in stdout  # batch
    assert "9.1 %" in stdout and "18.2 %" in stdout
    assert "STATE-COMMIT-SHARE" in stdout
    assert "progress.json: json-document, 1 progress events, 0 skipped" in stderr


def test_cli_json(example: Path) -> None:
    code, stdout, _ = run(str(example), "--concurrency", "32", "--format", "json")
    assert code == 0
    doc = json.loads(stdout)
    assert doc["concurrency"] == 32
    (q,) = doc["queries"]
    assert q["name"] == "orders"
    row = q["batches"][0]
    assert row["ops"][0]["per_task_ms"] == pytest.approx(PER_TASK_MS, abs=0.01)
    assert row["share_full"] == pytest.approx(SHARE_FULL, abs=1e-4)
    assert row["share_limited"] == pytest.approx(SHARE_32, abs=1e-4)
    rec = next(r for r in q["recommendations"] if r["id"] == "STATE-COMMIT-SHARE")
    assert rec["threshold"] and rec["numbers"]["concurrency"] == 32
    assert doc["worst_level"] == "warning"


def test_fail_on(example: Path) -> None:
    assert run(str(example), "--concurrency", "32", "--fail-on", "warning")[0] == 1
    assert run(str(example), "--concurrency", "32", "--fail-on", "high")[0] == 0
    assert run(str(example), "--concurrency", "20", "--fail-on", "high")[0] == 1  # 36.4 % >= 25 %
    assert run(str(example), "--concurrency", "32")[0] == 0  # default: never


def test_stdin(example: Path) -> None:
    code, stdout, _ = run("-", "--concurrency", "32", stdin=example.read_text())
    assert code == 0 and "18.2 %" in stdout


def test_stats_over_batches(tmp_path: Path) -> None:
    """median / p95 (nearest rank) / max over 20 batches whose commit shares are known by construction."""
    # batch i: trigger 100000 ms, commit (i + 1) * 1000 ms summed over 10 partitions -> per task (i+1)*100 ms
    events = [
        progress_event(batch_id=i, trigger_ms=100_000, commit_ms=(i + 1) * 1000, partitions=10) for i in range(20)
    ]
    path = tmp_path / "p.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    q = advise([str(path)]).queries[0]
    s = q.stats["share_full"]
    # shares are 0.001 .. 0.020; median of 20 = mean of 10th and 11th = (0.010 + 0.011) / 2; p95 = 19th = 0.019
    assert s.n == 20
    assert s.median == pytest.approx(0.0105)
    assert s.p95 == pytest.approx(0.019)
    assert s.max == pytest.approx(0.020)
    assert [r.batch_id for r in q.batches] == list(range(20))
