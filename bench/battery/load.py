"""Load: `ckptfix audit` of the synthetic 100,000-batch checkpoint (bench/synth.py, cached by bench_audit.py) and
`ckptfix state read` of the 1M-key state Spark wrote (bench_state_read.py's HDFS checkpoint, built with PySpark
once and cached), each in a fresh child process, with wall time and peak RSS (bench_state_read.measure: VmHWM
and the process tree's RSS polled). Clean = the command answers as the checkpoint's construction says it must
(the synthetic checkpoint restarts: exit 0; the state holds 1,000,000 keys: 1,000,000 lines) within the bounds
below."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from bench.battery.report import Section

CACHE = Path(tempfile.gettempdir()) / "ckptfix-bench"
PEAK_MB = {"audit": 1024.0, "state read": 1024.0}  # bounds the run must stay under (tree RSS)
TIMEOUT_NOTE = "a command that does not finish fails the case"


def run(quick: bool) -> Section:
    from bench import bench_audit, bench_state_read, synth

    section = Section("load: audit 100k batches, state read 1M keys")
    scale = 0.01 if quick else 1.0
    params = synth.Params().scaled(scale)
    root, summary = bench_audit.ensure_local(params, CACHE)
    res = bench_state_read.measure([sys.executable, "-m", "ckptfix", "audit", str(root), "-q", "-f", "json"])
    try:
        verdict = json.loads(res["stdout"]).get("verdict", {})
    except ValueError:
        verdict = {}
    ok = res["rc"] == 0 and verdict.get("restarts") is True and res["peak_tree_rss_mb"] < PEAK_MB["audit"]
    section.case(ok, {"case": "audit", "rc": res["rc"], "stderr": res["stderr"][-300:], "verdict": verdict})
    section.figures["audit"] = {
        "batches": params.batches,
        "files": summary.get("files"),
        "wall_s": res["wall_s"],
        "peak_rss_mb": res["peak_tree_rss_mb"],
        "rc": res["rc"],
    }
    if quick:
        section.notes.append(
            "quick: audit at 0.01 scale (1,000 batches); the 1M-key state read runs in the full battery"
        )
        return section
    ckpt, _info = bench_state_read.ensure_checkpoint("hdfs", CACHE)  # built by Spark once (about 2 min)
    with tempfile.TemporaryDirectory(prefix="battery-load-") as d:
        out = Path(d) / "rows.jsonl"
        res = bench_state_read.measure([sys.executable, "-m", "ckptfix", "state", "read", str(ckpt), "--out", str(out)])
        rows = bench_state_read.count_lines_file(out) if out.exists() else None
    ok = res["rc"] == 0 and rows == 1_000_000 and res["peak_tree_rss_mb"] < PEAK_MB["state read"]
    section.case(ok, {"case": "state read", "rc": res["rc"], "rows": rows, "stderr": res["stderr"][-300:]})
    section.figures["state_read"] = {
        "keys": 1_000_000,
        "rows": rows,
        "wall_s": res["wall_s"],
        "peak_rss_mb": res["peak_tree_rss_mb"],
        "largest_process_mb": res["peak_hwm_mb"],
        "rc": res["rc"],
    }
    return section
