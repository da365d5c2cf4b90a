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

Avro-encoded state (``encodingFormat=avro``, transformWithState; Spark 4.0.5-4.3.0 write the same
bytes) keeps that framing; the row parts become Avro data (:mod:`ckptfix.formats.avro`) and the
parts that can change schema carry the int16 (little-endian) schema id they were written with::

    whole key (no prefix)     0x00 | int16 keySchemaId | avro(key)
    prefix P                  0x00 | avro(prefix columns)
    range G                   0x00 | avro(record of <col>_marker, <col>_value binaries per ordering
                                     column: the marker byte, the big-endian value as above)
    remainder R               0x00 | int16 keySchemaId | avro(remaining columns)
    value (each element)      0x00 | int16 valueSchemaId | avro(value)
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ckptfix.errors import FormatError
from ckptfix.formats import avro, unsaferow
from ckptfix.formats.unsaferow import (
    FIXED_WIDTH_TYPES,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    NullType,
    ShortType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
    decode_row,
)
from ckptfix.state.schemas import StoreSchema
from ckptfix.stores.records import Pair, arrow_of, slices

CF = struct.Struct("<h")
LEN = struct.Struct("<i")
CHECKSUM = struct.Struct("<i")  # 4.x rowChecksum.enabled: a CRC32C before each RocksDB value element
SCHEMA_ID = struct.Struct("<h")  # Avro encoding: the schema id before a whole key, key remainder or value
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
        avro_encoded: bool = False,
    ) -> None:
        """``delimiter``: the merge delimiter between list elements; None when unknown (no
        offset log to read ``mergeOperatorVersion`` from): then it is recognised. ``avro_encoded``:
        RocksDB rows written with ``encodingFormat=avro``."""
        self.sch, self.provider, self.path, self.cf = sch, provider, path, column_family
        self.delimiter = delimiter
        self.row_checksum = row_checksum
        self.avro = avro_encoded
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
        if self.avro:
            source = sch.source or path
            self.avro_rest = avro.schema_for(self.rest, source)
            self.avro_value = avro.schema_for(sch.value, source)
            if enc.kind == "prefix":
                self.avro_first = avro.schema_for(self.first, source)
            elif enc.kind == "range":  # Spark's convertForRangeScan: two binaries per ordering column
                pairs = []
                for i in self.first_idx:
                    f = sch.key.fields[i]
                    pairs += [
                        unsaferow.StructField(f"{f.name}_marker", BinaryType(), False),
                        unsaferow.StructField(f"{f.name}_value", BinaryType(), f.nullable),
                    ]
                self.avro_first = avro.schema_for(StructType(tuple(pairs)), source)

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
            if self.avro:
                return self._avro(body, "key", self.avro_rest, self.sch.key_schema_id, path, offset)
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
            if self.avro:
                first = self._avro(head, "key prefix", self.avro_first, None, path, head_at)
            else:
                first = decode_row(self._versioned(head, "key prefix", path, head_at), self.first, path, head_at + 1)
            values.update(zip(self.first_idx, first.values(), strict=True))
        elif self.avro:
            values.update(self._avro_range(head, path, head_at))
        else:
            values.update(self._range(self._versioned(head, "range-scan key", path, head_at), path, head_at + 1))
        if self.rest_idx or (self.avro and enc.kind == "prefix"):  # (Avro writes an empty remainder too)
            if self.avro:
                rest = self._avro(tail, "key remainder", self.avro_rest, self.sch.key_schema_id, path, tail_at)
            else:
                rest = decode_row(self._versioned(tail, "key remainder", path, tail_at), self.rest, path, tail_at + 1)
            values.update(zip(self.rest_idx, rest.values(), strict=True))
        elif tail:
            raise self.error("the end of the key", f"{len(tail)} more bytes")
        return {k: values[i] for i, k in enumerate(self.sch.key.keys)}

    def _avro(
        self, data: bytes, what: str, schema: avro.Node, schema_id: int | None, path: str, offset: int
    ) -> dict[str, Any]:
        """``0x00 [int16 schema id] avro`` (the id where ``schema_id`` is not None: it must be that one)."""
        body = self._versioned(data, what, path, offset)
        at = offset + 1
        if schema_id is not None:
            if len(body) < SCHEMA_ID.size:
                raise self.error(f"a 2-byte schema id in the {what}", f"{len(body)} bytes", path, at)
            (found,) = SCHEMA_ID.unpack_from(body, 0)
            if found != schema_id:
                raise self.error(
                    f"{what} schema id {schema_id} (the one {self.sch.source or 'the schema file'} gives; rows of "
                    "another schema version are not decoded)",
                    str(found),
                    path,
                    at,
                )
            body, at = body[SCHEMA_ID.size :], at + SCHEMA_ID.size
        value: dict[str, Any] = avro.decode(body, schema, path, at)
        return value

    def _avro_range(self, data: bytes, path: str, offset: int) -> dict[int, Any]:
        """The ordering columns of an Avro range-scan key: per column a marker binary and a value binary."""
        record = self._avro(data, "range-scan key", self.avro_first, None, path, offset)
        parts = list(record.values())
        blobs = []
        for n in range(len(self.first_idx)):
            marker, payload = parts[2 * n], parts[2 * n + 1]
            if marker is None or len(marker) != 1:
                found = "null" if marker is None else f"{len(marker)} bytes"
                raise self.error("a 1-byte range-scan marker", found, path, offset)
            blobs.append(marker + (payload or b""))
        return self._markers(blobs, path, offset)

    def _range(self, row: bytes, path: str, offset: int) -> dict[int, Any]:
        binaries = StructType(
            tuple(unsaferow.StructField(f"_{i}", unsaferow.BinaryType(), True) for i in self.first_idx)
        )
        raw = decode_row(row, binaries, path, offset)
        return self._markers(list(raw.values()), path, offset)

    def _markers(self, raw: list[Any], path: str, offset: int) -> dict[int, Any]:
        """Range-scan ordering columns from their ``marker | big-endian value`` binaries."""
        out: dict[int, Any] = {}
        for i, blob in zip(self.first_idx, raw, strict=True):
            t: DataType = self.sch.key.fields[i].data_type
            if not blob:
                raise self.error("a range-scan marker byte", "an empty binary", path, offset)
            marker, payload = blob[0], blob[1:]
            if marker == NULL_MARKER:
                out[i] = None
            elif isinstance(t, BooleanType):
                out[i] = bool(payload[0]) if payload else marker == NON_NEGATIVE
            else:
                fmt = struct.Struct(_RANGE_FORMATS[type(t)])
                if len(payload) != fmt.size:
                    raise self.error(
                        f"{fmt.size} bytes of a range-scan {type(t).__name__}", f"{len(payload)}", path, offset
                    )
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
        if self.avro:
            return self._avro(data, "value", self.avro_value, self.sch.value_schema_id, path, offset)
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


