"""The file sink entry of a batch that wrote nothing (``state repartition --sink``), on the committed Spark 3.5.9
file sink (``tests/fixtures/spark-3.5.9/filesink.tar.gz``: batches 0..6, no compaction yet). The names and contents
expected here follow Spark's ``CompactibleFileStreamLog`` (``batchIdToPath``, ``compact``), read from the fixture's
own files; the live proof is tests/repair/test_repartition_sink_live.py."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from ckptfix.errors import SinkEntryRefused
from ckptfix.repair.sink_entry import plan_sink_entry
from ckptfix.sinks import open_sink

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "spark-3.5.9" / "filesink.tar.gz"


@pytest.fixture
def output(tmp_path: Path) -> Path:
    with tarfile.open(FIXTURE) as tar:
        tar.extractall(tmp_path, filter="data")
    return tmp_path / "output"


def test_a_plain_entry_is_the_version_line_alone(output: Path) -> None:
    plan = plan_sink_entry(open_sink(str(output)), 7, "3.5")
    (action,) = plan.actions
    assert (action.op, action.path, action.content) == ("write", "_spark_metadata/7", b"v1")


def test_a_compaction_entry_lists_every_file_of_the_batches_it_compacts(output: Path) -> None:
    """Interval 8 (the query's conf; no compact file yet): batch 7 is a compaction batch and reads batches 0..6."""
    plan = plan_sink_entry(open_sink(str(output)), 7, "3.5", default_interval=8)
    (action,) = plan.actions
    assert action.path == "_spark_metadata/7.compact"
    want = [ln for b in range(7) for ln in (output / "_spark_metadata" / str(b)).read_bytes().splitlines()[1:] if ln]
    assert action.content == b"\n".join([b"v1", *want])


@pytest.mark.parametrize(
    ("batch", "interval", "says"),
    [
        (8, 10, "to end at batch 7 (the batch before it), found batch 6"),
        (7, 4, "_spark_metadata/3.compact is missing: the compaction at batch 7 reads it (Spark would fail too)"),
    ],
)
def test_refusals(output: Path, batch: int, interval: int, says: str) -> None:
    with pytest.raises(SinkEntryRefused, match=None) as err:
        plan_sink_entry(open_sink(str(output)), batch, "3.5", default_interval=interval)
    assert f"cannot write the file sink's entry for batch {batch}: " in str(err.value) and says in str(err.value)
