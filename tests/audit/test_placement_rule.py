"""``STATE-PARTITION-MISPLACED`` over every stateful checkpoint real Spark wrote for the committed fixtures
(tests/fixtures: the damage catalogue's bases of 3.5.9-4.2.1, the version matrix 3.3.0-4.3.0, the format
fixtures), no JVM: never on a checkpoint as Spark left it; and with state/0/0 and state/0/1 swapped, on every one
that the audit does not already see fail (a swap under checkpoint format v2 breaks the commit's ids),
transformWithState included. That the swap restarts with wrong results in
real Spark is recorded in tests/fixtures/spark-*/outcomes.json (``state_partitions_swapped*``, run live on 4.3)."""

from __future__ import annotations

import shutil
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from ckptfix.audit import audit

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
RULE = "STATE-PARTITION-MISPLACED"


def _stateful(root: Path) -> Iterator[Path]:
    for meta in sorted(root.rglob("metadata")):
        ckpt = meta.parent
        if (ckpt / "offsets").is_dir() and (ckpt / "state" / "0").is_dir():
            yield ckpt


TARBALLS = sorted(str(p.relative_to(FIXTURES)) for p in FIXTURES.rglob("*.tar.gz"))


@pytest.fixture(scope="module")
def extracted(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, Path]]:
    out = []
    for i, name in enumerate(TARBALLS):
        dest = tmp_path_factory.mktemp(f"fx{i}")
        with tarfile.open(FIXTURES / name) as tar:
            tar.extractall(dest, filter="data")
        out += [(name, ckpt) for ckpt in _stateful(dest)]
    return out


def test_never_on_a_checkpoint_as_spark_left_it(extracted: list[tuple[str, Path]]) -> None:
    """Neither this rule nor ``STATE-SCHEMA-ROWS`` (the same sampled rows, decoded with the stored schema), nor
    ``STATE-SNAPSHOT-STALE`` (a snapshot byte for byte an older one while deltas in between record changes)."""
    assert len(extracted) >= 90, len(extracted)
    found = {}
    for name, ckpt in extracted:
        hits = [
            f.message
            for f in audit(str(ckpt)).findings
            if f.rule_id in (RULE, "STATE-SCHEMA-ROWS", "STATE-SNAPSHOT-STALE")
        ]
        if hits:
            found[name] = hits
    assert not found, found


def test_swapped_partitions_are_found(extracted: list[tuple[str, Path]]) -> None:
    fired, missed = 0, []
    for name, ckpt in extracted:
        op = ckpt / "state" / "0"
        if not ((op / "0").is_dir() and (op / "1").is_dir()):
            continue
        (op / "0").rename(op / "x")
        (op / "1").rename(op / "0")
        (op / "x").rename(op / "1")
        try:
            report = audit(str(ckpt))
        finally:
            (op / "0").rename(op / "x")
            (op / "1").rename(op / "0")
            (op / "x").rename(op / "1")
        hit = [f for f in report.findings if f.rule_id == RULE]
        if hit:
            assert hit[0].severity == "error" and hit[0].silent, hit[0]
            assert report.verdict.restarts is not True or report.verdict.hazards, report.verdict
            fired += 1
        elif report.verdict.restarts is not False:
            missed.append(name)
    assert not missed, missed
    assert fired >= 80, fired


def _newest_common_snapshot(op: Path) -> int | None:
    def snaps(d: Path) -> set[int]:
        return {int(p.name.split(".")[0]) for p in d.glob("*.snapshot")}

    common = snaps(op / "0") & snaps(op / "1")
    return max(common) if common else None


