"""RocksDB N.zip snapshots written by Spark 4.3 (tests/fixtures/formats)."""

from __future__ import annotations

import contextlib
import io
import zipfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ckptfix.errors import FormatError, UnsupportedVersion
from ckptfix.formats import rocksdbzip
from ckptfix.formats.rocksdbzip import LogFile, RocksDBMetadata, SstFile

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "formats"
PLAIN = FIX / "rocksdb/state/0/0/4.zip"
TWS = FIX / "tws/state/0/0/4.zip"
(V2,) = (FIX / "rocksdb_v2/state/0/0").glob("2_*.zip")
MEMBERS = ("MANIFEST-000005", "CURRENT", "000004.log", "OPTIONS-000007", "metadata")  # 4.3 layout


def check_ssts(path: Path, meta: RocksDBMetadata) -> None:
    """Every listed SST was copied next to the zip with its exact size (how many there are
    depends on when RocksDB compacted, so the count is not fixed)."""
    assert meta.sst_files
    assert len({s.local_file_name for s in meta.sst_files}) == len(meta.sst_files)
    for sst in meta.sst_files:
        assert sst.dfs_sst_file_name.startswith(sst.local_file_name.removesuffix(".sst") + "-")
        assert (path.parent / "SSTs" / sst.dfs_sst_file_name).stat().st_size == sst.size_bytes


def test_plain_aggregation_zip() -> None:
    model = rocksdbzip.parse(PLAIN.read_bytes(), str(PLAIN))
    assert model.names == MEMBERS
    meta = model.metadata
    assert meta.num_keys == 4  # k1 k2 k3 k7 after version 4
    assert (meta.num_internal_keys, meta.column_family_mapping, meta.max_column_family_id) == (0, {}, 0)
    assert meta.column_family_type_map == {} and meta.log_files is None and meta.extra == {}
    check_ssts(PLAIN, meta)


def test_checkpoint_v2_zip() -> None:
    meta = rocksdbzip.parse(V2.read_bytes(), str(V2)).metadata
    assert meta.num_keys == 3  # k1 k7 k2 after version 2
    check_ssts(V2, meta)


def test_tws_zip_column_families() -> None:
    meta = rocksdbzip.parse(TWS.read_bytes(), str(TWS)).metadata
    # cnt for k1 k2 k3 k7, lst for k2 k3 k7 (k1's list was cleared) -> 7 user keys;
    # $rowCounter_lst for k2 k3 k7 -> 3 internal keys
    assert (meta.num_keys, meta.num_internal_keys) == (7, 3)
    assert meta.column_family_mapping == {"default": 1, "cnt": 2, "$rowCounter_lst": 3, "lst": 4}
    assert meta.column_family_type_map == {"default": False, "cnt": False, "$rowCounter_lst": True, "lst": False}
    assert meta.max_column_family_id == 4
    check_ssts(TWS, meta)


def test_metadata_dump_is_byte_exact() -> None:
    for path in (PLAIN, V2, TWS):
        with zipfile.ZipFile(path) as zf:
            raw = zf.read("metadata")
        assert rocksdbzip.dump_metadata(rocksdbzip.parse_metadata(raw)) == raw


def test_35_shape_and_unknown_keys() -> None:
    raw = (
        b'v1\n{"sstFiles":[{"localFileName":"000008.sst","dfsSstFileName":"000008-u.sst","sizeBytes":1236}],'
        b'"numKeys":2}'
    )
    meta = rocksdbzip.parse_metadata(raw)
    assert meta.num_internal_keys is None and meta.column_family_mapping is None
    assert rocksdbzip.dump_metadata(meta) == raw
    raw2 = (
        b'v1\n{"sstFiles":[],"logFiles":[{"localFileName":"1.log","dfsLogFileName":"1-u.log","sizeBytes":0,"x":1}],'
        b'"numKeys":-1,"newField":true}'
    )
    meta2 = rocksdbzip.parse_metadata(raw2)
    assert meta2.log_files == (LogFile("1.log", "1-u.log", 0, {"x": 1}),)
    assert meta2.extra == {"newField": True}
    assert rocksdbzip.dump_metadata(meta2) == raw2


names = st.text(st.characters(codec="ascii", categories=("L", "N")), min_size=1, max_size=12)
ssts = st.builds(SstFile, names, names, st.integers(0, 2**40))
metas = st.builds(
    RocksDBMetadata,
    st.lists(ssts, max_size=3).map(tuple),
    st.one_of(st.none(), st.lists(st.builds(LogFile, names, names, st.integers(0, 99)), max_size=2).map(tuple)),
    st.one_of(st.none(), st.integers(-1, 2**40)),
    st.one_of(st.none(), st.integers(0, 2**40)),
    st.one_of(st.none(), st.dictionaries(names, st.integers(0, 2**15 - 1), max_size=3)),
    st.one_of(st.none(), st.dictionaries(names, st.booleans(), max_size=3)),
    st.one_of(st.none(), st.integers(0, 2**15 - 1)),
    st.dictionaries(names.map(lambda s: "x" + s), st.integers(), max_size=2),
)


