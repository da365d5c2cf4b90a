"""What ``state delete`` / ``state put`` are given, checked against the stored schemas before anything is
planned: key and row files (JSON lines or Parquet) and ``--where`` expressions over key columns.

Rows have the shape ``ckptfix state read`` prints: ``{"key": {...}, "value": {...}}`` (a ``partition_id``
is allowed and ignored), so ``state read | grep ... > keys.jsonl`` feeds ``state delete``. A key file may
also hold bare key objects (``{"key": "a"}`` for a key column named ``key`` is a bare key: a ``key`` that
is not an object is a column). Parquet: a struct column ``key`` (and ``value``), as ``state read -f
parquet`` writes, or one top-level column per key field.

Values are typed strictly by the Spark type: JSON numbers for numeric types (no strings, no bools; an
integer must fit the type; a decimal must fit precision and scale without rounding), ``"NaN"``/``"nan"``/
``"Infinity"``/``"inf"`` for non-finite floats, base64 for binary, ``YYYY-MM-DD`` dates, ISO 8601
timestamps (with ``Z`` or an offset for ``timestamp``, without for ``timestamp_ntz``), objects with
exactly the struct's fields (a missing or unknown field is refused), ``null`` only where the schema
allows it. Every refusal is one :class:`~ckptfix.errors.UsageError` naming the file, the line (or
Parquet row) and the field, with what was expected and what was found.

``--where`` grammar (no Python is evaluated)::

    where := cond ( AND cond )*
    cond  := column = literal | column != literal | column IN ( literal, ... ) | column IS [NOT] NULL
    column:= name ( . name )*           a key column; dots reach into struct key columns; `quoted`
    literal := 'text' ('' for a quote) | number | true | false

A literal is typed like a JSON value of the column's type ('...' for strings, dates, timestamps,
decimals may also be written as numbers).
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import decimal
import json
import math
import re
import struct
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from ckptfix.errors import MissingExtra, UsageError
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
    simple_string,
)
from ckptfix.state.export import repeated_names

_INT_RANGE: dict[type, int] = {ByteType: 8, ShortType: 16, IntegerType: 32, LongType: 64}
_NON_FINITE = {"nan": math.nan, "infinity": math.inf, "inf": math.inf, "-infinity": -math.inf, "-inf": -math.inf}
FLOAT32_MAX = 3.4028234663852886e38


class Bad(Exception):
    """A value that does not fit (caught and turned into a UsageError with the place)."""

    def __init__(self, field: str, expected: str, found: Any) -> None:
        self.field, self.expected, self.found = field, expected, found
        super().__init__(field)


def _show(value: Any) -> str:
    text = json.dumps(value, default=str, ensure_ascii=False) if not isinstance(value, bytes) else repr(value)
    kind = "null" if value is None else type(value).__name__
    return f"{text[:60]} ({kind})" if value is not None else "null"


_F32 = struct.Struct("<f")


def coerce(value: Any, t: DataType, nullable: bool, field: str) -> Any:
    """``value`` (from JSON or Parquet) as the Python value :mod:`unsaferow` encodes for type ``t``."""
    if value is None:
        if not nullable and not isinstance(t, NullType):
            raise Bad(field, f"a {simple_string(t)} (the field is not nullable)", "null")
        return None
    if isinstance(t, NullType):
        raise Bad(field, "null (void type)", _show(value))
    if isinstance(t, BooleanType):
        if not isinstance(value, bool):
            raise Bad(field, "boolean", _show(value))
        return value
    if type(t) in _INT_RANGE:
        bits = _INT_RANGE[type(t)]
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            else:
                raise Bad(field, f"{simple_string(t)} (an integer)", _show(value))
        if not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
            raise Bad(field, f"{simple_string(t)} in [{-(2 ** (bits - 1))}, {2 ** (bits - 1) - 1}]", _show(value))
        return value
    if isinstance(t, (FloatType, DoubleType)):
        if isinstance(value, str) and value.lower() in _NON_FINITE:
            return _NON_FINITE[value.lower()]
        if isinstance(value, bool) or not isinstance(value, (int, float, decimal.Decimal)):
            raise Bad(field, f"{simple_string(t)} (a number)", _show(value))
        f = float(value)
        if isinstance(t, FloatType) and math.isfinite(f):
            if abs(f) > FLOAT32_MAX:
                raise Bad(field, "float within +-3.4028235e38", _show(value))
            # the float32 the column holds: `state read` prints 0.33333334, whose float64 is not the stored value
            # (hunt 11, F3: such keys were "not in the state")
            f = _F32.unpack(_F32.pack(f))[0]
        return f
    if isinstance(t, DecimalType):
        return _decimal(value, t, field)
    if isinstance(t, StringType):
        if not isinstance(value, str):
            raise Bad(field, "string", _show(value))
        return value
    if isinstance(t, BinaryType):
        if isinstance(value, (bytes, bytearray)):
            return bytes(value)
        if not isinstance(value, str):
            raise Bad(field, "binary (base64 text)", _show(value))
        try:
            return base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise Bad(field, "binary (base64 text)", _show(value)) from None
    if isinstance(t, DateType):
        return _date(value, field)
    if isinstance(t, (TimestampType, TimestampNTZType)):
        return _timestamp(value, isinstance(t, TimestampType), field)
    if isinstance(t, StructType):
        return coerce_struct(value, t, field)
    if isinstance(t, ArrayType):
        if not isinstance(value, (list, tuple)):
            raise Bad(field, f"{simple_string(t)} (a list)", _show(value))
        return [coerce(v, t.element_type, t.contains_null, f"{field}[{i}]") for i, v in enumerate(value)]
    if isinstance(t, MapType):
        return _map(value, t, field)
    raise Bad(field, "a type ckptfix can write", simple_string(t))


def _decimal(value: Any, t: DecimalType, field: str) -> decimal.Decimal:
    if isinstance(value, bool) or not isinstance(value, (int, float, str, decimal.Decimal)):
        raise Bad(field, f"{simple_string(t)} (a number)", _show(value))
    try:
        d = decimal.Decimal(str(value)) if not isinstance(value, decimal.Decimal) else value
    except decimal.InvalidOperation:
        raise Bad(field, f"{simple_string(t)} (a number)", _show(value)) from None
    if not d.is_finite():
        raise Bad(field, f"a finite {simple_string(t)}", _show(value))
    q = d.quantize(decimal.Decimal(1).scaleb(-t.scale), context=decimal.Context(prec=100))
    digits = len(q.as_tuple().digits) if q != 0 else 1
    if q != d or digits - 0 > t.precision:
        raise Bad(field, f"{simple_string(t)} (at most {t.precision} digits, {t.scale} after the point)", _show(value))
    return q


def _date(value: Any, field: str) -> dt.date:
    if isinstance(value, dt.datetime):
        raise Bad(field, "date (YYYY-MM-DD)", _show(value))
    if isinstance(value, dt.date):
        return value
    if isinstance(value, str):
        try:
            return dt.date.fromisoformat(value)
        except ValueError:
            pass
    raise Bad(field, "date (YYYY-MM-DD)", _show(value))


def _timestamp(value: Any, with_zone: bool, field: str) -> dt.datetime:
    expected = "timestamp (ISO 8601 with Z or an offset)" if with_zone else "timestamp_ntz (ISO 8601, no zone)"
    parsed: dt.datetime | None = None
    if isinstance(value, dt.datetime):
        parsed = value
    elif isinstance(value, str):
        try:
            parsed = dt.datetime.fromisoformat(value[:-1] + "+00:00" if value.endswith("Z") else value)
        except ValueError:
            parsed = None
    if parsed is None or (parsed.tzinfo is not None) != with_zone:
        raise Bad(field, expected, _show(value))
    return parsed.astimezone(dt.timezone.utc) if with_zone else parsed


def _map(value: Any, t: MapType, field: str) -> dict[Any, Any]:
    pairs: list[tuple[Any, Any]]
    if isinstance(value, Mapping):
        pairs = list(value.items())
    elif isinstance(value, list) and all(isinstance(e, Mapping) and set(e) == {"key", "value"} for e in value):
        pairs = [(e["key"], e["value"]) for e in value]
    else:
        raise Bad(field, f"{simple_string(t)} (an object, or a list of key/value objects)", _show(value))
    out: dict[Any, Any] = {}
    for k, v in pairs:
        key = coerce(k, t.key_type, False, f"{field} key")
        key = tuple(key.values()) if isinstance(key, dict) else (tuple(key) if isinstance(key, list) else key)
        if key in out:
            raise Bad(field, "distinct map keys", _show(k))
        out[key] = coerce(v, t.value_type, t.value_contains_null, f"{field}[{k!r}]")
    return out


def coerce_struct(value: Any, t: StructType, field: str) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise Bad(field, f"an object with fields {', '.join(t.keys)}", _show(value))
    unknown = [k for k in value if k not in t.keys]
    if unknown:
        raise Bad(f"{field}.{unknown[0]}", f"one of the fields {', '.join(t.keys)}", "an unknown column")
    missing = [k for k in t.keys if k not in value]
    if missing:
        raise Bad(f"{field}.{missing[0]}", "the field (every field must be given, null where nullable)", "none")
    return {k: coerce(value[k], f.data_type, f.nullable, f"{field}.{k}") for k, f in zip(t.keys, t.fields, strict=True)}


def shown(key: Mapping[str, Any]) -> str:
    """A decoded key for a message (JSON, cut at 80 characters)."""
    return json.dumps(key, default=str, ensure_ascii=False)[:80]


# ------------------------------------------------------------------------------------------------ files


@dataclass(frozen=True)
class InputRow:
    where: str  # "keys.jsonl: line 3"
    key: dict[str, Any]
    value: dict[str, Any] | None


def _refuse(where: str, bad: Bad) -> UsageError:
    return UsageError(f"{where}: {bad.field}: expected {bad.expected}, found {bad.found}")


def _raw_rows(path: str) -> Iterator[tuple[str, Any]]:
    """(place, object) per row of a JSON lines or Parquet file (Parquet by its magic bytes)."""
    try:
        with open(path, "rb") as f:
            head = f.read(4)
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if head == b"PAR1":
        yield from _parquet_rows(path)
        return
    if path.lower().endswith(".parquet"):  # new-user trial: "line 1: expected a JSON object" for a bad .parquet
        raise UsageError(f"{path}: at byte 0: expected a Parquet file (magic PAR1), found {head!r}")
    with open(path, encoding="utf-8", errors="strict") as f:
        try:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line, parse_float=decimal.Decimal, object_pairs_hook=repeated_names)
                except json.JSONDecodeError as exc:
                    raise UsageError(
                        f"{path}: line {n}: expected a JSON object, found invalid JSON ({exc.msg})"
                    ) from None
                yield f"{path}: line {n}", obj
        except UnicodeDecodeError as exc:
            raise UsageError(
                f"{path}: at byte {exc.start}: expected UTF-8 JSON lines or Parquet, found other bytes"
            ) from None


def _parquet_rows(path: str) -> Iterator[tuple[str, Any]]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise MissingExtra("pyarrow", "arrow") from None
    try:
        table = pq.read_table(path)
    except Exception as exc:  # noqa: BLE001 - pyarrow raises many kinds; one line is what the user gets
        raise UsageError(f"{path}: expected a Parquet file, found one pyarrow cannot read ({exc})") from None
    for i, row in enumerate(table.to_pylist()):
        yield f"{path}: row {i}", row


def _key_of(obj: Any, key: StructType) -> Any:
    """The key of a row as `state read` prints it, or a bare key object. ``{"key": {...}}`` is a row, unless the
    key schema has a struct column ``key`` and the object names exactly the key columns."""
    if isinstance(obj, Mapping) and isinstance(obj.get("key"), Mapping):
        col = key.fields[key.keys.index("key")] if "key" in key.keys else None
        if col is None or not isinstance(col.data_type, StructType) or set(obj) != set(key.keys):
            return obj["key"]
    return obj


def read_keys(path: str, key: StructType) -> list[InputRow]:
    out = []
    for where, obj in _raw_rows(path):
        try:
            typed = coerce_struct(_key_of(obj, key), key, "key")
        except Bad as bad:
            raise _refuse(where, bad) from None
        out.append(InputRow(where, typed, None))
    if not out:
        raise UsageError(f"{path}: expected at least one key, found none")
    return out


def read_rows(path: str, key: StructType, value: StructType) -> list[InputRow]:
    out = []
    for where, obj in _raw_rows(path):
        if not isinstance(obj, Mapping) or "key" not in obj or "value" not in obj:
            shown = ", ".join(obj) if isinstance(obj, Mapping) else type(obj).__name__
            raise UsageError(
                f"{where}: expected an object with 'key' and 'value' (as `ckptfix state read` prints), found {shown}"
            )
        extra = [k for k in obj if k not in ("key", "value", "partition_id")]
        if extra:
            raise UsageError(f"{where}: {extra[0]}: expected only key, value and partition_id, found an unknown column")
        try:
            typed_key = coerce_struct(obj["key"], key, "key")
            typed_value = coerce_struct(obj["value"], value, "value")
        except Bad as bad:
            raise _refuse(where, bad) from None
        out.append(InputRow(where, typed_key, typed_value))
    if not out:
        raise UsageError(f"{path}: expected at least one row, found none")
    return out


# ------------------------------------------------------------------------------------------------ --where

_TOKEN = re.compile(
    r"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<num>-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)|(?P<quoted>`(?:[^`]|``)+`)"
    r"|(?P<op>!=|<>|<=|>=|==|=|<|>|\(|\)|,|\.)|(?P<word>[A-Za-z_][A-Za-z0-9_#$]*))"
)
#: the comparisons --where supports, as its errors list them (ranges are not among them: keys are matched exactly)
OPERATORS = "=, !=, <>, IN (...), IS NULL, IS NOT NULL"


def _tokens(text: str) -> list[tuple[str, str, int]]:
    out, pos = [], 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            pos = len(text) - len(text[pos:].lstrip())
            raise UsageError(
                f"--where: at character {pos}: expected a column, an operator ({OPERATORS}, AND) or a literal, "
                f"found {text[pos : pos + 20]!r}"
            )
        kind = m.lastgroup or ""
        out.append((kind, m.group(kind), m.start(kind)))
        pos = m.end()
    return out


Predicate = Callable[[dict[str, Any]], bool]


def parse_where(text: str, key: StructType) -> Predicate:
    """A predicate over decoded keys; literals typed by the key schema. Unknown columns are refused."""
    toks = _tokens(text)
    i = 0

    def peek() -> tuple[str, str, int] | None:
        return toks[i] if i < len(toks) else None

    def take(expected: str) -> tuple[str, str, int]:
        nonlocal i
        tok = peek()
        if tok is None:
            raise UsageError(f"--where: expected {expected}, found the end of the expression")
        i += 1
        return tok

    def word(tok: tuple[str, str, int] | None, *names: str) -> bool:
        return tok is not None and tok[0] == "word" and tok[1].upper() in names

    def column() -> tuple[list[str], DataType, bool]:
        # `state read` shows a row's key under "key" ({"key":{"key":2}}): its path key.<column> names the column
        # too. Tried first; a key struct whose own column is a struct named "key" still resolves the plain path
        nonlocal i
        start = i
        tok = peek()
        nxt = toks[i + 1] if i + 1 < len(toks) else None
        if tok is not None and tok[:2] == ("word", "key") and nxt is not None and nxt[:2] == ("op", "."):
            i += 2
            try:
                return key_path(["key"])
            except UsageError as exc:
                i = start
                try:
                    return key_path([])
                except UsageError:
                    raise exc from None
        return key_path([])

    def key_path(shown: list[str]) -> tuple[list[str], DataType, bool]:
        """The column path (``shown``: the prefix the user wrote before it, for the error)."""
        tok = take("a key column")
        path: list[str] = []
        t: DataType = key
        nullable = False
        while True:
            if tok[0] not in ("word", "quoted"):
                raise UsageError(f"--where: at character {tok[2]}: expected a key column, found {tok[1]!r}")
            name = tok[1][1:-1].replace("``", "`") if tok[0] == "quoted" else tok[1]
            if not isinstance(t, StructType) or name not in t.keys:
                have = ", ".join(t.keys) if isinstance(t, StructType) else f"a {simple_string(t)}, not a struct"
                where = ".".join(path) or "the key"
                raise UsageError(
                    f"--where: {'.'.join([*shown, *path, name])}: expected a column of {where} ({have}), "
                    "found an unknown column"
                )
            f = t.fields[t.keys.index(name)]
            path.append(name)
            t, nullable = f.data_type, f.nullable
            nxt = peek()
            if nxt is not None and nxt[0] == "op" and nxt[1] == ".":
                take(".")
                tok = take("a field name")
                continue
            return path, t, nullable

    def literal(t: DataType, name: str) -> Any:
        tok = take("a literal")
        if tok[0] == "str":
            raw: Any = tok[1][1:-1].replace("''", "'")
        elif tok[0] == "num":
            raw = int(tok[1]) if re.fullmatch(r"-?\d+", tok[1]) else decimal.Decimal(tok[1])
        elif word(tok, "TRUE", "FALSE"):
            raw = tok[1].upper() == "TRUE"
        else:
            raise UsageError(
                f"--where: at character {tok[2]}: expected a literal ('text', a number, true/false), found {tok[1]!r}"
            )
        try:
            return coerce(raw, t, False, name)
        except Bad as bad:
            raise UsageError(f"--where: {bad.field}: expected {bad.expected}, found {bad.found}") from None

    def condition() -> Predicate:
        path, t, _nullable = column()
        name = ".".join(path)
        tok = take(f"one of {OPERATORS}")

        def get(k: dict[str, Any]) -> Any:
            v: Any = k
            for p in path:
                v = v[p] if isinstance(v, dict) else None
            return v

        if tok[0] == "op" and tok[1] in ("=", "==", "!=", "<>"):
            lit = literal(t, name)
            if tok[1] in ("=", "=="):  # == as in Spark SQL
                return lambda k: _same(get(k), lit)
            return lambda k: get(k) is not None and not _same(get(k), lit)
        if word(tok, "IN"):
            if take("(")[1] != "(":
                raise UsageError(f"--where: {name} IN: expected '(' after IN")
            values = [literal(t, name)]
            while True:
                sep = take("',' or ')'")
                if sep[1] == ")":
                    break
                if sep[1] != ",":
                    raise UsageError(f"--where: at character {sep[2]}: expected ',' or ')', found {sep[1]!r}")
                values.append(literal(t, name))
            return lambda k: any(_same(get(k), v) for v in values)
        if word(tok, "IS"):
            negate = word(peek(), "NOT")
            if negate:
                take("NOT")
            if not word(take("NULL"), "NULL"):
                raise UsageError(f"--where: {name} IS: expected NULL or NOT NULL")
            return (lambda k: get(k) is not None) if negate else (lambda k: get(k) is None)
        raise UsageError(
            f"--where: at character {tok[2]}: expected one of {OPERATORS} after {name}, found {tok[1]!r}"
            + (" (no ranges: list the keys with IN)" if tok[1] in ("<", ">", "<=", ">=") else "")
        )

    preds = [condition()]
    while peek() is not None:
        if not word(take("AND"), "AND"):
            raise UsageError(
                f"--where: at character {toks[i - 1][2]}: expected AND (conditions are joined with AND; "
                f"use IN for alternatives), found {toks[i - 1][1]!r}"
            )
        preds.append(condition())
    return lambda k: all(p(k) for p in preds)


def _same(a: Any, b: Any) -> bool:
    """Equality of two values of one column (NaN equals NaN, as in Spark's grouping)."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return bool(a == b)
