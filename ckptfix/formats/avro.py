"""Avro binary data (no container file) as Spark's Avro state encoding writes it, typed by a Spark schema.

``spark.sql.streaming.stateStore.encodingFormat=avro`` (4.x, transformWithState on RocksDB) stores each key
part and value as one Avro datum written with Avro's ``GenericDatumWriter`` against the Avro schema Spark
derives from the state's StructType: ``SchemaConverters.toAvroTypeWithDefaults`` (Spark 4.0.5, 4.1.4,
4.2.1 and 4.3.0 write the same bytes; a pre-release 4.0 source used ``toAvroType``, whose unions put null
second, and no schema ids: no release checked writes that, and it is not decoded):

* every record field, whatever its ``nullable``, is ``union [null, T]`` (a NullType field stays ``null``):
  branch index 0 is null, 1 the value;
* a nested struct, an array and a map are themselves ``union [null, ...]``, so a field of those types is
  that one union;
* array items and map values are ``T`` unwrapped for an atomic type (Spark fails writing a null one), the
  union for a struct / array / map.

Types: boolean -> boolean; byte, short, int -> int (Spark's Avro reader refuses byte and short, so no state
holds them, but they decode); long -> long; date -> int (days since 1970-01-01); timestamp -> long
(``timestamp-micros``, UTC); timestamp_ntz -> long (``local-timestamp-micros``); float, double -> float,
double; string -> string; binary -> bytes; decimal(p, s) -> fixed of ``minBytesForPrecision(p)`` bytes
holding the unscaled value big-endian two's complement; struct -> record; array -> array; map with string
keys -> map (Spark refuses any other key type).

Avro binary encoding (facts from the Avro 1.11 specification)::

    int, long        zig-zag varint: (n << 1) ^ (n >> 63), 7 bits per byte, low groups first,
                     high bit set on all bytes but the last (at most 5 / 10 bytes)
    float, double    4 / 8 bytes little-endian IEEE 754
    boolean          one byte 0 or 1
    bytes, string    long length, then that many bytes (UTF-8 for a string)
    fixed            its size in bytes, nothing else
    record           its fields in order, nothing between them
    union            long branch index, then the value of that branch
    array, map       blocks: long count, then count items (a map item: string key, value); a negative
                     count -n is followed by a long byte size of the block, then n items; count 0 ends

Values are what :mod:`ckptfix.formats.unsaferow` gives for the same types (structs as dicts keyed by
:attr:`StructType.keys`, maps as dicts, arrays as lists, UTC-aware datetimes for ``timestamp``, naive for
``timestamp_ntz``, Decimal for decimals). Malformed or truncated data raises
:class:`~ckptfix.errors.FormatError` (kind ``bad-row``) naming the file offset, never anything else.
"""

from __future__ import annotations

import datetime as dt
import decimal
import struct
from dataclasses import dataclass
from typing import Any

