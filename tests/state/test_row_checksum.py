"""Spark 4.x row checksums (rowChecksum.enabled): HDFS values and removal keys carry a CRC32C
first; RocksDB values are checksum | length | row. Rows and change feed equal what Spark's own
statestore reader returned for the same checkpoints (tests/fixtures/state_rowchecksum)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ckptfix.state.read import read_changes, read_state

HERE = Path(__file__).resolve().parents[1] / "fixtures" / "state_rowchecksum"
EXPECTED = json.loads((HERE / "expected.json").read_text())


@pytest.mark.parametrize("provider", ["hdfs", "rocksdb"])
def test_rows_and_changes_equal_sparks(provider: str) -> None:
    ckpt = str(HERE / provider)
    state = sorted([r["key"]["k"], r["value"]["count"]] for r in read_state(ckpt))
    assert state == EXPECTED[provider]["state"]
    changes = sorted(
        [c["batch_id"], c["change_type"], c["key"]["k"], c["value"]["count"] if c["value"] else None]
        for c in read_changes(ckpt, from_batch=0)
    )
    assert changes == EXPECTED[provider]["changes"]
