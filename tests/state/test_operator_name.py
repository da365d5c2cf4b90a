"""Which operator wrote a state directory (``schemas.operator_name``), on checkpoints real Spark wrote: 3.5.9 has no
operator metadata, so the store layout and schema file decide (tests/fixtures/state35, whose queries
tests/fixtures/state35/generate.py names); 4.x records Spark's shortName in operator metadata."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from ckptfix.checkpoint import Checkpoint
from ckptfix.state.schemas import operator_name
from tests.state.test_state35 import extract

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

# the query each fixture's generator ran (by hand, from generate.py)
SPARK35 = {
    "agg_hdfs": "stateStoreSave",  # groupBy().agg(count, sum)
    "dedup_hdfs": "dedupe",  # dropDuplicates
    "dedup_wm_hdfs": "dedupe",  # withWatermark + dropDuplicates(["id", "ts"])
    "fmgws_hdfs": "flatMapGroupsWithState",  # applyInPandasWithState, no timeout: the value is groupState only
    "join_hdfs": "symmetricHashJoin",
    "session_hdfs": "sessionWindowStateStoreSaveExec",
}


@pytest.mark.parametrize("name", sorted(SPARK35))
def test_spark35_operator_from_its_files(name: str, tmp_path: Path) -> None:
    ck = Checkpoint.open(str(extract(name, tmp_path)))
    assert {op: operator_name(ck, d) for op, d in ck.state.operators.items()} == {0: SPARK35[name]}


@pytest.mark.parametrize(("name", "expected"), [("agg_hdfs", "stateStoreSave"), ("dedup_v2_filesink", "dedupe")])
def test_spark4_operator_from_its_metadata(name: str, expected: str, tmp_path: Path) -> None:
    with tarfile.open(FIXTURES / "spark-4.2.1" / f"{name}.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    ck = Checkpoint.open(str(tmp_path / "ckpt"))
    assert {op: operator_name(ck, d) for op, d in ck.state.operators.items()} == {0: expected}


def test_schema_file_gone_is_unknown(tmp_path: Path) -> None:
    ckpt = extract("agg_hdfs", tmp_path)
    for f in (ckpt / "state" / "0" / "0" / "_metadata").iterdir():
        f.unlink()
    ck = Checkpoint.open(str(ckpt))
    assert operator_name(ck, ck.state.operators[0]) is None