from ckptfix.errors import FormatError
from ckptfix.formats.unsaferow import (
    EPOCH_DATE,
    EPOCH_NAIVE,
    EPOCH_UTC,
    ArrayType,
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
    MapType,
    NullType,
    ShortType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

F32 = struct.Struct("<f")
F64 = struct.Struct("<d")
_INT_RANGE: dict[type, tuple[int, int]] = {
    ByteType: (-(2**7), 2**7),
    ShortType: (-(2**15), 2**15),
    IntegerType: (-(2**31), 2**31),
}


# ----------------------------------------------------------------- Avro schema, as Spark derives it


@dataclass(frozen=True)
class Node:
    """One Avro type: ``kind`` is an Avro primitive or ``fixed``, ``record``, ``array``, ``map``,
    ``union``; ``spark`` is the Spark type a value converts to (None for the null branch)."""

    kind: str
    spark: DataType | None = None
    size: int = 0  # fixed
    fields: tuple[tuple[str, Node], ...] = ()  # record: (dict key, type)
    items: Node | None = None  # array items, map values
    branches: tuple[Node, ...] = ()  # union

    def describe(self) -> str:
        if self.kind == "union":
            return "union [" + ", ".join(b.describe() for b in self.branches) + "]"
        if self.kind == "fixed":
            return f"fixed({self.size})"
        if self.kind in ("array", "map"):
            assert self.items is not None
            return f"{self.kind}<{self.items.describe()}>"
        return self.kind


NULL = Node("null")
STRING = Node("string")


def min_bytes_for_precision(precision: int) -> int:
    """Spark's ``Decimal.minBytesForPrecision``: the fewest bytes whose two's complement holds 10^p - 1."""
    n = 1
    while 2 ** (8 * n - 1) < 10**precision:
        n += 1
    return n


def _atomic(t: DataType) -> Node:
    if isinstance(t, BooleanType):
        return Node("boolean", t)
    if isinstance(t, (ByteType, ShortType, IntegerType, DateType)):
        return Node("int", t)
    if isinstance(t, (LongType, TimestampType, TimestampNTZType)):
        return Node("long", t)
    if isinstance(t, FloatType):
        return Node("float", t)
    if isinstance(t, DoubleType):
        return Node("double", t)
    if isinstance(t, StringType):
        return Node("string", t)
    if isinstance(t, BinaryType):
        return Node("bytes", t)
    if isinstance(t, DecimalType):
        return Node("fixed", t, size=min_bytes_for_precision(t.precision))
    if isinstance(t, NullType):
        return Node("null", t)
    raise TypeError(type(t).__name__)


def schema_for(struct_type: StructType, path: str = "<schema>") -> Node:
    """The Avro record Spark writes a row of ``struct_type`` with (``toAvroTypeWithDefaults``). A type
    Spark's Avro state encoding cannot hold is a FormatError (kind ``bad-schema``) naming ``path``."""
    try:
        return _with_defaults(struct_type, 0)
    except TypeError as exc:
        raise FormatError(
            path,
            0,
            "types Spark's Avro state encoding holds (atomic, struct, array, map<string, _>)",
            str(exc),
            kind="bad-schema",
        ) from None


def _with_defaults(t: DataType, level: int) -> Node:
    def nullable(node: Node) -> Node:
        return Node("union", t, branches=(NULL, node))

    if isinstance(t, StructType):
        fields = []
        for key, f in zip(t.keys, t.fields, strict=True):
            inner = _with_defaults(f.data_type, level + 1)
            if not isinstance(f.data_type, NullType) and inner.kind != "union":
                inner = Node("union", f.data_type, branches=(NULL, inner))
            fields.append((key, inner))
        record = Node("record", t, fields=tuple(fields))
        return nullable(record) if level > 0 else record
    if isinstance(t, ArrayType):
        return nullable(Node("array", t, items=_with_defaults(t.element_type, level + 1)))
    if isinstance(t, MapType):
        if not isinstance(t.key_type, StringType):
            raise TypeError(f"map<{type(t.key_type).__name__}, _>")
        return nullable(Node("map", t, items=_with_defaults(t.value_type, level + 1)))
    return _atomic(t)


# ----------------------------------------------------------------- decoding


class _Reader:
    __slots__ = ("data", "end", "offset", "path", "pos")

    def __init__(self, data: bytes, path: str, offset: int) -> None:
        self.data, self.path, self.offset, self.pos, self.end = data, path, offset, 0, len(data)

    def error(self, at: int, expected: str, found: str) -> FormatError:
        return FormatError(self.path, self.offset + at, expected, found, kind="bad-row")

    def take(self, n: int, what: str) -> bytes:
        if n > self.end - self.pos:
            raise self.error(
                self.pos, f"{n} bytes of {what}", f"{self.end - self.pos} bytes before the end of the data"
            )
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def varint(self, limit: int, what: str) -> int:
        """A zig-zag varint of at most ``limit`` bytes (5: int, 10: long)."""
        start, value, shift = self.pos, 0, 0
        for i in range(limit):
            if self.pos >= self.end:
                raise self.error(start, f"{what} (an Avro zig-zag varint)", "the end of the data")
            b = self.data[self.pos]
            self.pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                break
            shift += 7
            if i == limit - 1:
                raise self.error(start, f"{what} (a varint of at most {limit} bytes)", f"more than {limit} bytes")
        return (value >> 1) ^ -(value & 1)

    def long(self, what: str) -> int:
        return self.varint(10, what)

    def count(self, what: str) -> int:
        at = self.pos
        n = self.long(what)
        if n < 0 or n > self.end - self.pos:
            raise self.error(at, f"{what} within the {self.end - self.pos} bytes left", str(n))
        return n


def decode(data: bytes, schema: Node, path: str = "<avro>", offset: int = 0) -> Any:
    """The value of one Avro datum that fills ``data`` exactly (``offset``: where ``data`` starts in the
    file, for messages)."""
    r = _Reader(data, path, offset)
    value = _read(schema, r)
    if r.pos != r.end:
        raise r.error(r.pos, f"the end of the Avro {schema.describe()}", f"{r.end - r.pos} more bytes")
    return value


def _read(node: Node, r: _Reader) -> Any:
    kind = node.kind
    if kind == "union":
        at = r.pos
        index = r.long("a union branch index")
        if not 0 <= index < len(node.branches):
            raise r.error(at, f"a branch index of {node.describe()} (0..{len(node.branches) - 1})", str(index))
        return _read(node.branches[index], r)
    if kind == "record":
        return {key: _read(child, r) for key, child in node.fields}
    if kind == "null":
        return None
    if kind == "string":
        at = r.pos
        raw = r.take(r.count("a string length"), "a string")
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise r.error(at, "a UTF-8 string", f"byte 0x{raw[exc.start]:02x} at {exc.start} of it") from None
    if kind == "long":
        at = r.pos
        return _long_value(node, r.long("a long"), r, at)
    if kind == "int":
        at = r.pos
        return _int_value(node, r.varint(5, "an int"), r, at)
    if kind == "double":
        return F64.unpack(r.take(8, "a double"))[0]
    if kind == "float":
        return F32.unpack(r.take(4, "a float"))[0]
    if kind == "boolean":
        at = r.pos
        b = r.take(1, "a boolean")[0]
        if b > 1:
            raise r.error(at, "a boolean byte 0 or 1", f"0x{b:02x}")
        return b == 1
    if kind == "bytes":
        return bytes(r.take(r.count("a bytes length"), "bytes"))
    if kind == "fixed":
        at = r.pos
        raw = r.take(node.size, f"a fixed({node.size})")
        return _decimal_value(node, int.from_bytes(raw, "big", signed=True), r, at)
    if kind == "array":
        return _blocks(node, r, False)
    if kind == "map":
        return _blocks(node, r, True)
    raise r.error(r.pos, "a known Avro type", kind)  # pragma: no cover - schema_for builds no other kind


def _blocks(node: Node, r: _Reader, is_map: bool) -> Any:
    assert node.items is not None
    out: Any = {} if is_map else []
    while True:
        at = r.pos
        n = r.long(f"the item count of an Avro {node.kind} block")
        if n == 0:
            return out
        if n < 0:
            n = -n
            r.count(f"the byte size of an Avro {node.kind} block")
        width = 1 if is_map else _min_width(node.items)
        if width and n > (r.end - r.pos) // width:
            raise r.error(at, f"an item count within the {r.end - r.pos} bytes left", str(n))
        for _ in range(n):
            if is_map:
                key_at = r.pos
                key = _read(STRING, r)
                if key in out:
                    raise r.error(key_at, "distinct map keys", repr(key)[:100])
                out[key] = _read(node.items, r)
            else:
                out.append(_read(node.items, r))


def _min_width(node: Node) -> int:
    """The fewest bytes a datum of ``node`` takes (a null: none; a record: its fields')."""
    if node.kind == "null":
        return 0
    if node.kind == "record":
        return sum(_min_width(child) for _, child in node.fields)
    return 1


def _int_value(node: Node, n: int, r: _Reader, at: int) -> Any:
    t = node.spark
    if isinstance(t, DateType):
        try:
            return EPOCH_DATE + dt.timedelta(days=n)
        except OverflowError:
            raise r.error(at, "a date Python can hold (years 1-9999)", f"{n} days since 1970-01-01") from None
    low, high = _INT_RANGE.get(type(t), _INT_RANGE[IntegerType])
    if not low <= n < high:
        raise r.error(at, f"an int in [{low}, {high})", str(n))
    return n


def _long_value(node: Node, n: int, r: _Reader, at: int) -> Any:
    t = node.spark
    if isinstance(t, (TimestampType, TimestampNTZType)):
        epoch = EPOCH_UTC if isinstance(t, TimestampType) else EPOCH_NAIVE
        try:
            return epoch + dt.timedelta(microseconds=n)
        except OverflowError:
            raise r.error(at, "a timestamp Python can hold (years 1-9999)", f"{n} µs since the epoch") from None
    if not -(2**63) <= n < 2**63:
        raise r.error(at, "a long in 64 bits", str(n))
    return n


def _decimal_value(node: Node, unscaled: int, r: _Reader, at: int) -> Any:
    t = node.spark
    if not isinstance(t, DecimalType):
        return unscaled
    if abs(unscaled) >= 10**t.precision:
        raise r.error(
            at, f"an unscaled decimal({t.precision},{t.scale}) of at most {t.precision} digits", str(unscaled)
        )
    digits = tuple(int(c) for c in str(abs(unscaled)))
    return decimal.Decimal((int(unscaled < 0), digits, -t.scale))
