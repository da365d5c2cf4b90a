"""The repair engine refuses unsafe plans before the first write, takes a lock, and cleans its own temp
files on recovery (issue 16 #3, #4, #5). Plans are made by ckptfix's planner for a real checkpoint Spark wrote
(samples/async-sparse: "batch 30 doesn't exist"), then altered the way a hand-edited or buggy plan would be."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from ckptfix.repair import engine
from ckptfix.repair.plan import Action, FileState, Plan, PlanError
from ckptfix.repair.planning import plan_repair
from ckptfix.storage import Location

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "samples" / "async-sparse"


def tree(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in root.rglob("*") if p.is_file()
    }


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Path, Location, Location, Plan]:
    ckpt = tmp_path / "ckpt"
    shutil.copytree(SAMPLE, ckpt)
    plan, _, unfixed = plan_repair(str(ckpt))
    assert not unfixed and len(plan.actions) >= 1
    return ckpt, Location(str(ckpt)), Location(str(tmp_path / "backup")), plan


def refused(plan: Plan, ckpt: Path, loc: Location, backup: Location, match: str) -> None:
    before = tree(ckpt)
    with pytest.raises(PlanError, match=match):
        engine.apply(plan, loc, backup, force=True)
    assert tree(ckpt) == before
    assert not Path(backup.url).exists() or not list(Path(backup.url).rglob("plan.json"))


def test_two_actions_on_one_path(setup: tuple[Path, Location, Location, Plan]) -> None:
    ckpt, loc, backup, plan = setup
    twice = dataclasses.replace(plan, actions=(*plan.actions, plan.actions[0]))
    refused(twice, ckpt, loc, backup, "one action per path")


def test_never_delete_metadata(setup: tuple[Path, Location, Location, Plan]) -> None:
    ckpt, loc, backup, plan = setup
    data = (ckpt / "metadata").read_bytes()
    delete = Action("delete", "metadata", FileState.of(data), reason="hand-made")
    refused(dataclasses.replace(plan, actions=(*plan.actions, delete)), ckpt, loc, backup, "never deleted")


def test_written_offsets_must_parse(setup: tuple[Path, Location, Location, Plan]) -> None:
    ckpt, loc, backup, plan = setup
    bad = [
        dataclasses.replace(a, content=b"v1\n{not json") if a.path.startswith("offsets/") else a for a in plan.actions
    ]
    assert bad != list(plan.actions)
    refused(dataclasses.replace(plan, actions=tuple(bad)), ckpt, loc, backup, "Spark cannot read")


def test_plan_of_another_query(setup: tuple[Path, Location, Location, Plan]) -> None:
    ckpt, loc, backup, plan = setup
    refused(dataclasses.replace(plan, query_id=str(uuid.uuid4())), ckpt, loc, backup, "another query")


def test_nothing_in_the_backup_store(setup: tuple[Path, Location, Location, Plan]) -> None:
    ckpt, loc, _, plan = setup
    inside = Location(str(ckpt / "_ckptfix"))  # the default backup location
    sneaky = Action("write", "_ckptfix/objects/x", FileState(False), b"x", reason="hand-made")
    refused(dataclasses.replace(plan, actions=(*plan.actions, sneaky)), ckpt, loc, inside, "backup store")


HOLDER = r"""
import sys, time
from ckptfix.repair import engine
from ckptfix.storage import Location
with engine.locked(Location(sys.argv[1]), "apply"):
    print("HELD", flush=True)
    time.sleep(60)
