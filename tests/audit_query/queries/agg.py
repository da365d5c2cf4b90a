"""Query modules for ``ckptfix audit --against tests.audit_query.queries.agg:<function>``.

Each function gets a SparkSession and returns an unstarted DataStreamWriter, like a user's job.
The base checkpoint is written by tests/spark/queries.py ``agg_hdfs`` (groupBy(key) count, sum;
foreachBatch, update mode); paths come from the environment the test sets:
CKPTFIX_AQ_INPUT (the base's input dir), CKPTFIX_AQ_OUTPUT (a sink dir), CKPTFIX_AQ_INPUT2 (a
second input dir).
"""

from __future__ import annotations

import os
from typing import Any

from pyspark.sql import functions as F

from tests.spark.queries import INPUT_SCHEMA_DDL


def _source(spark: Any, env: str = "CKPTFIX_AQ_INPUT") -> Any:
    return (
        spark.readStream.format("json").schema(INPUT_SCHEMA_DDL).option("maxFilesPerTrigger", 1).load(os.environ[env])
    )


def _sink(df: Any) -> Any:
    out = os.environ["CKPTFIX_AQ_OUTPUT"]

    def write(batch_df: Any, batch_id: int) -> None:
        batch_df.write.mode("overwrite").json(f"{out}/batch_id={batch_id:05d}")

    return df.writeStream.foreachBatch(write).outputMode("update")


def _agg(df: Any) -> Any:
    return df.groupBy("key").agg(F.count("*").alias("cnt"), F.sum("value").alias("total"))


def same(spark: Any) -> Any:
    """The base query, unchanged."""
    return _sink(_agg(_source(spark)))


def projection(spark: Any) -> Any:
    """A filter before and a derived column after the aggregation: same state schemas."""
    df = _agg(_source(spark).where(F.col("value") >= 0))
    return _sink(df.withColumn("double_total", F.col("total") * 2).where(F.col("cnt") > 0))


def reordered(spark: Any) -> Any:
    """Only a projection after the aggregation, with the aggregates in another order -- the optimizer
    reorders the aggregation buffers to match, so the state value schema becomes (sum, count)."""
    return _sink(_agg(_source(spark)).select("key", (F.col("total") * 2).alias("double_total"), "cnt"))


def renamed(spark: Any) -> Any:
    """Aggregates renamed only (Spark compares state schemas ignoring names)."""
    df = _source(spark).groupBy("key").agg(F.count("*").alias("n"), F.sum("value").alias("s"))
    return _sink(df)


def more_keys(spark: Any) -> Any:
    """An added grouping column: the state key schema changes."""
    df = _source(spark).withColumn("parity", F.col("id") % 2)
    return _sink(df.groupBy("key", "parity").agg(F.count("*").alias("cnt"), F.sum("value").alias("total")))


def more_aggs(spark: Any) -> Any:
    """An added aggregate: the state value schema changes."""
    df = (
        _source(spark)
        .groupBy("key")
        .agg(F.count("*").alias("cnt"), F.sum("value").alias("total"), F.max("value").alias("top"))
    )
    return _sink(df)


def two_sources(spark: Any) -> Any:
    """A second source unioned in: two sources against a one-source checkpoint."""
    return _sink(_agg(_source(spark).unionByName(_source(spark, "CKPTFIX_AQ_INPUT2"))))


def memory_sink(spark: Any) -> Any:
    """foreachBatch replaced by the memory sink."""
    return _agg(_source(spark)).writeStream.format("memory").queryName("ckptfix_aq_memory").outputMode("update")


def partitions(spark: Any) -> Any:
    """The base query, built in a session that asks for 7 shuffle partitions."""
    spark.conf.set("spark.sql.shuffle.partitions", "7")
    return same(spark)


def file_sink(spark: Any) -> Any:
    """The stateless base query to a parquet file sink (path from CKPTFIX_AQ_OUTPUT)."""
    return _source(spark).writeStream.format("parquet").option("path", os.environ["CKPTFIX_AQ_OUTPUT"])


# ----------------------------------------------------------------------------------- bad ones


def returns_dataframe(spark: Any) -> Any:
    return _agg(_source(spark))


def returns_none(spark: Any) -> None:
    return None


def raises(spark: Any) -> Any:
    raise RuntimeError("the job's config is missing")


NOT_CALLABLE = 42


def moved_input(spark: Any) -> Any:
    """The base query reading a copy of its input in another directory (CKPTFIX_AQ_INPUT_MOVED)."""
    return _sink(_agg(_source(spark, "CKPTFIX_AQ_INPUT_MOVED")))


def count_to_sum(spark: Any) -> Any:
    """count(*) changed to a sum under the same alias: the buffers are (sum, sum) instead of (count, sum), the same
    types; Spark restarts and the sum continues from the stored count (damage hunt 9, D15)."""
    df = _source(spark).groupBy("key").agg(F.sum("id").alias("cnt"), F.sum("value").alias("total"))
    return _sink(df)


def other_key(spark: Any) -> Any:
    """Grouped by another expression of the same type (concat('x', key)): no stored key matches (hunt 9, D17)."""
    df = _source(spark).withColumn("key2", F.concat(F.lit("x"), F.col("key")))
    return _sink(df.groupBy("key2").agg(F.count("*").alias("cnt"), F.sum("value").alias("total")))


def append_mode(spark: Any) -> Any:
    """The base query in append mode: an aggregation without a watermark, which start() refuses (hunt 9, D25)."""
    return _sink(_agg(_source(spark))).outputMode("append")
