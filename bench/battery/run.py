"""Run the battery: ``python -m bench.battery [--quick] [--only parsers,cli,crash,faults,load] [--out FILE]``.

Prints one table (section / tried / clean / failed), the first failures of each section and the figures; writes
everything as JSON to ``--out`` (default bench/results/battery-<date>.json; none with --quick). Exit 0 when no
case failed, 1 otherwise."""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from bench.battery import corpus
from bench.battery.report import Section, table

SECTIONS = ("parsers", "cli", "crash", "faults", "load")


def _commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=corpus.ROOT)
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "ckptfix"], capture_output=True, text=True, cwd=corpus.ROOT
        )
        return out.stdout.strip() + ("+work-tree" if dirty.stdout.strip() else "")
    except OSError:
        return "?"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.battery", description=__doc__)
    ap.add_argument("--quick", action="store_true", help="a sample of every section (about a minute)")
    ap.add_argument("--only", default=",".join(SECTIONS), help=f"sections to run, of {','.join(SECTIONS)}")
    ap.add_argument("--mutations", type=int, default=None, help="parser mutations (default: all, >= 100,000)")
    ap.add_argument("--per-family", type=int, default=100, help="mutations per file and family besides truncation")
    ap.add_argument("--cli-samples", type=int, default=None, help="mutated checkpoints run through every command")
    ap.add_argument("--fault-runs", type=int, default=None, help="plans applied through the faulty S3 proxy")
    ap.add_argument("--fault-share", type=float, default=0.15, help="share of PUT/DELETE/GET answers spoiled")
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="worker processes")
    ap.add_argument("--out", type=Path, default=None, help="JSON results file")
    args = ap.parse_args(argv)
    only = {s.strip() for s in args.only.split(",") if s.strip()}
    unknown = only - set(SECTIONS)
    if unknown:
        ap.error(f"unknown section(s): {', '.join(sorted(unknown))}")
    quick = args.quick
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    started = time.monotonic()
    sections: list[Section] = []

    out = args.out
    if out is None and not quick:
        out = corpus.ROOT / "bench" / "results" / f"battery-{datetime.now(timezone.utc):%Y-%m-%dT%H%M}.json"

    def save() -> None:  # after every section: a long run interrupted later keeps what it measured
        if out is None:
            return
        result = {
            "when": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "ckptfix": _commit(),
            "quick": quick,
            "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
            "seconds": round(time.monotonic() - started, 1),
            "sections": [s.as_json() for s in sections],
        }
        out.write_text(json.dumps(result, indent=1, default=str) + "\n")

    def say(msg: str) -> None:
        save()
        print(f"[battery {time.monotonic() - started:6.0f}s] {msg}", file=sys.stderr, flush=True)

    if "parsers" in only:
        from bench.battery import parsers

        say("parsers: format functions")
        limit = args.mutations if args.mutations is not None else (2000 if quick else None)
        sections.append(parsers.run_formats(limit, args.per_family, args.jobs))
    if "cli" in only:
        from bench.battery import parsers

        say("parsers: read commands")
        samples = args.cli_samples if args.cli_samples is not None else (6 if quick else 500)
        sections.append(parsers.run_cli(samples, args.jobs, args.per_family))
    moto = None
    try:
        if {"crash", "faults"} & only:
            from bench.battery.s3 import Moto

            moto = Moto()
        if "crash" in only:
            from bench.battery import crash

            say("crash")
            sections.append(crash.run(quick, moto))
        if "faults" in only:
            from bench.battery import faults

            say("S3 faults")
            runs = args.fault_runs if args.fault_runs is not None else (2 if quick else 25)
            with tempfile.TemporaryDirectory(prefix="battery-faults-") as d:
                sections.append(faults.run(moto, runs, args.fault_share, Path(d)))
    finally:
        if moto is not None:
            moto.close()
    if "load" in only:
        from bench.battery import load

        say("load")
        sections.append(load.run(quick))

    print(table(sections))
    for s in sections:
        for f in s.failures[:5]:
            print(f"  {s.name}: {json.dumps(f, default=str)[:400]}")
        for n in s.notes:
            print(f"  {s.name}: note: {n}")
    save()
    if out is not None:
        print(f"results: {out}", file=sys.stderr)
    return 0 if all(s.failed == 0 for s in sections) else 1


if __name__ == "__main__":
    sys.exit(main())
