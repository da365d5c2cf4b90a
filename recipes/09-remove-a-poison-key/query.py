"""The query of recipe 09: a running count and sum per key, update mode (the default state store provider).

``query(spark, input_dir, output_dir)`` returns the UNSTARTED DataStreamWriter (the caller sets
``checkpointLocation`` and the trigger). Paths default to ``$INPUT`` and ``$OUT``. The sink is ``foreachBatch``
writing batch ``b``'s updated keys to ``$OUT/batch_id=<b>/`` with mode overwrite.
"""

from __future__ import annotations

import os
from typing import Any


def query(spark: Any, input_dir: str | None = None, output_dir: str | None = None) -> Any:
    from pyspark.sql import functions as F

    input_dir = input_dir or os.environ["INPUT"]
    output_dir = output_dir or os.environ["OUT"]
    source = (
        spark.readStream.format("json")
        .schema("id LONG, key STRING, value LONG")
        .option("maxFilesPerTrigger", 1)
        .load(input_dir)
    )
    counts = source.groupBy("key").agg(F.count("*").alias("cnt"), F.sum("value").alias("total"))

    def write(batch_df: Any, batch_id: int) -> None:
        batch_df.write.mode("overwrite").json(f"{output_dir}/batch_id={batch_id:05d}")

    return counts.writeStream.foreachBatch(write).outputMode("update")
