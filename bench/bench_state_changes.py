"""Benchmark: `ckptfix state changes` over 100 batches against Spark 4.3's `readChangeFeed` in a warm session.

The checkpoint is written once by real Spark (PySpark 4.3.0, local[2], 4 shuffle partitions) and cached under
``$TMPDIR/ckptfix-bench/changes-<provider>/``: a `groupBy(user).agg(count, sum)` over 100 input files read one per
batch (`maxFilesPerTrigger 1`, `availableNow`): batch 0 brings 100,000 keys, each later batch 10,000 updates of
random keys, so the feed of batches 0..99 holds 1,090,000 changes. Providers: HDFS (`N.delta` per batch) and
RocksDB with changelog checkpointing (`N.changelog` per batch).

Measured, each in a fresh child process (``measure`` of bench_state_read.py: wall time, CPU, peak RSS and PSS of
the process tree):

* ckptfix: ``ckptfix state changes CKPT --from 0 --to 99 --format parquet|jsonl --out F`` (its imports included);
* Spark: one child builds a session and reads ``spark.read.format("statestore").option("readChangeFeed", true)
  .option("changeStartBatchId", 0).option("changeEndBatchId", 99).load(CKPT).toArrow()`` 3 times; the first read
  warms the session and is reported apart, the median of the other two is the rival's figure.

Target (issue 13): ckptfix no slower than Spark's warm read. Both row counts must be 1,090,000.

    python bench/bench_state_changes.py [--provider hdfs|rocksdb|both] [--repeat 3]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_state_read import (  # noqa: E402
    PROVIDER_CONF,
    ROOT,
    _placeholders,
    _spark,
    code_fingerprint,
    count_parquet,
    measure,
)

PY = sys.executable
KEYS = 100_000
BATCHES = 100
UPDATES_PER_BATCH = 10_000
EXPECTED_CHANGES = KEYS + (BATCHES - 1) * UPDATES_PER_BATCH
SPARK_READS = 3


def _write_inputs(inputs: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    inputs.mkdir(parents=True, exist_ok=True)
    schema = pa.schema([("user", pa.string()), ("v", pa.int64())])
    base = time.time() - 3600
    for b in range(BATCHES):
        ids = list(range(KEYS)) if b == 0 else random.Random(b).sample(range(KEYS), UPDATES_PER_BATCH)
        table = pa.table({"user": [f"u{i:07d}" for i in ids], "v": [(i * 7 + b) % 1000 for i in ids]}, schema=schema)
        path = inputs / f"part-{b:03d}.parquet"
        pq.write_table(table, path)
        os.utime(path, (base + b, base + b))  # the file source orders by modification time


def generate(provider: str, target: Path) -> None:
    """Child process: write the checkpoint with real Spark."""
    from pyspark.sql import functions as F

    work = target.with_name(target.name + ".partial")
    shutil.rmtree(work, ignore_errors=True)
    _write_inputs(work / "input")
    spark = _spark(f"bench-changes-gen-{provider}", PROVIDER_CONF[provider])
    t0 = time.perf_counter()
    src = spark.readStream.schema("user STRING, v LONG").option("maxFilesPerTrigger", 1).parquet(str(work / "input"))
    agg = src.groupBy("user").agg(F.count("*").alias("n"), F.sum("v").alias("total"))
    q = (
        agg.writeStream.format("noop")
        .outputMode("update")
        .option("checkpointLocation", str(work / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination()
    t_query = time.perf_counter() - t0
    spark.stop()
    commits = sorted(int(p.name) for p in (work / "ckpt" / "commits").iterdir() if p.name.isdigit())
    info = {
        "provider": provider,
        "spark": __import__("pyspark").__version__,
        "keys": KEYS,
        "batches": len(commits),
        "last_committed_batch": commits[-1],
        "query_s": round(t_query, 1),
        "built": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    }
    (work / "built.json").write_text(json.dumps(info, indent=2))
    shutil.rmtree(target, ignore_errors=True)
    work.rename(target)


def ensure_checkpoint(provider: str, cache: Path) -> tuple[Path, dict[str, Any]]:
    target = cache / f"changes-{provider}"
    if not (target / "built.json").exists():
        print(f"[{provider}] building the {BATCHES}-batch checkpoint with Spark in {target} ...", file=sys.stderr)
        cache.mkdir(parents=True, exist_ok=True)
        r = subprocess.run([PY, __file__, "--_generate", provider, str(target)], cwd=ROOT)
        if r.returncode != 0:
            raise SystemExit(f"generation of the {provider} checkpoint failed (exit {r.returncode})")
    info = json.loads((target / "built.json").read_text())
    if info["last_committed_batch"] != BATCHES - 1:
        raise SystemExit(f"{target}: expected batches 0..{BATCHES - 1}, found {info['last_committed_batch']} last")
    return target / "ckpt", info


def spark_changes(ckpt: str, reads: int) -> None:
    """Child process: Spark's change feed into Arrow ``reads`` times in one session (the first warms it)."""
    t0 = time.perf_counter()
    spark = _spark("bench-state-changes", {"spark.sql.execution.arrow.pyspark.enabled": "true"})
    spark.range(1).collect()
    t1 = time.perf_counter()
    times, rows = [], 0
    for _ in range(reads):
        t = time.perf_counter()
        table = (
            spark.read.format("statestore")
            .option("readChangeFeed", "true")
            .option("changeStartBatchId", 0)
            .option("changeEndBatchId", BATCHES - 1)
            .load(ckpt)
            .toArrow()
        )
        times.append(round(time.perf_counter() - t, 3))
        rows = table.num_rows
        del table
    spark.stop()
    print(json.dumps({"session_s": round(t1 - t0, 3), "reads_s": times, "rows": rows}))


