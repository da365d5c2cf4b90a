"""lz4-java LZ4Block framing against real Spark 4.3 files (tests/fixtures/formats)."""

from __future__ import annotations

import contextlib
import hashlib
import io
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ckptfix.errors import FormatError
from ckptfix.formats import lz4block

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "formats"
DELTA = FIX / "hdfs/state/0/0/1.delta"
# what Spark 4.3 wrote at the end of every file: stored method, level 5 (32 KiB), all zero
SPARK_END_BLOCK = bytes.fromhex("4c5a34426c6f636b15000000000000000000000000")


def real_files() -> list[Path]:
    return sorted(p for p in FIX.rglob("*") if p.suffix in (".delta", ".snapshot", ".changelog"))


def block(token: int, payload: bytes, raw: bytes) -> bytes:
    return struct.pack("<8sBiii", b"LZ4Block", token, len(payload), len(raw), lz4block.checksum(raw)) + payload


def test_real_files_decode_and_end_with_sparks_end_block() -> None:
    files = real_files()
    assert len(files) == 23
    for f in files:
        data = f.read_bytes()
        assert data[8] == 0x25  # LZ4 method, level 5
        assert data.endswith(SPARK_END_BLOCK)
        assert lz4block.decode(data, str(f))


def test_real_delta_content_by_hand() -> None:
    raw = lz4block.decode(DELTA.read_bytes(), str(DELTA))
    # 2 records of (int32 24, 24-byte key row, int32 16, 16-byte value row) + int32 -1
    assert len(raw) == 2 * (4 + 24 + 4 + 16) + 4
    assert raw[:4] == b"\x00\x00\x00\x18"
    assert raw.endswith(b"\xff\xff\xff\xff")


def test_encode_matches_spark_framing() -> None:
    raw = lz4block.decode(DELTA.read_bytes())
    ours = lz4block.encode(raw)
    assert ours.endswith(SPARK_END_BLOCK)
    assert ours[8] == 0x25
    assert lz4block.decode(ours) == raw


def test_level_for() -> None:
    assert lz4block.level_for(32 * 1024) == 5
    assert lz4block.level_for(64 * 1024) == 6
    assert lz4block.level_for(64) == 0
    assert lz4block.level_for(1000) == 0
    with pytest.raises(ValueError):
        lz4block.level_for(63)


def test_incompressible_block_is_stored() -> None:
    raw = b"".join(hashlib.sha256(bytes([i])).digest() for i in range(32))  # 1024 random-looking bytes
    data = lz4block.encode(raw, block_size=1024)
    assert data[8] == 0x10  # stored, level 0
    assert lz4block.decode(data) == raw


def test_multi_block_and_streaming_reader() -> None:
    raw = b"".join(i.to_bytes(4, "big") for i in range(40_000))  # 160 000 bytes
    data = lz4block.encode(raw)
    assert data.count(b"LZ4Block") == 5 + 1  # ceil(160000 / 32768) blocks + end block

    class Trickle:  # returns at most 7 bytes per read, like a slow stream
        def __init__(self, b: bytes) -> None:
            self.f = io.BytesIO(b)

        def read(self, n: int = -1) -> bytes:
            return self.f.read(min(n, 7) if n >= 0 else 7)

    blocks = list(lz4block.iter_blocks(Trickle(data)))
    assert [len(b) for b in blocks] == [32768] * 4 + [160000 - 4 * 32768]
    assert b"".join(blocks) == raw


def test_concatenated_streams() -> None:
    assert lz4block.decode(lz4block.encode(b"abc") + lz4block.encode(b"def")) == b"abcdef"


def test_empty_stream_is_one_end_block() -> None:
    assert lz4block.encode(b"") == SPARK_END_BLOCK
    assert lz4block.decode(SPARK_END_BLOCK) == b""


@settings(max_examples=200)
@given(raw=st.binary(max_size=5000), block_size=st.integers(64, 4096))
def test_roundtrip_random(raw: bytes, block_size: int) -> None:
    assert lz4block.decode(lz4block.encode(raw, block_size)) == raw


@given(unit=st.binary(min_size=1, max_size=8), reps=st.integers(0, 20_000))
def test_roundtrip_compressible(unit: bytes, reps: int) -> None:
    raw = unit * reps
    assert lz4block.decode(lz4block.encode(raw)) == raw


