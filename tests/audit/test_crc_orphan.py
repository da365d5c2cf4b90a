"""LOG-CRC-ORPHAN by what the sidecar does to Spark on the local file system (proven live in
tests/audit/test_restart_prediction.py and tests/repair/test_fixes_spark.py: Spark 4.3 fails with "Multiple streaming
queries are concurrently using" when it renames the entry it writes onto a leftover .crc): the next entry's sidecar
blocks the restart, a later one stops the query later, an earlier one is harmless; `repair` deletes the first two
kinds and leaves the third."""

from __future__ import annotations

import shutil
from pathlib import Path

from ckptfix.audit import audit
from ckptfix.repair.planning import plan_repair

ROOT = Path(__file__).resolve().parents[2]


def _orphans(ckpt: Path) -> dict[str, str]:
    return {
        f.evidence[0].path.rsplit("/", 2)[-2] + "/" + f.evidence[0].path.rsplit("/", 1)[-1]: f.severity
        for f in audit(str(ckpt)).findings
        if f.rule_id == "LOG-CRC-ORPHAN"
    }


def test_severity_follows_what_spark_writes_next(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    shutil.copytree(ROOT / "samples" / "rocksdb-changelog", ckpt)  # offsets and commits 0..11
    (ckpt / "commits" / "11").unlink()  # its .crc stays: Spark re-runs batch 11 and writes commits/11 again
    shutil.copy(ckpt / "offsets" / ".11.crc", ckpt / "offsets" / ".14.crc")  # entry 14: two batches later
    (ckpt / "commits" / "3.old").write_text("x")
    shutil.copy(ckpt / "commits" / ".3.crc", ckpt / "commits" / ".3.old.crc")  # not an entry name
    report = audit(str(ckpt))
    assert report.verdict.blocking_rule == "LOG-CRC-ORPHAN"
    assert report.verdict.error is not None
    assert report.verdict.error.headline == (
        "ConcurrentModificationException: Multiple streaming queries are concurrently using"
    )
    assert _orphans(ckpt) == {"commits/.11.crc": "error", "offsets/.14.crc": "warning"}

    plan, _, unfixed = plan_repair(str(ckpt))
    deleted = sorted(a.path for a in plan.actions if a.op == "delete")
    assert deleted == ["commits/.11.crc", "offsets/.14.crc"], (deleted, unfixed)


def test_an_earlier_entrys_sidecar_is_harmless(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    shutil.copytree(ROOT / "samples" / "rocksdb-changelog", ckpt)
    shutil.copy(ckpt / "commits" / ".3.crc", ckpt / "commits" / ".2.5.crc")  # no such entry: never written
    (ckpt / "offsets" / "0").rename(ckpt / "offsets" / "0.bak")  # offsets/.0.crc left: Spark never writes 0 again
    found = _orphans(ckpt)
    assert found.get("offsets/.0.crc") == "info"
    assert set(found.values()) == {"info"}
    assert audit(str(ckpt)).verdict.blocking_rule != "LOG-CRC-ORPHAN"


def test_every_commit_deleted_the_rerun_batch_sidecar_blocks(tmp_path: Path) -> None:
    """`rm commits/[0-9]*` leaves every hidden .crc (a new user's trial): Spark runs batch 11 again and writes
    commits/11, onto .11.crc; the sidecars of batches it never writes again are harmless. The audit named .0.crc."""
    ckpt = tmp_path / "ckpt"
    shutil.copytree(ROOT / "samples" / "rocksdb-changelog", ckpt)
    for entry in (ckpt / "commits").iterdir():
        if entry.name.isdigit():
            entry.unlink()
    orphans = _orphans(ckpt)
    assert orphans["commits/.11.crc"] == "error"
    assert {rel for rel, severity in orphans.items() if severity != "info"} == {"commits/.11.crc"}, orphans
