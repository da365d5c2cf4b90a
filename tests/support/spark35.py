"""A Python with PySpark 3.5.9 for the tests that prove behaviour on Spark 3.5 (run as subprocesses).

The suite installs it itself, so that a fresh clone passes on any machine: the first test that asks for
``py35`` creates ``.cache/spark-3.5.9/`` in the repository (ignored by git) with ``pyspark==3.5.9``,
``pandas<3`` and ``pyarrow``, and later runs reuse it. ``CKPTFIX_SPARK35_PYTHON`` names another interpreter
instead. A venv that cannot be created fails the test (no silent skip: the 3.5 proofs must run).
Register with ``pytest_plugins = ["tests.support.spark35"]``.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

import pytest

VERSION = "3.5.9"
PACKAGES = [f"pyspark=={VERSION}", "pandas<3", "pyarrow"]
ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / ".cache" / f"spark-{VERSION}"
READY = VENV / ".ckptfix-ready"  # written last: a venv without it was interrupted and is rebuilt


def _python(venv: Path) -> Path:
    return venv / "bin" / "python"


def _spark_version(python: Path) -> str | None:
    proc = subprocess.run(
        [str(python), "-c", "import pyspark; print(pyspark.__version__)"], capture_output=True, text=True, timeout=120
    )
    return proc.stdout.strip() if proc.returncode == 0 else None


def ensure_py35() -> Path:
    """The interpreter: ``$CKPTFIX_SPARK35_PYTHON``, or the cached venv, created on first use."""
    given = os.environ.get("CKPTFIX_SPARK35_PYTHON")
    if given:
        found = _spark_version(Path(given))
        if found is None or not found.startswith("3.5"):
            raise RuntimeError(f"CKPTFIX_SPARK35_PYTHON={given}: expected a Python with PySpark 3.5, found {found}")
        return Path(given)
    VENV.parent.mkdir(parents=True, exist_ok=True)
    with open(VENV.parent / f".spark-{VERSION}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one creator when several test processes start at once
        if READY.exists():
            return _python(VENV)
        steps = [
            [sys.executable, "-m", "venv", "--clear", str(VENV)],
            [str(_python(VENV)), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *PACKAGES],
        ]
        for cmd in steps:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
            if proc.returncode != 0:
                raise RuntimeError(f"{' '.join(cmd[:4])} ... failed: {(proc.stderr or proc.stdout)[-2000:]}")
        found = _spark_version(_python(VENV))
        if found != VERSION:
            raise RuntimeError(f"{VENV}: expected PySpark {VERSION}, found {found}")
        READY.write_text(VERSION)
    return _python(VENV)


@pytest.fixture(scope="session")
def py35() -> Path:
    try:
        return ensure_py35()
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
        pytest.fail(f"no Python with PySpark 3.5 for the Spark 3.5 proofs: {exc}")
