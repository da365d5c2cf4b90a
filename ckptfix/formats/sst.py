"""RocksDB block-based table files (``SSTs/*.sst`` of the RocksDB state store): block checksums, without RocksDB.

Spark (``RocksDBConf``: ``formatVersion`` 5, RocksDB's default checksum type XXH3) writes block-based tables. Every
block is followed by a 5-byte trailer: the block's compression type (1 byte) and a checksum (fixed32, little-endian)
over the block's stored bytes and that type byte. Layout, from the end (format versions 2-5; all little-endian)::

    footer (53 bytes):  checksum type (1) | metaindex handle | index handle | zero padding to 41 bytes
                        | format_version (fixed32) | magic 0x88e241b785f4cff7 (fixed64)
    metaindex block:    block name -> handle ("rocksdb.properties", "fullfilter.rocksdb.BuiltinBloomFilter", ...)
    index block:        one entry per data block: its last key -> handle (maybe compressed, see below)
    data blocks:        from byte 0 on, each followed by its trailer

A handle is two varint64s (offset, size; the size excludes the trailer). Blocks hold prefix-compressed entries
(``shared``, ``non_shared``, ``value_length`` varint32s, the key's new bytes, the value) followed by a restart array
(fixed32 offsets) and its length (fixed32). Index blocks of format version >= 4 drop ``value_length`` when the
properties say ``rocksdb.index.value.is.delta.encoded``: an entry with ``shared == 0`` holds a full handle, any
other only the signed (zigzag varint64) size difference to the previous handle, its offset following that block's
trailer. A compressed index block (Spark's default compression is LZ4) starts with its decompressed size (varint32).

Checksums (``ChecksumType``): 1 CRC32C (masked), 2 xxHash32, 3 xxHash64 (lower 32 bits), 4 XXH3 (lower 32 bits
of XXH3-64 over the block, xor the type byte times 0x6b9083d9). Verified against the SSTs Spark 3.5-4.3 wrote.

Only checksums and the structure needed to find every block are checked here, not the keys' order or the
blocks' contents. What cannot be checked (format version 6's footer, a partitioned index, an index compression
ckptfix cannot decode here) is said in :attr:`SstReport.unverified`, never passed as verified.
"""

from __future__ import annotations

import bz2
import importlib
import struct
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import crc32c
import lz4.block
import xxhash

MAGIC = 0x88E241B785F4CFF7  # kBlockBasedTableMagicNumber
LEGACY_MAGIC = 0xDB4775248B80FB57  # kLegacyBlockBasedTableMagicNumber (format version 0: never written by Spark)
FOOTER_SIZE = 53
TRAILER_SIZE = 5
FORMAT_VERSIONS = range(2, 6)  # the footers read here (6 moved the index handle into the metaindex)
KNOWN_FORMAT_VERSIONS = range(0, 8)  # the versions RocksDB has defined (0 legacy footer; 6, 7 context checksums)
CHECKSUMS = {0: "none", 1: "crc32c", 2: "xxhash", 3: "xxhash64", 4: "xxh3"}
COMPRESSIONS = {0: "none", 1: "snappy", 2: "zlib", 3: "bzip2", 4: "lz4", 5: "lz4hc", 6: "xpress", 7: "zstd"}
PROPERTIES = "rocksdb.properties"
DELTA_ENCODED = b"rocksdb.index.value.is.delta.encoded"
INDEX_TYPE = b"rocksdb.block.based.table.index.type"
#: index types whose index block lists the data blocks directly: binary search, hash search (the same index
#: block, plus prefix meta blocks), binary search with first key (each value also carries the block's first key)
FLAT_INDEXES = {0: "binary search", 1: "hash search", 3: "binary search with first key"}
WITH_FIRST_KEY = 3
_XXH3_LAST_BYTE_PRIME = 0x6B9083D9
_MASK_DELTA = 0xA282EAD8
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")


@dataclass(frozen=True)
class BlockDamage:
    """The first block whose bytes do not match its trailer's checksum (or a footer RocksDB refuses)."""

    role: str  # footer | metaindex | properties | filter | index | data | another meta block's name
    offset: int  # where the block starts in the file
    expected: str
    found: str
    size: int | None = None  # the block's size without its trailer (RocksDB's message names it)
    stored: int | None = None  # the trailer's checksum and the one computed over the block, for a mismatch,
    computed: int | None = None  # as RocksDB's message gives them (a CRC32C unmasked)
    checksum_type: int | None = None

    @property
    def fails_open(self) -> bool:
        """Whether RocksDB refuses to open the table (recorded on Spark 3.5.9-4.3 for the index, properties and
        metaindex blocks: ``block checksum mismatch`` when the state loads). Not for the two other kinds: a filter
        block that fails its checksum RocksDB treats as absent (recorded: the restart computed the right
        aggregates), and a data block is read only when a lookup, a scan or a compaction reaches it."""
        return self.role not in ("data", "filter")


