"""zstd, snappy and lzf state files: real Spark 4.3 output, round trips, damage, and Spark
reading what ckptfix writes.

Fixtures come from fixtures/codecs/generate.py: one groupBy(k).count() per codec, one
partition. Batch 0 has key k<i:04d> (i < 1500) i % 3 + 1 times; batch 1 is k0000 k0000
k0001 k1499; batch 2 is k0002. Counts below are worked out from that input by hand.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ckptfix.errors import FormatError, MissingExtra
from ckptfix.formats import codec, lzf, statefile
from ckptfix.formats.statefile import Op, Record

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "codecs"
CODECS = ("zstd", "snappy", "lzf", "lz4")
NEW = ("zstd", "snappy", "lzf")
FILES = ("1.delta", "2.delta", "3.delta", "2.snapshot")

VERSION_1 = {f"k{i:04d}": i % 3 + 1 for i in range(1500)}
DELTA_2 = {"k0000": 1 + 2, "k0001": 2 + 1, "k1499": 3 + 1}
DELTA_3 = {"k0002": 3 + 1}
EXPECTED = {"1.delta": VERSION_1, "2.delta": DELTA_2, "3.delta": DELTA_3, "2.snapshot": {**VERSION_1, **DELTA_2}}
PLAIN_1 = 1500 * (4 + 24 + 4 + 16) + 4  # keyLen, 24-byte key row, valueLen, 16-byte value row; end marker


def data(name: str, file: str) -> bytes:
    return (FIX / name / "state/0/0" / file).read_bytes()


def row_string(row: bytes) -> str:
    word = int.from_bytes(row[8:16], "little")
    return row[word >> 32 : (word >> 32) + (word & 0xFFFFFFFF)].decode()


def counts(raw: bytes, file: str) -> dict[str, int]:
    kind = "snapshot" if file.endswith(".snapshot") else "delta"
    out: dict[str, int] = {}
    for r in statefile.iter_records(raw, file, kind):
        assert r.op is Op.PUT and r.value is not None
        out[row_string(r.key)] = int.from_bytes(r.value[8:16], "little", signed=True)
    return out


# ------------------------------------------------------------------ real Spark output


@pytest.mark.parametrize("file", FILES)
@pytest.mark.parametrize("name", CODECS)
def test_spark_files_decode(name: str, file: str) -> None:
    blob = data(name, file)
    assert codec.sniff(blob) == name
    raw = codec.decompress(name, blob, file)
    assert counts(raw, file) == EXPECTED[file]
    assert b"".join(codec.iter_decompressed(name, blob, file)) == raw
    assert b"".join(codec.iter_decompressed(name, _Trickle(blob), file)) == raw


class _Trickle:
    """A stream that hands out at most 7 bytes per read."""

    def __init__(self, blob: bytes) -> None:
        self.blob, self.pos = blob, 0

    def read(self, size: int = -1, /) -> bytes:
        n = 7 if size < 0 else min(size, 7)
        out = self.blob[self.pos : self.pos + n]
        self.pos += len(out)
        return out


def test_same_plaintext_for_every_codec() -> None:
    """The four queries saw the same input, so each file holds the same bytes under every codec."""
    for file in FILES:
        plains = {name: codec.decompress(name, data(name, file)) for name in CODECS}
        assert len(set(plains.values())) == 1, file
    assert len(codec.decompress("lz4", data("lz4", "1.delta"))) == PLAIN_1


def test_spark_block_sizes() -> None:
    """snappy-java chunks of spark.io.compression.snappy.blockSize (32 KiB), compress-lzf chunks of
    65535 bytes, one zstd frame with a compressed block and an empty last block; compress does the same."""
    sizes = {name: [len(c) for c in codec.iter_decompressed(name, data(name, "1.delta"))] for name in NEW}
    assert sizes["snappy"] == [32768, 32768, PLAIN_1 - 65536]
    assert sizes["lzf"] == [65535, PLAIN_1 - 65535]
    assert sizes["zstd"] == [PLAIN_1]
    zstd = data("zstd", "1.delta")
    assert zstd[:6] == bytes.fromhex("28b52ffd0048")  # no content size, no checksum, window byte
    assert zstd[-3:] == b"\x01\x00\x00"  # last block: raw, empty
    raw = codec.decompress("zstd", zstd)
    for name in NEW:
        ours = codec.compress(name, raw)
        assert [len(c) for c in codec.iter_decompressed(name, ours)] == sizes[name]
    assert codec.compress("snappy", raw)[:16] == data("snappy", "1.delta")[:16]


# ------------------------------------------------------------------ round trips

_pieces = st.lists(st.tuples(st.binary(min_size=1, max_size=40), st.integers(1, 300)), max_size=12)
repetitive = _pieces.map(lambda ps: b"".join(p * n for p, n in ps))


@settings(max_examples=60, deadline=None)
@given(st.one_of(st.binary(max_size=5000), repetitive), st.sampled_from(CODECS))
def test_round_trip(raw: bytes, name: str) -> None:
    packed = codec.compress(name, raw)
    if not raw and name == "lzf":  # LZFOutputStream writes nothing for nothing
        assert packed == b""
        return
    assert codec.decompress(name, packed) == raw


@settings(max_examples=60, deadline=None)
@given(st.one_of(st.binary(max_size=3000), repetitive))
def test_lzf_block_round_trip(raw: bytes) -> None:
    assert lzf.decode_block(lzf.encode_block(raw), len(raw)) == raw
    assert lzf.decode(lzf.encode(raw, compress=False)) == raw if raw else lzf.encode(raw) == b""


def test_lzf_encoder_compresses() -> None:
    raw = codec.decompress("lzf", data("lzf", "1.delta"))
    ours = lzf.encode(raw)
    assert len(ours) < len(raw) // 5
    assert ours[:3] == b"ZV\x01"


def test_records_round_trip_through_every_codec() -> None:
    records = [Record(b"k" * 20, b"v" * 30), Record(b"x" * 8, None, Op.DELETE)]
    raw = statefile.dump_delta(records)
    for name in CODECS:
        assert list(statefile.iter_records(codec.decompress(name, codec.compress(name, raw)))) == records


# ------------------------------------------------------------------ damage


def decode_all(name: str, blob: bytes, file: str) -> None:
    statefile.verify(codec.decompress(name, blob, file), file, "snapshot" if file.endswith("snapshot") else "delta")


@pytest.mark.parametrize("name", CODECS)
def test_every_cut_is_an_error(name: str) -> None:
    """Cut anywhere, a state file fails with FormatError: in the codec, or (snappy and lzf have
    no end marker, a cut between chunks decodes) in the record stream."""
    for file in ("2.delta", "1.delta"):
        blob = data(name, file)
        cuts = range(len(blob)) if len(blob) < 200 else sorted({*range(0, 40), *range(0, len(blob), 97), len(blob) - 1})
        for n in cuts:
            with pytest.raises(FormatError) as info:
                decode_all(name, blob[:n], file)
            assert 0 <= info.value.offset <= max(n, 0) or info.value.kind == "truncated"


@pytest.mark.parametrize("name", NEW)
def test_every_flipped_byte_is_a_format_error_or_decodes(name: str) -> None:
    blob = data(name, "2.delta")
    for i in range(len(blob)):
        for mask in (0x01, 0x80, 0xFF):
            bad = bytearray(blob)
            bad[i] ^= mask
            try:
                codec.decompress(name, bytes(bad), "f")
            except FormatError as exc:
                assert 0 <= exc.offset <= len(blob), (i, mask, exc)


def fails(name: str, blob: bytes) -> FormatError:
    with pytest.raises(FormatError) as info:
        codec.decompress(name, blob, "s/1.delta")
    assert info.value.path == "s/1.delta"
    return info.value


@pytest.mark.parametrize("name", NEW)
def test_empty_file(name: str) -> None:
    err = fails(name, b"")
    assert (err.kind, err.offset) == ("empty", 0)
    assert name in str(err) or "LZF" in str(err)


def test_snappy_damage() -> None:
    blob = data("snappy", "1.delta")
    first = int.from_bytes(blob[16:20], "big")
    second_at = 20 + first
    err = fails("snappy", blob[: second_at + 100])
    assert (err.kind, err.offset) == ("truncated", second_at)
    err = fails("snappy", blob[: second_at + 2])
    assert (err.kind, err.offset) == ("truncated", second_at)
    assert codec.decompress("snappy", blob[:second_at]) == codec.decompress("snappy", blob)[:32768]
    err = fails("snappy", b"\x83" + blob[1:])
    assert (err.kind, err.offset) == ("bad-magic", 0)
    err = fails("snappy", blob[:10])
    assert (err.kind, err.offset) == ("truncated", 0)
    err = fails("snappy", blob[:16] + b"\xff\xff\xff\xf0" + blob[20:])
    assert (err.kind, err.offset) == ("bad-length", 16)
    err = fails("snappy", blob[:16] + b"\x00\x00\x00\x00" + blob[20:])
    assert (err.kind, err.offset) == ("bad-length", 16)
    err = fails("snappy", blob[:20] + b"\xff\xff\xff\xff\x0f" + blob[25:])  # the block's length varint
    assert (err.kind, err.offset) == ("corrupt", 20)
    # a second stream's header in place of a chunk length continues the stream
    tail = codec.compress("snappy", b"more")
    assert codec.decompress("snappy", blob + tail) == codec.decompress("snappy", blob) + b"more"
    err = fails("snappy", blob + tail[:4] + b"XXXX" + tail[8:])
    assert (err.kind, err.offset) == ("bad-magic", len(blob))


def test_lzf_damage() -> None:
    blob = data("lzf", "1.delta")
    second_at = 7 + int.from_bytes(blob[3:5], "big")
    assert blob[second_at : second_at + 2] == b"ZV"
    err = fails("lzf", blob[: second_at + 50])
    assert (err.kind, err.offset) == ("truncated", second_at)
    err = fails("lzf", blob[: second_at + 6])
    assert (err.kind, err.offset) == ("truncated", second_at)
    err = fails("lzf", blob[: second_at + 1])
    assert (err.kind, err.offset) == ("truncated", second_at)
    err = fails("lzf", blob[:second_at] + b"ZX" + blob[second_at + 2 :])
    assert (err.kind, err.offset) == ("bad-magic", second_at)
    err = fails("lzf", blob[:2] + b"\x02" + blob[3:])
    assert (err.kind, err.offset) == ("bad-chunk-type", 2)
    err = fails("lzf", b"ZV\x00\x00\x00" + blob)
    assert (err.kind, err.offset) == ("bad-length", 3)
    # the first token of a chunk cannot be a back-reference: nothing is decoded yet
    err = fails("lzf", blob[:7] + b"\x20\x00" + blob[9:])
    assert (err.kind, err.offset) == ("corrupt", 7)
    # a raw length that does not match what the data decodes to
    err = fails("lzf", blob[:5] + b"\xff\xfe" + blob[7:])
    assert err.kind == "corrupt" and 7 <= err.offset <= second_at


def test_lzf_block_errors() -> None:
    with pytest.raises(lzf.BlockError) as info:
        lzf.decode_block(b"\x05abc", 6)  # literal run of 6, 3 bytes left
    assert info.value.pos == 0
    with pytest.raises(lzf.BlockError) as info:
        lzf.decode_block(b"\x00a\xe0", 10)  # long back-reference cut short
    assert info.value.pos == 2
    assert lzf.decode_block(b"\x00a\x20\x00", 4) == b"aaaa"  # overlapping copy: 3 bytes from 1 back
    assert lzf.decode_block(b"\x01ab\xe0\x05\x01", 16) == b"ab" * 8  # length 7 + 5 + 2 = 14, 2 back
    with pytest.raises(lzf.BlockError):
        lzf.decode_block(b"\x00a\x20\x00", 3)  # decodes to more than the chunk's raw length


def test_zstd_damage() -> None:
    blob = data("zstd", "1.delta")
    last_block = len(blob) - 3
    err = fails("zstd", blob[:100])
    assert (err.kind, err.offset) == ("truncated", 6)  # the first block starts after a 6-byte header
    err = fails("zstd", blob[: last_block + 1])
    assert (err.kind, err.offset) == ("truncated", last_block)
    err = fails("zstd", blob[:3])
    assert (err.kind, err.offset) == ("truncated", 0)
    err = fails("zstd", b"\x28\xb5\x2f\xfe" + blob[4:])
    assert (err.kind, err.offset) == ("bad-magic", 0)
    err = fails("zstd", blob + b"junk")
    assert (err.kind, err.offset) == ("bad-magic", len(blob))
    err = fails("zstd", blob[:6] + bytes([blob[6] | 0x06]) + blob[7:])  # block type 3 (reserved)
    assert (err.kind, err.offset) == ("corrupt", 6)
    bad = bytearray(blob)
    bad[9] ^= 0xFF  # inside the compressed block's headers
    err = fails("zstd", bytes(bad))
    assert err.kind == "corrupt" and err.offset == 6
    # concatenated frames and skippable frames are one stream, as for zstd-jni
    two = blob + codec.compress("zstd", b"tail")
    assert codec.decompress("zstd", two) == codec.decompress("zstd", blob) + b"tail"
    skip = bytes.fromhex("502a4d18") + (3).to_bytes(4, "little") + b"abc"
    assert codec.decompress("zstd", skip + blob) == codec.decompress("zstd", blob)
    err = fails("zstd", skip[:-1])
    assert (err.kind, err.offset) == ("truncated", 0)


def test_zstd_checksum_is_checked() -> None:
    zstandard = pytest.importorskip("zstandard")
    framed = zstandard.ZstdCompressor(write_checksum=True).compress(b"x" * 1000)
    assert codec.decompress("zstd", framed) == b"x" * 1000
    err = fails("zstd", framed[:-1] + bytes([framed[-1] ^ 1]))
    assert (err.kind, err.offset) == ("corrupt", len(framed) - 4)
    err = fails("zstd", framed[:-2])
    assert (err.kind, err.offset) == ("truncated", len(framed) - 4)


# ------------------------------------------------------------------ optional libraries


@pytest.mark.parametrize(("name", "module"), [("zstd", "zstandard"), ("snappy", "cramjam")])
def test_missing_extra(monkeypatch: pytest.MonkeyPatch, name: str, module: str) -> None:
    blob = data(name, "3.delta")
    monkeypatch.setitem(sys.modules, module, None)  # makes the import fail
    assert codec.missing_extra(name) == module
    for call in (lambda: codec.decompress(name, blob), lambda: codec.compress(name, b"x")):
        with pytest.raises(MissingExtra) as info:
            call()
        assert (info.value.module, info.value.extra) == (module, "codecs")
        assert "pip install -e '" in str(info.value) and str(info.value).endswith("[codecs]'")
    assert codec.missing_extra("lzf") is None and codec.missing_extra("lz4") is None
    assert codec.decompress("lzf", data("lzf", "3.delta"))


def test_supported_and_unknown() -> None:
    assert set(codec.SUPPORTED) == set(codec.KNOWN) == {"lz4", "lzf", "snappy", "zstd"}
    assert codec.decompress("org.apache.spark.io.ZStdCompressionCodec", data("zstd", "3.delta"))
    with pytest.raises(FormatError) as info:
        codec.decompress("brotli", b"x", "p")
    assert (info.value.kind, info.value.offset) == ("unknown-codec", 0)


# ------------------------------------------------------------------ live: Spark reads what we write

HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
LIVE_KEYS = 4500  # about 1500 per partition (3 shuffle partitions): 72 KB, two lzf chunks


def _write_json(path: Path, keys: list[str]) -> None:
    tmp = path.with_name("." + path.name + ".tmp")  # hidden: the file source ignores it
    tmp.write_text("".join(json.dumps({"k": k}) + "\n" for k in keys))
    tmp.rename(path)


def _run(spark: Any, src: Path, ckpt: Path) -> dict[str, int]:
    """One availableNow run of a complete-mode count; the counts of its last batch."""
    seen: dict[int, dict[str, int]] = {}

    def collect(df: Any, batch_id: int) -> None:
        seen[batch_id] = {r["k"]: r["count"] for r in df.collect()}

    q = (
        spark.readStream.schema("k STRING")
        .json(str(src))
        .groupBy("k")
        .count()
        .writeStream.outputMode("complete")
        .foreachBatch(collect)
        .option("checkpointLocation", str(ckpt))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert q.awaitTermination(240), "query did not finish"
    finally:
        q.stop()
    assert q.exception() is None
    return seen[max(seen)]


@pytest.mark.spark
@pytest.mark.parametrize("name", NEW)
def test_spark_reads_what_compress_writes(spark: Any, tmp_path: Path, name: str) -> None:
    confs = {
        "spark.sql.streaming.stateStore.compression.codec": name,
        "spark.sql.streaming.stateStore.providerClass": HDFS,
        "spark.sql.streaming.stateStore.minDeltasForSnapshot": "1000",  # state only in deltas
    }
    for key, value in confs.items():
        spark.conf.set(key, value)
    try:
        src, ckpt = tmp_path / "input", tmp_path / "ckpt"
        src.mkdir()
        expected = {f"k{i:04d}": i % 3 + 1 for i in range(LIVE_KEYS)}
        _write_json(src / "part-0.json", [k for k, n in expected.items() for _ in range(n)])
        assert _run(spark, src, ckpt) == expected

        deltas = sorted(ckpt.glob("state/0/*/1.delta"))
        assert len(deltas) == 3 and not list(ckpt.glob("state/0/*/*.snapshot"))
        chunks = 0
        for delta in deltas:
            theirs = delta.read_bytes()
            assert codec.sniff(theirs) == name
            raw = codec.decompress(name, theirs, str(delta))
            ours = codec.compress(name, raw)
            assert codec.decompress(name, ours) == raw
            chunks += len(list(codec.iter_decompressed(name, ours)))
            delta.write_bytes(ours)
            crc = delta.with_name(f".{delta.name}.crc")  # Hadoop's checksum of Spark's bytes
            crc.unlink(missing_ok=True)
        assert chunks > 3 or name == "zstd"  # several snappy blocks / lzf chunks per file

        time.sleep(0.1)  # distinct file mtime
        _write_json(src / "part-1.json", ["k0000", "k0000", f"k{LIVE_KEYS - 1:04d}", "fresh"])
        expected["k0000"] += 2
        expected[f"k{LIVE_KEYS - 1:04d}"] += 1
        expected["fresh"] = 1
        assert _run(spark, src, ckpt) == expected

        changed: dict[str, int] = {}
        for delta in sorted(ckpt.glob("state/0/*/2.delta")):
            changed.update(counts(codec.decompress(name, delta.read_bytes(), str(delta)), "2.delta"))
        assert changed == {k: expected[k] for k in ("k0000", f"k{LIVE_KEYS - 1:04d}", "fresh")}
    finally:
        for key in confs:
            spark.conf.unset(key)
