"""Write state rows as JSON lines, CSV or Parquet, streaming (rows are never all held).

JSON follows Spark's ``to_json`` conventions where JSON has no type: timestamps as ISO
8601 with ``Z`` (``timestamp``) or without zone (``timestamp_ntz``), dates ``YYYY-MM-DD``,
binary as base64, decimals as exact JSON numbers, maps with string keys as objects and any
other map as a list of ``{"key", "value"}`` objects; floats and doubles as Java prints them
(``1.0E20``, ``0.1`` for the float 0.1, ``"NaN"``), struct fields under Spark's names, a name an
aggregation buffer repeats (``sum``, ``sum``) repeated, as Spark's ``toJSON()`` writes it. CSV
flattens the top-level structs into ``key.<field>`` / ``value.<field>`` columns, nested values as
JSON. Parquet keeps the Spark types (decimal, timestamp UTC/µs, date, map, list, struct) through
pyarrow. Column names must be unique in CSV and Parquet (Spark refuses to write such a value to
either, and Arrow to convert it), so there a repeated name gets ``#<field index>`` (``sum#1``), as
the decoded rows hold it.
"""

from __future__ import annotations

import base64
import contextlib
import csv
import datetime as dt
import decimal
import io
import json
import re
import struct
from collections.abc import Iterable, Iterator, Mapping
from typing import IO, Any

from ckptfix.errors import MissingExtra
from ckptfix.formats import unsaferow as u

FORMATS = ("jsonl", "csv", "parquet")
PARQUET_BATCH_ROWS = 16_384


def _plain(value: Any) -> Any:
    """A JSON-ready form of a decoded value."""
    kind = type(value)
    if kind in _AS_IS:
        if kind is float and (value != value or value in _INFINITE):
            return spark_float_text(value)
        return value
    if kind is dict:
        # a struct (field names) or a map; map keys share one type, so the first one tells
        if not value or type(next(iter(value))) is str:
            return {k: _plain(v) for k, v in value.items()}
        return [{"key": _plain(k), "value": _plain(v)} for k, v in value.items()]
    if kind is list or kind is tuple:
        return [_plain(v) for v in value]
    if kind is decimal.Decimal:
        return _DECIMAL_MARK + str(value)
    if kind is dt.datetime:
        if value.tzinfo is not None:
            return value.astimezone(dt.timezone.utc).replace(tzinfo=None).isoformat() + "Z"
        return value.isoformat()
    if kind is dt.date:
        return value.isoformat()
    if kind is bytes or kind is bytearray:
        return base64.b64encode(value).decode()
    return str(value)


_AS_IS = {type(None), bool, int, str, float}
_INFINITE = (float("inf"), float("-inf"))


def spark_float_text(value: float) -> str:
    """NaN and the infinities as Spark prints them (``to_json``/``toJSON``: ``"NaN"``, ``"Infinity"``,
    ``"-Infinity"`` as strings; CSV and ``show()``: the same words), not Python's ``nan``/``inf``."""
    if value != value:
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


# a decimal's digits travel through json.dumps as a marked string and are unquoted after it
_DECIMAL_MARK = "\x00ckptfix.decimal:"
_DECIMAL_TEXT = re.compile(r'"\\u0000ckptfix\.decimal:([-+0-9.Ee]*)"')


def _dumps(plain: Any) -> str:
    text = json.dumps(plain, ensure_ascii=False, separators=(",", ":"))
    return _DECIMAL_TEXT.sub(r"\1", text) if "\\u0000ckptfix.decimal:" in text else text


