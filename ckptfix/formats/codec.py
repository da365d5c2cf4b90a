"""Spark's state-store compression codecs (``spark.sql.streaming.stateStore.compression.codec``).

The same codec wraps HDFS ``.delta`` / ``.snapshot`` files and RocksDB ``.changelog`` files
(never RocksDB zips or SSTs). Spark resolves the conf value case-insensitively as a short
name or takes it as a class name; both spellings are accepted here. What Spark 4.3 writes
(``org.apache.spark.io.*CompressionCodec.compressedOutputStream``):

- ``lz4``: lz4-java ``LZ4BlockOutputStream`` (:mod:`ckptfix.formats.lz4block`);
- ``zstd``: zstd-jni ``ZstdOutputStreamNoFinalizer`` at spark.io.compression.zstd.level
  (default 1) behind a ``BufferedOutputStream``: standard zstd frames, read with
  ``ZstdInputStreamNoFinalizer`` across frames (not "continuous": a cut frame is an error);
- ``snappy``: snappy-java ``SnappyOutputStream(out, spark.io.compression.snappy.blockSize)``
  (default 32k), see :data:`SNAPPY_MAGIC`;
- ``lzf``: compress-lzf ``LZFOutputStream`` (:mod:`ckptfix.formats.lzf`).

The zstd and snappy codecs come from the ``codecs`` extra (``zstandard``, ``cramjam``); a
missing one raises :class:`~ckptfix.errors.MissingExtra` when a file needs it. Bad bytes raise
:class:`~ckptfix.errors.FormatError` with the offset in the *compressed* data (kinds ``empty``,
``bad-magic``, ``bad-length``, ``truncated``, ``corrupt``, ...), never another exception.
An empty file is ``empty`` for every codec: no state file is empty (Spark fails on one with an
EOFException), although compress-lzf writes nothing for empty input.
"""

from __future__ import annotations

import importlib
import io
import struct
from collections.abc import Iterator
from types import ModuleType
from typing import Any

from ckptfix.errors import FormatError, MissingExtra
from ckptfix.formats import lz4block, lzf
from ckptfix.formats.streams import read_exactly
from ckptfix.formats.text import preview

LZ4 = "lz4"
ZSTD = "zstd"
SNAPPY = "snappy"
LZF = "lzf"
KNOWN = (LZ4, LZF, SNAPPY, ZSTD)
#: the codecs ckptfix decodes and writes (zstd and snappy need the ``codecs`` extra, see
#: :func:`missing_extra`)
SUPPORTED = KNOWN
EXTRA = "codecs"
_MODULES = {ZSTD: "zstandard", SNAPPY: "cramjam"}

_CLASS_NAMES = {
    "org.apache.spark.io.lz4compressioncodec": LZ4,
    "org.apache.spark.io.lzfcompressioncodec": LZF,
    "org.apache.spark.io.snappycompressioncodec": SNAPPY,
    "org.apache.spark.io.zstdcompressioncodec": ZSTD,
}

# -------------------------------------------------------------------------------- zstd framing
# (RFC 8878; all little-endian). Only walked to say where a frame or block is cut or bad;
# the zstandard package does the decoding.
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"  # 0xFD2FB528
ZSTD_SKIPPABLE = range(0x184D2A50, 0x184D2A60)  # skippable frames: magic, u32 size, data
U32LE = struct.Struct("<I")
ZSTD_BLOCK_HEADER = 3  # u24: bit 0 last block, bits 1-2 type (0 raw, 1 RLE, 2 compressed), size
ZSTD_RLE, ZSTD_RESERVED = 1, 3
ZSTD_CHECKSUM = 4
ZSTD_LEVEL = 1  # spark.io.compression.zstd.level