@given(metas)
def test_roundtrip_metadata(meta: RocksDBMetadata) -> None:
    assert rocksdbzip.parse_metadata(rocksdbzip.dump_metadata(meta)) == meta


@given(metas, st.dictionaries(names, st.binary(max_size=50), max_size=3))
def test_build_then_parse(meta: RocksDBMetadata, files: dict[str, bytes]) -> None:
    files.pop("metadata", None)
    model = rocksdbzip.parse(rocksdbzip.build(files, meta))
    assert model.metadata == meta
    assert model.names == (*files, "metadata")


# ------------------------------------------------------------------ damage


def zip_of(entries: list[tuple[str, bytes]], method: int = zipfile.ZIP_STORED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=method) as zf:
        for name, data in entries:
            zf.writestr(name, data)
    return buf.getvalue()


META = b'v1\n{"sstFiles":[],"numKeys":0}'


@pytest.mark.parametrize("name", ["../evil", "a/../../b", "/etc/passwd", "C:/x", "..\\x"])
def test_unsafe_member(name: str) -> None:
    data = zip_of([("CURRENT", b"MANIFEST-000005\n"), (name, b"x"), ("metadata", META)])
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        expected_offset = zf.getinfo(name).header_offset
    with pytest.raises(FormatError) as info:
        rocksdbzip.parse(data, "1.zip")
    assert (info.value.kind, info.value.offset) == ("unsafe-member", expected_offset)


def test_bad_crc() -> None:
    data = bytearray(zip_of([("CURRENT", b"MANIFEST-000005\n"), ("metadata", META)]))
    at = data.index(b"MANIFEST-000005\n")  # stored: the content sits right after the local header
    data[at] ^= 0x20
    with pytest.raises(FormatError) as info:
        rocksdbzip.parse(bytes(data), "1.zip")
    assert (info.value.kind, info.value.offset) == ("bad-crc", 0)


def test_corrupt_deflate_stream_in_real_zip() -> None:
    data = bytearray(PLAIN.read_bytes())
    with zipfile.ZipFile(PLAIN) as zf:
        info = zf.getinfo("OPTIONS-000007")
    start = info.header_offset + 30 + len(info.filename) + len(info.extra)
    data[start + 10 : start + 40] = b"\xff" * 30
    with pytest.raises(FormatError) as err:
        rocksdbzip.parse(bytes(data), "4.zip")
    assert err.value.kind in ("bad-crc", "corrupt-zip")
    assert err.value.offset == info.header_offset


def test_truncated_real_zip() -> None:
    data = PLAIN.read_bytes()
    with pytest.raises(FormatError) as info:
        rocksdbzip.parse(data[:-10], "4.zip")
    assert (info.value.kind, info.value.offset) == ("truncated", len(data) - 10)
    with pytest.raises(FormatError) as info:
        rocksdbzip.parse(data[:1000], "4.zip")
    assert (info.value.kind, info.value.offset) == ("truncated", 1000)


def test_not_a_zip_and_empty() -> None:
    with pytest.raises(FormatError) as info:
        rocksdbzip.parse(b"hello world, not a zip at all", "4.zip")
    assert (info.value.kind, info.value.offset) == ("not-a-zip", 0)
    with pytest.raises(FormatError) as info:
        rocksdbzip.parse(b"", "4.zip")
    assert info.value.kind == "empty"


def test_missing_metadata_member() -> None:
    with pytest.raises(FormatError) as info:
        rocksdbzip.parse(zip_of([("CURRENT", b"x")]), "4.zip")
    assert info.value.kind == "missing-metadata"


def test_metadata_version_and_shape() -> None:
    # v2: Spark 4.0 with checkpoint format v2 (tests/audit/test_zip_metadata_v2.py); v3 no Spark writes
    assert rocksdbzip.parse(zip_of([("metadata", b'v2\n{"sstFiles":[]}')]), "4.zip").metadata.version == 2
    with pytest.raises(UnsupportedVersion):
        rocksdbzip.parse(zip_of([("metadata", b'v3\n{"sstFiles":[]}')]), "4.zip")
    with pytest.raises(FormatError) as info:
        rocksdbzip.parse(zip_of([("metadata", b'v1\n{"sstFiles":[{"localFileName":1}]}')]), "4.zip")
    assert (info.value.kind, info.value.offset, info.value.path) == ("invalid-metadata", 3, "4.zip!/metadata")
    with pytest.raises(FormatError) as info:
        rocksdbzip.parse_metadata(b'v1\n{"numKeys":1}')
    assert info.value.kind == "invalid-metadata"


@given(st.data())
def test_damage_only_raises_format_error(data: st.DataObject) -> None:
    real = bytearray(PLAIN.read_bytes())
    for _ in range(data.draw(st.integers(1, 3))):
        real[data.draw(st.integers(0, len(real) - 1))] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(real)))
    with contextlib.suppress(FormatError):
        rocksdbzip.parse(bytes(real[:cut]))
