"""DDL schema strings -> StructType, compared with what Spark's own DDL parser builds."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ckptfix.errors import FormatError
from ckptfix.formats import unsaferow
from ckptfix.formats.ddl import parse_data_type, parse_ddl
from ckptfix.formats.unsaferow import (
    ArrayType,
    DecimalType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
)

# Spark 4.3's StructType.fromDDL accepts all of these (the live test below checks it again).
ACCEPTED = [
    "a INT, b STRUCT<c: STRING, d: ARRAY<DECIMAL(20,2)>>, m MAP<STRING,BIGINT> NOT NULL, `weird name` TIMESTAMP_NTZ",
    "a tinyint, b byte, c smallint, d short, e integer, f long, g real, h float, i double, j date, "
    "k timestamp, l timestamp_ltz, m string, n binary, o boolean, p void, q int, r bigint",
    "a varchar(10), b char(3), c decimal, d dec, e numeric, f dec(5), g numeric(7,3), h decimal(38, 38)",
    "a Decimal ( 10 , 2 ), b DECIMAL(05,2), c decimal(0,0), d decimal(10)",
    "a int COMMENT 'hello', b string not null comment 'x''y', c long comment \"dq\"",
    "a int comment 'a' 'b', b int comment 'x\\ny\\t\\u0041\\Z\\0\\%\\_\\\\\\'\\q', c int comment r'raw\\n'",
    "a int comment '\\101\\7'",
    "s struct<x int, y: string not null comment 'z'>, t STRUCT<>, u struct<`x y`: int, z:string>",
    "`a``b` int, `c.d` string, `` int, `é` long",
    "A INT, a INT, a date not null",
    "a array<int>, b map<string, array<struct<x:int>>>, c ARRAY< MAP < INT , STRUCT<p:ARRAY<BINARY>> > >",
    "select int, from string, not int, array array<int>, comment int, struct struct<int:int>, map map<int,int>",
    "1a int, _x int, a_1 BIGINT",
    "a INT NOT NULL COMMENT 'c', b struct<x:int>not null, c array<int> comment'c'",
    "a int /* one */, b /* two /* nested */ */ int -- the end",
    "  a \t int  ,\n b\tlong  ",
]


def spark_json(value: Any) -> Any:
    """Spark keeps CHAR(n)/VARCHAR(n) in a parsed schema; rows hold plain strings."""
    if isinstance(value, str) and (value.startswith("varchar(") or value.startswith("char(")):
        return "string"
    if isinstance(value, dict):
        return {k: spark_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [spark_json(v) for v in value]
    return value


def test_example() -> None:
    got = parse_ddl(ACCEPTED[0], "<--key-schema>")
    assert got == StructType(
        (
            StructField("a", IntegerType()),
            StructField(
                "b",
                StructType((StructField("c", StringType()), StructField("d", ArrayType(DecimalType(20, 2))))),
            ),
            StructField("m", MapType(StringType(), LongType()), nullable=False),
            StructField("weird name", TimestampNTZType()),
        )
    )
    # the JSON Spark writes for this schema (StructType.fromDDL(...).json() in Spark 4.3)
    assert got.json() == (
        '{"type":"struct","fields":[{"name":"a","type":"integer","nullable":true,"metadata":{}},'
        '{"name":"b","type":{"type":"struct","fields":[{"name":"c","type":"string","nullable":true,"metadata":{}},'
        '{"name":"d","type":{"type":"array","elementType":"decimal(20,2)","containsNull":true},"nullable":true,'
        '"metadata":{}}]},"nullable":true,"metadata":{}},{"name":"m","type":{"type":"map","keyType":"string",'
        '"valueType":"long","valueContainsNull":true},"nullable":false,"metadata":{}},'
        '{"name":"weird name","type":"timestamp_ntz","nullable":true,"metadata":{}}]}'
    )
    assert unsaferow.parse_schema(got.json()) == got


def test_details() -> None:
    s = parse_ddl(ACCEPTED[5])
    assert [f.metadata["comment"] for f in s.fields] == ["ab", "x\ny\tA\x1a\0\\%\\_\\'q", "raw\\n"]
    assert parse_ddl("a int comment '\\101\\7'").fields[0].metadata == {"comment": "A7"}
    assert parse_ddl("`a``b` int, `` int").names == ("a`b", "")
    assert parse_ddl("c decimal, d dec(5)").fields[0].data_type == DecimalType(10, 0)
    assert parse_ddl("d dec(5)").fields[0].data_type == DecimalType(5, 0)
    assert parse_ddl("v VARCHAR(3), c char(1)").fields[1].data_type == StringType()
    assert parse_data_type("MAP<STRING, ARRAY<INT>>") == MapType(StringType(), ArrayType(IntegerType()))


@pytest.mark.parametrize(
    ("ddl", "offset"),
    [
        ("", 0),
        ("a int,", 6),
        ("a int, b", 8),
        ("a: int", 1),  # a colon only inside STRUCT<>
        ("a int; b int", 5),
        ("a interval", 2),
        ("a int64", 2),
        ("a map<int>", 9),
        ("a array<int,int>", 11),
        ("a struct<b int,>", 15),
        ("a struct<x:int y:int>", 15),
        ("a int not null not null", 15),
        ("a int comment 'x' not null", 18),
        ("a int comment 'x' comment 'y'", 18),
        ("a int null", 6),
        ("a int default 5", 6),
        ("a decimal(10,-2)", 13),
        ("a decimal(10,)", 13),
        ("a decimal(39,0)", 9),
        ("a decimal(5,6)", 9),
        ("a decimal(1,2,3)", 9),
        ("a varchar", 9),
        ("a binary(5)", 8),
        ("a string(5)", 8),
        ("a timestamp(3)", 11),
        ("é int", 0),
        ("123 int", 0),
        ("a`b` int", 1),
        ("`a int", 0),
        ("a int comment 'unterminated", 14),
        ("a int comment", 13),
        ("a int /* open", 6),
        ("a array<int", 11),
        ("a struct<x int", 14),
    ],
)
def test_errors(ddl: str, offset: int) -> None:
    with pytest.raises(FormatError) as info:
        parse_ddl(ddl, "<--key-schema>")
    err = info.value
    assert (err.kind, err.offset, err.path) == ("bad-ddl", offset, "<--key-schema>")
    assert err.expected and err.found


# Spark's fromDDL rejects all of these as well
REJECTED = [
    "",
    "a int,",
    "a: int",
    "a int; b int",
    "a map<int>",
    "a array<int,int>",
    "a struct<b int,>",
    "a struct<x:int y:int>",
    "a int not null not null",
    "a int comment 'x' not null",
    "a int null",
    "a int default 5",
    "a decimal(10,-2)",
    "a decimal(39,0)",
    "a decimal(5,6)",
    "a varchar",
    "a binary(5)",
    "é int",
    "a`b` int",
    "a int comment 'unterminated",
]


@pytest.mark.spark
def test_same_as_spark(spark: Any) -> None:
    from_ddl = spark._jvm.org.apache.spark.sql.types.StructType.fromDDL
    for ddl in ACCEPTED:
        expected = spark_json(json.loads(from_ddl(ddl).json()))
        assert parse_ddl(ddl).json_value() == expected, ddl
    for ddl in REJECTED:
        with pytest.raises(Exception) as info:
            from_ddl(ddl)
        assert not isinstance(info.value, FormatError)
        with pytest.raises(FormatError):
            parse_ddl(ddl)
