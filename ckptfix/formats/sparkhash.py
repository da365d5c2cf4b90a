"""Spark's ``Murmur3Hash`` (the SQL ``hash()`` function, seed 42) over typed values, and the
partition ``HashPartitioning`` gives a row: ``pmod(hash(key columns), numPartitions)``.

Facts from Spark's ``Murmur3_x86_32`` and ``InterpretedHashFunction.hash`` (catalyst
``hash.scala``): the columns are hashed in order, each with the previous result as seed; a
null leaves the seed unchanged; boolean/byte/short/int/date hash as an int (``hashInt``),
long/timestamp/timestamp_ntz as a long (``hashLong``: low word, then high word); a float
``-0.0`` hashes as int 0, otherwise as ``floatToIntBits`` (every NaN as ``0x7fc00000``); a
double ``-0.0`` as long 0, otherwise as ``doubleToLongBits``; a decimal of precision <= 18 as
its unscaled long, a wider one as the bytes of ``BigInteger.toByteArray``; strings (UTF-8)
and binaries through ``hashUnsafeBytes`` -- 4-byte little-endian words, then each trailing
byte on its own as a signed int (Spark's legacy tail, not standard Murmur3); structs,
arrays and maps field by field / element by element / key then value. All arithmetic is on
32-bit words.
"""

from __future__ import annotations

import datetime as dt
import decimal
import struct
from collections.abc import Mapping, Sequence
from typing import Any

from ckptfix.formats.unsaferow import (
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

SEED = 42
_C1, _C2 = 0xCC9E2D51, 0x1B873593
_MASK = 0xFFFFFFFF
_LE_INT = struct.Struct("<i")
_FLOAT_BITS = struct.Struct(">f")
_DOUBLE_BITS = struct.Struct(">d")
_EPOCH_DATE = dt.date(1970, 1, 1)
_EPOCH_UTC = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_EPOCH_NAIVE = dt.datetime(1970, 1, 1)
_CANONICAL_NAN_FLOAT = 0x7FC00000
_CANONICAL_NAN_DOUBLE = 0x7FF8000000000000


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _MASK


def _mix_k1(k1: int) -> int:
    k1 = (k1 * _C1) & _MASK
    k1 = _rotl(k1, 15)
    return (k1 * _C2) & _MASK


def _mix_h1(h1: int, k1: int) -> int:
    h1 ^= k1
    h1 = _rotl(h1, 13)
    return (h1 * 5 + 0xE6546B64) & _MASK


def _fmix(h1: int, length: int) -> int:
    h1 ^= length
    h1 ^= h1 >> 16
    h1 = (h1 * 0x85EBCA6B) & _MASK
    h1 ^= h1 >> 13
    h1 = (h1 * 0xC2B2AE35) & _MASK
    return h1 ^ (h1 >> 16)


def _signed(h: int) -> int:
    return h - (1 << 32) if h & 0x80000000 else h


def hash_int(value: int, seed: int) -> int:
    return _signed(_fmix(_mix_h1(seed & _MASK, _mix_k1(value & _MASK)), 4))


def hash_long(value: int, seed: int) -> int:
    low, high = value & _MASK, (value >> 32) & _MASK
    h1 = _mix_h1(seed & _MASK, _mix_k1(low))
    h1 = _mix_h1(h1, _mix_k1(high))
    return _signed(_fmix(h1, 8))


def hash_bytes(data: bytes, seed: int) -> int:
    """``Murmur3_x86_32.hashUnsafeBytes`` (the legacy tail: one mix per trailing byte)."""
    aligned = len(data) - len(data) % 4
    h1 = seed & _MASK
    for i in range(0, aligned, 4):
        h1 = _mix_h1(h1, _mix_k1(_LE_INT.unpack_from(data, i)[0] & _MASK))
    for i in range(aligned, len(data)):
        b = data[i] - 256 if data[i] > 127 else data[i]
        h1 = _mix_h1(h1, _mix_k1(b & _MASK))
    return _signed(_fmix(h1, len(data)))


def _unscaled(value: Any, t: DecimalType) -> int:
    d = decimal.Decimal(value)
    return int(d.scaleb(t.scale).to_integral_value(rounding=decimal.ROUND_HALF_UP))


def _java_bytes(n: int) -> bytes:
    """``BigInteger.toByteArray``: big-endian two's complement, minimal length."""
    length = (n + (n < 0)).bit_length() // 8 + 1
    return n.to_bytes(length, "big", signed=True)


def hash_value(value: Any, t: DataType, seed: int) -> int:
    """The hash of one value of type ``t`` (a decoded value as :mod:`unsaferow` gives it)."""
    if value is None or isinstance(t, NullType):
        return seed
    if isinstance(t, BooleanType):
        return hash_int(1 if value else 0, seed)
    if isinstance(t, (ByteType, ShortType, IntegerType)):
        return hash_int(int(value), seed)
    if isinstance(t, LongType):
        return hash_long(int(value), seed)
    if isinstance(t, DateType):
        return hash_int((value - _EPOCH_DATE).days, seed)
    if isinstance(t, (TimestampType, TimestampNTZType)):
        epoch = _EPOCH_UTC if value.tzinfo is not None else _EPOCH_NAIVE
        delta = value - epoch
        return hash_long((delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds, seed)
    if isinstance(t, FloatType):
        f = float(value)
        if f == 0.0:  # -0.0 and 0.0 alike
            return hash_int(0, seed)
        bits = _CANONICAL_NAN_FLOAT if f != f else struct.unpack(">i", _FLOAT_BITS.pack(f))[0]
        return hash_int(bits, seed)
    if isinstance(t, DoubleType):
        d = float(value)
        if d == 0.0:
            return hash_long(0, seed)
        bits = _CANONICAL_NAN_DOUBLE if d != d else struct.unpack(">q", _DOUBLE_BITS.pack(d))[0]
        return hash_long(bits, seed)
    if isinstance(t, DecimalType):
        unscaled = _unscaled(value, t)
        if t.fixed is not None:
            return hash_long(unscaled, seed)
        return hash_bytes(_java_bytes(unscaled), seed)
    if isinstance(t, StringType):
        data = value.encode("utf-8", "surrogateescape") if isinstance(value, str) else bytes(value)
        return hash_bytes(data, seed)
    if isinstance(t, BinaryType):
        return hash_bytes(bytes(value), seed)
    if isinstance(t, StructType):
        return hash_row(value, t, seed)
    if isinstance(t, ArrayType):
        for item in value:
            seed = hash_value(item, t.element_type, seed)
        return seed
    if isinstance(t, MapType):
        for k, v in value.items():
            seed = hash_value(k, t.key_type, seed)
            seed = hash_value(v, t.value_type, seed)
        return seed
    raise TypeError(f"no Spark hash for {type(t).__name__}")


def hash_row(values: Mapping[str, Any] | Sequence[Any], schema: StructType, seed: int = SEED) -> int:
    """``hash(col1, col2, ...)`` of a row (a dict keyed by :attr:`StructType.keys`, or values in order)."""
    items = [values[k] for k in schema.keys] if isinstance(values, Mapping) else list(values)
    for f, v in zip(schema.fields, items, strict=True):
        seed = hash_value(v, f.data_type, seed)
    return seed


def partition_of(values: Mapping[str, Any] | Sequence[Any], schema: StructType, num_partitions: int) -> int:
    """The shuffle partition ``HashPartitioning`` gives the row: ``pmod(hash(row), n)``."""
    return hash_row(values, schema) % num_partitions
