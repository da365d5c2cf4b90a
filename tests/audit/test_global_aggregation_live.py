"""An aggregation without grouping keys keeps its state in ``state/0/0`` only, whatever the partition count: Spark
requires all of its input in one task (AllTuples). The audit predicted a failure for every such checkpoint
("state/0/1 is missing"); real Spark 4.3 and 3.5.9 restart it with the right count. tests/audit/global_agg_driver.py
builds and restarts the query (4 shuffle partitions, 3 input files of 5 rows, then a fourth)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ckptfix.audit import audit
from ckptfix.cli.main import app
from tests.audit import global_agg_driver as driver

pytestmark = pytest.mark.spark
DRIVER = Path(driver.__file__)


def _check(workdir: Path, target: str, restart: Any) -> None:
    ckpt = workdir / "ckpt"
    assert sorted(p.name for p in (ckpt / "state" / "0").iterdir() if p.name.isdigit()) == ["0"]
    report = audit(str(ckpt), target_spark=target)
    assert report.verdict.restarts is True, report.verdict
    assert not [f for f in report.findings if f.severity == "error"], report.findings
    result = restart()
    assert result["error"] is None, result["error"]
    assert result["batches"][-1][1] == [4 * driver.ROWS_PER_FILE], result


def test_spark43_restarts_a_global_count(spark: Any, tmp_path: Path) -> None:
    for i in range(3):
        driver.write_input(tmp_path, i)
    assert driver.run(spark, tmp_path)["error"] is None
    refused = CliRunner().invoke(app, ["state", "repartition", str(tmp_path / "ckpt"), "--partitions", "8"])
    assert refused.exit_code == 2 and "without grouping keys" in refused.output, refused.output

    def restart() -> Any:
        driver.write_input(tmp_path, 3)
        return driver.run(spark, tmp_path)

    _check(tmp_path, "4.3", restart)


def test_spark35_restarts_a_global_count(py35: Path, tmp_path: Path) -> None:
    def run35(phase: str) -> Any:
        proc = subprocess.run(
            [str(py35), str(DRIVER), str(tmp_path), phase],
            capture_output=True,
            text=True,
            timeout=600,
            env={**os.environ, "PYSPARK_PYTHON": str(py35)},
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        return json.loads(proc.stdout.strip().splitlines()[-1])

    assert run35("build")["error"] is None
    _check(tmp_path, "3.5", lambda: run35("restart"))
