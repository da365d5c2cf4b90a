"""ckptfix.stores.rocks on real Spark 4.3 RocksDB snapshots and changelogs, and live write-back.

Fixtures: ``tests/fixtures/formats/{rocksdb,rocksdb_v2,tws,tws_v2}`` (generator:
``tests/fixtures/formats/generate.py``) and ``tests/fixtures/state_rocks/merge_v{1,2}``
(generator: ``tests/fixtures/state_rocks/generate.py``). Expected states are written down
from the generators' inputs, not computed by the code under test.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import struct
import sys
import zipfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ckptfix.errors import FormatError, MissingExtra
from ckptfix.formats import codec, rocksdbzip, schema, statefile, unsaferow
from ckptfix.formats.statefile import Op, Record
from ckptfix.stores.rocks import (
    MERGE_DELIMITERS,
    NO_COLUMN_FAMILIES_4X,
    RocksSnapshot,
    build_snapshot,
    merge_delimiter,
)

FIX = Path(__file__).resolve().parent.parent / "fixtures"
PLAIN = FIX / "formats/rocksdb/state/0/0"
PLAIN_V2 = FIX / "formats/rocksdb_v2/state/0/0"
TWS = FIX / "formats/tws/state/0/0"
TWS_V2 = FIX / "formats/tws_v2/state/0/0"
MERGE = FIX / "state_rocks"
# groupBy(k).count(): the HDFS run of the same query wrote the key/value schema file
SCHEMA = schema.parse((FIX / "formats/hdfs/state/0/0/_metadata/schema").read_bytes())
assert isinstance(SCHEMA, schema.SchemaV2)
KEY = unsaferow.parse_schema(SCHEMA.key_schema)
VALUE = unsaferow.parse_schema(SCHEMA.value_schema)

# tests/fixtures/formats/generate.py: batches k1 k7 k7 | k7 k2 | k7 k1 k7 | k3 k7 -> cumulative counts
EXPECTED = {
    1: {"k1": 1, "k7": 2},
    2: {"k1": 1, "k2": 1, "k7": 3},
    3: {"k1": 2, "k2": 1, "k7": 5},
    4: {"k1": 2, "k2": 1, "k3": 1, "k7": 6},
}
SPARK_43_MEMBERS = {"MANIFEST-000005", "CURRENT", "000004.log", "OPTIONS-000007", "metadata"}


# ----------------------------------------------------------------------------------- helpers


def loaders(store: Path) -> dict[str, Callable[[], bytes]]:
    """dfsSstFileName -> a loader reading SSTs/<name> (read only when materialize asks)."""
    return {p.name: (lambda p=p: p.read_bytes()) for p in (store / "SSTs").iterdir()}


def sst_bytes(store: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in (store / "SSTs").iterdir()}


def counts(items: Iterable[tuple[bytes, bytes]]) -> dict[str, int]:
    """Decode groupBy-count pairs: 0x00 + key UnsafeRow -> 0x00 + value UnsafeRow."""
    out: dict[str, int] = {}
    for key, value in items:
        _, krow = unsaferow.split_rocksdb(key)
        _, vrow = unsaferow.split_rocksdb(value)
        out[unsaferow.decode_row(krow, KEY)["k"]] = unsaferow.decode_row(vrow, VALUE)["count"]
    return out


def changelog(path: Path) -> Iterator[Record]:
    raw = codec.decompress("lz4", path.read_bytes(), str(path))
    return statefile.iter_records(raw, str(path), "changelog")


def one(store: Path, pattern: str) -> Path:
    (found,) = store.glob(pattern)
    return found


def materialize(store: Path, zip_name: str, **kw: Any) -> RocksSnapshot:
    z = store / zip_name
    return RocksSnapshot.materialize(z.read_bytes(), str(z), loaders(store), **kw)


def rezip(members: Iterable[tuple[str, bytes]]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in members:
            zf.writestr(zipfile.ZipInfo(name), data)
    return buf.getvalue()


def members_of(data: bytes) -> list[tuple[str, bytes]]:
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        return [(i.filename, zf.read(i)) for i in zf.infolist()]


def tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


# ----------------------------------------------------------------------------------- reading


def test_reads_spark_zip_in_key_order(tmp_path: Path) -> None:
    with materialize(PLAIN, "4.zip", workdir=str(tmp_path)) as snap:
        items = list(snap.items())
        assert snap.metadata is not None and snap.metadata.num_keys == 4
        assert Path(snap.root).parent == tmp_path
    assert counts(items) == EXPECTED[4]
    assert [k for k, _ in items] == sorted(k for k, _ in items)
    assert all(len(k) == 25 and k[0] == 0 for k, _ in items)  # version byte + 24-byte row
    assert list(tmp_path.iterdir()) == []  # temp dir removed on exit


def test_items_is_streamed_and_can_stop_early() -> None:
    with materialize(PLAIN, "4.zip") as snap:
        it = snap.items()
        first = next(it)
        it.close()  # closing the generator closes the read-only DB
        assert counts([first]) == {"k1": 2}
        assert snap.count() == 4


def test_replay_changelogs_onto_empty_db() -> None:
    with RocksSnapshot.empty() as snap:
        assert list(snap.items()) == []
        for version in range(1, 5):
            assert snap.replay(changelog(PLAIN / f"{version}.changelog")) > 0
            assert counts(snap.items()) == EXPECTED[version]
        # the replayed state has exactly the bytes of Spark's own snapshot of version 4
        replayed = list(snap.items())
    with materialize(PLAIN, "4.zip") as spark_snap:
        assert replayed == list(spark_snap.items())


def test_replay_v3_changelogs_onto_checkpoint_v2_zip() -> None:
    zip_name = one(PLAIN_V2, "2_*.zip").name
    with materialize(PLAIN_V2, zip_name) as snap:
        assert counts(snap.items()) == EXPECTED[2]
        for version in (3, 4):
            snap.replay(changelog(one(PLAIN_V2, f"{version}_*.changelog")))
            assert counts(snap.items()) == EXPECTED[version]


def test_replay_delete_and_merge_semantics() -> None:
    with RocksSnapshot.empty() as snap:
        snap.replay(
            [
                Record(b"a", b"1"),
                Record(b"b", b"x", Op.MERGE),  # first merge on a missing key: the operand alone
                Record(b"b", b"y", Op.MERGE),
                Record(b"a", None, Op.DELETE),
                Record(b"c", b"3"),
            ]
        )
        assert list(snap.items()) == [(b"b", b"x,y"), (b"c", b"3")]
        snap.replay([Record(b"b", b"z", Op.MERGE)], merge_delimiter=b"")
        assert dict(snap.items())[b"b"] == b"x,yz"


@pytest.mark.parametrize("store", [TWS, TWS_V2], ids=["changelog-v2", "changelog-v4"])
def test_tws_changelog_replay_equals_spark_snapshot(store: Path) -> None:
    """ListState appends are MERGE records; Spark 4.3 (mergeOperatorVersion 2) joins them with
    no delimiter, so replaying with b"" reproduces Spark's own 4.zip byte for byte."""
    with materialize(TWS, "4.zip", merge_delimiter=b"") as spark_snap:
        expected = list(spark_snap.items())
    files = sorted(store.glob("*.changelog"), key=lambda p: int(p.name.split("_")[0].split(".")[0]))
    assert len(files) == 4
    with RocksSnapshot.empty(merge_delimiter=b"") as snap:
        for f in files:
            snap.replay(changelog(f))
        assert list(snap.items()) == expected
    with RocksSnapshot.empty() as comma:  # mergeOperatorVersion 1 semantics differ for lists
        for f in files:
            comma.replay(changelog(f))
        assert list(comma.items()) != expected


