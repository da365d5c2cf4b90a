"""The install command a missing extra names: ckptfix is not on PyPI, so it is a checkout's path, never
``pip install 'ckptfix[...]'`` (which pip would look up on PyPI and not find)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from ckptfix.errors import MissingExtra

#: the pip of the Python that runs ckptfix (new-user trial 3: a bare `pip` on PATH was another environment's)
PIP = f"{sys.executable} -m pip install"

#: a Python that sees ``site`` and the standard library only (not the venv, where this checkout is installed)
ISOLATED = "import sys; sys.path = [{site!r}] + [p for p in sys.path if 'site-packages' not in p]; "
ROOT = Path(__file__).resolve().parents[1]  # the checkout these tests run from


def test_from_a_checkout_the_hint_names_the_checkout() -> None:
    message = str(MissingExtra("rocksdict", "rocksdb"))
    assert message == f"this needs the 'rocksdict' package: {PIP} -e '{ROOT}[rocksdb]'"
    assert "ckptfix[" not in message


def test_installed_from_a_checkout_the_hint_names_the_recorded_checkout(tmp_path: Path) -> None:
    """A non-editable install (README's ``pip install .``): the package is a copy in site-packages; the checkout
    is the one pip recorded in direct_url.json."""
    site = tmp_path / "site"
    shutil.copytree(ROOT / "ckptfix", site / "ckptfix", ignore=shutil.ignore_patterns("__pycache__"))
    info = site / "ckptfix-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ckptfix\nVersion: 0.1.0\n")
    (info / "direct_url.json").write_text(json.dumps({"url": "file:///src/my%20clone", "dir_info": {}}))
    code = "from ckptfix.errors import MissingExtra; print(MissingExtra('pyspark', 'spark'))"
    proc = subprocess.run(
        [sys.executable, "-I", "-c", ISOLATED.format(site=str(site)) + code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert proc.stdout.strip() == f"this needs the 'pyspark' package: {PIP} '/src/my clone[spark]'", proc.stderr


def test_without_a_recorded_checkout_the_hint_says_where_to_run_it(tmp_path: Path) -> None:
    site = tmp_path / "site"
    shutil.copytree(ROOT / "ckptfix", site / "ckptfix", ignore=shutil.ignore_patterns("__pycache__"))
    code = "from ckptfix.errors import MissingExtra; print(MissingExtra('s3fs', 's3'))"
    proc = subprocess.run(
        [sys.executable, "-I", "-c", ISOLATED.format(site=str(site)) + code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert proc.stdout.strip() == (
        f"this needs the 's3fs' package: {PIP} '<checkout>[s3]'  (<checkout>: your clone of ckptfix)"
    ), proc.stderr
