"""Record streams of real HDFS deltas/snapshots and RocksDB changelogs V1-V4.

Expected values come from the generator's input (see fixtures/formats/generate.py):
batch 0: k1 k7 k7 / batch 1: k7 k2 / batch 2: k7 k1 k7 / batch 3: k3 k7, so after version
1..4 the counts are {k1:1,k7:2}, {k7:3,k2:1}, {k7:5,k1:2}, {k3:1,k7:6}; k7 is counted 6 times.
Rows are decoded here by hand (UnsafeRow: 8-byte null bitset, then one 8-byte little-endian
word per field: a long, or (offset << 32 | size) pointing at the string bytes).
"""

from __future__ import annotations

import contextlib
import struct
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ckptfix.errors import FormatError, UnsupportedVersion
from ckptfix.formats import lz4block, statefile
from ckptfix.formats.statefile import ChangelogHeader, LineageEntry, Op, Record, StateFile

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "formats"
STORE = "state/0/0"
DELTAS = {1: {"k1": 1, "k7": 2}, 2: {"k7": 3, "k2": 1}, 3: {"k7": 5, "k1": 2}, 4: {"k3": 1, "k7": 6}}
CF_CNT, CF_ROW_COUNTER, CF_LST = 2, 3, 4  # columnFamilyMapping of tws/4.zip


def raw(rel: str) -> bytes:
    return lz4block.decode((FIX / rel).read_bytes(), rel)


def one(pattern: str) -> str:
    (match,) = FIX.glob(pattern)
    return str(match.relative_to(FIX))


def row_string(row: bytes) -> str:
    word = int.from_bytes(row[8:16], "little")
    offset, size = word >> 32, word & 0xFFFFFFFF
    return row[offset : offset + size].decode()


def row_long(row: bytes) -> int:
    return int.from_bytes(row[8:16], "little", signed=True)


def as_counts(records: list[Record], prefix: int = 0) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in records:
        assert r.op is Op.PUT and r.value is not None
        out[row_string(r.key[prefix:])] = row_long(r.value[prefix:])
    return out


# ------------------------------------------------------------------ HDFS


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_hdfs_delta(version: int) -> None:
    records = list(statefile.iter_records(raw(f"hdfs/{STORE}/{version}.delta"), kind="delta"))
    assert as_counts(records) == DELTAS[version]
    assert all(len(r.key) == 24 and len(r.value or b"") == 16 for r in records)


def test_hdfs_snapshots_and_replay() -> None:
    snap2 = list(statefile.iter_records(raw(f"hdfs/{STORE}/2.snapshot"), kind="snapshot"))
    assert as_counts(snap2) == {"k1": 1, "k7": 3, "k2": 1}
    snap4 = as_counts(list(statefile.iter_records(raw(f"hdfs/{STORE}/4.snapshot"), kind="snapshot")))
    assert snap4 == {"k1": 2, "k2": 1, "k3": 1, "k7": 6}
    state = as_counts(snap2)
    for v in (3, 4):
        state.update(as_counts(list(statefile.iter_records(raw(f"hdfs/{STORE}/{v}.delta"), kind="delta"))))
    assert state == snap4


def test_verify_counts_and_offsets() -> None:
    data = raw(f"hdfs/{STORE}/4.snapshot")
    assert statefile.verify(data, kind="snapshot") == 4
    offsets = [r.offset for r in statefile.iter_records(data, kind="snapshot")]
    assert offsets == [0, 48, 96, 144]  # 4 + 24 + 4 + 16 bytes per record


def test_real_files_dump_byte_exact() -> None:
    for f in sorted(FIX.rglob("*")):
        if f.suffix in (".delta", ".snapshot", ".changelog"):
            rel = str(f.relative_to(FIX))
            data = raw(rel)
            model = statefile.parse(data, rel, f.suffix[1:])  # type: ignore[arg-type]
            assert statefile.dump(model) == data, rel


# ------------------------------------------------------------------ RocksDB changelogs


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_changelog_v1(version: int) -> None:
    data = raw(f"rocksdb/{STORE}/{version}.changelog")
    assert statefile.parse_changelog_header(data).version == 1
    records = list(statefile.iter_records(data, kind="changelog"))
    assert all(r.key[0] == 0 and r.value is not None and r.value[0] == 0 for r in records)  # encoding version 0
    assert as_counts(records, prefix=1) == DELTAS[version]


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_changelog_v3_lineage(version: int) -> None:
    rel = one(f"rocksdb_v2/{STORE}/{version}_*.changelog")
    data = raw(rel)
    header = statefile.parse_changelog_header(data, rel)
    assert header.version == 3
    if version == 1:
        assert header.lineage == ()
    else:  # every version had a snapshot, so the lineage is just the previous version's id
        prev = one(f"rocksdb_v2/{STORE}/{version - 1}_*.changelog")
        prev_id = Path(prev).name.split("_", 1)[1].removesuffix(".changelog")
        assert header.lineage == (LineageEntry(version - 1, prev_id),)
    assert as_counts(list(statefile.iter_records(data, rel, "changelog")), prefix=1) == DELTAS[version]


