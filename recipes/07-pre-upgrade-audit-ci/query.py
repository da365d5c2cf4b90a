"""The query of recipe 07: the inner stream-stream join of ``tests/fixtures/state35/join_hdfs.tar.gz``.

``query(spark, left_dir, right_dir, output_dir)`` returns the UNSTARTED DataStreamWriter (the caller sets
``checkpointLocation`` and the trigger); paths default to ``$INPUT_LEFT``, ``$INPUT_RIGHT`` and ``$OUT``. Join:
``lk = rk`` and ``rts`` within 5 s of ``lts``, both sides with a 10 s watermark; append mode; ``foreachBatch``
writes batch ``b`` to ``<output_dir>/batch_id=<b>/``. The CI gate of this recipe does not run it: the audit
reads only the checkpoint.
"""

from __future__ import annotations

import os
from typing import Any


def query(spark: Any, left_dir: str | None = None, right_dir: str | None = None, output_dir: str | None = None) -> Any:
    from pyspark.sql import functions as F

    left_dir = left_dir or os.environ["INPUT_LEFT"]
    right_dir = right_dir or os.environ["INPUT_RIGHT"]
    output_dir = output_dir or os.environ["OUT"]

    def side(path: str, schema: str, ts: str) -> Any:
        src = spark.readStream.format("json").schema(schema).option("maxFilesPerTrigger", 1)
        return src.load(path).withWatermark(ts, "10 seconds")

    left = side(left_dir, "lid LONG, lk STRING, lts TIMESTAMP", "lts")
    right = side(right_dir, "rid LONG, rk STRING, rts TIMESTAMP", "rts")
    cond = (
        (F.col("lk") == F.col("rk"))
        & (F.col("rts") >= F.col("lts") - F.expr("INTERVAL 5 SECONDS"))
        & (F.col("rts") <= F.col("lts") + F.expr("INTERVAL 5 SECONDS"))
    )

    def write(batch_df: Any, batch_id: int) -> None:
        batch_df.write.mode("overwrite").json(f"{output_dir}/batch_id={batch_id:05d}")

    return left.join(right, cond, "inner").writeStream.foreachBatch(write).outputMode("append")
