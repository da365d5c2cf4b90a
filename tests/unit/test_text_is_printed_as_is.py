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