@pytest.mark.parametrize("subdir,version", [("rocksdb_v2", 2), ("tws_v2", 2), ("rocksdb_v2", 1)])
def test_changelog_header_end_on_every_prefix(subdir: str, version: int) -> None:
    """Spark's reader meets the header first: the end :func:`changelog_header_end` gives is where the lineage
    string of a real 4.x V3/V4 changelog ends; every shorter prefix ends inside it (None), every longer one not."""
    glob = f"{subdir}/{STORE}/{version}_*.changelog"
    data = raw(one(glob))
    header = statefile.parse_changelog_header(data)
    (n,) = struct.unpack_from(">H", data, 0)
    (m,) = struct.unpack_from(">H", data, 2 + n)
    end = 2 + n + 2 + m  # version UTF, then the lineage UTF (Java's writeUTF: a 2-byte length, then the bytes)
    assert header.lineage is not None and statefile.changelog_header_end(data) == end
    assert all(statefile.changelog_header_end(data[:cut]) is None for cut in range(end))
    assert statefile.changelog_header_end(data[:end]) == end
    assert statefile.changelog_version_read(data[: 2 + n]) and not statefile.changelog_version_read(data[: 1 + n])


def test_changelog_header_end_v1() -> None:
    """No version string (Spark reads such a file as V1 from byte 0): the header is empty."""
    assert statefile.changelog_header_end(b"\x00\x02x0" + b"\xff" * 4) == 0


def tws_summary(data: bytes) -> tuple[dict[str, int], dict[str, int], list[tuple[Op, int, str]]]:
    """(cnt per key, list-row-counter per key, [(op, cf, key)]) of a TWS changelog."""
    cnt: dict[str, int] = {}
    counter: dict[str, int] = {}
    ops: list[tuple[Op, int, str]] = []
    for r in statefile.iter_records(data, kind="changelog"):
        cf = struct.unpack_from("<h", r.key)[0]
        key = row_string(r.key[3:])
        ops.append((r.op, cf, key))
        if r.op is Op.PUT and r.value is not None:
            (cnt if cf == CF_CNT else counter)[key] = row_long(r.value[1:])
        if r.op is Op.MERGE and r.value is not None:  # int32 LE length + 0x00 + row
            assert struct.unpack_from("<i", r.value)[0] == len(r.value) - 4
            assert row_string(r.value[5:]) == key
    return cnt, counter, ops


@pytest.mark.parametrize("subdir,header_version", [("tws", 2), ("tws_v2", 4)])
def test_changelog_tws(subdir: str, header_version: int) -> None:
    per_version = {}
    for version in (1, 2, 3, 4):
        rel = one(f"{subdir}/{STORE}/{version}{'_*' if subdir == 'tws_v2' else ''}.changelog")
        data = raw(rel)
        assert statefile.parse_changelog_header(data, rel).version == header_version
        per_version[version] = tws_summary(data)
    # ValueState cnt = rows seen so far for the key
    assert per_version[1][0] == {"k1": 1, "k7": 2}
    assert per_version[2][0] == {"k7": 3, "k2": 1}
    assert per_version[3][0] == {"k7": 5, "k1": 2}
    assert per_version[4][0] == {"k3": 1, "k7": 6}
    # one list append (merge) per input row, except k1 in batch 2, whose list is cleared
    merges = {v: sorted(k for op, cf, k in ops if op is Op.MERGE) for v, (_, _, ops) in per_version.items()}
    assert merges == {1: ["k1", "k7", "k7"], 2: ["k2", "k7"], 3: ["k7", "k7"], 4: ["k3", "k7"]}
    deletes = {v: sorted((cf, k) for op, cf, k in ops if op is Op.DELETE) for v, (_, _, ops) in per_version.items()}
    assert deletes == {1: [], 2: [], 3: [(CF_ROW_COUNTER, "k1"), (CF_LST, "k1")], 4: []}
    # $rowCounter_lst = the list's length: k7's list was never cleared (2+1+2+1 rows)
    assert per_version[4][1] == {"k3": 1, "k7": 6}
    assert [len(ops) for _, _, ops in per_version.values()] == [8, 6, 8, 6]


