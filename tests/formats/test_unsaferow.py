"""UnsafeRow decoding/encoding against rows written by Spark 4.3, by hand, and by hypothesis.

Expected values are derived by hand from the generators' inputs:

- ``generate.py``: batches ``k1 k7 k7 | k7 k2 | k7 k1 k7 | k3 k7``; ``groupBy(k).count()``
  so version N holds the keys of batch N with their running counts; TWS ``cnt`` holds the
  same counts per key, ``$rowCounter_lst`` the list length, ``lst`` one ``{v: k}`` per row.
- ``generate_unsaferow.py``: ``ROWS`` (imported from it), one first()/valueSet pair per
  value column, then ``sum(l)``.
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import struct
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ckptfix.errors import FormatError
from ckptfix.formats import lz4block, schema, statefile
from ckptfix.formats.statefile import Op
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
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
    decode_row,
    encode_row,
    parse_schema,
    parse_type,
    split_rocksdb,
    trim_value,
)

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "formats"
STORE = "state/0/0"
DELTAS = {1: {"k1": 1, "k7": 2}, 2: {"k7": 3, "k2": 1}, 3: {"k7": 5, "k1": 2}, 4: {"k3": 1, "k7": 6}}
CF_CNT, CF_ROW_COUNTER, CF_LST = 2, 3, 4  # columnFamilyMapping of tws/4.zip
UTC = dt.timezone.utc


def raw(rel: str) -> bytes:
    return lz4block.decode((FIX / rel).read_bytes(), rel)


def one(pattern: str) -> str:
    (match,) = FIX.glob(pattern)
    return str(match.relative_to(FIX))


def schema_v2(rel: str) -> tuple[StructType, StructType]:
    model = schema.parse((FIX / rel).read_bytes(), rel)
    assert isinstance(model, schema.SchemaV2)
    return parse_schema(model.key_schema, rel), parse_schema(model.value_schema, rel)


KEY = StructType((StructField("k", StringType()),))
COUNT = StructType((StructField("count", LongType()),))


def _load_generator() -> Any:
    spec = importlib.util.spec_from_file_location("generate_unsaferow", FIX / "generate_unsaferow.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("generate_unsaferow", module)
    spec.loader.exec_module(module)
    return module


GEN = _load_generator()


# ------------------------------------------------------------------ schema JSON


def test_schema_from_real_hdfs_schema_file() -> None:
    key, value = schema_v2(f"hdfs/{STORE}/_metadata/schema")
    assert key == KEY
    assert value == COUNT


def test_schema_from_real_v3_schema_file() -> None:
    rel = one("tws/state/0/_stateSchema/*/*")
    model = schema.parse((FIX / rel).read_bytes(), rel)
    assert isinstance(model, schema.SchemaV3)
    by_name = {cf.name: (parse_schema(cf.key_schema), parse_schema(cf.value_schema)) for cf in model.column_families}
    assert by_name == {
        "cnt": (KEY, StructType((StructField("c", LongType()),))),
        "lst": (KEY, StructType((StructField("v", StringType()),))),
        "$rowCounter_lst": (KEY, COUNT),
    }


def test_schema_with_every_type_and_json_round_trip() -> None:
    rel = f"unsaferow/{STORE}/_metadata/schema"
    model = schema.parse((FIX / rel).read_bytes(), rel)
    assert isinstance(model, schema.SchemaV2)
    key, value = parse_schema(model.key_schema), parse_schema(model.value_schema)
    assert key == StructType((StructField("k", StringType()), StructField("n", IntegerType())))
    rec = value.fields[0].data_type
    assert isinstance(rec, StructType)
    assert [f.data_type for f in rec.fields] == [
        BooleanType(),
        ByteType(),
        ShortType(),
        IntegerType(),
        LongType(),
        FloatType(),
        DoubleType(),
        StringType(),
        BinaryType(),
        DateType(),
        TimestampType(),
        TimestampNTZType(),
        DecimalType(10, 2),
        DecimalType(38, 10),
    ]
    assert value.fields[10].data_type == MapType(IntegerType(), ArrayType(DoubleType()))
    assert value.names[:4] == ("first", "valueSet", "first", "valueSet")
    assert value.keys[:4] == ("first", "valueSet", "first#2", "valueSet#3")
    assert value.json_value() == model.value_schema and key.json_value() == model.key_schema


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("decimal", DecimalType(10, 0)),
        ("decimal(38, 18)", DecimalType(38, 18)),
        ("null", NullType()),
        ("void", NullType()),
        ("string collate UTF8_LCASE", StringType("UTF8_LCASE")),
    ],
)
def test_parse_type_spellings(text: str, expected: DataType) -> None:
    assert parse_type(text) == expected


@pytest.mark.parametrize(
    ("obj", "kind"),
    [
        ("interval day to second", "unsupported-type"),
        ({"type": "udt", "class": "x"}, "unsupported-type"),
        ("decimal(39,0)", "bad-schema"),
        ("decimal(5,6)", "bad-schema"),
        ({"type": "array"}, "bad-schema"),
        ({"type": "array", "elementType": "long", "containsNull": "yes"}, "bad-schema"),
        ({"type": "struct", "fields": [{"type": "long"}]}, "bad-schema"),
        ({"type": "struct", "fields": {}}, "bad-schema"),
        (42, "bad-schema"),
    ],
)
def test_parse_type_rejects(obj: Any, kind: str) -> None:
    with pytest.raises(FormatError) as exc:
        parse_type(obj, "s.json")
    assert exc.value.kind == kind and exc.value.path == "s.json"


def test_parse_schema_text_and_errors() -> None:
    assert parse_schema(COUNT.json()) == COUNT
    with pytest.raises(FormatError) as exc:
        parse_schema("{not json")
    assert exc.value.kind == "invalid-json"
    with pytest.raises(FormatError) as exc:
        parse_schema('"long"')
    assert exc.value.kind == "bad-schema"


# ------------------------------------------------------------------ real rows: HDFS


def counts(records: list[statefile.Record], key: StructType, value: StructType, cf: bool | None = None) -> dict:
    out: dict[str, int] = {}
    for r in records:
        assert r.op is Op.PUT and r.value is not None
        k, v = r.key, r.value
        if cf is not None:
            k = split_rocksdb(k, cf)[1]
            v = split_rocksdb(v, cf and False)[1]
        (name,) = decode_row(k, key).values()
        (count,) = decode_row(trim_value(v), value).values()
        out[name] = count
    return out


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_real_hdfs_delta_rows(version: int) -> None:
    key, value = schema_v2(f"hdfs/{STORE}/_metadata/schema")
    records = list(statefile.iter_records(raw(f"hdfs/{STORE}/{version}.delta"), kind="delta"))
    assert counts(records, key, value) == DELTAS[version]


def test_real_hdfs_snapshot_rows_and_byte_exact_encoding() -> None:
    key, value = schema_v2(f"hdfs/{STORE}/_metadata/schema")
    records = list(statefile.iter_records(raw(f"hdfs/{STORE}/4.snapshot"), kind="snapshot"))
    assert counts(records, key, value) == {"k1": 2, "k2": 1, "k3": 1, "k7": 6}
    for r in records:
        assert r.value is not None
        assert encode_row(decode_row(r.key, key), key) == r.key
        assert encode_row(decode_row(r.value, value), value) == r.value
    # k7 by hand: bitset 0, slot (16 << 32 | 2), "k7" padded to 8
    assert encode_row({"k": "k7"}, KEY) == bytes(8) + struct.pack("<II", 2, 16) + b"k7" + bytes(6)
    assert encode_row({"count": 6}, COUNT) == bytes(8) + struct.pack("<q", 6)


# ------------------------------------------------------------------ real rows: RocksDB


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_real_rocksdb_changelog_rows(version: int) -> None:
    records = list(statefile.iter_records(raw(f"rocksdb/{STORE}/{version}.changelog"), kind="changelog"))
    assert counts(records, KEY, COUNT, cf=False) == DELTAS[version]
    rel = one(f"rocksdb_v2/{STORE}/{version}_*.changelog")
    records = list(statefile.iter_records(raw(rel), rel, "changelog"))
    assert counts(records, KEY, COUNT, cf=False) == DELTAS[version]


def test_real_tws_changelog_rows() -> None:
    """tws/3.changelog = batch 2 (k7 k1 k7): cnt k1=2, k7=5; k1's list cleared; k7 gets two
    ``{v: "k7"}`` appended (MERGE, ``int32 LE len | 0x00 row``) and its row counter 4 then 5."""
    records = list(statefile.iter_records(raw(f"tws/{STORE}/3.changelog"), kind="changelog"))
    seen: list[tuple[str, int | None, str, Any]] = []
    value_schema = {CF_CNT: StructType((StructField("c", LongType()),)), CF_ROW_COUNTER: COUNT}
    for r in records:
        cf, key_row = split_rocksdb(r.key, column_family=True)
        assert cf is not None
        (k,) = decode_row(key_row, KEY).values()
        if r.op is Op.DELETE:
            seen.append((r.op.value, cf, k, None))
        elif r.op is Op.MERGE:
            assert r.value is not None
            (length,) = struct.unpack_from("<i", r.value)
            assert length == len(r.value) - 4
            seen.append(
                (
                    r.op.value,
                    cf,
                    k,
                    decode_row(split_rocksdb(r.value[4:])[1], StructType((StructField("v", StringType()),))),
                )
            )
        else:
            assert r.value is not None
            seen.append((r.op.value, cf, k, decode_row(split_rocksdb(r.value)[1], value_schema[cf])))
    assert seen == [
        ("put", CF_CNT, "k1", {"c": 2}),
        ("delete", CF_LST, "k1", None),
        ("delete", CF_ROW_COUNTER, "k1", None),
        ("put", CF_CNT, "k7", {"c": 5}),
        ("merge", CF_LST, "k7", {"v": "k7"}),
        ("put", CF_ROW_COUNTER, "k7", {"count": 4}),
        ("merge", CF_LST, "k7", {"v": "k7"}),
        ("put", CF_ROW_COUNTER, "k7", {"count": 5}),
    ]


def test_split_rocksdb_errors() -> None:
    with pytest.raises(FormatError) as exc:
        split_rocksdb(b"\x01" + bytes(8), path="c", offset=10)
    assert (exc.value.kind, exc.value.offset) == ("bad-row", 10)
    with pytest.raises(FormatError) as exc:
        split_rocksdb(b"\x02\x00", column_family=True, offset=4)
    assert (exc.value.kind, exc.value.offset) == ("bad-row", 6)
    with pytest.raises(FormatError):
        split_rocksdb(b"\x02", column_family=True)
    assert split_rocksdb(b"\x05\x00\x00abc", column_family=True) == (5, b"abc")


# ------------------------------------------------------------------ real rows: every type


def unsaferow_rows() -> tuple[StructType, StructType, list[statefile.Record]]:
    key, value = schema_v2(f"unsaferow/{STORE}/_metadata/schema")
    records = list(statefile.iter_records(raw(f"unsaferow/{STORE}/1.delta"), kind="delta"))
    return key, value, records


def expected_value(row: dict[str, Any]) -> dict[str, Any]:
    """first(col) and valueSet per value column (valueSet is true: first() saw a row), then
    sum(l). Map keys come back as dict keys; decimals compare by value."""
    out: dict[str, Any] = {}
    for i, col in enumerate(GEN.VALUE_COLUMNS):
        out["first" if i == 0 else f"first#{2 * i}"] = row[col]
        out["valueSet" if i == 0 else f"valueSet#{2 * i + 1}"] = True
    out["sum"] = row["l"]
    return out


def test_real_rows_of_every_type() -> None:
    key, value, records = unsaferow_rows()
    decoded = {tuple(decode_row(r.key, key).values()): decode_row(r.value or b"", value) for r in records}
    assert set(decoded) == {("a", 1), ("b", 2), ("c", 3)}
    for row in GEN.ROWS:
        assert decoded[(row["k"], row["n"])] == expected_value(row), row["k"]
    rec = decoded[("a", 1)]["first"]
    assert rec["ts"].tzinfo is UTC and rec["ntz"].tzinfo is None
    assert type(rec["dec"]) is Decimal and rec["dec"].as_tuple().exponent == -2
    assert rec["big"] == Decimal("-1234567890123456789012345.6789012345")


def test_real_rows_of_every_type_encode_byte_exact() -> None:
    """encode_row writes exactly Spark's bytes, including the 16 bytes a row reserves for a
    null decimal(38,10) (key c) and the unreserved large decimals inside an array."""
    key, value, records = unsaferow_rows()
    for r in records:
        assert r.value is not None
        assert encode_row(decode_row(r.key, key), key) == r.key
        assert encode_row(decode_row(r.value, value), value) == r.value


def test_real_row_errors_point_into_the_file() -> None:
    """A slot of the real value row made to point past the end: the error names the file
    offset of that slot."""
    key, value, records = unsaferow_rows()
    r = records[0]
    assert r.value is not None
    value_at = r.offset + 4 + len(r.key) + 4  # record: int32 len, key, int32 len, value
    bad = bytearray(r.value)
    slot = 8 + 2 * 8  # bitset of 17 fields is one word; field 2 = first(arr)
    struct.pack_into("<II", bad, slot, 8, len(bad))  # size 8 at offset len: past the end
    with pytest.raises(FormatError) as exc:
        decode_row(bytes(bad), value, "1.delta", value_at)
    assert (exc.value.kind, exc.value.offset, exc.value.path) == ("out-of-bounds", value_at + slot, "1.delta")


# ------------------------------------------------------------------ hand-made bytes (reference §5.1)


def test_array_with_null_layout() -> None:
    t = StructType((StructField("a", ArrayType(IntegerType())),))
    array = bytes.fromhex("0300000000000000040000000000000001000000020000000000000000000000")
    row = bytes(8) + struct.pack("<II", len(array), 16) + array
    assert decode_row(row, t) == {"a": [1, 2, None]}
    assert encode_row({"a": [1, 2, None]}, t) == row


def test_map_layout() -> None:
    t = StructType((StructField("m", MapType(StringType(), IntegerType())),))
    keys = (
        struct.pack("<q", 2) + bytes(8) + struct.pack("<II", 2, 32) + struct.pack("<II", 2, 40) + b"k1" + bytes(6)
    ) + (b"k2" + bytes(6))
    values = bytes.fromhex("020000000000000000000000000000000a00000014000000")
    data = struct.pack("<q", len(keys)) + keys + values
    assert len(keys) == 48
    row = bytes(8) + struct.pack("<II", len(data), 16) + data
    assert decode_row(row, t) == {"m": {"k1": 10, "k2": 20}}
    assert encode_row({"m": {"k1": 10, "k2": 20}}, t) == row


def test_struct_and_array_map_keys_become_tuples() -> None:
    point = StructType((StructField("x", IntegerType()), StructField("y", StringType())))
    t = StructType(
        (
            StructField("m", MapType(point, ArrayType(LongType()))),
            StructField("n", MapType(ArrayType(IntegerType()), LongType())),
        )
    )
    values = {"m": {(1, "a"): [1, None], (2, None): []}, "n": {(1, 2): 3}}
    assert decode_row(encode_row(values, t), t) == values
    assert decode_row(encode_row({"m": {}, "n": None}, t), t) == {"m": {}, "n": None}


def test_lenient_like_spark() -> None:
    t = StructType((StructField("b", BooleanType()), StructField("n", LongType(), nullable=False)))
    row = bytearray(encode_row({"b": True, "n": 5}, t))
    row[8] = 7  # Spark reads any non-zero byte as true
    row[9:16] = b"\xff" * 7  # unused high bytes are never read
    assert decode_row(bytes(row), t) == {"b": True, "n": 5}
    row[0] = 0b10  # a null bit on a non-nullable field reads as null
    assert decode_row(bytes(row), t) == {"b": True, "n": None}


def test_strings_keep_bytes_that_are_not_utf8() -> None:
    t = StructType((StructField("s", StringType()),))
    row = encode_row({"s": "ab"}, t)
    bad = row[:16] + b"\xff\xfe" + row[18:]
    assert decode_row(bad, t) == {"s": "\udcff\udcfe"}
    assert encode_row(decode_row(bad, t), t) == bad


def test_repeated_map_key_is_a_bad_row() -> None:
    t = StructType((StructField("m", MapType(IntegerType(), LongType())),))
    row = bytearray(encode_row({"m": {1: 10, 2: 20}}, t))
    (word,) = struct.unpack_from("<Q", row, 8)
    keys_at = (word >> 32) + 8
    struct.pack_into("<i", row, keys_at + 20, 1)  # second 4-byte key (after count, bitset, key 0) := 1
    expect(bytes(row), "bad-row", keys_at, t)


def test_trim_value() -> None:
    row = encode_row({"count": 3}, COUNT)
    assert trim_value(row + b"junk") == row
    assert decode_row(trim_value(row + b"junk"), COUNT) == {"count": 3}


# ------------------------------------------------------------------ corruption: one test per kind


ROW_T = StructType(
    (
        StructField("s", StringType()),
        StructField("a", ArrayType(LongType())),
        StructField("m", MapType(IntegerType(), StringType())),
    )
)
ROW_V = {"s": "hello", "a": [1, None, 3], "m": {1: "x"}}


def slot(i: int) -> int:
    return 8 + 8 * i


def corrupt(row: bytes, at: int, fmt: str, *values: int) -> bytes:
    out = bytearray(row)
    struct.pack_into(fmt, out, at, *values)
    return bytes(out)


def expect(data: bytes, kind: str, offset: int, t: StructType = ROW_T) -> FormatError:
    with pytest.raises(FormatError) as exc:
        decode_row(data, t, "f.delta", 1000)
    assert (exc.value.kind, exc.value.offset, exc.value.path) == (kind, 1000 + offset, "f.delta"), str(exc.value)
    return exc.value


def test_corrupt_offset_past_the_end() -> None:
    row = encode_row(ROW_V, ROW_T)
    expect(corrupt(row, slot(0), "<II", 5, len(row) + 8), "out-of-bounds", slot(0))


def test_corrupt_offset_into_the_fixed_region() -> None:
    row = encode_row(ROW_V, ROW_T)
    err = expect(corrupt(row, slot(0), "<II", 5, 8), "out-of-bounds", slot(0))
    assert "variable-length region" in err.expected


def test_corrupt_size_overflow() -> None:
    row = encode_row(ROW_V, ROW_T)
    expect(corrupt(row, slot(0), "<II", 0xFFFFFFFF, 32), "out-of-bounds", slot(0))


def test_corrupt_truncated_row() -> None:
    row = encode_row(ROW_V, ROW_T)
    expect(row[:-8], "out-of-bounds", slot(2))  # the map (last) now ends past the row
    expect(row[:-3], "bad-row", 0)  # not a multiple of 8
    expect(row[:24], "bad-row", 0)  # shorter than bitset + 3 slots
    expect(b"", "bad-row", 0)


def test_corrupt_array_header() -> None:
    row = encode_row(ROW_V, ROW_T)
    (word,) = struct.unpack_from("<Q", row, slot(1))
    array_at = word >> 32
    err = expect(corrupt(row, array_at, "<q", -1), "bad-row", array_at)
    assert err.found == "-1"
    expect(corrupt(row, array_at, "<q", 1000), "bad-row", array_at)  # elements past the array
    expect(corrupt(row, slot(1), "<II", 4, array_at), "bad-row", array_at)  # shorter than the count


def test_corrupt_map_header() -> None:
    row = encode_row(ROW_V, ROW_T)
    (word,) = struct.unpack_from("<Q", row, slot(2))
    map_at, map_size = word >> 32, word & 0xFFFFFFFF
    expect(corrupt(row, map_at, "<q", map_size), "bad-row", map_at)  # key array size too big
    expect(corrupt(row, map_at, "<q", -8), "bad-row", map_at)
    expect(corrupt(row, map_at + 8, "<q", 0), "bad-row", map_at)  # 0 keys, 1 value
    expect(corrupt(row, map_at + 8 + 8, "<B", 1), "bad-row", map_at + 8)  # null key
    expect(corrupt(row, slot(2), "<II", 4, map_at), "bad-row", map_at)  # no room for the size


def test_corrupt_values() -> None:
    t = StructType(
        (StructField("d", DateType()), StructField("ts", TimestampType()), StructField("x", DecimalType(4, 2)))
    )
    row = encode_row({"d": dt.date(2020, 1, 1), "ts": dt.datetime(2020, 1, 1, tzinfo=UTC), "x": Decimal("1.5")}, t)
    expect(corrupt(row, slot(0), "<i", 2**31 - 1), "bad-value", slot(0), t)
    expect(corrupt(row, slot(1), "<q", -(2**63)), "bad-value", slot(1), t)
    expect(corrupt(row, slot(2), "<q", 10000), "bad-value", slot(2), t)  # 5 digits in decimal(4,2)
    big = StructType((StructField("b", DecimalType(30, 0)),))
    brow = encode_row({"b": Decimal(5)}, big)
    expect(corrupt(brow, slot(0), "<I", 0), "bad-row", slot(0), big)  # zero-length BigInteger
    expect(corrupt(brow, slot(0) + 4, "<I", 40), "out-of-bounds", slot(0), big)


# ------------------------------------------------------------------ encoder input errors


@pytest.mark.parametrize(
    ("t", "value"),
    [
        (StructType((StructField("n", LongType(), nullable=False),)), {"n": None}),
        (StructType((StructField("n", LongType()),)), {}),
        (StructType((StructField("n", LongType()),)), {"n": 1, "extra": 2}),
        (StructType((StructField("a", ArrayType(LongType(), contains_null=False)),)), {"a": [None]}),
        (StructType((StructField("d", DecimalType(4, 2)),)), {"d": Decimal("1.234")}),
        (StructType((StructField("d", DecimalType(4, 2)),)), {"d": Decimal("123.4")}),
        (StructType((StructField("d", DecimalType(4, 2)),)), {"d": Decimal("NaN")}),
        (StructType((StructField("t", TimestampType()),)), {"t": dt.datetime(2020, 1, 1)}),
        (StructType((StructField("t", TimestampNTZType()),)), {"t": dt.datetime(2020, 1, 1, tzinfo=UTC)}),
        (StructType((StructField("v", NullType()),)), {"v": 1}),
        (StructType((StructField("s", StructType((StructField("x", LongType()),))),)), {"s": (1, 2)}),
    ],
)
def test_encode_rejects(t: StructType, value: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        encode_row(value, t)


# ------------------------------------------------------------------ hypothesis


ATOMIC: list[DataType] = [
    NullType(),
    BooleanType(),
    ByteType(),
    ShortType(),
    IntegerType(),
    LongType(),
    FloatType(),
    DoubleType(),
    StringType(),
    BinaryType(),
    DateType(),
    TimestampType(),
    TimestampNTZType(),
]
decimals = st.builds(lambda p, s: DecimalType(p, min(s, p)), st.integers(1, 38), st.integers(0, 38))
# keys of maps must be hashable once decoded: atomic (not null/float NaN) or arrays/structs of those
key_types = st.sampled_from([t for t in ATOMIC if not isinstance(t, NullType)]) | decimals
names = st.text(st.characters(codec="utf-8", categories=("L", "N", "P", "Zs")), min_size=1, max_size=5)


def structs(inner: st.SearchStrategy[DataType]) -> st.SearchStrategy[StructType]:
    fields = st.lists(st.tuples(names, inner, st.booleans()), max_size=5, unique_by=lambda f: f[0])
    return fields.map(lambda fs: StructType(tuple(StructField(n, t, nullable) for n, t, nullable in fs)))


types: st.SearchStrategy[DataType] = st.recursive(
    st.sampled_from(ATOMIC) | decimals,
    lambda inner: (
        st.builds(ArrayType, inner, st.booleans())
        | st.builds(MapType, key_types | st.builds(ArrayType, key_types, st.just(False)), inner, st.booleans())
        | structs(inner)
    ),
    max_leaves=6,
)


def values_of(t: DataType, nullable: bool = True) -> st.SearchStrategy[Any]:
    inner = _non_null(t)
    return st.none() | inner if nullable else inner


def _non_null(t: DataType) -> st.SearchStrategy[Any]:
    if isinstance(t, NullType):
        return st.none()
    if isinstance(t, BooleanType):
        return st.booleans()
    ints: dict[type[DataType], int] = {ByteType: 8, ShortType: 16, IntegerType: 32, LongType: 64}
    if type(t) in ints:
        bits = ints[type(t)]
        return st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    if isinstance(t, FloatType):
        return st.floats(width=32, allow_nan=False)
    if isinstance(t, DoubleType):
        return st.floats(allow_nan=False)
    if isinstance(t, StringType):
        return st.text(max_size=20)
    if isinstance(t, BinaryType):
        return st.binary(max_size=20)
    if isinstance(t, DateType):
        return st.dates()
    if isinstance(t, TimestampType):
        return st.datetimes(timezones=st.just(UTC))
    if isinstance(t, TimestampNTZType):
        return st.datetimes()
    if isinstance(t, DecimalType):
        limit = 10**t.precision - 1
        return st.integers(-limit, limit).map(lambda u: Decimal(f"{u}e-{t.scale}"))
    if isinstance(t, ArrayType):
        return st.lists(values_of(t.element_type, t.contains_null), max_size=4)
    if isinstance(t, MapType):
        keys = values_of(t.key_type, nullable=False).map(lambda k: tuple(k) if isinstance(k, list) else k)
        return st.dictionaries(keys, values_of(t.value_type, t.value_contains_null), max_size=3)
    assert isinstance(t, StructType)
    return st.fixed_dictionaries({f.name: values_of(f.data_type, f.nullable) for f in t.fields})


@st.composite
def schemas_and_rows(draw: st.DrawFn) -> tuple[StructType, dict[str, Any]]:
    s = draw(structs(types))
    return s, draw(values_of(s, nullable=False))


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(schemas_and_rows())
def test_round_trip(case: tuple[StructType, dict[str, Any]]) -> None:
    s, values = case
    data = encode_row(values, s)
    assert len(data) % 8 == 0
    assert decode_row(data, s) == values
    assert parse_schema(s.json()) == s


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(schemas_and_rows(), st.data())
def test_corruption_never_crashes(case: tuple[StructType, dict[str, Any]], data: st.DataObject) -> None:
    """Any byte flipped, any truncation: a value or a FormatError inside the row, nothing else."""
    s, values = case
    row = bytearray(encode_row(values, s))
    if row:
        i = data.draw(st.integers(0, len(row) - 1))
        row[i] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(row)))
    for candidate in (bytes(row), bytes(row[:cut])):
        try:
            decode_row(candidate, s, "p", 100)
        except FormatError as exc:
            assert 100 <= exc.offset <= 100 + len(candidate)
            assert exc.kind in ("bad-row", "out-of-bounds", "bad-value")


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(schemas_and_rows(), st.data())
def test_fast_path_agrees_with_the_careful_decoder(
    case: tuple[StructType, dict[str, Any]], data: st.DataObject
) -> None:
    """Whatever the fast path returns, the field-by-field decoder returns too, for intact and
    damaged rows alike; when it gives up, decode_row is the careful decoder."""
    from ckptfix.formats.unsaferow import _careful_row, _compiled, _Slow

    s, values = case
    row = bytearray(encode_row(values, s))
    if row:
        i = data.draw(st.integers(0, len(row) - 1))
        row[i] = data.draw(st.integers(0, 255))
    for candidate in (bytes(encode_row(values, s)), bytes(row)):
        try:
            fast = _compiled(s)(candidate, "p", 0)
        except _Slow:
            continue
        except FormatError as exc:  # a nested value the careful decoder judged
            with pytest.raises(FormatError) as careful:
                _careful_row(candidate, s, "p", 0)
            assert (careful.value.offset, careful.value.kind) == (exc.offset, exc.kind)
            continue
        # compared by repr: a damaged double may decode to NaN, which equals no NaN (not even itself)
        assert repr(_careful_row(candidate, s, "p", 0)) == repr(fast)
