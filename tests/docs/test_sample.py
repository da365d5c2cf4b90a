"""The sample the README audits is what it claims: real Spark refuses it exactly as predicted."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from ckptfix.audit import audit
from tests.unit.realckpt import sample_checkpoint


@pytest.mark.spark
def test_spark_fails_on_the_sample_as_the_audit_predicts(spark: Any, tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    shutil.copytree(sample_checkpoint(), ckpt)
    verdict = audit(str(ckpt), "4.3").verdict
    assert not verdict.restarts and verdict.message is not None

    # the query that wrote it (samples/generate_async_sparse.py), restarted with tracking off
    query = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", 5)
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", str(ckpt))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    from pyspark.errors import StreamingQueryException

    try:
        query.awaitTermination(120)
        error: BaseException | None = query.exception()
    except StreamingQueryException as exc:
        error = exc
    finally:
        query.stop()
    assert error is not None, "Spark restarted the sample"
    text = str(error)
    assert verdict.message in text
    assert f"batch {verdict.batch} doesn't exist" in text


def _restart(spark: Any, ckpt: Path, seconds: float) -> tuple[BaseException | None, list[Any]]:
    """The sample's query (samples/generate_async_sparse.py) restarted with tracking off for ``seconds``."""
    from pyspark.errors import StreamingQueryException

    query = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", 5)
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", str(ckpt))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    error: BaseException | None = None
    try:
        query.awaitTermination(seconds)
        error = query.exception()
    except StreamingQueryException as exc:
        error = exc
    finally:
        progress = list(query.recentProgress)
        query.stop()
    return error, progress


@pytest.mark.spark
def test_a_damaged_latest_offset_without_predecessor_is_repaired_back_to_the_newest_commit(
    spark: Any, tmp_path: Path
) -> None:
    """offsets/31 cut short (offsets/30 was never written: async tracking): Spark fails to restart; the default
    repair goes back to batch 29, the newest committed one (offsets/31 and commits/31 deleted, offsets/28 a copy
    of offsets/29), and Spark then resumes at batch 30 from batch 29's offsets."""
    from typer.testing import CliRunner

    from ckptfix.cli.main import app

    ckpt = tmp_path / "ckpt"
    shutil.copytree(sample_checkpoint(), ckpt)
    (ckpt / "offsets" / "31").write_bytes((ckpt / "offsets" / "31").read_bytes()[:100])
    broken = tmp_path / "broken"
    shutil.copytree(ckpt, broken)
    error, _ = _restart(spark, broken, 60)
    assert error is not None, "Spark restarted a checkpoint whose latest offset file is cut short"

    result = CliRunner().invoke(app, ["repair", str(ckpt), "--apply", "--idle-seconds", "0"])
    assert result.exit_code == 0, result.output
    assert "not fixed" not in result.output
    assert not (ckpt / "offsets" / "31").exists() and not (ckpt / "commits" / "31").exists()
    assert (ckpt / "offsets" / "28").read_bytes() == (ckpt / "offsets" / "29").read_bytes()

    error, progress = _restart(spark, ckpt, 4)
    assert error is None, error
    ran = [p for p in progress if p["batchId"] >= 30]
    assert ran and ran[0]["batchId"] == 30, [p["batchId"] for p in progress]
    start = ran[0]["sources"][0]["startOffset"]
    recorded = (ckpt / "offsets" / "29").read_text().splitlines()[-1]
    assert str(start) == recorded or json.loads(recorded) == start, (start, recorded)
