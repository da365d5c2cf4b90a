"""Streaming scenarios shared by the Spark 3.5.9 fixture generator and the live 4.x tests.

A scenario builds an UNSTARTED ``DataStreamWriter``; the caller sets ``checkpointLocation`` and the trigger
(see ``tests/spark/harness.py``). Everything here must work under PySpark 3.5 and 4.x and must not import
pytest (the 3.5 generator runs outside pytest).

Layout of a scenario work dir (see ``harness.build_base``)::

    <workdir>/ckpt/            the checkpoint
    <workdir>/input/           JSON-lines input files part-NNNN.json (5 rows each, globally unique ids)
    <workdir>/output/          sink output (foreachBatch: batch_id=<N>/ written with mode overwrite;
                               filesink: parquet + _spark_metadata)
    <workdir>/output_append/   foreachBatch scenarios only: every batch appended (shows replays)
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROWS_PER_FILE = 5
INPUT_MTIME_BASE = 1_700_000_000  # 2023-11-14T22:13:20Z
KEYS = ["k0", "k1", "k2", "k3", "k4", "k5"]
INPUT_SCHEMA_DDL = "id LONG, key STRING, value LONG"

HDFS_PROVIDER = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"

# Every session conf a scenario may set. Before each start the harness sets the scenario's values and
# unsets the others, so scenarios never leak confs into each other in the shared session.
SCENARIO_CONF_KEYS = (
    "spark.sql.streaming.stateStore.providerClass",
    "spark.sql.streaming.stateStore.minDeltasForSnapshot",
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled",
    "spark.sql.streaming.stateStore.checkpointFormatVersion",
    "spark.sql.streaming.fileSink.log.compactInterval",
    "spark.sql.streaming.fileSource.log.compactInterval",
)

# Session-wide confs (set at session creation; the maintenance interval is read when the maintenance
# task starts, so it must be in place before the first stateful query).
SESSION_CONFS = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "3",
    "spark.sql.streaming.stateStore.maintenanceInterval": "200ms",
    "spark.sql.streaming.noDataMicroBatches.enabled": "false",
    "spark.sql.adaptive.enabled": "false",
    "spark.driver.memory": "1g",
    "spark.sql.session.timeZone": "UTC",
}


# Exceptions raised inside foreachBatch functions (the harness reads their Java cause chains).
FOREACH_BATCH_ERRORS: list[BaseException] = []


def append_dir(output_dir: Path) -> Path:
    """The append-mode companion of a foreachBatch output dir."""
    return output_dir.with_name(output_dir.name + "_append")


def input_file(input_dir: Path, index: int) -> Path:
    return input_dir / f"part-{index:04d}.json"


def write_input_files(input_dir: Path, start: int, count: int) -> list[Path]:
    """Write files part-<start>..part-<start+count-1> (deterministic content, unique ids). Existing files
    with the same name are left alone (content is deterministic, so they are identical)."""
    input_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for i in range(start, start + count):
        path = input_file(input_dir, i)
        if not path.exists():
            rows = [
                {"id": i * ROWS_PER_FILE + r, "key": KEYS[(i + r) % len(KEYS)], "value": i * 10 + r}
                for r in range(ROWS_PER_FILE)
            ]
            tmp = path.with_name("." + path.name + ".tmp")  # hidden: the file source ignores it
            tmp.write_text("\n".join(json.dumps(row) for row in rows) + "\n")
            # Distinct, fixed modification times: the file source orders files by mtime, so batch n reads
            # file n (one file per trigger) instead of whatever order equal mtimes give.
            mtime = INPUT_MTIME_BASE + 60 * i
            os.utime(tmp, (mtime, mtime))
            tmp.rename(path)
        written.append(path)
    return written


def count_input_files(input_dir: Path) -> int:
    return len(list(input_dir.glob("part-*.json")))


def _source(spark: Any, input_dir: Path) -> Any:
    return spark.readStream.format("json").schema(INPUT_SCHEMA_DDL).option("maxFilesPerTrigger", 1).load(str(input_dir))


def _foreach_batch_writer(df: Any, output_dir: Path) -> Any:
    out = str(output_dir)
    app = str(append_dir(output_dir))

    def sink(batch_df: Any, batch_id: int) -> None:
        try:
            batch_df.write.mode("overwrite").json(f"{out}/batch_id={batch_id:05d}")
            batch_df.write.mode("append").json(app)
        except Exception as exc:  # the Python proxy hides the Java cause chain: keep it for the harness
            FOREACH_BATCH_ERRORS.append(exc)
            raise

    return df.writeStream.foreachBatch(sink)


def _build_stateless(spark: Any, input_dir: Path, output_dir: Path) -> Any:
    return _foreach_batch_writer(_source(spark, input_dir), output_dir)


def _build_agg(spark: Any, input_dir: Path, output_dir: Path) -> Any:
    from pyspark.sql import functions as F

    agg = _source(spark, input_dir).groupBy("key").agg(F.count("*").alias("cnt"), F.sum("value").alias("total"))
    return _foreach_batch_writer(agg, output_dir).outputMode("update")


def _build_filesink(spark: Any, input_dir: Path, output_dir: Path) -> Any:
    return _source(spark, input_dir).writeStream.format("parquet").option("path", str(output_dir))


def _build_dedup_filesink(spark: Any, input_dir: Path, output_dir: Path) -> Any:
    """Stateful (dropDuplicates on the globally unique id) into the file sink: the sink holds the input rows."""
    deduped = _source(spark, input_dir).dropDuplicates(["id"])
    return deduped.writeStream.format("parquet").option("path", str(output_dir))


def _build_dedup_agg(spark: Any, input_dir: Path, output_dir: Path) -> Any:
    """Two stateful operators: dropDuplicates on the globally unique id (it drops nothing), then the aggregation
    (so the sink holds the aggregates of every input row)."""
    from pyspark.sql import functions as F

    deduped = _source(spark, input_dir).dropDuplicates(["id"])
    agg = deduped.groupBy("key").agg(F.count("*").alias("cnt"), F.sum("value").alias("total"))
    return _foreach_batch_writer(agg, output_dir).outputMode("update")


def _with_ts(spark: Any, input_dir: Path) -> Any:
    from pyspark.sql import functions as F

    return _source(spark, input_dir).withColumn("ts", F.col("value").cast("timestamp"))


# ------------------------------------------------------------------------------------------- joins


def _join(spark: Any, input_dir: Path, output_dir: Path, non_null: bool, how: str = "inner") -> Any:
    from pyspark.sql import functions as F

    def side(prefix: str) -> Any:
        df = _with_ts(spark, input_dir)
        key = F.coalesce(F.col("key"), F.lit("")) if non_null else F.col("key")
        df = df.select(F.col("id").alias(f"{prefix}id"), key.alias(f"{prefix}key"), F.col("ts").alias(f"{prefix}ts"))
        return df.withWatermark(f"{prefix}ts", "1 hour")

    left, right = side("l"), side("r")
    cond = F.expr("lkey = rkey AND rts >= lts - interval 1 hour AND rts <= lts + interval 1 hour")
    return _foreach_batch_writer(left.join(right, cond, how).select("lid", "rid"), output_dir)


def _build_join(spark: Any, input_dir: Path, output_dir: Path) -> Any:
    return _join(spark, input_dir, output_dir, non_null=False)


def _build_join_nonnull(spark: Any, input_dir: Path, output_dir: Path) -> Any:
    return _join(spark, input_dir, output_dir, non_null=True)


def _build_join_left(spark: Any, input_dir: Path, output_dir: Path) -> Any:
    """Left outer: every left row matches itself (same key, same time) and the watermark (1 hour behind times
    of seconds) evicts nothing, so the output holds the inner join's pairs and no null-extended row."""
    return _join(spark, input_dir, output_dir, non_null=False, how="left_outer")


