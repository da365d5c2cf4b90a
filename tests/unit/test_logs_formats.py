"""Parsers of offsets/commits/metadata/compactible logs/.crc: real shapes from files Spark
wrote (verbatim from ../shared/reference) and hypothesis round-trips."""

from __future__ import annotations

import contextlib
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ckptfix.errors import FormatError, UnsupportedVersion
from ckptfix.formats import commitlog, compactlog, hadoopcrc, metadata, offsetlog, opmeta
from ckptfix.formats.text import split_lines

# offsets/1 of a stateful file->parquet query written by Spark 3.5.9 (spark-logs-and-restart.md §3.1)
SPARK35_OFFSET = (
    b'v1\n{"batchWatermarkMs":1704067250000,"batchTimestampMs":1795346143722,"conf":{'
    b'"spark.sql.streaming.stateStore.providerClass":"org.apache.spark.sql.execution.streaming.state.'
    b'HDFSBackedStateStoreProvider","spark.sql.shuffle.partitions":"3"}}\n{"logOffset":1}'
)
# offset-map/3 golden file of apache/spark (v2, trailing newline)
V2_OFFSET = b'v2\n{"batchWatermarkMs":0,"batchTimestampMs":1758651405232,"conf":{}}\n0:3\n'


def test_offset_v1_real_file() -> None:
    entry = offsetlog.parse(SPARK35_OFFSET, "offsets/1")
    assert isinstance(entry, offsetlog.OffsetFileV1)
    assert entry.metadata is not None
    assert entry.metadata.batch_watermark_ms == 1704067250000
    assert entry.metadata.conf["spark.sql.shuffle.partitions"] == "3"
    assert [o.json for o in entry.offsets] == ['{"logOffset":1}']


def test_offset_v2_golden_and_named_sources() -> None:
    entry = offsetlog.parse(V2_OFFSET, "offsets/3")
    assert isinstance(entry, offsetlog.OffsetFileV2)
    assert [(o.source_id, o.json) for o in entry.offsets] == [("0", "3")]
    named = offsetlog.parse(b'v2\n{"conf":{}}\nsrc_a:{"a":1}\nsrc_b:-', "x")
    assert [(o.source_id, o.json) for o in named.offsets] == [("src_a", '{"a":1}'), ("src_b", None)]


def test_offset_void_and_crlf_and_unknown_keys_kept() -> None:
    entry = offsetlog.parse(b'v1\r\n{"conf":{},"newKey":{"x":1}}\r\n-\r\n5', "x")
    assert [o.json for o in entry.offsets] == [None, "5"]
    assert entry.metadata is not None and entry.metadata.extra == {"newKey": {"x": 1}}
    assert b'"newKey":{"x":1}' in offsetlog.dump(entry)


@pytest.mark.parametrize(
    ("data", "kind", "offset"),
    [
        (b"", "empty", 0),
        (b"v1", "header-only", 2),
        (b"x1\n{}\n1", "malformed-version", 0),
        (b'v1\n{"batchWatermarkMs":0,"conf":{"a', "truncated-json", 3 + len('{"batchWatermarkMs":0,"conf":{"a')),
        (b"v2\n{}\n10", "v2-no-colon", 6),
        (b"v2\n\n0:1", "empty-metadata", 3),
    ],
)
def test_offset_damage_kinds(data: bytes, kind: str, offset: int) -> None:
    with pytest.raises(FormatError) as info:
        offsetlog.parse(data, "offsets/6")
    assert info.value.kind == kind
    assert info.value.offset == offset
    assert str(info.value).startswith("offsets/6: at byte ")


def test_unknown_version_is_unsupported_with_the_version() -> None:
    with pytest.raises(UnsupportedVersion) as info:
        offsetlog.parse(b"v99\n{}\n1", "o")
    assert info.value.version == 99
    with pytest.raises(UnsupportedVersion):
        commitlog.parse(b'v4\n{"nextBatchWatermarkMs":0}', "c")


def test_commit_versions() -> None:
    assert commitlog.parse(b'v1\n{"nextBatchWatermarkMs":1704067250000}').next_batch_watermark_ms == 1704067250000
    assert commitlog.parse(b"v1").has_json is False  # restarts fine (watermark 0)
    v2 = commitlog.parse(b'v2\n{"nextBatchWatermarkMs":0,"stateUniqueIds":{"0":[["f609eaff"],["3f2ba37a"]]}}')
    assert v2.state_unique_ids == {"0": [["f609eaff"], ["3f2ba37a"]]}
    with pytest.raises(FormatError) as info:
        commitlog.parse(b"", "commits/3")
    assert info.value.kind == "empty"


def test_metadata_file() -> None:
    assert metadata.parse(b'{"id":"0906fb34-6fbd-424f-9eb4-dbfc11678c28"}').id == "0906fb34-6fbd-424f-9eb4-dbfc11678c28"
    for data, kind in ((b"", "empty"), (b"{}", "no-id"), (b'{"id":"09', "truncated-json")):
        with pytest.raises(FormatError) as info:
            metadata.parse(data, "metadata")
        assert info.value.kind == kind
    kept = metadata.parse(b'{"id":"a","x":1}')
    assert metadata.dump(kept) == b'{"id":"a","x":1}'


