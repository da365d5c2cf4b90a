"""Benchmark: `ckptfix migrate relocate` of the 1M-key checkpoints of bench_state_read.py, against a plain
recursive copy of the same tree.

The cached checkpoints (``$TMPDIR/ckptfix-bench/state-1m-hdfs/ckpt`` and ``state-1m-rocksdb/ckpt``, built with real
Spark by ``bench_state_read.py``'s ``ensure_checkpoint``: 1,000,000 keys in 4 partitions) are only read.
Each case is one function ``case_<name>(ckpt, scratch) -> argv`` run in a fresh child process by ``measure``
(bench_state_read.py: wall time, peak RSS of the process tree); its output lands in a new directory under
``scratch`` that is removed afterwards. Add a case by adding a function and naming it in ``CASES``.

    python bench/bench_migrate.py                    # both caches, every case
    python bench/bench_migrate.py --provider rocksdb --repeat 3
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_state_read import measure  # noqa: E402

CACHE = Path(tempfile.gettempdir()) / "ckptfix-bench"
CKPTFIX = [sys.executable, "-m", "ckptfix.cli.main"]


def case_cp_r(ckpt: Path, out: Path) -> list[str]:
    """Baseline: coreutils recursive copy (hidden .crc sidecars included)."""
    return ["cp", "-r", str(ckpt), str(out)]


def case_copytree(ckpt: Path, out: Path) -> list[str]:
    """Baseline: Python's shutil.copytree (copy2: data + metadata, sendfile on Linux)."""
    return [sys.executable, "-c", f"import shutil; shutil.copytree({str(ckpt)!r}, {str(out)!r})"]


def case_relocate_plan(ckpt: Path, out: Path) -> list[str]:
    """`ckptfix migrate relocate` dry run: list SRC, check it, plan rewrites, scan for the old location."""
    return [*CKPTFIX, "migrate", "relocate", str(ckpt), str(out), "--force", "-q", "-f", "json"]


def case_relocate_apply(ckpt: Path, out: Path) -> list[str]:
    """`ckptfix migrate relocate --apply`: plan + streamed copy (8 MiB pieces, fsync per file) + rewrites."""
    return [*CKPTFIX, "migrate", "relocate", str(ckpt), str(out), "--apply", "--force", "-q", "-f", "json"]


CASES: dict[str, Callable[[Path, Path], list[str]]] = {
    "cp -r": case_cp_r,
    "shutil.copytree": case_copytree,
    "relocate (plan only)": case_relocate_plan,
    "relocate --apply": case_relocate_apply,
}


def tree_size(root: Path) -> tuple[int, int]:
    files = [p for p in root.rglob("*") if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


def load_avg() -> list[float]:
    try:
        return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]
    except OSError:
        return []


def bench(provider: str, repeat: int, scratch: Path) -> dict[str, Any]:
    from bench_state_read import ensure_checkpoint

    ckpt, _ = ensure_checkpoint(provider, CACHE)  # cached: built once with Spark
    n_files, n_bytes = tree_size(ckpt)
    runs: dict[str, list[dict[str, Any]]] = {}
    for _ in range(repeat):
        for name, case in CASES.items():  # interleaved: load changes hit every case alike
            out = scratch / f"{provider}-{len(runs.get(name, []))}-{name.replace(' ', '_').replace('/', '')}"
            m = measure(case(ckpt, out))
            m["load_avg"] = load_avg()
            if m["rc"] != 0:
                raise SystemExit(f"{name} failed (rc {m['rc']}): {m['stderr'][-2000:]}")
            if out.exists():
                got = tree_size(out)
                m["copied_files"], m["copied_bytes"] = got
            shutil.rmtree(out, ignore_errors=True)
            m.pop("stdout", None)
            runs.setdefault(name, []).append(m)
    return {
        "provider": provider,
        "checkpoint": str(ckpt),
        "files": n_files,
        "bytes": n_bytes,
        "cases": {
            name: {
                "median_wall_s": round(statistics.median(r["wall_s"] for r in rs), 3),
                "median_peak_tree_rss_mb": round(statistics.median(r["peak_tree_rss_mb"] for r in rs), 1),
                "runs": rs,
            }
            for name, rs in runs.items()
        },
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--provider", choices=["hdfs", "rocksdb", "both"], default="both")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", type=Path, default=HERE / "results")
    args = ap.parse_args()
    providers = ["hdfs", "rocksdb"] if args.provider == "both" else [args.provider]
    scratch = Path(tempfile.mkdtemp(prefix="ckptfix-bench-migrate-"))
    try:
        results = [bench(p, args.repeat, scratch) for p in providers]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H%M")
    args.out.mkdir(parents=True, exist_ok=True)
    target = args.out / f"migrate_relocate_{stamp}.json"
    doc = {"when": stamp, "load_avg_at_end": load_avg(), "repeat": args.repeat, "results": results}
    target.write_text(json.dumps(doc, indent=2) + "\n")
    print("| checkpoint | files / MB | case | median wall s | median peak RSS MB (process tree) |")
    print("|---|---|---|---|---|")
    for res in results:
        for name, c in res["cases"].items():
            print(
                f"| {res['provider']} | {res['files']} / {res['bytes'] / 1e6:.1f} | {name} | "
                f"{c['median_wall_s']:.2f} | {c['median_peak_tree_rss_mb']:.0f} |"
            )
    print(f"results: {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
