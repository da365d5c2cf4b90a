"""A plan applied a second time, and `apply --resume` when nothing was interrupted (new-user trial): the answers
named a running query ("is the query running? (--force to override)") or a changed checkpoint, or looked like a
fresh apply. They now name the run that already did it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import ckptfix
from ckptfix.errors import PlanError
from tests.support.cli import run_cli

SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "async-sparse"


def _copy(tmp_path: Path) -> Path:
    ckpt = tmp_path / "ck"
    shutil.copytree(SAMPLE, ckpt)
    return ckpt


def test_the_api_names_the_run_that_applied_the_plan(tmp_path: Path) -> None:
    ckpt = _copy(tmp_path)
    plan = ckptfix.plan_repair(ckpt)
    run_id = plan.apply(idle_seconds=0)
    try:
        plan.apply(idle_seconds=0)
    except PlanError as exc:
        assert str(exc) == (
            f"this plan was already applied to {ckpt} as run {run_id} (`ckptfix history` lists it; "
            f"`ckptfix undo {ckpt} {run_id}` reverts it)"
        )
    else:
        raise AssertionError("a second apply of the same plan ran")
    ckptfix.undo(ckpt, run_id, idle_seconds=0)
    assert plan.apply(idle_seconds=0) != run_id  # undone: the plan applies again, as a new run


def test_the_cli_says_so_for_a_saved_plan_and_for_resume(tmp_path: Path) -> None:
    ckpt = _copy(tmp_path)
    plan_file = tmp_path / "plan.json"
    assert run_cli("repair", str(ckpt), "--plan-out", str(plan_file)).returncode == 0  # everything fixable
    first = run_cli("apply", str(plan_file), "--idle-seconds", "0")
    assert first.returncode == 0, first.stderr
    again = run_cli("apply", str(plan_file), "--idle-seconds", "0")
    assert again.returncode == 2 and "this plan was already applied to" in again.stderr, again.stderr
    resumed = run_cli("apply", "--resume", str(ckpt), "--idle-seconds", "0")
    assert resumed.returncode == 0 and "was already complete: nothing to resume" in resumed.stderr, resumed.stderr
    # new-user trial 3: it reprinted the plan and "applied as run ...", as if it had applied it again
    assert "applied as run" not in resumed.stdout and "Plan for" not in resumed.stdout, resumed.stdout
    assert resumed.stdout.startswith("now: Spark 4.3 will restart this checkpoint"), resumed.stdout
    doc = json.loads(run_cli("apply", "--resume", str(ckpt), "--idle-seconds", "0", "-f", "json").stdout)
    assert doc["already_complete"] is True and doc["applied_run"]


def test_the_audit_names_a_run_that_stopped_part_way(tmp_path: Path) -> None:
    """New-user trial 4: after a crash mid-apply the audit described the half-applied logs as a hand rollback and
    advised a repair that then refused; it names the interrupted run and how to finish or undo it."""
    ckpt = tmp_path / "ckpt"
    shutil.copytree(SAMPLE.parent / "rocksdb-changelog", ckpt)
    crashed = run_cli("rollback", str(ckpt), "--to-batch", "8", "--apply", "--idle-seconds", "0", crash_after=3)
    assert crashed.returncode not in (0, 1, 2), crashed.stderr  # killed part way
    shown = run_cli("audit", str(ckpt), "--quiet")
    assert "INTERRUPTED RUN: " in shown.stdout and f"`ckptfix apply --resume {ckpt} --run " in shown.stdout, (
        shown.stdout
    )
    doc = json.loads(run_cli("audit", str(ckpt), "--format", "json").stdout)
    assert "stopped part way" in doc["facts"]["interrupted_run"]
    assert run_cli("apply", "--resume", str(ckpt), "--idle-seconds", "0").returncode in (0, 1)
    assert "interrupted_run" not in json.loads(run_cli("audit", str(ckpt), "--format", "json").stdout)["facts"]
