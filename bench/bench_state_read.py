"""Benchmark: `ckptfix state read` against Spark's `statestore` reader on a 1M-key checkpoint.

The checkpoint is written by real Spark (pyspark in the dev venv, local[2], 4 shuffle
partitions): a streaming ``groupBy(user).agg(count, sum)`` over a parquet file source read one
file per micro-batch. Batch 0 brings all 1,000,000 keys, batches 1..10 update 100,000 keys each,
so the last committed version (11) holds 1M keys, 250k per partition. It is built once per state
provider and cached in ``$TMPDIR/ckptfix-bench/state-1m-<provider>``:

* ``hdfs``: the default HDFSBackedStateStoreProvider;
* ``rocksdb``: RocksDBStateStoreProvider with changelog checkpointing.

Every measurement runs in a fresh child process, one after another, on the latest committed
version; the peak RSS of a child's whole process tree (for Spark: python + java) is the
maximum over 50 ms polls of the sum of ``VmRSS`` in ``/proc``, and each process's own
``VmHWM`` is recorded too (their max is exact for a one-process child).

    python bench/bench_state_read.py                       # both providers
    python bench/bench_state_read.py --provider rocksdb --profile
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
ROOT = HERE.parent
PY = sys.executable
#: where the children import ckptfix from and run (see ``--live-code``)
CODE_ROOT = ROOT
KEYS = 1_000_000
UPDATE_BATCHES = 10
UPDATES_PER_BATCH = 100_000
PARTITIONS = 4
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
PROVIDER_CONF = {
    "hdfs": {},
    "rocksdb": {
        "spark.sql.streaming.stateStore.providerClass": ROCKSDB,
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
    },
    # every version a zip + SSTs (no changelog): the reader iterates a RocksDB database
    "rocksdb-zip": {
        "spark.sql.streaming.stateStore.providerClass": ROCKSDB,
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "false",
    },
}
PROVIDERS = tuple(PROVIDER_CONF)
SPARK_READS = 3  # toArrow() reads per Spark session: the first warms it up
SPARK_CONF = {
    "spark.master": "local[2]",
    "spark.driver.memory": "4g",
    "spark.sql.shuffle.partitions": str(PARTITIONS),
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
}


# ---------------------------------------------------------------- process-tree measurement


def _proc_children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(b")") + 2 :].split()[1])
        kids.setdefault(ppid, []).append(int(name))
    return kids


def _tree(pid: int) -> list[int]:
    kids, out, todo = _proc_children(), [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += kids.get(p, [])
    return out


def _cpu_ticks(pid: int) -> int:
    """utime + stime of a process so far, in clock ticks (0 once gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return 0
    fields = stat[stat.rindex(b")") + 2 :].split()
    return int(fields[11]) + int(fields[12])


def _mem_kb(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) in kB; (0, 0) once the process is gone or a zombie."""
    rss = hwm = 0
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1])
                elif line.startswith("VmHWM:"):
                    hwm = int(line.split()[1])
    except OSError:
        pass
    return rss, hwm


def _pss_kb(pid: int) -> int:
    """Proportional set size (pages shared by forked workers counted once across them)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def measure(argv: list[str], *, env: dict[str, str] | None = None, poll: float = 0.05) -> dict[str, Any]:
    """Run ``argv``; wall time, peak memory and CPU time of its process tree (CPU: the last
    poll's utime + stime of every process seen, so up to one poll interval is missed)."""
    # output goes to temp files, not pipes: a child writing more than a pipe buffer would block forever
    with tempfile.TemporaryFile("w+") as out_f, tempfile.TemporaryFile("w+") as err_f:
        t0 = time.perf_counter()
        ticks: dict[int, int] = {}
        proc = subprocess.Popen(argv, stdout=out_f, stderr=err_f, env=env, cwd=CODE_ROOT, text=True)
        peak_tree_kb, peak_pss_kb, hwm_kb, names = 0, 0, {}, {}
        tree_every, tree, n = 20, [proc.pid], 0
        while proc.poll() is None:
            if n % tree_every == 0:  # rescanning /proc is not free: every 20 polls (1 s)
                tree = _tree(proc.pid)
            n += 1
            total = pss = 0
            for p in tree:
                rss, hwm = _mem_kb(p)
                total += rss
                pss += _pss_kb(p) if rss else 0
                ticks[p] = max(ticks.get(p, 0), _cpu_ticks(p))
                if hwm:
                    hwm_kb[p] = max(hwm_kb.get(p, 0), hwm)
                    if p not in names:
                        try:
                            names[p] = Path(f"/proc/{p}/comm").read_text().strip()
                        except OSError:
                            names[p] = "?"
            peak_tree_kb = max(peak_tree_kb, total)
            peak_pss_kb = max(peak_pss_kb, pss)
            time.sleep(poll)
        wall = time.perf_counter() - t0
        out_f.seek(0)
        err_f.seek(0)
        stdout, stderr = out_f.read(), err_f.read()
    return {
        "argv": argv,
        "rc": proc.returncode,
        "wall_s": round(wall, 3),
        "cpu_s": round(sum(ticks.values()) / os.sysconf("SC_CLK_TCK"), 2),
        "peak_tree_rss_mb": round(peak_tree_kb / 1024, 1),
        "peak_tree_pss_mb": round(peak_pss_kb / 1024, 1),
        "peak_hwm_mb": round(max(hwm_kb.values(), default=0) / 1024, 1),
        "hwm_by_process_mb": {f"{names.get(p, '?')}[{p}]": round(v / 1024, 1) for p, v in hwm_kb.items()},
        "stdout": stdout[-4000:],
        "stderr": stderr[-4000:],
    }


# ---------------------------------------------------------------- building the checkpoint


def _spark(app: str, extra: dict[str, str]) -> Any:
    from pyspark.sql import SparkSession

    b = SparkSession.builder.appName(app)
    for k, v in {**SPARK_CONF, **extra}.items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _write_inputs(inputs: Path) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    inputs.mkdir(parents=True, exist_ok=True)
    schema = pa.schema([("user", pa.string()), ("v", pa.int64())])
    base = time.time() - 3600
    rows = 0
    for b in range(UPDATE_BATCHES + 1):
        ids = list(range(KEYS)) if b == 0 else random.Random(b).sample(range(KEYS), UPDATES_PER_BATCH)
        table = pa.table({"user": [f"u{i:07d}" for i in ids], "v": [(i * 7 + b) % 1000 for i in ids]}, schema=schema)
        path = inputs / f"part-{b:03d}.parquet"
        pq.write_table(table, path)
        os.utime(path, (base + b, base + b))  # the file source orders by modification time
        rows += len(ids)
    return rows


def generate(provider: str, target: Path) -> None:
    """Child process: write the checkpoint with real Spark."""
    from pyspark.sql import functions as F

    work = target.with_name(target.name + ".partial")
    shutil.rmtree(work, ignore_errors=True)
    t0 = time.perf_counter()
    rows = _write_inputs(work / "input")
    t_inputs = time.perf_counter() - t0
    spark = _spark(f"bench-state-gen-{provider}", PROVIDER_CONF[provider])
    t1 = time.perf_counter()
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
    t_query = time.perf_counter() - t1
    spark.stop()
    commits = sorted(int(p.name) for p in (work / "ckpt" / "commits").iterdir() if p.name.isdigit())
    info = {
        "provider": provider,
        "spark": __import__("pyspark").__version__,
        "conf": {**SPARK_CONF, **PROVIDER_CONF[provider]},
        "input_rows": rows,
        "keys": KEYS,
        "batches": len(commits),
        "last_committed_batch": commits[-1],
        "inputs_s": round(t_inputs, 1),
        "query_s": round(t_query, 1),
        "built": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    }
    (work / "built.json").write_text(json.dumps(info, indent=2))
    shutil.rmtree(target, ignore_errors=True)
    work.rename(target)


def ensure_checkpoint(provider: str, cache: Path) -> tuple[Path, dict[str, Any]]:
    target = cache / f"state-1m-{provider}"
    if not (target / "built.json").exists():
        print(f"[{provider}] building the 1M-key checkpoint with Spark in {target} ...", file=sys.stderr)
        cache.mkdir(parents=True, exist_ok=True)
        r = subprocess.run([PY, __file__, "--_generate", provider, str(target)], cwd=ROOT)
        if r.returncode != 0:
            raise SystemExit(f"generation of the {provider} checkpoint failed (exit {r.returncode})")
    info = json.loads((target / "built.json").read_text())
    return target / "ckpt", info


# ---------------------------------------------------------------- Spark's reader (child process)


def spark_read(ckpt: str, out: str, fmt: str) -> None:
    """Child process: time the session start and the read+write separately; JSON on stdout."""
    t0 = time.perf_counter()
    spark = _spark("bench-state-read", {})
    spark.range(1).collect()  # the session and its executor threads are up
    t1 = time.perf_counter()
    df = spark.read.format("statestore").load(ckpt)
    getattr(df.write.mode("overwrite"), fmt)(out)
    t2 = time.perf_counter()
    spark.stop()
    print(json.dumps({"session_s": round(t1 - t0, 3), "read_write_s": round(t2 - t1, 3)}))


def spark_arrow(ckpt: str, reads: int) -> None:
    """Child process: Spark's reader into Arrow (``toArrow()``) ``reads`` times in one session;
    the first read warms the session (class loading, JIT), the later ones are the warm figure."""
    t0 = time.perf_counter()
    spark = _spark("bench-state-arrow", {"spark.sql.execution.arrow.pyspark.enabled": "true"})
    spark.range(1).collect()  # the session and its executor threads are up
    t1 = time.perf_counter()
    times, rows = [], 0
    for _ in range(reads):
        t = time.perf_counter()
        table = spark.read.format("statestore").load(ckpt).toArrow()
        times.append(round(time.perf_counter() - t, 3))
        rows = table.num_rows
        del table
    spark.stop()
    print(json.dumps({"session_s": round(t1 - t0, 3), "reads_s": times, "rows": rows}))


def floors(ckpt: str) -> None:
    """Child process: what a read cannot go below, each part on its own: the imports, reading and
    lz4-decompressing every file of the latest version's chains, and (RocksDB with zips) materializing
    each store and iterating it with rocksdict."""
    t0 = time.perf_counter()
    import numpy  # noqa: F401
    import pyarrow  # noqa: F401
    import pyarrow.compute  # noqa: F401
    import pyarrow.parquet  # noqa: F401

    from ckptfix.formats import codec
    from ckptfix.state import read as r
    from ckptfix.stores import records

    out: dict[str, Any] = {"imports_s": round(time.perf_counter() - t0, 3)}
    # the memory floor of any process that decodes with Arrow: the interpreter, these imports, and Arrow's compute
    # function registry, built at the first kernel call (about 45 MB of it here), before any state is read
    pyarrow.compute.sum(pyarrow.array([1, 2]))
    out["runtime_floor_mb"] = round(_mem_kb(os.getpid())[1] / 1024, 1)
    sel = r.select(ckpt)
    chains = [r.store_chain(sel, r._store(sel, p, "default")) for p in sel.partitions]
    t = time.perf_counter()
    size = 0
    for chain in chains:
        for step in ([chain.base] if chain.base is not None else []) + list(chain.steps):
            data = records.read_file(sel.ckpt, step, chain.store.checksums)
            if step.kind != "zip":
                size += len(codec.decompress(sel.codec, data, step.rel))
    out["read_and_decompress_s"] = round(time.perf_counter() - t, 3)
    out["decompressed_mb"] = round(size / 2**20, 1)
    if sel.provider == "rocksdb" and any(c.base is not None for c in chains):
        t = time.perf_counter()
        n = 0
        for chain in chains:
            with records.rocksdb_pairs(sel.ckpt, chain, sel.codec) as (pairs, _meta):
                t_open = time.perf_counter()
                n += sum(1 for _ in pairs)
                out.setdefault("rocksdict_iterate_s", 0.0)
                out["rocksdict_iterate_s"] += time.perf_counter() - t_open
        out["rocksdb_materialize_and_iterate_s"] = round(time.perf_counter() - t, 3)
        out["rocksdict_iterate_s"] = round(out["rocksdict_iterate_s"], 3)
        out["rocksdb_pairs"] = n
    print(json.dumps(out))


# ---------------------------------------------------------------- sizes and checks


def partition_sizes(ckpt: Path) -> dict[str, Any]:
    """Rows and decoded bytes (key + value UnsafeRow bytes) of every partition at the latest
    version, through ckptfix's own record reader (the pairs it decodes rows from)."""
    sys.path.insert(0, str(CODE_ROOT))
    from contextlib import ExitStack

    from ckptfix.state import read as r

    sel = r.select(str(ckpt))
    out: dict[str, Any] = {"version": sel.version, "partitions": {}}
    for part in sel.partitions:
        read = r.StateRead(sel, [], iter(()))
        n = kb = vb = 0
        with ExitStack() as stack:
            for k, v, *_ in r._pairs(sel, stack, r._store(sel, part, "default"), read):
                n += 1
                kb += len(k)
                vb += len(v)
        files = sum(p.stat().st_size for p in (ckpt / "state" / "0" / str(part)).rglob("*") if p.is_file())
        out["partitions"][str(part)] = {
            "rows": n,
            "key_bytes": kb,
            "value_bytes": vb,
            "decoded_bytes": kb + vb,
            "on_disk_bytes": files,
            "chain": read.chains.get(part),
        }
    return out


def count_lines(d: Path) -> int:
    n = 0
    for p in d.glob("part-*"):
        with open(p, "rb") as f:
            n += sum(chunk.count(b"\n") for chunk in iter(lambda f=f: f.read(1 << 20), b""))
    return n


def count_parquet(path: Path) -> int:
    import pyarrow.parquet as pq

    files = sorted(path.glob("part-*.parquet")) if path.is_dir() else [path]
    return sum(pq.ParquetFile(f).metadata.num_rows for f in files)


def profile(ckpt: Path, out_file: Path, keep: Path, top: int = 25) -> dict[str, Any]:
    """cProfile of the jsonl read in a child: ckptfix's and the stdlib's functions (the CLI
    wrappers above ``write_jsonl`` are left out) by cumulative and by own time. The raw
    stats are kept in ``keep`` (pstats format)."""
    code = (
        "import cProfile, sys\n"
        "from ckptfix.cli.main import main\n"
        f"sys.argv = ['ckptfix', 'state', 'read', {str(ckpt)!r}, '--out', {str(out_file)!r}]\n"
        f"cProfile.run('try:\\n    main()\\nexcept SystemExit:\\n    pass', {str(keep)!r})\n"
    )
    t = time.perf_counter()
    subprocess.run([PY, "-c", code], cwd=CODE_ROOT, check=True, capture_output=True)
    wall = time.perf_counter() - t
    import io
    import pstats

    skip = ("/click/", "/typer/", "/ckptfix/cli/", "<string>:1(", "builtins.exec")

    def table(key: str) -> list[dict[str, Any]]:
        st = pstats.Stats(str(keep), stream=io.StringIO())
        st.sort_stats(key)
        rows = []
        for func in st.fcn_list:  # type: ignore[attr-defined]
            _cc, nc, tt, ct, _ = st.stats[func]  # type: ignore[attr-defined]
            fn, line, name = func
            where = f"{fn}:{line}({name})"
            if any(s in where for s in skip):
                continue
            short = fn.split("/ckptfix/", 1)[-1] if "/ckptfix/" in fn else Path(fn).name
            rows.append(
                {
                    "function": f"{short}:{line}({name})",
                    "calls": nc,
                    "tottime_s": round(tt, 3),
                    "cumtime_s": round(ct, 3),
                }
            )
            if len(rows) == top:
                break
        return rows

    return {
        "wall_s_under_cprofile": round(wall, 2),
        "pstats": str(keep),
        "by_cumulative": table("cumulative"),
        "by_tottime": table("tottime"),
    }


def code_fingerprint() -> str:
    """sha256 of ckptfix/**/*.py: the work tree changes under the bench when others edit it."""
    import hashlib

    h = hashlib.sha256()
    for p in sorted((CODE_ROOT / "ckptfix").rglob("*.py")):
        h.update(p.relative_to(CODE_ROOT).as_posix().encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


# ---------------------------------------------------------------- one provider


def bench(provider: str, cache: Path, do_profile: bool, repeat: int) -> dict[str, Any]:
    ckpt, built = ensure_checkpoint(provider, cache)
    print(f"[{provider}] checkpoint {ckpt} ({built['batches']} batches)", file=sys.stderr)
    ckptfix = str(Path(PY).with_name("ckptfix"))
    scratch = Path(tempfile.mkdtemp(prefix="ckptfix-bench-read-"))
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(CODE_ROOT)}
    res: dict[str, Any] = {"provider": provider, "checkpoint": str(ckpt), "built": built}
    res["code_before"] = code_fingerprint()
    try:
        sizes = partition_sizes(ckpt)
        res["sizes"] = sizes
        rows_total = sum(p["rows"] for p in sizes["partitions"].values())
        largest = max(sizes["partitions"].values(), key=lambda p: p["decoded_bytes"])
        res["rows"] = rows_total
        res["largest_partition_decoded_mb"] = round(largest["decoded_bytes"] / 2**20, 2)
        runs: dict[str, Any] = {}
        # the fixed cost of the interpreter + ckptfix's imports, for scale
        runs["ckptfix_baseline"] = [measure([ckptfix, "state", "read", "--help"], env=env)]
        for i in range(repeat):  # interleaved, so that a burst of load hits both engines
            for fmt in ("jsonl", "parquet"):
                out = scratch / f"ckptfix.{fmt}"
                print(f"[{provider}] round {i + 1}/{repeat}: ckptfix state read --format {fmt} ...", file=sys.stderr)
                m = measure([ckptfix, "state", "read", str(ckpt), "--format", fmt, "--out", str(out)], env=env)
                m["rows_out"] = count_parquet(out) if fmt == "parquet" else count_lines_file(out)
                m["out_bytes"] = out.stat().st_size if out.exists() else None
                m["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
                runs.setdefault(f"ckptfix_{fmt}", []).append(m)
                out.unlink(missing_ok=True)
            print(
                f"[{provider}] round {i + 1}/{repeat}: spark statestore -> toArrow() x{SPARK_READS} ...",
                file=sys.stderr,
            )
            m = measure([PY, __file__, "--_spark-arrow", str(ckpt), str(SPARK_READS)], env=env)
            try:
                m.update(json.loads(m["stdout"].strip().splitlines()[-1]))
            except (ValueError, IndexError):
                m["error"] = "no timing from the Spark child"
            m["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
            runs.setdefault("spark_arrow", []).append(m)
        print(f"[{provider}] ckptfix state read --format parquet --jobs 1 (one process) ...", file=sys.stderr)
        out = scratch / "ckptfix-jobs1.parquet"
        m = measure(
            [ckptfix, "state", "read", str(ckpt), "--format", "parquet", "--jobs", "1", "--out", str(out)], env=env
        )
        m["rows_out"] = count_parquet(out)
        runs["ckptfix_parquet_jobs1"] = [m]
        out.unlink(missing_ok=True)
        print(f"[{provider}] floors ...", file=sys.stderr)
        m = measure([PY, __file__, "--_floors", str(ckpt)], env=env)
        try:
            res["floors"] = json.loads(m["stdout"].strip().splitlines()[-1])
        except (ValueError, IndexError):
            res["floors"] = {"error": m["stderr"][-2000:]}
        res["runs"] = runs
        res["summary"] = summarise(res)
        if do_profile:
            print(f"[{provider}] cProfile of the jsonl read ...", file=sys.stderr)
            res["profile"] = profile(ckpt, scratch / "profiled.jsonl", cache / f"state-read-{provider}.pstats")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    res["code_after"] = code_fingerprint()
    if res["code_after"] != res["code_before"]:
        print(f"[{provider}] WARNING: ckptfix/ changed during the run", file=sys.stderr)
    return res


def count_lines_file(p: Path) -> int | None:
    if not p.exists():
        return None
    with open(p, "rb") as f:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))


def _median(xs: list[float]) -> float:
    xs = sorted(xs)
    mid = len(xs) // 2
    return xs[mid] if len(xs) % 2 else (xs[mid - 1] + xs[mid]) / 2


def summarise(res: dict[str, Any]) -> list[dict[str, Any]]:
    """Medians of wall and CPU times over the repeats, the max of the peak memories; the targets of
    issue 13: Parquet no later than Spark's warm ``toArrow()``, JSON lines within twice that, peak
    memory at most 2x the largest partition's decoded size + 100 MB."""
    runs, rows = res["runs"], res["rows"]
    largest_mb = res["largest_partition_decoded_mb"]
    mem_limit = 2 * largest_mb + 100
    sparks = runs["spark_arrow"]
    warm = [t for m in sparks for t in m.get("reads_s", [])[1:]]
    first = [m["reads_s"][0] for m in sparks if m.get("reads_s")]
    s_warm = _median(warm) if warm else None
    out = []
    for fmt, factor in (("parquet", 1), ("jsonl", 2)):
        cs = runs[f"ckptfix_{fmt}"]
        c_s = _median([m["wall_s"] for m in cs])
        rss = max(m["peak_tree_rss_mb"] for m in cs)
        pss = max(m.get("peak_tree_pss_mb", 0) for m in cs)
        one = max(m["peak_hwm_mb"] for m in cs)
        out.append(
            {
                "format": fmt,
                "rows": rows,
                "repeats": len(cs),
                "rows_ok": all(m.get("rows_out") == rows for m in cs) and all(m.get("rows") == rows for m in sparks),
                "ckptfix_s": round(c_s, 2),
                "ckptfix_s_all": [m["wall_s"] for m in cs],
                "ckptfix_cpu_s": round(_median([m["cpu_s"] for m in cs]), 2),
                "ckptfix_rows_per_s": round(rows / c_s),
                "ckptfix_tree_rss_mb": rss,
                "ckptfix_tree_pss_mb": pss,
                "ckptfix_one_process_mb": one,
                "spark_warm_arrow_s": round(s_warm, 2) if s_warm else None,
                "spark_warm_arrow_s_all": warm,
                "spark_first_arrow_s_all": first,
                "spark_session_s": round(_median([m["session_s"] for m in sparks if m.get("session_s")]), 2),
                "spark_total_s": round(_median([m["wall_s"] for m in sparks]), 2),
                "spark_cpu_s": round(_median([m["cpu_s"] for m in sparks]), 2),
                "spark_peak_tree_mb": max(m["peak_tree_rss_mb"] for m in sparks),
                "largest_partition_decoded_mb": largest_mb,
                "memory_limit_mb": round(mem_limit, 1),
                "runtime_floor_mb": res.get("floors", {}).get("runtime_floor_mb"),
                "jobs1_peak_mb": max((m["peak_hwm_mb"] for m in runs.get("ckptfix_parquet_jobs1", [])), default=None),
                "jobs1_s": min((m["wall_s"] for m in runs.get("ckptfix_parquet_jobs1", [])), default=None),
                "target": f"<= {factor}x Spark warm toArrow()",
                "ckptfix_over_spark_warm": round(c_s / s_warm, 2) if s_warm else None,
                "target_speed": bool(s_warm) and c_s <= factor * s_warm,
                "target_memory_rss": rss <= mem_limit,
                "target_memory_pss": pss <= mem_limit,
            }
        )
    return out


def print_table(results: list[dict[str, Any]]) -> None:
    cols = [
        ("provider", "provider"),
        ("format", "format"),
        ("ckptfix s", "ckptfix_s"),
        ("cpu s", "ckptfix_cpu_s"),
        ("spark warm toArrow s", "spark_warm_arrow_s"),
        ("target", "target"),
        ("ratio", "ckptfix_over_spark_warm"),
        ("speed ok", "target_speed"),
        ("tree RSS MB", "ckptfix_tree_rss_mb"),
        ("tree PSS MB", "ckptfix_tree_pss_mb"),
        ("1 proc MB", "ckptfix_one_process_mb"),
        ("limit MB", "memory_limit_mb"),
        ("floor MB", "runtime_floor_mb"),
        ("--jobs 1 MB", "jobs1_peak_mb"),
        ("--jobs 1 s", "jobs1_s"),
        ("RSS ok", "target_memory_rss"),
        ("PSS ok", "target_memory_pss"),
        ("spark total s", "spark_total_s"),
        ("rows ok", "rows_ok"),
    ]
    table = [[h for h, _ in cols]]
    for res in results:
        for row in res["summary"]:
            table.append([str(res["provider"] if k == "provider" else row[k]) for _, k in cols])
    widths = [max(len(r[i]) for r in table) for i in range(len(cols))]
    for r in table:
        print("  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)))
    for res in results:
        print(f"floors [{res['provider']}]: {json.dumps(res.get('floors'))}")


def _placeholders(text: str) -> str:
    """The results name no machine path: the repository (and the code copy) as <repo>, the temp dir as <tmp>."""
    for path, name in ((CODE_ROOT, "<repo>"), (ROOT, "<repo>"), (Path(tempfile.gettempdir()), "<tmp>")):
        text = text.replace(json.dumps(str(path))[1:-1], name)
    return text


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--_generate":
        generate(sys.argv[2], Path(sys.argv[3]))
        return 0
    if len(sys.argv) > 1 and sys.argv[1] == "--_spark-read":
        spark_read(sys.argv[2], sys.argv[3], sys.argv[4])
        return 0
    if len(sys.argv) > 1 and sys.argv[1] == "--_spark-arrow":
        spark_arrow(sys.argv[2], int(sys.argv[3]))
        return 0
    if len(sys.argv) > 1 and sys.argv[1] == "--_floors":
        floors(sys.argv[2])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--provider", choices=(*PROVIDERS, "both", "all"), default="all")
    parser.add_argument("--cache-dir", type=Path, default=Path(tempfile.gettempdir()) / "ckptfix-bench")
    parser.add_argument("--profile", action="store_true", help="also cProfile ckptfix's jsonl read")
    parser.add_argument("--build-only", action="store_true")
    parser.add_argument("--repeat", type=int, default=3, help="measurements per engine and format (median kept)")
    parser.add_argument("--results", type=Path, default=None)
    parser.add_argument(
        "--live-code",
        action="store_true",
        help="run the work tree's ckptfix/ (default: a copy taken at the start, so edits made meanwhile "
        "do not change the code measured halfway through)",
    )
    args = parser.parse_args()
    global CODE_ROOT
    if not args.live_code:
        CODE_ROOT = Path(tempfile.mkdtemp(prefix="ckptfix-bench-code-"))
        shutil.copytree(ROOT / "ckptfix", CODE_ROOT / "ckptfix", ignore=shutil.ignore_patterns("__pycache__"))
    providers = {"both": ["hdfs", "rocksdb"], "all": list(PROVIDERS)}.get(args.provider, [args.provider])
    if args.build_only:
        for p in providers:
            ensure_checkpoint(p, args.cache_dir)
        return 0
    started = dt.datetime.now(dt.timezone.utc)
    results = []
    for p in providers:
        load_before = os.getloadavg()
        res = bench(p, args.cache_dir, args.profile, args.repeat)
        res["loadavg_before"] = [round(x, 2) for x in load_before]
        res["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
        results.append(res)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    doc = {
        "bench": "state_read",
        "started": started.isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
        "ckptfix_commit": commit.stdout.strip() + " (+ uncommitted work tree)",
        "ckptfix_code": "live work tree" if args.live_code else f"copy of ckptfix/ taken at {started:%H:%M:%S}Z",
        "ckptfix_fingerprint": code_fingerprint(),
        "results": results,
    }
    name = f"state_read_{started:%Y-%m-%dT%H%M}_{args.provider}.json"
    path = args.results or HERE / "results" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(_placeholders(json.dumps(doc, indent=2)) + "\n")
    print_table(results)
    print(f"results: {path}", file=sys.stderr)
    if CODE_ROOT != ROOT:
        shutil.rmtree(CODE_ROOT, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