def _verify_join(inputs: list[dict[str, Any]], out: list[tuple[int, dict[str, Any]]]) -> tuple[bool, str]:
    # ts is ``value`` seconds after the epoch: the row at the epoch is at the first batch's watermark (0) and
    # the join drops it as late (every Spark release recorded does), so it joins with nothing.
    rows = [r for r in inputs if r["value"] > 0]
    want = Counter((a["id"], b["id"]) for a in rows for b in rows if a["key"] == b["key"])
    got = Counter((r["lid"], r["rid"]) for _, r in out)
    ok = got == want
    return ok, "every pair once" if ok else f"missing {len(want - got)} pairs, {len(got - want)} extra"


# ------------------------------------------------------------------------------------------- Python state


def _build_pandas_state(spark: Any, input_dir: Path, output_dir: Path) -> Any:
    return pandas_state_query(spark, input_dir, output_dir)


def pandas_state_query(spark: Any, input_dir: Path, output_dir: Path, state_type: str = "cnt LONG, total LONG") -> Any:
    """applyInPandasWithState counting rows and summing values per key (the ``pandas_state`` scenario; a changed
    ``state_type`` is tests/audit_query's changed query)."""
    from pyspark.sql.streaming.state import GroupStateTimeout

    def count(key: Any, pdfs: Any, state: Any) -> Any:
        import pandas as pd

        cnt, total = state.get if state.exists else (0, 0)
        for pdf in pdfs:
            cnt += len(pdf)
            total += int(pdf["value"].sum())
        state.update((cnt, total))
        yield pd.DataFrame({"key": [key[0]], "cnt": [cnt], "total": [total]})

    df = _source(spark, input_dir).groupBy("key")
    agg = df.applyInPandasWithState(
        count, "key STRING, cnt LONG, total LONG", state_type, "update", GroupStateTimeout.NoTimeout
    )
    return _foreach_batch_writer(agg, output_dir).outputMode("update")


