"""A hand rollback of offsets/ and commits/ that left state/ (damage cases ``state_ahead_*``): the audit's
STATE-AHEAD fix, the command pasted as the finding writes it, and then two restarts with live Spark. Without the fix
the second restart is silently wrong for the HDFS case (tests/audit/test_restart_prediction.py, and the recorded
outcomes on 3.5.9 to 4.2.1), and for the RocksDB case with changelog checkpointing when maintenance comes after the
run (a session of its own, tests/spark/slow_maintenance.py), but not with state checkpoint format v2; with the fix
both restarts leave the right aggregates.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ckptfix.audit import audit
from ckptfix.cli.main import app
from tests.spark.damage import CASES
from tests.spark.harness import copy_base, restart_times

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("name", ["state_ahead_snapshot_hand_rollback", "state_ahead_zip_hand_rollback"])
def test_the_fix_makes_both_restarts_right(
    name: str, spark: Any, spark_version: str, spark_bases: Any, tmp_path: Path
) -> None:
    case = CASES[name]
    ckpt, input_dir, output_dir = copy_base(spark_bases(case.scenario), tmp_path)
    case.apply(ckpt)

    report = audit(str(ckpt), spark_version)
    assert report.verdict.restarts is True and report.verdict.hazards
    finding = next(f for f in report.findings if f.rule_id == "STATE-AHEAD" and f.severity == "error")
    command = re.search(r"`(ckptfix repair [^`]+)`", finding.fix)
    assert command is not None, finding.fix
    argv = shlex.split(command.group(1))[1:] + ["--target-spark", spark_version, "--idle-seconds", "0"]
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 0, result.output
    after = audit(str(ckpt), spark_version)
    assert after.verdict.restarts is True and not after.verdict.hazards
    assert not [f for f in after.findings if f.rule_id == "STATE-AHEAD"]

    outcome = restart_times(spark, case.scenario, ckpt, input_dir, output_dir, 2)
    for i, o in enumerate([*outcome.earlier, outcome], 1):
        assert o.ok, f"restart {i}: {o.text[:2000]}"
        assert o.correct, f"restart {i}: {o.detail}"


ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("name", "second_right"), [("state_ahead_zip_hand_rollback", False), ("state_ahead_zip_hand_rollback_v2", True)]
)
def test_a_stale_zip_when_maintenance_comes_late(
    name: str, second_right: bool, spark_version: str, spark_bases: Any, tmp_path: Path
) -> None:
    """RocksDB with changelog checkpointing: the batch that writes version V again creates its snapshot, but only the
    maintenance task uploads it over the stale V.zip. With the tests' 200 ms interval it always did (the damage case
    restarts right); with 60 s the run ends first and the second restart loads the stale zip. With state checkpoint
    format v2 the new snapshot has a new unique id, the commit log names it, and the stale zip is never loaded."""
    case = CASES[name]
    if spark_version not in case.versions:
        pytest.skip(f"case does not apply to Spark {spark_version}")
    ckpt, input_dir, output_dir = copy_base(spark_bases(case.scenario), tmp_path)
    case.apply(ckpt)
    report = audit(str(ckpt), spark_version)
    assert report.verdict.restarts is True
    silent = [f for f in report.findings if f.rule_id == "STATE-AHEAD" and f.severity == "error" and f.silent]
    assert bool(silent) is not second_right

    argv = [case.scenario, str(ckpt), str(input_dir), str(output_dir), "2"]
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    proc = subprocess.run(
        [sys.executable, "-m", "tests.spark.slow_maintenance", *argv],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    outcome = json.loads(proc.stdout.strip().splitlines()[-1])
    (first,) = outcome["earlier_restarts"]
    assert first["ok"] and first["correct"], first
    assert outcome["ok"] and outcome["correct"] is second_right, outcome
