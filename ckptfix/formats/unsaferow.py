"""Spark ``UnsafeRow`` bytes <-> Python values, typed by a Spark schema (StructType JSON).

All words inside an UnsafeRow are **little-endian** (Spark writes them with ``Platform.put*``,
native order on every platform Spark runs on) -- unlike the big-endian framing of the files
around them. Layouts (facts from Spark's UnsafeRow / UnsafeArrayData / UnsafeMapData)::

    row    = null bitset (ceil(n/64) 8-byte words; field i null <=> bit i%64 of word i/64)
             n 8-byte slots, then the variable-length region
    slot   = a fixed-width value in its first bytes (boolean/byte 1, short 2,
             int/date/float 4, long/timestamp/double/decimal(p<=18) 8; the rest zero)
             or (offset << 32 | size) with offset from the start of THIS row
    array  = int64 numElements, null bitset ceil(n/64)*8 bytes,
             element region roundUp8(n * elementSize), variable-length data;
             elementSize as in a slot, 8 (= offset << 32 | size, offset from the array
             start) for variable-length elements
    map    = int64 keyArraySizeInBytes, key array, value array (the rest)

Variable-length values: string (UTF-8), binary, decimal with precision > 18
(``BigInteger.toByteArray()``: big-endian two's complement; a row reserves 16 bytes for it,
an array only the 8-aligned length), struct (a nested UnsafeRow), array, map. Every piece
of variable-length data is zero-padded to a multiple of 8.

Python values are what PySpark shows: int, float, str, bytes, bool, Decimal, date,
datetime (UTC-aware for ``timestamp``, naive for ``timestamp_ntz``), list, dict, a dict
for a struct, None for null. Struct dicts are keyed by :attr:`StructType.keys` (field names;
a repeated name, as in aggregate buffers ``first, valueSet, first, valueSet``, gets
``#<field index>``). A ``void`` value is None even where the schema says non-nullable.
Map keys must be hashable, so a struct key becomes a tuple of its field values and an array
key a tuple (the encoder takes tuples for structs and arrays anywhere). Strings keep bytes
that are not UTF-8 as lone surrogates (``surrogateescape``) so they encode back unchanged.
A null map key or a repeated map key is a ``bad-row`` (Spark never writes either).

Spark-compatible leniency: a boolean byte other than 0 reads as True, the unused high bytes
of a slot are not checked (Spark never reads them), and a null bit set on a non-nullable
field reads as None. Everything that would make Spark read out of bounds or build a value
from garbage is a :class:`~ckptfix.errors.FormatError` (kinds ``bad-row``,
``out-of-bounds``, ``bad-value``); decoding never raises anything else.
"""

from __future__ import annotations

import datetime as dt
import decimal
import functools
import json
import re
import struct
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ckptfix.errors import FormatError
from ckptfix.formats.text import json_expected, loads

# ----------------------------------------------------------------- byte layouts (little-endian)

WORD = struct.Struct("<q")  # slots, array element counts, map key-array sizes
UWORD = struct.Struct("<Q")
BOOL = struct.Struct("<?")
I8 = struct.Struct("<b")
I16 = struct.Struct("<h")
I32 = struct.Struct("<i")
I64 = struct.Struct("<q")
F32 = struct.Struct("<f")
F64 = struct.Struct("<d")
WORD_SIZE = 8
MAX_LONG_DIGITS = 18  # Decimal.MAX_LONG_DIGITS: precision up to this is stored inline
LARGE_DECIMAL_BYTES = 16  # bytes a row reserves for a decimal with precision > 18
MAX_ARRAY_ELEMENTS = 2**31 - 1 - 15  # ByteArrayMethods.MAX_ROUNDED_ARRAY_LENGTH

EPOCH_DATE = dt.date(1970, 1, 1)
EPOCH_UTC = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
EPOCH_NAIVE = dt.datetime(1970, 1, 1)

# ----------------------------------------------------------------- the type model


@dataclass(frozen=True)
class DataType(ABC):
    """Base of the Spark types. ``fixed`` is the width of a fixed-width value (in a row slot
    and as an array element); ``None`` means variable-length (an 8-byte offset/size word)."""

    @property
    def fixed(self) -> int | None:
        return None

    @abstractmethod
    def json_value(self) -> Any:
        """The type as Spark's StructType JSON writes it."""


@dataclass(frozen=True)
class _Atomic(DataType):
    _NAME: ClassVar[str] = ""
    _WIDTH: ClassVar[int | None] = None

    @property
    def fixed(self) -> int | None:
        return self._WIDTH

    def json_value(self) -> Any:
        return self._NAME


@dataclass(frozen=True)
class NullType(_Atomic):
    _NAME = "void"
    _WIDTH = 8  # never read: a NullType value is always null


@dataclass(frozen=True)
class BooleanType(_Atomic):
    _NAME, _WIDTH = "boolean", 1


@dataclass(frozen=True)
class ByteType(_Atomic):
    _NAME, _WIDTH = "byte", 1


@dataclass(frozen=True)
class ShortType(_Atomic):
    _NAME, _WIDTH = "short", 2


@dataclass(frozen=True)
class IntegerType(_Atomic):
    _NAME, _WIDTH = "integer", 4


