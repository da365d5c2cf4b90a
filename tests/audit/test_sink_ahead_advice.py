"""SINK-AHEAD's advice names a rollback that ckptfix accepts.

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
