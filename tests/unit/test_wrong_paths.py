"""A mistyped or misplaced checkpoint path is an error that says what is there (exit 2, one line), never an
answer about nothing: ``history`` of a path that is not there is not "no runs recorded", ``undo`` not "nothing
to undo"; a path next to a checkpoint names the checkpoint."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.cli import run_cli
from tests.unit.realckpt import sample_checkpoint


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args)


@pytest.mark.parametrize("command", [["history"], ["undo"], ["apply", "--resume"]])
def test_a_path_that_is_not_there(command: list[str], tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    proc = _cli(*command, str(missing))
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"ckptfix: error: {missing}: no such file or directory"
    proc = _cli(*command, str(missing), "--format", "json")
    assert proc.returncode == 2
    assert json.loads(proc.stdout)["error"]["message"] == f"{missing}: no such file or directory"


@pytest.mark.parametrize("command", [["history"], ["undo"]])
def test_a_file_is_not_a_checkpoint(command: list[str]) -> None:
    proc = _cli(*command, str(sample_checkpoint() / "metadata"))
    assert proc.returncode == 2
    assert proc.stderr.strip().endswith("/metadata: expected a directory, found a file")


@pytest.mark.parametrize("command", [["history"], ["undo"], ["apply", "--resume"]])
def test_a_directory_that_is_not_a_checkpoint(command: list[str], tmp_path: Path) -> None:
    """Not "no ckptfix runs recorded" (exit 0): the error every other command gives."""
    (tmp_path / "photos").mkdir()
    proc = _cli(*command, str(tmp_path))
    assert proc.returncode == 2, proc.stdout
    assert proc.stderr.strip() == (
        f"ckptfix: error: {tmp_path}: expected a Structured Streaming checkpoint (metadata, offsets/, commits/ or "
        "state/), found entries photos"
    )
    proc = _cli(*command, str(tmp_path), "--format", "json")
    assert proc.returncode == 2 and json.loads(proc.stdout)["error"]["kind"] == "NotACheckpoint"


def test_history_of_a_file_sink_without_runs_is_empty(tmp_path: Path) -> None:
    """`rollback --with-sink` journals its runs in OUT/_ckptfix: a file sink is a place runs are recorded."""
    (tmp_path / "out" / "_spark_metadata").mkdir(parents=True)
    proc = _cli("history", str(tmp_path / "out"), "--format", "json")
    assert proc.returncode == 0 and json.loads(proc.stdout)["runs"] == []


def test_history_of_a_checkpoint_without_runs_is_empty(tmp_path: Path) -> None:
    shutil.copytree(sample_checkpoint(), tmp_path / "ckpt")
    proc = _cli("history", str(tmp_path / "ckpt"), "--format", "json")
    assert proc.returncode == 0 and json.loads(proc.stdout)["runs"] == []


def test_the_parent_of_a_checkpoint_names_it(tmp_path: Path) -> None:
    shutil.copytree(sample_checkpoint(), tmp_path / "ckpt")
    (tmp_path / "input").mkdir()
    proc = _cli("audit", str(tmp_path))
    assert proc.returncode == 2
    assert proc.stderr.strip().endswith(f"found entries ckpt, input; {tmp_path}/ckpt holds one: did you mean it?")


def test_a_directory_of_a_checkpoint_names_the_checkpoint(tmp_path: Path) -> None:
    shutil.copytree(sample_checkpoint(), tmp_path / "ckpt")
    proc = _cli("audit", str(tmp_path / "ckpt" / "offsets"))
    assert proc.returncode == 2
    assert proc.stderr.strip().endswith(
        f"this looks like the offsets/ directory of a checkpoint: did you mean {tmp_path}/ckpt?"
    )


@pytest.mark.parametrize("command", [["audit"], ["repair"], ["state", "ls"], ["history"]])
def test_an_empty_path_is_a_usage_error(command: list[str], tmp_path: Path) -> None:
    """``''`` is not the current directory (run from inside a checkpoint, it would audit that one)."""
    shutil.copytree(sample_checkpoint(), tmp_path / "ckpt")
    proc = run_cli(*command, "", cwd=tmp_path / "ckpt")
    assert proc.returncode == 2, proc.stdout
    assert proc.stderr == "ckptfix: error: expected a location (a path or URL), found an empty string\n"
    assert proc.stdout == ""


@pytest.mark.parametrize("make", ["missing", "directory"])
def test_apply_names_the_plan_file_it_cannot_read(make: str, tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    if make == "directory":
        plan.mkdir()
    found = "no such file" if make == "missing" else "a directory"
    proc = _cli("apply", str(plan))
    assert proc.returncode == 2
    assert proc.stderr == (
        f"ckptfix: error: {plan}: expected a plan file (written by `ckptfix repair --plan-out`), found {found}\n"
    )
