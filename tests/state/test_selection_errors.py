"""Asking for state that is not there (an operator, partition or store the checkpoint does not have, or any state
of a stateless query) is the user's mistake, not a damaged file: a ``UsageError`` naming the option, what the
checkpoint has, exit 2 (before: a ``FormatError`` "at byte 0" on a file that was never expected)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import run_cli

ROOT = Path(__file__).resolve().parents[2]
ROCKS = ROOT / "samples" / "rocksdb-changelog"


@pytest.mark.parametrize(
    ("ckpt", "args", "message"),
    [
        (ROCKS, ["--operator", "99"], f"--operator 99: no such operator in {ROCKS}/state (has 0)"),
        (ROCKS, ["--partition", "5"], f"--partition 5: no such partition in {ROCKS}/state/0 (has 0..1)"),
        (ROCKS, ["--store", "foo"], f"--store foo: no such store in {ROCKS}/state/0 (has default)"),
        (
            ROOT / "samples" / "async-sparse",
            [],
            f"{ROOT}/samples/async-sparse/state: no state stores (state/<operator>/...): the query is stateless, "
            "or its state/ directory is gone",
        ),
    ],
    ids=["operator", "partition", "store", "stateless"],
)
@pytest.mark.parametrize("command", ["read", "changes"])
def test_state_that_is_not_there_is_a_usage_error(ckpt: Path, args: list[str], message: str, command: str) -> None:
    extra = ["--from", "0"] if command == "changes" else []
    proc = run_cli("state", command, str(ckpt), *extra, *args, "--format", "json")
    assert proc.returncode == 2
    assert json.loads(proc.stdout)["error"] == {"kind": "UsageError", "message": message}


@pytest.mark.parametrize("jobs", ["0", "-2"])
def test_jobs_below_one_is_refused(jobs: str) -> None:
    proc = run_cli("state", "read", str(ROCKS), "--jobs", jobs)
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"ckptfix: error: --jobs: expected at least 1, found '{jobs}'"


def test_a_version_after_the_last_commit_is_named_as_a_version() -> None:
    proc = run_cli("state", "read", str(ROCKS), "--version", "13")
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith(
        "ckptfix: error: version 13 is the state after batch 12, which is not committed (last committed batch: 11, "
        "state version 12)"
    )


def _extract(name: str, dest: Path) -> Path:
    import tarfile

    with tarfile.open(ROOT / "tests" / "fixtures" / "spark-4.3.0" / f"{name}.tar.gz") as tar:
        tar.extractall(dest, filter="data")
    return dest / "ckpt"


def test_changes_of_a_join_name_only_the_options_changes_has(tmp_path: Path) -> None:
    """New-user trial: `state changes` on a join said to choose --join-side, an option it does not have."""
    ckpt = _extract("join", tmp_path)
    changes = run_cli("state", "changes", str(ckpt), "--from", "1", "--to", "2")
    assert changes.returncode == 2 and "--join-side" not in changes.stderr and "--store (" in changes.stderr
    read = run_cli("state", "read", str(ckpt))
    assert read.returncode == 2 and "--join-side left|right or --store (" in read.stderr


def test_changes_of_rocksdb_without_changelogs_says_so(tmp_path: Path) -> None:
    """New-user trial: a RocksDB store written without changelog checkpointing has no change feed; the error read
    like a missing file ("expected a file (the change feed of batch 6), found none")."""
    ckpt = _extract("agg_rocksdb", tmp_path)
    proc = run_cli("state", "changes", str(ckpt), "--from", "6", "--to", "7")
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        f"ckptfix: error: {ckpt}/state/0: expected RocksDB changelogs (the change feed is read from them; Spark's "
        "readChangeFeed needs changelog checkpointing too), found none: this query ran without "
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled; `ckptfix state read --batch N` "
        "reads each version whole"
    )
