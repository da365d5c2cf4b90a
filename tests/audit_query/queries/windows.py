"""Query modules for ``ckptfix audit --against tests.audit_query.queries.windows:<function>``: a windowed count
(``groupBy(window(ts, ...), k)``, watermark 5 s) over JSON files, into a parquet file sink in append mode.

Paths from the environment the test sets: CKPTFIX_AQ_INPUT (JSON files of ``ts`` (ISO text), ``k``),
CKPTFIX_AQ_OUTPUT (the sink). The bases are ``tumbling`` and ``sliding``; the others are changes of the window
(damage hunt 9, D21/D22).
"""

from __future__ import annotations

import os
from typing import Any

from pyspark.sql import functions as F


def _windowed(spark: Any, *window: str) -> Any:
    df = (
        spark.readStream.format("json")
        .schema("ts STRING, k STRING")
        .option("maxFilesPerTrigger", 1)
        .load(os.environ["CKPTFIX_AQ_INPUT"])
        .select(F.to_timestamp("ts").alias("ts"), "k")
        .withWatermark("ts", "5 seconds")
    )
    counts = df.groupBy(F.window("ts", *window), "k").count()
    out = counts.select(F.col("window.start").alias("start"), F.col("window.end").alias("end"), "k", "count")
    return out.writeStream.format("parquet").option("path", os.environ["CKPTFIX_AQ_OUTPUT"]).outputMode("append")


def tumbling(spark: Any) -> Any:
    """Base 1: 10 s tumbling windows."""
    return _windowed(spark, "10 seconds")


def sliding(spark: Any) -> Any:
    """Base 2: 10 s windows sliding every 5 s."""
    return _windowed(spark, "10 seconds", "5 seconds")


def longer(spark: Any) -> Any:
    """20 s tumbling windows (hunt 9, D21)."""
    return _windowed(spark, "20 seconds")


def shifted(spark: Any) -> Any:
    """10 s tumbling windows starting 3 s past."""
    return _windowed(spark, "10 seconds", "10 seconds", "3 seconds")


def sql_longer(spark: Any) -> Any:
    """20 s windows written as SQL text (a window() call the analyzer resolves, as in spark.sql queries)."""
    df = (
        spark.readStream.format("json")
        .schema("ts STRING, k STRING")
        .option("maxFilesPerTrigger", 1)
        .load(os.environ["CKPTFIX_AQ_INPUT"])
        .selectExpr("to_timestamp(ts) AS ts", "k")
        .withWatermark("ts", "5 seconds")
    )
    counts = df.groupBy(F.expr("window(ts, '20 seconds')"), "k").count()
    out = counts.select(F.col("window.start").alias("start"), F.col("window.end").alias("end"), "k", "count")
    return out.writeStream.format("parquet").option("path", os.environ["CKPTFIX_AQ_OUTPUT"]).outputMode("append")
