"""Query module for ``ckptfix audit --against tests.audit_query.queries.sessions:<function>``: the session-window
count of tests/fixtures/state35 (``session_hdfs``: ``groupBy(session_window(ts, "10 seconds"), k).count()``,
watermark 10 s) over JSON files (CKPTFIX_AQ_INPUT), into foreachBatch in append mode."""

from __future__ import annotations

import os
from typing import Any

from pyspark.sql import functions as F


def _sessions(spark: Any, gap: str) -> Any:
    df = (
        spark.readStream.format("json")
        .schema("k STRING, ts TIMESTAMP")
        .option("maxFilesPerTrigger", 1)
        .load(os.environ["CKPTFIX_AQ_INPUT"])
        .withWatermark("ts", "10 seconds")
    )
    counts = df.groupBy(F.session_window("ts", gap), "k").count()
    return counts.writeStream.foreachBatch(lambda batch, batch_id: None).outputMode("append")


def session(spark: Any) -> Any:
    return _sessions(spark, "10 seconds")


def longer_gap(spark: Any) -> Any:
    return _sessions(spark, "30 seconds")
