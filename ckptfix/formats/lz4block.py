"""lz4-java ``LZ4BlockOutputStream`` framing, Spark's ``lz4`` state-store codec.

A stream is a sequence of blocks, each a 21-byte header then a payload::

    off size
     0   8   magic b"LZ4Block"
     8   1   token = method | level   (method 0x10 stored, 0x20 LZ4; level = log2(blockSize) - 10)
     9   4   compressed length   (payload bytes)
    13   4   raw length          (<= 1 << (level + 10))
    17   4   checksum = XXH32(raw block, seed 0x9747B28C) & 0x0FFFFFFF
    21   .   payload: a bare LZ4 block (no frame, no size prefix) or the stored raw bytes

A block with both lengths 0 (and checksum 0) ends a stream. Spark's reader carries on after
an end block, so concatenated streams are one stream; the data must end right after an end
block. Only the framing lives here: ``lz4.block`` is the codec and ``xxhash`` the checksum.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Iterator

import lz4.block
import xxhash

from ckptfix.errors import FormatError
from ckptfix.formats.streams import Readable, read_exactly
from ckptfix.formats.text import preview

MAGIC = b"LZ4Block"
HEADER = struct.Struct("<8sBiii")  # lz4-java writes the three header ints little-endian
METHOD_RAW = 0x10
METHOD_LZ4 = 0x20
LEVEL_BASE = 10
SEED = 0x9747B28C  # the seed Spark's LZ4CompressionCodec passes to the streaming XXH32
CHECKSUM_MASK = 0x0FFFFFFF
DEFAULT_BLOCK_SIZE = 32 * 1024  # spark.io.compression.lz4.blockSize
MIN_BLOCK_SIZE = 64
MAX_BLOCK_SIZE = 1 << (0x0F + LEVEL_BASE)
_METHOD_NAMES = {METHOD_RAW: "stored", METHOD_LZ4: "LZ4"}


def checksum(raw: bytes) -> int:
    """The 28-bit block checksum lz4-java stores (XXH32 with Spark's seed, masked)."""
    return xxhash.xxh32_intdigest(raw, seed=SEED) & CHECKSUM_MASK


def level_for(block_size: int) -> int:
    """The token's level nibble lz4-java derives from the block size (32 KiB -> 5)."""
    if not MIN_BLOCK_SIZE <= block_size <= MAX_BLOCK_SIZE:
        raise ValueError(f"block_size must be in [{MIN_BLOCK_SIZE}, {MAX_BLOCK_SIZE}], got {block_size}")
    return max(0, (block_size - 1).bit_length() - LEVEL_BASE)


def iter_blocks(source: bytes | bytearray | memoryview | Readable, path: str = "<lz4>") -> Iterator[bytes]:
    """Yield the raw (decompressed) content of each non-empty block, reading ``source``
    incrementally, and check the whole stream: magic, method, lengths, checksum, payload,
    and that it ends right after an end block.

    Kinds: ``empty``, ``bad-magic``, ``bad-method``, ``bad-length``, ``bad-end-block``,
    ``bad-checksum``, ``corrupt-payload``, ``truncated`` (offset = where the block that is
    missing or cut short starts).
    """
    src: Readable = io.BytesIO(bytes(source)) if isinstance(source, (bytes, bytearray, memoryview)) else source
    offset = 0
    ended = False  # the last complete block was an end block
    while True:
        head = read_exactly(src, HEADER.size)
        if not head:
            if offset == 0:
                raise FormatError(path, 0, "an LZ4Block stream", "an empty file", kind="empty")
            if not ended:
                raise FormatError(
                    path, offset, "another LZ4Block block or the end block", "the end of the data", kind="truncated"
                )
            return
        if len(head) < HEADER.size:
            if head[: len(MAGIC)] != MAGIC[: len(head)]:
                raise FormatError(path, offset, "the magic 'LZ4Block'", preview(head[:8]), kind="bad-magic")
            raise FormatError(
                path, offset, f"a {HEADER.size}-byte LZ4Block header", f"{len(head)} bytes", kind="truncated"
            )
        magic, token, clen, rlen, check = HEADER.unpack(head)
        if magic != MAGIC:
            raise FormatError(path, offset, "the magic 'LZ4Block'", preview(magic), kind="bad-magic")
        method, level = token & 0xF0, token & 0x0F
        if method not in (METHOD_RAW, METHOD_LZ4):
            raise FormatError(
                path, offset + 8, "method 0x10 (stored) or 0x20 (LZ4)", f"token 0x{token:02x}", kind="bad-method"
            )
        max_raw = 1 << (level + LEVEL_BASE)
        if not 0 <= rlen <= max_raw:
            raise FormatError(path, offset + 13, f"a raw length in [0, {max_raw}]", str(rlen), kind="bad-length")
        if clen < 0 or (clen == 0) != (rlen == 0) or (method == METHOD_RAW and clen != rlen):
            raise FormatError(
                path,
                offset + 9,
                f"a compressed length consistent with raw length {rlen} ({_METHOD_NAMES[method]})",
                str(clen),
                kind="bad-length",
            )
        if rlen == 0:
            if check != 0:
                raise FormatError(path, offset + 17, "checksum 0 in the end block", str(check), kind="bad-end-block")
            ended = True
            offset += HEADER.size
            continue
        payload = read_exactly(src, clen)
        if len(payload) < clen:
            raise FormatError(
                path,
                offset,
                f"a block with {clen} payload bytes at {offset + HEADER.size}",
                f"{len(payload)} bytes",
                kind="truncated",
            )
        if method == METHOD_RAW:
            raw = payload
        else:
            try:
                raw = lz4.block.decompress(payload, uncompressed_size=rlen)
            except Exception as exc:  # lz4.block.LZ4BlockError and size mismatches
                raise FormatError(
                    path,
                    offset + HEADER.size,
                    f"an LZ4 block of {rlen} raw bytes",
                    f"compressed bytes that do not decompress to it (lz4: {exc})",
                    kind="corrupt-payload",
                ) from None
            if len(raw) != rlen:
                raise FormatError(
                    path, offset + HEADER.size, f"{rlen} raw bytes", f"{len(raw)} bytes", kind="corrupt-payload"
                )
        actual = checksum(raw)
        if actual != check:
            raise FormatError(
                path,
                offset + 17,
                f"the checksum of the block's content, 0x{actual:07x}",
                f"0x{check:07x} in the block header",
                kind="bad-checksum",
            )
        ended = False
        offset += HEADER.size + clen
        yield raw


def decode(data: bytes, path: str = "<lz4>") -> bytes:
    """The whole decompressed stream."""
    return b"".join(iter_blocks(data, path))


def encode(raw: bytes, block_size: int = DEFAULT_BLOCK_SIZE) -> bytes:
    """Frame ``raw`` like ``LZ4BlockOutputStream(out, block_size)`` with Spark's checksum.

    Bytes differ from lz4-java's (another match finder) but decode to the same content.
    """
    level = level_for(block_size)
    out: list[bytes] = []
    for start in range(0, len(raw), block_size):
        chunk = raw[start : start + block_size]
        packed = lz4.block.compress(chunk, store_size=False)
        if len(packed) >= len(chunk):
            out.append(HEADER.pack(MAGIC, METHOD_RAW | level, len(chunk), len(chunk), checksum(chunk)))
            out.append(chunk)
        else:
            out.append(HEADER.pack(MAGIC, METHOD_LZ4 | level, len(packed), len(chunk), checksum(chunk)))
            out.append(packed)
    out.append(HEADER.pack(MAGIC, METHOD_RAW | level, 0, 0, 0))
    return b"".join(out)