def list_element(value: str) -> bytes:
    """One ListState element: int32 LE length of (0x00 + row), 0x00, UnsafeRow of (v string)."""
    row = b"\x00" + unsaferow.encode_row(
        [value],
        unsaferow.parse_schema(
            '{"type":"struct","fields":[{"name":"v","type":"string","nullable":true,"metadata":{}}]}'
        ),
    )
    return struct.pack("<i", len(row)) + row


@pytest.mark.parametrize("name", ["merge_v1", "merge_v2"])
def test_unmerged_operands_use_the_querys_delimiter(name: str) -> None:
    """merge_v*/2.zip: ListState k1 = [k1, k1, k1], k2 = [k2]; the SSTs still hold merge
    operands, resolved with the delimiter recorded in the offset log."""
    offsets = (MERGE / name / "offsets/1").read_text().split("\n")
    delim = merge_delimiter(json.loads(offsets[1])["conf"])
    assert delim == {"merge_v1": b",", "merge_v2": b""}[name]
    store = MERGE / name / "state/0/0"
    with materialize(store, "2.zip", merge_delimiter=delim) as snap:
        lists = {k[2:]: v for k, v in snap.items() if k[:2] == b"\x03\x00"}  # cf 3 = lst
        # replaying nothing reopens read-write; the lists must stay intact
        snap.replay([])
        assert {k[2:]: v for k, v in snap.items() if k[:2] == b"\x03\x00"} == lists
    assert sorted(lists.values()) == [delim.join([list_element("k1")] * 3), list_element("k2")]


