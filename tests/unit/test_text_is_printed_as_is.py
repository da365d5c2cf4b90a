"""Text output prints what it names as it is: square brackets in a path, a rule's text or an install hint are not
taken as styling (rich's markup would drop ``[prod]`` from ``ck[prod]`` and ``[rocksdb]`` from
``pip install -e '/src/ckptfix[rocksdb]'``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from ckptfix.audit import RULES
from tests.support.cli import run_cli
from tests.unit.realckpt import sample_checkpoint


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, env={**os.environ, "COLUMNS": "200"})


def test_a_path_with_brackets_is_printed_whole(tmp_path: Path) -> None:
    ckpt = tmp_path / "ck[prod]" / "[bold]q1"
    shutil.copytree(sample_checkpoint(), ckpt)
    audit = _cli("audit", str(ckpt))
    assert audit.returncode == 1, audit.stderr
    assert f"checkpoint: {ckpt}" in audit.stdout
    assert f"{ckpt}/offsets/30" in audit.stdout
    assert json.loads(_cli("audit", str(ckpt), "--format", "json").stdout)["checkpoint"].endswith("ck[prod]/[bold]q1")
    repair = _cli("repair", str(ckpt))
    assert f"Plan for {ckpt} (Spark" in repair.stdout, repair.stdout
    inspect = _cli("inspect", str(ckpt))
    assert f"checkpoint {ckpt}" in inspect.stdout, inspect.stdout


def test_every_rules_text_is_printed_verbatim() -> None:
    out = _cli("rules").stdout
    bracketed = [r for r in RULES.values() if "[" in r.docs + r.fix]
    assert bracketed, "no rule text with brackets left to check"
    for rule in RULES.values():
        assert f"  {rule.docs}" in out, rule.id
        assert f"  fix: {rule.fix}" in out, rule.id


def test_emoji_codes_in_a_path_stay_text(tmp_path: Path) -> None:
    """A new user's `ckpt:smile:dir` printed as `ckpt😄dir`: rich's emoji codes are off, so the path is the one
    given (for errors and results alike)."""
    ckpt = tmp_path / "emo:x:dir" / "ck:smile:"
    shutil.copytree(sample_checkpoint(), ckpt)
    audit = _cli("audit", str(ckpt))
    assert f"checkpoint: {ckpt}" in audit.stdout, audit.stdout
    missing = _cli("audit", str(tmp_path / "no:smile:where"))
    assert missing.returncode == 2 and f"{tmp_path}/no:smile:where" in missing.stderr, missing.stderr


def test_control_bytes_from_a_damaged_file_are_escaped(tmp_path: Path) -> None:
    """Bytes quoted from a file (here a NUL-filled offset file) reach the terminal escaped, as JSON escapes them."""
    ckpt = tmp_path / "ck"
    shutil.copytree(sample_checkpoint(), ckpt)
    latest = max((p for p in (ckpt / "offsets").iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
    latest.write_bytes(b"v1\n\x00\x01\x1b[31mred")
    for args in (("audit", str(ckpt)), ("repair", str(ckpt))):
        done = _cli(*args)
        text = done.stdout + done.stderr
        assert not any(ch in text for ch in "\x00\x01\x1b"), text
