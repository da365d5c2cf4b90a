"""STATE-OPERATOR-METADATA-MISMATCH and STATE-METADATA-CRC-ORPHAN without Spark, on Spark 4.2.1's aggregation
checkpoint (tests/fixtures/spark-4.2.1/agg_hdfs: state/0/_metadata/metadata names operator 0 'stateStoreSave',
with its .crc). What Spark does is recorded (damage cases opmeta_name_edited, opmeta_deleted_crc_left,
schema_deleted_crc_left in tests/audit/test_restart_prediction.py); here, what the files must show for each verdict."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from ckptfix.audit import audit
from ckptfix.repair.planning import plan_repair

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _ckpt(tmp_path: Path) -> Path:
    with tarfile.open(FIXTURES / "spark-4.2.1" / "agg_hdfs.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    return tmp_path / "ckpt"


def _edit(ckpt: Path, old: str, new: str) -> None:
    path = ckpt / "state" / "0" / "_metadata" / "metadata"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))
    (path.parent / ".metadata.crc").unlink()


def _blocker(ckpt: Path, target: str = "4.3") -> str | None:
    return audit(str(ckpt), target).verdict.blocking_rule


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ('"stateStoreSave"', '"symmetricHashJoin"'),  # a join's name on a store without the join's four stores
        ('"stateStoreSave"', '"noSuchOperator"'),  # no Spark names an operator so
        ('"operatorId":0', '"operatorId":1'),  # another operator's id in state/0
    ],
)
def test_what_the_files_contradict_fails_on_4x(tmp_path: Path, old: str, new: str) -> None:
    ckpt = _ckpt(tmp_path)
    assert _blocker(ckpt) is None
    _edit(ckpt, old, new)
    assert _blocker(ckpt) == "STATE-OPERATOR-METADATA-MISMATCH"
    assert _blocker(ckpt, "3.5") != "STATE-OPERATOR-METADATA-MISMATCH"  # 3.5 does not read operator metadata


def test_a_name_of_the_same_layout_is_not_flagged(tmp_path: Path) -> None:
    """StatefulStreamlineAggregate keeps an aggregation's layout: the files cannot tell it from stateStoreSave."""
    ckpt = _ckpt(tmp_path)
    _edit(ckpt, '"stateStoreSave"', '"StatefulStreamlineAggregate"')
    assert _blocker(ckpt) is None


@pytest.mark.parametrize("rel", ["state/0/_metadata/metadata", "state/0/0/_metadata/schema"])
def test_a_metadata_file_gone_with_its_sidecar_left_is_repaired(tmp_path: Path, rel: str) -> None:
    ckpt = _ckpt(tmp_path)
    (ckpt / rel).unlink()
    crc = (ckpt / rel).parent / f".{(ckpt / rel).name}.crc"
    assert crc.exists()
    report = audit(str(ckpt), "4.3")
    assert report.verdict.restarts is False and report.verdict.blocking_rule == "STATE-METADATA-CRC-ORPHAN"
    assert report.verdict.error is not None and f"{rel.rsplit('/', 1)[0]}/.{rel.rsplit('/', 1)[1]}.crc" in (
        report.verdict.error.message
    )
    plan, _report, unfixed = plan_repair(str(ckpt), "4.3")
    assert unfixed == [] and [(a.op, a.path) for a in plan.actions] == [("delete", str(crc.relative_to(ckpt)))]


def test_a_store_name_spark_never_opens_is_not_looked_for(tmp_path: Path) -> None:
    """The metadata's store name edited (hunt 4, A08/J04 on 4.3: Spark restarted with the right rows, it opens
    the stores its code names): no state file is missing for it."""
    ckpt = _ckpt(tmp_path)
    _edit(ckpt, '"storeName":"default"', '"storeName":"defaulX"')
    report = audit(str(ckpt), "4.3")
    assert report.verdict.restarts is True, report.verdict.headline


def test_every_leftover_sidecar_is_deleted_by_one_repair(tmp_path: Path) -> None:
    """The operator metadata and the partition schema both deleted, both sidecars left: one plan deletes both (the
    planner ran once per rule and deleted only the first finding's)."""
    ckpt = _ckpt(tmp_path)
    (ckpt / "state/0/_metadata/metadata").unlink()
    (ckpt / "state/0/0/_metadata/schema").unlink()
    plan, _report, unfixed = plan_repair(str(ckpt), "4.3")
    assert unfixed == []
    assert sorted(a.path for a in plan.actions if a.op == "delete") == [
        "state/0/0/_metadata/.schema.crc",
        "state/0/_metadata/.metadata.crc",
    ]
