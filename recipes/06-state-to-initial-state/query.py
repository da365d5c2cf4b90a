"""The queries of recipe 06: a running count and sum per key kept in user-defined state.

``query(spark, input_dir, output_dir)``: release 1, ``applyInPandasWithState`` (state ``cnt LONG, total LONG``).
``seeded_query(spark, input_dir, output_dir, state_parquet)``: release 2, the same logic with
``transformWithStateInPandas`` (PySpark 4.0+, RocksDB state store) whose ``initialState`` is the state of release
1 read offline by ``ckptfix state read ... --format parquet``. PySpark's ``applyInPandasWithState`` has no
initial state parameter (``flatMapGroupsWithState``'s ``initialState`` exists only in Scala/Java);
``transformWithStateInPandas(..., initialState=GroupedData)`` is what PySpark offers.

Both return the UNSTARTED DataStreamWriter (the caller sets ``checkpointLocation`` and the trigger); paths default
to ``$INPUT``, ``$OUT`` and ``$STATE_PARQUET``. Output rows: ``key, cnt, total`` for every key seen in a batch,
written by ``foreachBatch`` to ``<output_dir>/batch_id=<b>/`` (overwrite).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

STATE_SCHEMA = "cnt LONG, total LONG"
OUTPUT_SCHEMA = "key STRING, cnt LONG, total LONG"
ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


def _source(spark: Any, input_dir: str) -> Any:
    return (
        spark.readStream.format("json")
        .schema("id LONG, key STRING, value LONG")
        .option("maxFilesPerTrigger", 1)
        .load(input_dir)
    )


def _sink(df: Any, output_dir: str) -> Any:
    def write(batch_df: Any, batch_id: int) -> None:
        batch_df.write.mode("overwrite").json(f"{output_dir}/batch_id={batch_id:05d}")

    return df.writeStream.foreachBatch(write).outputMode("update")


def running_totals(key: tuple[Any, ...], pdfs: Iterator[Any], state: Any) -> Iterator[Any]:
    """Release 1's function for applyInPandasWithState."""
    import pandas as pd

    cnt, total = state.get if state.exists else (0, 0)
    for pdf in pdfs:
        cnt += len(pdf)
        total += int(pdf["value"].sum())
    state.update((cnt, total))
    yield pd.DataFrame({"key": [key[0]], "cnt": [cnt], "total": [total]})


def query(spark: Any, input_dir: str | None = None, output_dir: str | None = None) -> Any:
    input_dir = input_dir or os.environ["INPUT"]
    output_dir = output_dir or os.environ["OUT"]
    totals = (
        _source(spark, input_dir)
        .groupBy("key")
        .applyInPandasWithState(running_totals, OUTPUT_SCHEMA, STATE_SCHEMA, "Update", "NoTimeout")
    )
    return _sink(totals, output_dir)


def _processor() -> Any:
    import pandas as pd
    from pyspark.sql.streaming import StatefulProcessor

    class RunningTotals(StatefulProcessor):
        def init(self, handle: Any) -> None:
            self.totals = handle.getValueState("totals", STATE_SCHEMA)

        def handleInitialState(self, key: Any, initialState: Any, timerValues: Any) -> None:
            row = initialState.iloc[0]
            self.totals.update((int(row["cnt"]), int(row["total"])))

        def handleInputRows(self, key: Any, rows: Any, timerValues: Any) -> Iterator[Any]:
            cnt, total = self.totals.get() if self.totals.exists() else (0, 0)
            for pdf in rows:
                cnt += len(pdf)
                total += int(pdf["value"].sum())
            self.totals.update((cnt, total))
            yield pd.DataFrame({"key": [key[0]], "cnt": [cnt], "total": [total]})

        def close(self) -> None:
            pass

    return RunningTotals()


def initial_state(spark: Any, state_parquet: str) -> Any:
    """Release 1's state as ckptfix wrote it (``key.key``, ``value.groupState.cnt/total``), grouped by key."""
    from pyspark.sql import functions as F

    rows = spark.read.parquet(state_parquet).select(
        F.col("key.key").alias("key"),
        F.col("value.groupState.cnt").alias("cnt"),
        F.col("value.groupState.total").alias("total"),
    )
    return rows.groupBy("key")


def seeded_query(
    spark: Any, input_dir: str | None = None, output_dir: str | None = None, state_parquet: str | None = None
) -> Any:
    """Release 2. Needs ``spark.sql.streaming.stateStore.providerClass`` = RocksDB (``ROCKSDB_PROVIDER``).
    Without ``state_parquet`` (nor ``$STATE_PARQUET``) it starts from empty state."""
    input_dir = input_dir or os.environ["INPUT"]
    output_dir = output_dir or os.environ["OUT"]
    state_parquet = state_parquet or os.environ.get("STATE_PARQUET")
    totals = (
        _source(spark, input_dir)
        .groupBy("key")
        .transformWithStateInPandas(
            statefulProcessor=_processor(),
            outputStructType=OUTPUT_SCHEMA,
            outputMode="Update",
            timeMode="None",
            initialState=initial_state(spark, state_parquet) if state_parquet else None,
        )
    )
    return _sink(totals, output_dir)
