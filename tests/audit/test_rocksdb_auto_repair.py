"""Spark 4.2+ skips a RocksDB zip it cannot load for an older one only with changelog checkpointing on
(``RocksDB.allowAutoSnapshotRepair`` = changelog checkpointing and ``autoSnapshotRepair.enabled``, read in the
4.3.0 jar). Without changelogs the newest zip's own error stops the load: seen live on PySpark 4.3 by the damage
hunt of 2026-11-26 (a truncated zip: ``EOFException: Unexpected end of ZLIB input stream``; an SST appended to:
``UNEXPECTED_FILE_SIZE ... expected 1316 bytes, found 1416 bytes``; a deleted SST: ``FileNotFoundException``; a
deleted newest zip: ``<N>.changelog does not exist``). On the version matrix's checkpoints written by PySpark 4.3.0
(tests/fixtures/matrix/record.py): ``agg_rocksdb`` (no changelogs) and ``agg_rocksdb_cl`` (changelogs 1..3, 3.zip).
"""

from __future__ import annotations

import json
import tarfile
import zipfile
from pathlib import Path

import pytest

from ckptfix.audit import audit
from tests.spark.damage import sst_footer_handles

MATRIX = Path(__file__).resolve().parents[1] / "fixtures" / "matrix" / "4.3.0"
STORE = "state/0/0"


def unpack(scenario: str, dest: Path) -> Path:
    with tarfile.open(MATRIX / f"{scenario}.tar.gz") as tar:
        tar.extractall(dest, filter="data")
    ckpt = dest / "ckpt"
    assert (ckpt / STORE / "3.zip").exists(), "the fixture changed: the restart's version 3 is no longer a zip"
    return ckpt


def truncate_newest_zip(ckpt: Path) -> str:
    path = ckpt / STORE / "3.zip"
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    (ckpt / STORE / ".3.zip.crc").unlink(missing_ok=True)
    return f"{STORE}/3.zip"


def newest_zip_ssts(ckpt: Path) -> list[str]:
    with zipfile.ZipFile(ckpt / STORE / "3.zip") as zf:
        meta = json.loads(zf.read("metadata").decode().split("\n", 1)[1])
    return [f["dfsSstFileName"] for f in meta["sstFiles"]]


@pytest.mark.parametrize("target", ["4.1", "4.3"])
def test_a_truncated_zip_without_changelogs_fails_on_every_version(tmp_path: Path, target: str) -> None:
    ckpt = unpack("agg_rocksdb", tmp_path)
    rel = truncate_newest_zip(ckpt)
    report = audit(str(ckpt), target)
    assert report.verdict.restarts is False
    assert report.verdict.blocking_rule == "STATE-FILE-CORRUPT"
    assert report.verdict.exception == "java.io.EOFException"
    assert report.verdict.message == "Unexpected end of ZLIB input stream"
    finding = next(f for f in report.findings if f.rule_id == "STATE-FILE-CORRUPT")
    assert rel in finding.message
    assert not any("falls back" in f.message for f in report.findings)


def test_a_truncated_zip_with_changelogs_falls_back_on_42_and_later(tmp_path: Path) -> None:
    ckpt = unpack("agg_rocksdb_cl", tmp_path)
    truncate_newest_zip(ckpt)
    report = audit(str(ckpt), "4.3")
    assert report.verdict.restarts is True  # the empty state + changelogs 1..3
    assert any(f.severity == "warning" and "falls back" in f.message for f in report.findings)
    assert audit(str(ckpt), "4.1").verdict.restarts is False


