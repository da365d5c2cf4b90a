"""``rollback --to-time`` and ``inspect --batches``: a time names the newest committed batch planned by then, read
from the offset files' ``batchTimestampMs`` as Spark 3.5.9 wrote them. The expected times are read from the files
here with the json module, not through ckptfix."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

import pytest

import ckptfix
from ckptfix.errors import UsageError
from tests.repair.test_fixes_logs import extract
from tests.support.cli import run_cli


def _planned_ms(ckpt: Path) -> dict[int, int]:
    """batch -> batchTimestampMs, from each offset file's metadata line."""
    out = {}
    for f in (ckpt / "offsets").iterdir():
        if f.name.isdigit():
            out[int(f.name)] = json.loads(f.read_text().splitlines()[1])["batchTimestampMs"]
    return out


def _iso(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.timezone.utc).isoformat(timespec="milliseconds")


def _shown(ms: int) -> str:
    """As ckptfix prints a time: UTC with Z, milliseconds unless whole."""
    return _iso(ms).replace("+00:00", "Z").replace(".000Z", "Z")


@pytest.fixture
def agg(tmp_path: Path) -> Path:
    ckpt, _ = extract("agg_hdfs", tmp_path)
    return ckpt


def _plan(*args: str) -> dict:  # type: ignore[type-arg]
    proc = run_cli("rollback", *args, "--force", "--format", "json", env={**os.environ, "COLUMNS": "200"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    plan = json.loads(proc.stdout)["plan"]
    plan.pop("created_at")
    return plan


def test_a_time_names_the_newest_committed_batch_planned_by_then(agg: Path) -> None:
    planned = _planned_ms(agg)
    assert len(planned) >= 3 and sorted(planned) == list(range(len(planned)))
    b = 1
    by_batch = _plan(str(agg), "--to-batch", str(b))
    assert by_batch["actions"], "batch 1 is not the last: the rollback deletes something"
    for when in (_iso(planned[b]), _iso(planned[b] + 1), _iso(planned[b + 1] - 1), str(planned[b])):
        assert _plan(str(agg), "--to-time", when) == by_batch, when
    assert _plan(str(agg), "--to-time", _iso(planned[b] - 1)) == _plan(str(agg), "--to-batch", str(b - 1))
    # another zone, the same instant
    there = dt.datetime.fromtimestamp(planned[b] / 1000, tz=dt.timezone(dt.timedelta(hours=5, minutes=30)))
    assert _plan(str(agg), "--to-time", there.isoformat()) == by_batch
    api = ckptfix.plan_rollback(agg, to_time=there, force=True).plan.to_json()
    api.pop("created_at")
    assert api == by_batch


def test_times_the_log_cannot_answer_are_refused(agg: Path) -> None:
    planned = _planned_ms(agg)
    early = run_cli("rollback", str(agg), "--to-time", _iso(planned[0] - 1), "--force")
    assert early.returncode == 2
    assert early.stderr.startswith(
        f"ckptfix: error: --to-time: expected a committed batch planned at or before {_shown(planned[0] - 1)}"
    ), early.stderr
    assert f"the oldest committed batch the offset log keeps, 0, was planned at {_shown(planned[0])}" in early.stderr
    naive = run_cli("rollback", str(agg), "--to-time", "2026-01-01T00:00:00", "--force")
    assert naive.returncode == 2 and "expected a time zone (Z or +hh:mm)" in naive.stderr, naive.stderr
    both = run_cli("rollback", str(agg), "--to-time", "2026-01-01T00:00:00Z", "--to-batch", "1")
    assert both.returncode == 2 and "give --to-batch N or --to-time TIME (one of them)" in both.stderr
    with pytest.raises(UsageError, match="to_time 2026-13-01: expected an ISO 8601 time"):
        ckptfix.plan_rollback(agg, to_time="2026-13-01", force=True)


def test_inspect_batches_lists_every_offset_file(agg: Path) -> None:
    planned = _planned_ms(agg)
    (agg / "commits" / str(max(planned))).unlink()  # the newest batch planned but not committed
    doc = json.loads(run_cli("inspect", str(agg), "--batches", "--format", "json").stdout)
    got = [(b["batch"], b["timestamp_ms"], b["committed"]) for b in doc["batches"]]
    assert got == [(b, planned[b], b != max(planned)) for b in sorted(planned)]
    first = json.loads((agg / "offsets" / "0").read_text().splitlines()[2])
    assert doc["batches"][0]["offsets"] == {"0": json.dumps(first, separators=(",", ":"))}
    text = run_cli("inspect", str(agg), "--batches", env={**os.environ, "COLUMNS": "250"}).stdout
    assert _shown(planned[1]) in text
    assert json.loads(run_cli("inspect", str(agg), "--format", "json").stdout)["batches"] is None


def test_inspect_batches_shows_when_each_batch_committed_and_commits_without_offsets(agg: Path) -> None:
    """New-user trial 4: no commit time beside "planned at" (a DESCRIBE HISTORY-style view needs it), and no row for
    a commit whose offset file is gone. The commit time is the commit file's modification time, set here with
    os.utime so the expected value is not read through ckptfix."""
    planned = _planned_ms(agg)
    last = max(planned)
    os.utime(agg / "commits" / "1", (1_800_000_000.25, 1_800_000_000.25))
    (agg / "offsets" / str(last)).unlink()
    (agg / "offsets" / f".{last}.crc").unlink(missing_ok=True)
    doc = json.loads(run_cli("inspect", str(agg), "--batches", "--format", "json").stdout)
    rows = {b["batch"]: b for b in doc["batches"]}
    assert rows[1]["committed_at_ms"] == 1_800_000_000_250
    assert rows[last]["committed"] is True and rows[last]["problem"] == f"offsets/{last} is missing"
    text = run_cli("inspect", str(agg), "--batches", env={**os.environ, "COLUMNS": "250"}).stdout
    assert "2027-01-15T08:00:00.250Z" in text and f"offsets/{last} is missing" in text


def test_batches_are_kept_as_a_prefix_when_recorded_times_go_backwards(agg: Path) -> None:
    """New-user trial 4: a later batch whose recorded time is earlier (clock skew, another driver) was kept, and
    with it every batch planned after the time asked."""
    planned = _planned_ms(agg)
    last = max(planned)
    f = agg / "offsets" / str(last)
    lines = f.read_text().splitlines()
    meta = json.loads(lines[1])
    meta["batchTimestampMs"] = planned[0]  # the newest batch claims the oldest time
    f.write_text("\n".join([lines[0], json.dumps(meta), *lines[2:]]))
    (agg / "offsets" / f".{last}.crc").unlink(missing_ok=True)
    assert _plan(str(agg), "--to-time", _iso(planned[1])) == _plan(str(agg), "--to-batch", "1")


def test_a_commit_written_after_the_time_is_noted(agg: Path) -> None:
    planned = _planned_ms(agg)
    when = planned[1] + 1
    late = (when + 60_000) / 1000
    os.utime(agg / "commits" / "1", (late, late))
    proc = run_cli("rollback", str(agg), "--to-time", str(when), "--force")
    assert proc.returncode == 0, proc.stderr
    assert "note: commits/1 was written at " in proc.stderr and "--to-batch 0 drops it" in proc.stderr, proc.stderr


def test_a_number_that_reads_as_seconds_or_another_type_is_refused(agg: Path) -> None:
    seconds = run_cli("rollback", str(agg), "--to-time", "1795371270", "--force")
    assert (
        seconds.returncode == 2
        and "reads as epoch seconds" in seconds.stderr
        and "give 1795371270000" in (seconds.stderr)
    ), seconds.stderr
    for bad in (1.5, dt.date(2026, 1, 1), True):
        with pytest.raises(UsageError, match="to_time: expected an ISO 8601 string"):
            ckptfix.plan_rollback(agg, to_time=bad, force=True)  # type: ignore[arg-type]
