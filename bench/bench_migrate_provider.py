"""Benchmark: `ckptfix migrate provider` on the 1M-key checkpoints of bench_state_read.py, against a plain
recursive copy of the same checkpoint.

The cached checkpoints (``$TMPDIR/ckptfix-bench/state-1m-hdfs`` and ``state-1m-rocksdb``, built by
``bench_state_read.py`` with real Spark: 1,000,000 keys in 4 partitions at version 11) are never modified: each
run first copies the checkpoint into a scratch dir, then measures, each in a fresh child process:

* ``cp -r`` of the checkpoint (the baseline: what moving the bytes costs);
* ``ckptfix migrate provider COPY --to rocksdb`` (HDFS cache) / ``--to hdfs`` (RocksDB cache) as a dry run
  (read every store of the last version, build the new files, show the plan);
* the same with ``--apply --idle-seconds 0`` on a fresh copy (plus backups of every deleted file and the
  journal under ``COPY/_ckptfix``).

Wall time and peak RSS of the child's process tree come from ``measure`` (bench_state_read.py).

    python bench/bench_migrate_provider.py                 # both caches
    python bench/bench_migrate_provider.py --provider hdfs
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shlex
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_state_read import _placeholders, measure  # noqa: E402

CACHE = Path(tempfile.gettempdir()) / "ckptfix-bench"
CKPTFIX = [sys.executable, "-m", "ckptfix.cli.main"]
TARGET = {"hdfs": "rocksdb", "rocksdb": "hdfs"}


def _to_file(argv: list[str], out: Path) -> list[str]:
    return ["sh", "-c", f"exec {shlex.join(argv)} > {shlex.quote(str(out))} 2>&1"]


def bench(provider: str, scratch: Path) -> dict[str, Any]:
    src = CACHE / f"state-1m-{provider}" / "ckpt"
    if not src.is_dir():
        raise SystemExit(f"{src} is missing: run bench/bench_state_read.py --provider {provider} first")
    to = TARGET[provider]
    cli = [*CKPTFIX, "migrate", "provider"]
    copy = measure(["cp", "-r", str(src), str(scratch / "copy")])
    shutil.copytree(src, scratch / "dry")
    plan_file = scratch / "plan.json"
    # the CLI's output goes to a file: measure() reads the child's pipes only at its end
    dry = measure(_to_file([*cli, str(scratch / "dry"), "--to", to, "--plan-out", str(plan_file)], scratch / "dry.out"))
    shutil.copytree(src, scratch / "apply")
    applied = measure(
        _to_file([*cli, str(scratch / "apply"), "--to", to, "--apply", "--idle-seconds", "0"], scratch / "apply.out")
    )
    plan = json.loads(plan_file.read_text()) if plan_file.exists() else {}
    size = sum(p.stat().st_size for p in src.rglob("*") if p.is_file())
    row = {"provider": provider, "to": to, "checkpoint_mb": round(size / 2**20, 1)}
    for name, m in (("cp_r", copy), ("dry_run", dry), ("apply", applied)):
        row[name] = {k: m[k] for k in ("rc", "wall_s", "cpu_s", "peak_tree_rss_mb", "peak_hwm_mb")}
    row["actions"] = len(plan.get("actions", [])) if plan else None
    for name in ("dry", "apply"):
        out = scratch / f"{name}.out"
        row[f"{name}_output_tail"] = out.read_text().splitlines()[-6:] if out.exists() else []
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--provider", choices=["hdfs", "rocksdb", "both"], default="both")
    args = ap.parse_args()
    providers = ["hdfs", "rocksdb"] if args.provider == "both" else [args.provider]
    rows = []
    for provider in providers:
        scratch = Path(tempfile.mkdtemp(prefix=f"ckptfix-bench-provider-{provider}-"))
        try:
            rows.append(bench(provider, scratch))
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H%M")
    out = HERE / "results" / f"migrate_provider_{stamp}.json"
    doc = json.dumps({"benchmark": "migrate provider vs cp -r", "when": stamp, "results": rows}, indent=2)
    out.write_text(_placeholders(doc))  # no machine path in the committed results
    for r in rows:
        print(
            f"{r['provider']} -> {r['to']} ({r['checkpoint_mb']} MB): "
            + "; ".join(
                f"{k} {r[k]['wall_s']} s, peak {r[k]['peak_tree_rss_mb']} MB (rc {r[k]['rc']})"
                for k in ("cp_r", "dry_run", "apply")
            )
        )
    print(f"results: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
