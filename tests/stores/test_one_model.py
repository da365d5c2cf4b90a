"""Audit and `state ls --verify` read one store model (ckptfix.stores: chain, provider, verify), so they never
disagree about a store (issue 15): on every stateful checkpoint of the version matrix (written by real Spark 3.3.4
to 4.3.0) and Spark 3.5.9's longer state fixtures, intact and with the damage users meet (a state file deleted, one
byte flipped in the newest base or step), the stores the audit says cannot load the restart's version (target 3.5:
no fallback past a damaged base) are exactly the stores `state ls --verify` reports with a problem, naming the same
file.

Expected values come from the damage itself (which file was touched), never from either command alone.
"""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from ckptfix.audit import audit
from ckptfix.checkpoint import Checkpoint
from ckptfix.state.inventory import list_state

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
MATRIX = FIXTURES / "matrix"
STATEFUL = ("agg_hdfs", "agg_rocksdb", "agg_rocksdb_cl", "dedup", "join")
#: Spark 3.5.9's longer runs (tests/fixtures/state35/generate.py): snapshots and zips between deltas/changelogs
STATE35 = ("agg_hdfs", "agg_rocksdb", "agg_rocksdb_changelog", "dedup_hdfs", "fmgws_hdfs", "join_hdfs", "session_hdfs")
CASES = sorted(
    (w.name, s) for w in MATRIX.iterdir() if w.is_dir() for s in STATEFUL if (w / f"{s}.tar.gz").exists()
) + [("state35", s) for s in STATE35]
DAMAGE = ("intact", "delete_step", "flip_base", "flip_step")


def unpack(writer: str, scenario: str, dest: Path) -> Path:
    folder = FIXTURES / "state35" if writer == "state35" else MATRIX / writer
    with tarfile.open(folder / f"{scenario}.tar.gz") as tar:
        tar.extractall(dest, filter="data")
    return dest / "ckpt"


def store_rel(op: int, partition: int, store: str) -> str:
    return f"state/{op}/{partition}" + ("" if store == "default" else f"/{store}")


def restart_version(ckpt: Path) -> int:
    latest = Checkpoint.open(str(ckpt)).commits.latest
    assert latest is not None
    return latest + 1


def damage(ckpt: Path, how: str) -> str | None:
    """Damage partition 0 of operator 0's first store; returns the file touched (None: intact)."""
    if how == "intact":
        return None
    N = restart_version(ckpt)
    store = ckpt / "state" / "0" / "0"
    if not any(p.suffix in (".delta", ".snapshot", ".zip", ".changelog") for p in store.iterdir()):
        store = sorted(p for p in store.iterdir() if p.is_dir() and not p.name.startswith("_"))[0]
    files = {p.name: p for p in store.iterdir() if p.is_file() and not p.name.startswith(".")}
    steps = sorted((int(n.split(".")[0]), p) for n, p in files.items() if n.endswith((".delta", ".changelog")))
    bases = sorted((int(n.split(".")[0]), p) for n, p in files.items() if n.endswith((".snapshot", ".zip")))
    steps = [(v, p) for v, p in steps if v <= N]
    bases = [(v, p) for v, p in bases if v <= N]
    base_v = bases[-1][0] if bases else 0
    after_base = [(v, p) for v, p in steps if v > base_v]
    if how == "delete_step":
        if not after_base:
            return "skip"
        victim = after_base[0][1]
        victim.unlink()
        return str(victim.relative_to(ckpt))
    target = (bases[-1][1] if bases else None) if how == "flip_base" else (after_base[-1][1] if after_base else None)
    if target is None:
        return "skip"
    data = bytearray(target.read_bytes())
    at = len(data) // 2
    data[at] ^= 0x40
    target.write_bytes(bytes(data))
    return str(target.relative_to(ckpt))


@pytest.mark.parametrize("how", DAMAGE)
@pytest.mark.parametrize(("writer", "scenario"), CASES)
def test_audit_and_state_ls_agree(tmp_path: Path, writer: str, scenario: str, how: str) -> None:
    ckpt = unpack(writer, scenario, tmp_path)
    touched = damage(ckpt, how)
    if touched == "skip":
        pytest.skip(f"{how}: the store has no such file before version {restart_version(ckpt)}")
    report = audit(str(ckpt), "3.5")
    listing = list_state(str(ckpt), verify=True)
    ls_bad = {
        store_rel(op.operator, p.partition, p.store): p.problem
        for op in listing.operators
        for p in op.partitions
        if p.problem is not None
    }
    stores = {store_rel(op.operator, p.partition, p.store) for op in listing.operators for p in op.partitions}
    audit_bad: dict[str, str] = {}
    for f in report.findings:
        if not f.rule_id.startswith("STATE-") or f.spark_error is None:
            continue
        for ev in f.evidence:
            for rel in stores:
                if f"/{rel}/" in ev.path or ev.path.startswith(f"{rel}/"):
                    audit_bad.setdefault(rel, f.message)
    assert set(audit_bad) == set(ls_bad), (audit_bad, ls_bad)
    if touched is None:
        assert not ls_bad, ls_bad
    else:
        name = touched.rsplit("/", 1)[-1]
        (rel,) = ls_bad  # only the damaged store
        assert touched.startswith(rel + "/")
        assert name in ls_bad[rel] and name in audit_bad[rel], (ls_bad, audit_bad)
