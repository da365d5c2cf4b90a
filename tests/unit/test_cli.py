"""Every command in every format on real checkpoints; bad input gives one line and exit 2."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import run_cli
from tests.unit.realckpt import sample_checkpoint

COMMANDS = [["inspect"], ["audit"], ["audit", "--deep"], ["audit", "--target-spark", "3.5"], ["rules"]]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args)


@pytest.mark.parametrize("cmd", COMMANDS, ids=" ".join)
@pytest.mark.parametrize("fmt", ["text", "json"])
def test_every_command_in_every_format(cmd: list[str], fmt: str) -> None:
    ckpt = str(sample_checkpoint())
    args = [*cmd, "--format", fmt] + ([] if cmd == ["rules"] else [ckpt])
    proc = run(*args)
    assert proc.returncode in (0, 1), proc.stderr
    assert proc.stdout.strip(), f"{args} printed nothing"
    assert "Traceback" not in proc.stderr
    if fmt == "json":
        doc = json.loads(proc.stdout)
        assert doc


def test_audit_json_carries_the_verdict_of_the_sample() -> None:
    proc = run("audit", str(sample_checkpoint()), "--format", "json")
    doc = json.loads(proc.stdout)
    # the sample is a real checkpoint left by asynchronous progress tracking (samples/README.md)
    assert doc["verdict"]["restarts"] is False
    assert doc["verdict"]["blocking_rule"] == "LOG-ASYNC-GAP"
    assert proc.returncode == 1


@pytest.fixture
def damaged(tmp_path: Path) -> Path:
    dst = tmp_path / "ckpt"
    shutil.copytree(sample_checkpoint(), dst)
    return dst


def _one_line_error(proc: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr + proc.stdout
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    for n in needles:
        assert n in lines[0]


def test_wrong_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    _one_line_error(run("audit", str(missing)), str(missing), "no such file")
    proc = run("inspect", str(missing), "--format", "json")
    assert proc.returncode == 2
    assert json.loads(proc.stdout)["error"]["kind"] == "FileNotFoundError"


def test_not_a_checkpoint(tmp_path: Path) -> None:
    (tmp_path / "hello.txt").write_text("hi")
    _one_line_error(
        run("audit", str(tmp_path)), str(tmp_path), "expected a Structured Streaming checkpoint", "hello.txt"
    )


def test_a_file_instead_of_a_directory(tmp_path: Path) -> None:
    f = tmp_path / "f"
    f.write_text("x")
    _one_line_error(run("inspect", str(f)), str(f), "expected a directory")


def test_permission_denied(damaged: Path) -> None:
    """As root (CI), the CLI runs without the capabilities that bypass file modes."""
    prefix: list[str] = []
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root without setpriv: file modes cannot be enforced")
        prefix = [setpriv, "--bounding-set", "-dac_override,-dac_read_search"]
    (damaged / "offsets").chmod(0)
    try:
        proc = subprocess.run(
            [*prefix, sys.executable, "-m", "ckptfix.cli.main", "audit", str(damaged)],
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        (damaged / "offsets").chmod(0o755)
    _one_line_error(proc, "permission denied", str(damaged / "offsets"))


def test_unknown_target_and_bad_option(damaged: Path) -> None:
    _one_line_error(run("audit", str(damaged), "--target-spark", "9.9"), "--target-spark", "9.9")
    proc = run("audit", str(damaged), "--no-such-flag", "--format", "json")
    assert proc.returncode == 2 and "error" in json.loads(proc.stdout)
    _one_line_error(run("audit", str(damaged), "-o", "novalue"), "key=value")


@pytest.mark.parametrize(
    ("typo", "said"),
    [
        (["audti", "x"], "No such command 'audti'. Did you mean 'audit'?"),
        (["stat", "ls"], "No such command 'stat'. Did you mean 'state'?"),
        (["state", "reed"], "No such command 'reed'. Did you mean 'read'?"),
        (["xyzzy"], "No such command 'xyzzy'."),
    ],
)
def test_a_mistyped_command_gets_the_nearest_name(typo: list[str], said: str) -> None:
    proc = run(*typo)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == f"ckptfix: error: {said}\n"


def test_corrupt_files_are_findings_not_crashes(damaged: Path) -> None:
    latest = max(int(p.name) for p in (damaged / "offsets").iterdir() if p.name.isdigit())
    (damaged / "offsets" / str(latest)).write_bytes(b"\x00\xff garbage \x89PNG")
    (damaged / "metadata").write_bytes(b"")
    proc = run("audit", str(damaged), "--format", "json")
    assert proc.returncode == 1
    doc = json.loads(proc.stdout)
    rules = {f["rule_id"] for f in doc["findings"]}
    assert {"META-UNREADABLE", "LOG-UNREADABLE"} <= rules
    bad = next(f for f in doc["findings"] if f["rule_id"] == "LOG-UNREADABLE")
    ev = bad["evidence"][0]
    # Spark reads the log through a strict UTF-8 decoder: the 0xff at byte 1 fails it before the version check
    assert ev["path"].endswith(f"offsets/{latest}") and ev["offset"] == 1 and "UTF-8" in ev["expected"]
    text = run("inspect", str(damaged))
    assert text.returncode == 0 and "problem" in text.stdout and "Traceback" not in text.stderr


def test_fail_on_levels(damaged: Path) -> None:
    assert run("audit", str(damaged), "--fail-on", "never").returncode == 0
    assert run("audit", str(damaged), "--fail-on", "error").returncode == 1