def _build_tws_pandas(spark: Any, input_dir: Path, output_dir: Path) -> Any:
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor
    from pyspark.sql.types import LongType, StructField, StructType

    acc_schema = StructType([StructField("cnt", LongType()), StructField("total", LongType())])

    class Count(StatefulProcessor):
        def init(self, handle: Any) -> None:
            self.acc = handle.getValueState("acc", acc_schema)

        def handleInputRows(self, key: Any, rows: Any, timerValues: Any = None) -> Any:  # noqa: N802 - Spark's name
            import pandas as pd

            cnt, total = self.acc.get() if self.acc.exists() else (0, 0)
            for pdf in rows:
                cnt += len(pdf)
                total += int(pdf["value"].sum())
            self.acc.update((cnt, total))
            yield pd.DataFrame({"key": [key[0]], "cnt": [cnt], "total": [total]})

        def close(self) -> None:
            pass

    agg = (
        _source(spark, input_dir)
        .groupBy("key")
        .transformWithStateInPandas(
            statefulProcessor=Count(),
            outputStructType="key STRING, cnt LONG, total LONG",
            outputMode="Update",
            timeMode="None",
        )
    )
    return _foreach_batch_writer(agg, output_dir).outputMode("update")


@dataclass(frozen=True)
class Scenario:
    name: str
    build: Callable[[Any, Path, Path], Any]
    confs: dict[str, str] = field(default_factory=dict)
    stateful: bool = False
    sink: str = "foreachBatch"  # or "file"
    base_files: int = 7  # input files processed by the base run (one per batch)
    # async scenario only: writer options of the BASE run (restarts run without them) + its trigger
    async_options: dict[str, str] = field(default_factory=dict)
    processing_time: str | None = None
    # foreachBatch scenarios whose output is not an aggregate nor the input rows: (input rows, [(batch id,
    # output row)]) -> (correct, detail); see harness.verify_output
    verify: Callable[[list[dict[str, Any]], list[tuple[int, dict[str, Any]]]], tuple[bool, str]] | None = None

    @property
    def is_async(self) -> bool:
        return bool(self.async_options)


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in [
        Scenario("stateless", _build_stateless),
        Scenario(
            "agg_hdfs",
            _build_agg,
            confs={
                "spark.sql.streaming.stateStore.providerClass": HDFS_PROVIDER,
                "spark.sql.streaming.stateStore.minDeltasForSnapshot": "2",
            },
            stateful=True,
            base_files=8,
        ),
        Scenario(
            "agg_rocksdb_cl",
            _build_agg,
            confs={
                "spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER,
                "spark.sql.streaming.stateStore.minDeltasForSnapshot": "3",
                "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
            },
            stateful=True,
            base_files=8,
        ),
        Scenario(
            "agg_rocksdb",
            _build_agg,
            confs={
                "spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER,
                "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "false",
            },
            stateful=True,
            base_files=8,
        ),
        # the aggregation with state checkpoint format v2 (4.x only: RocksDB with changelog checkpointing; unique ids
        # in the state file names, named by the commit log)
        Scenario(
            "agg_v2",
            _build_agg,
            confs={
                "spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER,
                "spark.sql.streaming.stateStore.minDeltasForSnapshot": "3",
                "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
                "spark.sql.streaming.stateStore.checkpointFormatVersion": "2",
            },
            stateful=True,
            base_files=8,
        ),
        # two stateful operators in one query (state/0 and state/1)
        Scenario(
            "dedup_agg",
            _build_dedup_agg,
            confs={"spark.sql.streaming.stateStore.providerClass": HDFS_PROVIDER},
            stateful=True,
            base_files=4,
        ),
        # stream-stream joins (inner, left outer) and applyInPandasWithState: their state format confs
        Scenario("join", _build_join, stateful=True, base_files=4, verify=_verify_join),
        Scenario("join_left", _build_join_left, stateful=True, base_files=4, verify=_verify_join),
        Scenario("pandas_state", _build_pandas_state, stateful=True, base_files=4),
        # transformWithStateInPandas (4.x: RocksDB only; operator metadata v2 and state schema v3 files)
        Scenario(
            "tws_pandas",
            _build_tws_pandas,
            confs={"spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER},
            stateful=True,
            base_files=4,
        ),
        # the file source's log compacts every 3 batches: sources/0 holds 0 1 2.compact 3 4 5.compact 6 7
        Scenario(
            "stateless_src_c3",
            _build_stateless,
            confs={"spark.sql.streaming.fileSource.log.compactInterval": "3"},
            base_files=8,
        ),
        Scenario("filesink", _build_filesink, sink="file"),
        # the file sink's log compacts every 3 batches: 2.compact, 5.compact, and the restart's batch 8 compacts
        Scenario(
            "filesink_c3",
            _build_filesink,
            confs={"spark.sql.streaming.fileSink.log.compactInterval": "3"},
            sink="file",
            base_files=8,
        ),
        # state checkpoint format v2 (4.x only: RocksDB with changelog checkpointing)
        Scenario(
            "dedup_v2_filesink",
            _build_dedup_filesink,
            confs={
                "spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER,
                "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
                "spark.sql.streaming.stateStore.checkpointFormatVersion": "2",
            },
            stateful=True,
            sink="file",
        ),
        Scenario(
            "async",
            _build_stateless,
            base_files=10,
            async_options={
                "asyncProgressTrackingEnabled": "true",
                "asyncProgressTrackingCheckpointIntervalMs": "2000",
                "_asyncProgressTrackingOverrideSinkSupportCheck": "true",
            },
            processing_time="400 milliseconds",
        ),
    ]
}


def apply_confs(spark: Any, scenario: Scenario) -> None:
    """Set the scenario's session confs and unset the other scenario-specific ones."""
    for key in SCENARIO_CONF_KEYS:
        if key in scenario.confs:
            spark.conf.set(key, scenario.confs[key])
        else:
            spark.conf.unset(key)
