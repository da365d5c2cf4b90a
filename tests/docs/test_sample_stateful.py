"""samples/rocksdb-changelog is what samples/README.md says: a RocksDB checkpoint with changelog checkpointing
(both N.zip and N.changelog files) that reads on any path, and whose state is what the query computed and what
Spark's own statestore reader shows. Its expected rows follow from the query in
samples/generate_rocksdb_changelog.py, not from ckptfix."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ckptfix.cli.main import app

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "samples" / "rocksdb-changelog"


def expected_rows(batches: int) -> dict[int, tuple[int, int]]:
    """key -> (count, sum) after `batches` batches of rate-micro-batch (10 rows a batch, values 0, 1, 2, ...)."""
    values = range(10 * batches)
    return {k: (sum(1 for v in values if v % 5 == k), sum(v for v in values if v % 5 == k)) for k in range(5)}


def cli_rows(ckpt: Path, *args: str) -> dict[int, tuple[int, int]]:
    result = CliRunner().invoke(app, ["state", "read", str(ckpt), "-q", *args])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    return {r["key"]["key"]: (r["value"]["count"], r["value"]["sum"]) for r in rows}


def test_the_sample_has_snapshots_and_changelogs_and_no_machine_path() -> None:
    for part in ("0", "1"):
        names = {p.name for p in (SAMPLE / "state" / "0" / part).iterdir()}
        assert {"3.zip", "12.zip", "11.changelog", "12.changelog"} <= names, names
    for path in SAMPLE.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert b"file:" not in data and b"/tmp/" not in data and b"/home/" not in data, path
    offsets = (SAMPLE / "offsets" / "11").read_text()
    assert "RocksDBStateStoreProvider" in offsets
    for log in ("offsets", "commits"):  # stopped between two triggers: batch 11 is the last, and committed
        assert sorted(int(p.name) for p in (SAMPLE / log).iterdir() if p.name.isdigit()) == list(range(12)), log


def test_the_progress_events_are_those_of_the_query_that_wrote_it() -> None:
    events = [
        json.loads(line) for line in (SAMPLE.parent / "rocksdb-changelog-progress.jsonl").read_text().splitlines()
    ]
    query_id = json.loads((SAMPLE / "metadata").read_text())["id"]
    assert [e["batchId"] for e in events] == list(range(12))
    assert {e["id"] for e in events} == {query_id}
    assert [e["numInputRows"] for e in events] == [10] * 12
    assert all(e["stateOperators"][0]["numRowsTotal"] == 5 for e in events)


def test_a_copy_elsewhere_audits_and_reads_as_the_query_computed(tmp_path: Path) -> None:
    ckpt = tmp_path / "somewhere" / "else"
    shutil.copytree(SAMPLE, ckpt)
    audited = CliRunner().invoke(app, ["audit", str(ckpt), "-q"])
    assert audited.exit_code == 0, audited.output
    assert "Spark 4.3 will restart this checkpoint" in audited.stdout
    assert cli_rows(ckpt) == expected_rows(12)
    assert cli_rows(ckpt, "--batch", "4") == expected_rows(5)  # version 5: a changelog on top of 3.zip


@pytest.mark.spark
def test_spark_reads_the_same_state_and_restarts_a_copy(spark: Any, tmp_path: Path) -> None:
    ckpt = tmp_path / "moved"
    shutil.copytree(SAMPLE, ckpt)
    theirs = {
        r["key"]["key"]: (r["value"]["count"], r["value"]["sum"])
        for r in spark.read.format("statestore").load(str(ckpt)).collect()
    }
    assert theirs == cli_rows(ckpt) == expected_rows(12)

    from pyspark.sql import functions as F

    # the query of samples/generate_rocksdb_changelog.py, restarted on the copy for one more batch
    query = (
        spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", 10)
        .option("startTimestamp", 0)
        .load()
        .withColumn("key", F.col("value") % 5)
        .groupBy("key")
        .agg(F.count("*").alias("count"), F.sum("value").alias("sum"))
        .writeStream.format("noop")
        .outputMode("update")
        .option("checkpointLocation", str(ckpt))
        .trigger(once=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    assert sorted(p.name for p in (ckpt / "commits").iterdir() if p.name.isdigit()) == sorted(str(b) for b in range(13))
    assert cli_rows(ckpt) == expected_rows(13)
