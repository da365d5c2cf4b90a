"""The bulk reader folds an HDFS store's deltas into the state in steps (memory bounded by the state and a budget
of unfolded files, ``records.FOLD_BYTES``, here from every file to once at the end); whatever the
puts and removals, it must give what the record-by-record reader gives: the same live pairs, in the same order
(a key keeps the place of its first record, also when it was removed and put again), the base's untouched keys
after them. Two independent readers of the same files (``records.hdfs_pairs``, ``records.bulk_pairs``); the
files are lz4 deltas and snapshots in the layout Spark writes (the framing is proven against Spark's own files in
tests/stores/test_bulk_encode.py)."""

from __future__ import annotations

import struct
import tempfile
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ckptfix.checkpoint import Checkpoint
from ckptfix.formats import codec, statefile
from ckptfix.formats.statefile import Op, Record
from ckptfix.stores import records
from ckptfix.stores.chain import Chain, Step

pytest.importorskip("pyarrow")


def _key(k: int) -> bytes:  # an UnsafeRow of one long: null bits, then the value
    return struct.pack("<qq", 0, k)


def _value(v: int) -> bytes:
    return struct.pack("<qq", 0, v)


OPS = st.lists(  # per delta: (key, value or None for a removal)
    st.lists(st.tuples(st.integers(0, 12), st.none() | st.integers(0, 1000)), max_size=20), min_size=1, max_size=6
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    deltas=OPS,
    base=st.none() | st.lists(st.integers(0, 12), unique=True, max_size=10),
    fold_bytes=st.sampled_from([0, 200, 1 << 30]),  # fold after every file, now and then, once at the end
)
def test_bulk_pairs_equal_the_record_by_record_pairs(
    tmp_path: Path, deltas: list, base: list | None, fold_bytes: int
) -> None:
    root = Path(tempfile.mkdtemp(dir=tmp_path))
    store_dir = root / "state" / "0" / "0"
    store_dir.mkdir(parents=True)
    steps = []
    first = 1
    base_step = None
    if base is not None:
        raw = statefile.dump_snapshot([Record(_key(k), _value(k * 7)) for k in base])
        (store_dir / "1.snapshot").write_bytes(codec.compress("lz4", raw))
        base_step, first = Step("state/0/0/1.snapshot", "snapshot", 1), 2
    for i, ops in enumerate(deltas):
        recs = [Record(_key(k), None, Op.DELETE) if v is None else Record(_key(k), _value(v)) for k, v in ops]
        version = first + i
        (store_dir / f"{version}.delta").write_bytes(codec.compress("lz4", statefile.dump_delta(recs)))
        steps.append(Step(f"state/0/0/{version}.delta", "delta", version))
    ckpt = Checkpoint.open(str(root))
    store = ckpt.state.operators[0].partitions[0]["default"]
    chain = Chain(store, steps[-1].version, "hdfs", base_step, tuple(steps))
    slow = [(k, v) for k, v, *_ in records.hdfs_pairs(ckpt, chain, "lz4")]
    with mock.patch.object(records, "FOLD_BYTES", fold_bytes):
        segments = records.bulk_pairs(ckpt, chain, "lz4", "hdfs")
    assert segments is not None
    fast = [(k, v) for keys, values in segments for k, v in zip(keys.to_pylist(), values.to_pylist(), strict=True)]
    assert fast == slow
