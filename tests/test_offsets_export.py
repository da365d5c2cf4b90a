"""``ckptfix offsets export``: exact JSON for a real file-source checkpoint (Spark 3.5.9 tarball)
and for hand-written Kafka-shaped and compacted-source-log checkpoints (bytes as in
spark-logs-and-restart.md §3, §4, §8.1); bad input is one line and exit 2."""

from __future__ import annotations

import json
import shutil
import tarfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ckptfix.cli.main import app
from tests.unit.realckpt import sample_checkpoint

SPARK35 = Path(__file__).resolve().parent / "fixtures" / "spark-3.5.9"
META = b'{"batchWatermarkMs":0,"batchTimestampMs":1700000000000,"conf":{"spark.sql.shuffle.partitions":"3"}}'
COMMIT = b'v1\n{"nextBatchWatermarkMs":0}'


def export(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["offsets", "export", *args])
    return result.exit_code, result.stdout, result.stderr


def write_ckpt(root: Path, offsets: dict[int, list[bytes]], commits: list[int]) -> Path:
    """A minimal real-format checkpoint: metadata, offsets/<b> (v1, one line per source), commits/<b>."""
    (root / "offsets").mkdir(parents=True)
    (root / "commits").mkdir()
    (root / "metadata").write_bytes(b'{"id":"0b7c0a52-2f0e-4d5e-9d5c-000000000042"}')
    for b, lines in offsets.items():
        (root / "offsets" / str(b)).write_bytes(b"\n".join([b"v1", META, *lines]))
    for b in commits:
        (root / "commits" / str(b)).write_bytes(COMMIT)
    return root


@pytest.fixture
def kafka_ckpt(tmp_path: Path) -> Path:
    # source 0: Kafka, source 1: rate (a bare number), source 2: no offset yet ("-")
    return write_ckpt(
        tmp_path / "kafka",
        {
            0: [b'{"events":{"0":100,"1":250}}', b"4", b"-"],
            1: [b'{"events":{"0":130,"1":260},"audit":{"0":7}}', b"9", b"-"],
            2: [b'{"events":{"0":150,"1":300},"audit":{"0":9}}', b"12", b"-"],  # planned, not committed
        },
        [0, 1],
    )


def test_kafka_starting_offsets_are_the_committed_end_offsets(kafka_ckpt: Path) -> None:
    code, out, _ = export(str(kafka_ckpt), "--format", "json")
    assert code == 0
    doc = json.loads(out)
    assert doc["batch"] == 1 and doc["offset_log_version"] == 1  # the last committed batch
    kafka, rate, void = doc["sources"]
    assert kafka["source"] == "0" and kafka["kind"] == "kafka"
    assert kafka["offset"] == {"events": {"0": 130, "1": 260}, "audit": {"0": 7}}
    assert kafka["options"] == {"startingOffsets": '{"events":{"0":130,"1":260},"audit":{"0":7}}'}
    assert "inclusive" in kafka["note"] and "new checkpoint" in kafka["note"]
    assert (rate["kind"], rate["offset"], "options" in rate) == ("other", 9, False)
    assert (void["kind"], void["offset"]) == ("none", None)

    code, out, _ = export(str(kafka_ckpt), "--batch", "0", "--format", "json")
    assert json.loads(out)["sources"][0]["options"] == {"startingOffsets": '{"events":{"0":100,"1":250}}'}

    code, out, _ = export(str(kafka_ckpt))
    assert code == 0
    assert 'option startingOffsets = {"events":{"0":130,"1":260},"audit":{"0":7}}' in out
    assert "source 1: other" in out and "offset 9" in out


def test_file_source_lists_the_processed_files(tmp_path: Path) -> None:
    with tarfile.open(SPARK35 / "agg_hdfs.tar.gz") as tar:
        tar.extractall(tmp_path, filter="tar")
    code, out, _ = export(str(tmp_path / "ckpt"), "--batch", "2", "--format", "json")
    assert code == 0
    # sources/0/0..2 of the fixture: one file per batch, absolute paths of the generator's input dir;
    # mtimes are INPUT_MTIME_BASE + 60 s * index (tests/spark/queries.py)
    prefix = "file:///tmp/ckptfix-spark35-gen/base/agg_hdfs/input/part-"
    assert json.loads(out)["sources"] == [
        {
            "source": "0",
            "kind": "file",
            "offset": {"logOffset": 2},
            "processed_files": [f"{prefix}0000.json", f"{prefix}0001.json", f"{prefix}0002.json"],
            "newest_processed_timestamp_ms": 1700000120000,
            "note": json.loads(out)["sources"][0]["note"],
        }
    ]
    note = json.loads(out)["sources"][0]["note"]
    assert "move these files out of the input path" in note and "maxFileAge" in note

    code, out, _ = export(str(tmp_path / "ckpt"))
    assert code == 0
    assert "8 files already processed" in out and f"{prefix}0007.json" in out


