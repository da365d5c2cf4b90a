"""Symbolic links that leave a checkpoint (issue 16 #7): ckptfix never reads, copies, rewrites or deletes through
them, and the audit names them. On a copy of a real checkpoint Spark wrote (samples/async-sparse)."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ckptfix.cli.main import app
from ckptfix.storage import Location

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "samples" / "async-sparse"
SECRET = "ckptfix-test-secret-content"


def setup(tmp_path: Path) -> tuple[Path, Path]:
    ckpt, outside = tmp_path / "ckpt", tmp_path / "outside"
    shutil.copytree(SAMPLE, ckpt)
    outside.mkdir()
    (outside / "secret").write_text(SECRET)
    (outside / "dir").mkdir()
    (outside / "dir" / "0").write_text(SECRET)
    (ckpt / "commits" / "99").symlink_to(outside / "secret")  # a "commit" that is a link out
    (ckpt / "extra").symlink_to(outside / "dir", target_is_directory=True)
    return ckpt, outside


def digest(d: Path) -> dict[str, str]:
    return {str(p.relative_to(d)): hashlib.sha256(p.read_bytes()).hexdigest() for p in d.rglob("*") if p.is_file()}


def test_audit_names_links_and_reads_nothing_through_them(tmp_path: Path) -> None:
    ckpt, _ = setup(tmp_path)
    result = CliRunner().invoke(app, ["audit", str(ckpt), "--quiet"])
    assert result.exit_code == 1, result.output
    assert SECRET not in result.output
    assert "CKPT-LINK-OUTSIDE" in result.output and "commits/99" in result.output and "extra" in result.output
    assert "batch 30 doesn't exist" in result.output  # the link is not taken for the latest commit


def test_repair_rollback_and_relocate_never_go_through_a_link(tmp_path: Path) -> None:
    ckpt, outside = setup(tmp_path)
    before = digest(outside)
    runner = CliRunner()
    repaired = runner.invoke(app, ["repair", str(ckpt), "--apply", "--force"])
    assert repaired.exit_code == 0, repaired.output
    rolled = runner.invoke(app, ["rollback", str(ckpt), "--to-batch", "1", "--apply", "--force"])
    assert rolled.exit_code == 0, rolled.output
    dest = tmp_path / "moved"
    moved = runner.invoke(app, ["migrate", "relocate", str(ckpt), str(dest), "--apply", "--force"])
    assert moved.exit_code == 0, moved.output
    assert digest(outside) == before and (ckpt / "commits" / "99").is_symlink()
    assert SECRET not in "".join(p.read_text(errors="replace") for p in dest.rglob("*") if p.is_file())


def test_no_write_through_a_link(tmp_path: Path) -> None:
    ckpt, outside = setup(tmp_path)
    loc = Location(str(ckpt))
    loc.list_tree()
    assert set(loc.outside_links) == {"commits/99", "extra"}
    for call in (
        lambda: loc.write_atomic("extra/0", b"x"),
        lambda: loc.create_exclusive("extra/new", b"x"),
        lambda: loc.delete("commits/99"),
        lambda: loc.write_atomic("commits/99", b"x"),
    ):
        with pytest.raises(PermissionError, match="symbolic link"):
            call()
    assert (outside / "secret").read_text() == SECRET and (outside / "dir" / "0").read_text() == SECRET
    assert not (outside / "dir" / "new").exists()
