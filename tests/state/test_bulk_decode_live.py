"""The bulk state decoder on checkpoints written live by Spark (local[2]) from rows full of edge values: null
keys and values, NaN, -0.0, infinities, empty and non-ASCII strings, binary keys, dates, timestamps and
decimals, over two micro-batches (so deltas/changelogs overlay the first version). Each provider's state at
every version is read in bulk and row by row: the same Arrow table (types included) and the same JSON lines."""

from __future__ import annotations

import datetime as dt
import decimal
import os
from pathlib import Path
from typing import Any

import pytest

from tests.state import scenarios as S
from tests.state.test_bulk_decode import _compare

pytestmark = pytest.mark.spark
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

NAN, INF = float("nan"), float("inf")
SCHEMA = pa.schema(
    [
        ("s", pa.string()),
        ("i", pa.int32()),
        ("flag", pa.bool_()),
        ("day", pa.date32()),
        ("bin", pa.binary()),
        ("dbl", pa.float64()),
        ("flt", pa.float32()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("dec", pa.decimal128(10, 2)),
        ("note", pa.string()),
    ]
)
D0 = dt.date(1970, 1, 1)
T0 = dt.datetime(2024, 2, 29, 23, 59, 59, 999999, tzinfo=dt.timezone.utc)
BATCHES = [
    [
        ("", 0, True, D0, b"", -0.0, -0.0, T0, decimal.Decimal("-0.01"), ""),
        ("é日本語\U0001f600", -1, False, dt.date(1, 1, 1), b"\x00\xff", NAN, NAN, None, None, 'a"b\\c\nd'),
        (None, None, None, None, None, None, None, None, None, None),
        (
            "k",
            2**31 - 1,
            True,
            dt.date(9999, 12, 31),
            b"k",
            INF,
            -INF,
            dt.datetime(1, 1, 1, tzinfo=dt.timezone.utc),
            decimal.Decimal("99999999.99"),
            "x",
        ),
    ],
    [  # updates two keys, adds one
        ("", 0, True, D0, b"", 1.5, 2.5, T0, decimal.Decimal("1.00"), "second"),
        (None, None, None, None, None, 0.0, None, None, None, None),
        ("new", -(2**31), False, D0, b"\x01", -INF, 0.0, T0, decimal.Decimal("0"), "\t"),
    ],
]


def _write_inputs(src: Path) -> None:
    src.mkdir(parents=True)
    for b, rows in enumerate(BATCHES):
        table = pa.Table.from_pylist([dict(zip(SCHEMA.names, r, strict=True)) for r in rows], schema=SCHEMA)
        path = src / f"part-{b}.parquet"
        pq.write_table(table, path)
        os.utime(path, (1_700_000_000 + 60 * b, 1_700_000_000 + 60 * b))


@pytest.mark.parametrize("provider", ["hdfs", "rocksdb_cl", "rocksdb"])
def test_bulk_equals_row_by_row_on_edge_values(spark: Any, tmp_path: Path, provider: str) -> None:
    from pyspark.sql import functions as F

    src, ckpt = tmp_path / "in", tmp_path / "ckpt"
    _write_inputs(src)
    with S.session_confs(spark, {**S.PROVIDERS[provider], "spark.sql.session.timeZone": "UTC"}):
        df = (
            spark.readStream.schema(spark.read.parquet(str(src)).schema)
            .option("maxFilesPerTrigger", 1)
            .parquet(str(src))
        )
        agg = df.groupBy("s", "i", "flag", "day", "bin").agg(
            F.count("*").alias("n"),
            F.max("dbl").alias("dbl"),
            F.min("flt").alias("flt"),
            F.max("ts").alias("ts"),
            F.max("dec").alias("dec"),
            F.last("note").alias("note"),
        )
        query = (
            agg.writeStream.format("noop")
            .outputMode("update")
            .option("checkpointLocation", str(ckpt))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(300)
    assert S.committed_batches(ckpt) == [0, 1]
    compared, bulk = _compare(ckpt, {})
    assert compared >= 2 and bulk == compared, (compared, bulk)


def _floats(value: dict[str, Any]) -> tuple[Any, ...]:
    # the aggregation buffer's fields (max(dbl), min(flt)); to_json leaves null fields out
    return tuple(value.get(k) for k in ("max", "min"))


def test_nan_and_infinities_print_as_spark_prints_them(spark: Any, tmp_path: Path) -> None:
    """`state read --format jsonl` writes NaN, Infinity and -Infinity as Spark's own JSON does (Spark's statestore
    reader + to_json on the same checkpoint: "NaN", "Infinity", "-Infinity"), not Python's nan/inf."""
    import json

    from pyspark.sql import functions as F
    from typer.testing import CliRunner

    from ckptfix.cli.main import app

    src, ckpt = tmp_path / "in", tmp_path / "ckpt"
    _write_inputs(src)
    with S.session_confs(spark, {**S.PROVIDERS["hdfs"], "spark.sql.session.timeZone": "UTC"}):
        df = spark.readStream.schema(spark.read.parquet(str(src)).schema).option("maxFilesPerTrigger", 1)
        agg = df.parquet(str(src)).groupBy("s", "i").agg(F.max("dbl").alias("dbl"), F.min("flt").alias("flt"))
        query = (
            agg.writeStream.format("noop")
            .outputMode("update")
            .option("checkpointLocation", str(ckpt))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(300)
    spark_json = {
        json.dumps(json.loads(r[0]), sort_keys=True): json.loads(r[1])
        for r in spark.read.format("statestore").load(str(ckpt)).select(F.to_json("key"), F.to_json("value")).collect()
    }
    result = CliRunner().invoke(app, ["state", "read", str(ckpt), "--format", "jsonl"])
    assert result.exit_code == 0, result.output
    ours = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    assert len(ours) == len(spark_json) == 5
    words = set()
    for row in ours:
        theirs = spark_json[json.dumps({k: v for k, v in row["key"].items() if v is not None}, sort_keys=True)]
        for mine, spark_value in zip(_floats(row["value"]), _floats(theirs), strict=True):
            if isinstance(spark_value, str):
                assert mine == spark_value
                words.add(mine)
            else:
                assert mine == spark_value or (mine is None and spark_value is None)
    assert words == {"NaN", "Infinity", "-Infinity"}, (ours, spark_json)
