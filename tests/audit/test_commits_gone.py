"""Every commit file deleted (a new user's trial): Spark's populateStartOffsets then takes the latest batch L as
not committed and runs it again from offsets/L-1, and never re-runs 0..L-1. The restart verdict stays "restarts";
the audit now says what the restart does instead of "no findings". On the RocksDB sample Spark 4.3 wrote
(samples/rocksdb-changelog: offsets and commits 0..11)."""

from __future__ import annotations

import shutil
from pathlib import Path

from ckptfix.audit import audit

SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "rocksdb-changelog"


def test_no_commit_at_all_is_a_warning_naming_the_rerun(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    shutil.copytree(SAMPLE, ckpt)
    assert not [f for f in audit(str(ckpt)).findings if f.rule_id == "LOG-COMMIT-GAP"]
    shutil.rmtree(ckpt / "commits")
    report = audit(str(ckpt))
    assert report.verdict.restarts is True
    [gap] = [f for f in report.findings if f.rule_id == "LOG-COMMIT-GAP"]
    assert gap.severity == "warning"
    assert "runs batch 11 again from offsets/10" in gap.message and "never re-runs batches 0..10" in gap.message
    assert "rollback" not in gap.fix.replace("no rollback", "")  # no rollback target exists without a commit


def test_a_commit_gap_fix_names_the_batch(tmp_path: Path) -> None:
    """commits/10 and commits/11 gone: batches 10 and 11 have offsets, 10 is never re-run; the fix names the
    rollback with its number and checkpoint (it said `--to-batch K`)."""
    ckpt = tmp_path / "ckpt"
    shutil.copytree(SAMPLE, ckpt)
    for name in ("10", ".10.crc", "11", ".11.crc"):
        (ckpt / "commits" / name).unlink()
    [gap] = [f for f in audit(str(ckpt)).findings if f.rule_id == "LOG-COMMIT-GAP"]
    assert f"`ckptfix rollback {ckpt} --to-batch 9`" in gap.fix, gap.fix
