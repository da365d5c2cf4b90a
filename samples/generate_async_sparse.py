"""Writes samples/async-sparse: a real checkpoint left by asynchronous progress tracking.

Usage: python samples/generate_async_sparse.py samples/async-sparse  (PySpark 4.3, Java 17)
"""

import os
import shutil
import sys
import time
from pathlib import Path

os.environ["PYSPARK_PYTHON"] = sys.executable
from pyspark.sql import SparkSession  # noqa: E402

out = Path(sys.argv[1])
shutil.rmtree(out, ignore_errors=True)
spark = (
    SparkSession.builder.master("local[2]")
    .config("spark.ui.enabled", "false")
    .config("spark.sql.shuffle.partitions", "2")
    .getOrCreate()
)
spark.sparkContext.setLogLevel("ERROR")
q = (
    spark.readStream.format("rate")
    .option("rowsPerSecond", 5)
    .load()
    .writeStream.format("noop")
    .option("checkpointLocation", str(out))
    .option("asyncProgressTrackingEnabled", "true")
    .option("asyncProgressTrackingCheckpointIntervalMs", "1500")
    .trigger(processingTime="200 milliseconds")
    .start()
)
time.sleep(40)
q.stop()
print(sorted(int(p.name) for p in (out / "offsets").iterdir() if p.name.isdigit()))
print(sorted(int(p.name) for p in (out / "commits").iterdir() if p.name.isdigit()))