def test_compact_log_and_interval() -> None:
    log = compactlog.parse(b'v1\n{"path":"file:///in/f00.json","timestamp":1795348624025,"batchId":0}\n{"path":"b"}')
    assert [e["path"] for e in log.entries] == ["file:///in/f00.json", "b"]
    assert compactlog.is_compaction_batch(9, 10) and not compactlog.is_compaction_batch(10, 10)
    assert compactlog.derive_compact_interval([9, 19]) == 10
    assert compactlog.derive_compact_interval([4, 9]) == 5


def test_one_compact_file_gives_sparks_derived_interval() -> None:
    """CompactibleFileStreamLogSuite "deriveCompactInterval": (default 5, compact 4) -> 5, (default 4, compact 9)
    -> 5 ("first divisor of 10 greater than 4"); the scaladoc's example: default 5 and 11.compact -> 6. ckptfix
    returned 10 for the second (it took b+1 unless the default divided it)."""
    assert compactlog.derive_compact_interval([4], default=5) == 5
    assert compactlog.derive_compact_interval([9], default=4) == 5
    assert compactlog.derive_compact_interval([11], default=5) == 6


def test_hadoop_crc_matches_a_real_sidecar() -> None:
    # .1.delta.crc observed: 63726300 00000200 9442726d == zlib.crc32 of the file
    data = b"some bytes" * 100
    crc = hadoopcrc.compute(data)
    encoded = hadoopcrc.dump(crc)
    assert encoded[:8] == bytes.fromhex("6372630000000200")
    assert encoded[8:12] == zlib.crc32(data[:512]).to_bytes(4, "big")
    assert hadoopcrc.first_mismatch(hadoopcrc.parse(encoded), data) is None
    edited = data[:600] + b"X" + data[601:]
    assert hadoopcrc.first_mismatch(crc, edited) == 512


def test_operator_metadata_v1_real_shape() -> None:
    raw = (
        b'v1\n{"operatorInfo":{"operatorId":0,"operatorName":"stateStoreSave"},"stateStoreInfo":'
        b'[{"storeName":"default","numColsPrefixKey":0,"numPartitions":3}]}'
    )
    meta = opmeta.parse(raw, "state/0/_metadata/metadata")
    assert (meta.operator_id, meta.operator_name, meta.stores[0].num_partitions) == (0, "stateStoreSave", 3)
    assert opmeta.dump(meta) == raw


def test_split_lines_like_scala() -> None:
    assert [ln.data for ln in split_lines(b"a\r\nb\rc\n")] == [b"a", b"b", b"c"]
    assert [ln.offset for ln in split_lines(b"a\r\nb\rc\n")] == [0, 3, 5]


json_scalars = st.one_of(st.integers(-(2**53), 2**53), st.text(max_size=8), st.booleans())
conf = st.dictionaries(st.text(min_size=1, max_size=12), st.text(max_size=12), max_size=5)
offset_json = st.one_of(
    st.none(), st.integers(0, 10**12).map(str), st.builds(lambda n: f'{{"logOffset":{n}}}', st.integers(0, 10**6))
)


@given(
    wm=st.integers(0, 2**62),
    ts=st.integers(0, 2**62),
    c=conf,
    extra=st.dictionaries(st.sampled_from(["sourceMetadataInfo", "controlBatchInfo", "future"]), json_scalars),
    offsets=st.lists(offset_json, max_size=4),
)
def test_offset_round_trip(wm: int, ts: int, c: dict[str, str], extra: dict, offsets: list[str | None]) -> None:
    meta = offsetlog.OffsetSeqMetadata(wm, ts, c, extra)
    v1 = offsetlog.OffsetFileV1(meta, tuple(offsetlog.SourceOffset(str(i), o) for i, o in enumerate(offsets)))
    assert offsetlog.parse(offsetlog.dump(v1)) == v1
    v2 = offsetlog.OffsetFileV2(meta, tuple(offsetlog.SourceOffset(f"s{i}", o) for i, o in enumerate(offsets)))
    assert offsetlog.parse(offsetlog.dump(v2)) == v2


@given(
    wm=st.integers(0, 2**62),
    ids=st.one_of(
        st.none(),
        st.dictionaries(
            st.sampled_from(["0", "1"]), st.lists(st.lists(st.uuids().map(str), min_size=1, max_size=2), max_size=3)
        ),
    ),
    version=st.integers(1, 3),
)
def test_commit_round_trip(wm: int, ids: dict | None, version: int) -> None:
    entry = commitlog.CommitFile(version, wm, ids)
    assert commitlog.parse(commitlog.dump(entry)) == entry


@given(st.binary(max_size=3000), st.sampled_from([16, 512]))
def test_crc_round_trip(data: bytes, bpc: int) -> None:
    crc = hadoopcrc.compute(data, bpc)
    assert hadoopcrc.parse(hadoopcrc.dump(crc)) == crc
    assert hadoopcrc.first_mismatch(crc, data) is None


@given(st.binary(max_size=200))
def test_parsers_never_raise_anything_but_format_errors(data: bytes) -> None:
    for parse in (offsetlog.parse, commitlog.parse, metadata.parse, compactlog.parse, opmeta.parse, hadoopcrc.parse):
        with contextlib.suppress(FormatError):
            parse(data, "f")
