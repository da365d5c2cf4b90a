"""A streaming global limit keeps its state in partition 0 only (StreamingGlobalLimitExec runs in one task)
although its operator metadata records the shuffle partitions: the audit must not call partitions 1..N-1
missing, must agree with `state ls`, and Spark 4.3 restarts it (issue 15 #4). Written live by the test
session's PySpark (3 shuffle partitions)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ckptfix.audit import audit
from ckptfix.cli.main import app

pytestmark = pytest.mark.spark
LIMIT = 6


def run(spark: Any, base: Path, files: int) -> list[Any]:
    (base / "in").mkdir(parents=True, exist_ok=True)
    for i in range(files):
        (base / "in" / f"f{i}.json").write_text("".join(json.dumps({"k": f"k{i}{j}"}) + "\n" for j in range(4)))
    rows: list[Any] = []
    query = (
        spark.readStream.schema("k STRING")
        .option("maxFilesPerTrigger", 1)
        .json(str(base / "in"))
        .limit(LIMIT)
        .writeStream.outputMode("append")
        .foreachBatch(lambda df, _: rows.extend(df.collect()))
        .option("checkpointLocation", str(base / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(300)
    assert query.exception() is None, query.exception()
    return rows


def test_global_limit_state_is_one_partition(spark: Any, tmp_path: Path) -> None:
    assert run(spark, tmp_path, 3) and len(run(spark, tmp_path, 3)) == 0  # the limit reached: nothing more
    ckpt = tmp_path / "ckpt"
    parts = sorted(p.name for p in (ckpt / "state" / "0").iterdir() if p.name.isdigit())
    assert parts == ["0"] and spark.conf.get("spark.sql.shuffle.partitions") == "3"

    report = audit(str(ckpt), "4.3")
    assert report.verdict.restarts is True, report.verdict.headline
    assert not [f for f in report.findings if f.rule_id.startswith("STATE-PARTITION")]
    listing = CliRunner().invoke(app, ["state", "ls", str(ckpt), "--verify", "--format", "json"])
    assert listing.exit_code == 0, listing.output
    doc = json.loads(listing.stdout)
    assert doc["ok"] and [p["partition"] for p in doc["operators"][0]["partitions"]] == [0]

    assert run(spark, tmp_path, 4) == []  # Spark restarts it; the limit still holds


SPARK35 = r"""
import json, os, sys
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
from pyspark.sql import SparkSession
base = sys.argv[1]
spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", "3").getOrCreate())
os.makedirs(f"{base}/in", exist_ok=True)
for i in range(3):
    with open(f"{base}/in/f{i}.json", "w") as f:
        f.write("".join(json.dumps({"k": f"k{i}{j}"}) + "\n" for j in range(4)))
q = (spark.readStream.schema("k STRING").option("maxFilesPerTrigger", 1).json(f"{base}/in").limit(6)
     .writeStream.outputMode("append").foreachBatch(lambda df, b: df.collect())
     .option("checkpointLocation", f"{base}/ckpt").trigger(availableNow=True).start())
q.awaitTermination(300)
print("RESULT", spark.version, q.exception())
"""


def test_spark35_global_limit_is_told_by_its_schema(spark: Any, py35: Path, tmp_path: Path) -> None:
    """3.5 writes no operator metadata: the audit recognises the limit by its state schema; 4.3 restarts it."""
    import subprocess

    proc = subprocess.run([str(py35), "-c", SPARK35, str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert "RESULT 3.5" in proc.stdout and proc.stdout.strip().endswith("None"), proc.stderr[-2000:]
    ckpt = tmp_path / "ckpt"
    assert not (ckpt / "state" / "0" / "_metadata").exists()
    assert sorted(p.name for p in (ckpt / "state" / "0").iterdir()) == ["0"]
    for target in ("3.5", "4.3"):
        report = audit(str(ckpt), target)
        assert report.verdict.restarts is True, (target, report.verdict.headline)
    assert run(spark, tmp_path, 4) == []  # the live 4.3 session restarts it; the limit still holds
