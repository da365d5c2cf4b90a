"""The query of recipe 01, as it ran with asynchronous progress tracking (without the two async options, which
``ckptfix async-off`` sets itself).

``query(spark)`` is the ``--query query.py:query`` of ``ckptfix async-off``: it returns the UNSTARTED
DataStreamWriter with the query's source, sink and trigger, and no ``checkpointLocation``. Paths come from
``$INPUT`` and ``$OUT`` (or the arguments). The sink is ``foreachBatch`` writing batch ``b`` to
``$OUT/batch_id=<b>/`` with mode overwrite (idempotent by batch id). Spark accepts async tracking only for Kafka,
console, memory, noop and foreach sinks; a foreachBatch query that ran with it had to set Spark's testing option
``_asyncProgressTrackingOverrideSinkSupportCheck``, so this one does too.
"""

from __future__ import annotations

import os
from typing import Any


def query(spark: Any, input_dir: str | None = None, output_dir: str | None = None) -> Any:
    input_dir = input_dir or os.environ["INPUT"]
    output_dir = output_dir or os.environ["OUT"]
    source = (
        spark.readStream.format("json")
        .schema("id LONG, key STRING, value LONG")
        .option("maxFilesPerTrigger", 1)
        .load(input_dir)
    )

    def write(batch_df: Any, batch_id: int) -> None:
        batch_df.write.mode("overwrite").json(f"{output_dir}/batch_id={batch_id:05d}")

    return (
        source.writeStream.foreachBatch(write)
        .option("_asyncProgressTrackingOverrideSinkSupportCheck", "true")
        .trigger(processingTime="400 milliseconds")
    )
