"""The repair engine on a real checkpoint: preconditions, liveness, backups, journal, undo,
and a crash (the process dies like kill -9) after every durable write of an apply."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ckptfix.checkpoint import Checkpoint
from ckptfix.repair import engine
from ckptfix.repair.builder import PlanBuilder
from ckptfix.repair.plan import Plan, PlanError, loads
from ckptfix.storage import Location
from tests.support.cli import run_cli as _cli
from tests.support.trees import hadoop_crc, tree
from tests.unit.realckpt import sample_checkpoint

NEW_OFFSET = b'v1\n{"batchWatermarkMs":0,"batchTimestampMs":1,"conf":{}}\n{"hand":"written"}'
EDITED_29 = b'v1\n{"batchWatermarkMs":0,"batchTimestampMs":2,"conf":{}}\n{"also":"by hand"}'


@pytest.fixture
def ckpt(tmp_path: Path) -> Path:
    dst = tmp_path / "ckpt"
    shutil.copytree(sample_checkpoint(), dst)
    return dst


def small_plan(root: Path | str, options: dict[str, Any] | None = None) -> Plan:
    """Create offsets/30, replace offsets/29, delete commits/31 (sidecars follow)."""
    b = PlanBuilder(Checkpoint.open(str(root), options), "4.3")
    b.write("offsets/30", NEW_OFFSET, "test create")
    b.write("offsets/29", EDITED_29, "test replace")
    b.delete("commits/31", "test delete")
    return b.build("test plan", [], ["none"])


def expected_after(before: dict[str, str]) -> dict[str, str]:
    want = dict(before)
    want["offsets/30"] = hashlib.sha256(NEW_OFFSET).hexdigest()
    want["offsets/29"] = hashlib.sha256(EDITED_29).hexdigest()
    want["offsets/.29.crc"] = hashlib.sha256(hadoop_crc(EDITED_29)).hexdigest()
    del want["commits/31"], want["commits/.31.crc"]
    return want


def test_plan_expands_sidecars_and_round_trips(ckpt: Path) -> None:
    plan = small_plan(ckpt)
    assert [(a.op, a.path) for a in plan.actions] == [
        ("write", "offsets/30"),  # no sidecar existed: none is invented
        ("write", "offsets/29"),
        ("write", "offsets/.29.crc"),
        ("delete", "commits/31"),
        ("delete", "commits/.31.crc"),
    ]
    assert loads(plan.dumps()) == plan


def test_apply_then_undo_is_exact(ckpt: Path) -> None:
    before = tree(ckpt)
    loc, backup = Location(str(ckpt)), Location(str(ckpt / "_ckptfix"))
    run = engine.apply(small_plan(ckpt), loc, backup, force=True)
    assert tree(ckpt) == expected_after(before)
    objects = sorted(p.name for p in (ckpt / "_ckptfix" / "objects").iterdir())
    # every original that was replaced or deleted is kept under its own sha256
    assert set(objects) == {
        before["offsets/29"],
        before["offsets/.29.crc"],
        before["commits/31"],
        before["commits/.31.crc"],
    }
    engine.undo(loc, backup, run)
    assert tree(ckpt) == before
    assert engine.Runs(backup).info(run).status == "undone"


def test_preconditions_are_checked_again_before_writing(ckpt: Path) -> None:
    plan = small_plan(ckpt)
    (ckpt / "commits" / "31").write_bytes(b"v1\n{}")  # changed since the plan
    before = tree(ckpt)
    with pytest.raises(engine.PreconditionFailed, match=r"commits/31: expected 29 bytes, sha256 .* found 5 bytes"):
        engine.apply(plan, Location(str(ckpt)), Location(str(ckpt / "_ckptfix")), force=True)
    assert tree(ckpt) == before
    assert not (ckpt / "_ckptfix").exists()


def test_a_live_query_is_refused(ckpt: Path) -> None:
    plan = small_plan(ckpt)
    loc, backup = Location(str(ckpt)), Location(str(ckpt / "_ckptfix"))
    os.utime(ckpt / "commits" / "31")  # written just now, as by a running query
    with pytest.raises(engine.LiveQuery, match="commits/31: expected no write in the last 120 s"):
        engine.apply(plan, loc, backup)
    old = 1_000_000_000
    for p in ckpt.rglob("*"):
        os.utime(p, (old, old))
    (ckpt / "offsets" / "32").write_bytes((ckpt / "offsets" / "31").read_bytes())  # a new batch appeared
    with pytest.raises(engine.LiveQuery, match="expected latest offset 31 and commit 31 as when planned, found 32"):
        engine.apply(plan, loc, backup)
    assert not (ckpt / "_ckptfix").exists()


def test_undo_refuses_files_changed_after_the_repair(ckpt: Path) -> None:
    loc, backup = Location(str(ckpt)), Location(str(ckpt / "_ckptfix"))
    run = engine.apply(small_plan(ckpt), loc, backup, force=True)
    (ckpt / "offsets" / "30").write_bytes(b"v1\n{}\n-")
    changed = tree(ckpt)
    with pytest.raises(engine.PreconditionFailed, match="offsets/30: expected what ckptfix wrote"):
        engine.undo(loc, backup, run)
    assert tree(ckpt) == changed


def test_undo_refuses_a_live_query_but_not_its_own_writes(ckpt: Path) -> None:
    loc, backup = Location(str(ckpt)), Location(str(ckpt / "_ckptfix"))
    run = engine.apply(small_plan(ckpt), loc, backup, force=True)  # its own writes are seconds old
    os.utime(ckpt / "commits" / "29")  # but this one is the query's
    with pytest.raises(engine.LiveQuery, match="commits/29: expected no write in the last 120 s"):
        engine.undo(loc, backup, run)
    old = 1_000_000_000
    os.utime(ckpt / "commits" / "29", (old, old))
    before_undo = tree(ckpt)
    engine.undo(loc, backup, run)
    assert tree(ckpt) != before_undo


@pytest.mark.parametrize("damage", ["missing", "altered"])
def test_undo_refuses_a_missing_or_altered_backup(ckpt: Path, damage: str) -> None:
    loc, backup = Location(str(ckpt)), Location(str(ckpt / "_ckptfix"))
    before = tree(ckpt)
    run = engine.apply(small_plan(ckpt), loc, backup, force=True)
    obj = ckpt / "_ckptfix" / "objects" / before["commits/31"]
    if damage == "missing":
        obj.unlink()
    else:
        obj.write_bytes(b"not the original")
    applied = tree(ckpt)
    with pytest.raises(engine.BackupError, match=before["commits/31"]):
        engine.undo(loc, backup, run)
    assert tree(ckpt) == applied


def test_a_journal_cut_mid_line_is_one_clear_error(ckpt: Path) -> None:
    loc, backup = Location(str(ckpt)), Location(str(ckpt / "_ckptfix"))
    run = engine.apply(small_plan(ckpt), loc, backup, force=True)
    journal = ckpt / "_ckptfix" / "runs" / run / "journal.jsonl"
    data = journal.read_bytes()
    journal.write_bytes(data[:-7])  # the last line loses its end
    applied = tree(ckpt)
    cut_at = data[:-7].rfind(b"\n") + 1
    with pytest.raises(engine.JournalError, match=f"journal.jsonl: at byte {cut_at} .*cut off mid-write"):
        engine.undo(loc, backup, run)
    assert tree(ckpt) == applied


def test_plan_files_are_validated(ckpt: Path, tmp_path: Path) -> None:
    plan = small_plan(ckpt)
    doc = json.loads(plan.dumps())
    doc["actions"][0]["content_base64"] = "dGFtcGVyZWQ="  # content no longer matches "after"
    with pytest.raises(PlanError, match="action 0: expected content matching 'after'"):
        loads(json.dumps(doc), "p.json")
    doc = json.loads(plan.dumps())
    doc["actions"][0]["path"] = "../../etc/passwd"
    with pytest.raises(PlanError, match="expected a path inside the checkpoint"):
        loads(json.dumps(doc), "p.json")
    with pytest.raises(PlanError, match="expected a ckptfix plan"):
        loads('{"hello": 1}', "p.json")
    other = tmp_path / "other"
    shutil.copytree(ckpt, other)
    loc_other = Location(str(other))
    run = engine.apply(plan, Location(str(ckpt)), Location(str(ckpt / "_ckptfix")), force=True)
    with pytest.raises(PlanError, match=f"expected a plan for {other}, found one for {ckpt}"):
        engine.undo(loc_other, Location(str(ckpt / "_ckptfix")), run)


def test_a_crash_after_any_write_is_resumed_or_undone(tmp_path: Path) -> None:
    """Kill the apply after its 1st, 2nd, ... durable write (SIGKILL); every time,
    `apply --resume` completes it and, on a second copy, `undo` restores the original bytes."""
    pristine = tmp_path / "pristine"
    shutil.copytree(sample_checkpoint(), pristine)
    before = tree(pristine)
    want = expected_after(before)
    crashes = 0
    for n in range(1, 100):
        copies = []
        for name in ("resume", "undo"):
            c = tmp_path / f"{name}-{n}"
            shutil.copytree(pristine, c)
            plan_file = tmp_path / f"plan-{name}-{n}.json"
            plan_file.write_text(small_plan(c).dumps())
            proc = _cli("apply", str(plan_file), "--force", crash_after=n)
            copies.append((c, proc))
        (resumed, p1), (undone, p2) = copies
        if p1.returncode == 0:  # n is past the last write: the apply finished
            assert p2.returncode == 0 and tree(resumed) == want
            break
        crashes += 1
        assert p1.returncode == p2.returncode == -signal.SIGKILL, (p1.stderr, p2.stderr)
        r = _cli("apply", "--resume", str(resumed))
        assert r.returncode == 0, f"crash after write {n}: resume failed: {r.stderr}"
        assert tree(resumed) == want, f"crash after write {n}: resume left a different tree"
        u = _cli("undo", str(undone))
        assert u.returncode == 0, f"crash after write {n}: undo failed: {u.stderr}"
        assert tree(undone) == before, f"crash after write {n}: undo left a different tree"
        shutil.rmtree(resumed)
        shutil.rmtree(undone)
    # plan.json, start, 4 backups, backed-up, begin (one chunk), 5 writes, done, complete
    assert crashes == 1 + 1 + 4 + 1 + 1 + 5 + 1 + 1


def test_cli_errors_are_one_line_and_change_nothing(ckpt: Path, tmp_path: Path) -> None:
    before = tree(ckpt)
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "ckptfix-plan", "version": 1, "actions": [{"op": "write"}]}')
    r = _cli("apply", str(bad))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "action 0: expected a field 'path'" in r.stderr
    r = _cli("undo", str(ckpt))
    assert r.returncode == 2 and "no ckptfix runs recorded" in r.stderr and "nothing to undo" in r.stderr
    r = _cli("apply", "--resume", str(ckpt), "--format", "json")
    assert r.returncode == 2 and json.loads(r.stdout)["error"]["kind"] == "NoRun"
    assert tree(ckpt) == before
    assert not (ckpt / "_ckptfix").exists()  # not even the backup directory: a command that fails writes nothing


def test_an_interrupted_undo_is_finished_by_undo(tmp_path: Path) -> None:
    pristine = tmp_path / "pristine"
    shutil.copytree(sample_checkpoint(), pristine)
    before = tree(pristine)
    for n in range(1, 50):
        work = tmp_path / f"w{n}"
        shutil.copytree(pristine, work)
        engine.apply(small_plan(work), Location(str(work)), Location(str(work / "_ckptfix")), force=True)
        first = _cli("undo", str(work), crash_after=n)
        if first.returncode == 0:
            assert tree(work) == before
            break
        assert first.returncode == -signal.SIGKILL, first.stderr
        again = _cli("undo", str(work))
        if "is undone" in again.stderr:  # killed after its last write: it had finished
            assert again.returncode == 2
        else:
            assert again.returncode == 0, f"undo killed after write {n}, then undo: {again.stderr}"
        assert tree(work) == before
        shutil.rmtree(work)
    else:
        pytest.fail("undo never finished")
    assert n == 1 + 5 + 1 + 1 + 1  # undo-start, 5 restores, undo-done (one chunk), undone; the 9th run finishes


def test_history_keeps_run_ids_whole_on_a_narrow_terminal(ckpt: Path) -> None:
    """`undo CKPT RUN` needs the id as `history` shows it: on 80 columns (a pipe's width) it stays on one line."""
    run = engine.apply(small_plan(ckpt), Location(str(ckpt)), Location(str(ckpt / "_ckptfix")), force=True)
    env = {**os.environ, "COLUMNS": "80"}
    proc = subprocess.run(
        [sys.executable, "-m", "ckptfix.cli.main", "history", str(ckpt)], capture_output=True, text=True, env=env
    )
    assert proc.returncode == 0, proc.stderr
    assert any(run in line for line in proc.stdout.splitlines()), proc.stdout
