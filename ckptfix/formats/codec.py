"""Spark's state-store compression codecs (``spark.sql.streaming.stateStore.compression.codec``).

The same codec wraps HDFS ``.delta`` / ``.snapshot`` files and RocksDB ``.changelog`` files
(never RocksDB zips or SSTs). Spark resolves the conf value case-insensitively as a short
name or takes it as a class name; both spellings are accepted here.

Only ``lz4`` (the default) is decoded today; ``zstd``, ``snappy`` and ``lzf`` are recognised
(also by their magic bytes, see :func:`sniff`) and rejected with kind ``unsupported-codec``.
"""

from __future__ import annotations

from collections.abc import Iterator

from ckptfix.errors import FormatError
from ckptfix.formats import lz4block

LZ4 = "lz4"
ZSTD = "zstd"
SNAPPY = "snappy"
LZF = "lzf"
KNOWN = (LZ4, LZF, SNAPPY, ZSTD)
SUPPORTED = (LZ4,)

_CLASS_NAMES = {
    "org.apache.spark.io.lz4compressioncodec": LZ4,
    "org.apache.spark.io.lzfcompressioncodec": LZF,
    "org.apache.spark.io.snappycompressioncodec": SNAPPY,
    "org.apache.spark.io.zstdcompressioncodec": ZSTD,
}

# first bytes each codec's output stream starts with
MAGICS: tuple[tuple[bytes, str], ...] = (
    (lz4block.MAGIC, LZ4),
    (b"\x28\xb5\x2f\xfd", ZSTD),  # zstd frame magic (0xFD2FB528 little-endian)
    (b"\x82SNAPPY\x00", SNAPPY),  # snappy-java SnappyOutputStream header
    (b"ZV", LZF),  # compress-lzf chunk signature
)


def normalize(codec_name: str) -> str:
    """The short name for a conf value (``LZ4``, ``org.apache.spark.io.LZ4CompressionCodec``
    -> ``lz4``); an unknown value comes back lower-cased."""
    name = codec_name.strip().lower()
    return _CLASS_NAMES.get(name, name)


def sniff(data: bytes) -> str | None:
    """The codec whose magic ``data`` starts with, or None."""
    for magic, name in MAGICS:
        if data.startswith(magic):
            return name
    return None


def _check(codec_name: str, path: str) -> str:
    name = normalize(codec_name)
    if name not in KNOWN:
        raise FormatError(
            path,
            0,
            f"a state-store codec ({', '.join(KNOWN)} or their class names)",
            repr(codec_name),
            kind="unknown-codec",
        )
    if name not in SUPPORTED:
        raise FormatError(
            path,
            0,
            f"a codec ckptfix can decode yet ({', '.join(SUPPORTED)})",
            f"{name} (spark.sql.streaming.stateStore.compression.codec; support is planned)",
            kind="unsupported-codec",
        )
    return name


def iter_decompressed(codec_name: str, source: bytes | lz4block.Readable, path: str = "<state>") -> Iterator[bytes]:
    """Decompressed chunks of a state file, read incrementally."""
    _check(codec_name, path)
    return lz4block.iter_blocks(source, path)


def decompress(codec_name: str, data: bytes, path: str = "<state>") -> bytes:
    """The whole decompressed content of a state file written with ``codec_name``."""
    return b"".join(iter_decompressed(codec_name, data, path))


def compress(codec_name: str, raw: bytes, path: str = "<state>") -> bytes:
    """Compress ``raw`` so Spark configured with ``codec_name`` reads it back."""
    _check(codec_name, path)
    return lz4block.encode(raw)
