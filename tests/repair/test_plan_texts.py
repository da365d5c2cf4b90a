"""What repair and rollback tell the user, on the samples real Spark wrote (samples/rocksdb-changelog: an
aggregation, offsets = commits = 0..11, RocksDB state versions 1..12; samples/async-sparse: async progress
tracking, offsets = commits = {0, 1, 3, 5, ..., 29, 31}), damaged with plain file operations. The expected
numbers are read off the file names by hand (batch b writes state version b + 1)."""

from __future__ import annotations

import shutil
from pathlib import Path

from ckptfix.audit import audit
from ckptfix.repair import engine
from ckptfix.repair.planning import plan_repair
from ckptfix.storage import Location

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def copy(sample: str, tmp_path: Path) -> Path:
    dest = tmp_path / sample
    shutil.copytree(SAMPLES / sample, dest)
    return dest


def test_state_ahead_and_commit_ahead_name_the_version_spark_loads(tmp_path: Path) -> None:
    """offsets/11 lost: the plan deletes commits/11 and state version 12; Spark then resumes at batch 11 from
    commits/10, loading version 11 (written by batch 10). Every effect says 11, and so does the audit after."""
    ckpt = copy("rocksdb-changelog", tmp_path)
    (ckpt / "offsets" / "11").unlink()
    (ckpt / "offsets" / ".11.crc").unlink()
    plan, _report, unfixed = plan_repair(str(ckpt), "4.3")
    assert not unfixed and {"LOG-COMMIT-AHEAD", "STATE-AHEAD"} <= set(plan.fixes)
    loads = [e for e in plan.effects if "Spark loads state version" in e]
    assert len(loads) == 2, plan.effects
    assert all("Spark loads state version 11 " in e for e in loads), loads
    engine.apply(plan, Location(str(ckpt)), Location(str(tmp_path / "backup")), force=True)
    after = audit(str(ckpt), "4.3")
    assert after.verdict.restarts is True
    assert not (ckpt / "state" / "0" / "0" / "12.zip").exists()
    assert (ckpt / "state" / "0" / "0" / "11.changelog").exists()


def test_an_unreadable_metadata_file_is_not_called_missing(tmp_path: Path) -> None:
    """New-user trial: for a garbage `metadata` the repair's reason said "Without the file Spark refuses to start",
    while the file is there and Spark fails parsing it."""
    import tarfile

    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "spark-4.3.0" / "agg_hdfs.tar.gz"
    with tarfile.open(fixture) as tar:
        tar.extractall(tmp_path, filter="data")
    (tmp_path / "ckpt" / "metadata").write_bytes(b"garbage\x00\xff")
    _plan, _report, unfixed = plan_repair(str(tmp_path / "ckpt"))
    (reason,) = [u.reason for u in unfixed if u.rule_id == "META-UNREADABLE"]
    assert "Without the file" not in reason and "the file stays unreadable" in reason, reason