def _median(xs: list[float]) -> float:
    xs = sorted(xs)
    mid = len(xs) // 2
    return xs[mid] if len(xs) % 2 else (xs[mid - 1] + xs[mid]) / 2


def bench(provider: str, cache: Path, repeat: int) -> dict[str, Any]:
    ckpt, built = ensure_checkpoint(provider, cache)
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(ROOT)}
    cli = [str(Path(PY).with_name("ckptfix"))]
    runs: dict[str, list[dict[str, Any]]] = {"ckptfix_parquet": [], "ckptfix_jsonl": [], "spark": []}
    with tempfile.TemporaryDirectory(prefix="ckptfix-bench-changes-") as tmp:
        for i in range(repeat):
            for fmt in ("parquet", "jsonl"):
                out = Path(tmp) / f"{provider}-{i}.{fmt}"
                argv = [*cli, "state", "changes", str(ckpt), "--from", "0", "--to", str(BATCHES - 1)]
                r = measure([*argv, "--format", fmt, "--out", str(out), "-q"], env=env)
                r["rows"] = count_parquet(out) if fmt == "parquet" else sum(1 for _ in out.open())
                out.unlink(missing_ok=True)
                runs[f"ckptfix_{fmt}"].append(r)
            r = measure([PY, __file__, "--_spark-changes", str(ckpt), str(SPARK_READS)], env=env)
            try:
                r["spark"] = json.loads(r["stdout"].strip().splitlines()[-1])
            except (ValueError, IndexError):
                r["spark"] = None
            runs["spark"].append(r)
    return {"provider": provider, "checkpoint": str(ckpt), "built": built, "runs": runs}


def summarise(res: dict[str, Any]) -> list[dict[str, Any]]:
    warm = [t for r in res["runs"]["spark"] if r.get("spark") for t in r["spark"]["reads_s"][1:]]
    first = [r["spark"]["reads_s"][0] for r in res["runs"]["spark"] if r.get("spark")]
    spark_rows = {r["spark"]["rows"] for r in res["runs"]["spark"] if r.get("spark")}
    rival = _median(warm) if warm else None
    rows = []
    for fmt in ("parquet", "jsonl"):
        runs = res["runs"][f"ckptfix_{fmt}"]
        ok = all(r["rc"] == 0 for r in runs)
        wall = _median([r["wall_s"] for r in runs])
        counts = {r["rows"] for r in runs}
        rows.append(
            {
                "provider": res["provider"],
                "format": fmt,
                "ckptfix_s": wall if ok else None,
                "ckptfix_cpu_s": _median([r["cpu_s"] for r in runs]),
                "spark_warm_s": rival,
                "spark_first_read_s": _median(first) if first else None,
                "ratio": round(wall / rival, 2) if ok and rival else None,
                "met": bool(ok and rival and wall <= rival),
                "rows_ckptfix": sorted(counts),
                "rows_spark": sorted(spark_rows),
                "rows_expected": EXPECTED_CHANGES,
                "peak_tree_pss_mb": max(r["peak_tree_pss_mb"] for r in runs),
            }
        )
    return rows


def print_table(rows: list[dict[str, Any]]) -> None:
    head = (
        "provider", "format", "ckptfix s", "Spark warm s", "ratio", "target <= 1x", "rows ckptfix", "rows Spark",
        "tree PSS MB",
    )  # fmt: skip
    print(" | ".join(head))
    for r in rows:
        print(
            " | ".join(
                str(x)
                for x in (
                    r["provider"],
                    r["format"],
                    r["ckptfix_s"],
                    r["spark_warm_s"],
                    r["ratio"],
                    "yes" if r["met"] else "NO",
                    ",".join(map(str, r["rows_ckptfix"])),
                    ",".join(map(str, r["rows_spark"])),
                    r["peak_tree_pss_mb"],
                )
            )
        )


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--_generate":
        generate(sys.argv[2], Path(sys.argv[3]))
        return 0
    if len(sys.argv) > 1 and sys.argv[1] == "--_spark-changes":
        spark_changes(sys.argv[2], int(sys.argv[3]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--provider", choices=("hdfs", "rocksdb", "both"), default="both")
    parser.add_argument("--cache-dir", type=Path, default=Path(tempfile.gettempdir()) / "ckptfix-bench")
    parser.add_argument("--repeat", type=int, default=3, help="measurements per engine and format (median kept)")
    parser.add_argument("--results", type=Path, default=None)
    args = parser.parse_args()
    providers = ("hdfs", "rocksdb") if args.provider == "both" else (args.provider,)
    started = dt.datetime.now(dt.timezone.utc)
    results = [bench(p, args.cache_dir, args.repeat) for p in providers]
    table = [row for res in results for row in summarise(res)]
    print_table(table)
    doc = {
        "bench": "state_changes",
        "started": started.isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
        "ckptfix_fingerprint": code_fingerprint(),
        "load_avg_at_end": list(os.getloadavg()),
        "table": table,
        "results": results,
    }
    out = args.results or HERE / "results" / f"state_changes_{started:%Y-%m-%dT%H%M}_{args.provider}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(_placeholders(json.dumps(doc, indent=1)) + "\n")
    print(f"results: {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}", file=sys.stderr)
    bad = [r for r in table if r["rows_ckptfix"] != [EXPECTED_CHANGES] or r["rows_spark"] != [EXPECTED_CHANGES]]
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
