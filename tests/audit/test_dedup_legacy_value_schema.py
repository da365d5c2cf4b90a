"""Dedup written by Spark 3.3.0 (before SPARK-39650, fixed in 3.2.2/3.3.1) stores the whole input row as its value
schema instead of the dummy ``__dummy__ void`` later versions store. Spark >= 3.3.1 ignores dedup's value schema
in the compatibility check (StateSchemaCompatibilityChecker ``ignoreValueSchema``), and Spark 4.3.0 restarts this
checkpoint with the right rows (tests/fixtures/matrix/outcomes.json, recorded by tests/fixtures/matrix/record.py):
the audit must say it restarts, with no schema finding."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

from ckptfix.audit import audit
from ckptfix.formats import schema

MATRIX = Path(__file__).resolve().parents[1] / "fixtures" / "matrix"


def test_a_3_3_0_dedup_with_the_input_row_as_value_schema_restarts(tmp_path: Path) -> None:
    with tarfile.open(MATRIX / "3.3.0" / "dedup.tar.gz") as tar:
        tar.extractall(tmp_path, filter="tar")
    ckpt = tmp_path / "ckpt"
    path = ckpt / "state/0/0/_metadata/schema"
    stored = schema.parse(path.read_bytes(), str(path))
    assert [f["name"] for f in stored.value_schema["fields"]] == ["id", "key"]  # the bug, not "__dummy__"
    recorded = json.loads((MATRIX / "outcomes.json").read_text())["3.3.0"]["dedup"]["4.3.0"]
    assert recorded["ok"] and recorded["rows_ok"]
    report = audit(str(ckpt), "4.3")
    assert report.verdict.restarts is True
    assert not [f for f in report.findings if "SCHEMA" in f.rule_id], report.findings