@pytest.mark.parametrize(
    "conf",
    [
        {"spark.sql.streaming.stateStore.autoSnapshotRepair.enabled": "false"},
        {"spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "false"},
    ],
    ids=["auto-repair-off", "changelog-checkpointing-off"],
)
def test_the_restarting_sessions_confs_turn_the_fall_back_off(tmp_path: Path, conf: dict[str, str]) -> None:
    ckpt = unpack("agg_rocksdb_cl", tmp_path)
    truncate_newest_zip(ckpt)
    report = audit(str(ckpt), "4.3", session_conf=conf)
    assert report.verdict.restarts is False
    assert report.verdict.blocking_rule == "STATE-FILE-CORRUPT"


def test_a_missing_sst_without_changelogs_fails_naming_it(tmp_path: Path) -> None:
    ckpt = unpack("agg_rocksdb", tmp_path)
    sst = newest_zip_ssts(ckpt)[0]
    (ckpt / STORE / "SSTs" / sst).unlink()
    report = audit(str(ckpt), "4.3")
    assert report.verdict.restarts is False
    assert report.verdict.blocking_rule == "STATE-SST-MISSING"
    assert report.verdict.message == f"{sst} does not exist"
    assert not any("falls back" in f.message for f in report.findings)


def test_an_sst_of_the_wrong_size_predicts_sparks_size_error(tmp_path: Path) -> None:
    ckpt = unpack("agg_rocksdb", tmp_path)
    path = ckpt / STORE / "SSTs" / newest_zip_ssts(ckpt)[0]
    size = path.stat().st_size
    path.write_bytes(path.read_bytes() + b"\0" * 100)
    report = audit(str(ckpt), "4.3")
    assert report.verdict.restarts is False
    assert report.verdict.message == f"expected {size} bytes, found {size + 100} bytes"
    assert report.verdict.error_class == "CANNOT_LOAD_STATE_STORE.UNEXPECTED_FILE_SIZE"


def test_a_deleted_newest_zip_without_changelogs_names_the_zip_to_restore(tmp_path: Path) -> None:
    ckpt = unpack("agg_rocksdb", tmp_path)
    (ckpt / STORE / "3.zip").unlink()
    report = audit(str(ckpt), "4.3")
    assert report.verdict.restarts is False
    # Spark loads 2.zip and asks for the changelog of version 3 (seen live: "3.changelog does not exist")
    assert report.verdict.message == f"{STORE}/3.changelog does not exist"
    finding = next(f for f in report.findings if f.rule_id == "STATE-CHAIN-INCOMPLETE")
    assert finding.message.startswith(f"{STORE}/3.zip is missing and this store has no changelogs")
    assert finding.fix.startswith(f"Restore {STORE}/3.zip from a backup")


def test_ssts_without_a_sidecar_are_checked_by_their_block_checksums(tmp_path: Path) -> None:
    """Without a Hadoop .crc (object stores keep none) the default audit checks each SST against its own block
    checksums (formats/sst.py): nothing is skipped, and one flipped index byte (which stopped every Spark's load,
    tests/spark/damage.py rocksdb_sst_index_flipped_*) is found without RocksDB."""
    ckpt = unpack("agg_rocksdb", tmp_path)
    for crc in (ckpt / STORE / "SSTs").glob(".*.sst.crc"):
        crc.unlink()
    report = audit(str(ckpt))
    assert report.verdict.restarts is True
    assert not [s for s in report.skipped if "SST" in s.reason or "sst" in s.reason], report.skipped
    with zipfile.ZipFile(ckpt / STORE / "3.zip") as zf:
        meta = json.loads(zf.read("metadata").decode().split("\n", 1)[1])
    sst = ckpt / STORE / "SSTs" / meta["sstFiles"][0]["dfsSstFileName"]
    data = bytearray(sst.read_bytes())
    _meta, (index_offset, index_size) = sst_footer_handles(bytes(data))  # read by hand, not by ckptfix
    data[index_offset + index_size // 2] ^= 0xFF  # the middle of the index block
    sst.write_bytes(bytes(data))
    damaged = audit(str(ckpt))
    assert damaged.verdict.restarts is False and damaged.verdict.blocking_rule == "STATE-SST-CORRUPT"
    assert damaged.verdict.error is not None and "block checksum mismatch" in damaged.verdict.error.message
