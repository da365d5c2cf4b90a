"""A stream-stream join with a deduplicated left side, and changed versions of it.

Paths from the environment: CKPTFIX_AQ_LEFT, CKPTFIX_AQ_RIGHT (input dirs), CKPTFIX_AQ_OUTPUT (sink dir).
The base query (``same``) has two stateful operators: the join and the deduplication under it.
"""

from __future__ import annotations

import os
from typing import Any

from pyspark.sql import functions as F

from tests.spark.queries import INPUT_SCHEMA_DDL


def _side(spark: Any, env: str, prefix: str) -> Any:
    df = spark.readStream.format("json").schema(INPUT_SCHEMA_DDL).option("maxFilesPerTrigger", 1).load(os.environ[env])
    return df.select(*(F.col(c).alias(f"{prefix}_{c}") for c in ("id", "key", "value")))


def _sink(df: Any) -> Any:
    out = os.environ["CKPTFIX_AQ_OUTPUT"]

    def write(batch_df: Any, batch_id: int) -> None:
        batch_df.write.mode("overwrite").json(f"{out}/batch_id={batch_id:05d}")

    return df.writeStream.foreachBatch(write)


def same(spark: Any) -> Any:
    left = _side(spark, "CKPTFIX_AQ_LEFT", "l").dropDuplicates(["l_id"])
    right = _side(spark, "CKPTFIX_AQ_RIGHT", "r")
    return _sink(left.join(right, F.col("l_key") == F.col("r_key")))


def dedup_keys(spark: Any) -> Any:
    """Deduplicate on (id, key) instead of id: the dedup key schema changes."""
    left = _side(spark, "CKPTFIX_AQ_LEFT", "l").dropDuplicates(["l_id", "l_key"])
    right = _side(spark, "CKPTFIX_AQ_RIGHT", "r")
    return _sink(left.join(right, F.col("l_key") == F.col("r_key")))


def join_keys(spark: Any) -> Any:
    """Join on (key, id) instead of key: the join's key schemas change."""
    left = _side(spark, "CKPTFIX_AQ_LEFT", "l").dropDuplicates(["l_id"])
    right = _side(spark, "CKPTFIX_AQ_RIGHT", "r")
    return _sink(left.join(right, (F.col("l_key") == F.col("r_key")) & (F.col("l_id") == F.col("r_id"))))


def no_dedup(spark: Any) -> Any:
    """The deduplication removed: one stateful operator fewer."""
    left = _side(spark, "CKPTFIX_AQ_LEFT", "l")
    right = _side(spark, "CKPTFIX_AQ_RIGHT", "r")
    return _sink(left.join(right, F.col("l_key") == F.col("r_key")))


def swapped(spark: Any) -> Any:
    """The join's sides the other way round (right.join(left)): same key, the sides' stores swap their rows'
    columns (damage hunt 9, D14: restarted on 4.3.0, each side's stored rows joined as the other's)."""
    left = _side(spark, "CKPTFIX_AQ_LEFT", "l").dropDuplicates(["l_id"])
    right = _side(spark, "CKPTFIX_AQ_RIGHT", "r")
    return _sink(right.join(left, F.col("l_key") == F.col("r_key")))