def test_unmerged_operands_without_a_merge_operator_are_an_error() -> None:
    store = MERGE / "merge_v2/state/0/0"
    with materialize(store, "2.zip", merge_delimiter=b"") as snap:
        for f in Path(snap.db_dir).glob("OPTIONS-*"):
            f.unlink()  # no OPTIONS file: RocksDB has no merge operator
        with pytest.raises(FormatError) as err:
            list(snap.items())
    assert err.value.kind == "unmerged-operands"


def test_merge_delimiter_from_offset_conf() -> None:
    assert merge_delimiter({}) == b","  # older offset logs: version 1
    assert merge_delimiter({"spark.sql.streaming.stateStore.rocksdb.mergeOperatorVersion": "2"}) == b""
    assert MERGE_DELIMITERS == {1: b",", 2: b""}
    with pytest.raises(ValueError):
        merge_delimiter({"spark.sql.streaming.stateStore.rocksdb.mergeOperatorVersion": "3"})


# ----------------------------------------------------------------------------------- errors


def test_missing_sst(tmp_path: Path) -> None:
    ssts: dict[str, bytes | Callable[[], bytes]] = dict(sst_bytes(PLAIN))
    gone = "000010-3618466a-c721-498c-844f-d4c4a2801484.sst"
    del ssts[gone]
    z = PLAIN / "4.zip"
    with pytest.raises(FormatError) as err:
        RocksSnapshot.materialize(z.read_bytes(), str(z), ssts, workdir=str(tmp_path))
    assert err.value.kind == "missing-file"
    assert err.value.path == str(PLAIN / "SSTs" / gone)
    assert list(tmp_path.iterdir()) == []


def test_sst_loader_file_not_found() -> None:
    ssts = loaders(PLAIN)
    gone = "000008-3aa1f74e-e67d-4f6b-8509-e6ec9020bc32.sst"
    ssts[gone] = lambda: (PLAIN / "SSTs" / "nope.sst").read_bytes()
    z = PLAIN / "4.zip"
    with pytest.raises(FormatError) as err:
        RocksSnapshot.materialize(z.read_bytes(), str(z), ssts)
    assert (err.value.kind, err.value.path) == ("missing-file", str(PLAIN / "SSTs" / gone))


def test_wrong_sst_size(tmp_path: Path) -> None:
    ssts: dict[str, bytes | Callable[[], bytes]] = dict(sst_bytes(PLAIN))
    name = "000009-d9c1d440-bc9a-4b86-9384-50a8a2e20da8.sst"
    ssts[name] = sst_bytes(PLAIN)[name][:1000]
    z = PLAIN / "4.zip"
    with pytest.raises(FormatError) as err:
        RocksSnapshot.materialize(z.read_bytes(), str(z), ssts, workdir=str(tmp_path))
    e = err.value
    assert (e.kind, e.path, e.expected, e.found, e.offset) == (
        "size-mismatch",
        str(PLAIN / "SSTs" / name),
        "1240 bytes",
        "1000 bytes",
        1000,
    )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("cut", [0, 10, 2000, -30])
def test_truncated_zip(cut: int, tmp_path: Path) -> None:
    data = (PLAIN / "4.zip").read_bytes()
    with pytest.raises(FormatError) as err:
        RocksSnapshot.materialize(data[:cut], "ckpt/state/0/0/4.zip", sst_bytes(PLAIN), workdir=str(tmp_path))
    assert err.value.path == "ckpt/state/0/0/4.zip"
    assert 0 <= err.value.offset <= len(data)
    assert list(tmp_path.iterdir()) == []


