"""`ckptfix repair` rebuilds past a corrupt snapshot: a real Spark 3.5 checkpoint (committed
fixture) whose newest snapshot is damaged, which 3.5 cannot fall back from."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

from ckptfix.audit import audit
from ckptfix.repair import engine
from ckptfix.repair.planning import plan_repair
from ckptfix.state.export import to_json_line
from ckptfix.state.read import read_state
from ckptfix.storage import Location

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "state35" / "corrupt_snapshot_hdfs"


def extract(dest: Path) -> Path:
    with tarfile.open(f"{FIXTURE}.tar.gz") as tar:
        tar.extractall(dest, filter="data")
    return dest / "ckpt"


def test_repair_rebuilds_a_corrupt_snapshot_for_spark_35(tmp_path: Path) -> None:
    ckpt = extract(tmp_path / "a")
    good = sorted(to_json_line(r) for r in read_state(str(extract(tmp_path / "b"))))
    outcome = json.loads(Path(f"{FIXTURE}.expected.json").read_text())["outcomes"]
    snapshot = ckpt / "state/0/1/3.snapshot"
    data = bytearray(snapshot.read_bytes())
    data[26] ^= 0xFF  # the byte the fixture's generator flipped before restarting Spark 3.5
    snapshot.write_bytes(bytes(data))
    before = audit(str(ckpt), "3.5")
    assert not before.verdict.restarts
    assert "Stream is corrupted" in before.verdict.headline and "Stream is corrupted" in json.dumps(outcome)
    plan, _report, unfixed = plan_repair(str(ckpt), "3.5")
    assert unfixed == []
    assert [a.path for a in plan.actions] == ["state/0/1/4.snapshot"]
    engine.apply(plan, Location(str(ckpt)), Location(str(ckpt / "_ckptfix")), idle_seconds=0)
    assert audit(str(ckpt), "3.5").verdict.restarts
    assert sorted(to_json_line(r) for r in read_state(str(ckpt))) == good


def test_a_zip_rebuilt_in_a_spark_40_format_v2_store_keeps_its_v2_header(tmp_path: Path) -> None:
    """Hunt 13: in a format-v2 RocksDB store written by Spark 4.0.5 (every zip's metadata says ``v2``) the newest zip
    was truncated; the repair rebuilt it with a ``v1`` header and said "will restart", and 4.0.5 failed
    CANNOT_READ_CHECKPOINT (it reads only ``v2`` there). The rebuilt zip now has the header of the store's zips,
    and the audit flags a ``v1`` zip there as 4.0.5 does (recorded: v2_newest_zip_header_flipped)."""
    import zipfile

    from tests.spark.damage import CASES

    with tarfile.open(Path(__file__).resolve().parents[1] / "fixtures" / "spark-4.0.5" / "agg_v2.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    ckpt = tmp_path / "ckpt"
    part = ckpt / "state" / "0" / "0"
    headers = {zipfile.ZipFile(z).read("metadata").split(b"\n")[0] for z in part.glob("*_*.zip")}
    assert headers == {b"v2"}, "Spark 4.0.5 wrote every zip of a format-v2 store with a v2 header"
    CASES["v2_newest_zip_truncated_sidecars_kept"].apply(ckpt)
    assert not audit(str(ckpt), "4.0").verdict.restarts
    plan, _report, unfixed = plan_repair(str(ckpt), "4.0")
    assert unfixed == [] and plan.actions
    engine.apply(plan, Location(str(ckpt)), Location(str(ckpt / "_ckptfix")), idle_seconds=0)
    rebuilt = [a.path for a in plan.actions if a.path.endswith(".zip")]
    assert rebuilt
    for rel in rebuilt:
        assert zipfile.ZipFile(ckpt / rel).read("metadata").split(b"\n")[0] == b"v2", rel
    assert audit(str(ckpt), "4.0").verdict.restarts


def test_every_partition_with_a_corrupt_snapshot_is_rebuilt(tmp_path: Path) -> None:
    """Hunt 13 (3.5.9, 4.0.5, 4.1.4): with the newest snapshot of every partition corrupt, repair rebuilt the first
    partition's only, listed nothing as unfixed, and Spark failed on the next. Every damaged store is rebuilt now,
    each once, and the state read afterwards is the undamaged one Spark wrote."""
    from tests.spark.damage import CASES

    def extract_agg(dest: Path) -> Path:
        with tarfile.open(Path(__file__).resolve().parents[1] / "fixtures" / "spark-3.5.9" / "agg_hdfs.tar.gz") as tar:
            tar.extractall(dest, filter="data")
        return dest / "ckpt"

    good = sorted(to_json_line(r) for r in read_state(str(extract_agg(tmp_path / "good"))))
    ckpt = extract_agg(tmp_path / "bad")
    CASES["state_snapshot_corrupt"].apply(ckpt)
    before = audit(str(ckpt), "3.5")
    damaged = {e.path for f in before.findings if f.severity == "error" for e in f.evidence[:1]}
    assert not before.verdict.restarts and len(damaged) >= 2, before.findings
    plan, _report, unfixed = plan_repair(str(ckpt), "3.5")
    assert unfixed == []
    snapshots = sorted(a.path for a in plan.actions if a.path.endswith(".snapshot"))
    assert len(snapshots) == len({p.rsplit("/", 1)[0] for p in snapshots}) == len(damaged), snapshots
    engine.apply(plan, Location(str(ckpt)), Location(str(ckpt / "_ckptfix")), idle_seconds=0)
    assert audit(str(ckpt), "3.5").verdict.restarts
    assert sorted(to_json_line(r) for r in read_state(str(ckpt))) == good


def test_an_operator_metadata_file_that_contradicts_the_state_is_deleted(tmp_path: Path) -> None:
    """state/0/_metadata/metadata naming operator 0 'dedupe' over an aggregation's state (the catalogue's
    opmeta_name_edited; Spark 4.3 fails the operator check, recorded). The text said deleting it is safe, but repair
    had no planner (hunt 14). The file goes, with a backup; the audit then says 4.3 restarts (the live proof is in
    tests/repair/test_fixes_spark.py)."""
    from tests.audit.test_restart_prediction import _recorded, run_audit

    case, target, rec, ckpt, output = _recorded("4.3.0", "opmeta_name_edited", tmp_path)
    assert rec["ok"] is False
    assert not run_audit(ckpt, target, output, case).verdict.restarts
    plan, _, unfixed = plan_repair(str(ckpt), target)
    assert unfixed == []
    assert [(a.op, a.path) for a in plan.actions] == [("delete", "state/0/_metadata/metadata")]
    before = (ckpt / "state/0/_metadata/metadata").read_bytes()
    engine.apply(plan, Location(str(ckpt)), Location(str(tmp_path / "backup")), force=True)
    assert not (ckpt / "state/0/_metadata/metadata").exists()
    assert run_audit(ckpt, target, output, case).verdict.restarts
    engine.undo(Location(str(ckpt)), Location(str(tmp_path / "backup")), force=True)
    assert (ckpt / "state/0/_metadata/metadata").read_bytes() == before
