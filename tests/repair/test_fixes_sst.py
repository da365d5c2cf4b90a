"""`ckptfix repair` past a damaged SST: Spark 3.5.9-4.1.4 cannot load a zip whose SST fails a block checksum
(recorded, tests/spark/damage.py ``rocksdb_sst_index_flipped_no_crc``: ``RocksDBException: block checksum
mismatch``), and have no auto snapshot repair. The repair writes version N again from the newest zip that loads
plus the changelogs after it (``state rebuild``), which the restart then loads: the audit of the recorded Spark's
base, damaged as Spark saw it, turns from that error to a restart, and the state read back equals the undamaged
base's, key for key."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from ckptfix.audit import audit
from ckptfix.repair import engine
from ckptfix.repair.planning import plan_repair
from ckptfix.state.export import to_json_line
from ckptfix.state.read import read_state
from ckptfix.storage import Location
from tests.spark.damage import CASES, _newest_zip_sst, sst_footer_handles

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def extract(version: str, scenario: str, dest: Path) -> Path:
    with tarfile.open(FIXTURES / f"spark-{version}" / f"{scenario}.tar.gz") as tar:
        tar.extractall(dest, filter="data")
    return dest / "ckpt"


@pytest.mark.parametrize("version", ["3.5.9", "4.1.4"])
@pytest.mark.parametrize("name", ["rocksdb_sst_index_flipped_no_crc", "rocksdb_sst_flipped_byte"])
def test_repair_rebuilds_past_a_damaged_sst(tmp_path: Path, version: str, name: str) -> None:
    case = CASES[name]
    target = version.rsplit(".", 1)[0]
    good = sorted(to_json_line(r) for r in read_state(str(extract(version, case.scenario, tmp_path / "good"))))
    ckpt = extract(version, case.scenario, tmp_path / "bad")
    case.apply(ckpt)
    before = audit(str(ckpt), target)
    assert before.verdict.restarts is False and before.verdict.blocking_rule == "STATE-SST-CORRUPT", before.verdict

    plan, _report, unfixed = plan_repair(str(ckpt), target)
    assert unfixed == [], unfixed
    assert plan.actions and all(a.path.startswith("state/0/0/") for a in plan.actions), plan.actions
    engine.apply(plan, Location(str(ckpt)), Location(str(ckpt / "_ckptfix")), idle_seconds=0)
    after = audit(str(ckpt), target)
    assert after.verdict.restarts is True, after.verdict
    assert sorted(to_json_line(r) for r in read_state(str(ckpt))) == good


@pytest.mark.parametrize("target", ["4.1", "4.3"])
def test_a_sidecar_mismatch_ckptfix_reads_past_is_still_rebuilt(tmp_path: Path, target: str) -> None:
    """A flipped byte in the bloom filter block, its Hadoop .crc kept (found by a new user's trial): ckptfix's
    reader never reads that block, but Spark copies the SST through the checksummed file system first and fails
    (``ChecksumException``, recorded with ``rocksdb_sst_flipped_byte``; 4.2+ with changelogs load an older zip).
    The repair once answered "version N already loads from a good snapshot"; it writes version N again from the
    older zip and the changelogs, also where Spark falls back by itself (4.3: a warning the fix text promised to
    fix)."""
    good = sorted(to_json_line(r) for r in read_state(str(extract("4.1.4", "agg_rocksdb_cl", tmp_path / "good"))))
    ckpt = extract("4.1.4", "agg_rocksdb_cl", tmp_path / "bad")
    sst = _newest_zip_sst(ckpt)
    data = bytearray(sst.read_bytes())
    _meta, (index_offset, _size) = sst_footer_handles(bytes(data))
    data[index_offset - 10] ^= 0xFF  # the filter block sits right before the index
    sst.write_bytes(bytes(data))
    before = audit(str(ckpt), target)
    assert [f.rule_id for f in before.findings if f.rule_id.startswith("STATE-")] == ["STATE-SST-CORRUPT"]
    assert before.verdict.restarts is (target == "4.3"), before.verdict

    plan, _report, unfixed = plan_repair(str(ckpt), target)
    assert unfixed == [] and not plan.empty, unfixed
    engine.apply(plan, Location(str(ckpt)), Location(str(ckpt / "_ckptfix")), idle_seconds=0)
    after = audit(str(ckpt), target)
    assert after.verdict.restarts is True and not [f for f in after.findings if f.rule_id.startswith("STATE-")]
    assert sorted(to_json_line(r) for r in read_state(str(ckpt))) == good


def test_without_changelogs_nothing_older_reaches_the_version(tmp_path: Path) -> None:
    """Without changelog checkpointing version N lives only in N.zip: the repair says so instead of guessing."""
    case = CASES["rocksdb_sst_index_flipped_no_crc_no_changelog"]
    ckpt = extract("3.5.9", case.scenario, tmp_path / "bad")
    case.apply(ckpt)
    _plan, _report, unfixed = plan_repair(str(ckpt), "3.5")
    assert [u.rule_id for u in unfixed] == ["STATE-SST-CORRUPT"], unfixed
    reason = unfixed[0].reason
    # version 1's zip lists no SST the damaged table (written later) is one of: a rollback to batch 0 loads it
    # (the audit's target, 3.5, goes with it: the rollback audits the result for the same Spark)
    assert "found a damaged one" in reason, reason
    assert f"`ckptfix rollback {ckpt} --to-batch 0 --target-spark 3.5`" in reason, reason


def test_when_no_older_version_loads_the_fix_says_so(tmp_path: Path) -> None:
    """Every SST of the newest zips deleted: the older zips list them too, so no rollback loads (`rollback` refuses
    every batch); the reason says so and names the way out, instead of a rollback that cannot work."""
    case = CASES["rocksdb_sst_missing_no_changelog"]
    ckpt = extract("3.5.9", case.scenario, tmp_path / "bad")
    case.apply(ckpt)
    _plan, _report, unfixed = plan_repair(str(ckpt), "3.5")
    reason = unfixed[0].reason
    assert "no older version of state/0/0 loads either" in reason and "ckptfix offsets export" in reason, reason
    assert "--to-batch" not in reason, reason


def test_repair_takes_the_restarting_sessions_conf(tmp_path: Path) -> None:
    """Spark 4.2+ with changelog checkpointing loads an older zip past the damaged SST by itself (recorded on
    4.2.1), unless the session turns its auto snapshot repair off: `repair --conf` plans for that session, as
    `audit --conf` judges it, and `--apply` checks the result with the same conf."""
    import json

    from typer.testing import CliRunner

    from ckptfix.cli.main import app

    case = CASES["rocksdb_sst_index_flipped_no_crc"]
    ckpt = extract("4.2.1", case.scenario, tmp_path / "bad")
    case.apply(ckpt)
    off = ["--conf", "spark.sql.streaming.stateStore.autoSnapshotRepair.enabled=false"]
    runner = CliRunner()
    plain = runner.invoke(app, ["repair", str(ckpt), "--target-spark", "4.2", "--format", "json"])
    assert plain.exit_code == 0, plain.output
    # 4.2 restarts it as it is (a warning); the repair writes the version again all the same
    assert audit(str(ckpt), "4.2").verdict.restarts is True
    assert "state/0/0/8.zip" in [a["path"] for a in json.loads(plain.stdout)["plan"]["actions"]], plain.stdout
    audited = runner.invoke(app, ["audit", str(ckpt), "--target-spark", "4.2", *off])
    assert audited.exit_code == 1 and "block checksum mismatch" in audited.stdout, audited.output
    planned = runner.invoke(app, ["repair", str(ckpt), "--target-spark", "4.2", *off, "--format", "json"])
    assert planned.exit_code == 0, planned.output
    assert json.loads(planned.stdout)["plan"]["actions"], planned.stdout
    applied = runner.invoke(
        app, ["repair", str(ckpt), "--target-spark", "4.2", *off, "--apply", "--force", "--idle-seconds", "0"]
    )
    assert applied.exit_code == 0, applied.output
    assert audit(str(ckpt), "4.2", session_conf=dict([off[1].split("=")])).verdict.restarts is True
