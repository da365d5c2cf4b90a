"""Live: a damaged latest offset file whose batch already wrote state. Before, `repair` stopped at "not fixed,
run `ckptfix rollback`"; now it plans the rollback of that state itself (issue 16, repair completeness). Spark 4.3
fails on the damaged checkpoint and, after the one `repair --apply`, restarts with exactly the aggregates the
input files give (computed here from the input, never by ckptfix)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from ckptfix.audit import audit
from ckptfix.repair import engine
from ckptfix.repair.planning import plan_repair
from ckptfix.storage import Location
from tests.repair.test_rollback import _aggregate, _file_rows, _sink_batches
from tests.spark.damage import CASES
from tests.spark.harness import copy_base, restart
from tests.spark.queries import SCENARIOS


@pytest.mark.spark
@pytest.mark.parametrize("scenario", ["agg_hdfs", "agg_rocksdb_cl"])
def test_damaged_latest_offset_with_state_is_repaired_in_one_command(
    scenario: str, spark: Any, spark_bases: Any, tmp_path: Path
) -> None:
    base_files = SCENARIOS[scenario].base_files  # batches 0..L, file i in batch i
    L = base_files - 1
    failing, input_dir, failing_out = copy_base(spark_bases(scenario), tmp_path / "failing")
    CASES["offset_latest_empty"].apply(failing)
    ckpt = tmp_path / "fixed" / "ckpt"
    shutil.copytree(failing, ckpt)
    output = tmp_path / "fixed" / failing_out.name
    shutil.copytree(failing_out, output)

    before = restart(spark, scenario, failing, input_dir, failing_out, new_files=0)
    assert not before.ok and "Incomplete log file" in before.text, before.text

    plan, _report, unfixed = plan_repair(str(ckpt), "4.3")
    assert unfixed == [] and not plan.empty
    assert any(a.path.startswith("state/") for a in plan.actions)  # the state batch L wrote goes with it
    engine.apply(plan, Location(str(ckpt)), Location(str(tmp_path / "backup")), force=True)
    assert audit(str(ckpt), "4.3").verdict.restarts

    after = restart(spark, scenario, ckpt, input_dir, output, new_files=1)  # adds file L+1
    assert after.ok, after.text
    assert after.batches == [L], after.batches  # batch L again, over files L and L+1
    got = _sink_batches(output)
    for b in range(L):  # untouched
        keys = {r["key"] for r in _file_rows(input_dir, b)}
        want = _aggregate(input_dir, range(b + 1))
        assert got[b] == {k: want[k] for k in keys}, f"batch {b}"
    touched = {r["key"] for i in (L, L + 1) for r in _file_rows(input_dir, i)}
    want = _aggregate(input_dir, range(L + 2))
    assert got[L] == {k: want[k] for k in touched}