@dataclass(frozen=True)
class SstReport:
    format_version: int | None
    checksum: str | None  # the checksum type's name
    blocks_verified: int
    damage: BlockDamage | None = None
    unverified: str = ""  # why (some) blocks were not verified; "" when every block was


class _Bad(Exception):
    """Structure the parser cannot walk (inside a block whose checksum matched: RocksDB would not write it)."""


def verify(data: bytes | memoryview) -> SstReport:
    """Check the footer and every block's checksum; the first damaged block is the report's ``damage``."""
    buf = memoryview(data)
    n = len(buf)
    if n < FOOTER_SIZE:
        return SstReport(None, None, 0, BlockDamage("footer", 0, f"at least {FOOTER_SIZE} bytes", f"{n} bytes"))
    foot = n - FOOTER_SIZE
    (magic,) = _U64.unpack_from(buf, n - 8)
    if magic == LEGACY_MAGIC:
        return SstReport(0, None, 0, unverified="a legacy (format version 0) footer")
    if magic != MAGIC:
        return SstReport(
            None, None, 0, BlockDamage("footer", n - 8, f"the table magic number {MAGIC:#x}", f"{magic:#x}")
        )
    (version,) = _U32.unpack_from(buf, n - 12)
    if version not in KNOWN_FORMAT_VERSIONS:
        return SstReport(
            None, None, 0, BlockDamage("footer", n - 12, "a format_version RocksDB defines (0-7)", str(version))
        )
    if version not in FORMAT_VERSIONS:
        return SstReport(version, None, 0, unverified=f"format_version {version} (ckptfix reads 2-5)")
    ctype = buf[foot]
    name = CHECKSUMS.get(ctype)
    if name is None:
        return SstReport(version, None, 0, BlockDamage("footer", foot, "a checksum type 0-4", str(ctype)))
    try:
        meta_off, meta_size, index_off, index_size = _footer_handles(buf, foot)
    except _Bad:
        return SstReport(version, name, 0, BlockDamage("footer", foot, "two block handles", "bytes that are not"))
    if name == "none":
        return SstReport(version, name, 0, unverified="the table stores no block checksums (checksum type 0)")
    walk = _Walk(buf, ctype, foot)
    try:
        meta = walk.block("metaindex", meta_off, meta_size)
        if isinstance(meta, BlockDamage):
            return walk.report(version, name, meta)
        props: dict[bytes, bytes] = {}
        for key, value in _entries(meta):
            handle = _handle(value)
            role = _meta_role(key)
            block = walk.block(role, *handle)
            if isinstance(block, BlockDamage):
                return walk.report(version, name, block)
            if role == "properties":
                props = dict(_entries(block))
        index = walk.block("index", index_off, index_size)
        if isinstance(index, BlockDamage):
            return walk.report(version, name, index)
        index_type = _U32.unpack(props[INDEX_TYPE])[0] if len(props.get(INDEX_TYPE, b"")) == 4 else 0
        if index_type not in FLAT_INDEXES:
            return walk.report(version, name, None, f"index type {index_type} (a partitioned index)")
        raw = walk.decompress(index_off, index_size)
        if isinstance(raw, str):
            return walk.report(version, name, None, raw)
        delta = _varint(props[DELTA_ENCODED], 0)[0] != 0 if DELTA_ENCODED in props else False
        for off, size in _index_handles(raw, delta, index_type == WITH_FIRST_KEY):
            block = walk.block("data", off, size)
            if isinstance(block, BlockDamage):
                return walk.report(version, name, block)
    except _Bad as exc:
        # only reached through blocks whose checksum matched: the bytes are what RocksDB wrote, so the walk
        # itself is at fault; say so rather than call the table damaged
        return walk.report(version, name, None, f"a block ckptfix could not walk ({exc})")
    return walk.report(version, name, None)


