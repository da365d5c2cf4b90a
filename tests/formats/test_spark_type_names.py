"""ckptfix's reading of a state schema's JSON types against what Spark's ``DataType.fromJson`` did with the same
candidates (recorded by tests/fixtures/record_datatype_json.py on 3.5.9, 4.0.5, 4.1.4, 4.2.1 and 4.3.0): a value
every version rejects is named, with the text Spark's message quotes; one any version reads is never called bad."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ckptfix.formats.unsaferow import spark_json_message, spark_json_rejects
from tests.fixtures.record_datatype_json import NAMES, OBJECTS

RECORDED = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "datatype_json.json").read_text())
CANDIDATES = {f"name:{n}": n for n in NAMES} | {f"object:{k}": v for k, v in OBJECTS.items()}


def test_every_version_was_recorded() -> None:
    assert sorted(RECORDED) == ["3.5.9", "4.0.5", "4.1.4", "4.2.1", "4.3.0"]
    assert all(set(results) == set(CANDIDATES) for results in RECORDED.values())


@pytest.mark.parametrize("label", sorted(CANDIDATES))
def test_a_type_is_called_bad_only_where_every_spark_rejects_it(label: str) -> None:
    errors = [results[label] for results in RECORDED.values()]
    found = spark_json_rejects(CANDIDATES[label])
    if any(e is None for e in errors):
        assert found is None, f"{label}: some Spark reads it"
        return
    if found is None:  # every Spark rejects it, for a reason this check leaves alone (precision, collation name)
        assert not all("Failed to convert the JSON string" in e for e in errors), label
        return
    for version, error in zip(RECORDED, errors, strict=True):
        quoted = spark_json_message(found, spark4=not version.startswith("3."))
        assert quoted in error, (label, version, quoted, error)
    if label.startswith("name:"):
        assert spark_json_message(found).startswith(f"Failed to convert the JSON string '{CANDIDATES[label]}' to a")
