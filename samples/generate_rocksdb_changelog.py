"""Writes samples/rocksdb-changelog: a real stateful checkpoint (RocksDB state store, changelog checkpointing),
and beside it samples/rocksdb-changelog-progress.jsonl: the query's StreamingQueryProgress events, one a line.

Usage: python samples/generate_rocksdb_changelog.py samples/rocksdb-changelog  (PySpark 4.3, Java 17)
"""

import json
import os
import shutil
import sys
import time
from pathlib import Path

os.environ["PYSPARK_PYTHON"] = sys.executable
from pyspark.sql import SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

BATCHES = 12
out = Path(sys.argv[1])
shutil.rmtree(out, ignore_errors=True)
spark = (
    SparkSession.builder.master("local[2]")
    .config("spark.ui.enabled", "false")
    .config("spark.sql.shuffle.partitions", "2")
    .config(
        "spark.sql.streaming.stateStore.providerClass",
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
    )
    .config("spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled", "true")
    # a snapshot (N.zip) every 3 versions, uploaded by the maintenance task; changelogs in between
    .config("spark.sql.streaming.stateStore.minDeltasForSnapshot", "3")
    .config("spark.sql.streaming.stateStore.maintenanceInterval", "200ms")
    .getOrCreate()
)
spark.sparkContext.setLogLevel("ERROR")
# rate-micro-batch is deterministic (batch b holds values 10*b .. 10*b+9) and records no path in the checkpoint
q = (
    spark.readStream.format("rate-micro-batch")
    .option("rowsPerBatch", 10)
    .option("startTimestamp", 0)
    .load()
    .withColumn("key", F.col("value") % 5)
    .groupBy("key")
    .agg(F.count("*").alias("count"), F.sum("value").alias("sum"))
    .writeStream.format("noop")
    .outputMode("update")
    .option("checkpointLocation", str(out))
    .trigger(processingTime="5 seconds")
    .start()
)
while q.lastProgress is None or q.lastProgress["batchId"] < BATCHES - 1:
    time.sleep(0.05)
# stop between two triggers (the last batch committed, none planned after it), once maintenance has uploaded
# the snapshot of the last version
time.sleep(1)
progress = [json.loads(p.json) for p in q.recentProgress]
q.stop()
progress_file = out.parent / f"{out.name}-progress.jsonl"
progress_file.write_text("".join(json.dumps(p) + "\n" for p in progress))
spark.stop()
logs = [sorted(int(f.name) for f in (out / d).iterdir() if f.name.isdigit()) for d in ("offsets", "commits")]
assert logs == [list(range(BATCHES))] * 2, f"stopped during a batch ({logs}): run it again"
for p in sorted((out / "state").rglob("*")):
    if p.is_file() and not p.name.endswith(".crc"):
        print(p.relative_to(out), p.stat().st_size)