# -------------------------------------------------------------------------------- snappy framing
# snappy-java SnappyOutputStream (Java DataOutputStream ints: big-endian):
#   header  8 bytes magic, int32 version (1), int32 minimum compatible version (1)
#   chunks  int32 length + a raw snappy block (Snappy.compress of at most blockSize bytes)
# no end marker. The reader also takes another header where a chunk length is expected
# (concatenated streams), which it recognises by the magic's first 4 bytes.
SNAPPY_MAGIC = b"\x82SNAPPY\x00"
SNAPPY_HEADER = struct.Struct(">8sii")
SNAPPY_LENGTH = struct.Struct(">i")
SNAPPY_MAGIC_HEAD = SNAPPY_LENGTH.unpack(SNAPPY_MAGIC[:4])[0]
SNAPPY_VERSION = 1
SNAPPY_MIN_COMPATIBLE = 1
SNAPPY_BLOCK_SIZE = 32 * 1024  # spark.io.compression.snappy.blockSize
SNAPPY_MAX_CHUNK = 512 * 1024 * 1024  # SnappyInputStream.MAX_CHUNK_SIZE
SNAPPY_MAX_EXPANSION = 22  # no snappy op yields more than 64 bytes from 3 input bytes

# first bytes each codec's output stream starts with
MAGICS: tuple[tuple[bytes, str], ...] = (
    (lz4block.MAGIC, LZ4),
    (ZSTD_MAGIC, ZSTD),
    (SNAPPY_MAGIC, SNAPPY),  # snappy-java SnappyOutputStream header
    (lzf.SIGNATURE, LZF),  # compress-lzf chunk signature
)

Source = bytes | bytearray | memoryview | lz4block.Readable


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


def missing_extra(codec_name: str) -> str | None:
    """The module ``codec_name`` needs that is not installed (``zstandard``, ``cramjam``), or None."""
    module = _MODULES.get(normalize(codec_name))
    if module is None:
        return None
    try:
        importlib.import_module(module)
    except ImportError:
        return module
    return None


def _check(codec_name: str, path: str) -> str:
    name = normalize(codec_name)
    if name not in SUPPORTED:
        raise FormatError(
            path,
            0,
            f"a state-store codec ({', '.join(KNOWN)} or their class names)",
            repr(codec_name),
            kind="unknown-codec",
        )
    return name


def _require(name: str) -> Any:
    module = _MODULES[name]
    try:
        mod: ModuleType = importlib.import_module(module)
    except ImportError:
        raise MissingExtra(module, EXTRA) from None
    return mod


def _reader(source: Source) -> lz4block.Readable:
    if isinstance(source, (bytes, bytearray, memoryview)):
        return io.BytesIO(bytes(source))
    return source


def iter_decompressed(codec_name: str, source: Source, path: str = "<state>") -> Iterator[bytes]:
    """Decompressed chunks of a state file, read incrementally. The codec name is checked and
    its library imported right away; the data as the chunks are consumed."""
    name = _check(codec_name, path)
    if name == LZ4:
        return lz4block.iter_blocks(source, path)
    if name == LZF:
        return lzf.iter_chunks(source, path)
    if name == ZSTD:
        return _zstd_chunks(_require(ZSTD), _reader(source), path)
    return _snappy_chunks(_require(SNAPPY).snappy, _reader(source), path)


def decompress(codec_name: str, data: bytes, path: str = "<state>") -> bytes:
    """The whole decompressed content of a state file written with ``codec_name``."""
    return b"".join(iter_decompressed(codec_name, data, path))


def compress(codec_name: str, raw: bytes, path: str = "<state>") -> bytes:
    """Compress ``raw`` so Spark configured with ``codec_name`` reads it back (the bytes differ
    from the Java libraries' but use the same framing, block sizes and level)."""
    name = _check(codec_name, path)
    if name == LZ4:
        return lz4block.encode(raw)
    if name == LZF:
        return lzf.encode(raw)
    if name == ZSTD:
        zstandard = _require(ZSTD)
        # like zstd-jni's stream: one frame, no content size, no checksum
        cctx = zstandard.ZstdCompressor(level=ZSTD_LEVEL, write_checksum=False, write_content_size=False)
        return bytes(cctx.compress(raw))
    snappy = _require(SNAPPY).snappy
    out = [SNAPPY_HEADER.pack(SNAPPY_MAGIC, SNAPPY_VERSION, SNAPPY_MIN_COMPATIBLE)]
    for start in range(0, len(raw), SNAPPY_BLOCK_SIZE):
        block = bytes(snappy.compress_raw(raw[start : start + SNAPPY_BLOCK_SIZE]))
        out.append(SNAPPY_LENGTH.pack(len(block)))
        out.append(block)
    return b"".join(out)