# ---------------------------------------------------------------- many rows at once, into Arrow columns

#: Spark types decoded in bulk (numpy over the rows' 8-byte words); any other field (struct, array, map,
#: decimal(p > 18)) leaves the whole store to the row-by-row decoder
_BULK = (*FIXED_WIDTH_TYPES, StringType, BinaryType)
# what Python's date/datetime hold (the row-by-row decoder fails outside, with its own message)
_MIN_DAY, _MAX_DAY = -719_162, 2_932_896  # 0001-01-01, 9999-12-31
_MIN_MICROS, _MAX_MICROS = -62_135_596_800_000_000, 253_402_300_799_999_999


def bulk_decodable(schema: StructType) -> bool:
    """Whether :func:`decode_columns` decodes rows of ``schema`` (every field atomic and fixed
    or string/binary, decimals up to 18 digits)."""
    return bool(schema.fields) and all(
        isinstance(f.data_type, _BULK)
        or (isinstance(f.data_type, DecimalType) and f.data_type.precision <= unsaferow.MAX_LONG_DIGITS)
        for f in schema.fields
    )


def decode_columns(rows: Any, schema: StructType, arrow_type: Any) -> Any | None:
    """UnsafeRows (a compact ``pyarrow`` binary array, one row per element) as one Arrow
    ``StructArray`` of ``arrow_type``, decoded column by column: the null bitset and the fixed
    8-byte slot of every field are read for all rows at once as little-endian words; strings
    and binaries are sliced out of the rows by the offset/size in their slot, in Arrow.

    None when anything is not as the row-by-row decoder's fast path expects it (a row size not
    a multiple of 8 or below the fixed part, a variable-length value outside its row, invalid
    UTF-8, a decimal beyond its precision, a date or timestamp Python cannot hold): the caller
    then decodes those rows one by one, which reports or handles it exactly as before."""
    import numpy as np
    import pyarrow as pa

    if not bulk_decodable(schema):
        return None
    n, nf = len(rows), len(schema.fields)
    nbw = (nf + 63) // 64
    fixed = unsaferow.WORD_SIZE * (nbw + nf)
    _validity, offsets_buf, data_buf = rows.buffers()
    offsets = np.frombuffer(offsets_buf, dtype=np.int32, count=n + 1, offset=4 * rows.offset).astype(np.int64)
    starts, lens = offsets[:-1], np.diff(offsets)
    if n and ((starts % 8).any() or (lens % 8).any() or (lens < fixed).any()):
        return None
    end = int(offsets[-1]) if n else 0
    words = np.frombuffer(data_buf, dtype="<u8", count=end // 8) if end else np.zeros(0, dtype="<u8")
    w0 = starts // 8
    children = []
    for j, f in enumerate(schema.fields):
        t = f.data_type
        null = ((words[w0 + j // 64] >> np.uint64(j % 64)) & np.uint64(1)).astype(bool) if n else np.zeros(0, bool)
        slot = words[w0 + nbw + j] if n else np.zeros(0, dtype="<u8")
        target = arrow_type.field(j).type
        child = _column(t, target, slot, null, starts, lens, fixed, data_buf, np, pa)
        if child is None:
            return None
        children.append(child)
    return pa.StructArray.from_arrays(children, fields=list(arrow_type))


def _column(
    t: DataType, target: Any, slot: Any, null: Any, starts: Any, lens: Any, fixed: int, data: Any, np: Any, pa: Any
) -> Any | None:
    """One field of every row as an Arrow array (None: leave it to the row-by-row decoder)."""
    n = len(slot)
    if isinstance(t, NullType):
        return pa.nulls(n)
    valid = ~null
    mask = null if null.any() else None
    if isinstance(t, BooleanType):
        return arrow_of((slot & np.uint64(0xFF)) != 0, target, valid)
    if isinstance(t, ByteType):
        return arrow_of(slot.astype(np.uint8).view(np.int8), target, valid)
    if isinstance(t, ShortType):
        return arrow_of(slot.astype(np.uint16).view(np.int16), target, valid)
    if isinstance(t, (IntegerType, DateType, FloatType)):
        low = slot.astype(np.uint32)
        if isinstance(t, FloatType):
            return arrow_of(low.view(np.float32), target, valid)
        ints = low.view(np.int32)
        if isinstance(t, DateType):
            if ((ints[valid] < _MIN_DAY) | (ints[valid] > _MAX_DAY)).any():
                return None
            return arrow_of(ints, target, valid)
        return arrow_of(ints, target, valid)
    if isinstance(t, DoubleType):
        return arrow_of(slot.view(np.float64), target, valid)
    if isinstance(t, (LongType, TimestampType, TimestampNTZType)):
        longs = slot.view(np.int64)
        if isinstance(t, LongType):
            return arrow_of(longs, target, valid)
        if ((longs[valid] < _MIN_MICROS) | (longs[valid] > _MAX_MICROS)).any():
            return None
        return arrow_of(longs, target, valid)
    if isinstance(t, DecimalType):
        longs = slot.view(np.int64)
        limit = 10**t.precision
        if ((longs[valid] >= limit) | (longs[valid] <= -limit)).any():
            return None
        pair = np.empty((n, 2), dtype="<i8")
        pair[:, 0], pair[:, 1] = longs, longs >> 63
        return pa.Array.from_buffers(target, n, [_bitmap(valid, pa), pa.py_buffer(pair)])
    if isinstance(t, (StringType, BinaryType)):
        rel, size = (slot >> np.uint64(32)).astype(np.int64), (slot & np.uint64(0xFFFFFFFF)).astype(np.int64)
        rel = np.where(null, fixed, rel)
        size = np.where(null, 0, size)
        if ((rel < fixed) | (rel + size > lens)).any():
            return None
        values = slices(data, starts + rel, size, target)
        if values is None:
            return None
        if isinstance(t, StringType):
            try:
                values.validate(full=True)  # UTF-8
            except pa.ArrowInvalid:
                return None
        if mask is not None:
            _, offs, body = values.buffers()
            values = pa.Array.from_buffers(target, n, [_bitmap(valid, pa), offs, body])
        return values
    return None


def _bitmap(valid: Any, pa: Any) -> Any:
    import numpy as np

    return pa.py_buffer(np.packbits(valid, bitorder="little"))
