"""The sample the README audits is what it claims: real Spark refuses it exactly as predicted."""

from __future__ import annotations

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
