"""Row writers: the compiled JSON-lines encoder writes the values the generic one does, for rows of any schema,
under Spark's field names and with floats as Java prints them; parallel workers give the same rows as one
process."""

from __future__ import annotations

import csv
import io
import json
import math
import struct
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from typer.testing import CliRunner

from ckptfix.cli.main import app
from ckptfix.formats.unsaferow import IntegerType, StringType, StructField, StructType, decode_row, encode_row
from ckptfix.state.export import (
    csv_header,
    csv_line_maker,
    java_double_text,
    java_float_text,
    json_line_maker,
    to_json_line,
)
from tests.formats.test_unsaferow import schemas_and_rows
from tests.state.test_read_fixtures import FIXTURES

TWO_PARTITIONS = str(FIXTURES.parent / "state_rowchecksum" / "hdfs")  # real 4.3 checkpoint, 2 partitions


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(schemas_and_rows(), schemas_and_rows())
def test_compiled_json_lines_equal_the_generic_ones(
    key: tuple[StructType, dict[str, Any]], value: tuple[StructType, dict[str, Any]]
) -> None:
    (ks, kv), (vs, vv) = key, value
    row = {"key": decode_row(encode_row(kv, ks), ks), "value": decode_row(encode_row(vv, vs), vs), "partition_id": 3}
    schemas = {"key": ks, "value": vs, "partition_id": IntegerType()}
    line = json_line_maker(["key", "value", "partition_id"], schemas)(row)
    compiled = json.loads(line, object_pairs_hook=lambda pairs: pairs)  # names as written, repeats kept
    generic = json.loads(to_json_line(row), object_pairs_hook=lambda pairs: pairs)
    assert [n for n, _ in compiled] == ["key", "value", "partition_id"]
    assert [n for n, _ in compiled[0][1]] == list(ks.names) and [n for n, _ in compiled[1][1]] == list(vs.names)
    assert _same(compiled, generic), (line, to_json_line(row))
    cols = ["key", "value", "partition_id"]
    header = next(csv.reader(io.StringIO(csv_header(cols, schemas))))
    cells = next(csv.reader(io.StringIO(csv_line_maker(cols, schemas)(row))))
    assert len(header) == len(cells) == len(ks.fields) + len(vs.fields) + 1


def _same(a: Any, b: Any) -> bool:
    """Equal JSON values, where a float of the compiled line may be the shortest text of the 32-bit float the
    generic line prints in full (0.1 for 0.10000000149011612); names are compared by position, not text (the
    generic line writes a repeated name as ``sum#1``)."""
    if isinstance(a, list) and isinstance(b, list):
        pairs = all(isinstance(x, tuple) for x in a + b)
        if pairs:
            return len(a) == len(b) and all(_same(x[1], y[1]) for x, y in zip(a, b, strict=True))
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, (float, int)) and not isinstance(b, bool):
        f32 = struct.Struct("<f")
        return a == b or (abs(b) < 3.5e38 and f32.unpack(f32.pack(a)) == f32.unpack(f32.pack(b)))
    return type(a) is type(b) and a == b


@pytest.mark.parametrize(
    ("value", "text"),
    [  # Java's Double.toString (its javadoc's layout rules; MIN_VALUE and MAX_VALUE as Java prints them)
        (0.0, "0.0"),
        (-0.0, "-0.0"),
        (100.0, "100.0"),
        (0.001, "0.001"),
        (9999999.0, "9999999.0"),
        (1e7, "1.0E7"),
        (12345678.9, "1.23456789E7"),
        (9e-4, "9.0E-4"),
        (1.5e-5, "1.5E-5"),
        (-2.5e-10, "-2.5E-10"),
        (1e20, "1.0E20"),
        (5e-324, "4.9E-324"),
        (1.7976931348623157e308, "1.7976931348623157E308"),
        (math.nan, "NaN"),
        (-math.inf, "-Infinity"),
    ],
)
def test_double_text_as_java_prints_it(value: float, text: str) -> None:
    assert java_double_text(value) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [  # Java's Float.toString of the 32-bit float nearest to value
        (0.1, "0.1"),
        (0.3, "0.3"),
        (2.5, "2.5"),
        (1234567.0, "1234567.0"),
        (12345678.0, "1.2345678E7"),
        (1e10, "1.0E10"),
        (3.4028234663852886e38, "3.4028235E38"),
        (1.401298464324817e-45, "1.4E-45"),
        (1e-3, "0.001"),
    ],
)
def test_float_text_as_java_prints_it(value: float, text: str) -> None:
    f32 = struct.Struct("<f")
    assert java_float_text(f32.unpack(f32.pack(value))[0]) == text


def test_parallel_workers_give_the_same_rows(tmp_path: Path) -> None:
    runner = CliRunner()
    for fmt in ("jsonl", "csv"):
        one = runner.invoke(app, ["state", "read", TWO_PARTITIONS, "-f", fmt, "-j", "1"])
        out = tmp_path / f"rows.{fmt}"
        many = runner.invoke(app, ["state", "read", TWO_PARTITIONS, "-f", fmt, "-j", "4", "--out", str(out)])
        assert one.exit_code == 0 and many.exit_code == 0, many.output
        assert one.stdout.splitlines() == out.read_text().splitlines()  # the same rows in the same order
        assert len(one.stdout.splitlines()) == 4 + (fmt == "csv")


def test_parallel_parquet_equals_one_process(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    runner = CliRunner()
    tables = []
    for jobs in ("1", "3"):
        out = tmp_path / f"rows-{jobs}.parquet"
        res = runner.invoke(
            app,
            ["state", "read", str(FIXTURES / "hdfs"), "--version", "4", "-f", "parquet", "-j", jobs, "--out", str(out)],
        )
        assert res.exit_code == 0, res.output
        tables.append(sorted(map(str, pq.read_table(out).to_pylist())))
    assert tables[0] == tables[1] and len(tables[0]) == 4


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(schemas_and_rows(), schemas_and_rows())
def test_column_wise_arrow_equals_row_wise(
    a: tuple[StructType, dict[str, Any]], b: tuple[StructType, dict[str, Any]]
) -> None:
    """Parquet columns are built field by field; the values equal Arrow's own row-wise build."""
    import pyarrow as pa

    from ckptfix.state.export import _arrow_type, _arrow_value, arrow_column

    (s, v1), (_, _) = a, b
    values = [decode_row(encode_row(v1, s), s), None]
    row_wise = pa.array([_arrow_value(s, v) for v in values], type=_arrow_type(s))
    assert arrow_column(s, values).to_pylist() == row_wise.to_pylist()


def test_a_carriage_return_in_a_string_is_quoted_in_csv() -> None:
    """Python's csv writer quotes only its terminator's characters: a bare \\r in a cell ended the line for every
    reader (found by the property test above: a string value '\\r')."""
    schemas = {"key": StructType((StructField("s", StringType(), False),)), "partition_id": IntegerType()}
    text = csv_line_maker(["key", "partition_id"], schemas)({"key": {"s": "a\rb"}, "partition_id": 0})
    assert text.endswith("\n") and not text.endswith("\r\n")
    assert next(csv.reader(io.StringIO(text))) == ["a\rb", "0"]
