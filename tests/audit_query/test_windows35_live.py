"""Spark 3.5 builds ``window(...)`` differently (functions.window makes a TimeWindow expression, 4.x an unresolved
function): a 3.5.9 process writes the tumbling base of test_windows_live and plans the changed queries with
ckptfix's own planner (``ckptfix.spark.queryshape.describe``, as ``audit --against`` does under a 3.5 PySpark);
the audit here compares those shapes with the 3.5 checkpoint."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

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


@pytest.fixture(scope="module")
def written35(py35: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """The tumbling base written by Spark 3.5.9, and the shapes its planner gives (one 3.5 process per module)."""
    tmp_path = tmp_path_factory.mktemp("windows35")
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
    got: dict[str, Any] = json.loads(line[len("SHAPES ") :])
    return tmp_path, got


def test_spark35_windows_are_read_from_its_plan(written35: tuple[Path, dict[str, Any]]) -> None:
    tmp_path, got = written35
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


@pytest.mark.parametrize("target", ["3.5", "4.3"])
def test_the_unchanged_window_query_planned_by_43_restarts_a_35_checkpoint(
    spark: Any, written35: tuple[Path, dict[str, Any]], monkeypatch: pytest.MonkeyPatch, target: str
) -> None:
    """Hunt 12, F1: `audit --against` with the unchanged windowed aggregation on a checkpoint written by 3.5-4.2
    said "will fail with STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE" (on 3.5, 4.0, 4.2 and 4.3 alike), where Spark
    restarted with the right rows. The --against query was planned with the confs the offset log records only, so
    PySpark 4.3's alwaysNullableOutput=true made the window struct nullable; a restart plans with Spark's legacy
    default for the keys the log lacks (false here), and so does the audit now."""
    from typer.testing import CliRunner

    from ckptfix.cli.main import app

    root, _ = written35
    monkeypatch.setenv("CKPTFIX_AQ_INPUT", str(root / "input"))
    monkeypatch.setenv("CKPTFIX_AQ_OUTPUT", str(root / "out"))
    args = ["audit", str(root / "ckpt"), "--target-spark", target, "-f", "json", "-q"]
    res = CliRunner().invoke(app, [*args, "--against", "tests.audit_query.queries.windows:tumbling"])
    doc = json.loads(res.stdout)
    assert doc["verdict"]["restarts"] is True, doc["verdict"]
    assert [f["rule_id"] for f in doc["findings"] if f["rule_id"].startswith("QUERY-")] == []
