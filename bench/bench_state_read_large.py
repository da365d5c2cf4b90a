"""Benchmark: `ckptfix state read` of 10M keys over 200 partitions, locally and with `--engine spark`.

Issue 13 asks that a state of 10,000,000 keys in 200 partitions be read to the end, by the local engine and by
`--engine spark`, with memory bounded. The checkpoint is written once by real Spark (PySpark 4.3.0, local[2],
200 shuffle partitions, RocksDB with changelog checkpointing) and cached under
``$TMPDIR/ckptfix-bench/state-10m-rocksdb/``: a `groupBy(k).agg(count, sum)` over 10,000,000 distinct keys
(`spark.range`, written as Parquet first) and 100,000 more rows for some of them; Spark takes the few input files
in one batch, so every partition's state is version 1 = `1.changelog`.

Measured in fresh child processes (``measure`` of bench_state_read.py: wall time, CPU, peak RSS and PSS of the
process tree, the largest single process): ``ckptfix state read CKPT --format parquet --out F`` with the local
engine (default workers) and with ``--engine spark`` (a local[2] session started by ckptfix, JVM included in
the tree). Rows written are counted from the Parquet footer. The bound printed beside is issue 13's: 2x the
decoded size of the largest partition + 100 MB, per process.

    PYSPARK_PYTHON=.venv/bin/python .venv/bin/python bench/bench_state_read_large.py [--engines local,spark]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_state_read import ROOT, _placeholders, code_fingerprint, count_parquet, measure  # noqa: E402

PY = sys.executable
KEYS = 10_000_000
UPDATES = 100_000
PARTITIONS = 200
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
CONF = {
    "spark.master": "local[2]",
    "spark.driver.memory": "6g",
    "spark.sql.shuffle.partitions": str(PARTITIONS),
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.streaming.stateStore.providerClass": ROCKSDB,
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
}


def generate(target: Path) -> None:
    """Child process: write the checkpoint with real Spark."""
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    work = target.with_name(target.name + ".partial")
    shutil.rmtree(work, ignore_errors=True)
    builder = SparkSession.builder.appName("bench-state-10m")
    for k, v in CONF.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    t0 = time.perf_counter()
    inputs = work / "input"
    spark.range(KEYS).select(F.col("id").alias("k"), (F.col("id") % 1000).alias("v")).coalesce(4).write.parquet(
        str(inputs / "b0")
    )
    spark.range(UPDATES).select((F.col("id") * 97).alias("k"), F.lit(1).cast("long").alias("v")).coalesce(
        1
    ).write.parquet(str(inputs / "b1"))
    # the file source orders by modification time: batch 0's files first
    base = time.time() - 3600
    for i, sub in enumerate(("b0", "b1")):
        for f in (inputs / sub).glob("part-*"):
            f.rename(inputs / f"{sub}-{f.name}")
            os.utime(inputs / f"{sub}-{f.name}", (base + i, base + i))
        shutil.rmtree(inputs / sub)
    t1 = time.perf_counter()
    src = spark.readStream.schema("k LONG, v LONG").option("maxFilesPerTrigger", 4).parquet(str(inputs))
    agg = src.groupBy("k").agg(F.count("*").alias("n"), F.sum("v").alias("total"))
    q = (
        agg.writeStream.format("noop")
        .outputMode("update")
        .option("checkpointLocation", str(work / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination()
    t2 = time.perf_counter()
    spark.stop()
    commits = sorted(int(p.name) for p in (work / "ckpt" / "commits").iterdir() if p.name.isdigit())
    info = {
        "spark": __import__("pyspark").__version__,
        "conf": CONF,
        "keys": KEYS,
        "partitions": PARTITIONS,
        "batches": len(commits),
        "inputs_s": round(t1 - t0, 1),
        "query_s": round(t2 - t1, 1),
        "built": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    }
    shutil.rmtree(inputs)
    (work / "built.json").write_text(json.dumps(info, indent=2))
    shutil.rmtree(target, ignore_errors=True)
    work.rename(target)


def ensure_checkpoint(cache: Path) -> tuple[Path, dict[str, Any]]:
    target = cache / "state-10m-rocksdb"
    if not (target / "built.json").exists():
        print(f"building the 10M-key checkpoint with Spark in {target} ...", file=sys.stderr)
        cache.mkdir(parents=True, exist_ok=True)
        r = subprocess.run([PY, __file__, "--_generate", str(target)], cwd=ROOT)
        if r.returncode != 0:
            raise SystemExit(f"generation failed (exit {r.returncode})")
    return target / "ckpt", json.loads((target / "built.json").read_text())


def largest_partition_bytes(ckpt: Path) -> tuple[int, int]:
    """(rows, key + value bytes) of the largest partition, from ckptfix's bulk reader of the chain."""
    sys.path.insert(0, str(ROOT))
    from ckptfix.state import read as r
    from ckptfix.stores import records

    sel = r.select(str(ckpt))
    best = (0, 0)
    for part in sel.partitions:
        store = r._store(sel, part, "default")
        segments = records.bulk_pairs(sel.ckpt, r.store_chain(sel, store), sel.codec, sel.provider)
        if segments is None:
            raise SystemExit(f"partition {part}: not readable in bulk")
        rows = sum(len(k) for k, _ in segments)
        size = sum(k.nbytes - 4 * (len(k) + 1) + v.nbytes - 4 * (len(v) + 1) for k, v in segments)
        best = max(best, (rows, size), key=lambda x: x[1])
    return best


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--_generate":
        generate(Path(sys.argv[2]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache-dir", type=Path, default=Path(tempfile.gettempdir()) / "ckptfix-bench")
    parser.add_argument("--engines", default="local,spark")
    parser.add_argument("--results", type=Path, default=None)
    args = parser.parse_args()
    started = dt.datetime.now(dt.timezone.utc)
    ckpt, built = ensure_checkpoint(args.cache_dir)
    rows, size = largest_partition_bytes(ckpt)
    bound_mb = round(2 * size / 2**20 + 100, 1)
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(ROOT), "PYSPARK_PYTHON": PY}
    cli = str(Path(PY).with_name("ckptfix"))
    runs = []
    with tempfile.TemporaryDirectory(prefix="ckptfix-bench-10m-") as tmp:
        for engine in args.engines.split(","):
            out = Path(tmp) / f"{engine}.parquet"
            argv = [cli, "state", "read", str(ckpt), "--format", "parquet", "--out", str(out), "--engine", engine]
            r = measure(argv, env=env)
            r["engine"] = engine
            r["rows"] = count_parquet(out) if out.exists() else None
            runs.append(r)
    print(f"largest partition: {rows} rows, {size / 2**20:.1f} MiB decoded; bound {bound_mb} MB per process")
    print("engine | rc | wall s | CPU s | rows | tree RSS MB | tree PSS MB | largest process MB | bound MB")
    for r in runs:
        print(
            f"{r['engine']} | {r['rc']} | {r['wall_s']} | {r['cpu_s']} | {r['rows']} | {r['peak_tree_rss_mb']} | "
            f"{r['peak_tree_pss_mb']} | {r['peak_hwm_mb']} | {bound_mb}"
        )
    doc = {
        "bench": "state_read_large",
        "started": started.isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
        "ckptfix_fingerprint": code_fingerprint(),
        "built": built,
        "largest_partition": {"rows": rows, "decoded_bytes": size, "bound_mb": bound_mb},
        "runs": runs,
    }
    out_json = args.results or HERE / "results" / f"state_read_large_{started:%Y-%m-%dT%H%M}.json"
    out_json.write_text(_placeholders(json.dumps(doc, indent=1)) + "\n")
    print(f"results: {out_json.relative_to(ROOT)}", file=sys.stderr)
    return 0 if all(r["rc"] == 0 and r["rows"] == KEYS for r in runs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
