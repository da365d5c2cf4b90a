"""The Spark texts recorded in tests/fixtures name no machine path (the project must not): the recorders scrub
them (tests/spark/harness.scrub_machine_paths), also a path the 3000-character trim cut in the middle, which the
whole-path patterns missed (four outcomes named a recording machine's venv that way)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.spark.harness import scrub_machine_paths, trim_text

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
MACHINE = re.compile(r"(?<![\w<>.])/(?:work|home|root|tmp|usr|opt|var)/")


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("spark-*/outcomes.json")), ids=lambda p: p.parent.name)
def test_recorded_outcomes_name_no_machine_path(path: Path) -> None:
    found = {
        case: MACHINE.search(v["text"]).group(0)  # type: ignore[union-attr]
        for case, v in json.loads(path.read_text()).items()
        if isinstance(v, dict) and isinstance(v.get("text"), str) and MACHINE.search(v["text"])
    }
    assert not found, found


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("state_vs_spark/*.json")), ids=lambda p: p.stem)
def test_recorded_state_errors_name_no_machine_path(path: Path) -> None:
    reads = json.loads(path.read_text(encoding="utf-8"))["reads"]
    found = [r["error"] for r in reads if "error" in r and MACHINE.search(r["error"])]
    assert not found, found


def test_a_path_cut_by_the_trim_is_scrubbed(tmp_path: Path) -> None:
    venv_file = tmp_path / "venv-4.1.4" / "lib" / "python3.11" / "site-packages" / "pyspark" / "sql" / "utils.py"
    text = trim_text("x" * 2980 + f' File "{venv_file}"')
    assert str(tmp_path)[:8] in text and text.endswith(" …[trimmed]")
    scrubbed = scrub_machine_paths(text)
    assert not MACHINE.search(scrubbed) and scrubbed.endswith('File "<path> …[trimmed]')
