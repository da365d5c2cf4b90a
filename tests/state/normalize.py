"""One hashable, comparable form for state rows from ckptfix and from Spark's ``statestore`` reader.

Both sides are walked along the Spark DataFrame's schema (the reference), then compared as multisets::

    schema = df.schema
    Counter(N.row(r, schema) for r in ours) == Counter(N.spark_row(r, schema) for r in df.collect())

Canonical values (tagged, so ``True``/``1``/``1.0`` or a date and its ISO string never compare equal):

- ``None`` -> ``None``; ``str`` -> itself; ``int`` -> itself; ``bool`` -> ``("bool", b)``
- ``float`` -> ``("float", repr(x))`` (keeps ``-0.0`` and ``nan`` apart from ``0.0``; ``nan == nan``)
- ``Decimal`` -> ``("dec", "<plain digits>")`` with trailing zeros dropped (``12.50`` == ``12.5``)
- TimestampType: aware ``datetime`` -> ``("ts", microseconds since the epoch)``. On the ckptfix side a NAIVE
  datetime is a contract violation (must be tz-aware UTC) and becomes ``("naive-ts", …)`` so it never matches.
- TimestampNTZType: naive ``datetime`` -> ``("ts_ntz", microseconds of the wall clock read as UTC)``
- ``date`` -> ``("date", "YYYY-MM-DD")``; ``bytes``/``bytearray``/``memoryview`` -> ``("bin", hex)``
- StructType -> ``("struct", ((name, value), ...))`` in FIELD ORDER. Spark's aggregation buffers repeat field
  names (``sum``, ``sum``, ``max`` …); a ckptfix dict cannot, so its names may carry a ``#<n>`` suffix
  (``sum#2``), which is dropped before comparing. A ckptfix struct may be a dict, a PySpark Row or a tuple of
  ``(name, value)`` pairs (a struct frozen to be hashable, e.g. as a map key).
- MapType -> ``("map", pairs sorted by repr)``; ArrayType -> ``("list", tuple)``
- the top-level row is matched BY COLUMN NAME (column order is asserted separately, from ``.columns``).

PySpark returns TimestampType values as NAIVE datetimes in the Python process's local time zone
(``datetime.fromtimestamp``), whatever ``spark.sql.session.timeZone`` says, and TimestampNTZType as naive
wall-clock datetimes; :func:`spark_row` converts TimestampType back to UTC exactly (``fromtimestamp`` sets
``fold`` on repeated wall-clock hours and ``timestamp()`` honours it).

:func:`normalize` is the schema-free variant (dicts of any kind sorted), for quick checks.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable
from decimal import Decimal
from typing import Any

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_DEDUP_SUFFIX = re.compile(r"#\d+\Z")


def _micros(aware: dt.datetime) -> int:
    delta = aware - EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _decimal(d: Decimal) -> str:
    if not d.is_finite():
        return str(d)
    text = format(d.normalize(), "f")
    return "0" if text in ("-0", "0") else text


def _scalar(value: Any) -> Any:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return ("float", repr(value))
    if isinstance(value, Decimal):
        return ("dec", _decimal(value))
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            return ("ts_ntz", _micros(value.replace(tzinfo=dt.timezone.utc)))
        return ("ts", _micros(value))
    if isinstance(value, dt.date):
        return ("date", value.isoformat())
    if isinstance(value, dt.time):
        return ("time", value.isoformat())
    if isinstance(value, (bytes, bytearray, memoryview)):
        return ("bin", bytes(value).hex())
    raise TypeError(f"no canonical form for {type(value).__name__}: {value!r}")


def _is_field(item: Any) -> bool:
    return type(item) is tuple and len(item) == 2 and isinstance(item[0], str)


def _is_row(value: Any) -> bool:
    return isinstance(value, tuple) and getattr(value, "__fields__", None) is not None


def normalize(value: Any) -> Any:
    """Schema-free canonical form: structs and maps alike become ``("dict", sorted pairs)``."""
    if _is_row(value):
        return ("dict", _sorted_pairs(zip(value.__fields__, value, strict=True)))
    if isinstance(value, dict):
        return ("dict", _sorted_pairs(value.items()))
    if isinstance(value, tuple) and value and all(_is_field(v) for v in value):
        return ("dict", _sorted_pairs(value))
    if isinstance(value, (list, tuple)):
        return ("list", tuple(normalize(v) for v in value))
    return _scalar(value)


def _sorted_pairs(pairs: Iterable[tuple[Any, Any]]) -> tuple[tuple[Any, Any], ...]:
    return tuple(sorted(((normalize(k), normalize(v)) for k, v in pairs), key=repr))


# ------------------------------------------------------------------------------------------ schema-directed


def _struct_items(value: Any) -> list[tuple[str, Any]] | None:
    if _is_row(value):
        return list(zip(value.__fields__, value, strict=True))
    if isinstance(value, dict):
        return list(value.items())
    if isinstance(value, tuple) and all(_is_field(v) for v in value):
        return list(value)
    return None


def _local_to_utc(value: dt.datetime) -> dt.datetime:
    """A naive datetime PySpark made with ``datetime.fromtimestamp`` (process local time) -> aware UTC."""
    if value.tzinfo is not None:
        return value.astimezone(dt.timezone.utc)
    seconds = int(value.replace(microsecond=0).timestamp())  # honours fold; exact (whole seconds)
    return dt.datetime.fromtimestamp(seconds, dt.timezone.utc).replace(microsecond=value.microsecond)


def _walk(value: Any, dtype: Any, spark: bool) -> Any:
    from pyspark.sql import types as T

    if value is None:
        return None
    if isinstance(dtype, T.StructType):
        if spark:
            items = [(f.name, v) for f, v in zip(dtype.fields, value, strict=True)]
        else:
            got = _struct_items(value)
            if got is None or len(got) != len(dtype.fields):
                return (f"not-a-struct-of-{len(dtype.fields)}", normalize(value))
            items = [(_DEDUP_SUFFIX.sub("", str(n)), v) for n, v in got]
        return (
            "struct",
            tuple((n, _walk(v, f.dataType, spark)) for (n, v), f in zip(items, dtype.fields, strict=True)),
        )
    if isinstance(dtype, T.MapType):
        if not isinstance(value, dict):
            return ("not-a-map", normalize(value))
        pairs = ((_walk(k, dtype.keyType, spark), _walk(v, dtype.valueType, spark)) for k, v in value.items())
        return ("map", tuple(sorted(pairs, key=repr)))
    if isinstance(dtype, T.ArrayType):
        if not isinstance(value, (list, tuple)):
            return ("not-a-list", normalize(value))
        return ("list", tuple(_walk(v, dtype.elementType, spark) for v in value))
    if isinstance(dtype, T.TimestampType) and isinstance(value, dt.datetime):
        if spark:
            return ("ts", _micros(_local_to_utc(value)))
        if value.tzinfo is None:
            return ("naive-ts", _micros(value.replace(tzinfo=dt.timezone.utc)))
    return _scalar(value)


def spark_row(r: Any, schema: Any) -> Any:
    """The canonical form of one PySpark Row of a DataFrame with ``schema`` (a StructType)."""
    return tuple((f.name, _walk(v, f.dataType, True)) for f, v in zip(schema.fields, r, strict=True))


def row(record: dict[str, Any], schema: Any) -> Any:
    """The canonical form of one ckptfix row (column -> value), walked along Spark's ``schema``."""
    names = [f.name for f in schema.fields]
    if set(record) != set(names):
        return ("columns", tuple(sorted(record)), normalize(record))
    return tuple((f.name, _walk(record[f.name], f.dataType, False)) for f in schema.fields)


def spark_rows(df: Any) -> list[Any]:
    """Collect ``df`` and normalise every row."""
    schema = df.schema
    return [spark_row(r, schema) for r in df.collect()]


def rows(records: Iterable[dict[str, Any]], schema: Any) -> list[Any]:
    return [row(dict(r), schema) for r in records]


__all__ = ["normalize", "row", "rows", "spark_row", "spark_rows"]
