"""Spark's HDFS provider reads a delta or snapshot up to its -1 end marker and closes the stream: an LZ4 block after
the one that holds the marker (the end block) is never read, so damage there does not stop a restart (damage case
state_delta_cut_in_end_block, recorded on 3.5.9-4.2.1); damage in a block it reads does. On the real Spark 4.3 files
of tests/fixtures/formats (see generate.py there): ``decompress_as_read``, the store reader (``state read``) and the
file facts the audit and ``state ls --verify`` share.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ckptfix.api import open_checkpoint
from ckptfix.errors import FormatError
from ckptfix.formats import lz4block, statefile
from ckptfix.state.read import read_state
from ckptfix.stores import verify

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "formats"
STORE = "state/0/0"
END_BLOCK = lz4block.HEADER.size  # an end block is a bare header


def cut(data: bytes, where: str) -> bytes:
    """``end``: inside the end block; ``data``: inside the last data block's payload."""
    end = data[-END_BLOCK:]
    assert end.startswith(lz4block.MAGIC) and end[9:] == bytes(12)  # an end block: both lengths and checksum 0
    if where == "end":
        return data[: len(data) - END_BLOCK // 2]
    return data[: len(data) - END_BLOCK - 3]


@pytest.mark.parametrize("name", ["4.delta", "4.snapshot"])
def test_a_cut_end_block_is_not_read(name: str) -> None:
    data = (FIXTURES / "hdfs" / STORE / name).read_bytes()
    kind = name.split(".")[1]
    whole, unread = statefile.decompress_as_read("lz4", data, name, kind)  # type: ignore[arg-type]
    assert unread is None
    raw, unread = statefile.decompress_as_read("lz4", cut(data, "end"), name, kind)  # type: ignore[arg-type]
    assert raw == whole
    assert unread is not None and unread.kind == "truncated" and unread.offset == len(data) - END_BLOCK


def test_a_cut_data_block_is_read_and_fails() -> None:
    data = (FIXTURES / "hdfs" / STORE / "4.delta").read_bytes()
    with pytest.raises(FormatError) as info:
        statefile.decompress_as_read("lz4", cut(data, "data"), "4.delta", "delta")
    assert info.value.kind == "truncated"


def test_a_changelog_is_not_modelled_so() -> None:
    """Only the HDFS provider's files were read and recorded: a RocksDB changelog's cut end block still fails."""
    (path,) = (FIXTURES / "rocksdb" / STORE).glob("4.changelog")
    data = path.read_bytes()
    with pytest.raises(FormatError):
        statefile.decompress_as_read("lz4", cut(data, "end"), path.name, "changelog")


def test_state_read_and_file_facts(tmp_path: Path) -> None:
    ckpt = tmp_path / "hdfs"
    shutil.copytree(FIXTURES / "hdfs", ckpt)
    before = sorted(map(str, read_state(str(ckpt), version=3)))
    path = ckpt / STORE / "3.delta"
    path.write_bytes(cut(path.read_bytes(), "end"))
    assert sorted(map(str, read_state(str(ckpt), version=3))) == before  # the rows Spark loads

    opened = open_checkpoint(str(ckpt))
    store = opened.state.operators[0].partitions[0]["default"]
    facts = verify.check_file(opened, store, f"{STORE}/3.delta", "delta", "lz4")
    assert [(f.kind, f.codec_layer, f.error_kind) for f in facts] == [("trailing", True, "truncated")]

    path.write_bytes(cut((FIXTURES / "hdfs" / STORE / "3.delta").read_bytes(), "data"))
    facts = verify.check_file(opened, store, f"{STORE}/3.delta", "delta", "lz4")
    assert [(f.kind, f.codec_layer) for f in facts] == [("corrupt", True)]
    with pytest.raises(FormatError):
        list(read_state(str(ckpt), version=3))
