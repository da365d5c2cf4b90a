"""A Delta table as the sink: its transaction log (written by delta-rs, a real Delta writer) says which batch ids
Delta's streaming sink will skip (``txn`` of appId = the query id), and audit, rollback and repair use it.

The expected batch ids come from the txn actions each test writes, never from ckptfix's replay.
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

pa = pytest.importorskip("pyarrow")
deltalake = pytest.importorskip("deltalake")

from ckptfix.audit import audit  # noqa: E402
from ckptfix.cli.main import app  # noqa: E402
from ckptfix.repair.rollback import RollbackRefused, plan_rollback  # noqa: E402
from ckptfix.sinks import open_sink  # noqa: E402

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "spark-3.5.9"


def checkpoint(tmp_path: Path) -> tuple[Path, str]:
    """agg_hdfs written by Spark 3.5.9: batches 0..7 planned and committed."""
    with tarfile.open(FIXTURES / "agg_hdfs.tar.gz") as tar:
        tar.extractall(tmp_path, filter="tar")
    ckpt = tmp_path / "ckpt"
    return ckpt, json.loads((ckpt / "metadata").read_text())["id"]


def commit(table: Path, txns: dict[str, int], rows: int = 1) -> None:
    """One Delta commit appending ``rows`` rows, with one txn action per (appId, version), as DeltaSink does."""
    props = deltalake.CommitProperties(app_transactions=[deltalake.Transaction(a, v) for a, v in txns.items()])
    deltalake.write_deltalake(str(table), pa.table({"k": list(range(rows))}), mode="append", commit_properties=props)


def test_txn_replay_through_a_checkpoint_and_later_commits(tmp_path: Path) -> None:
    table = tmp_path / "table"
    for b in range(3):
        commit(table, {"query-a": b})
    commit(table, {"other-writer": 40})
    deltalake.DeltaTable(str(table)).create_checkpoint()  # a checkpoint at version 3
    for name in ("00000000000000000000.json", "00000000000000000001.json"):  # log cleanup removed old commits
        (table / "_delta_log" / name).unlink()
    commit(table, {"query-a": 3})
    commit(table, {})  # a commit without txn (e.g. OPTIMIZE) keeps the last one
    sink = open_sink(str(table))
    assert sink.kind == "delta"
    assert sink.delta is not None and sink.delta.version == 5
    assert sink.last_batch("query-a") == 3
    assert sink.evidence("query-a").endswith("_delta_log/00000000000000000004.json")
    assert sink.last_batch("other-writer") == 40  # from the checkpoint Parquet
    assert sink.evidence("other-writer").endswith("00000000000000000003.checkpoint.parquet")
    assert sink.last_batch("nobody") is None


@pytest.mark.parametrize("txn_batch, rule", [(7, None), (11, "SINK-AHEAD"), (5, "SINK-BEHIND")])
def test_audit_compares_the_query_txn_with_the_logs(tmp_path: Path, txn_batch: int, rule: str | None) -> None:
    ckpt, qid = checkpoint(tmp_path)
    table = tmp_path / "table"
    for b in range(txn_batch + 1):
        commit(table, {qid: b})
    report = audit(str(ckpt), "3.5", sink_path=str(table))
    sink_rules = [f.rule_id for f in report.findings if f.rule_id.startswith("SINK-")]
    assert sink_rules == ([rule] if rule else [])
    if rule == "SINK-AHEAD":
        (finding,) = [f for f in report.findings if f.rule_id == rule]
        assert f"txn of appId {qid}" in finding.message and "batches 8..11" in finding.message
        assert finding.silent and report.verdict.hazards


def test_a_table_without_the_query_txn_is_named(tmp_path: Path) -> None:
    ckpt, _ = checkpoint(tmp_path)
    table = tmp_path / "table"
    commit(table, {"a-foreachBatch-app": 99})
    report = audit(str(ckpt), "3.5", sink_path=str(table))
    (finding,) = [f for f in report.findings if f.rule_id.startswith("SINK-")]
    assert finding.rule_id == "SINK-NO-LOG" and "a-foreachBatch-app" in finding.message


def test_rollback_refuses_what_the_delta_sink_would_skip(tmp_path: Path) -> None:
    ckpt, qid = checkpoint(tmp_path)
    table = tmp_path / "table"
    for b in range(6):  # the table holds batches 0..5 of this query
        commit(table, {qid: b})
    with pytest.raises(RollbackRefused) as refused:
        plan_rollback(str(ckpt), 3, "3.5", sink_path=str(table), force=True)
    text = str(refused.value)
    assert "txn of appId" in text and "batches up to 5" in text and f"ckptfix offsets export {ckpt} --batch 3" in text
    # rolling back to the newest batch the table holds re-plans nothing it holds: allowed
    assert not plan_rollback(str(ckpt), 5, "3.5", sink_path=str(table), force=True).plan.empty


def test_a_missing_commit_is_one_line_exit_2(tmp_path: Path) -> None:
    ckpt, qid = checkpoint(tmp_path)
    table = tmp_path / "table"
    for b in range(3):
        commit(table, {qid: b})
    (table / "_delta_log" / "00000000000000000001.json").unlink()
    result = CliRunner().invoke(app, ["audit", str(ckpt), "--sink", str(table)])
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.strip().splitlines()
    assert "_delta_log/00000000000000000001.json" in line and "every Delta commit from 0 to 2" in line


def test_a_damaged_commit_line_names_the_file_and_byte(tmp_path: Path) -> None:
    ckpt, qid = checkpoint(tmp_path)
    table = tmp_path / "table"
    commit(table, {qid: 0})
    log = table / "_delta_log" / "00000000000000000000.json"
    data = log.read_bytes()
    log.write_bytes(data[:-5])  # a torn last line
    result = CliRunner().invoke(app, ["audit", str(ckpt), "--sink", str(table)])
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.strip().splitlines()
    assert "00000000000000000000.json: at byte" in line and "one JSON action per line" in line
