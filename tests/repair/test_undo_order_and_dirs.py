"""`undo` leaves the checkpoint exactly as before the run, on samples/rocksdb-changelog (a RocksDB aggregation
real Spark wrote):

* of two runs, it takes the newer, also when both were made in the same second (run ids once went by the second,
  then by a random tag), and `history` lists them in that same order; an older run is never undone under a newer
  one that is not undone;
* the directories a run created (a repartition's new `state/0/<p>/SSTs/`) go too, once empty, never one that
  existed before, also when the undo itself is killed part way.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

import ckptfix
from ckptfix.cli.main import app
from ckptfix.errors import PlanError
from ckptfix.repair import engine
from ckptfix.storage import Location
from tests.support.cli import run_cli as _cli
from tests.support.trees import directories, tree

SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "rocksdb-changelog"
PUT_ROW = {"key": {"key": 7}, "value": {"count": 1, "sum": 70}}


@pytest.fixture
def ckpt(tmp_path: Path) -> Path:
    dst = tmp_path / "ckpt"
    shutil.copytree(SAMPLE, dst)
    (tmp_path / "rows.jsonl").write_text(json.dumps(PUT_ROW) + "\n")
    return dst


@pytest.fixture
def descending_tags(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each uuid4 sorts below the one before it: a run's random tag then says the opposite of its age."""
    tags: Iterator[uuid.UUID] = (uuid.UUID(int=(1 << 128) - 1 - (i << 100)) for i in range(1 << 20))
    monkeypatch.setattr(uuid, "uuid4", lambda: next(tags))


def keys(ckpt: Path) -> list[int]:
    return sorted(row["key"]["key"] for row in ckptfix.read_state(str(ckpt), as_arrow=False))


def delete_then_put(ckpt: Path) -> tuple[str, str]:
    """docs/state-surgery.md: delete keys 2 and 4, then put key 7 (two runs, well within one second)."""
    deleted = ckptfix.plan_state_delete(str(ckpt), where="key IN (2, 4)").apply(idle_seconds=0)
    put = ckptfix.plan_state_put(str(ckpt), str(ckpt.parent / "rows.jsonl")).apply(idle_seconds=0)
    return deleted, put


def test_undo_takes_the_newer_of_two_runs_in_the_same_second(ckpt: Path, descending_tags: None) -> None:
    assert keys(ckpt) == [0, 1, 2, 3, 4]
    time.sleep(1 - time.time() % 1)  # at the start of a second: both runs are made within it
    deleted, put = delete_then_put(ckpt)
    assert keys(ckpt) == [0, 1, 3, 7]
    assert [r.run_id for r in ckptfix.history(str(ckpt))] == [deleted, put]
    assert ckptfix.undo(str(ckpt), idle_seconds=0) == put  # the put, not the delete
    assert keys(ckpt) == [0, 1, 3]
    assert ckptfix.undo(str(ckpt), idle_seconds=0) == deleted
    assert keys(ckpt) == [0, 1, 2, 3, 4]
    assert [r.status for r in ckptfix.history(str(ckpt))] == ["undone", "undone"]


def test_run_ids_of_older_ckptfix_in_the_same_second_go_by_their_journal(ckpt: Path) -> None:
    """Ids without a sequence number (``20250102T030405-1a2b3c4d``) stay readable: in one second, the run whose
    journal starts first is the older, whatever its random tag says."""
    deleted, put = delete_then_put(ckpt)
    runs = ckpt / "_ckptfix" / "runs"
    os.rename(runs / deleted, runs / "20250102T030405-ffffffff")
    os.rename(runs / put, runs / "20250102T030405-00000000")
    assert [r.run_id for r in ckptfix.history(str(ckpt))] == ["20250102T030405-ffffffff", "20250102T030405-00000000"]
    assert ckptfix.undo(str(ckpt), idle_seconds=0) == "20250102T030405-00000000"
    assert keys(ckpt) == [0, 1, 3]
    # a run made now comes after both, and gets the next number
    again = ckptfix.plan_state_delete(str(ckpt), where="key = 3").apply(idle_seconds=0)
    assert engine.RUN_ID.fullmatch(again) and again.split("-")[1] == "0003"
    assert [r.run_id for r in ckptfix.history(str(ckpt))][-1] == again


def test_undo_refuses_to_skip_a_newer_run(ckpt: Path) -> None:
    deleted, put = delete_then_put(ckpt)
    before = tree(ckpt)
    with pytest.raises(PlanError) as refused:
        ckptfix.undo(str(ckpt), deleted, idle_seconds=0)
    message = str(refused.value)
    assert f"run {deleted}: expected it to be the newest run not undone, found 1 newer: {put} (complete)" in message
    assert f"`ckptfix undo {ckpt} {put}`" in message
    assert tree(ckpt) == before  # nothing undone
    result = CliRunner().invoke(app, ["undo", str(ckpt), deleted, "--idle-seconds", "0"])
    assert result.exit_code == 2 and "newest first" in result.output
    # once the newer run is undone, the older one is the newest
    assert ckptfix.undo(str(ckpt), put, idle_seconds=0) == put
    assert ckptfix.undo(str(ckpt), deleted, idle_seconds=0) == deleted
    assert keys(ckpt) == [0, 1, 2, 3, 4]