# -------------------------------------------------------------------------------- zstd


def _zstd_header_size(descriptor: int) -> int:
    """Bytes after the frame header descriptor: window descriptor, dictionary id, content size."""
    fcs_flag, single_segment, dict_flag = descriptor >> 6, descriptor >> 5 & 1, descriptor & 3
    window = 0 if single_segment else 1
    dict_id = (0, 1, 2, 4)[dict_flag]
    content_size = (1 if single_segment else 0, 2, 4, 8)[fcs_flag]
    return window + dict_id + content_size


def _zstd_chunks(zstandard: Any, src: lz4block.Readable, path: str) -> Iterator[bytes]:
    """Decoded content of each zstd block, frame after frame.

    Kinds: ``empty``, ``bad-magic`` (offset of the frame), ``truncated`` (offset of the frame
    part that is cut: header, block or checksum), ``corrupt`` (offset of the frame header or
    block zstd rejects, e.g. a bad checksum is reported at the checksum).
    """
    dctx = zstandard.ZstdDecompressor()
    offset = 0

    def need(n: int, at: int, what: str) -> bytes:
        data = read_exactly(src, n)
        if len(data) < n:
            raise FormatError(path, at, what, f"{len(data)} bytes before the end of the data", kind="truncated")
        return data

    def feed(dobj: Any, data: bytes, at: int, what: str) -> bytes:
        try:
            return bytes(dobj.decompress(data))
        except zstandard.ZstdError as exc:
            raise FormatError(path, at, what, f"zstd: {exc}", kind="corrupt") from None

    while True:
        magic = read_exactly(src, len(ZSTD_MAGIC))
        if not magic:
            if offset == 0:
                raise FormatError(path, 0, "a zstd frame", "an empty file", kind="empty")
            return
        if len(magic) < len(ZSTD_MAGIC):
            if magic == ZSTD_MAGIC[: len(magic)]:
                raise FormatError(path, offset, "a zstd frame header", f"{len(magic)} bytes", kind="truncated")
            raise FormatError(path, offset, "the zstd frame magic 28 b5 2f fd", preview(magic), kind="bad-magic")
        if U32LE.unpack(magic)[0] in ZSTD_SKIPPABLE:
            (size,) = U32LE.unpack(need(U32LE.size, offset, "a skippable zstd frame header"))
            need(size, offset, f"a skippable zstd frame of {size} bytes")
            offset += len(magic) + U32LE.size + size
            continue
        if magic != ZSTD_MAGIC:
            raise FormatError(path, offset, "the zstd frame magic 28 b5 2f fd", preview(magic), kind="bad-magic")
        head = need(1, offset, "a zstd frame header")
        rest = need(_zstd_header_size(head[0]), offset, "a zstd frame header")
        frame_at = offset
        dobj = dctx.decompressobj()
        out = feed(dobj, magic + head + rest, frame_at, "a valid zstd frame header")
        offset += len(magic) + 1 + len(rest)
        last = False
        while not last:
            block_head = need(ZSTD_BLOCK_HEADER, offset, "a zstd block header (or the end of the frame)")
            word = int.from_bytes(block_head, "little")
            last, btype, size = bool(word & 1), word >> 1 & 3, word >> 3
            if btype == ZSTD_RESERVED:
                raise FormatError(path, offset, "a zstd block type 0, 1 or 2", "reserved type 3", kind="corrupt")
            payload = need(1 if btype == ZSTD_RLE else size, offset, f"a zstd block of {size} bytes")
            out += feed(dobj, block_head + payload, offset, "a valid zstd block")
            offset += ZSTD_BLOCK_HEADER + len(payload)
            if out:
                yield out
                out = b""
        if head[0] & 4:
            check = need(ZSTD_CHECKSUM, offset, "the zstd frame checksum")
            feed(dobj, check, offset, "the checksum of the frame's content")
            offset += ZSTD_CHECKSUM
        if not dobj.eof:  # the walk above and zstd disagree on where the frame ends
            raise FormatError(path, frame_at, "a complete zstd frame", "zstd expects more data", kind="corrupt")


