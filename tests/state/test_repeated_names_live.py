"""An aggregation buffer repeats field names (``agg(sum(x), sum(y), first(x), first(y))`` stores ``sum``, ``sum``,
``first``, ``valueSet``, ``first``, ``valueSet``). ``state read`` writes such a value as Spark's own JSON does:
the same text as ``toJSON()`` of Spark's ``statestore`` reader, repeated names included; and ``state put``
takes those lines back, each repeated name by its position (the last one does not silently win)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ckptfix.cli.main import app
from tests.state import scenarios as S
from tests.support.settle import settle

pytestmark = pytest.mark.spark

ROWS = [  # doubles in each of Java's layouts (plain, 1.0E20, 1.5E-5, 1.23456789E7); y as a float too
    [{"k": "a", "x": 1, "y": 2.5}, {"k": "b", "x": 3, "y": 4.0}, {"k": "a", "x": 5, "y": -1.25}],
    [{"k": "c", "x": 7, "y": 1.5e-5}, {"k": "b", "x": 11, "y": 1e20}, {"k": "d", "x": 2, "y": 12345678.9}],
]
NAMES = ["sum", "sum", "first", "valueSet", "first", "valueSet", "first", "valueSet"]


def _checkpoint(spark: Any, tmp_path: Path, provider: str) -> Path:
    from pyspark.sql import functions as F

    src, ckpt = tmp_path / "in", tmp_path / "ckpt"
    src.mkdir()
    for b, rows in enumerate(ROWS):
        path = src / f"part-{b}.json"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        os.utime(path, (1_700_000_000 + 60 * b,) * 2)
    with S.session_confs(spark, {**S.PROVIDERS[provider], **S.COMMON_CONFS}, S.CONF_KEYS):
        df = spark.readStream.schema("k STRING, x LONG, y DOUBLE").option("maxFilesPerTrigger", 1).json(str(src))
        agg = df.groupBy("k").agg(F.sum("x"), F.sum("y"), F.first("x"), F.first("y"), F.first(F.col("y").cast("float")))
        query = (
            agg.writeStream.format("noop")
            .outputMode("update")
            .option("checkpointLocation", str(ckpt))
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(300)
        assert query.exception() is None
    settle(spark, ckpt)
    return ckpt


def _spark_lines(spark: Any, ckpt: Path) -> list[str]:
    df = spark.read.format("statestore").load(str(ckpt))
    names = df.schema["value"].dataType.names
    assert names == NAMES, names
    return sorted(df.select("key", "value", "partition_id").toJSON().collect())


@pytest.mark.parametrize("provider", ["hdfs", "rocksdb_cl"])
def test_state_read_writes_repeated_names_as_spark_does(spark: Any, tmp_path: Path, provider: str) -> None:
    ckpt = _checkpoint(spark, tmp_path, provider)
    want = _spark_lines(spark, ckpt)
    assert len(want) == 4 and any("1.0E20" in w for w in want) and any("1.23456789E7" in w for w in want), want
    for jobs in ("1", "2"):
        result = CliRunner().invoke(app, ["state", "read", str(ckpt), "-q", "--jobs", jobs])
        assert result.exit_code == 0, result.output
        assert sorted(result.stdout.splitlines()) == want, jobs


def test_state_put_takes_read_lines_back(spark: Any, tmp_path: Path) -> None:
    ckpt = _checkpoint(spark, tmp_path, "hdfs")
    result = CliRunner().invoke(app, ["state", "read", str(ckpt), "-q"])
    assert result.exit_code == 0, result.output
    line = next(x for x in result.stdout.splitlines() if '"k":"b"' in x)
    # b's value, edited as text: the second `sum` (of y) and the second `first` (of y) change, nothing else
    edited = line.replace('"sum":1.0E20', '"sum":9.5').replace('"first":4.0', '"first":-2.0', 1)
    assert edited.count("9.5") == 1 and edited.count("-2.0") == 1, line
    rows = tmp_path / "rows.jsonl"
    rows.write_text(edited + "\n")
    for p in ckpt.rglob("*"):
        os.utime(p, (time.time() - 3600,) * 2)
    result = CliRunner().invoke(app, ["state", "put", str(ckpt), "--rows", str(rows), "--apply"])
    assert result.exit_code == 0, result.output
    got = {r["key"]["k"]: tuple(r["value"]) for r in spark.read.format("statestore").load(str(ckpt)).collect()}
    assert got["b"] == (14, 9.5, 3, True, -2.0, True, 4.0, True)
    assert got["a"] == (6, 1.25, 1, True, 2.5, True, 2.5, True)
    assert got["c"] == (7, 1.5e-5, 7, True, 1.5e-5, True, pytest.approx(1.5e-5, rel=1e-7), True)
