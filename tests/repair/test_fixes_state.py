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
