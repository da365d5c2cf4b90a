"""A run that fails after it changed files (here: the file system refuses a write half way, as a full disk or a
lost permission does) says so on its one error line, with the run id and both ways on (`apply --resume`, `undo`),
instead of only the storage error; each of them then works. The refusal is made real with ``chattr +i`` on
``commits/`` (root on ext4/xfs/btrfs); the test is skipped where that does not stop a write."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from ckptfix.audit import audit
from tests.support.cli import run_cli

MATRIX = Path(__file__).resolve().parents[1] / "fixtures" / "matrix"


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args)


def _digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "_ckptfix" not in p.relative_to(root).parts
    }


@pytest.fixture
def frozen_commits(tmp_path: Path) -> Iterator[Path]:
    with tarfile.open(MATRIX / "4.3.0" / "agg_hdfs.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    ckpt = tmp_path / "ckpt"
    commits = ckpt / "commits"
    if shutil.which("chattr") is None:
        pytest.skip("no chattr here")
    if subprocess.run(["chattr", "+i", str(commits)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not supported here")
    try:
        (commits / "probe").write_text("x")
    except OSError:
        pass
    else:
        subprocess.run(["chattr", "-i", str(commits)], check=True)
        pytest.skip("an immutable directory still takes new files here")
    try:
        yield ckpt
    finally:
        subprocess.run(["chattr", "-i", str(commits)], check=False)


@pytest.mark.parametrize("then", ["resume", "undo"])
def test_a_run_that_fails_half_way_says_how_to_go_on(frozen_commits: Path, then: str) -> None:
    ckpt = frozen_commits
    subprocess.run(["chattr", "-i", str(ckpt / "commits")], check=True)
    original = _digest(ckpt)
    subprocess.run(["chattr", "+i", str(ckpt / "commits")], check=True)
    proc = _cli("state", "repartition", str(ckpt), "--partitions", "3", "--apply", "--idle-seconds", "0")
    assert proc.returncode == 2
    line = proc.stderr.strip()
    assert "\n" not in line, line
    found = re.fullmatch(
        rf"ckptfix: error: {re.escape(str(ckpt))}/commits/\d+: .*; run (\S+) stopped part way, its journal and "
        rf"backups are kept: `ckptfix apply --resume {re.escape(str(ckpt))}` finishes it, "
        rf"`ckptfix undo {re.escape(str(ckpt))} (\S+)` restores every file",
        line,
    )
    assert found is not None, line
    assert found.group(1) == found.group(2)
    assert _digest(ckpt) != original, "the run wrote nothing before the refused write"
    subprocess.run(["chattr", "-i", str(ckpt / "commits")], check=True)
    if then == "resume":
        done = _cli("apply", "--resume", str(ckpt))
        assert done.returncode == 0, done.stderr
        assert audit(str(ckpt)).verdict.restarts is True
        assert (ckpt / "offsets" / "3").exists() and (ckpt / "commits" / "3").exists()
    else:
        done = _cli("undo", str(ckpt), found.group(1))
        assert done.returncode == 0, done.stderr
        assert _digest(ckpt) == original


def test_no_second_run_starts_on_top_of_an_interrupted_one(frozen_commits: Path) -> None:
    """After the run above stopped half way, every command that would start a run on the checkpoint refuses (exit 2,
    one line naming the run and the exact commands that finish or undo it) and writes nothing; `history` still shows
    one incomplete run. Once it is resumed, the same command runs."""
    ckpt = frozen_commits
    plan_file = ckpt.parent / "rollback.json"
    saved = _cli("rollback", str(ckpt), "--to-batch", "0", "--plan-out", str(plan_file), "-q")
    assert saved.returncode == 0, saved.stderr
    proc = _cli("state", "repartition", str(ckpt), "--partitions", "3", "--apply", "--idle-seconds", "0")
    assert proc.returncode == 2
    run_id = re.search(r"run (\S+) stopped part way", proc.stderr)
    assert run_id is not None, proc.stderr
    run = run_id.group(1)
    subprocess.run(["chattr", "-i", str(ckpt / "commits")], check=True)
    half_way = _digest(ckpt)
    c, r = re.escape(str(ckpt)), re.escape(run)
    expected = (
        rf"ckptfix: error: {c}: expected no interrupted ckptfix run, found run {r} \(STATE-REPARTITION: [^\n]*\) "
        rf"stopped part way: `ckptfix apply --resume {c} --run {r}` finishes it, `ckptfix undo {c} {r}` restores "
        r"every file it changed; then run this command again"
    )
    for command in (
        ["rollback", str(ckpt), "--to-batch", "1", "--apply", "--idle-seconds", "0"],
        ["apply", str(plan_file), "--idle-seconds", "0"],
    ):
        again = _cli(*command)
        assert again.returncode == 2, (command, again.stdout, again.stderr)
        line = again.stderr.strip()
        assert re.fullmatch(expected, line), (command, line)
        assert _digest(ckpt) == half_way
    history = _cli("history", str(ckpt), "--format", "json")
    statuses = [r["status"] for r in json.loads(history.stdout)["runs"]]
    assert statuses == ["incomplete"], statuses
    # a dry run plans, and says that its --apply would be refused, and why (new-user trial)
    dry = _cli("rollback", str(ckpt), "--to-batch", "1")
    assert dry.returncode == 0, dry.stderr
    assert "--apply will refuse for now" in dry.stderr and run in dry.stderr, dry.stderr
    assert _digest(ckpt) == half_way
    # an undo of a run that does not exist names the ones that do
    wrong = _cli("undo", str(ckpt), "no-such-run")
    assert wrong.returncode == 2 and f"runs recorded here: {run}" in wrong.stderr, wrong.stderr
    # the commands it names work, and then the refused command runs
    assert _cli("apply", "--resume", str(ckpt), "--run", run).returncode == 0
    done = _cli("rollback", str(ckpt), "--to-batch", "1", "--apply", "--idle-seconds", "0")
    assert done.returncode == 0, done.stderr