@dataclass(frozen=True)
class LongType(_Atomic):
    _NAME, _WIDTH = "long", 8


@dataclass(frozen=True)
class FloatType(_Atomic):
    _NAME, _WIDTH = "float", 4


@dataclass(frozen=True)
class DoubleType(_Atomic):
    _NAME, _WIDTH = "double", 8


@dataclass(frozen=True)
class DateType(_Atomic):
    _NAME, _WIDTH = "date", 4


@dataclass(frozen=True)
class TimestampType(_Atomic):
    _NAME, _WIDTH = "timestamp", 8


@dataclass(frozen=True)
class TimestampNTZType(_Atomic):
    _NAME, _WIDTH = "timestamp_ntz", 8


@dataclass(frozen=True)
class StringType(_Atomic):
    """``collation`` is kept from 4.x JSON ``"string collate <name>"`` (bytes are the same)."""

    collation: str | None = None
    _NAME = "string"

    def json_value(self) -> Any:
        return "string" if self.collation is None else f"string collate {self.collation}"


@dataclass(frozen=True)
class BinaryType(_Atomic):
    _NAME = "binary"


@dataclass(frozen=True)
class DecimalType(DataType):
    precision: int = 10
    scale: int = 0

    @property
    def fixed(self) -> int | None:
        return 8 if self.precision <= MAX_LONG_DIGITS else None

    def json_value(self) -> Any:
        return f"decimal({self.precision},{self.scale})"


@dataclass(frozen=True)
class ArrayType(DataType):
    element_type: DataType
    contains_null: bool = True

    def json_value(self) -> Any:
        return {"type": "array", "elementType": self.element_type.json_value(), "containsNull": self.contains_null}


@dataclass(frozen=True)
class MapType(DataType):
    key_type: DataType
    value_type: DataType
    value_contains_null: bool = True

    def json_value(self) -> Any:
        return {
            "type": "map",
            "keyType": self.key_type.json_value(),
            "valueType": self.value_type.json_value(),
            "valueContainsNull": self.value_contains_null,
        }


@dataclass(frozen=True)
class StructField:
    name: str
    data_type: DataType
    nullable: bool = True
    #: column metadata as written (e.g. ``spark.watermarkDelayMs``); not part of equality
    metadata: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def json_value(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.data_type.json_value(),
            "nullable": self.nullable,
            "metadata": dict(self.metadata),
        }


@dataclass(frozen=True)
class StructType(DataType):
    fields: tuple[StructField, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields)

    @property
    def keys(self) -> tuple[str, ...]:
        """The dict keys of a decoded row: the field names, except that a name seen before
        gets ``#<field index>`` (aggregate buffers repeat ``first``/``valueSet``)."""
        seen: set[str] = set()
        out: list[str] = []
        for i, name in enumerate(self.names):
            key = name if name not in seen else f"{name}#{i}"
            seen.add(key)
            out.append(key)
        return tuple(out)

    def json_value(self) -> dict[str, Any]:
        return {"type": "struct", "fields": [f.json_value() for f in self.fields]}

    def json(self) -> str:
        return json.dumps(self.json_value(), separators=(",", ":"))


def same_layout(a: DataType, b: DataType) -> bool:
    """Whether two types store values the same way: Spark's state schema check compares stored and new
    schemas by position, ignoring field names and widening nullability (StateSchemaCompatibilityChecker); the
    bytes do not depend on names or nullability either. Collations do not change the bytes."""
    if isinstance(a, StructType) and isinstance(b, StructType):
        return len(a.fields) == len(b.fields) and all(
            same_layout(x.data_type, y.data_type) for x, y in zip(a.fields, b.fields, strict=True)
        )
    if isinstance(a, ArrayType) and isinstance(b, ArrayType):
        return same_layout(a.element_type, b.element_type)
    if isinstance(a, MapType) and isinstance(b, MapType):
        return same_layout(a.key_type, b.key_type) and same_layout(a.value_type, b.value_type)
    if isinstance(a, StringType) and isinstance(b, StringType):
        return True
    return a == b


def simple_string(t: DataType) -> str:
    """A type as Spark DDL, e.g. ``struct<k:string,cnt:bigint>`` (for messages)."""
    if isinstance(t, StructType):
        return "struct<" + ",".join(f"{f.name}:{simple_string(f.data_type)}" for f in t.fields) + ">"
    if isinstance(t, ArrayType):
        return f"array<{simple_string(t.element_type)}>"
    if isinstance(t, MapType):
        return f"map<{simple_string(t.key_type)},{simple_string(t.value_type)}>"
    value = t.json_value()
    return {"long": "bigint", "integer": "int", "short": "smallint", "byte": "tinyint"}.get(value, value)


_ATOMIC: dict[str, DataType] = {
    t.json_value(): t
    for t in (
        BooleanType(),
        ByteType(),
        ShortType(),
        IntegerType(),
        LongType(),
        FloatType(),
        DoubleType(),
        DateType(),
        TimestampType(),
        TimestampNTZType(),
        StringType(),
        BinaryType(),
        NullType(),
    )
}
_ATOMIC["null"] = NullType()  # the name before Spark 3.0
_DECIMAL = re.compile(r"decimal\(\s*(\d+)\s*,\s*(-?\d+)\s*\)\Z")
_COLLATED = re.compile(r"string collate (\S+)\Z")
MAX_PRECISION = 38