def repeated_names(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` for ``json.loads`` of what ``state read`` writes (and Spark's ``to_json``): a name a
    struct repeats (``{"sum": 1, "sum": 2.5}``, an aggregation buffer) is kept under the name the decoded rows
    use for its position (``sum#1``, :attr:`~ckptfix.formats.unsaferow.StructType.keys`), instead of the last
    value silently winning."""
    out: dict[str, Any] = {}
    for i, (name, value) in enumerate(pairs):
        out[name if name not in out else f"{name}#{i}"] = value
    return out


def parse_json_line(line: str) -> Any:
    """One line of ``state read --format jsonl`` as the row it was written from (see :func:`repeated_names`)."""
    return json.loads(line, object_pairs_hook=repeated_names)


def to_json_line(row: Mapping[str, Any]) -> str:
    return _dumps(_plain(row))


_quote = json.encoder.encode_basestring  # the C escaper json.dumps uses


def _struct_encoder(t: u.StructType) -> Any:
    """A struct's JSON object under Spark's field names: a name the struct repeats (an aggregation buffer's
    ``sum``, ``first``/``valueSet``) is repeated, as Spark's ``to_json``/``toJSON`` write it; the decoded dict
    holds it under :attr:`~ckptfix.formats.unsaferow.StructType.keys` (``sum#1``)."""
    parts = [(k, _quote(f.name) + ":", _scalar_encoder(f.data_type)) for k, f in zip(t.keys, t.fields, strict=True)]

    def encode(value: Mapping[str, Any]) -> str:
        out = []
        for k, head, enc in parts:
            v = value.get(k)
            out.append(head + ("null" if v is None else enc(v)))
        return "{" + ",".join(out) + "}"

    return encode


def java_double_text(value: float) -> str:
    """A double as Java's ``Double.toString`` writes it, which is what Spark's JSON (Jackson), CSV and ``show()``
    print: the shortest digits that read back to the same double (Python's ``repr`` digits; Java 19+ picks the
    same, Java 17 may add a digit in rare cases), plain between 10^-3 and 10^7 (``0.001``, ``1234567.5``,
    ``100.0``), else ``d.dddE<n>`` (``1.0E7``, ``1.5E-5``, ``1.0E20``). NaN and the infinities: see
    :func:`spark_float_text`."""
    if value != value or value in _INFINITE:
        return spark_float_text(value)
    text = float.__repr__(value)
    if 1e-3 <= abs(value) < 1e7 or value == 0:
        return text  # repr is plain in this range, with ".0" for an integral value, as Java
    return _java_scientific(text, value)


def java_float_text(value: float) -> str:
    """A float (a FloatType value, held as a Python float) as Java's ``Float.toString`` writes it: the shortest
    digits that read back to the same 32-bit float (``0.1``, not the double ``0.10000000149011612``), in the
    layout of :func:`java_double_text`."""
    if value != value or value in _INFINITE:
        return spark_float_text(value)
    if value == 0:
        return float.__repr__(value)
    for precision in range(1, 10):  # 9 significant digits always read back to the same float
        text = f"{value:.{precision - 1}e}"
        with contextlib.suppress(OverflowError):  # rounded past the largest float
            if _F32.unpack(_F32.pack(float(text)))[0] == value:
                break
    if 1e-3 <= abs(value) < 1e7:
        return float.__repr__(float(text))
    return _java_scientific(text, value)


_F32 = struct.Struct("<f")


def _java_scientific(text: str, value: float) -> str:
    """``d.dddE<n>`` (Java's computerized scientific notation) of the shortest digits ``text`` of ``value``.
    The notation always shows two digits; where one would do, Java shows the two closest to the exact value
    (``4.9E-324`` for the smallest double, whose shortest digits are ``5e-324``)."""
    sign, digits, exponent = decimal.Decimal(text).as_tuple()
    if len("".join(map(str, digits)).rstrip("0")) <= 1:
        sign, digits, exponent = decimal.Decimal(f"{value:.1e}").as_tuple()
    ds = "".join(map(str, digits)).rstrip("0") or "0"
    power = len(digits) - 1 + int(exponent)
    return ("-" if sign else "") + ds[0] + "." + (ds[1:] or "0") + "E" + str(power)


def _array_encoder(t: u.ArrayType) -> Any:
    enc = _scalar_encoder(t.element_type)
    return lambda v: "[" + ",".join("null" if e is None else enc(e) for e in v) + "]"


def _map_encoder(t: u.MapType) -> Any:
    """A map with string keys as an object, any other map as a list of ``{"key", "value"}`` objects."""
    key, val = _scalar_encoder(t.key_type), _scalar_encoder(t.value_type)
    if isinstance(t.key_type, u.StructType):  # a struct key is held as the tuple of its (name, value) pairs
        struct_key = key

        def key(k: Any) -> str:
            return struct_key(_struct_of(k))

    if isinstance(t.key_type, u.StringType):
        return lambda v: "{" + ",".join(_quote(k) + ":" + ("null" if x is None else val(x)) for k, x in v.items()) + "}"
    return lambda v: (
        "["
        + ",".join('{"key":' + key(k) + ',"value":' + ("null" if x is None else val(x)) + "}" for k, x in v.items())
        + "]"
    )


def _scalar_encoder(t: u.DataType) -> Any:
    """A function from a (non-null) value of ``t`` to its JSON text: Spark's field names (:func:`_struct_encoder`)
    and Spark's text of floats and doubles (:func:`java_double_text`), else the text :func:`to_json_line` gives."""
    if isinstance(t, u.StructType):
        return _struct_encoder(t)
    if isinstance(t, u.ArrayType):
        return _array_encoder(t)
    if isinstance(t, u.MapType):
        return _map_encoder(t)
    if isinstance(t, (u.ByteType, u.ShortType, u.IntegerType, u.LongType)):
        return int.__repr__
    if isinstance(t, u.StringType):
        return _quote
    if isinstance(t, u.BooleanType):
        return lambda v: "true" if v else "false"
    if isinstance(t, u.DecimalType):
        return str
    if isinstance(t, u.DoubleType):
        return lambda v: java_double_text(v) if v == v and v not in _INFINITE else _quote(spark_float_text(v))
    if isinstance(t, u.FloatType):
        return lambda v: java_float_text(v) if v == v and v not in _INFINITE else _quote(spark_float_text(v))
    return lambda v: _dumps(_plain(v))


class JsonLines:
    """A function from a row to its JSON line (with the newline), compiled from the column types:
    the same text as :func:`to_json_line`, without building the intermediate values.
    :meth:`batch` gives the same lines for a whole Arrow record batch at once."""

    def __init__(self, columns: list[str], schemas: Mapping[str, u.DataType]) -> None:
        self.columns, self.schemas = columns, schemas
        self.encoders = []
        for col in columns:
            t = schemas.get(col)
            enc = _scalar_encoder(t) if t else None
            self.encoders.append((col, _quote(col) + ":", enc or (lambda v: _dumps(_plain(v)))))

    def __call__(self, row: Mapping[str, Any]) -> str:
        out = []
        for col, head, enc in self.encoders:
            v = row.get(col)
            out.append(head + ("null" if v is None else enc(v)))
        return "{" + ",".join(out) + "}\n"

    def batch(self, batch: Any) -> str:
        """The JSON lines of an Arrow record batch (columns and types as given), built column by
        column: integers, booleans and strings that need no escaping are formatted by Arrow,
        other values one by one with the same encoders as :meth:`__call__`."""
        import pyarrow.compute as pc

        if not batch.num_rows:
            return ""
        pieces: list[Any] = []
        for i, col in enumerate(self.columns):
            pieces.append(_literal(("{" if i == 0 else ",") + _quote(col) + ":"))
            pieces.append(_json_texts(self.schemas[col], batch.column(col)))
        pieces.append(_literal("}\n"))
        lines = pc.binary_join_element_wise(*pieces, _literal(""))
        _, offsets, data = lines.buffers()
        first, last = (int.from_bytes(offsets[4 * i : 4 * i + 4], "little") for i in (0, len(lines)))
        return data[first:last].to_pybytes().decode("utf-8")


def json_line_maker(columns: list[str], schemas: Mapping[str, u.DataType]) -> JsonLines:
    """A function from a row to its JSON line (with the newline); see :class:`JsonLines`."""
    return JsonLines(columns, schemas)


_INTEGRAL = (u.ByteType, u.ShortType, u.IntegerType, u.LongType)
# what json.dumps escapes in a string (ensure_ascii=False): control characters, quote, backslash
_NEEDS_ESCAPE = r'[\x00-\x1f"\\]'


def _literal(text: str) -> Any:
    """A string scalar for Arrow's compute functions (``pyarrow.scalar`` would import pandas)."""
    import numpy as np
    import pyarrow as pa

    data = text.encode()
    offsets = np.array([0, len(data)], dtype=np.int32)
    return pa.Array.from_buffers(pa.string(), 1, [None, pa.py_buffer(offsets), pa.py_buffer(data)])[0]


def _strings(texts: list[str]) -> Any:
    """Python strings as an Arrow string array (without ``pyarrow.array``, which imports pandas)."""
    import numpy as np
    import pyarrow as pa

    encoded = [t.encode() for t in texts]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(e) for e in encoded], out=offsets[1:])
    if offsets[-1] >= 2**31:
        return pa.Array.from_buffers(
            pa.large_string(), len(encoded), [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))]
        ).cast(pa.string())
    return pa.Array.from_buffers(
        pa.string(), len(encoded), [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(b"".join(encoded))]
    )


def _json_texts(t: u.DataType, values: Any) -> Any:
    """The JSON text of every value of an Arrow array of Spark type ``t``, ``null`` for a null."""
    import pyarrow as pa
    import pyarrow.compute as pc

    null = _literal("null")
    if isinstance(t, (*_INTEGRAL, u.BooleanType)):
        return pc.fill_null(pc.cast(values, pa.string()), null)  # 12, -3, true, false: as int.__repr__ / json
    if isinstance(t, u.StringType) and not pc.any(pc.match_substring_regex(values, _NEEDS_ESCAPE)).as_py():
        quote = _literal('"')
        return pc.fill_null(pc.binary_join_element_wise(quote, values, quote, _literal("")), null)
    if isinstance(t, u.StructType) and t.fields:
        pieces: list[Any] = []
        for i, f in enumerate(t.fields):
            pieces.append(_literal(("{" if i == 0 else ",") + _quote(f.name) + ":"))
            pieces.append(_json_texts(f.data_type, values.field(i)))
        pieces.append(_literal("}"))
        joined = pc.binary_join_element_wise(*pieces, _literal(""))
        return pc.if_else(pc.is_null(values), null, joined) if values.null_count else joined
    enc = _scalar_encoder(t)
    return _strings(["null" if v is None else enc(v) for v in values.to_pylist()])


def write_jsonl(
    rows: Iterable[Mapping[str, Any]],
    out: IO[str],
    columns: list[str] | None = None,
    schemas: Mapping[str, u.DataType] | None = None,
) -> int:
    """JSON lines; with the columns and their types, through a compiled encoder (and, for the rows
    of :func:`ckptfix.state.read.read_state`, Arrow batches turned into lines column by column)."""
    n = 0
    if columns and schemas and hasattr(rows, "batches"):
        lines = JsonLines(columns, schemas)
        for item in rows.batches():
            if isinstance(item, list):
                out.write("".join(map(lines, item)))
                n += len(item)
            else:
                out.write(lines.batch(item))
                n += item.num_rows
        return n
    line = json_line_maker(columns, schemas) if columns and schemas else lambda r: to_json_line(r) + "\n"
    for row in rows:
        out.write(line(row))
        n += 1
    return n


def _csv_cell(value: Any) -> str:
    plain = _plain(value)
    if plain is None:
        return ""
    if isinstance(plain, (dict, list)):
        return _dumps(plain)
    if isinstance(plain, bool):
        return "true" if plain else "false"
    if isinstance(plain, str) and plain.startswith(_DECIMAL_MARK):
        return plain[len(_DECIMAL_MARK) :]
    return str(plain)


def _csv_columns(columns: list[str], schemas: Mapping[str, u.DataType]) -> list[tuple[str, tuple[str, ...] | None]]:
    return [
        (col, t.keys if isinstance(t := schemas.get(col), u.StructType) else None)  # top-level structs flatten
        for col in columns
    ]


def _csv_encoder(t: u.DataType | None) -> Any:
    """A function from a value of ``t`` to its CSV cell: nested values as JSON, floats and doubles as Spark
    prints them (:func:`java_double_text`; NaN and the infinities as words)."""
    if isinstance(t, (u.StructType, u.ArrayType, u.MapType)):
        nested = _scalar_encoder(t)
        return lambda v: "" if v is None else nested(v)
    if isinstance(t, u.DoubleType):
        return lambda v: "" if v is None else java_double_text(v)
    if isinstance(t, u.FloatType):
        return lambda v: "" if v is None else java_float_text(v)
    return _csv_cell


def csv_header(columns: list[str], schemas: Mapping[str, u.DataType]) -> str:
    names: list[str] = []
    for col, keys in _csv_columns(columns, schemas):
        names += [f"{col}.{k}" for k in keys] if keys is not None else [col]
    return _csv_text(names)


def csv_line_maker(columns: list[str], schemas: Mapping[str, u.DataType]) -> Any:
    """A function from a row to its CSV line (with the newline)."""
    layout: list[tuple[str, list[tuple[str, Any]] | None, Any]] = []
    for col, keys in _csv_columns(columns, schemas):
        t = schemas.get(col)
        if keys is not None and isinstance(t, u.StructType):
            fields = [(k, _csv_encoder(f.data_type)) for k, f in zip(keys, t.fields, strict=True)]
            layout.append((col, fields, None))
        else:
            layout.append((col, None, _csv_encoder(t)))

    def line(row: Mapping[str, Any]) -> str:
        cells: list[str] = []
        for col, fields, enc in layout:
            value = row.get(col)
            if fields is not None:
                cells += [cell(None if value is None else value.get(k)) for k, cell in fields]
            else:
                cells.append(enc(value))
        return _csv_text(cells)

    return line


def _csv_text(cells: list[str]) -> str:
    """One CSV line ending in ``\n``. Written with ``\r\n`` as the terminator, then cut to ``\n``: Python's
    writer quotes a cell only for the characters of its terminator, and a bare ``\r`` in an unquoted cell
    breaks every CSV reader (RFC 4180 quotes both)."""
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\r\n").writerow(cells)
    return buf.getvalue()[:-2] + "\n"


def write_csv(
    rows: Iterable[Mapping[str, Any]], out: IO[str], columns: list[str], schemas: Mapping[str, u.DataType]
) -> int:
    out.write(csv_header(columns, schemas))
    line = csv_line_maker(columns, schemas)
    n = 0
    for row in rows:
        out.write(line(row))
        n += 1
    return n


# ---------------------------------------------------------------- parquet


def _arrow_type(t: u.DataType) -> Any:
    import pyarrow as pa

    simple: dict[type, Any] = {
        u.BooleanType: pa.bool_(),
        u.ByteType: pa.int8(),
        u.ShortType: pa.int16(),
        u.IntegerType: pa.int32(),
        u.LongType: pa.int64(),
        u.FloatType: pa.float32(),
        u.DoubleType: pa.float64(),
        u.DateType: pa.date32(),
        u.TimestampType: pa.timestamp("us", tz="UTC"),
        u.TimestampNTZType: pa.timestamp("us"),
        u.StringType: pa.string(),
        u.BinaryType: pa.binary(),
        u.NullType: pa.null(),
    }
    if type(t) in simple:
        return simple[type(t)]
    if isinstance(t, u.DecimalType):
        return pa.decimal128(t.precision, t.scale)
    if isinstance(t, u.ArrayType):
        return pa.list_(_arrow_type(t.element_type))
    if isinstance(t, u.MapType):
        return pa.map_(_arrow_type(t.key_type), _arrow_type(t.value_type))
    if isinstance(t, u.StructType):
        return pa.struct([pa.field(k, _arrow_type(f.data_type)) for k, f in zip(t.keys, t.fields, strict=True)])
    return pa.string()


def arrow_type(t: u.DataType) -> Any:
    """The Arrow type of a Spark type, as Parquet and :func:`arrow_table` write it."""
    return _arrow_type(t)


def _arrow_value(t: u.DataType, value: Any) -> Any:
    if value is None:
        return None
    if isinstance(t, u.StructType):
        return {k: _arrow_value(f.data_type, value.get(k)) for k, f in zip(t.keys, t.fields, strict=True)}
    if isinstance(t, u.ArrayType):
        return [_arrow_value(t.element_type, v) for v in value]
    if isinstance(t, u.MapType):
        return [(_arrow_key(t.key_type, k), _arrow_value(t.value_type, v)) for k, v in value.items()]
    return value


def arrow_column(t: u.DataType, values: list[Any]) -> Any:
    """One Arrow array of ``values`` (column-wise: a struct's fields are built as arrays of
    their own, so flat state rows never go through per-row Python dicts)."""
    import pyarrow as pa

    arrow_type = _arrow_type(t)
    if isinstance(t, u.StructType) and t.fields:
        mask = pa.array([v is None for v in values], type=pa.bool_())
        children = [
            arrow_column(f.data_type, [None if v is None else v.get(k) for v in values])
            for k, f in zip(t.keys, t.fields, strict=True)
        ]
        return pa.StructArray.from_arrays(children, fields=list(arrow_type), mask=mask)
    if isinstance(t, (u.StructType, u.ArrayType, u.MapType)):
        return pa.array([_arrow_value(t, v) for v in values], type=arrow_type)
    return pa.array(values, type=arrow_type)


def _struct_of(key: Any) -> Any:
    """A struct map key as the reader holds it (hashable: the tuple of its ``(name, value)`` pairs, nested structs
    alike) back as a dict."""
    if isinstance(key, tuple) and all(isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], str) for p in key):
        return {name: _struct_of(value) for name, value in key}
    return key


def _arrow_key(t: u.DataType, key: Any) -> Any:
    if isinstance(t, u.StructType) and isinstance(key, tuple):
        named = _struct_of(key)
        if isinstance(named, dict):
            return _arrow_value(t, named)
        return {k: _arrow_value(f.data_type, v) for k, f, v in zip(t.keys, t.fields, key, strict=True)}
    return _arrow_value(t, key)


def write_parquet(
    rows: Iterable[Mapping[str, Any]], target: str | IO[bytes], columns: list[str], schemas: Mapping[str, u.DataType]
) -> int:
    """Parquet with the Spark types, written in batches of :data:`PARQUET_BATCH_ROWS` rows (the
    Arrow batches of :func:`ckptfix.state.read.read_state` rows as they come)."""
    if hasattr(rows, "batches"):
        return write_parquet_batches(rows.batches(), target, columns, schemas)

    def chunks() -> Iterator[tuple[bytes, int]]:
        batch: list[Mapping[str, Any]] = []
        for row in rows:
            batch.append(row)
            if len(batch) >= PARQUET_BATCH_ROWS:
                yield arrow_chunk(batch, columns, schemas), len(batch)
                batch = []
        if batch:
            yield arrow_chunk(batch, columns, schemas), len(batch)

    return write_parquet_chunks(chunks(), target, columns, schemas)


def arrow_table(rows: Iterable[Mapping[str, Any]], columns: list[str], schemas: Mapping[str, u.DataType]) -> Any:
    """Rows as one ``pyarrow.Table`` with the Spark types (the columns Parquet gets)."""
    try:
        import pyarrow as pa
    except ImportError:
        raise MissingExtra("pyarrow", "arrow") from None
    if hasattr(rows, "batches"):
        schema = pa.schema([pa.field(c, _arrow_type(schemas[c])) for c in columns])
        parts = [_as_table(item, columns, schemas) for item in rows.batches()]
        return pa.concat_tables(parts) if parts else schema.empty_table()
    rows = list(rows)
    schema = pa.schema([pa.field(c, _arrow_type(schemas[c])) for c in columns])
    return pa.Table.from_arrays([arrow_column(schemas[c], [r.get(c) for r in rows]) for c in columns], schema=schema)


def _as_table(item: Any, columns: list[str], schemas: Mapping[str, u.DataType]) -> Any:
    """A list of row dicts or an Arrow record batch as a table with the Spark types."""
    import pyarrow as pa

    if isinstance(item, pa.RecordBatch):
        return pa.Table.from_batches([item])
    return arrow_table(item, columns, schemas)


def arrow_chunk(rows: Any, columns: list[str], schemas: Mapping[str, u.DataType]) -> bytes:
    """Rows (a list of row dicts, or an Arrow record batch) as one Arrow IPC stream (what a
    parallel worker sends to the Parquet writer)."""
    import pyarrow as pa

    table = _as_table(rows, columns, schemas)
    schema = table.schema
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def write_parquet_chunks(
    chunks: Iterable[tuple[bytes, int]], target: str | IO[bytes], columns: list[str], schemas: Mapping[str, u.DataType]
) -> int:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise MissingExtra("pyarrow", "arrow") from None
    schema = pa.schema([pa.field(c, _arrow_type(schemas[c])) for c in columns])
    n = 0
    with pq.ParquetWriter(target, schema) as writer:
        for data, rows in chunks:
            writer.write_table(pa.ipc.open_stream(data).read_all())
            n += rows
        if n == 0:
            writer.write_table(pa.Table.from_pylist([], schema=schema))
    return n


def write_parquet_batches(
    items: Iterable[Any], target: str | IO[bytes], columns: list[str], schemas: Mapping[str, u.DataType]
) -> int:
    """Parquet from Arrow record batches or lists of row dicts, as they come."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise MissingExtra("pyarrow", "arrow") from None
    schema = pa.schema([pa.field(c, _arrow_type(schemas[c])) for c in columns])
    n = 0
    pending: list[Any] = []  # small items (a change feed's files) gathered into one row group
    held = 0
    with pq.ParquetWriter(target, schema) as writer:
        for item in items:
            table = _as_table(item, columns, schemas)
            if table.num_rows:
                pending.append(table)
                held += table.num_rows
            n += table.num_rows
            if held >= PARQUET_BATCH_ROWS:
                writer.write_table(pa.concat_tables(pending))
                pending, held = [], 0
        if pending:
            writer.write_table(pa.concat_tables(pending))
        if n == 0:
            writer.write_table(schema.empty_table())
    return n


def text_stream(binary: IO[bytes]) -> IO[str]:
    return io.TextIOWrapper(binary, encoding="utf-8", newline="")