def test_undo_of_a_repartition_removes_the_directories_it_created(ckpt: Path) -> None:
    """docs/state-repartition.md on a copy of the sample: 2 -> 5 partitions, then undo."""
    files, dirs = tree(ckpt), directories(ckpt)
    assert "state/0/2" not in dirs
    r = _cli("state", "repartition", str(ckpt), "--partitions", "5", "--apply", "--idle-seconds", "0")
    assert r.returncode == 0, r.stderr
    assert {"state/0/2/SSTs", "state/0/3/SSTs", "state/0/4/SSTs"} <= directories(ckpt)
    r = _cli("undo", str(ckpt), "--idle-seconds", "0")
    assert r.returncode == 0, r.stderr
    assert tree(ckpt) == files
    assert directories(ckpt) == dirs  # no empty state/0/{2,3,4}/SSTs/ left
    # ckptfix's own reader and audit see the checkpoint as before
    ls = _cli("state", "ls", str(ckpt))
    assert ls.returncode == 0 and "2 partitions" in ls.stdout and "CANNOT LOAD" not in ls.stdout, ls.stdout
    assert keys(ckpt) == [0, 1, 2, 3, 4]
    audit = _cli("audit", str(ckpt), "--format", "json")
    assert "STATE-PARTITIONS-MISMATCH" not in {f["rule_id"] for f in json.loads(audit.stdout)["findings"]}


def test_undo_keeps_a_directory_that_existed_or_holds_something_else(ckpt: Path) -> None:
    (ckpt / "state" / "0" / "2").mkdir()  # there before the run (empty): never the run's to remove
    dirs = directories(ckpt)
    plan = ckptfix.plan_repartition(str(ckpt), 5)
    run = plan.apply(idle_seconds=0)
    start = next(e for e in engine.Runs(Location(str(ckpt / "_ckptfix"))).events(run) if e["event"] == "start")
    assert start["dirs"] == ["state/0/2/SSTs", "state/0/3", "state/0/3/SSTs", "state/0/4", "state/0/4/SSTs"]
    (ckpt / "state" / "0" / "3" / "notes.txt").write_text("not ckptfix's")
    ckptfix.undo(str(ckpt), run, idle_seconds=0)
    assert directories(ckpt) == dirs | {"state/0/3"}  # state/0/2 kept (empty, as before); state/0/3 not empty
    assert (ckpt / "state" / "0" / "3" / "notes.txt").read_text() == "not ckptfix's"


def test_an_undo_killed_part_way_is_finished_by_undo(tmp_path: Path) -> None:
    """Kill the repartition's undo after its 1st, 2nd, ... durable write (restores, directory removals, journal
    lines): undo again restores every file and removes every directory the run created."""
    pristine = tmp_path / "pristine"
    shutil.copytree(SAMPLE, pristine)
    files, dirs = tree(pristine), directories(pristine)
    work, applied = tmp_path / "ckpt", tmp_path / "applied"  # the run's plan names `work`: every try works there
    shutil.copytree(pristine, work)
    r = _cli("state", "repartition", str(work), "--partitions", "5", "--apply", "--idle-seconds", "0")
    assert r.returncode == 0, r.stderr
    os.replace(work, applied)
    removals_cut = 0
    for n in range(1, 100, 2):  # every other write: each kind of write is still a crash point
        shutil.copytree(applied, work)
        first = _cli("undo", str(work), "--force", crash_after=n)
        if first.returncode == 0:
            assert (tree(work), directories(work)) == (files, dirs)
            break
        assert first.returncode == -signal.SIGKILL, first.stderr
        left = directories(work) - dirs
        removals_cut += bool(left) and left != {f"state/0/{p}{s}" for p in (2, 3, 4) for s in ("", "/SSTs")}
        again = _cli("undo", str(work), "--force")
        assert again.returncode == 0 or "is undone" in again.stderr, f"killed after write {n}: {again.stderr}"
        assert tree(work) == files, f"undo killed after write {n}, then undo: files differ"
        assert directories(work) == dirs, f"undo killed after write {n}, then undo: directories differ"
        shutil.rmtree(work)
    else:
        pytest.fail("undo never finished")
    assert n > 6 + 2  # the restores, 6 directories, and the journal lines each were a crash point
    assert removals_cut >= 2  # killed after removing some of the run's directories, not all


