"""``STATE-PARTITION-MISPLACED`` over every stateful checkpoint real Spark wrote for the committed fixtures
(tests/fixtures: the damage catalogue's bases of 3.5.9-4.2.1, the version matrix 3.3.0-4.3.0, the format
fixtures), no JVM: never on a checkpoint as Spark left it; and with state/0/0 and state/0/1 swapped, on every one
that the audit does not already see fail (a swap under checkpoint format v2 breaks the commit's ids),
transformWithState included. That the swap restarts with wrong results in
real Spark is recorded in tests/fixtures/spark-*/outcomes.json (``state_partitions_swapped*``, run live on 4.3)."""

from __future__ import annotations

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