def test_garbage_sst_of_the_right_size(tmp_path: Path) -> None:
    name = "000009-d9c1d440-bc9a-4b86-9384-50a8a2e20da8.sst"
    ssts: dict[str, bytes | Callable[[], bytes]] = dict(sst_bytes(PLAIN))
    ssts[name] = b"\xab" * 1240
    z = PLAIN / "4.zip"
    with (
        RocksSnapshot.materialize(z.read_bytes(), str(z), ssts, workdir=str(tmp_path)) as snap,
        pytest.raises(FormatError) as err,
    ):
        list(snap.items())
    e = err.value
    assert (e.kind, e.path) == ("corrupt-sst", str(PLAIN / "SSTs" / name))
    assert "Corruption" in e.found and snap.db_dir not in e.found
    assert list(tmp_path.iterdir()) == []


def test_flipped_block_checksum_names_file_and_offset() -> None:
    name = "000009-d9c1d440-bc9a-4b86-9384-50a8a2e20da8.sst"
    good = sst_bytes(PLAIN)[name]
    ssts: dict[str, bytes | Callable[[], bytes]] = dict(sst_bytes(PLAIN))
    ssts[name] = good[:500] + bytes([good[500] ^ 0xFF]) + good[501:]
    z = PLAIN / "4.zip"
    with RocksSnapshot.materialize(z.read_bytes(), str(z), ssts) as snap, pytest.raises(FormatError) as err:
        list(snap.items())
    e = err.value
    assert (e.kind, e.path) == ("corrupt-sst", str(PLAIN / "SSTs" / name))
    assert "checksum mismatch" in e.found
    assert 0 < e.offset <= 500  # the block RocksDB read (it starts before the flipped byte)


def test_corrupt_manifest(tmp_path: Path) -> None:
    members = [
        (n, d[:40] + b"\x00" * (len(d) - 40) if n.startswith("MANIFEST-") else d)
        for n, d in members_of((PLAIN / "4.zip").read_bytes())
    ]
    with (
        RocksSnapshot.materialize(rezip(members), "c/4.zip", sst_bytes(PLAIN), workdir=str(tmp_path)) as snap,
        pytest.raises(FormatError) as err,
    ):
        list(snap.items())
    assert err.value.path == "c/4.zip!/MANIFEST-000005"
    assert err.value.kind == "corrupt-manifest"


@pytest.mark.parametrize("evil", ["../evil", "/abs", "a/b", "a\\b", "C:evil", "..", "sub/../../evil"])
def test_zip_slip_is_rejected_before_anything_is_written(evil: str, tmp_path: Path) -> None:
    work = tmp_path / "outer" / "work"  # every relative name above lands inside tmp_path: that tree is watched
    work.mkdir(parents=True)
    good = members_of((PLAIN / "4.zip").read_bytes())
    data = rezip([good[0], (evil, b"pwned"), *good[1:]])
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        info = zf.infolist()[1]
    assert info.filename == evil  # the name really is stored as crafted
    before = tree(tmp_path)
    with pytest.raises(FormatError) as err:
        RocksSnapshot.materialize(data, "ckpt/4.zip", sst_bytes(PLAIN), workdir=str(work))
    e = err.value
    assert (e.path, e.offset, e.expected, e.kind) == (
        "ckpt/4.zip",
        info.header_offset,
        "a flat member name",
        "unsafe-member",
    )
    assert e.found == repr(evil)
    assert list(work.iterdir()) == []
    assert tree(tmp_path) == before
    assert not Path("/abs").exists()


def test_missing_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "rocksdict", None)  # what an uninstalled extra looks like
    with pytest.raises(MissingExtra) as err:
        RocksSnapshot.empty()
    assert err.value.extra == "rocksdb"
    with pytest.raises(MissingExtra):
        build_snapshot([])


def test_bad_delimiter() -> None:
    with pytest.raises(ValueError):
        RocksSnapshot.empty(merge_delimiter=b";")
    with pytest.raises(ValueError):
        RocksSnapshot.empty(merge_delimiter=b",,")


# ----------------------------------------------------------------------------------- building


