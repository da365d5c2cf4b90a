"""Progress events written by real Spark (tests/fixtures/progress/spark-*/, made by generate.py).

Facts checked independently of the code under test: the generator's meta.json (query ids, batches per query,
4 shuffle partitions, provider and changelog settings), and the numbers read with the json module straight
from Spark's own ``progress.jsonl``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ckptfix.advise import advise
from ckptfix.advise.parse import parse
from tests.advise.helpers import FIXTURES, VERSIONS, run

QUERIES = ("agg_hdfs", "agg_rocksdb", "agg_rocksdb_cl")


def meta(version: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / version / "meta.json").read_text())
    return data


def jsonl(version: str, query: str) -> list[dict[str, Any]]:
    path = FIXTURES / version / query / "progress.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_fixtures_present() -> None:
    assert "spark-4.3.0" in VERSIONS and "spark-3.5.9" in VERSIONS


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("query", QUERIES)
@pytest.mark.parametrize("kind", ["progress.json", "progress.jsonl", "last.json"])
def test_every_json_form(version: str, query: str, kind: str) -> None:
    m = meta(version)
    path = FIXTURES / version / query / kind
    p = parse(path.read_bytes(), str(path))
    assert p.skipped == []
    raw = jsonl(version, query)
    expected = raw[-1:] if kind == "last.json" else raw
    assert [e.batch_id for e in p.events] == [r["batchId"] for r in expected]
    assert {e.query_id for e in p.events} == {m["queries"][query]["id"]}
    assert {e.run_id for e in p.events} == {m["queries"][query]["runId"]}
    assert [e.state_ops[0].commit_ms for e in p.events] == [r["stateOperators"][0]["commitTimeMs"] for r in expected]
    assert [e.batch_ms for e in p.events] == [r["durationMs"]["triggerExecution"] for r in expected]


@pytest.mark.parametrize("version", VERSIONS)
def test_driver_log(version: str) -> None:
    """The real multi-line 'Streaming query made progress: {' blocks among the other INFO lines."""
    m = meta(version)
    path = FIXTURES / version / "driver.log"
    text = path.read_text()
    p = parse(path.read_bytes(), str(path))
    assert p.summary.kind == "driver-log"
    assert p.skipped == []
    assert len(p.events) == text.count("Streaming query made progress: {") == 3 * m["batches_per_query"]
    assert p.summary.other_lines > 0
    lines = text.splitlines()
    for e in p.events:
        assert e.origin.line is not None
        assert "Streaming query made progress: {" in lines[e.origin.line - 1]
    for q in QUERIES:
        got = [(e.batch_id, e.state_ops[0].commit_ms) for e in p.events if e.name == q]
        want = [(r["batchId"], r["stateOperators"][0]["commitTimeMs"]) for r in jsonl(version, q)]
        assert got == want


@pytest.mark.parametrize("version", VERSIONS)
def test_analysis_of_real_runs(version: str) -> None:
    m = meta(version)
    log = FIXTURES / version / "driver.log"
    jsonls = [FIXTURES / version / q / "progress.jsonl" for q in QUERIES]
    a = advise([str(log), *map(str, jsonls)], concurrency=2)
    n = m["batches_per_query"]
    assert a.duplicates == 3 * n  # the same events in the log and in progress.jsonl
    by_name = {q.name: q for q in a.queries}
    assert set(by_name) == set(QUERIES)
    for name, q in by_name.items():
        assert name is not None
        assert q.query_id == m["queries"][name]["id"]
        assert [r.batch_id for r in q.batches] == list(range(n))
        raw = jsonl(version, name)
        for r, ev in zip(q.batches, raw, strict=True):
            op = ev["stateOperators"][0]
            assert op["numShufflePartitions"] == m["shuffle_partitions"] == 4
            per_task = op["commitTimeMs"] / 4
            assert r.commit_full_ms == pytest.approx(per_task)
            assert r.share_full == pytest.approx(per_task / ev["durationMs"]["triggerExecution"])
            # 4 partitions on 2 slots: 2 waves
            assert r.commit_limited_ms == pytest.approx(2 * per_task)
    assert by_name["agg_hdfs"].provider == "hdfs"
    assert by_name["agg_rocksdb"].provider == "rocksdb"
    assert by_name["agg_rocksdb_cl"].provider == "rocksdb"
    # the generator ran agg_rocksdb with changelog checkpointing off and agg_rocksdb_cl with it on
    assert by_name["agg_rocksdb"].changelog is False
    assert by_name["agg_rocksdb_cl"].changelog is True
    assert by_name["agg_hdfs"].changelog is None
    assert "ROCKSDB-CHANGELOG" not in {r.id for r in by_name["agg_rocksdb_cl"].recommendations}
    assert by_name["agg_rocksdb"].rocksdb_commit_shares  # RocksDB commit phases reported
    assert not by_name["agg_hdfs"].rocksdb_commit_shares


def test_version_differences() -> None:
    """batchDuration is written by Spark 4.x, not by 3.5; advise falls back to triggerExecution either way."""
    assert "batchDuration" not in jsonl("spark-3.5.9", "agg_hdfs")[0]
    assert "batchDuration" in jsonl("spark-4.3.0", "agg_hdfs")[0]
    log35 = (FIXTURES / "spark-3.5.9" / "driver.log").read_text()
    log43 = (FIXTURES / "spark-4.3.0" / "driver.log").read_text()
    assert "INFO MicroBatchExecution: Streaming query made progress: {" in log35
    assert "INFO ProgressReporter: Streaming query made progress: {" in log43


@pytest.mark.parametrize("version", VERSIONS)
def test_cli_query_filter(version: str) -> None:
    m = meta(version)
    log = str(FIXTURES / version / "driver.log")
    for key in ("agg_rocksdb", m["queries"]["agg_rocksdb"]["id"], m["queries"]["agg_rocksdb"]["runId"]):
        code, stdout, stderr = run(log, "--query", key, "--format", "json")
        assert code == 0, stderr
        doc = json.loads(stdout)
        assert [q["name"] for q in doc["queries"]] == ["agg_rocksdb"]
    code, stdout, stderr = run(log, "--query", "no-such-query")
    assert code == 2 and "no-such-query" in stderr and stdout == ""


def test_cli_text_real(tmp_path: Path) -> None:
    code, stdout, stderr = run(str(FIXTURES / "spark-4.3.0" / "driver.log"))
    assert code == 0, stderr
    for q in QUERIES:
        assert f"query {q}" in stdout
    assert "changelog checkpointing off" in stdout and "changelog checkpointing on" in stdout
    assert "ROCKSDB-CHANGELOG" in stdout
    assert "driver-log, 9 progress events, 0 skipped" in stderr
