"""`rollback --apply` racing a live writer (issue 16 #2): while the engine deletes batches 4..7 of a checkpoint
Spark 3.5.9 wrote (agg_hdfs), a second process writes the next batch's offset file, commit and state deltas, as
a query that was never stopped does. The run must stop before it reports success, journal what it saw, name the
undo command, and `undo` (once the writer is gone) must restore the original bytes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ckptfix.repair import engine
from ckptfix.repair.rollback import plan_rollback
from ckptfix.storage import Location
from tests.repair.test_rollback import extract
from tests.support.trees import tree

#: the "live query": batch 8 after batch 7, written the way Hadoop's local file system writes (temp + rename)
WRITER = r"""
import os, sys
ckpt = sys.argv[1]
def put(rel, data):
    path = os.path.join(ckpt, rel)
    tmp = os.path.join(os.path.dirname(path), "." + os.path.basename(path) + ".tmp")
    with open(tmp, "wb") as fh:
        fh.write(data)
    os.replace(tmp, path)
put("offsets/8", open(os.path.join(ckpt, "offsets/7"), "rb").read())
put("commits/8", open(os.path.join(ckpt, "commits/7"), "rb").read())
for p in ("0", "1", "2"):
    put(f"state/0/{p}/9.delta", b"\x00" * 16)
print("WROTE", flush=True)
"""
WRITTEN = ["offsets/8", "commits/8", "state/0/0/9.delta", "state/0/1/9.delta", "state/0/2/9.delta"]


def test_rollback_apply_racing_a_writer_process_stops_and_undoes(tmp_path: Path) -> None:
    ckpt = extract("agg_hdfs", tmp_path)
    before = tree(ckpt)
    plan = plan_rollback(str(ckpt), 3, "3.5").plan
    assert {"offsets/7", "commits/7"} <= {a.path for a in plan.actions}
    loc, backup = Location(str(ckpt)), Location(engine.default_backup_url(str(ckpt)))
    writers: list[subprocess.Popen[str]] = []

    def query_writes(_message: str) -> None:  # the engine's progress hook: called after each step it carries out
        if not writers:
            writer = subprocess.Popen([sys.executable, "-c", WRITER, str(ckpt)], stdout=subprocess.PIPE, text=True)
            writers.append(writer)
            assert writer.stdout is not None and writer.stdout.readline().strip() == "WROTE"
            assert writer.wait(timeout=60) == 0

    with pytest.raises(engine.LiveQuery) as info:
        engine.apply(plan, loc, backup, force=True, progress=query_writes)
    assert writers, "the engine never reported a step: the writer did not run"
    message = str(info.value)
    assert "written by something else during run" in message and f"ckptfix undo {loc.url}" in message
    assert any(w in message for w in WRITTEN), message
    runs = engine.Runs(backup)
    run_id = runs.run_ids()[-1]
    events = runs.events(run_id)
    foreign = [e for e in events if e["event"] == "foreign-writes"]
    assert foreign and set(foreign[0]["paths"]) == set(WRITTEN)
    assert "complete" not in [e["event"] for e in events]
    # the writer stopped; its files go (the query will re-create them from the restored log) and undo restores
    for rel in WRITTEN:
        (ckpt / rel).unlink()
    engine.undo(loc, backup, run_id, force=True)
    assert tree(ckpt) == before
