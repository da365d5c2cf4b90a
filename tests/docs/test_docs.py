"""Keep the docs honest: the README's two commands, CI, every command (README or docs/) and every rule (docs/audit.md)
documented. tests/docs/test_doc_blocks.py runs their shell blocks."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from ckptfix.audit import RULES
from ckptfix.cli.main import command_names

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
AUDIT_DOC = (ROOT / "docs" / "audit.md").read_text()
ALL_DOCS = README + "".join(p.read_text() for p in sorted((ROOT / "docs").glob("*.md")))


def _opening_commands() -> list[str]:
    block = re.search(r"```bash\n(.*?)```", README, re.S)
    assert block, "README must open with a bash block"
    assert README.index("```bash") < README.index("\n## "), "the two commands come first"
    return [ln for ln in block.group(1).splitlines() if ln.strip()]


def test_readme_opens_with_exactly_two_commands() -> None:
    install_and_run, tests = _opening_commands()
    assert "pip install ." in install_and_run and "ckptfix audit samples/" in install_and_run
    sample = install_and_run.rsplit(" ", 1)[-1]
    assert (ROOT / sample / "offsets").is_dir(), f"{sample} must be a checkpoint shipped in the repo"
    assert "pytest" in tests


def test_ci_runs_the_readme_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    assert _opening_commands()[1] in ci.splitlines()


def test_every_rule_is_in_the_audit_doc() -> None:
    for rule_id, rule in RULES.items():
        assert f"| `{rule_id}` | {rule.severity} | {rule.title} |" in AUDIT_DOC, rule_id


def test_every_command_is_documented() -> None:
    for name in command_names():
        assert f"`ckptfix {name}" in ALL_DOCS, name


def test_readme_links_every_docs_page() -> None:
    for page in sorted((ROOT / "docs").glob("*.md")):
        assert f"](docs/{page.name})" in README, f"README.md links no docs/{page.name}: add it under ## Documentation"


def test_changelog_keeps_an_unreleased_section() -> None:
    text = (ROOT / "CHANGELOG.md").read_text()
    assert "## [Unreleased]" in text and "keepachangelog" in text


def test_ruff_is_clean() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "ckptfix", "tests", "bench"], cwd=ROOT, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_mypy_is_clean() -> None:
    proc = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_import_and_help_work_without_extras() -> None:
    code = (
        "import sys; [sys.modules.__setitem__(m, None) for m in ('s3fs','pyspark','pyarrow','rocksdict')];"
        "import ckptfix, ckptfix.cli.main as m; m.main(['--help'])"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "audit" in proc.stdout
