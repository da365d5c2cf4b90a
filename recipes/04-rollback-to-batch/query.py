"""The query of recipe 04: copy JSON input to an idempotent sink, adding ``value_x2 = value * 2``.

``query(spark, input_dir, output_dir, buggy=False)`` returns the UNSTARTED DataStreamWriter; the caller sets
``checkpointLocation`` and the trigger. Paths default to ``$INPUT`` and ``$OUT``. ``buggy=True`` (or
``$BUGGY=1``) is the release that went wrong: it writes ``value * 20``.

The sink is ``foreachBatch`` writing batch ``b`` to ``$OUT/batch_id=<b>/`` with mode overwrite, so a batch that
runs again replaces its own output.
"""

from __future__ import annotations

import os
from typing import Any


def query(spark: Any, input_dir: str | None = None, output_dir: str | None = None, buggy: bool | None = None) -> Any:
    from pyspark.sql import functions as F

    input_dir = input_dir or os.environ["INPUT"]
    output_dir = output_dir or os.environ["OUT"]
    if buggy is None:
        buggy = os.environ.get("BUGGY") == "1"
    factor = 20 if buggy else 2
    source = (
        spark.readStream.format("json")
        .schema("id LONG, key STRING, value LONG")
        .option("maxFilesPerTrigger", 1)
        .load(input_dir)
    )
    out = source.withColumn("value_x2", F.col("value") * F.lit(factor))

    def write(batch_df: Any, batch_id: int) -> None:
        batch_df.write.mode("overwrite").json(f"{output_dir}/batch_id={batch_id:05d}")

    return out.writeStream.foreachBatch(write)