def first_entries(data: bytes | memoryview, limit: int = 16) -> list[tuple[bytes, bytes | None]]:
    """The entries of the table's first data block, at most ``limit``: user keys (internal keys without their 8-byte
    sequence/type trailer) with their values (None for an entry that is not a plain value: a deletion, a merge
    operand); [] where this table cannot be walked here (another footer version, a partitioned index, a damaged or
    undecodable block: :func:`verify` says which). Every block read is checked against its trailer's checksum first:
    a damaged block's bytes are not the query's (repair hunt 13: a flipped data block was decoded as rows that "do
    not fit the stored schema")."""
    buf = memoryview(data)
    n = len(buf)
    if n < FOOTER_SIZE or _U64.unpack_from(buf, n - 8)[0] != MAGIC:
        return []
    if _U32.unpack_from(buf, n - 12)[0] not in FORMAT_VERSIONS:
        return []
    foot = n - FOOTER_SIZE
    if buf[foot] not in CHECKSUMS or buf[foot] == 0:  # no checksums to check the blocks against
        return []
    walk = _Walk(buf, buf[foot], foot)
    keys: list[tuple[bytes, bytes | None]] = []
    try:
        meta_off, meta_size, index_off, index_size = _footer_handles(buf, foot)
        meta = walk.checked(meta_off, meta_size)
        props: dict[bytes, bytes] = {}
        for key, value in _entries(meta if isinstance(meta, bytes) else b""):
            if _meta_role(key) == "properties":
                block = walk.checked(*_handle(value))
                props = dict(_entries(block)) if isinstance(block, bytes) else {}
        index_type = _U32.unpack(props[INDEX_TYPE])[0] if len(props.get(INDEX_TYPE, b"")) == 4 else 0
        index = walk.checked(index_off, index_size)
        if index_type not in FLAT_INDEXES or not isinstance(index, bytes):
            return []
        delta = _varint(props[DELTA_ENCODED], 0)[0] != 0 if DELTA_ENCODED in props else False
        for off, size in _index_handles(index, delta, index_type == WITH_FIRST_KEY):
            block = walk.checked(off, size)
            if not isinstance(block, bytes):
                return []
            for key, value in _entries(block):
                if len(key) >= 8:
                    kind = key[-8]  # the trailer's low byte: 1 = a value (kTypeValue)
                    keys.append((bytes(key[:-8]), bytes(value) if kind == 1 else None))
                if len(keys) >= limit:
                    return keys
            break  # the first data block only
    except (_Bad, KeyError, struct.error, IndexError):
        return []
    return keys


def first_keys(data: bytes | memoryview, limit: int = 16) -> list[bytes]:
    """The user keys of :func:`first_entries`."""
    return [key for key, _ in first_entries(data, limit)]


def _footer_handles(buf: memoryview, foot: int) -> tuple[int, int, int, int]:
    """The metaindex and index block handles (offset, size, offset, size) after the footer's checksum type."""
    pos = foot + 1
    out: list[int] = []
    for _ in range(4):
        value, pos = _varint(buf, pos)
        out.append(value)
    return out[0], out[1], out[2], out[3]


class _Walk:
    def __init__(self, buf: memoryview, ctype: int, end: int) -> None:
        self.buf, self.ctype, self.check, self.end, self.verified = buf, ctype, _checker(ctype), end, 0

    def block(self, role: str, offset: int, size: int) -> memoryview | BlockDamage:
        if offset + size + TRAILER_SIZE > self.end:
            return BlockDamage(
                role, offset, f"a block within the table's {self.end} bytes", f"{size} bytes at offset {offset}", size
            )
        body = self.buf[offset : offset + size]
        ctype = self.buf[offset + size]
        (stored,) = _U32.unpack_from(self.buf, offset + size + 1)
        computed = self.check(body, ctype)
        if stored != computed:
            if self.ctype == 1:  # RocksDB's "block checksum mismatch" message unmasks CRC32C values
                stored, computed = _unmask(stored), _unmask(computed)
            return BlockDamage(
                role,
                offset,
                f"block checksum {stored} (its trailer)",
                f"{computed} over its bytes",
                size,
                stored,
                computed,
                self.ctype,
            )
        self.verified += 1
        return body if ctype == 0 else memoryview(b"")  # meta blocks are stored uncompressed

    def checked(self, offset: int, size: int) -> bytes | str:
        """:meth:`decompress` of a block whose checksum matches its trailer's, or why not."""
        damage = self.block("data", offset, size)
        if isinstance(damage, BlockDamage):
            return f"a block whose checksum does not match ({damage.found})"
        return self.decompress(offset, size)

    def decompress(self, offset: int, size: int) -> bytes | str:
        """The index block's entries (the checksum already matched), or why they cannot be read here."""
        body = self.buf[offset : offset + size]
        ctype = self.buf[offset + size]
        if ctype == 0:
            return bytes(body)
        kind = COMPRESSIONS.get(ctype, str(ctype))
        try:
            raw_size, pos = _varint(body, 0)
            payload = bytes(body[pos:])
            if kind in ("lz4", "lz4hc"):
                return bytes(lz4.block.decompress(payload, uncompressed_size=raw_size))
            if kind == "zlib":
                return zlib.decompress(payload, -15)
            if kind == "bzip2":
                return bz2.decompress(payload)
            if kind == "snappy":  # no size prefix: raw snappy
                return bytes(importlib.import_module("cramjam").snappy.decompress_raw(bytes(body)))
            if kind == "zstd":
                return bytes(importlib.import_module("zstandard").ZstdDecompressor().decompress(payload, raw_size))
        except ImportError:
            return f"a {kind}-compressed index block (its decoder is not installed here)"
        except Exception as exc:  # noqa: BLE001 - a decoder's own error on bytes whose checksum matched
            return f"a {kind}-compressed index block ckptfix could not decode ({type(exc).__name__})"
        return f"a {kind}-compressed index block"

    def report(self, version: int, name: str, damage: BlockDamage | None, unverified: str = "") -> SstReport:
        return SstReport(version, name, self.verified, damage, unverified)