def test_build_snapshot_mirrors_spark_layout(tmp_path: Path) -> None:
    with materialize(PLAIN, "4.zip") as snap:
        built = build_snapshot(
            snap.items(),
            sst_suffix_uuid="11111111-2222-3333-4444-555555555555",
            column_family_fields=NO_COLUMN_FAMILIES_4X,
            workdir=str(tmp_path),
        )
    assert list(tmp_path.iterdir()) == []
    with zipfile.ZipFile(io.BytesIO(built.zip_bytes)) as zf:
        infos = zf.infolist()
        options = zf.read(next(i for i in infos if i.filename.startswith("OPTIONS-"))).decode()
        log = zf.read("000004.log")
    # the same members as Spark 4.3's own 4.zip (both written by RocksDB 9.8.4), metadata last
    assert {i.filename for i in infos} == SPARK_43_MEMBERS and infos[-1].filename == "metadata"
    assert log == b""  # the live WAL, empty since writes skip the WAL
    assert all(i.compress_type == zipfile.ZIP_DEFLATED and i.create_system == 0 for i in infos)
    for line in (
        "compression=kLZ4Compression",
        "format_version=5",
        "block_size=4096",
        "comparator=leveldb.BytewiseComparator",
    ):
        assert line in options
    parsed = rocksdbzip.parse(built.zip_bytes, "built.zip")
    assert parsed.metadata == built.metadata
    meta = built.metadata
    assert meta.num_keys == 4
    assert (meta.num_internal_keys, meta.column_family_mapping, meta.column_family_type_map) == (0, {}, {})
    assert meta.max_column_family_id == 0
    assert set(built.ssts) == {s.dfs_sst_file_name for s in meta.sst_files}
    for s in meta.sst_files:
        assert s.dfs_sst_file_name == s.local_file_name[:-4] + "-11111111-2222-3333-4444-555555555555.sst"
        assert len(built.ssts[s.dfs_sst_file_name]) == s.size_bytes
    with RocksSnapshot.materialize(built.zip_bytes, "x/4.zip", built.ssts) as again:
        assert counts(again.items()) == EXPECTED[4]


def test_build_snapshot_3_5_shape_and_snappy() -> None:
    items = [(bytes([i % 7]) + i.to_bytes(2, "big"), b"v%d" % i) for i in range(300)]
    built = build_snapshot(iter(items), compression="snappy", num_keys=123)
    text = rocksdbzip.dump_metadata(built.metadata).decode()
    assert list(json.loads(text.split("\n", 1)[1])) == ["sstFiles", "numKeys"]
    assert built.metadata.num_keys == 123
    with zipfile.ZipFile(io.BytesIO(built.zip_bytes)) as zf:
        options = zf.read(next(n for n in zf.namelist() if n.startswith("OPTIONS-"))).decode()
    assert "compression=kSnappyCompression" in options
    with RocksSnapshot.materialize(built.zip_bytes, "x/1.zip", built.ssts) as snap:
        assert list(snap.items()) == sorted(items)


def test_build_empty_snapshot() -> None:
    built = build_snapshot([])
    assert built.metadata.sst_files == () and built.metadata.num_keys == 0 and built.ssts == {}
    with RocksSnapshot.materialize(built.zip_bytes, "x/1.zip", {}) as snap:
        assert list(snap.items()) == []


def test_build_rejects_unknown_compression() -> None:
    with pytest.raises(ValueError):
        build_snapshot([], compression="brotli")


# ----------------------------------------------------------------------------------- live


ROCKS = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
LIVE_BATCHES = [["a", "b", "a"], ["b", "c"]]
LIVE_RESTART = ["a", "d"]
LIVE_BEFORE = {"a": 2, "b": 2, "c": 1}
LIVE_AFTER = {"a": 3, "b": 2, "c": 1, "d": 1}


def _write_input(src: Path, index: int, keys: list[str]) -> None:
    src.mkdir(parents=True, exist_ok=True)
    f = src / f"part-{index:04d}.json"
    f.write_text("".join(json.dumps({"k": k}) + "\n" for k in keys))
    os.utime(f, (1_700_000_000 + index, 1_700_000_000 + index))