def parse_type(obj: Any, path: str = "<schema>") -> DataType:
    """A Spark type from its JSON value (``DataType.jsonValue``). Unknown or malformed types
    raise FormatError (kinds ``unsupported-type``, ``bad-schema``) at offset 0."""

    def bad(expected: str, found: Any, kind: str = "bad-schema") -> FormatError:
        return FormatError(path, 0, expected, repr(found)[:200], kind=kind)

    if isinstance(obj, str):
        if obj in _ATOMIC:
            return _ATOMIC[obj]
        if obj == "decimal":
            return DecimalType()
        m = _DECIMAL.match(obj)
        if m:
            p, s = int(m.group(1)), int(m.group(2))
            if not (1 <= p <= MAX_PRECISION and 0 <= s <= p):
                raise bad("a decimal with 1 <= precision <= 38 and 0 <= scale <= precision", obj)
            return DecimalType(p, s)
        m = _COLLATED.match(obj)
        if m:
            return StringType(m.group(1))
        raise bad("a Spark type ckptfix can decode", obj, kind="unsupported-type")
    if not isinstance(obj, dict):
        raise bad("a type name or a JSON object", obj)
    kind = obj.get("type")
    try:
        if kind == "struct":
            fields_json = obj["fields"]
            if not isinstance(fields_json, list):
                raise bad("a list of struct fields", fields_json)
            fields: list[StructField] = []
            for f in fields_json:
                if not (
                    isinstance(f, dict) and isinstance(f["name"], str) and isinstance(f.get("nullable", True), bool)
                ):
                    raise bad("a struct field {name, type, nullable, metadata}", f)
                meta = f.get("metadata", {})
                if not isinstance(meta, dict):
                    raise bad("field metadata as a JSON object", meta)
                fields.append(StructField(f["name"], parse_type(f["type"], path), f.get("nullable", True), meta))
            return StructType(tuple(fields))
        if kind == "array":
            return ArrayType(parse_type(obj["elementType"], path), _flag(obj, "containsNull", path))
        if kind == "map":
            return MapType(
                parse_type(obj["keyType"], path),
                parse_type(obj["valueType"], path),
                _flag(obj, "valueContainsNull", path),
            )
    except KeyError as exc:
        raise bad(f"a {kind} type with key {exc.args[0]!r}", obj) from None
    raise bad("a struct, array or map type", obj, kind="unsupported-type")


#: type names ``DataType.fromJson`` takes on Spark 3.5.9-4.3.0 (recorded: tests/fixtures/datatype_json.json)
_SPARK_NAMES = frozenset(_ATOMIC) | {"decimal", "timestamp_ltz", "interval", "variant"}
#: name families some Spark version takes (decimal, char/varchar, ANSI intervals, collations 4.0+, time 4.1+,
#: geospatial 4.1+): whether one is valid depends on its arguments and the version, which this check leaves alone
_SPARK_FAMILIES = re.compile(
    r"(decimal|char|varchar|time|geometry|geography)\s*\(|interval |string collate |geometry\Z|geography\Z"
)
#: the exact key sets of the JSON objects ``DataType.parseDataType`` / ``parseStructField`` match (json4s
#: ``JSortedObject``: no key more, none less)
_SPARK_OBJECTS = {
    "array": frozenset({"type", "elementType", "containsNull"}),
    "map": frozenset({"type", "keyType", "valueType", "valueContainsNull"}),
    "struct": frozenset({"type", "fields"}),
}
_UDT_KEYS = (
    frozenset({"type", "class", "pyClass", "sqlType"}),
    frozenset({"type", "pyClass", "serializedClass", "sqlType"}),
)
_FIELD_KEYS = (frozenset({"name", "type", "nullable", "metadata"}), frozenset({"name", "type", "nullable"}))


def spark_json_rejects(obj: Any) -> Any | None:
    """The part of a type's JSON value that Spark's ``DataType.fromJson`` fails on (``Failed to convert the JSON
    string '<it>' to a data type``, recorded on 3.5.9-4.3.0), or None: Spark reads it, or whether it does depends
    on what this check does not decide (a decimal's precision, a collation's name, the Spark version)."""
    if isinstance(obj, str):
        return None if obj in _SPARK_NAMES or _SPARK_FAMILIES.match(obj) else obj
    if not isinstance(obj, dict):
        return obj
    kind, keys = obj.get("type"), frozenset(obj)
    if kind == "udt" and keys in _UDT_KEYS:
        return None
    if not isinstance(kind, str) or _SPARK_OBJECTS.get(kind) != keys:
        return obj
    if kind in ("array", "map"):
        if not isinstance(obj["containsNull" if kind == "array" else "valueContainsNull"], bool):
            return obj
        for inner_type in (obj["elementType"],) if kind == "array" else (obj["keyType"], obj["valueType"]):
            inner = spark_json_rejects(inner_type)
            if inner is not None:
                return inner
        return None
    if not isinstance(obj["fields"], list):
        return obj
    for f in obj["fields"]:
        if (
            not isinstance(f, dict)
            or frozenset(f) not in _FIELD_KEYS
            or not isinstance(f["name"], str)
            or not isinstance(f["nullable"], bool)
            or not isinstance(f.get("metadata", {}), dict)
        ):
            return f
        inner = spark_json_rejects(f["type"])
        if inner is not None:
            return inner
    return None