def _meta_role(key: bytes) -> str:
    if key == PROPERTIES.encode():
        return "properties"
    if b"filter." in key:
        return "filter"
    return key.decode("utf-8", "replace")


def _checker(ctype: int) -> Callable[[memoryview, int], int]:
    def xxh3(body: memoryview, last: int) -> int:
        return (xxhash.xxh3_64_intdigest(body) & 0xFFFFFFFF) ^ ((last * _XXH3_LAST_BYTE_PRIME) & 0xFFFFFFFF)

    def crc(body: memoryview, last: int) -> int:
        value = crc32c.crc32c(bytes([last]), value=crc32c.crc32c(body))
        return ((((value >> 15) | (value << 17)) & 0xFFFFFFFF) + _MASK_DELTA) & 0xFFFFFFFF

    def xxh32(body: memoryview, last: int) -> int:
        h = xxhash.xxh32(seed=0)
        h.update(body)
        h.update(bytes([last]))
        return h.intdigest()

    def xxh64(body: memoryview, last: int) -> int:
        h = xxhash.xxh64(seed=0)
        h.update(body)
        h.update(bytes([last]))
        return h.intdigest() & 0xFFFFFFFF

    return {1: crc, 2: xxh32, 3: xxh64, 4: xxh3}[ctype]


def _unmask(masked: int) -> int:
    rotated = (masked - _MASK_DELTA) & 0xFFFFFFFF
    return ((rotated >> 17) | (rotated << 15)) & 0xFFFFFFFF


def _varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise _Bad(f"a varint cut off at byte {pos}")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def _handle(value: bytes | memoryview) -> tuple[int, int]:
    offset, pos = _varint(value, 0)
    size, _ = _varint(value, pos)
    return offset, size


def _restarts_end(block: bytes | memoryview) -> int:
    if len(block) < 4:
        raise _Bad("a block shorter than its restart count")
    (count,) = _U32.unpack_from(block, len(block) - 4)
    end = len(block) - 4 - 4 * count
    if count == 0 or end < 0:
        raise _Bad(f"{count} restart points in a {len(block)}-byte block")
    return end


def _entries(block: bytes | memoryview) -> Iterator[tuple[bytes, bytes]]:
    """(full key, value) of a block whose entries carry their value length (metaindex, properties)."""
    end = _restarts_end(block)
    pos, key = 0, b""
    while pos < end:
        shared, pos = _varint(block, pos)
        non_shared, pos = _varint(block, pos)
        length, pos = _varint(block, pos)
        if shared > len(key) or pos + non_shared + length > end:
            raise _Bad(f"an entry overrunning its block at byte {pos}")
        key = key[:shared] + bytes(block[pos : pos + non_shared])
        pos += non_shared
        yield key, bytes(block[pos : pos + length])
        pos += length


def _index_handles(block: bytes, delta: bool, first_key: bool) -> Iterator[tuple[int, int]]:
    """Every data block's (offset, size) that the index block lists."""
    end = _restarts_end(block)
    pos = 0
    prev: tuple[int, int] | None = None
    while pos < end:
        shared, pos = _varint(block, pos)
        non_shared, pos = _varint(block, pos)
        value_end = None
        if not delta:
            length, pos = _varint(block, pos)
            value_end = pos + non_shared + length
        pos += non_shared
        if delta and shared != 0:
            if prev is None:
                raise _Bad("a delta-encoded index entry without a previous handle")
            zigzag, pos = _varint(block, pos)
            size_delta = (zigzag >> 1) ^ -(zigzag & 1)
            handle = (prev[0] + prev[1] + TRAILER_SIZE, prev[1] + size_delta)
        else:
            offset, pos = _varint(block, pos)
            size, pos = _varint(block, pos)
            handle = (offset, size)
        if first_key:
            length, pos = _varint(block, pos)
            pos += length
        if value_end is not None:
            pos = value_end
        if pos > end:
            raise _Bad(f"an index entry overrunning its block at byte {pos}")
        yield handle
        prev = handle


__all__ = ["BlockDamage", "SstReport", "verify"]
