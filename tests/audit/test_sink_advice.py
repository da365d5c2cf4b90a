"""What the sink rules say: SINK-AHEAD's advice names a rollback that ckptfix accepts; a v2 re-run without --sink.

Found by the repair sweep of 2026-11-27 on Spark 4.3: offsets/6 deleted while commits/6 stayed and the file sink holds
batch 6. The advice said `rollback --to-batch 6` ("deletes its log entries of batches 7..6"), which rollback refuses
(batch 6 is not committed: offsets/6 missing): a batch beyond the offset log is no batch to keep.
"""

from __future__ import annotations

import tarfile
from pathlib import Path

from ckptfix.audit import audit
from ckptfix.repair.rollback import plan_rollback
from tests.spark.damage import CASES

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "spark-3.5.9"


def test_sink_ahead_advice_keeps_a_batch_both_logs_hold(tmp_path: Path) -> None:
    with tarfile.open(FIXTURES / "filesink.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    ckpt, output = tmp_path / "ckpt", tmp_path / "output"
    CASES["latest_offset_deleted"].apply(ckpt)  # offsets 0..5, commits 0..6, _spark_metadata 0..6
    report = audit(str(ckpt), "4.3", sink_path=str(output))
    (ahead,) = [f for f in report.findings if f.rule_id == "SINK-AHEAD"]
    assert f"`ckptfix rollback {ckpt} --to-batch 5 --sink {output} --with-sink`" in ahead.fix
    assert "batches 6..6" in ahead.fix and "7..6" not in ahead.fix
    plan_rollback(str(ckpt), 5, "4.3")  # the batch it names is one rollback accepts (it raises otherwise)


V2 = Path(__file__).resolve().parents[1] / "fixtures" / "spark-4.2.1" / "dedup_v2_filesink.tar.gz"


def test_a_v2_batch_that_runs_again_is_a_skipped_sink_check_without_sink(tmp_path: Path) -> None:
    """commits/L deleted while the file sink holds batch L, state checkpoint format v2 (the crash window of damage case
    v2_commit_latest_deleted_sink_holds): Spark 4.3 fails ("CheckpointInfo length: 0"), and the audit without --sink
    said "will restart" with nothing else (repair sweep of 2026-11-27). It cannot know the sink, so it says the check
    was skipped and how to run it."""
    with tarfile.open(V2) as tar:
        tar.extractall(tmp_path, filter="data")
    ckpt, output = tmp_path / "ckpt", tmp_path / "output"
    CASES["v2_commit_latest_deleted_sink_holds"].apply(ckpt)
    report = audit(str(ckpt), "4.3")
    (skipped,) = [s for s in report.skipped if s.rule_id == "SINK-SKIP-STATE-V2"]
    assert "not checked without --sink" in skipped.reason and "CheckpointInfo length: 0" in skipped.reason
    with_sink = audit(str(ckpt), "4.3", sink_path=str(output))
    assert not any(s.rule_id == "SINK-SKIP-STATE-V2" for s in with_sink.skipped)
    assert any(f.rule_id == "SINK-SKIP-STATE-V2" for f in with_sink.findings)
    assert with_sink.verdict.restarts is False


def test_no_skipped_sink_check_for_a_v1_state_format(tmp_path: Path) -> None:
    with tarfile.open(FIXTURES / "agg_hdfs.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    CASES["commit_latest_missing"].apply(tmp_path / "ckpt")
    assert not any(s.rule_id == "SINK-SKIP-STATE-V2" for s in audit(str(tmp_path / "ckpt"), "4.3").skipped)


def test_a_sink_path_without_log_or_data_is_named_as_possibly_wrong(tmp_path: Path) -> None:
    """New-user trial: `--sink` given the wrong directory (no _spark_metadata, no data files) got an error that the
    sink's next compaction fails, as if the log had been deleted from the right one. Both readings are possible
    (everything in the real output deleted), so the audit says both, as a warning, and no error; a real output
    whose log alone was deleted keeps the compaction error (damage case filesink_compact_log_deleted)."""
    with tarfile.open(FIXTURES / "filesink.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    ckpt, wrong = tmp_path / "ckpt", tmp_path / "not-the-output"
    wrong.mkdir()
    report = audit(str(ckpt), "4.3", sink_path=str(wrong))
    sink = [f for f in report.findings if f.rule_id.startswith("SINK-")]
    assert [(f.rule_id, f.severity) for f in sink] == [("SINK-NO-LOG", "warning")], sink
    assert "a wrong --sink path?" in sink[0].message and "next log compaction fails" in sink[0].message
    # the real output with its log gone but its data files there: the compaction error stands
    output = tmp_path / "output"
    for entry in (output / "_spark_metadata").iterdir():
        entry.unlink()
    report = audit(str(ckpt), "4.3", sink_path=str(output))
    assert "SINK-LOG-COMPACT" in {f.rule_id for f in report.findings if f.severity == "error"}


def test_an_output_without_a_log_is_not_judged_as_a_file_sink(tmp_path: Path) -> None:
    """New-user trial of 2026-11-28: `--sink` on a foreachBatch query's output (data files, no _spark_metadata) got
    an ERROR that the file sink's next compaction fails, and rollback --sink was refused for it. With a batch
    writer's _SUCCESS markers (which the file sink never writes: the fixtures' file sink outputs have none) nothing
    is checked; without them the output may be a file sink's whose log was deleted whole: a warning, and an unknown
    verdict when the restart's first batch compacts (Spark fails then: damage case filesink_compact_log_deleted)."""
    with tarfile.open(FIXTURES / "agg_hdfs.tar.gz") as tar:  # foreachBatch: output/batch_id=N/ with _SUCCESS
        tar.extractall(tmp_path, filter="data")
    ckpt, output = tmp_path / "ckpt", tmp_path / "output"
    assert list(output.rglob("_SUCCESS")) and not (output / "_spark_metadata").exists()
    compacts = {"spark.sql.streaming.fileSink.log.compactInterval": "1"}  # every batch compacts, the first too
    report = audit(str(ckpt), "4.3", sink_path=str(output), session_conf=compacts)
    assert [(f.rule_id, f.severity) for f in report.findings if f.rule_id.startswith("SINK-")] == [
        ("SINK-NO-LOG", "info")
    ]
    assert report.verdict.restarts is True
    plan_rollback(str(ckpt), 2, "4.3", sink_path=str(output))  # accepted: nothing there is a batch id to keep

    for marker in output.rglob("_SUCCESS"):
        marker.unlink()
    report = audit(str(ckpt), "4.3", sink_path=str(output), session_conf=compacts)
    (compact,) = [f for f in report.findings if f.rule_id == "SINK-LOG-COMPACT"]
    assert compact.severity == "warning" and compact.undecided and "foreachBatch" in compact.message
    assert report.verdict.restarts is None
    later = {"spark.sql.streaming.fileSink.log.compactInterval": "1000"}  # the restart itself does not compact
    report = audit(str(ckpt), "4.3", sink_path=str(output), session_conf=later)
    assert report.verdict.restarts is True
    (compact,) = [f for f in report.findings if f.rule_id == "SINK-LOG-COMPACT"]
    assert compact.severity == "warning" and not compact.undecided and "the restart runs, but" in compact.message