"""


def test_a_second_run_says_who_holds_the_lock(setup: tuple[Path, Location, Location, Plan]) -> None:
    ckpt, loc, backup, plan = setup
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, backup.url], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "HELD"
        before = tree(ckpt)
        with pytest.raises(engine.Locked, match=f"pid {holder.pid} on {socket.gethostname()}"):
            engine.apply(plan, loc, backup, force=True)
        assert tree(ckpt) == before
    finally:
        holder.kill()
        holder.wait()
    # its owner was killed: the lock is stale and the next run takes it over
    run_id = engine.apply(plan, loc, backup, force=True)
    assert engine.Runs(backup).info(run_id).status == "complete"
    assert not (Path(backup.url) / engine.LOCK).exists()


def test_recovery_removes_own_temp_files(setup: tuple[Path, Location, Location, Plan]) -> None:
    ckpt, loc, backup, plan = setup
    before = tree(ckpt)
    env = {**os.environ, engine.CRASH_ENV: "3"}  # killed after the plan, the start line and one backup
    code = (
        "import sys; from ckptfix.repair import engine, plan as P; from ckptfix.storage import Location\n"
        "p = P.loads(open(sys.argv[1]).read())\n"
        "engine.apply(p, Location(sys.argv[2]), Location(sys.argv[3]), force=True)\n"
    )
    plan_file = Path(backup.url).parent / "plan.json"
    plan_file.write_text(plan.dumps())
    proc = subprocess.run([sys.executable, "-c", code, str(plan_file), loc.url, backup.url], env=env, cwd=ROOT)
    assert proc.returncode == -signal.SIGKILL
    # what a kill between a temp file's fsync and its rename leaves next to a file the plan writes
    target = ckpt / plan.actions[0].path
    stray = target.parent / f".{target.name}.{uuid.uuid4()}.ckptfix.tmp"
    stray.write_bytes(b"partial")
    other = target.parent / ".unrelated.tmp"  # not ckptfix's: left alone
    other.write_bytes(b"x")
    run_id = engine.resume(loc, backup)
    assert not stray.exists() and other.exists()
    assert engine.Runs(backup).info(run_id).status == "complete"
    other.unlink()
    stray.write_bytes(b"partial")  # a killed undo of an earlier attempt may leave one too
    engine.undo(loc, backup, run_id)
    assert tree(ckpt) == before
    lock = (
        json.loads((Path(backup.url) / engine.LOCK).read_text()) if (Path(backup.url) / engine.LOCK).exists() else None
    )
    assert lock is None


def age(root: Path, seconds: float = 3600) -> None:
    then = time.time() - seconds
    for p in root.rglob("*"):
        os.utime(p, (then, then), follow_symlinks=False)


def test_idle_guard_says_what_it_saw_and_knows_its_own_writes(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    shutil.copytree(SAMPLE, ckpt, copy_function=shutil.copy)  # fresh mtimes: what `cp -r` leaves
    plan, _, _ = plan_repair(str(ckpt))
    loc, backup = Location(str(ckpt)), Location(str(tmp_path / "backup"))
    with pytest.raises(engine.LiveQuery) as info:
        engine.apply(plan, loc, backup)
    text = str(info.value)
    assert "s ago): is the query running?" in text and "as a copy writes them" in text and "--force" in text
    age(ckpt)  # an idle checkpoint
    run_id = engine.apply(plan, loc, backup)
    # the files the run just wrote are ckptfix's own: undo right away needs no --force
    engine.undo(loc, backup, run_id)


def test_a_write_during_the_run_is_caught_and_undoable(tmp_path: Path) -> None:
    """A file written by something else while a run applies (here: when the run reports its first step, as a
    live query's next offset file would appear) stops the run before its last write, journaled, with the undo
    command. A file written just before the run is not taken for one (the run compares listings, not clocks)."""
    ckpt = tmp_path / "ckpt"
    shutil.copytree(SAMPLE, ckpt)
    age(ckpt)
    before = tree(ckpt)
    plan, _, _ = plan_repair(str(ckpt))
    loc, backup = Location(str(ckpt)), Location(str(tmp_path / "backup"))
    live = ckpt / "offsets" / "32"

    def query_writes(_message: str) -> None:
        if not live.exists():
            live.write_bytes((ckpt / "offsets" / "31").read_bytes())

    with pytest.raises(engine.LiveQuery, match=r"offsets/32: written by something else during run .*ckptfix undo"):
        engine.apply(plan, loc, backup, force=True, progress=query_writes)
    run_id = engine.Runs(backup).run_ids()[-1]
    assert "foreign-writes" in [e["event"] for e in engine.Runs(backup).events(run_id)]
    live.unlink()
    engine.undo(loc, backup, run_id, force=True)
    assert tree(ckpt) == before


def test_apply_that_leaves_a_failing_checkpoint_exits_non_zero(tmp_path: Path) -> None:
    """The user says the query is stateful but state/ is gone: repair fixes the offset gap, the state stays
    missing, so the result does not audit as restartable: exit 1 and the undo command, never exit 0."""
    from typer.testing import CliRunner

    from ckptfix.cli.main import app

    ckpt = tmp_path / "ckpt"
    shutil.copytree(SAMPLE, ckpt)
    # by default a plan that leaves an error unfixed is not applied at all (repair hunt 10: W01, W07, R04)
    held = CliRunner().invoke(app, ["repair", str(ckpt), "--apply", "--force", "--stateful"])
    assert held.exit_code == 1, held.output
    assert "not applied:" in held.stderr and "--partial" in held.stderr and "dry run" not in held.stderr
    assert not (ckpt / "_ckptfix").exists() and not (ckpt / "offsets" / "30").exists()
    result = CliRunner().invoke(app, ["repair", str(ckpt), "--apply", "--force", "--stateful", "--partial"])
    assert result.exit_code == 1, result.output
    assert "does not audit as restartable" in result.stderr and "ckptfix undo" in result.stderr


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ckptfix.cli.main", *args], capture_output=True, text=True, timeout=120
    )


def test_apply_plan_refuses_a_copy_whose_source_changed(tmp_path: Path) -> None:
    """The sample's plan writes offsets/30 as a copy of offsets/31 (batch 31 committed). offsets/31 changes after the
    plan was saved: `apply plan.json` refuses (exit 2, one line naming the file and both sha256) and writes nothing,
    instead of writing the copy and leaving an edited offsets/31 behind."""
    ckpt = tmp_path / "ckpt"
    shutil.copytree(SAMPLE, ckpt)
    plan_file = tmp_path / "plan.json"
    assert _cli("repair", str(ckpt), "--plan-out", str(plan_file), "-q").returncode == 0
    (action,) = json.loads(plan_file.read_text())["actions"]
    assert action["path"] == "offsets/30" and action["copy_of"]["path"] == "offsets/31"
    source = ckpt / "offsets" / "31"
    expected = hashlib.sha256(source.read_bytes()).hexdigest()
    with source.open("ab") as fh:
        fh.write(b"x\n")
    found = hashlib.sha256(source.read_bytes()).hexdigest()
    before = tree(ckpt)
    done = _cli("apply", str(plan_file), "--idle-seconds", "0")
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "offsets/31" in line and f"expected sha256 {expected}" in line and f"found sha256 {found}" in line, line
    assert tree(ckpt) == before
    assert not (ckpt / "offsets" / "30").exists()


def test_a_plan_whose_copy_does_not_match_its_source_is_refused(tmp_path: Path) -> None:
    """A hand-edited plan.json: the copy's content is no longer the source's bytes."""
    ckpt = tmp_path / "ckpt"
    shutil.copytree(SAMPLE, ckpt)
    plan_file = tmp_path / "plan.json"
    assert _cli("repair", str(ckpt), "--plan-out", str(plan_file), "-q").returncode == 0
    doc = json.loads(plan_file.read_text())
    doc["actions"][0]["copy_of"]["sha256"] = "0" * 64
    plan_file.write_text(json.dumps(doc))
    done = _cli("apply", str(plan_file), "--idle-seconds", "0")
    assert done.returncode == 2 and "copy_of: expected the content to be a copy of offsets/31" in done.stderr


def test_apply_plan_whose_result_restarts_silently_wrong_exits_1(tmp_path: Path) -> None:
    """docs/output.md: a run whose result does not audit as a clean restart exits 1. The plan (for Spark 3.5) is
    applied after metadata was lost: Spark 3.5 restarts, but silently under a new query id (a hazard)."""
    ckpt = tmp_path / "ckpt"
    shutil.copytree(SAMPLE, ckpt)
    plan_file = tmp_path / "plan.json"
    assert _cli("repair", str(ckpt), "--target-spark", "3.5", "--plan-out", str(plan_file), "-q").returncode == 0
    (ckpt / "metadata").unlink()
    done = _cli("apply", str(plan_file), "--idle-seconds", "0")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "restart this checkpoint, but silently" in done.stdout
    assert "does not audit as restartable" in done.stderr and "ckptfix undo" in done.stderr
    assert (ckpt / "offsets" / "30").exists()  # the run itself was done
