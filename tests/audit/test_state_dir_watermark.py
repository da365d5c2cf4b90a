"""A checkpoint without state/ whose event-time watermark has advanced: the files cannot tell a stateful query
whose state/ was deleted (Spark fails: damage hunt of 2026-11-27, B09 on 4.3, and the recorded
``state_dir_missing`` case on every version) from a stateless query with a watermark (Spark restarts: the
EventTimeWatermarkSuite resource, tests/audit/test_spark_resource_stateless_live.py). The verdict is unknown, with
the reason, until the user says which (``--stateful`` / ``--stateless``). Without a watermark the audit keeps
reading a checkpoint without state/ as a stateless query's.

On checkpoints Spark 3.5.9 wrote (tests/fixtures/state35): a dropDuplicates with a watermark, and an
aggregation without one.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from ckptfix.audit import audit
from tests.state.test_state35 import extract


def test_a_watermark_without_state_is_unknown_until_told(tmp_path: Path) -> None:
    ckpt = extract("dedup_wm_hdfs", tmp_path)
    assert audit(str(ckpt)).verdict.restarts is True
    shutil.rmtree(ckpt / "state")
    report = audit(str(ckpt))
    assert report.verdict.restarts is None
    (finding,) = [f for f in report.findings if f.undecided]
    assert finding.rule_id == "STATE-DIR-MISSING"
    assert "watermark has advanced (1700000040000 ms)" in finding.message
    told = audit(str(ckpt), stateful=True)
    assert told.verdict.restarts is False
    assert told.verdict.error_class == "STREAMING_STATEFUL_OPERATOR_MISSING_STATE_DIRECTORY"
    assert audit(str(ckpt), stateful=False).verdict.restarts is True


def test_no_watermark_and_no_state_reads_as_stateless(tmp_path: Path) -> None:
    ckpt = extract("agg_hdfs", tmp_path)
    shutil.rmtree(ckpt / "state")
    report = audit(str(ckpt))
    assert report.verdict.restarts is True
    assert any(s.rule_id == "STATE-DIR-MISSING" for s in report.skipped)
