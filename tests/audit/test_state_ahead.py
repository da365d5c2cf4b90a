"""STATE-AHEAD on Spark's own files: the recorded bases (tests/fixtures/spark-<version>/) rolled back by hand with the
damage catalogue's ``state_ahead_*`` cases (offsets/ and commits/ deleted, state/ left). What Spark does with them
is recorded (tests/fixtures/spark-*/outcomes.json) and run live (tests/audit/test_restart_prediction.py,
tests/repair/test_state_ahead_live.py); here: what the audit says, and that `ckptfix repair` removes the files."""

from __future__ import annotations

import re
import tarfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ckptfix.audit import audit
from ckptfix.cli.main import app
from ckptfix.repair import engine
from ckptfix.repair.planning import plan_repair
from ckptfix.storage import Location
from tests.spark.damage import CASES

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
VERSIONS = ["3.5.9", "4.0.5", "4.1.4", "4.2.1"]


def damaged(version: str, case: str, dest: Path) -> Path:
    c = CASES[case]
    with tarfile.open(FIXTURES / f"spark-{version}" / f"{c.scenario}.tar.gz") as tar:
        tar.extractall(dest, filter="data")
    ckpt = dest / "ckpt"
    c.apply(ckpt)
    return ckpt


def ahead(report: object) -> list:
    return [f for f in report.findings if f.rule_id == "STATE-AHEAD"]  # type: ignore[attr-defined]


def state_files(ckpt: Path) -> set[str]:
    return {
        str(p.relative_to(ckpt))
        for p in (ckpt / "state").rglob("*")
        if p.is_file() and re.fullmatch(r"[0-9]+\.(delta|snapshot|zip|changelog)", p.name)
    }


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(
    ("case", "kind", "step"),
    [
        ("state_ahead_snapshot_hand_rollback", "snapshot", "delta"),
        ("state_ahead_zip_hand_rollback", "zip", "changelog"),
    ],
)
def test_a_stale_snapshot_is_a_silent_error(version: str, case: str, kind: str, step: str, tmp_path: Path) -> None:
    """An HDFS snapshot, or a RocksDB zip with changelog checkpointing, of a version the restart writes again."""
    ckpt = damaged(version, case, tmp_path)
    report = audit(str(ckpt), version[:3])
    assert report.verdict.restarts is True
    errors = [f for f in ahead(report) if f.severity == "error"]
    assert len(errors) == 1 and errors[0].silent
    finding = errors[0]
    assert report.verdict.hazards == (finding.message,)
    # the base wrote snapshots of version 6; batches 5.. are rolled back: the offset log ends at batch 4
    assert "the offset log ends at batch 4" in finding.message
    assert all(f"/state/0/{p}/6.{kind}" in finding.message for p in range(3))
    assert "the next run that loads version 6 or later" in finding.message
    assert {Path(e.path).name for e in finding.evidence if e.path.endswith(kind)} == {f"6.{kind}"}
    assert f"`ckptfix repair {ckpt} --apply`" in finding.fix
    # the stale deltas / changelogs are reported apart, as harmless
    warnings = [f for f in ahead(report) if f.severity == "warning"]
    assert len(warnings) == 1 and not warnings[0].silent and f"6.{step}" in warnings[0].message


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(
    "case",
    [
        "state_ahead_delta_hand_rollback",
        "state_ahead_changelog_hand_rollback",
        "state_ahead_zips_hand_rollback_no_changelog",
    ],
)
def test_files_spark_writes_again_are_a_warning(version: str, case: str, tmp_path: Path) -> None:
    ckpt = damaged(version, case, tmp_path)
    report = audit(str(ckpt), version[:3])
    assert report.verdict.restarts is True and not report.verdict.hazards
    (finding,) = ahead(report)
    assert finding.severity == "warning" and not finding.silent
    assert "harmless" in finding.message
    assert not report.fails("error") or any(f.severity == "error" for f in report.findings if f is not finding)


@pytest.mark.parametrize("scenario", ["agg_hdfs", "agg_rocksdb_cl", "agg_rocksdb"])
def test_nothing_on_spark_written_checkpoints(scenario: str, tmp_path: Path) -> None:
    """The base as Spark left it, and the crash window (commits/L gone, state version L+1 written: Spark replays
    batch L with the same offsets), have no state beyond the offset log."""
    with tarfile.open(FIXTURES / "spark-4.2.1" / f"{scenario}.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    ckpt = tmp_path / "ckpt"
    assert not ahead(audit(str(ckpt), "4.2"))
    CASES["commit_latest_missing"].apply(ckpt)
    assert (ckpt / "state/0/0").is_dir() and not ahead(audit(str(ckpt), "4.2"))


def test_repair_deletes_the_versions_beyond_the_offset_log(tmp_path: Path) -> None:
    ckpt = damaged("3.5.9", "state_ahead_snapshot_hand_rollback", tmp_path)
    before = state_files(ckpt)
    plan, _report, unfixed = plan_repair(str(ckpt), "3.5")
    assert "STATE-AHEAD" in plan.fixes and not unfixed
    engine.apply(plan, Location(str(ckpt)), Location(str(ckpt / "_ckptfix")), idle_seconds=0)
    after = state_files(ckpt)
    gone = before - after
    assert gone and all(int(Path(p).name.split(".")[0]) > 5 for p in gone)
    assert all(int(Path(p).name.split(".")[0]) <= 5 for p in after)
    report = audit(str(ckpt), "3.5")
    assert report.verdict.restarts is True and not ahead(report) and not report.verdict.hazards


def test_the_fix_command_runs(tmp_path: Path) -> None:
    """The command the finding's fix names, run as it is written (plus --idle-seconds 0: the files were just
    extracted), leaves a checkpoint without the finding."""
    ckpt = damaged("4.2.1", "state_ahead_snapshot_hand_rollback", tmp_path)
    finding = next(f for f in audit(str(ckpt), "4.2").findings if f.rule_id == "STATE-AHEAD" and f.severity == "error")
    command = re.search(r"`ckptfix (repair [^`]+)`", finding.fix)
    assert command is not None
    result = CliRunner().invoke(app, [*command.group(1).split(), "--target-spark", "4.2", "--idle-seconds", "0"])
    assert result.exit_code == 0, result.output
    assert not ahead(audit(str(ckpt), "4.2"))
