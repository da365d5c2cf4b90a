"""state rebuild on the committed real-Spark fixtures: plan, apply, read back, undo."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ckptfix.cli.main import app
from ckptfix.errors import FormatError
from ckptfix.repair import engine
from ckptfix.repair.rebuild import plan_rebuild
from ckptfix.state.read import read_state
from ckptfix.storage import Location
from tests.state.test_read_fixtures import COUNTS, FIXTURES, GIVEN, counts


def tree(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "_ckptfix" not in p.parts
    }


def copy(name: str, tmp_path: Path) -> Path:
    dest = tmp_path / name
    shutil.copytree(FIXTURES / name, dest)
    return dest


def apply(plan, ckpt: Path) -> str:  # type: ignore[no-untyped-def]
    return engine.apply(plan, Location(str(ckpt)), Location(str(ckpt / "_ckptfix")), idle_seconds=0)


def flip(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))


def test_corrupt_newest_hdfs_snapshot_is_rebuilt_from_the_older_one(tmp_path: Path) -> None:
    ckpt = copy("hdfs", tmp_path)
    flip(ckpt / "state/0/0/4.snapshot", 40)  # inside the LZ4 payload: the block checksum fails
    with pytest.raises(FormatError, match="4.snapshot"):
        list(read_state(str(ckpt), version=4))
    before = tree(ckpt)
    result = plan_rebuild(str(ckpt), version=4)
    assert tree(ckpt) == before  # planning changes nothing
    assert [a.path for a in result.plan.actions] == ["state/0/0/4.snapshot"]
    assert result.stores[0].chain == "2.snapshot + deltas 3..4"
    assert "4.snapshot" in result.stores[0].skipped[0]
    apply(result.plan, ckpt)
    read = read_state(str(ckpt), version=4)
    assert counts(list(read)) == COUNTS[4] and read.chains[0] == "4.snapshot"
    engine.undo(Location(str(ckpt)), Location(str(ckpt / "_ckptfix")), force=True)
    assert tree(ckpt) == before


def test_rocksdb_changelogs_get_a_zip(tmp_path: Path) -> None:
    ckpt = copy("rocksdb", tmp_path)
    result = plan_rebuild(str(ckpt), version=3)
    written = sorted(a.path for a in result.plan.actions)
    assert written[0] == "state/0/0/3.zip" and all(p.startswith("state/0/0/SSTs/") for p in written[1:])
    apply(result.plan, ckpt)
    read = read_state(str(ckpt), version=3, **GIVEN)
    assert counts(list(read)) == COUNTS[3] and read.chains[0] == "3.zip"
    # version 4 still loads from its own zip, and 4 from 3.zip + 4.changelog gives the same rows
    assert counts(list(read_state(str(ckpt), version=4, **GIVEN))) == COUNTS[4]


def test_prune_keeps_what_spark_retains(tmp_path: Path) -> None:
    ckpt = copy("hdfs", tmp_path)
    # retain 1 (HDFSBackedStateStoreProvider.cleanup): the oldest retained version is 4 - 1 = 3,
    # whose base is 2.snapshot; only what is older than that goes
    result = plan_rebuild(str(ckpt), version=4, prune=True, retain=1)
    deleted = sorted(a.path for a in result.plan.actions if a.op == "delete")
    assert deleted == ["state/0/0/1.delta"]
    # rebuilding version 3 with retain 1: the new 3.snapshot is the base of version 3
    deleted = sorted(
        a.path for a in plan_rebuild(str(ckpt), version=3, prune=True, retain=1).plan.actions if a.op == "delete"
    )
    assert deleted == [f"state/0/0/{n}" for n in ("1.delta", "2.delta", "2.snapshot")]
    # the default retention (100 versions) keeps every file: nothing older than version 1
    assert [a for a in plan_rebuild(str(ckpt), version=4, prune=True).plan.actions if a.op == "delete"] == []
    apply(result.plan, ckpt)
    assert counts(list(read_state(str(ckpt), version=4))) == COUNTS[4]


def test_cli_dry_run_apply_undo(tmp_path: Path) -> None:
    ckpt = copy("hdfs", tmp_path)
    flip(ckpt / "state/0/0/4.snapshot", 40)
    before = tree(ckpt)
    runner = CliRunner()
    dry = runner.invoke(app, ["state", "rebuild", str(ckpt), "--version", "4", "-f", "json"])
    assert dry.exit_code == 0, dry.output
    assert json.loads(dry.stdout)["plan"]["actions"][0]["path"] == "state/0/0/4.snapshot"
    assert tree(ckpt) == before
    done = runner.invoke(app, ["state", "rebuild", str(ckpt), "--version", "4", "--apply", "--idle-seconds", "0"])
    assert done.exit_code == 0, done.output
    assert counts(list(read_state(str(ckpt), version=4))) == COUNTS[4]
    undone = runner.invoke(app, ["undo", str(ckpt), "--force"])
    assert undone.exit_code == 0, undone.output
    assert tree(ckpt) == before