def test_tws_v4_lineage() -> None:
    rel = one(f"tws_v2/{STORE}/2_*.changelog")
    header = statefile.parse_changelog_header(raw(rel), rel)
    prev_id = Path(one(f"tws_v2/{STORE}/1_*.changelog")).name[2:].removesuffix(".changelog")
    assert header == ChangelogHeader(4, (LineageEntry(1, prev_id),))


# ------------------------------------------------------------------ writers and round trips

keys = st.binary(max_size=40)
values = st.binary(max_size=40)
puts = st.builds(Record, keys, values, st.just(Op.PUT))
deletes = st.builds(Record, keys, st.none(), st.just(Op.DELETE))
merges = st.builds(Record, keys, values, st.just(Op.MERGE))
lineages = st.lists(st.builds(LineageEntry, st.integers(0, 2**62), st.uuids().map(str)), max_size=4).map(tuple)


@given(st.lists(puts, max_size=20))
def test_roundtrip_snapshot(records: list[Record]) -> None:
    model = StateFile("snapshot", tuple(records))
    assert statefile.parse(statefile.dump(model), kind="snapshot") == model


@given(st.lists(st.one_of(puts, deletes), max_size=20))
def test_roundtrip_delta_and_v1_v3(records: list[Record]) -> None:
    model = StateFile("delta", tuple(records))
    assert statefile.parse(statefile.dump(model), kind="delta") == model
    for version, lineage in ((1, None), (3, ())):
        data = statefile.dump_changelog(records, version, lineage)
        parsed = statefile.parse(data, kind="changelog")
        assert parsed.records == tuple(records)


@given(st.lists(st.one_of(puts, deletes, merges), max_size=20), lineages)
def test_roundtrip_changelog_v2_v4(records: list[Record], lineage: tuple[LineageEntry, ...]) -> None:
    for model in (
        StateFile("changelog", tuple(records), ChangelogHeader(2, None)),
        StateFile("changelog", tuple(records), ChangelogHeader(4, lineage)),
    ):
        assert statefile.parse(statefile.dump(model), kind="changelog") == model


def test_empty_files() -> None:
    assert statefile.dump_snapshot([]) == b"\xff\xff\xff\xff"
    assert statefile.dump_changelog([], 2) == bytes.fromhex("0002763200")
    assert statefile.verify(b"\xff\xff\xff\xff", kind="changelog") == 0


def test_writers_refuse_what_the_format_cannot_hold() -> None:
    with pytest.raises(ValueError):
        statefile.dump_snapshot([Record(b"k", None, Op.DELETE)])
    with pytest.raises(ValueError):
        statefile.dump_changelog([Record(b"k", b"v", Op.MERGE)], 1)


# ------------------------------------------------------------------ corruption


def error(data: bytes, kind: statefile.FileKind = "delta") -> FormatError:
    with pytest.raises(FormatError) as info:
        statefile.verify(data, "x", kind)
    return info.value


def test_negative_key_length() -> None:
    data = raw(f"hdfs/{STORE}/1.delta")
    bad = data[:48] + struct.pack(">i", -2) + data[52:]
    err = error(bad)
    assert (err.kind, err.offset) == ("bad-length", 48)


def test_negative_value_length() -> None:
    data = raw(f"hdfs/{STORE}/1.delta")
    bad = data[:28] + struct.pack(">i", -7) + data[32:]
    err = error(bad)
    assert (err.kind, err.offset) == ("bad-length", 28)


def test_key_length_past_the_end() -> None:
    data = raw(f"hdfs/{STORE}/1.delta")
    bad = data[:48] + struct.pack(">i", 1000) + data[52:]
    err = error(bad)
    assert (err.kind, err.offset) == ("out-of-bounds", 48)


def test_value_length_past_the_end() -> None:
    data = raw(f"hdfs/{STORE}/1.delta")
    bad = data[:76] + struct.pack(">i", 17) + data[80:]  # eats a byte of the end marker
    err = error(bad)
    assert (err.kind, err.offset) == ("truncated", 97)


def test_value_length_past_the_end_exactly() -> None:
    data = raw(f"hdfs/{STORE}/1.delta")
    bad = data[:76] + struct.pack(">i", 21) + data[80:]  # 16 + 4 bytes left after it
    err = error(bad)
    assert (err.kind, err.offset) == ("out-of-bounds", 76)


