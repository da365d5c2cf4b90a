"""CONF-SHUFFLE-PARTITIONS-EDITED without a JVM, on checkpoints Spark 4.3.0 wrote (tests/fixtures/spark-4.3.0): the
catalogue cases (tests/spark/damage.py, recorded on 3.5.9-4.3.0) give the verdicts; here the repair and odd layouts.
"""

from __future__ import annotations

import json
import shutil
import tarfile
from pathlib import Path

import pytest

from ckptfix.audit import audit
from ckptfix.repair import engine
from ckptfix.repair.planning import plan_repair
from ckptfix.state.read import read_state
from ckptfix.storage import Location
from tests.spark.damage import CASES

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "spark-4.3.0" / "agg_hdfs.tar.gz"
SHUFFLE = "spark.sql.shuffle.partitions"


def extract(tmp_path: Path) -> Path:
    with tarfile.open(FIXTURE) as tar:
        tar.extractall(tmp_path, filter="data")
    return tmp_path / "ckpt"


def rows(ckpt: Path) -> list[tuple[str, int]]:
    return sorted((r["key"]["key"], r["value"]["count"]) for r in read_state(str(ckpt)).rows)


@pytest.mark.parametrize(
    "case", ["offset_latest_shuffle_partitions_edited_up", "offset_latest_shuffle_partitions_edited_down"]
)
def test_the_repair_writes_the_state_s_count_back(tmp_path: Path, case: str) -> None:
    ckpt = extract(tmp_path / "x")
    want = rows(ckpt)
    CASES[case].apply(ckpt)
    report = audit(str(ckpt), "4.3")
    assert [f.rule_id for f in report.findings if f.severity == "error"] == ["CONF-SHUFFLE-PARTITIONS-EDITED"]
    plan, _, unfixed = plan_repair(str(ckpt), "4.3")
    assert unfixed == [] and [a.path for a in plan.actions if a.op == "write"][0] == "offsets/7"
    engine.apply(plan, Location(str(ckpt)), Location(str(tmp_path / "backup")), force=True)
    assert json.loads((ckpt / "offsets" / "7").read_text().splitlines()[1])["conf"][SHUFFLE] == "3"
    after = audit(str(ckpt), "4.3")
    assert after.verdict.restarts is True and not [f for f in after.findings if f.severity != "info"]
    assert rows(ckpt) == want


def test_a_missing_directory_beyond_the_edited_count_is_no_crash(tmp_path: Path) -> None:
    """A down-edit (5 -> 2) over directories 0, 1, 2 (no file of version 8) and 4 (3 missing): the audit looked the
    missing one up to ask whether a repartition left it, and failed with a KeyError (exit 3). It counts as left."""
    ckpt = extract(tmp_path / "x")
    shutil.copytree(ckpt / "state/0/2", ckpt / "state/0/4")
    for stale in (ckpt / "state/0/2").glob("*8.*"):  # directory 2 without a file of version 8: as a repartition left it
        stale.unlink()
    for batch, count in ((6, "5"), (7, "2")):
        path = ckpt / "offsets" / str(batch)
        lines = path.read_text().split("\n")
        meta = json.loads(lines[1])
        meta["conf"][SHUFFLE] = count
        lines[1] = json.dumps(meta, separators=(",", ":"))
        path.write_text("\n".join(lines))
        (ckpt / "offsets" / f".{batch}.crc").unlink(missing_ok=True)
    report = audit(str(ckpt), "4.3")
    (edited,) = [f for f in report.findings if f.rule_id == "CONF-SHUFFLE-PARTITIONS-EDITED"]
    assert "records spark.sql.shuffle.partitions=2, but offsets/6 records 5" in edited.message


def test_an_edited_provider_is_named_as_such_and_written_back(tmp_path: Path) -> None:
    """Hunt 13: offsets/L's providerClass edited from HDFS to RocksDB (recorded on 3.5.9-4.3.0: Spark fails on a
    changelog it never wrote). The audit said "4.zip is missing ... only a new checkpoint"; it names the edit, the
    failed loads say nothing is lost, and the repair writes HDFS back (the live proof: test_fixes_spark,
    provider_edited)."""
    ckpt = extract(tmp_path / "x")
    want = rows(ckpt)
    CASES["offset_latest_provider_rocksdb_two_operators"].apply(ckpt)
    report = audit(str(ckpt), "4.3")
    assert not report.verdict.restarts
    first = report.findings[0]
    assert first.rule_id == "CONF-PROVIDER-EDITED", [f.rule_id for f in report.findings]
    assert "the offset file was edited" in first.message
    chains = [f for f in report.findings if f.rule_id.startswith("STATE-")]
    assert chains and all(f.fix.startswith("Nothing is lost") for f in chains), [f.fix for f in chains]
    plan, _report, unfixed = plan_repair(str(ckpt), "4.3")
    assert unfixed == [] and [a.path for a in plan.actions] == [
        f"offsets/{max(int(p.name) for p in (ckpt / 'offsets').iterdir() if p.name.isdigit())}"
    ]
    engine.apply(plan, Location(str(ckpt)), Location(str(ckpt / "_ckptfix")), idle_seconds=0)
    after = audit(str(ckpt), "4.3")
    assert after.verdict.restarts and not [f for f in after.findings if f.severity == "error"]
    assert rows(ckpt) == want
