"""``metadata.java_uuid_error``: what java.util.UUID.fromString (Java 17) says about a query id. The texts of the
refusals are the ones Spark 3.5.9-4.2.1 printed (damage cases metadata_id_*, tests/fixtures/spark-*/outcomes.json);
the lenient forms follow UUID.fromString1, which splits at the four dashes and parses each part as a hex long."""

from __future__ import annotations

import pytest

from ckptfix.formats.metadata import java_uuid_error

IAE, NFE = "java.lang.IllegalArgumentException", "java.lang.NumberFormatException"


@pytest.mark.parametrize(
    "name",
    [
        "6f1c2a4e-0b9d-4c3e-8f7a-1d2e3f405162",
        "6F1C2A4E-0B9D-4C3E-8F7A-1D2E3F405162",  # recorded: restarts
        "1-1-1-1-1",  # fromString1: five hex numbers
        "+1-1-1-1-1",
    ],
)
def test_accepted(name: str) -> None:
    assert java_uuid_error(name) is None


@pytest.mark.parametrize(
    ("name", "error"),
    [
        ("not-a-uuid", (IAE, "Invalid UUID string: not-a-uuid")),  # recorded
        ("", (IAE, "Invalid UUID string: ")),  # recorded
        ("zzzzzzzz-1111-2222-3333-444444444444", (NFE, 'Error at index 0 in: "zzzzzzzz"')),  # recorded
        ("6f1c2a4e-0b9d-4c3e-8f7a-1d2e3f4051620", (IAE, "UUID string too large")),
        ("1-1-1-1-1-1", (IAE, "Invalid UUID string: 1-1-1-1-1-1")),
        ("1-1-1-1-x1", (NFE, 'Error at index 0 in: "x1"')),
        ("1-1-1-1-", (NFE, "NumberFormatException")),
    ],
)
def test_refused(name: str, error: tuple[str, str]) -> None:
    assert java_uuid_error(name) == error
