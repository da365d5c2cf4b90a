"""Which partitions `state read` and `state ls` take: the ones Spark loads at a restart (spark.sql.shuffle.partitions
of the offset log, 2 in Spark 3.5.9's aggregation tests/fixtures/state35/agg_hdfs), not whatever directories are
listed. A new user's trial (3 partitions): with state/0/1 deleted, `state read` printed 4 of the 6 rows and exited
0, and an extra empty state/0/3 (never read by Spark) made it fail."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ckptfix.errors import FormatError, UsageError
from ckptfix.state.inventory import list_state
from ckptfix.state.read import read_state
from tests.state.test_state35 import extract


def _rows(ckpt: Path, **kwargs: object) -> list[dict]:
    return list(read_state(str(ckpt), **kwargs).rows)  # type: ignore[arg-type]


def test_a_missing_partition_refuses_the_whole_read(tmp_path: Path) -> None:
    ckpt = extract("agg_hdfs", tmp_path)
    everything = _rows(ckpt)
    assert sorted({r["partition_id"] for r in everything}) == [0, 1]
    shutil.rmtree(ckpt / "state" / "0" / "1")
    with pytest.raises(FormatError) as err:
        _rows(ckpt)
    assert err.value.path.endswith("state/0/1") and "the query has 2 partitions" in err.value.expected
    # the others stay readable one by one
    assert _rows(ckpt, partition=0) == [r for r in everything if r["partition_id"] == 0]
    with pytest.raises(UsageError):
        _rows(ckpt, partition=1)
    listing = list_state(str(ckpt))
    assert not listing.ok
    assert [(p.partition, p.problem is None) for p in listing.operators[0].partitions] == [(0, True), (1, False)]


def test_a_directory_beyond_the_recorded_partitions_is_not_read(tmp_path: Path) -> None:
    ckpt = extract("agg_hdfs", tmp_path)
    everything = _rows(ckpt)
    (ckpt / "state" / "0" / "2").mkdir()
    assert _rows(ckpt) == everything
    listing = list_state(str(ckpt))
    assert listing.ok and listing.operators[0].num_partitions == 2


def test_a_renamed_partition_directory_is_named_as_the_missing_one(tmp_path: Path) -> None:
    """`mv state/0/1 state/0/7`: the audit's missing partition 1 points at state/0/7 (a new user's trial: the fix
    said only "restore it from a backup", and the extra directory was reported apart)."""
    from ckptfix.audit import audit

    ckpt = extract("agg_hdfs", tmp_path)
    (ckpt / "state" / "0" / "1").rename(ckpt / "state" / "0" / "7")
    found = next(f for f in audit(str(ckpt), "4.3").findings if f.rule_id == "STATE-PARTITION-MISSING")
    assert "state/0/7, beyond the recorded partitions, may be it renamed" in found.message
