"""The query of recipe 10: copy JSON input to Spark's JSON FILE sink, adding ``value_x2 = value * 2``.

``query(spark, input_dir, output_dir, buggy=False)`` returns the UNSTARTED DataStreamWriter; the caller sets
``checkpointLocation`` and the trigger. Paths default to ``$INPUT`` and ``$OUT``. ``buggy=True`` (or
``$BUGGY=1``) is the release that went wrong: it writes ``value * 20``.

The sink is Spark's file sink (``format("json")``, append mode): it records every batch it wrote in
``$OUT/_spark_metadata/`` and skips a batch id it has recorded already. Read the output with
``spark.read.json($OUT)``, which lists the files that log names (and nothing else).
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
    return out.writeStream.format("json").option("path", output_dir).outputMode("append")