def test_missing_end_marker() -> None:
    data = raw(f"hdfs/{STORE}/1.delta")
    err = error(data[:-4])
    assert (err.kind, err.offset) == ("truncated", 96)
    err = error(data[:-2])
    assert (err.kind, err.offset) == ("truncated", 96)


def test_cut_inside_a_record() -> None:
    data = raw(f"hdfs/{STORE}/1.delta")
    err = error(data[:60])  # inside the second key
    assert (err.kind, err.offset) == ("out-of-bounds", 48)


def test_trailing_bytes() -> None:
    data = raw(f"hdfs/{STORE}/1.delta")
    err = error(data + b"\x00\x00")
    assert (err.kind, err.offset) == ("trailing-bytes", 100)
    v2 = raw(one(f"tws/{STORE}/1.changelog"))
    err = error(v2 + b"\x01", "changelog")
    assert (err.kind, err.offset) == ("trailing-bytes", len(v2))


def test_removal_inside_snapshot() -> None:
    data = statefile.dump_delta([Record(b"a", b"1"), Record(b"b", None, Op.DELETE)])
    err = error(data, "snapshot")
    assert (err.kind, err.offset) == ("removal-in-snapshot", 4 + 1 + 4 + 1 + 4 + 1)
    assert statefile.verify(data, kind="delta") == 2


def test_v2_bad_record_type_and_missing_end() -> None:
    data = raw(one(f"tws/{STORE}/1.changelog"))
    bad = data[:4] + b"\x07" + data[5:]
    err = error(bad, "changelog")
    assert (err.kind, err.offset) == ("bad-record-type", 4)
    err = error(data[:-1], "changelog")
    assert (err.kind, err.offset) == ("truncated", len(data) - 1)


def test_v2_delete_with_a_value() -> None:
    data = statefile.dump_changelog([Record(b"k", None, Op.DELETE)], 2)
    bad = data[:-5] + struct.pack(">i", 0) + b"\x00"
    err = error(bad, "changelog")
    assert (err.kind, err.offset) == ("bad-length", 4 + 1 + 4 + 1)


def test_unknown_changelog_version() -> None:
    data = b"\x00\x02v7" + b"\x00"
    with pytest.raises(UnsupportedVersion) as info:
        statefile.verify(data, "x", "changelog")
    assert (info.value.kind, info.value.offset, info.value.version) == ("unsupported-version", 0, 7)


def test_header_that_is_not_a_version_falls_back_to_v1() -> None:
    # first key of 0x00027800 bytes: its length's first two bytes read as UTF "x\x00..." -> V1
    assert statefile.parse_changelog_header(b"\x00\x02x0" + b"\xff" * 4).version == 1
    assert statefile.parse_changelog_header(b"\xff\xff\xff\xff").version == 1


def test_bad_lineage_json() -> None:
    data = b"\x00\x02v3\x00\x03[{]" + b"\xff\xff\xff\xff"
    err = error(data, "changelog")
    assert (err.kind, err.offset) == ("invalid-json", 4)


@given(st.binary(max_size=200), st.sampled_from(statefile.KINDS))
def test_random_bytes_only_raise_format_error(data: bytes, kind: statefile.FileKind) -> None:
    with contextlib.suppress(FormatError):
        statefile.verify(data, "x", kind)


@given(st.lists(st.one_of(puts, deletes), max_size=8), st.data())
def test_fast_walk_agrees_with_the_careful_one(records: list[Record], data: st.DataObject) -> None:
    """The fast V1 loop and the framing scan give what the careful record loop gives (records,
    count, or the same error at the same offset), on intact and damaged streams."""
    from ckptfix.formats.statefile import _scan_plain

    raw = bytearray(statefile._v1_records(records, allow_delete=True))
    if raw and data.draw(st.booleans()):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    raw = raw[: data.draw(st.integers(0, len(raw)))] if data.draw(st.booleans()) else raw
    for kind in ("delta", "snapshot"):
        blob = bytes(raw)
        try:
            expected = list(statefile.iter_records(blob, "p", kind))  # type: ignore[arg-type]
        except FormatError as exc:
            with pytest.raises(FormatError) as again:
                statefile.verify(blob, "p", kind)  # type: ignore[arg-type]
            assert (again.value.offset, again.value.kind) == (exc.offset, exc.kind)
            continue
        assert statefile.verify(blob, "p", kind) == len(expected)  # type: ignore[arg-type]
        count, stopped = _scan_plain(blob, 0, kind == "snapshot")
        assert stopped is None and count == len(expected)
