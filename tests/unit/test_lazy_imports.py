"""What a command and ``import ckptfix`` load: each command its own module, not the audit engine or the others
(a CLI start costs what its imports cost), and ``ckptfix.audit`` stays the API's function whatever order the
subpackage's modules are imported in. Each case runs in a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys

import pytest


def _run(code: str) -> str:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


@pytest.mark.parametrize(
    "first",
    [
        "import ckptfix",
        "import ckptfix.audit.engine",
        "from ckptfix.audit import RULES",
        "import ckptfix.audit.rules_state, ckptfix.api",
        "from ckptfix.audit.engine import audit",
    ],
)
def test_ckptfix_audit_is_the_api_function_in_any_import_order(first: str) -> None:
    out = _run(
        f"{first}\nimport ckptfix, ckptfix.audit.targets, ckptfix.api\nprint(ckptfix.audit is ckptfix.api.audit)"
    )
    assert out == "True"


def test_the_audit_subpackage_still_exports_its_names() -> None:
    out = _run(
        "from ckptfix.audit import RULES, Report, Finding, audit\n"
        "from ckptfix.audit.engine import audit as engine_audit\n"
        "print(len(RULES) > 40, audit is engine_audit, Report.__module__, Finding.__module__)"
    )
    assert out == "True True ckptfix.audit.model ckptfix.audit.model"


def test_an_unknown_name_is_an_attribute_error() -> None:
    out = _run(
        "import ckptfix, ckptfix.audit as a\n"
        "for m, n in ((ckptfix, 'nosuch'), (a, 'nosuch')):\n"
        "    try:\n"
        "        getattr(m, n)\n"
        "    except AttributeError as e:\n"
        "        print(type(e).__name__)\n"
    )
    assert out.split() == ["AttributeError", "AttributeError"]


@pytest.mark.parametrize(
    ("argv", "loaded", "not_loaded"),
    [
        (["--version"], [], ["ckptfix.audit.engine", "ckptfix.cli.state_cmd", "ckptfix.cli.audit_cmd", "rich"]),
        (["state", "changes", "--help"], ["ckptfix.cli.state_cmd"], ["ckptfix.audit.engine", "ckptfix.cli.advise_cmd"]),
        (["state", "read", "--help"], ["ckptfix.cli.state_cmd"], ["ckptfix.repair.engine", "ckptfix.cli.repair_cmd"]),
        (["audit", "--help"], ["ckptfix.cli.audit_cmd"], ["ckptfix.cli.state_cmd", "ckptfix.cli.advise_cmd"]),
        (["--help"], ["ckptfix.cli.state_cmd", "ckptfix.cli.advise_cmd"], []),  # the list names every command
    ],
)
def test_a_command_loads_its_own_module_only(argv: list[str], loaded: list[str], not_loaded: list[str]) -> None:
    code = (
        "import sys\nfrom ckptfix.cli.main import main\n"
        f"try:\n    main({argv!r})\nexcept SystemExit:\n    pass\n"
        "print(' '.join(sorted(m for m in sys.modules if m.startswith(('ckptfix', 'rich')))), file=sys.stderr)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    modules = set(proc.stderr.strip().splitlines()[-1].split())
    assert set(loaded) <= modules, sorted(modules)
    assert not set(not_loaded) & modules, sorted(set(not_loaded) & modules)
