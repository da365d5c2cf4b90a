"""Run the ``ckptfix`` CLI in a child process (a real exit code and streams; a crash point kills it for real)."""

from __future__ import annotations

import os
import subprocess
import sys

from ckptfix.repair import engine


def run_cli(*args: str, crash_after: int | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m ckptfix.cli.main ARGS``; ``crash_after``: the engine kills itself after that many durable
    writes (:data:`ckptfix.repair.engine.CRASH_ENV`)."""
    env = {k: v for k, v in os.environ.items() if k != engine.CRASH_ENV}
    if crash_after is not None:
        env[engine.CRASH_ENV] = str(crash_after)
    return subprocess.run(
        [sys.executable, "-m", "ckptfix.cli.main", *args], capture_output=True, text=True, env=env, timeout=120
    )
