"""The bulk encoders of ckptfix.stores.records against files Spark wrote: an HDFS snapshot rebuilt
from its own records in bulk is byte for byte the file Spark wrote (decompressed), and the pairs
handed to RocksDB carry the state encoding version byte in front of every key and value."""

from __future__ import annotations

from pathlib import Path

import pytest

from ckptfix.formats import codec, statefile
from ckptfix.stores import records

pa = pytest.importorskip("pyarrow")

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
# every HDFS snapshot Spark wrote into the committed fixtures (four codecs; see their generate.py)
SNAPSHOTS = sorted(FIXTURES.glob("codecs/*/state/*/*/*.snapshot")) + sorted(
    FIXTURES.glob("formats/hdfs/state/*/*/*.snapshot")
)


def _spark_snapshot(path: Path) -> bytes:
    data = path.read_bytes()
    name = codec.sniff(data)
    assert name is not None, f"{path}: no codec recognized"
    return codec.decompress(name, data, str(path))


def test_the_fixtures_hold_snapshots() -> None:
    assert len(SNAPSHOTS) >= 5


@pytest.mark.parametrize("path", SNAPSHOTS, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_a_snapshot_rebuilt_in_bulk_is_the_file_spark_wrote(path: Path) -> None:
    raw = _spark_snapshot(path)
    pairs = list(statefile.iter_records(raw, str(path), "snapshot"))
    assert pairs, f"{path}: an empty snapshot proves nothing"
    keys = pa.array([r.key for r in pairs], type=pa.binary())
    values = pa.array([r.value for r in pairs], type=pa.binary())
    # as one segment, and split in two (the shape bulk_pairs returns for a base plus later deltas)
    assert records.snapshot_bytes([(keys, values)]) == raw
    half = len(pairs) // 2
    split = [(keys.slice(0, half), values.slice(0, half)), (keys.slice(half), values.slice(half))]
    assert records.snapshot_bytes(split) == raw
    assert records.snapshot_bytes(split, chunk=3) == raw  # a few pairs at a time


def test_an_empty_store_is_the_end_marker_alone() -> None:
    empty = pa.array([], type=pa.binary())
    assert records.snapshot_bytes([]) == b"\xff\xff\xff\xff"
    assert records.snapshot_bytes([(empty, empty)]) == b"\xff\xff\xff\xff"


def test_pairs_for_rocksdb_carry_the_version_byte() -> None:
    keys = pa.array([b"k1", b"", b"k3" * 40], type=pa.binary())
    values = pa.array([b"", b"v2", b"v3"], type=pa.binary())
    got = list(
        records.prefixed_pairs(
            [(keys.slice(1), values.slice(1)), (keys.slice(0, 1), values.slice(0, 1))], b"\x00", chunk=1
        )
    )
    assert got == [(b"\x00", b"\x00v2"), (b"\x00" + b"k3" * 40, b"\x00v3"), (b"\x00k1", b"\x00")]
    assert all(type(k) is bytes and type(v) is bytes for k, v in got)