def test_swapped_snapshots_alone_are_deleted(extracted: list[tuple[str, Path]]) -> None:
    """Repair hunt 10, M03: only the newest common snapshot of partitions 0 and 1 swapped (HDFS), the deltas in place.
    The finding names the two snapshots (not the directories), the repair deletes exactly them and their sidecars,
    and the audit then finds the partitions in place. (Deleting them restarted Spark 4.3 with exactly the reference
    rows in the hunt, X20; what Spark does with the damage itself is recorded as ``state_base_snapshots_swapped``.)"""
    from ckptfix.api import plan_repair

    done, other = 0, []
    for name, ckpt in extracted:
        op = ckpt / "state" / "0"
        if not ((op / "0").is_dir() and (op / "1").is_dir()) or list(op.glob("*/*.zip")):
            continue
        v = _newest_common_snapshot(op)
        if v is None or list(op.glob(f"*/{v}_*.snapshot")):
            continue
        before = audit(str(ckpt))
        if before.verdict.restarts is not True or any(f.rule_id == RULE for f in before.findings):
            continue
        work = ckpt.with_name(ckpt.name + "-m03")
        shutil.copytree(ckpt, work)
        try:
            for n in (f"{v}.snapshot", f".{v}.snapshot.crc", f"{v}.snapshot.crc", f".{v}.snapshot.crc.crc"):
                if (work / "state/0/0" / n).exists():
                    (work / "state/0/0" / n).rename(work / "x")
                    (work / "state/0/1" / n).rename(work / "state/0/0" / n)
                    (work / "x").rename(work / "state/0/1" / n)
            hit = [f for f in audit(str(work)).findings if f.rule_id == RULE]
            if not hit:
                other.append(f"{name}: not found")
                continue
            if "Delete " not in hit[0].fix:
                # the files before the snapshot do not prove the partition in place: the directory advice
                other.append(f"{name}: {hit[0].fix[:60]}")
                continue
            assert f"state/0/0/{v}.snapshot" in hit[0].fix and f"state/0/1/{v}.snapshot" in hit[0].fix, hit[0].fix
            plan = plan_repair(str(work))
            assert not plan.unfixed, (name, plan.unfixed)
            deleted = sorted(a.path for a in plan.plan.actions if a.op == "delete")
            expected = sorted(
                f"state/0/{p}/{n}"
                for p in (0, 1)
                for n in (f"{v}.snapshot", f".{v}.snapshot.crc", f"{v}.snapshot.crc", f".{v}.snapshot.crc.crc")
                if (work / "state/0" / str(p) / n).exists()
            )
            assert deleted == expected and len(plan.plan.actions) == len(expected), (name, plan.plan.actions)
            plan.apply(backup_url=str(work) + "-backup", idle_seconds=0)
            after = audit(str(work))
            assert not [f for f in after.findings if f.rule_id == RULE], (name, after.findings)
            done += 1
        finally:
            shutil.rmtree(work)
            shutil.rmtree(str(work) + "-backup", ignore_errors=True)
    assert done >= 5, (done, other)


@pytest.mark.parametrize("version", ["3.5.9", "4.0.5", "4.1.4", "4.2.1", "4.3.0"])
def test_a_swapped_base_snapshot_whose_keys_were_all_written_again(tmp_path: Path, version: str) -> None:
    """The catalogue's ``state_base_snapshots_swapped`` (agg_hdfs: every batch writes every key, no watermark):
    every release restarted it with the right aggregates (recorded in outcomes.json), so the finding is a warning
    whose fix still deletes the two snapshots (the foreign keys stay in the state otherwise)."""
    import json

    from tests.spark.damage import CASES

    recorded = json.loads((FIXTURES / f"spark-{version}" / "outcomes.json").read_text())["state_base_snapshots_swapped"]
    assert recorded["ok"] and recorded["correct"], recorded
    with tarfile.open(FIXTURES / f"spark-{version}" / "agg_hdfs.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    CASES["state_base_snapshots_swapped"].apply(tmp_path / "ckpt")
    report = audit(str(tmp_path / "ckpt"))
    (hit,) = [f for f in report.findings if f.rule_id == RULE]
    assert hit.severity == "warning" and not hit.silent and report.verdict.restarts is True, hit
    assert "Delete " in hit.fix and "written again after that snapshot" in hit.message, hit
