"""What `repair` tells the user on its way out: the undo it prints after --apply names the backup directory it used
(a new user's `undo CKPT` found no runs after `repair --apply --backup-dir bk`), and the refusal at a stateful
async gap names the batch to roll back to (it said only `ckptfix rollback`). Checkpoints written by real Spark:
samples/async-sparse (PySpark 4.3, async progress tracking) and Spark 3.5.9's aggregation (tests/fixtures/state35)."""

from __future__ import annotations

import shutil
from pathlib import Path

from typer.testing import CliRunner

from ckptfix.cli.main import app
from ckptfix.repair.planning import plan_repair
from tests.state.test_state35 import extract

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def test_the_undo_hint_names_the_backup_dir(tmp_path: Path) -> None:
    ckpt, backup = tmp_path / "ckpt", tmp_path / "bk"
    shutil.copytree(SAMPLES / "async-sparse", ckpt)
    runner = CliRunner()
    applied = runner.invoke(app, ["repair", str(ckpt), "--apply", "--force", "--backup-dir", str(backup)])
    assert applied.exit_code in (0, 1), applied.output
    line = next(x for x in applied.output.splitlines() if "restores it" in x)
    undo = line.split("`")[1].split()
    assert undo[:3] == ["ckptfix", "undo", str(ckpt)] and undo[-2:] == ["--backup-dir", str(backup)]
    done = runner.invoke(app, [*undo[1:], "--force"])
    assert done.exit_code == 0, done.output


def test_a_stateful_async_gap_names_the_rollback_batch(tmp_path: Path) -> None:
    """Batch L not committed: the gap cannot be bridged by a copy; the refusal names the rollback. Batch L committed
    (repair hunt 10, A11): offsets/L-1 is only looked up, so the copy of offsets/L is the fix (proven live in
    tests/repair/test_fixes_spark.py, two_batches_before_latest_deleted)."""
    ckpt = extract("agg_hdfs", tmp_path)  # offsets and commits 0..4
    (ckpt / "offsets" / "3").unlink()
    (ckpt / "offsets" / ".3.crc").unlink(missing_ok=True)
    plan, _report, unfixed = plan_repair(str(ckpt), "4.3")
    assert unfixed == [] and [(a.op, a.path) for a in plan.actions] == [("write", "offsets/3")], unfixed
    (ckpt / "commits" / "4").unlink()
    (ckpt / "commits" / ".4.crc").unlink(missing_ok=True)
    _plan, _report, unfixed = plan_repair(str(ckpt), "4.3")
    reasons = [str(u) for u in unfixed if "LOG-ASYNC-GAP" in str(u)]
    assert reasons and f"ckptfix rollback {ckpt} --to-batch 2" in reasons[0], unfixed


def test_rollback_takes_the_restarting_sessions_conf(tmp_path: Path) -> None:
    """offsets without spark.sql.shuffle.partitions (Spark 2.1's, or edited): the audit after the rollback needs the
    session's value, as `audit --conf` does; `rollback` had no --conf and refused whatever the user knew."""
    import json

    ckpt = extract("agg_hdfs", tmp_path)  # 2 partitions, offsets 0..4
    for b in range(5):
        path = ckpt / "offsets" / str(b)
        lines = path.read_text().split("\n")
        meta = json.loads(lines[1])
        del meta["conf"]["spark.sql.shuffle.partitions"]
        lines[1] = json.dumps(meta, separators=(",", ":"))
        path.write_text("\n".join(lines))
        (ckpt / "offsets" / f".{b}.crc").unlink(missing_ok=True)
    runner = CliRunner()
    args = ["rollback", str(ckpt), "--to-batch", "3", "--force"]
    refused = runner.invoke(app, args)
    assert refused.exit_code == 2 and "CONF-SHUFFLE-PARTITIONS-NOT-RECORDED" in refused.output, refused.output
    planned = runner.invoke(app, [*args, "--conf", "spark.sql.shuffle.partitions=2"])
    assert planned.exit_code == 0, planned.output
    assert "delete offsets/4" in planned.output
