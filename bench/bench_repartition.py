"""``ckptfix state repartition`` against Spark 4.3's own ``OfflineStateRepartitionRunner`` on the same checkpoint.

A real aggregation (PySpark 4.3, local[2]) over ``--keys`` distinct (string, int) keys with ``--before`` shuffle
partitions, RocksDB (and HDFS, which Spark's runner refuses), one batch. Two copies of the checkpoint: ckptfix
repartitions one to ``--after`` partitions (the CLI in a fresh process, plan + apply, backup and journal included),
Spark's runner the other (``spark._streamingCheckpointManager.repartition``, in the already warm JVM). Both results
are read back with Spark's ``statestore`` reader and must hold the same rows in the same partitions.

    PYSPARK_PYTHON=.venv/bin/python .venv/bin/python bench/bench_repartition.py --keys 50000 --before 200 --after 8
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", type=int, default=50_000)
    ap.add_argument("--before", type=int, default=200)
    ap.add_argument("--after", type=int, default=8)
    ap.add_argument("--providers", default="rocksdb,hdfs")
    args = ap.parse_args()
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.adaptive.enabled", "false")
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    root = Path(tempfile.mkdtemp(prefix="bench-repartition-"))
    data = root / "input"
    spark.range(args.keys).select(
        F.concat(F.lit("key-"), (F.col("id") % (args.keys // 4 + 1)).cast("string")).alias("key"),
        (F.col("id") % 4).cast("int").alias("grp"),
        F.col("id").alias("value"),
    ).write.json(str(data))
    classes = {
        "rocksdb": "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
        "hdfs": "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider",
    }
    print(f"{args.keys} keys, {args.before} -> {args.after} partitions, Spark {spark.version}")
    for provider in args.providers.split(","):
        ckpt = root / provider / "ckpt"
        spark.conf.set("spark.sql.shuffle.partitions", str(args.before))
        spark.conf.set("spark.sql.streaming.stateStore.providerClass", classes[provider])
        t0 = time.perf_counter()
        q = (
            spark.readStream.schema("key STRING, grp INT, value LONG")
            .json(str(data))
            .groupBy("key", "grp")
            .agg(F.count("*").alias("n"), F.sum("value").alias("total"))
            .writeStream.format("noop")
            .outputMode("update")
            .option("checkpointLocation", str(ckpt))
            .trigger(availableNow=True)
            .start()
        )
        q.awaitTermination()
        built = time.perf_counter() - t0
        ours, theirs = root / provider / "ours", root / provider / "theirs"
        shutil.copytree(ckpt, ours)
        shutil.copytree(ckpt, theirs)
        t0 = time.perf_counter()
        cmd = [sys.executable, "-m", "ckptfix", "state", "repartition", str(ours), "-n", str(args.after)]
        subprocess.run([*cmd, "--apply", "--idle-seconds", "0", "-q"], check=True, capture_output=True)
        ours_s = time.perf_counter() - t0
        theirs_s: float | None = None
        if provider == "rocksdb":
            t0 = time.perf_counter()
            spark._streamingCheckpointManager.repartition(str(theirs), args.after, True)
            theirs_s = time.perf_counter() - t0

        def rows(path: Path) -> list:
            df = spark.read.format("statestore").load(str(path))
            return sorted(map(tuple, df.selectExpr("to_json(key)", "to_json(value)", "partition_id").collect()))

        same = rows(ours) == rows(theirs) if theirs_s is not None else None
        spark_s = "refused (UNSUPPORTED_PROVIDER)" if theirs_s is None else f"{theirs_s:.1f} s"
        print(
            f"{provider}: query {built:.1f} s; ckptfix {ours_s:.1f} s; Spark's runner {spark_s}; "
            f"same rows and partitions: {same}"
        )
    shutil.rmtree(root, ignore_errors=True)
    spark.stop()


if __name__ == "__main__":
    main()