def spark_json_message(rejected: Any, spark4: bool = True) -> str:
    """Spark's message for a value :func:`spark_json_rejects` names (recorded): ``Failed to convert the JSON string
    '<it>' to a data type.``, on 3.5 ``... to a field.`` for a struct field; the value as json4s renders it
    (``compact(render(...))``: a string as it is, anything else as compact JSON, keys in the file's order)."""
    field = not spark4 and isinstance(rejected, dict) and ("name" in rejected or "nullable" in rejected)
    return f"Failed to convert the JSON string '{spark_json_text(rejected)}' to a {'field' if field else 'data type'}."


def spark_json_text(value: Any) -> str:
    """A JSON value as json4s ``compact(render(...))`` shows it: a string as it is, anything else as compact JSON."""
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _flag(obj: dict[str, Any], key: str, path: str) -> bool:
    value = obj.get(key, True)
    if not isinstance(value, bool):
        raise FormatError(path, 0, f"{key} as a boolean", repr(value), kind="bad-schema")
    return value


def parse_schema(obj: Mapping[str, Any] | str, path: str = "<schema>") -> StructType:
    """A StructType from schema JSON (text or already parsed, e.g. ``SchemaV2.key_schema``)."""
    if isinstance(obj, str):
        text = obj
        try:
            obj = loads(text)
        except json.JSONDecodeError as exc:
            raise FormatError(path, 0, f"schema JSON ({json_expected(exc)})", text[:200], kind="invalid-json") from None
    t = parse_type(obj, path)
    if not isinstance(t, StructType):
        raise FormatError(path, 0, "a struct type", repr(obj)[:200], kind="bad-schema")
    return t


# ----------------------------------------------------------------- decoding


@dataclass(frozen=True)
class _Ctx:
    data: bytes
    path: str
    origin: int  # absolute offset of data[0]

    def error(self, pos: int, expected: str, found: str, kind: str) -> FormatError:
        return FormatError(self.path, self.origin + pos, expected, found, kind=kind)


@dataclass(frozen=True)
class _Region:
    """A row or array being decoded: data[start:end]; variable data must lie in [var_start, end)."""

    start: int
    var_start: int
    end: int
    what: str


def _round8(n: int) -> int:
    return (n + 7) & ~7


