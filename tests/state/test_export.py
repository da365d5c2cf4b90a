"""Row writers: the compiled JSON-lines encoder writes exactly what the generic one does, for
rows of any schema; parallel workers give the same rows as one process."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from typer.testing import CliRunner

from ckptfix.cli.main import app
from ckptfix.formats.unsaferow import IntegerType, StructType, decode_row, encode_row
from ckptfix.state.export import csv_header, csv_line_maker, json_line_maker, to_json_line
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
    assert line == to_json_line(row) + "\n"
    json.loads(line)  # and it is JSON
    cols = ["key", "value", "partition_id"]
    header = next(csv.reader(io.StringIO(csv_header(cols, schemas))))
    cells = next(csv.reader(io.StringIO(csv_line_maker(cols, schemas)(row))))
    assert len(header) == len(cells) == len(ks.fields) + len(vs.fields) + 1


def test_parallel_workers_give_the_same_rows(tmp_path: Path) -> None:
    runner = CliRunner()
    for fmt in ("jsonl", "csv"):
        one = runner.invoke(app, ["state", "read", TWO_PARTITIONS, "-f", fmt, "-j", "1"])
        out = tmp_path / f"rows.{fmt}"
        many = runner.invoke(app, ["state", "read", TWO_PARTITIONS, "-f", fmt, "-j", "4", "--out", str(out)])
        assert one.exit_code == 0 and many.exit_code == 0, many.output
        assert sorted(one.stdout.splitlines()) == sorted(out.read_text().splitlines())
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

    from ckptfix.state.export import _arrow_column, _arrow_type, _arrow_value

    (s, v1), (_, _) = a, b
    values = [decode_row(encode_row(v1, s), s), None]
    row_wise = pa.array([_arrow_value(s, v) for v in values], type=_arrow_type(s))
    assert _arrow_column(s, values).to_pylist() == row_wise.to_pylist()
