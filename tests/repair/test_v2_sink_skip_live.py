"""State checkpoint format v2 and a file sink that already holds the batch the restart runs first (a crash between
the sink's commit of batch L and ``commits/L``; damage hunt of 2026-11-27): the sink skips the batch, the stateful
operator reports no state checkpoint info and Spark fails (``assertion failed: CheckpointInfo length: 0``). The
audit, given the sink, names the rule ``SINK-SKIP-STATE-V2`` and a fix that rolls the sink back with the checkpoint;
pasted as it stands, that command lets the query restart, and the sink then holds every input row exactly once.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ckptfix.audit import audit
from ckptfix.cli.main import app
from tests.spark.damage import CASES
from tests.spark.harness import build_base, restart

pytestmark = pytest.mark.spark

CASE = CASES["v2_commit_latest_deleted_sink_holds"]


def test_the_fix_rolls_the_sink_back_and_spark_restarts_exactly_once(spark: Any, tmp_path: Path) -> None:
    # a base of its own: the file sink's log names its data files by absolute path, and the rollback deletes only
    # files inside the sink it is given (a copy of the session's base would name the base's files)
    ckpt, input_dir, out = build_base(spark, CASE.scenario, tmp_path / "own")
    CASE.apply(ckpt)

    report = audit(str(ckpt), sink_path=str(out))
    assert report.verdict.restarts is False
    assert report.verdict.blocking_rule == "SINK-SKIP-STATE-V2"
    (finding,) = [f for f in report.findings if f.rule_id == "SINK-SKIP-STATE-V2"]
    command = re.search(r"`(ckptfix rollback [^`]+)`", finding.fix)
    assert command is not None, finding.fix
    argv = shlex.split(command.group(1))[1:] + ["--apply", "--idle-seconds", "0"]
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 0, result.output

    after = restart(spark, CASE.scenario, ckpt, input_dir, out)
    assert after.ok, after.text[:2000]
    assert after.correct is True, after.detail  # every input id once in the file sink (_spark_metadata)
