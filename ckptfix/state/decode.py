"""Raw state pairs -> rows as Spark's ``statestore`` reader shows them.

HDFS-backed keys and values are bare UnsafeRows. RocksDB adds framing (Spark's
``RocksDBStateEncoder``; shorts/ints in it are native little-endian)::

    key   = [int16 cfId] 0x00 row                                  no prefix
          = [int16 cfId] int32 len(P) | P | R                      prefix scan (P, R = 0x00 row)
          = [int16 cfId] int32 len(G) | G | [R]                    range scan (G = 0x00 row of
                                                                   one binary per ordering column)
    value = 0x00 row                                               one value
          = (int32 len(0x00 row) | 0x00 row) joined by the merge     several values (ListState)
            delimiter (',' for mergeOperatorVersion 1, none for 2)
          = int32 checksum | int32 len | 0x00 row, per element        4.x rowChecksum.enabled

Range-scan ordering columns are ``marker | big-endian value`` binaries: marker 0x00 for
a negative number, 0x01 otherwise, 0x02 for null; a negative float/double has all its bits
flipped.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ckptfix.errors import FormatError
from ckptfix.formats import unsaferow
from ckptfix.formats.unsaferow import (
    BooleanType,
    ByteType,
    DataType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StructType,
    decode_row,
)
from ckptfix.state.schemas import StoreSchema
from ckptfix.stores.records import Pair

CF = struct.Struct("<h")
LEN = struct.Struct("<i")
CHECKSUM = struct.Struct("<i")  # 4.x rowChecksum.enabled: a CRC32C before each RocksDB value element
VERSION = unsaferow.STATE_ENCODING_VERSION
NEGATIVE, NON_NEGATIVE, NULL_MARKER = 0x00, 0x01, 0x02
_RANGE_FORMATS: dict[type, str] = {
    ByteType: ">b",
    ShortType: ">h",
    IntegerType: ">i",
    LongType: ">q",
    FloatType: ">f",
    DoubleType: ">d",
}


def _sub(schema: StructType, names: Iterable[int]) -> StructType:
    return StructType(tuple(schema.fields[i] for i in names))


class Decoder:
    """Decodes the keys and values of one store (or one column family)."""

    def __init__(
        self,
        sch: StoreSchema,
        provider: str,
        path: str,
        column_family: bool = False,
        delimiter: bytes | None = b",",
        row_checksum: bool = False,
    ) -> None:
        """``delimiter``: the merge delimiter between list elements; None when unknown (no
        offset log to read ``mergeOperatorVersion`` from): then it is recognised."""
        self.sch, self.provider, self.path, self.cf = sch, provider, path, column_family
        self.delimiter = delimiter
        self.row_checksum = row_checksum
        n = len(sch.key.fields)
        enc = sch.encoding
        if enc.kind == "prefix":
            self.first = _sub(sch.key, range(enc.num_prefix))
            self.rest_idx = list(range(enc.num_prefix, n))
            self.first_idx = list(range(enc.num_prefix))
        elif enc.kind == "range":
            self.first_idx = list(enc.ordinals)
            self.rest_idx = [i for i in range(n) if i not in enc.ordinals]
            for i in self.first_idx:
                t = type(sch.key.fields[i].data_type)
                if t not in _RANGE_FORMATS and t is not BooleanType:
                    raise FormatError(path, 0, "fixed-size range-scan ordering columns", t.__name__, kind="bad-schema")
        self.rest = _sub(sch.key, self.rest_idx) if enc.kind != "none" else sch.key

    def error(self, expected: str, found: str, path: str | None = None, offset: int = 0) -> FormatError:
        return FormatError(path or self.path, offset, expected, found, kind="bad-row")

    def _versioned(self, data: bytes, what: str, path: str, offset: int) -> bytes:
        if not data or data[0] != VERSION:
            found = "nothing" if not data else f"byte 0x{data[0]:02x}"
            raise self.error(f"state encoding version 0 before the {what}", found, path, offset)
        return data[1:]

    def key(self, data: bytes, path: str | None = None, offset: int = 0) -> dict[str, Any]:
        path = path or self.path
        if self.provider == "hdfs":
            return decode_row(data, self.sch.key, path, offset)
        skip = CF.size if self.cf else 0
        body, offset = data[skip:], offset + skip
        enc = self.sch.encoding
        if enc.kind == "none":
            return decode_row(self._versioned(body, "key", path, offset), self.sch.key, path, offset + 1)
        if len(body) < LEN.size:
            raise self.error("a 4-byte length of the key prefix", f"{len(body)} bytes", path, offset)
        (n,) = LEN.unpack_from(body, 0)
        if not 0 <= n <= len(body) - LEN.size:
            raise self.error(f"a key prefix length within {len(body) - LEN.size} bytes", str(n), path, offset)
        head, tail = body[LEN.size : LEN.size + n], body[LEN.size + n :]
        head_at, tail_at = offset + LEN.size, offset + LEN.size + n
        values: dict[int, Any] = {}
        if enc.kind == "prefix":
            first = decode_row(self._versioned(head, "key prefix", path, head_at), self.first, path, head_at + 1)
            values.update(zip(self.first_idx, first.values(), strict=True))
        else:
            values.update(self._range(self._versioned(head, "range-scan key", path, head_at), path, head_at + 1))
        if self.rest_idx:
            rest = decode_row(self._versioned(tail, "key remainder", path, tail_at), self.rest, path, tail_at + 1)
            values.update(zip(self.rest_idx, rest.values(), strict=True))
        elif tail:
            raise self.error("the end of the key", f"{len(tail)} more bytes")
        return {k: values[i] for i, k in enumerate(self.sch.key.keys)}

    def _range(self, row: bytes, path: str, offset: int) -> dict[int, Any]:
        binaries = StructType(
            tuple(unsaferow.StructField(f"_{i}", unsaferow.BinaryType(), True) for i in self.first_idx)
        )
        raw = decode_row(row, binaries, path, offset)
        out: dict[int, Any] = {}
        for i, blob in zip(self.first_idx, raw.values(), strict=True):
            t: DataType = self.sch.key.fields[i].data_type
            if not blob:
                raise self.error("a range-scan marker byte", "an empty binary")
            marker, payload = blob[0], blob[1:]
            if marker == NULL_MARKER:
                out[i] = None
            elif isinstance(t, BooleanType):
                out[i] = bool(payload[0]) if payload else marker == NON_NEGATIVE
            else:
                fmt = struct.Struct(_RANGE_FORMATS[type(t)])
                if len(payload) != fmt.size:
                    raise self.error(f"{fmt.size} bytes of a range-scan {type(t).__name__}", f"{len(payload)}")
                if marker == NEGATIVE and isinstance(t, (FloatType, DoubleType)):
                    payload = bytes(b ^ 0xFF for b in payload)
                (out[i],) = fmt.unpack(payload)
        return out

    def value(self, data: bytes, path: str | None = None, offset: int = 0) -> dict[str, Any]:
        path = path or self.path
        if self.provider == "hdfs":
            return decode_row(data, self.sch.value, path, offset)
        if self.row_checksum:  # int32 checksum | int32 LE len | 0x00 row (one element)
            elements = self.values(data, path, offset)
            if len(elements) != 1:
                raise self.error("one value", f"{len(elements)} values", path, offset)
            return elements[0]
        return self._value(data, path, offset)

    def _value(self, data: bytes, path: str, offset: int) -> dict[str, Any]:
        return decode_row(self._versioned(data, "value", path, offset), self.sch.value, path, offset + 1)

    def values(self, data: bytes, path: str | None = None, offset: int = 0) -> list[dict[str, Any]]:
        """The elements of a multi-valued (ListState) value (each with a row checksum first
        when ``rowChecksum.enabled``; the checksum is not verified)."""
        path = path or self.path
        out, pos, n = [], 0, len(data)
        while pos < n:
            if self.row_checksum:
                pos += CHECKSUM.size
            if pos + LEN.size > n:
                raise self.error("a 4-byte element length", f"{n - pos} bytes")
            (size,) = LEN.unpack_from(data, pos)
            pos += LEN.size
            if not 0 < size <= n - pos:
                raise self.error(f"an element length within {n - pos} bytes", str(size))
            out.append(self._value(data[pos : pos + size], path, offset + pos))
            pos += size
            if pos < n and self.delimiter is None:
                pos += self._sniff_delimiter(data, pos)
            elif pos < n and self.delimiter:
                if data[pos : pos + len(self.delimiter)] != self.delimiter:
                    raise self.error(
                        f"the {self.delimiter!r} between list elements", f"byte 0x{data[pos]:02x}", path, offset + pos
                    )
                pos += len(self.delimiter)
        return out

    @staticmethod
    def _sniff_delimiter(data: bytes, pos: int) -> int:
        """Without an offset log the merge delimiter is unknown: a ',' counts as one only if
        a well-formed element (length, then the version byte) follows it."""
        if data[pos] != 0x2C or pos + 1 + LEN.size >= len(data):
            return 0
        (size,) = LEN.unpack_from(data, pos + 1)
        fits = 0 < size <= len(data) - pos - 1 - LEN.size and data[pos + 1 + LEN.size] == VERSION
        return 1 if fits else 0


def column_family_of(key: bytes) -> int:
    return CF.unpack_from(key, 0)[0] if len(key) >= CF.size else -1


def plain_rows(
    pairs: Iterable[Pair],
    dec: Decoder,
    partition: int,
    locate: Callable[[bytes], tuple[str, int, int]] | None = None,
) -> Iterator[dict[str, Any]]:
    """Rows of plain key/value stores. ``locate`` finds the file position of a pair yielded
    without one, so that its decoding error names the file and offset."""
    for pair in pairs:
        key, value = decode_pair(dec, pair, locate)
        yield {"key": key, "value": value, "partition_id": partition}


def decode_pair(
    dec: Decoder, pair: Pair, locate: Callable[[bytes], tuple[str, int, int]] | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    k, v, path, k_at, v_at = pair
    if k_at >= 0 or locate is None:
        return dec.key(k, path, max(k_at, 0)), dec.value(v, path, max(v_at, 0))
    try:
        return dec.key(k, path, 0), dec.value(v, path, 0)
    except FormatError:
        path, k_at, v_at = locate(k)  # the error again, with the file and offset
        return dec.key(k, path, k_at), dec.value(v, path, v_at)