def test_file_source_log_with_a_compaction(tmp_path: Path) -> None:
    ckpt = write_ckpt(tmp_path / "fs", {10: [b'{"logOffset":10}'], 11: [b'{"logOffset":11}']}, [10])
    log = ckpt / "sources" / "0"
    log.mkdir(parents=True)

    def entry(i: int) -> bytes:
        return b'{"path":"file:///in/f%02d.json","timestamp":%d,"batchId":%d}' % (i, 1000 + i, i)

    # 9.compact holds entries 0..9 (files 0..8 were removed by compaction cleanup), then 10, 11
    (log / "9.compact").write_bytes(b"\n".join([b"v1", *(entry(i) for i in range(10))]))
    (log / "10").write_bytes(b"v1\n" + entry(10))
    (log / "11").write_bytes(b"v1\n" + entry(11))
    code, out, _ = export(str(ckpt), "--format", "json")
    assert code == 0
    src = json.loads(out)["sources"][0]
    assert src["processed_files"] == [f"file:///in/f{i:02d}.json" for i in range(11)]
    assert src["newest_processed_timestamp_ms"] == 1010


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--batch", "7"], "offsets/7: expected batch 7 in the offset log, found none (offsets 0..2)"),
        (["--batch", "2"], "commits/2: batch 2 is not committed"),
    ],
)
@pytest.mark.parametrize("fmt", ["text", "json"])
def test_bad_input_is_one_line_and_exit_2(kafka_ckpt: Path, args: list[str], needle: str, fmt: str) -> None:
    code, out, err = export(str(kafka_ckpt), *args, "--format", fmt)
    assert code == 2
    if fmt == "json":
        assert needle in json.loads(out)["error"]["message"]
    else:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("ckptfix: error: ") and needle in lines[0]


def test_no_committed_batch_and_no_checkpoint(tmp_path: Path) -> None:
    ckpt = write_ckpt(tmp_path / "fresh", {0: [b"0"]}, [])
    code, _, err = export(str(ckpt))
    assert code == 2 and "expected a committed batch" in err and len(err.strip().splitlines()) == 1
    code, _, err = export(str(tmp_path / "nope"))
    assert code == 2 and "no such file" in err


def test_a_batch_missing_in_a_sparse_log_shows_the_gaps(tmp_path: Path) -> None:
    """samples/async-sparse (async progress tracking) holds offsets 0, 1, 3, 5, ..., 31: batch 2 is not there, and
    the message shows the gaps as rollback does, not a range 0..31 that suggests batch 2 is there."""
    ckpt = tmp_path / "ckpt"
    shutil.copytree(sample_checkpoint(), ckpt)
    code, _out, err = export(str(ckpt), "--batch", "2")
    assert code == 2
    odd = ",".join(str(b) for b in range(3, 32, 2))
    assert err == (
        f"ckptfix: error: {ckpt}/offsets/2: expected batch 2 in the offset log, found none (offsets 0..1,{odd})\n"
    )


def test_a_batch_whose_commit_file_is_gone_but_a_later_one_committed(tmp_path: Path) -> None:
    """Spark commits batches in order: commits/4 means batch 3 was processed, even with commits/3 deleted (a new
    user's trial: "batch 3 is not committed"). Spark 3.5.9's aggregation, offsets and commits 0..4."""
    from tests.state.test_state35 import extract

    ckpt = extract("agg_hdfs", tmp_path)
    (ckpt / "commits" / "3").unlink()
    code, out, err = export(str(ckpt), "--batch", "3", "--format", "json")
    assert code == 0, err
    assert json.loads(out)["batch"] == 3


def test_a_damaged_offset_file_is_a_format_error_naming_it(kafka_ckpt: Path) -> None:
    """A cut offset file is bad input (FormatError, the file and byte), not a usage mistake (new-user trial: the
    JSON error said kind UsageError)."""
    (kafka_ckpt / "offsets" / "1").write_bytes(b'v1\n{"batchWatermarkMs":0,')
    code, out, _ = export(str(kafka_ckpt), "--format", "json")
    assert code == 2
    error = json.loads(out)["error"]
    assert error["kind"] == "FormatError"
    assert error["message"].startswith(f"{kafka_ckpt / 'offsets' / '1'}: at byte 25: expected offset-log metadata")
