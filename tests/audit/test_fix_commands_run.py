"""A finding's fix names a command the user can paste: the checkpoint and the audit's --target-spark, never a
placeholder the CLI refuses (`--target-spark 4.x`). On tests/fixtures/state35/join_hdfs (a stream-stream join
Spark 3.5.9 wrote, which 4.x refuses: UPGRADE-JOIN-NULLABILITY), the command in the fix is run as printed."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from ckptfix.audit import audit

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "state35" / "join_hdfs.tar.gz"


@pytest.mark.parametrize("target", ["4.0", "4.3"])
def test_the_join_fix_command_runs_as_printed(target: str, tmp_path: Path) -> None:
    with tarfile.open(FIXTURE) as tar:
        tar.extractall(tmp_path, filter="data")
    ckpt = tmp_path / "ckpt"
    (finding,) = [f for f in audit(str(ckpt), target).findings if f.rule_id == "UPGRADE-JOIN-NULLABILITY"]
    command = re.search(r"`(ckptfix repair [^`]*)`", finding.fix)
    assert command is not None, finding.fix
    argv = shlex.split(command.group(1))
    assert argv == ["ckptfix", "repair", str(ckpt), "--target-spark", target, "--apply"]
    proc = subprocess.run(
        [sys.executable, "-m", "ckptfix.cli.main", *argv[1:], "--force"], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    assert not [f for f in audit(str(ckpt), target).findings if f.rule_id == "UPGRADE-JOIN-NULLABILITY"]


SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def test_a_corrupt_changelog_names_the_rollback_that_avoids_it(tmp_path: Path) -> None:
    """New-user trial: an empty state/0/1/12.changelog (12.zip gone) said "roll back before it (`ckptfix
    rollback`)", and the user had to guess the batch. The fix names batch 10 (state version 11 loads 9.zip and
    changelogs 10..11); the command, pasted with --apply, leaves a checkpoint the audit says restarts."""
    ckpt = tmp_path / "ck"
    shutil.copytree(SAMPLES / "rocksdb-changelog", ckpt)
    (ckpt / "state/0/1/12.changelog").write_bytes(b"")
    (ckpt / "state/0/1/12.zip").unlink()
    (finding,) = [f for f in audit(str(ckpt), "4.3").findings if f.rule_id == "STATE-FILE-CORRUPT"]
    command = re.search(r"`(ckptfix rollback [^`]*)`", finding.fix or "")
    assert command is not None, finding.fix
    argv = shlex.split(command.group(1))
    assert argv == ["ckptfix", "rollback", str(ckpt), "--to-batch", "10"]
    proc = subprocess.run(
        [sys.executable, "-m", "ckptfix.cli.main", *argv[1:], "--apply", "--force"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert audit(str(ckpt), "4.3").verdict.restarts


def test_an_offset_gap_under_stateful_operators_names_the_rollback_not_async_off(tmp_path: Path) -> None:
    """New-user trial: offsets/10 deleted in a stateful checkpoint; the audit's fix offered `ckptfix repair` or
    `ckptfix async-off`, and repair refused both. The audit now gives a way out that runs: with the latest batch
    committed, repair's copy of offsets/L (repair hunt 10, A11, proven live in tests/repair/test_fixes_spark.py)."""
    ckpt = tmp_path / "ck"
    shutil.copytree(SAMPLES / "rocksdb-changelog", ckpt)
    (ckpt / "offsets/10").unlink()
    (ckpt / "offsets/.10.crc").unlink()
    (finding,) = [f for f in audit(str(ckpt), "4.3").findings if f.rule_id == "LOG-ASYNC-GAP"]
    assert "async-off" not in (finding.fix or "") and "another cause" in (finding.fix or ""), finding.fix
    assert (ckpt / "commits" / "11").exists()  # the sample's latest batch is committed (uncommitted: the rollback,
    # tests/repair/test_repair_cli_hints.py)
    assert f"`ckptfix repair {ckpt}` writes offsets/10 as a copy of offsets/11" in (finding.fix or ""), finding.fix
    proc = subprocess.run(
        [sys.executable, "-m", "ckptfix.cli.main", "repair", str(ckpt), "--apply", "--force"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert audit(str(ckpt), "4.3").verdict.restarts


def test_commands_in_fixes_name_the_checkpoint(tmp_path: Path) -> None:
    """New-user trial: `ckptfix repair` (no path) and `ckptfix repair CKPT --accept-edits` in fix texts, run verbatim,
    failed ("Missing argument 'CHECKPOINT'"; "CKPT: no such file or directory"). Every command that takes the
    checkpoint first now names it; the repair named by a stale sidecar's fix runs as printed and keeps the commit."""
    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "spark-4.3.0" / "agg_hdfs.tar.gz"
    with tarfile.open(fixture) as tar:
        tar.extractall(tmp_path, filter="data")
    ckpt = tmp_path / "ckpt"
    shutil.copyfile(ckpt / "offsets" / ".3.crc", ckpt / "commits" / ".7.crc")  # a sidecar copied from another file
    report = audit(str(ckpt))
    texts = " ".join(f.fix + " " + f.message for f in report.findings)
    named = re.findall(r"`ckptfix (?:repair|rollback|audit|state rebuild|offsets export)([^`]*)`", texts)
    assert named and all(arg.split()[0] == str(ckpt) for arg in named), named
    command = re.search(r"`(ckptfix repair [^`]*--accept-edits[^`]*)`", texts)
    assert command is not None, texts
    argv = shlex.split(command.group(1))[1:] + ["--apply", "--idle-seconds", "0"]
    run = subprocess.run([sys.executable, "-m", "ckptfix.cli.main", *argv], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert (ckpt / "commits" / "7").exists()
    assert not [f for f in audit(str(ckpt)).findings if f.severity == "error"]


@pytest.mark.parametrize(
    ("version", "name", "rule"),
    [
        ("3.5.9", "rocksdb_sst_data_flipped_no_crc_no_changelog", "STATE-SST-CORRUPT"),
        ("4.1.4", "rocksdb_sst_flipped_byte", "STATE-SST-CORRUPT"),
        ("3.5.9", "rocksdb_zip_truncated", "STATE-FILE-CORRUPT"),
        ("4.0.5", "v2_commit_latest_ids_dropped", "STATE-V2-IDS-MISSING"),
    ],
)
def test_rollbacks_in_state_fixes_name_their_batch_and_run(version: str, name: str, rule: str, tmp_path: Path) -> None:
    """Repair hunt 13: the fixes of damaged SSTs and zips said "roll back before the zip that lists it (`ckptfix
    rollback CKPT`)", and STATE-V2-IDS-MISSING "`ckptfix rollback CKPT --to-batch N`": neither runs as pasted. On
    checkpoints Spark wrote (tests/fixtures/spark-<version>), damaged as the catalogue records, the fix names the
    batch, and the command pasted with --apply leaves a checkpoint the audit says restarts (the rollback's own check
    refuses one that would not)."""
    from tests.audit.test_restart_prediction import _recorded, run_audit

    case, target, _, ckpt, output = _recorded(version, name, tmp_path)
    for entry in (output / "_spark_metadata").glob("[0-9]*"):
        # the file sink's log names its files by absolute path, where the generator wrote them: the output moved
        # here, as `ckptfix migrate relocate` would move it (the rollback deletes only files inside the sink)
        text = entry.read_text()
        entry.write_text(re.sub(r"file://[^\"]*?/output/", f"file://{output}/", text))
    (finding,) = [f for f in run_audit(ckpt, target, output, case).findings if f.rule_id == rule]
    command = re.search(r"`(ckptfix rollback [^`]*)`", finding.fix or "")
    assert command is not None, finding.fix
    argv = shlex.split(command.group(1))
    assert argv[2] == str(ckpt) and argv[argv.index("--to-batch") + 1].isdigit(), argv
    proc = subprocess.run(
        [sys.executable, "-m", "ckptfix.cli.main", *argv[1:], "--apply", "--force"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert run_audit(ckpt, target, output, case).verdict.restarts


def test_a_directory_in_the_sink_log_is_moved_out_of_the_output_path(tmp_path: Path) -> None:
    """Hunt 14: a directory named like the file sink's next log entry; the fix said to move it "out of the
    checkpoint", where it is not."""
    from tests.audit.test_restart_prediction import _recorded, run_audit

    case, target, _, ckpt, output = _recorded("4.3.0", "filesink_metadata_directory_beyond_latest", tmp_path)
    (finding,) = [f for f in run_audit(ckpt, target, output, case).findings if f.rule_id == "LOG-ENTRY-DIRECTORY"]
    assert f"{output}/_spark_metadata/" in (finding.fix or "") and "out of the output path" in (finding.fix or "")
