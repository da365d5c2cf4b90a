"""A crash after every durable write of every kind of plan: the apply process dies like kill -9
(SIGKILL) after its 1st, 2nd, ... write; `apply --resume` must then reach exactly the tree an
uninterrupted apply reaches, and `undo` (on a copy of the crashed state) the original tree."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import tarfile
from pathlib import Path
from typing import Any

import pytest

from ckptfix.migrate.provider import plan_provider
from ckptfix.repair import engine
from ckptfix.repair.plan import Plan
from ckptfix.repair.planning import plan_repair
from ckptfix.repair.rebuild import plan_rebuild
from ckptfix.repair.repartition import plan_repartition
from ckptfix.repair.rollback import plan_rollback
from ckptfix.repair.surgery import plan_state_delete, plan_state_put
from ckptfix.storage import Location
from tests.repair.test_fixes_logs import ROUND_TRIPS, extract
from tests.support.cli import run_cli
from tests.support.trees import directories, tree
from tests.unit.realckpt import sample_checkpoint


def _sample(tmp: Path) -> Path:
    ckpt = tmp / "ckpt"
    shutil.copytree(sample_checkpoint(), ckpt)
    return ckpt


def _rollback(tmp: Path) -> Path:
    return extract("agg_hdfs", tmp / "x")[0]


FORMATS = Path(__file__).resolve().parents[1] / "fixtures" / "formats"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def _tarred(tar_path: Path) -> Any:
    """A checkpoint Spark wrote, from its committed archive (``ckpt/`` inside), plus a state-put rows file beside
    it: a new key (k9, placed by Spark's hash partitioning) and a stored key (k1) with a new value."""

    def setup(tmp: Path) -> Path:
        with tarfile.open(tar_path) as tar:
            tar.extractall(tmp, filter="data")
        rows = [
            {"key": {"key": "k9"}, "value": {"count": 1, "sum": 9}},
            {"key": {"key": "k1"}, "value": {"count": 7, "sum": 7}},
        ]
        (tmp / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        return tmp / "ckpt"

    return setup


def _state(name: str) -> Any:
    def setup(tmp: Path) -> Path:
        shutil.copytree(FORMATS / name, tmp / "ckpt")
        return tmp / "ckpt"

    return setup


PLANS: dict[str, tuple[Any, Any]] = {
    **{
        name: (setup, lambda c, kw=kw: plan_repair(str(c), "4.3", **kw)[0]) for name, (setup, kw) in ROUND_TRIPS.items()
    },
    "async_gap": (_sample, lambda c: plan_repair(str(c), "4.3")[0]),
    "async_gap_truncate": (_sample, lambda c: plan_repair(str(c), "4.3", strategy="truncate")[0]),
    "rollback_to_3": (_rollback, lambda c: plan_rollback(str(c), 3, force=True).plan),
    "state_rebuild_hdfs_prune": (_state("hdfs"), lambda c: plan_rebuild(str(c), version=3, prune=True, retain=1).plan),
    "state_rebuild_rocksdb": (_state("rocksdb"), lambda c: plan_rebuild(str(c), version=3).plan),
    "migrate_provider_to_rocksdb": (_rollback, lambda c: plan_provider(str(c), "rocksdb", target_spark="3.5").plan),
    "state_delete_rocksdb_cl": (
        _tarred(FIXTURES / "spark-4.2.1" / "agg_rocksdb_cl.tar.gz"),
        lambda c: plan_state_delete(str(c), where="key = 'k4'").plan,
    ),
    "state_put_hdfs": (
        _tarred(FIXTURES / "spark-4.2.1" / "agg_hdfs.tar.gz"),
        lambda c: plan_state_put(str(c), rows_file=str(c.parent / "rows.jsonl")).plan,
    ),
    "state_repartition_join": (
        _tarred(FIXTURES / "matrix" / "4.3.0" / "join.tar.gz"),
        lambda c: plan_repartition(str(c), 3).plan,
    ),
    "state_repartition_rocksdb_to_5": (  # docs/state-repartition.md: partitions 2-4 are new directories
        lambda t: shutil.copytree(SAMPLES / "rocksdb-changelog", t / "ckpt"),
        lambda c: plan_repartition(str(c), 5).plan,
    ),
    "migrate_provider_to_hdfs": (
        lambda t: extract("agg_rocksdb_cl", t / "x")[0],
        lambda c: plan_provider(str(c), "hdfs", target_spark="3.5").plan,
    ),
}
#: the exit status of a process the crash hook killed
KILLED = -signal.SIGKILL
# a plan that touches many files: the suite samples its crash points (`python -m bench.battery` kills every write)
SAMPLED = {
    "rollback_to_3": 3,
    "state_repartition_join": 3,
    "state_repartition_rocksdb_to_5": 2,
    "async_gap_truncate": 7,
    "migrate_provider_to_rocksdb": 9,
    "migrate_provider_to_hdfs": 9,
}


def _apply_crashing(plan_file: Path, n: int) -> int:
    proc = run_cli("apply", str(plan_file), "--force", crash_after=n)
    assert proc.returncode in (0, KILLED), proc.stderr
    return proc.returncode


def _rebased(plan: Plan, ckpt: Path) -> Plan:
    return dataclasses.replace(plan, checkpoint=Location(str(ckpt)).url)


@pytest.mark.parametrize("name", sorted(PLANS))
def test_crash_after_every_write(tmp_path: Path, name: str) -> None:
    setup, make_plan = PLANS[name]
    pristine = setup(tmp_path / "pristine")
    plan: Plan = make_plan(pristine)
    assert not plan.empty
    before, dirs_before = tree(pristine), directories(pristine)
    reference = tmp_path / "reference"
    shutil.copytree(pristine, reference)
    engine.apply(_rebased(plan, reference), Location(str(reference)), Location(str(reference / "_ckptfix")), force=True)
    after, dirs_after = tree(reference), directories(reference)
    step = SAMPLED.get(name, 1)
    crashes, n = 0, 1
    while True:
        work = tmp_path / f"crash-{n}"
        shutil.copytree(pristine, work)
        plan_file = tmp_path / f"plan-{n}.json"
        plan_file.write_text(_rebased(plan, work).dumps())
        if _apply_crashing(plan_file, n) == 0:
            assert tree(work) == after
            break
        crashes += 1
        other = tmp_path / f"undo-{n}"
        shutil.copytree(work, other)
        loc = Location(str(work))
        engine.resume(loc, Location(str(work / "_ckptfix")))
        assert tree(work) == after, f"{name}: crash after write {n}: resume differs from an uninterrupted apply"
        assert directories(work) == dirs_after, f"{name}: crash after write {n}: resume made other directories"
        # the crashed copy's plan names `work`: undo it where it crashed, from the copy of its backups
        os.replace(work, tmp_path / f"resumed-{n}")
        os.replace(other, work)
        engine.undo(Location(str(work)), Location(str(work / "_ckptfix")), force=True)
        assert tree(work) == before, f"{name}: crash after write {n}: undo did not restore the original"
        # directories the run created go too (empty ones break readers: a partition directory with no state)
        assert directories(work) == dirs_before, f"{name}: crash after write {n}: undo left other directories"
        shutil.rmtree(work)
        shutil.rmtree(tmp_path / f"resumed-{n}")
        n += step
    assert crashes >= 3  # plan, start, backups/steps: every plan has several writes