# ------------------------------------------------------------------ corruption


def error(data: bytes) -> FormatError:
    with pytest.raises(FormatError) as info:
        lz4block.decode(data, "x.delta")
    return info.value


def test_bad_checksum_in_real_file() -> None:
    data = bytearray(DELTA.read_bytes())
    data[17] ^= 0x01
    err = error(bytes(data))
    assert (err.kind, err.offset) == ("bad-checksum", 17)


def test_flipped_payload_byte_of_stored_block() -> None:
    raw = bytes(range(256))
    data = bytearray(block(0x10, raw, raw) + SPARK_END_BLOCK)
    data[21 + 100] ^= 0xFF
    err = error(bytes(data))
    assert (err.kind, err.offset) == ("bad-checksum", 17)


def test_truncated_before_end_block() -> None:
    data = DELTA.read_bytes()
    cut = data[: -len(SPARK_END_BLOCK)]
    err = error(cut)
    assert (err.kind, err.offset) == ("truncated", len(cut))


def test_truncated_inside_header_and_payload() -> None:
    data = DELTA.read_bytes()
    first_len = struct.unpack_from("<i", data, 9)[0]
    err = error(data[:10])
    assert (err.kind, err.offset) == ("truncated", 0)
    err = error(data[: 21 + first_len - 1])
    assert (err.kind, err.offset) == ("truncated", 0)
    err = error(data[: 21 + first_len + 5])  # 5 bytes of the end block's header
    assert (err.kind, err.offset) == ("truncated", 21 + first_len)


def test_bad_magic() -> None:
    data = bytearray(DELTA.read_bytes())
    data[0:1] = b"X"
    err = error(bytes(data))
    assert (err.kind, err.offset) == ("bad-magic", 0)
    second = len(data) - len(SPARK_END_BLOCK)
    data = bytearray(DELTA.read_bytes())
    data[second + 3] = 0
    err = error(bytes(data))
    assert (err.kind, err.offset) == ("bad-magic", second)


def test_garbage_after_end_block_is_bad_magic() -> None:
    data = DELTA.read_bytes() + b"\x00\x01"
    err = error(data)
    assert (err.kind, err.offset) == ("bad-magic", len(data) - 2)


def test_bad_method() -> None:
    data = bytearray(DELTA.read_bytes())
    data[8] = 0x35
    err = error(bytes(data))
    assert (err.kind, err.offset) == ("bad-method", 8)


def test_length_rules() -> None:
    raw = b"a" * 2000
    too_big = struct.pack("<8sBiii", b"LZ4Block", 0x10, 2000, 2000, 0) + raw + SPARK_END_BLOCK
    err = error(too_big)  # level 0 -> at most 1024 raw bytes
    assert (err.kind, err.offset) == ("bad-length", 13)
    stored_mismatch = struct.pack("<8sBiii", b"LZ4Block", 0x15, 10, 20, 0) + b"x" * 10 + SPARK_END_BLOCK
    err = error(stored_mismatch)
    assert (err.kind, err.offset) == ("bad-length", 9)
    negative = struct.pack("<8sBiii", b"LZ4Block", 0x25, -5, 20, 0) + SPARK_END_BLOCK
    err = error(negative)
    assert (err.kind, err.offset) == ("bad-length", 9)


def test_end_block_with_checksum() -> None:
    data = struct.pack("<8sBiii", b"LZ4Block", 0x15, 0, 0, 7)
    err = error(data)
    assert (err.kind, err.offset) == ("bad-end-block", 17)


def test_corrupt_lz4_payload() -> None:
    raw = b"hello world " * 100
    data = bytearray(lz4block.encode(raw))
    payload_len = struct.unpack_from("<i", data, 9)[0]
    data[21 : 21 + payload_len] = b"\xff" * payload_len
    err = error(bytes(data))
    assert (err.kind, err.offset) == ("corrupt-payload", 21)


def test_empty_input() -> None:
    err = error(b"")
    assert (err.kind, err.offset) == ("empty", 0)


@given(st.data())
def test_damage_only_raises_format_error(data: st.DataObject) -> None:
    real = bytearray(DELTA.read_bytes())
    at = data.draw(st.integers(0, len(real) - 1))
    real[at] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(real)))
    with contextlib.suppress(FormatError):
        lz4block.decode(bytes(real[:cut]))