def _run(spark: Any, src: Path, ckpt: Path) -> list[tuple[int, dict[str, int]]]:
    out: list[tuple[int, dict[str, int]]] = []

    def sink(df: Any, batch_id: int) -> None:
        out.append((batch_id, {r["k"]: r["count"] for r in df.collect()}))

    df = spark.readStream.schema("k string").option("maxFilesPerTrigger", 1).json(str(src))
    q = (
        df.groupBy("k")
        .count()
        .writeStream.outputMode("update")
        .foreachBatch(sink)
        .option("checkpointLocation", str(ckpt))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert q.awaitTermination(240), "query did not finish"
        if q.exception() is not None:
            raise AssertionError(str(q.exception()))
    finally:
        q.stop()
    return out


def _statestore(spark: Any, ckpt: Path) -> dict[str, int]:
    rows = spark.read.format("statestore").load(str(ckpt)).collect()
    return {r["key"]["k"]: r["value"]["count"] for r in rows}


def _latest_items(store: Path, version: int, delim: bytes) -> list[tuple[bytes, bytes]]:
    """State of ``version`` the way Spark loads it: newest zip <= version + later changelogs."""
    zips = sorted((int(p.stem), p) for p in store.glob("*.zip") if p.stem.isdigit() and int(p.stem) <= version)
    if zips:
        base, z = zips[-1]
        snap = RocksSnapshot.materialize(z.read_bytes(), str(z), loaders(store), merge_delimiter=delim)
    else:
        base, snap = 0, RocksSnapshot.empty(merge_delimiter=delim)
    with snap:
        for v in range(base + 1, version + 1):
            snap.replay(changelog(store / f"{v}.changelog"))
        return list(snap.items())


@pytest.mark.spark
@pytest.mark.parametrize("changelog_enabled", [False, True], ids=["zips", "changelog"])
def test_live_write_back_is_loaded_by_spark(spark: Any, tmp_path: Path, changelog_enabled: bool) -> None:
    confs = {
        "spark.sql.streaming.stateStore.providerClass": ROCKS,
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": str(changelog_enabled).lower(),
        "spark.sql.shuffle.partitions": "1",
    }
    saved = {k: spark.conf.get(k, None) for k in confs}
    src, ckpt = tmp_path / "input", tmp_path / "ckpt"
    try:
        for k, v in confs.items():
            spark.conf.set(k, v)
        for i, keys in enumerate(LIVE_BATCHES):
            _write_input(src, i, keys)
        first = _run(spark, src, ckpt)
        assert [b for b, _ in first] == [0, 1]
        assert _statestore(spark, ckpt) == LIVE_BEFORE

        store = ckpt / "state/0/0"
        version = len(LIVE_BATCHES)
        offset_lines = (ckpt / "offsets" / str(version - 1)).read_text().split("\n")
        delim = merge_delimiter(json.loads(offset_lines[1])["conf"])
        items = _latest_items(store, version, delim)
        assert counts(items) == LIVE_BEFORE

        built = build_snapshot(items, column_family_fields=NO_COLUMN_FAMILIES_4X)
        (store / "SSTs").mkdir(exist_ok=True)  # absent when Spark uploaded no snapshot yet
        for name, data in built.ssts.items():
            (store / "SSTs" / name).write_bytes(data)
        (store / f"{version}.zip").write_bytes(built.zip_bytes)
        (store / f".{version}.zip.crc").unlink(missing_ok=True)  # Hadoop's sidecar of the old zip
        # leave Spark nothing else to load version 2 from: its own zips, SSTs and changelogs go
        theirs = [*store.glob("*.changelog"), *store.glob("*.zip"), *(store / "SSTs").glob("*.sst")]
        for f in theirs:
            if f.name not in built.ssts and f.name != f"{version}.zip":
                f.unlink()
                (f.parent / f".{f.name}.crc").unlink(missing_ok=True)
        assert {p.name for p in store.iterdir() if not p.name.startswith(".")} == {
            f"{version}.zip",
            "SSTs",
            "_metadata",
        }
        assert _statestore(spark, ckpt) == LIVE_BEFORE  # Spark's reader loads our snapshot

        _write_input(src, len(LIVE_BATCHES), LIVE_RESTART)
        second = _run(spark, src, ckpt)
        assert second == [(version, {"a": 3, "d": 1})]  # counts continue from our snapshot
        assert _statestore(spark, ckpt) == LIVE_AFTER
    finally:
        for k, v in saved.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)
        shutil.rmtree(tmp_path, ignore_errors=True)
