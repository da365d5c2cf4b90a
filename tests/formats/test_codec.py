"""Codec dispatch by spark.sql.streaming.stateStore.compression.codec."""

from __future__ import annotations

from pathlib import Path

import pytest

from ckptfix.errors import FormatError
from ckptfix.formats import codec, lz4block

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "formats"
DELTA = FIX / "hdfs/state/0/0/1.delta"


@pytest.mark.parametrize("name", ["lz4", "LZ4", " lz4 ", "org.apache.spark.io.LZ4CompressionCodec"])
def test_lz4_spellings(name: str) -> None:
    data = DELTA.read_bytes()
    assert codec.decompress(name, data, str(DELTA)) == lz4block.decode(data)
    assert codec.decompress(name, codec.compress(name, b"abc")) == b"abc"


def test_streaming_decompress() -> None:
    assert b"".join(codec.iter_decompressed("lz4", DELTA.read_bytes())) == lz4block.decode(DELTA.read_bytes())


@pytest.mark.parametrize("name", ["zstd", "snappy", "lzf", "org.apache.spark.io.ZStdCompressionCodec"])
def test_other_codecs_name_the_file_when_cut_short(name: str) -> None:
    with pytest.raises(FormatError) as info:
        codec.decompress(name, b"\x28\xb5\x2f\xfd", "s/1.delta")
    assert info.value.path == "s/1.delta" and 0 <= info.value.offset <= 4


def test_unknown_codec() -> None:
    with pytest.raises(FormatError) as info:
        codec.decompress("com.example.MyCodec", b"", "x")
    assert info.value.kind == "unknown-codec"


def test_sniff() -> None:
    assert codec.sniff(DELTA.read_bytes()) == "lz4"
    assert codec.sniff(bytes.fromhex("28b52ffd0058")) == "zstd"
    assert codec.sniff(b"\x82SNAPPY\x00\x00\x00\x00\x01") == "snappy"
    assert codec.sniff(bytes.fromhex("5a5601013a01bc")) == "lzf"
    assert codec.sniff(b"\x00\x00\x00\x18") is None