# -------------------------------------------------------------------------------- snappy


def _snappy_chunks(snappy: Any, src: lz4block.Readable, path: str) -> Iterator[bytes]:
    """Decoded content of each snappy-java chunk.

    Kinds: ``empty``; ``bad-magic`` (snappy-java would instead decode the whole file as one
    bare snappy block, which Spark never writes); ``bad-version`` (a concatenated header
    below version 1); ``bad-length`` (a chunk length <= 0 or over 512 MiB); ``truncated``
    (offset of the cut header or chunk; snappy-java ends the stream silently when fewer
    than 4 bytes are left); ``corrupt`` (a snappy block cramjam rejects, at its first byte).
    """
    head = read_exactly(src, SNAPPY_HEADER.size)
    if not head:
        raise FormatError(path, 0, "a snappy-java stream", "an empty file", kind="empty")
    if head[: len(SNAPPY_MAGIC)] != SNAPPY_MAGIC[: len(head)]:
        raise FormatError(path, 0, "the snappy-java magic 82 'SNAPPY' 00", preview(head[:8]), kind="bad-magic")
    if len(head) < SNAPPY_HEADER.size:
        raise FormatError(
            path, 0, f"a {SNAPPY_HEADER.size}-byte snappy-java header", f"{len(head)} bytes", kind="truncated"
        )
    offset = SNAPPY_HEADER.size
    while True:
        word = read_exactly(src, SNAPPY_LENGTH.size)
        if not word:
            return
        if len(word) < SNAPPY_LENGTH.size:
            raise FormatError(path, offset, "a 4-byte snappy chunk length", f"{len(word)} bytes", kind="truncated")
        (length,) = SNAPPY_LENGTH.unpack(word)
        if length == SNAPPY_MAGIC_HEAD:  # another stream's header
            more = read_exactly(src, SNAPPY_HEADER.size - len(word))
            head = word + more
            if len(head) < SNAPPY_HEADER.size:
                raise FormatError(
                    path,
                    offset,
                    f"a {SNAPPY_HEADER.size}-byte snappy-java header",
                    f"{len(head)} bytes",
                    kind="truncated",
                )
            magic, version, _ = SNAPPY_HEADER.unpack(head)
            if magic != SNAPPY_MAGIC:
                raise FormatError(
                    path, offset, "the snappy-java magic 82 'SNAPPY' 00", preview(magic), kind="bad-magic"
                )
            if version < SNAPPY_MIN_COMPATIBLE:
                raise FormatError(
                    path,
                    offset + 8,
                    f"snappy-java version >= {SNAPPY_MIN_COMPATIBLE}",
                    str(version),
                    kind="bad-version",
                )
            offset += SNAPPY_HEADER.size
            continue
        if not 0 < length <= SNAPPY_MAX_CHUNK:
            raise FormatError(
                path, offset, f"a snappy chunk length in [1, {SNAPPY_MAX_CHUNK}]", str(length), kind="bad-length"
            )
        block = read_exactly(src, length)
        if len(block) < length:
            raise FormatError(
                path,
                offset,
                f"a snappy chunk with {length} bytes at {offset + SNAPPY_LENGTH.size}",
                f"{len(block)} bytes",
                kind="truncated",
            )
        block_at = offset + SNAPPY_LENGTH.size
        try:
            raw_len = int(snappy.decompress_raw_len(block))
            if raw_len > SNAPPY_MAX_EXPANSION * length:
                raise ValueError(f"a length prefix of {raw_len} bytes for {length} compressed bytes")
            raw = bytes(snappy.decompress_raw(block))
        except Exception as exc:  # cramjam.DecompressionError and the bound above
            raise FormatError(path, block_at, "a valid snappy block", str(exc), kind="corrupt") from None
        if len(raw) != raw_len:
            raise FormatError(
                path, block_at, f"a snappy block of {raw_len} raw bytes", f"{len(raw)} bytes", kind="corrupt"
            )
        offset = block_at + length
        if raw:
            yield raw
