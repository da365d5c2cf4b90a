"""A finding's fix names a command the user can paste: the checkpoint and the audit's --target-spark, never a
placeholder the CLI refuses (`--target-spark 4.x`). On tests/fixtures/state35/join_hdfs (a stream-stream join
Spark 3.5.9 wrote, which 4.x refuses: UPGRADE-JOIN-NULLABILITY), the command in the fix is run as printed."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from ckptfix.audit import audit

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "state35" / "join_hdfs.tar.gz"


@pytest.mark.parametrize("target", ["4.0", "4.3"])
def test_the_join_fix_command_runs_as_printed(target: str, tmp_path: Path) -> None:
    with tarfile.open(FIXTURE) as tar:
        tar.extractall(tmp_path, filter="data")
    ckpt = tmp_path / "ckpt"
    (finding,) = [f for f in audit(str(ckpt), target).findings if f.rule_id == "UPGRADE-JOIN-NULLABILITY"]
    command = re.search(r"`(ckptfix repair [^`]*)`", finding.fix)
    assert command is not None, finding.fix
    argv = shlex.split(command.group(1))
    assert argv == ["ckptfix", "repair", str(ckpt), "--target-spark", target, "--apply"]
    proc = subprocess.run(
        [sys.executable, "-m", "ckptfix.cli.main", *argv[1:], "--force"], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    assert not [f for f in audit(str(ckpt), target).findings if f.rule_id == "UPGRADE-JOIN-NULLABILITY"]
