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


# ----------------------------------------------------------------- in bulk (numpy)


def _np_mix_k1(k1: Any, np: Any) -> Any:
    k1 = k1 * np.uint32(_C1)
    k1 = (k1 << np.uint32(15)) | (k1 >> np.uint32(17))
    return k1 * np.uint32(_C2)


def _np_mix_h1(h1: Any, k1: Any, np: Any) -> Any:
    h1 = h1 ^ k1
    h1 = (h1 << np.uint32(13)) | (h1 >> np.uint32(19))
    return h1 * np.uint32(5) + np.uint32(0xE6546B64)


def _np_fmix(h1: Any, length: Any, np: Any) -> Any:
    h1 = h1 ^ length
    h1 = h1 ^ (h1 >> np.uint32(16))
    h1 = h1 * np.uint32(0x85EBCA6B)
    h1 = h1 ^ (h1 >> np.uint32(13))
    h1 = h1 * np.uint32(0xC2B2AE35)
    return h1 ^ (h1 >> np.uint32(16))


def _np_hash_int(values: Any, seed: Any, np: Any) -> Any:
    return _np_fmix(_np_mix_h1(seed, _np_mix_k1(values.astype(np.uint32), np), np), np.uint32(4), np)


def _np_hash_long(values: Any, seed: Any, np: Any) -> Any:
    u = values.astype(np.int64).view(np.uint64)
    low, high = (u & np.uint64(_MASK)).astype(np.uint32), (u >> np.uint64(32)).astype(np.uint32)
    h1 = _np_mix_h1(seed, _np_mix_k1(low, np), np)
    h1 = _np_mix_h1(h1, _np_mix_k1(high, np), np)
    return _np_fmix(h1, np.uint32(8), np)


def _np_hash_bytes(data: Any, starts: Any, lens: Any, seed: Any, np: Any) -> Any:
    """``hashUnsafeBytes`` of the byte ranges ``data[starts[i] : starts[i] + lens[i]]`` (``data`` a uint8 array),
    each with its own seed: the rows are visited longest first, so word ``w`` is mixed into a prefix of them."""
    n = len(starts)
    order = np.argsort(-lens, kind="stable")
    s, ln, h = starts[order], lens[order], seed[order].copy()
    words = ln // 4
    for w in range(int(words[0]) if n else 0):
        m = int(np.searchsorted(-words, -w, side="left"))  # the rows with more than w words come first
        at = s[:m] + 4 * w
        k = (
            data[at].astype(np.uint32)
            | (data[at + 1].astype(np.uint32) << np.uint32(8))
            | (data[at + 2].astype(np.uint32) << np.uint32(16))
            | (data[at + 3].astype(np.uint32) << np.uint32(24))
        )
        h[:m] = _np_mix_h1(h[:m], _np_mix_k1(k, np), np)
    tail = ln % 4
    for t in range(3):
        m = tail > t
        if m.any():
            b = data[s[m] + 4 * words[m] + t].view(np.int8).astype(np.int32).view(np.uint32)
            h[m] = _np_mix_h1(h[m], _np_mix_k1(b, np), np)
    h = _np_fmix(h, ln.astype(np.uint32), np)
    out = np.empty_like(h)
    out[order] = h
    return out


def _np_column(column: Any, t: DataType, seed: Any, np: Any, pa: Any) -> Any | None:
    """The running hash ``seed`` (uint32 per row) after the values of one Arrow column of Spark type ``t``; None
    for a type this does not hash in bulk (arrays, maps, decimals over 18 digits)."""
    n = len(column)
    if isinstance(t, NullType) or n == 0:
        return seed
    valid = column.is_valid().to_numpy(zero_copy_only=False) if column.null_count else None
    if isinstance(t, StructType):
        h = seed
        for i, f in enumerate(t.fields):
            h = _np_column(column.field(i), f.data_type, h, np, pa)
            if h is None:
                return None
        return h if valid is None else np.where(valid, h, seed)
    buffers = column.buffers()
    if isinstance(t, (StringType, BinaryType)):
        offsets = np.frombuffer(buffers[1], dtype=np.int32, count=column.offset + n + 1)[column.offset :]
        data = np.frombuffer(buffers[2], dtype=np.uint8) if buffers[2] is not None else np.zeros(0, np.uint8)
        starts, lens = offsets[:-1].astype(np.int64), np.diff(offsets).astype(np.int64)
        h = _np_hash_bytes(data, starts, lens, seed, np)
    elif isinstance(t, DecimalType):
        if t.fixed is None or not pa.types.is_decimal128(column.type):
            return None
        unscaled = np.frombuffer(buffers[1], dtype="<i8").reshape(-1, 2)[column.offset : column.offset + n, 0]
        h = _np_hash_long(unscaled, seed, np)
    elif isinstance(t, BooleanType):
        bits = np.unpackbits(np.frombuffer(buffers[1], dtype=np.uint8), bitorder="little")
        h = _np_hash_int(bits[column.offset : column.offset + n].astype(np.int32), seed, np)
    else:
        width: dict[type, int] = {ByteType: 1, ShortType: 2, IntegerType: 4, DateType: 4, FloatType: 4, LongType: 8}
        width[DoubleType] = 8
        size = width.get(type(t), 8 if isinstance(t, (TimestampType, TimestampNTZType)) else 0)
        if not size or column.type.bit_width != 8 * size:
            return None
        kind = {1: np.int8, 2: np.int16, 4: np.int32, 8: np.int64}[size]
        raw = np.frombuffer(buffers[1], dtype=kind, count=column.offset + n)[column.offset :]
        if isinstance(t, FloatType):
            f = raw.view(np.float32)
            bits = np.where(f == 0.0, 0, np.where(np.isnan(f), _CANONICAL_NAN_FLOAT, raw))
            h = _np_hash_int(bits.astype(np.int32), seed, np)
        elif isinstance(t, DoubleType):
            d = raw.view(np.float64)
            bits = np.where(d == 0.0, 0, np.where(np.isnan(d), _CANONICAL_NAN_DOUBLE, raw))
            h = _np_hash_long(bits.astype(np.int64), seed, np)
        elif size == 8:
            h = _np_hash_long(raw, seed, np)
        else:
            h = _np_hash_int(raw.astype(np.int32), seed, np)
    return h if valid is None else np.where(valid, h, seed)


def hash_columns(columns: Sequence[Any], schema: StructType, seed: int = SEED) -> Any | None:
    """:func:`hash_row` of every row of Arrow ``columns`` (one per field of ``schema``, as
    :func:`ckptfix.state.decode.decode_columns` gives them), computed column by column with numpy: an int32
    array. None where a column's type is not hashed in bulk (then hash row by row); None without numpy/pyarrow."""
    try:
        import numpy as np
        import pyarrow as pa
    except ImportError:
        return None
    n = len(columns[0]) if columns else 0
    h: Any = np.full(n, seed & _MASK, dtype=np.uint32)
    with np.errstate(over="ignore"):
        for column, f in zip(columns, schema.fields, strict=True):
            h = _np_column(column, f.data_type, h, np, pa)
            if h is None:
                return None
    return h.view(np.int32)
