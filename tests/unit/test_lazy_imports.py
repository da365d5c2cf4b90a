"""What a command and ``import ckptfix`` load: each command its own module, not the audit engine or the others
(a CLI start costs what its imports cost), and ``ckptfix.audit`` stays the API's function whatever order the
subpackage's modules are imported in. Each case runs in a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.repair.test_fixes_logs import extract


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


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_reading_state_does_not_load_pandas(fmt: str, tmp_path: Path) -> None:
    """pyarrow would import pandas on its first conversion (:func:`ckptfix.cli.common.arrow_without_pandas`); the
    rows come out all the same."""
    pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    agg, _ = extract("agg_hdfs", tmp_path / "x")
    out = tmp_path / f"rows.{fmt}"
    code = (
        "import sys\nfrom ckptfix.cli.main import main\n"
        f"try:\n    main(['state', 'read', {str(agg)!r}, '--format', {fmt!r}, '--out', {str(out)!r}, '-q'])\n"
        "except SystemExit as e:\n    print('exit', e.code)\n"
        "print('pandas' in sys.modules)"
    )
    assert _run(code).split() == ["exit", "0", "False"]
    plain = tmp_path / "plain.jsonl"  # the same read where pandas is loaded first
    code = (
        "import pandas, sys\nfrom ckptfix.cli.main import main\n"
        f"try:\n    main(['state', 'read', {str(agg)!r}, '--format', 'jsonl', '--out', {str(plain)!r}, '-q'])\n"
        "except SystemExit as e:\n    print('exit', e.code)"
    )
    assert _run(code).split() == ["exit", "0"]
    if fmt == "jsonl":
        assert sorted(out.read_text().splitlines()) == sorted(plain.read_text().splitlines())
    else:
        import pyarrow.parquet as pq

        rows = pq.read_table(out).num_rows
        assert rows == len(plain.read_text().splitlines()) > 0


def test_pyarrow_still_converts_pandas_objects_after_the_first_conversion_without_it() -> None:
    pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    convert = (
        "import pandas as pd\n"
        "df = pd.DataFrame({'a': [1, None], 'c': pd.Categorical(['x', 'y']), 's': ['u', None]})\n"
        "t = pa.Table.from_pandas(df)\n"
        "print(t.schema, t.to_pandas().equals(df), pa.array(df['c']).type, pa.array(pd.array([1, None], 'Int64')))"
    )
    plain = _run("import pyarrow as pa\n" + convert)
    after = _run(
        "import pyarrow as pa\nfrom ckptfix.cli.common import arrow_without_pandas\narrow_without_pandas()\n"
        "import sys\nassert 'pandas' not in sys.modules\n" + convert
    )
    assert after == plain
    assert "True" in plain
