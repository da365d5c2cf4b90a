"""Deep verification vouches for every byte (issue 15): one flipped byte, size unchanged, in each kind of state
file of checkpoints Spark 3.5.9 wrote (tests/fixtures/state35) is found by `ckptfix state ls --verify`, which
no longer calls a version loadable when a file of its chain is damaged, and by `ckptfix audit` (files the restart
reads) or `audit --deep` (every file), naming the file and the byte or block.

Which file is damaged, and so which versions cannot load, follows from the flip and the file layout alone
(version N of an HDFS store = the newest snapshot <= N + the deltas after it; of a RocksDB store = the newest
zip <= N with its SSTs + the changelogs after it)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ckptfix.audit import audit
from ckptfix.cli.main import app
from tests.state.test_state35 import extract


def flip(path: Path, at: int | None = None) -> None:
    data = bytearray(path.read_bytes())
    i = len(data) // 2 if at is None else at
    data[i] ^= 0xFF
    path.write_bytes(bytes(data))


def state_ls(ckpt: Path) -> dict[str, Any]:
    result = CliRunner().invoke(app, ["state", "ls", str(ckpt), "--verify", "--format", "json"])
    assert result.exit_code in (0, 1), result.output
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def partition(doc: dict[str, Any], p: int) -> dict[str, Any]:
    (part,) = [x for x in doc["operators"][0]["partitions"] if x["partition"] == p]
    return part


def zip_ssts(ckpt: Path, zip_version: int) -> set[str]:
    import zipfile

    with zipfile.ZipFile(ckpt / "state/0/0" / f"{zip_version}.zip") as zf:
        meta = json.loads(zf.read("metadata").decode().split("\n", 1)[1])
    return {f["dfsSstFileName"] for f in meta["sstFiles"]}


def sst_of(ckpt: Path, zip_version: int, older: int) -> Path:
    """An SST that zip ``zip_version`` lists and zip ``older`` does not (zips share their unchanged SSTs)."""
    (name,) = sorted(zip_ssts(ckpt, zip_version) - zip_ssts(ckpt, older))[-1:]
    return ckpt / "state/0/0/SSTs" / name


# (fixture, file under state/0/0 to flip, drop its Hadoop .crc?, versions that stay loadable,
#  what audit (restart = version 5) must say without --deep, with --deep)
CASES = {
    "delta-old": ("agg_hdfs", "2.delta", False, "1,3-5", None, "STATE-OLD-FILE-CORRUPT"),
    "delta-in-chain": ("agg_hdfs", "5.delta", False, "1-4", "STATE-FILE-CORRUPT", None),
    "delta-in-chain-no-crc": ("agg_hdfs", "5.delta", True, "1-4", "STATE-FILE-CORRUPT", None),
    "snapshot": ("agg_hdfs", "3.snapshot", False, "1-2", "STATE-SNAPSHOT-CORRUPT", None),
    "changelog": ("agg_rocksdb_changelog", "5.changelog", False, "1-4", "STATE-FILE-CORRUPT", None),
    "zip": ("agg_rocksdb_changelog", "4.zip", False, "1-3", "STATE-CHECKSUM-MISMATCH", None),
    "zip-no-crc": ("agg_rocksdb_changelog", "4.zip", True, "1-3", "STATE-FILE-CORRUPT", None),
    "sst-crc": ("agg_rocksdb_changelog", "SST", False, "1-3", "STATE-SST-CORRUPT", None),
    "sst-no-crc": ("agg_rocksdb_changelog", "SST", True, "1-3", "STATE-SST-CORRUPT", None),
    "zip-sidecar": ("agg_rocksdb_changelog", ".4.zip.crc", False, "1-3", "STATE-CHECKSUM-MISMATCH", None),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_one_flipped_byte(tmp_path: Path, name: str) -> None:
    fixture, rel, drop_crc, loadable, plain_rule, deep_rule = CASES[name]
    ckpt = extract(fixture, tmp_path)
    before = state_ls(ckpt)
    assert partition(before, 0)["loadable"] == "1-5" and partition(before, 0)["ok"]
    path = sst_of(ckpt, 4, 2) if rel == "SST" else ckpt / "state/0/0" / rel
    flip(path, at=8 if path.name.endswith(".crc") else None)  # a sidecar: flip a checksum, not its header
    if drop_crc:
        (path.parent / f".{path.name}.crc").unlink()
    damaged = path if not path.name.endswith(".crc") else path.parent / path.name[1 : -len(".crc")]

    after = partition(state_ls(ckpt), 0)
    assert after["loadable"] == loadable, after
    if "5" not in loadable.split("-")[-1:]:  # the last committed version is among the damaged
        assert not after["ok"] and damaged.name in after["problem"], after
    assert any(damaged.name in why for why in after["broken"].values()), after
    assert partition(state_ls(ckpt), 1)["ok"]  # the other partition is untouched

    report = audit(str(ckpt), "3.5")
    rules = {f.rule_id for f in report.findings}
    if plain_rule is None:
        assert not {r for r in rules if r.startswith("STATE-")}, rules
    else:
        (finding,) = [f for f in report.findings if f.rule_id == plain_rule]
        assert damaged.name in finding.message and finding.evidence[0].offset is not None
        # every damaged file here blocks Spark 3.5's restart: an SST through its Hadoop .crc (ChecksumException
        # while Spark copies it) or, without one, through the block RocksDB reads when it opens the table (the
        # middle of these small SSTs is their properties block; tests/spark/damage.py rocksdb_sst_*_flipped_*)
        assert report.verdict.restarts is False, report.verdict
        if name == "sst-no-crc":
            assert report.verdict.error is not None
            assert report.verdict.error.message.startswith("block checksum mismatch: stored = "), report.verdict
        assert finding.severity == "error"
    deep = audit(str(ckpt), "3.5", deep=True)
    want = deep_rule or plain_rule
    found = [f for f in deep.findings if f.rule_id == want]
    assert found and damaged.name in found[0].message, [(f.rule_id, f.message) for f in deep.findings]


def test_untouched_fixtures_verify_clean(tmp_path: Path) -> None:
    for fixture in ("agg_hdfs", "agg_rocksdb", "agg_rocksdb_changelog", "join_hdfs", "dedup_wm_hdfs"):
        ckpt = extract(fixture, tmp_path / fixture)
        doc = state_ls(ckpt)
        assert doc["ok"], fixture
        assert all(not p["broken"] for op in doc["operators"] for p in op["partitions"]), fixture
        deep = audit(str(ckpt), "3.5", deep=True)
        assert deep.verdict.restarts is True, (fixture, deep.verdict.headline)
        shutil.rmtree(tmp_path / fixture)


def test_a_corrupt_data_block_fails_state_read_rather_than_ending_it_early(tmp_path: Path) -> None:
    """RocksDB ends an iterator at a block whose checksum fails, as if the keys stopped there; only the iterator's
    status says otherwise (seen with rocksdict: its ``items()`` returned 92,803 of 250,243 keys without an error).
    A flipped byte in the first data block of an SST the restart's zip lists (no Hadoop sidecar to catch it first):
    `state read` (the bulk path and the row-by-row one) fails naming the SST; it never returns fewer rows."""
    from ckptfix.errors import FormatError
    from ckptfix.state.read import _store, read_state, select, store_chain
    from ckptfix.stores import records

    ckpt = extract("agg_rocksdb_changelog", tmp_path)

    def bulk_pairs() -> Any:
        sel = select(str(ckpt), operator=0, version=4, partition=0)
        return records.rocksdb_bulk_pairs(sel.ckpt, store_chain(sel, _store(sel, 0, sel.store_name)), sel.codec)

    ((keys, _values),) = bulk_pairs()  # zip 4 alone: the bulk path reads the database
    assert len(keys) == len(list(read_state(str(ckpt), operator=0, version=4, partition=0).rows)) > 0
    sst = sst_of(ckpt, 4, 2)
    flip(sst, at=16)  # inside the first data block (an SST starts with its data blocks)
    (sst.parent / f".{sst.name}.crc").unlink()
    assert bulk_pairs() is None  # not the keys before the damaged block: the row-by-row reader reports it
    for bulk in (True, False):
        read = read_state(str(ckpt), operator=0, version=4, partition=0)
        with pytest.raises(FormatError) as exc:
            if bulk:
                from ckptfix.state import export

                export.arrow_table(read.rows, read.columns, read.schemas)
            else:
                list(read.rows)
        assert sst.name.split("-")[0] in str(exc.value) and "checksum" in str(exc.value), exc.value
