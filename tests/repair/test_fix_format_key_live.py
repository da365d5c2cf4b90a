"""Live: offsets/L lost the aggregation's state format version (damage hunt 3, F20/X04/Y04). Spark restores the
legacy default 1 for the missing key and fails against state written in format 2; `repair` writes back the value
offsets/L-1 records, and Spark 4.3 then restarts with exactly the aggregates the input files give (computed here
from the input, never by ckptfix). Plan, apply, byte-exact undo, apply again, restart."""

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
from tests.support.trees import tree

KEY = "spark.sql.streaming.aggregation.stateFormatVersion"


@pytest.mark.spark
@pytest.mark.parametrize("scenario", ["agg_hdfs", "agg_rocksdb_cl"])
def test_lost_state_format_version_is_written_back(scenario: str, spark: Any, spark_bases: Any, tmp_path: Path) -> None:
    L = SCENARIOS[scenario].base_files - 1  # batches 0..L, file i in batch i
    failing, input_dir, failing_out = copy_base(spark_bases(scenario), tmp_path / "failing")
    CASES["offset_latest_agg_format_dropped"].apply(failing)
    ckpt = tmp_path / "fixed" / "ckpt"
    shutil.copytree(failing, ckpt)
    output = tmp_path / "fixed" / failing_out.name
    shutil.copytree(failing_out, output)

    before = restart(spark, scenario, failing, input_dir, failing_out, new_files=1)
    assert not before.ok and "STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE" in before.text, before.text[:1500]

    damaged = tree(ckpt)
    plan, _report, unfixed = plan_repair(str(ckpt), "4.3")
    assert unfixed == [] and [a.path for a in plan.actions] == [f"offsets/{L}"], plan.actions
    loc, backup = Location(str(ckpt)), Location(str(tmp_path / "backup"))
    engine.apply(plan, loc, backup, force=True)  # force: a private copy Spark wrote seconds ago
    repaired = tree(ckpt)
    assert f'"{KEY}":"2"' in (ckpt / "offsets" / str(L)).read_text()
    engine.undo(loc, backup, force=True)
    assert tree(ckpt) == damaged, "undo must restore every file's original bytes"
    engine.apply(plan, loc, backup, force=True)
    assert tree(ckpt) == repaired
    assert audit(str(ckpt), "4.3").verdict.restarts

    # the failing restart above added file L+1 to the shared input dir: batch L+1 reads it
    after = restart(spark, scenario, ckpt, input_dir, output, new_files=0)
    assert after.ok, after.text[:2000]
    assert after.batches == [L + 1], after.batches
    got = _sink_batches(output)
    keys = {r["key"] for r in _file_rows(input_dir, L + 1)}
    want = _aggregate(input_dir, range(L + 2))
    assert got[L + 1] == {k: want[k] for k in keys}


@pytest.mark.spark
@pytest.mark.parametrize(
    "name",
    [
        "offset_latest_agg_format_set_1",
        "offset_latest_join_format_set_1",
        "offset_latest_left_join_format_set_1",
        "offset_latest_fmgws_format_dropped",
    ],
)
def test_edited_state_format_is_restored(name: str, spark: Any, spark_bases: Any, tmp_path: Path) -> None:
    """offsets/L's state format key set to 1 or removed (damage hunt 4: D08, J18, A02): Spark 4.3 fails; `repair`
    writes back the format offsets/L-1 records, and the restart's sink holds exactly what the input files give
    (the harness computes it from the input: every join pair once, the aggregates per key)."""
    case = CASES[name]
    L = SCENARIOS[case.scenario].base_files - 1
    failing, input_dir, failing_out = copy_base(spark_bases(case.scenario), tmp_path / "failing")
    case.apply(failing)
    ckpt = tmp_path / "fixed" / "ckpt"
    shutil.copytree(failing, ckpt)
    output = tmp_path / "fixed" / failing_out.name
    shutil.copytree(failing_out, output)

    before = restart(spark, case.scenario, failing, input_dir, failing_out, new_files=1)
    assert not before.ok, before.detail

    damaged = tree(ckpt)
    plan, _report, unfixed = plan_repair(str(ckpt), "4.3")
    assert unfixed == [] and [a.path for a in plan.actions] == [f"offsets/{L}"], plan.actions
    loc, backup = Location(str(ckpt)), Location(str(tmp_path / "backup"))
    engine.apply(plan, loc, backup, force=True)
    assert '.stateFormatVersion":"2"' in (ckpt / "offsets" / str(L)).read_text()
    engine.undo(loc, backup, force=True)
    assert tree(ckpt) == damaged, "undo must restore every file's original bytes"
    engine.apply(plan, loc, backup, force=True)
    assert audit(str(ckpt), "4.3").verdict.restarts

    after = restart(spark, case.scenario, ckpt, input_dir, output, new_files=0)
    assert after.ok, after.text[:2000]
    assert after.batches == [L + 1], after.batches
    assert after.correct, after.detail