def _bitset_bytes(n: int) -> int:
    return ((n + 63) // 64) * WORD_SIZE


def _is_null(ctx: _Ctx, bitset_at: int, i: int) -> bool:
    return bool(ctx.data[bitset_at + i // 8] >> (i % 8) & 1)


def _var_bytes(ctx: _Ctx, region: _Region, pos: int) -> tuple[int, int]:
    """(absolute start, size) of the variable-length value whose offset/size word is at pos."""
    (word,) = UWORD.unpack_from(ctx.data, pos)
    rel, size = word >> 32, word & 0xFFFFFFFF
    start = region.start + rel
    if start < region.var_start or start > region.end:
        raise ctx.error(
            pos,
            f"an offset into the variable-length region of the {region.what} "
            f"({region.var_start - region.start}..{region.end - region.start})",
            str(rel),
            "out-of-bounds",
        )
    if size > region.end - start:
        raise ctx.error(
            pos,
            f"a size within the {region.end - start} bytes after offset {rel} of the {region.what}",
            str(size),
            "out-of-bounds",
        )
    return start, size


@functools.singledispatch
def _decode(t: DataType, ctx: _Ctx, region: _Region, pos: int) -> Any:
    """The value of type ``t`` whose slot / element starts at ``pos``."""
    raise TypeError(f"cannot decode {type(t).__name__}")


@_decode.register
def _(t: NullType, ctx: _Ctx, region: _Region, pos: int) -> Any:
    return None


@_decode.register
def _(t: BooleanType, ctx: _Ctx, region: _Region, pos: int) -> Any:
    return ctx.data[pos] != 0


def _fixed_int(fmt: struct.Struct) -> Any:
    def decode(t: DataType, ctx: _Ctx, region: _Region, pos: int) -> Any:
        return fmt.unpack_from(ctx.data, pos)[0]

    return decode


#: the fixed-width types stored as one little-endian number (booleans decode apart: any byte != 0)
_NUMBERS: dict[type[DataType], struct.Struct] = {
    ByteType: I8,
    ShortType: I16,
    IntegerType: I32,
    LongType: I64,
    FloatType: F32,
    DoubleType: F64,
}
for _type, _fmt in _NUMBERS.items():
    _decode.register(_type, _fixed_int(_fmt))


@_decode.register
def _(t: DateType, ctx: _Ctx, region: _Region, pos: int) -> Any:
    (days,) = I32.unpack_from(ctx.data, pos)
    try:
        return EPOCH_DATE + dt.timedelta(days=days)
    except OverflowError:
        raise ctx.error(
            pos, "a date Python can hold (years 1-9999)", f"{days} days since 1970-01-01", "bad-value"
        ) from None


def _micros(epoch: dt.datetime, ctx: _Ctx, pos: int) -> dt.datetime:
    (micros,) = I64.unpack_from(ctx.data, pos)
    try:
        return epoch + dt.timedelta(microseconds=micros)
    except OverflowError:
        raise ctx.error(
            pos, "a timestamp Python can hold (years 1-9999)", f"{micros} µs since the epoch", "bad-value"
        ) from None


@_decode.register
def _(t: TimestampType, ctx: _Ctx, region: _Region, pos: int) -> Any:
    return _micros(EPOCH_UTC, ctx, pos)


@_decode.register
def _(t: TimestampNTZType, ctx: _Ctx, region: _Region, pos: int) -> Any:
    return _micros(EPOCH_NAIVE, ctx, pos)


@_decode.register
def _(t: StringType, ctx: _Ctx, region: _Region, pos: int) -> Any:
    start, size = _var_bytes(ctx, region, pos)
    return ctx.data[start : start + size].decode("utf-8", "surrogateescape")


@_decode.register
def _(t: BinaryType, ctx: _Ctx, region: _Region, pos: int) -> Any:
    start, size = _var_bytes(ctx, region, pos)
    return bytes(ctx.data[start : start + size])


def _to_decimal(unscaled: int, t: DecimalType, ctx: _Ctx, pos: int) -> decimal.Decimal:
    if abs(unscaled) >= 10**t.precision:
        raise ctx.error(pos, f"an unscaled value with at most {t.precision} digits", str(unscaled), "bad-value")
    digits = tuple(int(c) for c in str(abs(unscaled)))
    return decimal.Decimal((int(unscaled < 0), digits, -t.scale))


@_decode.register
def _(t: DecimalType, ctx: _Ctx, region: _Region, pos: int) -> Any:
    if t.precision <= MAX_LONG_DIGITS:
        return _to_decimal(I64.unpack_from(ctx.data, pos)[0], t, ctx, pos)
    start, size = _var_bytes(ctx, region, pos)
    if not 1 <= size <= LARGE_DECIMAL_BYTES:
        raise ctx.error(
            pos, f"1 to {LARGE_DECIMAL_BYTES} bytes of a decimal({t.precision},{t.scale})", str(size), "bad-row"
        )
    return _to_decimal(int.from_bytes(ctx.data[start : start + size], "big", signed=True), t, ctx, pos)


@_decode.register
def _(t: StructType, ctx: _Ctx, region: _Region, pos: int) -> Any:
    start, size = _var_bytes(ctx, region, pos)
    return _decode_struct(t, ctx, start, size)


@_decode.register
def _(t: ArrayType, ctx: _Ctx, region: _Region, pos: int) -> Any:
    start, size = _var_bytes(ctx, region, pos)
    return _decode_array(t.element_type, ctx, start, size)


@_decode.register
def _(t: MapType, ctx: _Ctx, region: _Region, pos: int) -> Any:
    start, size = _var_bytes(ctx, region, pos)
    if size < WORD_SIZE:
        raise ctx.error(start, "a map of at least 8 bytes (the key array size)", f"{size} bytes", "bad-row")
    (key_size,) = WORD.unpack_from(ctx.data, start)
    if not 0 <= key_size <= size - WORD_SIZE:
        raise ctx.error(start, f"a key array size between 0 and {size - WORD_SIZE}", str(key_size), "bad-row")
    keys_at = start + WORD_SIZE
    keys = _decode_array(t.key_type, ctx, keys_at, key_size)
    values = _decode_array(t.value_type, ctx, keys_at + key_size, size - WORD_SIZE - key_size)
    if len(keys) != len(values):
        raise ctx.error(start, f"as many values as keys ({len(keys)})", f"{len(values)} values", "bad-row")
    out: dict[Any, Any] = {}
    for k, v in zip(keys, values, strict=True):
        if k is None:
            raise ctx.error(keys_at, "map keys that are not null", "a null key", "bad-row")
        key = _freeze(k)
        if key in out:
            raise ctx.error(keys_at, "distinct map keys", repr(key)[:100], "bad-row")
        out[key] = v
    return out


def _freeze(value: Any) -> Any:
    """A hashable form of a decoded value (struct -> tuple, array -> tuple)."""
    if isinstance(value, dict):
        return tuple(_freeze(v) for v in value.values())
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


def _decode_struct(t: StructType, ctx: _Ctx, start: int, size: int) -> dict[str, Any]:
    n = len(t.fields)
    bitset = _bitset_bytes(n)
    fixed = bitset + n * WORD_SIZE
    if size % WORD_SIZE:
        raise ctx.error(start, "a row length that is a multiple of 8", f"{size} bytes", "bad-row")
    if size < fixed:
        raise ctx.error(start, f"a row of at least {fixed} bytes (bitset + {n} slots)", f"{size} bytes", "bad-row")
    region = _Region(start, start + fixed, start + size, "row")
    out: dict[str, Any] = {}
    for i, (key, f) in enumerate(zip(t.keys, t.fields, strict=True)):
        slot = start + bitset + i * WORD_SIZE
        out[key] = None if _is_null(ctx, start, i) else _decode(f.data_type, ctx, region, slot)
    return out


def _decode_array(element: DataType, ctx: _Ctx, start: int, size: int) -> list[Any]:
    if size < WORD_SIZE:
        raise ctx.error(start, "an array of at least 8 bytes (the element count)", f"{size} bytes", "bad-row")
    (n,) = WORD.unpack_from(ctx.data, start)
    if not 0 <= n <= MAX_ARRAY_ELEMENTS:
        raise ctx.error(start, f"an element count between 0 and {MAX_ARRAY_ELEMENTS}", str(n), "bad-row")
    width = element.fixed or WORD_SIZE
    header = WORD_SIZE + _bitset_bytes(n)
    fixed = header + _round8(n * width)
    if fixed > size:
        raise ctx.error(
            start, f"an array of {n} elements in its {size} bytes", f"{fixed} bytes of header and elements", "bad-row"
        )
    region = _Region(start, start + fixed, start + size, "array")
    bitset_at = start + WORD_SIZE
    return [
        None if _is_null(ctx, bitset_at, i) else _decode(element, ctx, region, start + header + i * width)
        for i in range(n)
    ]


class _Slow(Exception):
    """The fast path met something it does not judge: the careful decoder decides."""


_FAST_CODES: dict[type, str] = {
    BooleanType: "?7x",  # any non-zero byte reads as True, as in Spark
    ByteType: "b7x",
    ShortType: "h6x",
    IntegerType: "i4x",
    DateType: "i4x",
    FloatType: "f4x",
    LongType: "q",
    TimestampType: "q",
    TimestampNTZType: "q",
    DoubleType: "d",
    NullType: "8x",
    StringType: "Q",
    BinaryType: "Q",
}


def _fast_var(fixed: int) -> Any:
    def bounds(word: int, data: bytes) -> tuple[int, int]:
        start, size = word >> 32, word & 0xFFFFFFFF
        if start < fixed or start + size > len(data):
            raise _Slow
        return start, size

    return bounds


_COMPILED: dict[int, tuple[StructType, Any]] = {}


def _compiled(schema: StructType) -> Any:
    """The compiled decoder of ``schema``, cached by identity (hashing a schema per row costs
    more than decoding it)."""
    hit = _COMPILED.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1]
    if len(_COMPILED) > 1024:
        _COMPILED.clear()
    fn = _compile(schema)
    _COMPILED[id(schema)] = (schema, fn)
    return fn


def _compile(schema: StructType) -> Any:
    """A decoder for rows of ``schema`` that unpacks every fixed slot with one precompiled
    ``struct`` call. It handles top-level atomic fields itself, hands nested and large values
    to the careful decoder field by field, and gives up (``_Slow``) on anything suspicious so
    that the careful decoder reports it with its exact offset."""
    n = len(schema.fields)
    nb = _bitset_bytes(n)
    fixed = nb + n * WORD_SIZE
    codes: list[str] = []
    post: list[tuple[int, Any]] = []
    bounds = _fast_var(fixed)
    for i, f in enumerate(schema.fields):
        t = f.data_type
        code = _FAST_CODES.get(type(t))
        if isinstance(t, DecimalType) and t.precision <= MAX_LONG_DIGITS:
            code = "q"
            limit, scale = 10**t.precision, t.scale

            def dec(v: int, data: bytes, limit: int = limit, scale: int = scale) -> Any:
                if abs(v) >= limit:
                    raise _Slow
                return decimal.Decimal((int(v < 0), tuple(int(c) for c in str(abs(v))), -scale))

            post.append((i, dec))
        elif code is None:  # struct, array, map, large decimal, anything else: the careful way
            code = "8x"
            post.append((i, ("careful", t, nb + i * WORD_SIZE)))
        elif isinstance(t, StringType):

            def text(v: int, data: bytes) -> Any:
                start, size = bounds(v, data)
                return data[start : start + size].decode("utf-8", "surrogateescape")

            post.append((i, text))
        elif isinstance(t, BinaryType):

            def binary(v: int, data: bytes) -> Any:
                start, size = bounds(v, data)
                return data[start : start + size]

            post.append((i, binary))
        elif isinstance(t, DateType):
            post.append((i, lambda v, data: EPOCH_DATE + dt.timedelta(days=v)))
        elif isinstance(t, TimestampType):
            post.append((i, lambda v, data: EPOCH_UTC + dt.timedelta(microseconds=v)))
        elif isinstance(t, TimestampNTZType):
            post.append((i, lambda v, data: EPOCH_NAIVE + dt.timedelta(microseconds=v)))
        codes.append(code)
    slots = struct.Struct("<" + "".join(codes))
    # fields whose code is "8x" yield no value: map struct results back to field indexes
    positions = [i for i, c in enumerate(codes) if c != "8x"]
    keys = schema.keys

    def decode(data: bytes, path: str, offset: int) -> dict[str, Any]:
        size = len(data)
        if size < fixed or size % WORD_SIZE:
            raise _Slow
        values: list[Any] = [None] * n
        for i, v in zip(positions, slots.unpack_from(data, nb), strict=True):
            values[i] = v
        bits = int.from_bytes(data[:nb], "little")
        for i, conv in post:
            if bits >> i & 1:
                continue
            if isinstance(conv, tuple):
                _, t, pos = conv
                values[i] = _decode(t, _Ctx(data, path, offset), _Region(0, fixed, size, "row"), pos)
            else:
                try:
                    values[i] = conv(values[i], data)
                except (OverflowError, ValueError):
                    raise _Slow from None
        if bits:
            for i in range(n):
                if bits >> i & 1:
                    values[i] = None
        return dict(zip(keys, values, strict=True))

    return decode


def decode_row(data: bytes, schema: StructType, path: str = "<row>", offset: int = 0) -> dict[str, Any]:
    """The field values of the UnsafeRow ``data`` (exactly one row, all of it).

    ``offset`` is where ``data`` starts in the file, so errors point at file offsets.
    """
    data = bytes(data)
    try:
        result: dict[str, Any] = _compiled(schema)(data, path, offset)
        return result
    except _Slow:
        return _careful_row(data, schema, path, offset)


def _careful_row(data: bytes, schema: StructType, path: str, offset: int) -> dict[str, Any]:
    """Field by field, every bound checked: the reference the fast path must agree with."""
    ctx = _Ctx(data, path, offset)
    return _decode_struct(schema, ctx, 0, len(ctx.data))


def trim_value(data: bytes) -> bytes:
    """What Spark's HDFS provider reads of a value: the first ``floor(len/8)*8`` bytes
    (a pre-2.3 writer appended 4 garbage bytes). Keys are used as they are."""
    return data[: len(data) // WORD_SIZE * WORD_SIZE]


# ----------------------------------------------------------------- RocksDB prefixes

STATE_ENCODING_VERSION = 0
CF_ID = struct.Struct("<h")  # virtual column family id, native (little-endian) order


def split_rocksdb(
    data: bytes, column_family: bool = False, path: str = "<row>", offset: int = 0
) -> tuple[int | None, bytes]:
    """(column family id or None, UnsafeRow bytes) of a RocksDB key or single value written
    by ``NoPrefixKeyStateEncoder`` / the single-value encoder: ``[int16 LE cfId] 0x00 row``.

    Prefix/range-scan keys and list values have more framing and are not handled here.
    """
    cf: int | None = None
    pos = 0
    if column_family:
        if len(data) < CF_ID.size:
            raise FormatError(path, offset, "a 2-byte column family id", f"{len(data)} bytes", kind="bad-row")
        (cf,) = CF_ID.unpack_from(data, 0)
        pos = CF_ID.size
    if len(data) <= pos:
        raise FormatError(path, offset + pos, "the state encoding version byte", "the end of the data", kind="bad-row")
    if data[pos] != STATE_ENCODING_VERSION:
        raise FormatError(
            path, offset + pos, f"state encoding version {STATE_ENCODING_VERSION}", str(data[pos]), kind="bad-row"
        )
    return cf, data[pos + 1 :]


# ----------------------------------------------------------------- encoding


@dataclass
class _Out:
    """Bytes of one row or array: the fixed part, then variable data appended at ``len(buf)``."""

    buf: bytearray

    def append(self, payload: bytes, reserve: int | None = None) -> int:
        """Append zero-padded data; return the (offset << 32 | size) word for it."""
        at = len(self.buf)
        self.buf += payload
        self.buf += bytes(_round8(max(len(payload), reserve or 0)) - len(payload))
        return (at << 32) | len(payload)


@functools.singledispatch
def _encode(t: DataType, value: Any, out: _Out, pos: int, in_row: bool) -> None:
    """Write ``value`` (not None) of type ``t`` into the slot / element at ``pos``."""
    raise TypeError(f"cannot encode {type(t).__name__}")


def _put_fixed(fmt: struct.Struct) -> Any:
    def encode(t: DataType, value: Any, out: _Out, pos: int, in_row: bool) -> None:
        fmt.pack_into(out.buf, pos, value)

    return encode


#: the types a row keeps in its 8-byte slot alone (decimal(p <= 18) too, by precision: see :func:`fixed_width`)
FIXED_WIDTH_TYPES = (
    NullType,
    BooleanType,
    ByteType,
    ShortType,
    IntegerType,
    LongType,
    FloatType,
    DoubleType,
    DateType,
    TimestampType,
    TimestampNTZType,
)


def fixed_width(t: DataType) -> bool:
    """Whether a value of ``t`` lives in its slot alone (no variable-length region)."""
    return isinstance(t, FIXED_WIDTH_TYPES) or (isinstance(t, DecimalType) and t.precision <= 18)


_FIXED_WIDTH: dict[type[DataType], struct.Struct] = {**_NUMBERS, BooleanType: BOOL}
for _type, _fmt in _FIXED_WIDTH.items():
    _encode.register(_type, _put_fixed(_fmt))


@_encode.register
def _(t: NullType, value: Any, out: _Out, pos: int, in_row: bool) -> None:
    raise ValueError(f"a void/null field holds only None, got {value!r}")


@_encode.register
def _(t: DateType, value: Any, out: _Out, pos: int, in_row: bool) -> None:
    I32.pack_into(out.buf, pos, (value - EPOCH_DATE).days)


def _delta_micros(delta: dt.timedelta) -> int:
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


@_encode.register
def _(t: TimestampType, value: Any, out: _Out, pos: int, in_row: bool) -> None:
    if value.tzinfo is None:
        raise ValueError(f"timestamp values must be timezone-aware, got {value!r}")
    I64.pack_into(out.buf, pos, _delta_micros(value - EPOCH_UTC))


@_encode.register
def _(t: TimestampNTZType, value: Any, out: _Out, pos: int, in_row: bool) -> None:
    if value.tzinfo is not None:
        raise ValueError(f"timestamp_ntz values must be naive, got {value!r}")
    I64.pack_into(out.buf, pos, _delta_micros(value - EPOCH_NAIVE))


def _put_var(out: _Out, pos: int, payload: bytes, reserve: int | None = None) -> None:
    UWORD.pack_into(out.buf, pos, out.append(payload, reserve))


@_encode.register
def _(t: StringType, value: Any, out: _Out, pos: int, in_row: bool) -> None:
    _put_var(out, pos, value.encode("utf-8", "surrogateescape"))


@_encode.register
def _(t: BinaryType, value: Any, out: _Out, pos: int, in_row: bool) -> None:
    _put_var(out, pos, bytes(value))


def _unscaled(t: DecimalType, value: decimal.Decimal) -> int:
    sign, digits, exponent = decimal.Decimal(value).as_tuple()
    if not isinstance(exponent, int):
        raise ValueError(f"decimal({t.precision},{t.scale}) cannot hold {value!r}")
    magnitude = int("".join(map(str, digits)) or "0")
    shift = exponent + t.scale
    if shift >= 0:
        magnitude *= 10**shift
    elif magnitude % 10**-shift:
        raise ValueError(f"{value!r} has more than {t.scale} fractional digits")
    else:
        magnitude //= 10**-shift
    if magnitude >= 10**t.precision:
        raise ValueError(f"{value!r} does not fit decimal({t.precision},{t.scale})")
    return -magnitude if sign else magnitude


@_encode.register
def _(t: DecimalType, value: Any, out: _Out, pos: int, in_row: bool) -> None:
    unscaled = _unscaled(t, value)
    if t.precision <= MAX_LONG_DIGITS:
        I64.pack_into(out.buf, pos, unscaled)
        return
    payload = unscaled.to_bytes(unscaled.bit_length() // 8 + 1, "big", signed=True)  # = toByteArray()
    _put_var(out, pos, payload, LARGE_DECIMAL_BYTES if in_row else None)


@_encode.register
def _(t: StructType, value: Any, out: _Out, pos: int, in_row: bool) -> None:
    _put_var(out, pos, _encode_struct(t, value))


@_encode.register
def _(t: ArrayType, value: Any, out: _Out, pos: int, in_row: bool) -> None:
    _put_var(out, pos, _encode_array(t.element_type, t.contains_null, value))


@_encode.register
def _(t: MapType, value: Any, out: _Out, pos: int, in_row: bool) -> None:
    keys = _encode_array(t.key_type, False, list(value.keys()))
    values = _encode_array(t.value_type, t.value_contains_null, list(value.values()))
    _put_var(out, pos, WORD.pack(len(keys)) + keys + values)


def _encode_struct(t: StructType, values: Any) -> bytes:
    n = len(t.fields)
    if isinstance(values, Mapping):
        keys = t.keys
        missing = [name for name in keys if name not in values]
        extra = [k for k in values if k not in keys]
        if missing or extra:
            raise ValueError(f"row fields {list(keys)}: missing {missing}, unexpected {extra}")
        items = [values[name] for name in keys]
    elif isinstance(values, Sequence) and not isinstance(values, (str, bytes)):
        if len(values) != n:
            raise ValueError(f"a struct of {n} fields, got {len(values)} values")
        items = list(values)
    else:
        raise TypeError(f"a struct value must be a mapping or a sequence, got {type(values).__name__}")
    bitset = _bitset_bytes(n)
    out = _Out(bytearray(bitset + n * WORD_SIZE))
    for i, (f, v) in enumerate(zip(t.fields, items, strict=True)):
        if v is None:
            if not f.nullable and not isinstance(f.data_type, NullType):
                raise ValueError(f"field {f.name!r} is not nullable")
            out.buf[i // 8] |= 1 << (i % 8)
            if isinstance(f.data_type, DecimalType) and f.data_type.fixed is None:
                # Spark keeps the 16-byte reservation (offset set, size 0) of a null large decimal
                UWORD.pack_into(out.buf, bitset + i * WORD_SIZE, out.append(b"", LARGE_DECIMAL_BYTES))
        else:
            _encode(f.data_type, v, out, bitset + i * WORD_SIZE, True)
    return bytes(out.buf)


def _encode_array(element: DataType, contains_null: bool, values: Any) -> bytes:
    items = list(values)
    n = len(items)
    width = element.fixed or WORD_SIZE
    header = WORD_SIZE + _bitset_bytes(n)
    out = _Out(bytearray(header + _round8(n * width)))
    WORD.pack_into(out.buf, 0, n)
    for i, v in enumerate(items):
        if v is None:
            if not contains_null and not isinstance(element, NullType):
                raise ValueError(f"element {i} is None in an array that holds no nulls")
            out.buf[WORD_SIZE + i // 8] |= 1 << (i % 8)
        else:
            _encode(element, v, out, header + i * width, False)
    return bytes(out.buf)


def encode_row(values: Mapping[str, Any] | Sequence[Any], schema: StructType) -> bytes:
    """UnsafeRow bytes of ``values`` (a dict by field name, or values in field order)."""
    return _encode_struct(schema, values)
