"""The query of recipe 05: JSON input files to a sink; release 2 drops duplicate ids (a stateful operator).

``query(spark, input_dir, output_dir, dedup=False)`` returns the UNSTARTED DataStreamWriter (the caller sets
``checkpointLocation`` and the trigger). Paths default to ``$INPUT`` and ``$OUT``; ``dedup`` defaults to
``$DEDUP == "1"``. The sink is ``foreachBatch`` writing batch ``b`` to ``<output_dir>/batch_id=<b>/`` (overwrite).
"""

from __future__ import annotations

import os
from typing import Any


def query(spark: Any, input_dir: str | None = None, output_dir: str | None = None, dedup: bool | None = None) -> Any:
    input_dir = input_dir or os.environ["INPUT"]
    output_dir = output_dir or os.environ["OUT"]
    if dedup is None:
        dedup = os.environ.get("DEDUP") == "1"
    rows = (
        spark.readStream.format("json")
        .schema("id LONG, key STRING, value LONG")
        .option("maxFilesPerTrigger", 1)
        .load(input_dir)
    )
    if dedup:
        rows = rows.dropDuplicates(["id"])

    def write(batch_df: Any, batch_id: int) -> None:
        batch_df.write.mode("overwrite").json(f"{output_dir}/batch_id={batch_id:05d}")

    return rows.writeStream.foreachBatch(write)
