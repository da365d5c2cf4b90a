"""async-off killed (SIGKILL) at each of its own durable writes, then recovered by the documented command.

async-off's own writes are the repair engine's journal of its run (plan, ``start``, each step, the Spark run's
start and stop, ``complete``); the engine's crash hook (CKPTFIX_TEST_CRASH_AFTER=n) kills the process with
SIGKILL right after the n-th. A kill while Spark runs the query takes the JVM with it (PySpark's gateway exits
when its Python parent dies). Recovery is ``ckptfix async-off CKPT --query Q --resume`` (with
``--idle-seconds 0``: Spark's writes of a killed run have no journaled end, so the idle guard rightly cannot call
them ckptfix's own); after the last write nothing is left to resume and the run is complete.

Clean = the recovery ends ``done``; the checkpoint audits with no LOG-ASYNC-GAP; no ckptfix temp file is left
anywhere; and a plain restart with tracking off (the documented failure mode before the sequence) runs and its
sink holds every input row exactly once. Spark's own batch files differ between runs (timing), so the oracle is
the restart, not a byte comparison.

The suite samples kill points (CKPTFIX_ASYNC_CRASH_POINTS, default "1,5,7": before any step, while Spark runs
the query, after the run step); ``python -m bench.battery`` runs every point.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ckptfix.repair import engine
from ckptfix.storage import OWN_TEMP, Location
from tests.spark.harness import build_base, copy_base, restart
from tests.spark.queries import SCENARIOS, input_file, write_input_files
from tests.spark_async.helpers import cli
from tests.support.settle import settle

pytestmark = pytest.mark.spark

Q = "tests.spark_async.queries.stateless"
NEW_FILES = range(10, 40)
#: async-off --apply (no --verify) writes 9 times: plan, start, preflight done, run started, spark-start,
#: spark-stop, run done, check done, complete
WRITES = 9
POINTS = [int(p) for p in os.environ.get("CKPTFIX_ASYNC_CRASH_POINTS", "1,5,7").split(",") if p.strip()]
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def base(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    return build_base(spark, SCENARIOS["async"], tmp_path_factory.mktemp("async-off-crash-base"))


@pytest.fixture
def copy(
    base: tuple[Path, Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Path, Path, Path]]:
    ckpt, input_dir, output_dir = copy_base(base, tmp_path / "copy")
    monkeypatch.setenv("CKPTFIX_TEST_ASYNC_INPUT", str(input_dir))
    monkeypatch.setenv("CKPTFIX_TEST_ASYNC_OUTPUT", str(output_dir))
    write_input_files(input_dir, NEW_FILES.start, len(NEW_FILES))
    try:
        yield ckpt, input_dir, output_dir
    finally:
        for i in NEW_FILES:
            input_file(input_dir, i).unlink(missing_ok=True)


def own_temps(root: Path) -> list[str]:
    return [str(p.relative_to(root)) for p in root.rglob("*") if OWN_TEMP.match(p.name)]


@pytest.mark.parametrize("point", POINTS)
def test_a_kill_at_any_write_is_recovered_by_resume(
    spark: Any, copy: tuple[Path, Path, Path], point: int, capsys: Any
) -> None:
    assert 1 <= point <= WRITES
    ckpt, input_dir, output_dir = copy
    child = subprocess.run(
        [sys.executable, "-m", "ckptfix", "async-off", str(ckpt), "--query", f"{Q}:build", "--apply"]
        + ["--idle-seconds", "0", "--timeout", "120", "--master", "local[2]"],
        env={**os.environ, engine.CRASH_ENV: str(point), "PYSPARK_PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr[-2000:]
    settle(spark, ckpt, output_dir)  # the killed run's JVM is gone and wrote its last file
    runs = engine.Runs(Location(str(ckpt / "_ckptfix")))
    (run_id,) = runs.run_ids()
    resume = ["async-off", str(ckpt), "--query", f"{Q}:build", "--resume", "--idle-seconds", "0"]
    code, out, err = cli(capsys, *resume, "--timeout", "120", "--format", "json")
    if point == WRITES:  # killed after its last write: the run is complete, nothing to resume
        assert code == 2 and "expected an interrupted async-off run, found none" in out, (out, err)
        assert runs.info(run_id).status == "complete"
    else:
        assert code == 0, (out, err)
        doc = json.loads(out)["async_off"]
        assert (doc["status"], doc["run_id"]) == ("done", run_id)
        assert runs.info(run_id).status == "complete"
    assert own_temps(ckpt) == [] and own_temps(output_dir) == []
    code, out, _ = cli(capsys, "audit", str(ckpt), "--format", "json", "--quiet")
    assert "LOG-ASYNC-GAP" not in {f["rule_id"] for f in json.loads(out)["findings"]}
    after = restart(spark, "async", ckpt, input_dir, output_dir, new_files=0)
    assert after.ok, after.text[:2000]
    assert after.correct is True, after.detail
