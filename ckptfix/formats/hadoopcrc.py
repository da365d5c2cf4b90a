"""Hadoop ``ChecksumFileSystem`` sidecars ``.<name>.crc``.

Layout: ``b"crc\\0"``, int32 big-endian bytes-per-checksum (512), then one big-endian
CRC-32 (zlib polynomial) per chunk of the data file.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

from ckptfix.errors import FormatError
from ckptfix.formats.text import preview

MAGIC = b"crc\x00"
HEADER = struct.Struct(">4si")  # Java DataOutputStream: big-endian
CRC = struct.Struct(">I")
DEFAULT_BYTES_PER_CHECKSUM = 512


@dataclass(frozen=True)
class HadoopCrc:
    bytes_per_checksum: int
    checksums: tuple[int, ...]


def parse(data: bytes, path: str = "<crc>") -> HadoopCrc:
    if len(data) < HEADER.size:
        raise FormatError(
            path, 0, f"a {HEADER.size}-byte Hadoop checksum header", f"{len(data)} bytes", kind="truncated"
        )
    magic, bpc = HEADER.unpack_from(data)
    if magic != MAGIC:
        raise FormatError(path, 0, "the magic 'crc\\0'", preview(magic), kind="bad-magic")
    if bpc <= 0:
        raise FormatError(path, 4, "a positive bytes-per-checksum", str(bpc), kind="invalid")
    body = data[HEADER.size :]
    if len(body) % CRC.size:
        raise FormatError(
            path, len(data), "whole 4-byte checksums", f"{len(body) % CRC.size} stray bytes", kind="truncated"
        )
    sums = tuple(CRC.unpack_from(body, i)[0] for i in range(0, len(body), CRC.size))
    return HadoopCrc(bpc, sums)


def compute(data: bytes, bytes_per_checksum: int = DEFAULT_BYTES_PER_CHECKSUM) -> HadoopCrc:
    sums = tuple(zlib.crc32(data[i : i + bytes_per_checksum]) for i in range(0, len(data), bytes_per_checksum))
    return HadoopCrc(bytes_per_checksum, sums)


def dump(crc: HadoopCrc) -> bytes:
    return HEADER.pack(MAGIC, crc.bytes_per_checksum) + b"".join(CRC.pack(c) for c in crc.checksums)


def read_error_at(crc: HadoopCrc, data: bytes) -> int | None:
    """Where Hadoop's checksummed read of ``data`` (ChecksumFileSystem's input checker) raises ChecksumException, or
    None if it reads to the end. It verifies each chunk it reads, a short last chunk against its stored sum, and
    raises at the first chunk the sidecar has no sum for; it never learns the length the sidecar implies. So data
    cut at a chunk boundary, or emptied, reads without an error (recorded on 4.0.5 and 4.1.4: an emptied zip with
    its .crc kept fails in the unzip, with no ChecksumException), while :func:`first_mismatch` reports it."""
    actual = compute(data, crc.bytes_per_checksum).checksums
    for i, (want, got) in enumerate(zip(crc.checksums, actual, strict=False)):
        if want != got:
            return i * crc.bytes_per_checksum
    if len(actual) > len(crc.checksums):
        return len(crc.checksums) * crc.bytes_per_checksum
    return None


def first_mismatch(crc: HadoopCrc, data: bytes) -> int | None:
    """Byte offset in ``data`` of the first chunk whose checksum differs, or None if all
    match. A length change shows as a mismatch at the first chunk past the shorter side."""
    actual = compute(data, crc.bytes_per_checksum).checksums
    for i, (want, got) in enumerate(zip(crc.checksums, actual, strict=False)):
        if want != got:
            return i * crc.bytes_per_checksum
    if len(actual) != len(crc.checksums):
        return min(len(actual), len(crc.checksums)) * crc.bytes_per_checksum
    return None