def test_a_newer_run_of_another_checkpoint_in_a_shared_backup_dir_does_not_block_undo(tmp_path: Path) -> None:
    """`--backup-dir` shared by two checkpoints holds the runs of both: undoing A's run under B's newer one is
    exact (they touch different checkpoints), so only A's own newer runs may refuse it."""
    a, b, backup = tmp_path / "a", tmp_path / "b", tmp_path / "bk"
    shutil.copytree(SAMPLE, a)
    shutil.copytree(SAMPLE, b)
    before = tree(a)
    run_a = ckptfix.plan_state_delete(str(a), where="key IN (2, 4)").apply(backup_url=str(backup), idle_seconds=0)
    ckptfix.plan_state_delete(str(b), where="key IN (2, 4)").apply(backup_url=str(backup), idle_seconds=0)
    assert ckptfix.undo(str(a), run_a, backup_url=str(backup), force=True) == run_a
    assert tree(a) == before


def test_undo_with_every_run_undone_says_there_is_nothing_to_undo(ckpt: Path) -> None:
    """New-user trial: a second `undo` said "expected a run that is complete or incomplete or undo-incomplete, found
    none"."""
    r = _cli("state", "repartition", str(ckpt), "--partitions", "3", "--apply", "--idle-seconds", "0")
    assert r.returncode == 0, r.stderr
    assert _cli("undo", str(ckpt), "--idle-seconds", "0").returncode == 0
    again = _cli("undo", str(ckpt), "--idle-seconds", "0")
    assert again.returncode == 2 and "nothing to undo: every run recorded there is undone already" in again.stderr


def test_undo_refuses_after_the_logs_went_back(ckpt: Path) -> None:
    """New-user trial 3: a rollback to batch 8, then by hand to 7 (offsets/8 and commits/8 deleted); `undo` of the
    rollback restored offsets and commits 9..11 over the gap and said every file held its bytes again, exit 0, and
    Spark then failed on the missing batch 8. It refuses now, naming the log that moved, and changes nothing."""
    done = _cli("rollback", str(ckpt), "--to-batch", "8", "--apply", "--idle-seconds", "0")
    assert done.returncode == 0, done.stderr
    for log in ("offsets", "commits"):
        (ckpt / log / "8").unlink()
        (ckpt / log / ".8.crc").unlink()
    before = tree(ckpt)
    undone = _cli("undo", str(ckpt), "--idle-seconds", "0")
    assert undone.returncode == 2, undone.stderr
    line = undone.stderr.strip()
    assert "offsets/7: expected the newest offsets entry to be the one run " in line and "left (8), found 7" in line
    assert "the log went back after the run" in line and "nothing was undone" in line, line
    assert tree(ckpt) == before


def test_runs_journaled_elsewhere_are_found_from_the_checkpoint(ckpt: Path, tmp_path: Path) -> None:
    """New-user trial 3: after `rollback --apply --backup-dir B`, `history CKPT` did not list the run and `undo CKPT`
    said there was nothing to undo. The checkpoint's own backup location now points to B: history names the run
    and how to see it, undo refuses naming the command that undoes it, and that command restores every byte."""
    before = tree(ckpt)
    other = tmp_path / "elsewhere"
    done = _cli("rollback", str(ckpt), "--to-batch", "9", "--apply", "--idle-seconds", "0", "--backup-dir", str(other))
    assert done.returncode == 0, done.stderr
    (run_id,) = [p.name for p in (other / "runs").iterdir()]
    listed = _cli("history", str(ckpt))
    assert listed.returncode == 0
    assert f"run {run_id} (complete: rollback to batch 9) is journaled in {other}" in listed.stderr, listed.stderr
    doc = json.loads(_cli("history", str(ckpt), "-f", "json").stdout)
    assert doc["runs"] == [] and [(r["run_id"], r["backup"]) for r in doc["elsewhere"]] == [(run_id, str(other))]
    refused = _cli("undo", str(ckpt), "--idle-seconds", "0")
    assert refused.returncode == 2
    hint = f"`ckptfix undo {ckpt} {run_id} --backup-dir {other}`"
    assert f"run {run_id} (complete), journaled in {other}, is the newest run not undone" in refused.stderr
    assert hint in refused.stderr, refused.stderr
    undone = _cli(*hint.strip("`").split()[1:], "--idle-seconds", "0")
    assert undone.returncode == 0, undone.stderr
    assert {p: h for p, h in tree(ckpt).items() if not p.startswith("_ckptfix/")} == before


def test_a_newer_run_journaled_elsewhere_is_undone_first(ckpt: Path, tmp_path: Path) -> None:
    """A run in the checkpoint's own location, then a newer one with --backup-dir: undoing the older first would
    leave files of both; it is refused, naming the newer one."""
    first = _cli("rollback", str(ckpt), "--to-batch", "10", "--apply", "--idle-seconds", "0")
    assert first.returncode == 0, first.stderr
    other = tmp_path / "b"
    second = _cli(
        "rollback", str(ckpt), "--to-batch", "9", "--apply", "--idle-seconds", "0", "--backup-dir", str(other)
    )
    assert second.returncode == 0, second.stderr
    (newer,) = [p.name for p in (other / "runs").iterdir()]
    refused = _cli("undo", str(ckpt), "--idle-seconds", "0")
    assert (
        refused.returncode == 2
        and f"run {newer} (complete), journaled in {other}, is newer than run " in refused.stderr
    )
