"""compress-lzf (``com.ning.compress.lzf``) chunk stream, Spark's ``lzf`` state-store codec.

Spark 4.3's ``LZFCompressionCodec`` writes through ``LZFOutputStream(out)
.setFinishBlockOnFlush(true)`` (``PLZFOutputStream`` if spark.io.compression.lzf.parallel.enabled,
same chunks) and reads through ``LZFInputStream``. A stream is a sequence of chunks, no stream
header and no end marker; header ints are big-endian::

    off size
     0   2   signature b"ZV"
     2   1   type: 0 stored, 1 compressed
     3   2   stored: length of the raw bytes that follow
             compressed: length of the LZF data
     5   2   compressed only: raw length
     .   .   payload

The writer cuts its input into chunks of at most 65535 bytes (``LZFChunk.MAX_CHUNK_LEN``) and
stores a chunk when it is shorter than 16 bytes or LZF does not save at least 2 bytes.

LZF data (one chunk, no state carried between chunks) is a sequence of tokens, ``ctrl`` first:

- ``ctrl < 32``: a literal run of ``ctrl + 1`` bytes follows;
- else ``len = ctrl >> 5`` (7 means: add the next byte), then one byte ``low``: copy
  ``len + 2`` bytes from ``((ctrl & 0x1f) << 8 | low) + 1`` bytes back in the output
  (the copy may overlap what it writes).

The decoder is pure Python (there is no maintained LZF package); :func:`encode` writes real
LZF chunks with a simple greedy matcher, so its bytes differ from compress-lzf's but decode
to the same content.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Iterator

from ckptfix.errors import FormatError
from ckptfix.formats.streams import Readable, read_exactly
from ckptfix.formats.text import preview

SIGNATURE = b"ZV"
TYPE_STORED = 0
TYPE_COMPRESSED = 1
HEAD = struct.Struct(">2sBH")  # signature, type, length (5 bytes: a whole stored-chunk header)
RAW_LEN = struct.Struct(">H")  # the extra field of a compressed chunk's 7-byte header
MAX_CHUNK_LEN = 0xFFFF  # LZFChunk.MAX_CHUNK_LEN: raw bytes per chunk
MIN_BLOCK_TO_COMPRESS = 16  # ChunkEncoder: shorter chunks are always stored
MAX_LITERAL = 32
MAX_OFFSET = 1 << 13  # 13-bit back-reference distance (stored minus one)
MIN_MATCH = 3
MAX_MATCH = 7 + 255 + 2  # length code 7 + extra byte 255, plus 2
_TYPE_NAMES = {TYPE_STORED: "stored", TYPE_COMPRESSED: "compressed"}


class BlockError(ValueError):
    """Bad LZF data; ``pos`` is the offset in the LZF data where the bad token starts."""

    def __init__(self, pos: int, message: str) -> None:
        super().__init__(message)
        self.pos = pos


def decode_block(data: bytes | bytearray | memoryview, raw_len: int) -> bytes:
    """The ``raw_len`` bytes one chunk's LZF data decodes to; :class:`BlockError` if the data
    is cut short, refers back before the chunk's start, or decodes to another length."""
    src = bytes(data)
    out = bytearray()
    n = len(src)
    i = 0
    while i < n:
        start = i
        ctrl = src[i]
        i += 1
        if ctrl < MAX_LITERAL:
            run = ctrl + 1
            if i + run > n:
                raise BlockError(start, f"a literal run of {run} bytes, only {n - i} left")
            out += src[i : i + run]
            i += run
        else:
            length = ctrl >> 5
            if length == 7:
                if i >= n:
                    raise BlockError(start, "a long back-reference cut short")
                length += src[i]
                i += 1
            if i >= n:
                raise BlockError(start, "a back-reference cut short")
            distance = ((ctrl & 0x1F) << 8 | src[i]) + 1
            i += 1
            length += 2
            origin = len(out) - distance
            if origin < 0:
                raise BlockError(start, f"a back-reference {distance} bytes back with only {len(out)} decoded")
            if distance >= length:
                out += out[origin : origin + length]
            else:  # overlapping copy: the last `distance` bytes repeat
                pattern = bytes(out[origin:])
                out += (pattern * (length // distance + 1))[:length]
        if len(out) > raw_len:
            raise BlockError(start, f"data that decodes to {raw_len} bytes, {len(out)} so far")
    if len(out) != raw_len:
        raise BlockError(n, f"data that decodes to {raw_len} bytes, {len(out)} in all")
    return bytes(out)


def _literals(out: bytearray, raw: bytes, start: int, end: int) -> None:
    while start < end:
        run = min(MAX_LITERAL, end - start)
        out.append(run - 1)
        out += raw[start : start + run]
        start += run


def encode_block(raw: bytes) -> bytes:
    """LZF data for ``raw`` (greedy: the most recent earlier position with the same 3 bytes)."""
    out = bytearray()
    last: dict[bytes, int] = {}
    n = len(raw)
    literal_start = 0
    i = 0
    while i + MIN_MATCH <= n:
        key = raw[i : i + MIN_MATCH]
        candidate = last.get(key)
        last[key] = i
        if candidate is None or i - candidate > MAX_OFFSET:
            i += 1
            continue
        limit = min(MAX_MATCH, n - i)
        length = MIN_MATCH
        while length < limit and raw[candidate + length] == raw[i + length]:
            length += 1
        _literals(out, raw, literal_start, i)
        distance = i - candidate - 1
        code = length - 2
        if code < 7:
            out.append(code << 5 | distance >> 8)
        else:
            out.append(7 << 5 | distance >> 8)
            out.append(code - 7)
        out.append(distance & 0xFF)
        i += length
        literal_start = i
    _literals(out, raw, literal_start, n)
    return bytes(out)


def iter_chunks(source: bytes | bytearray | memoryview | Readable, path: str = "<lzf>") -> Iterator[bytes]:
    """Yield the raw content of each chunk, reading ``source`` incrementally.

    Kinds (offsets in the compressed data): ``empty``; ``bad-magic`` (no ``ZV`` where a chunk
    starts); ``bad-chunk-type`` (not 0 or 1; compress-lzf would take it as compressed);
    ``bad-length`` (an empty chunk: compress-lzf's reader takes it as the end of the data,
    its writer never writes one); ``truncated`` (offset where the cut chunk starts);
    ``corrupt`` (bad LZF data; offset of the bad token).
    """
    src: Readable = io.BytesIO(bytes(source)) if isinstance(source, (bytes, bytearray, memoryview)) else source
    offset = 0
    while True:
        head = read_exactly(src, HEAD.size)
        if not head:
            if offset == 0:
                raise FormatError(path, 0, "an LZF chunk stream", "an empty file", kind="empty")
            return
        if head[:2] != SIGNATURE[: min(2, len(head))]:
            raise FormatError(path, offset, "an LZF chunk signature 'ZV'", preview(head[:2]), kind="bad-magic")
        if len(head) < HEAD.size:
            raise FormatError(
                path, offset, f"a {HEAD.size}-byte LZF chunk header", f"{len(head)} bytes", kind="truncated"
            )
        _, ctype, length = HEAD.unpack(head)
        if ctype not in _TYPE_NAMES:
            raise FormatError(
                path, offset + 2, "LZF chunk type 0 (stored) or 1 (compressed)", str(ctype), kind="bad-chunk-type"
            )
        payload_at = offset + HEAD.size
        raw_len = length
        if ctype == TYPE_COMPRESSED:
            extra = read_exactly(src, RAW_LEN.size)
            if len(extra) < RAW_LEN.size:
                raise FormatError(
                    path,
                    offset,
                    "a 7-byte compressed LZF chunk header",
                    f"{HEAD.size + len(extra)} bytes",
                    kind="truncated",
                )
            (raw_len,) = RAW_LEN.unpack(extra)
            payload_at += RAW_LEN.size
            if length == 0 or raw_len == 0:
                raise FormatError(
                    path,
                    offset + 3,
                    "a non-empty compressed LZF chunk",
                    f"{length} LZF bytes for {raw_len} raw bytes",
                    kind="bad-length",
                )
        elif length == 0:
            raise FormatError(path, offset + 3, "a non-empty stored LZF chunk", "length 0", kind="bad-length")
        payload = read_exactly(src, length)
        if len(payload) < length:
            raise FormatError(
                path,
                offset,
                f"a {_TYPE_NAMES[ctype]} LZF chunk with {length} bytes at {payload_at}",
                f"{len(payload)} bytes",
                kind="truncated",
            )
        if ctype == TYPE_STORED:
            raw = payload
        else:
            try:
                raw = decode_block(payload, raw_len)
            except BlockError as exc:
                raise FormatError(path, payload_at + exc.pos, "valid LZF data", str(exc), kind="corrupt") from None
        offset = payload_at + length
        yield raw


def decode(data: bytes, path: str = "<lzf>") -> bytes:
    """The whole decompressed stream."""
    return b"".join(iter_chunks(data, path))


def encode(raw: bytes, compress: bool = True) -> bytes:
    """Chunk ``raw`` like ``LZFOutputStream``: 65535-byte chunks, each compressed when that
    saves at least 2 bytes (``compress=False`` stores every chunk, which is fast and which
    compress-lzf reads just the same). Empty input gives empty output, as LZFOutputStream."""
    out: list[bytes] = []
    for start in range(0, len(raw), MAX_CHUNK_LEN):
        chunk = raw[start : start + MAX_CHUNK_LEN]
        packed = encode_block(chunk) if compress and len(chunk) >= MIN_BLOCK_TO_COMPRESS else None
        if packed is not None and len(packed) < len(chunk) - 2:
            out.append(HEAD.pack(SIGNATURE, TYPE_COMPRESSED, len(packed)) + RAW_LEN.pack(len(chunk)))
            out.append(packed)
        else:
            out.append(HEAD.pack(SIGNATURE, TYPE_STORED, len(chunk)))
            out.append(chunk)
    return b"".join(out)
