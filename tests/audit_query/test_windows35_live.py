"""Spark 3.5 builds ``window(...)`` differently (functions.window makes a TimeWindow expression, 4.x an unresolved
function): a 3.5.9 process writes the tumbling base of test_windows_live and plans the changed queries with
ckptfix's own planner (``ckptfix.spark.queryshape.describe``, as ``audit --against`` does under a 3.5 PySpark);
the audit here compares those shapes with the 3.5 checkpoint."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from ckptfix.audit import audit
from ckptfix.audit.queryshape import OperatorShape, QueryShape, SinkShape, SourceShape, StoreShape, WindowShape
from tests.audit_query.test_windows_live import BASE_FILES, write_files

pytestmark = pytest.mark.spark  # starts Spark (a 3.5 subprocess)

ROOT = Path(__file__).resolve().parents[2]
SPARK35 = """
import dataclasses, json, os, sys
from pyspark.sql import SparkSession
from ckptfix.spark.queryshape import describe
from ckptfix.spark.usercode import load_writer
spark = (SparkSession.builder.master("local[2]").config("spark.sql.shuffle.partitions", "3")
         .config("spark.sql.session.timeZone", "UTC").config("spark.ui.enabled", "false").getOrCreate())
root = sys.argv[1]
q = load_writer("tests.audit_query.queries.windows:tumbling", spark)
q = q.option("checkpointLocation", root + "/ckpt").trigger(availableNow=True).start()
q.awaitTermination()
shapes = {}
for fn in ("tumbling", "longer", "sliding", "shifted"):
    shape = describe("tests.audit_query.queries.windows:" + fn, spark)
    shapes[fn] = [dataclasses.asdict(op) for op in shape.operators]
print("SHAPES " + json.dumps({"version": spark.version, "error": str(q.exception()), "shapes": shapes}))
"""


def _operator(d: dict) -> OperatorShape:  # type: ignore[type-arg]
    window = WindowShape(**d["window"]) if d["window"] else None
    return OperatorShape(d["operator_id"], d["name"], d["node"], (StoreShape("default"),), window=window)


def test_spark35_windows_are_read_from_its_plan(py35: Path, tmp_path: Path) -> None:
    write_files(tmp_path / "input", BASE_FILES)
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "PYSPARK_PYTHON": str(py35),
        "CKPTFIX_AQ_INPUT": str(tmp_path / "input"),
        "CKPTFIX_AQ_OUTPUT": str(tmp_path / "out"),
    }
    proc = subprocess.run(
        [str(py35), "-c", SPARK35, str(tmp_path)], capture_output=True, text=True, timeout=600, env=env, cwd=ROOT
    )
    line = next((x for x in proc.stdout.splitlines() if x.startswith("SHAPES ")), None)
    assert line is not None, proc.stderr[-3000:]
    got = json.loads(line[len("SHAPES ") :])
    assert got["version"].startswith("3.5") and got["error"] == "None"
    windows = {fn: [op["window"] for op in ops] for fn, ops in got["shapes"].items()}
    # window(ts, D, slide, startTime) as the query modules write them, in microseconds; the key is (window, k)
    assert windows == {
        "tumbling": [{"field": 0, "duration": 10_000_000, "slide": 10_000_000, "offset": 0}],
        "longer": [{"field": 0, "duration": 20_000_000, "slide": 20_000_000, "offset": 0}],
        "sliding": [{"field": 0, "duration": 10_000_000, "slide": 5_000_000, "offset": 0}],
        "shifted": [{"field": 0, "duration": 10_000_000, "slide": 10_000_000, "offset": 3_000_000}],
    }
    expected = {"tumbling": None, "longer": "last 10 s", "sliding": "no other window", "shifted": "never start at"}
    for fn, needle in expected.items():
        shape = QueryShape(
            spec=f"windows:{fn}",
            spark_version=got["version"],
            sources=(SourceShape("file", {"format": "json"}),),
            sink=SinkShape("parquet", {"path": str(tmp_path / "out")}, "append"),
            operators=tuple(_operator(op) for op in got["shapes"][fn]),
        )
        report = audit(str(tmp_path / "ckpt"), "3.5", query=shape)
        found = [f for f in report.findings if f.rule_id == "QUERY-WINDOW"]
        assert [needle in f.message for f in found] == ([] if needle is None else [True]), (fn, found)
