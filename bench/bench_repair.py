"""Benchmark: plan + apply + undo of a repair on the 100k-batch synthetic checkpoint.

The repair is ``rollback --to-batch L-K`` (default K=5): it deletes K offsets and commits and
every state file of the K newest versions in all 2 x 200 stores, with their ``.crc`` sidecars:
thousands of actions, each backed up and journaled. The bench checks that apply touches only
the files in the plan (plus ckptfix's own ``_ckptfix/``) and that undo restores every one of
them byte for byte. Locally the checkpoint is a scratch copy of the cached synthetic one; on
S3 (moto, started here) it is uploaded at ``--s3-scale`` and every HTTP request is recorded.

    python bench/bench_repair.py                      # full size locally, 0.02 of it on S3
    python bench/bench_repair.py --scale 0.01 --s3-scale 1
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(HERE.parent))

import bench_audit  # noqa: E402
import synth  # noqa: E402

from ckptfix.repair import engine  # noqa: E402
from ckptfix.repair.rollback import plan_rollback  # noqa: E402
from ckptfix.storage import Location, s3_options  # noqa: E402


def fingerprint_local(root: Path) -> dict[str, tuple[int, int]]:
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            p = Path(dirpath, name)
            st = p.stat()
            out[p.relative_to(root).as_posix()] = (st.st_size, st.st_mtime_ns)
    return out


def run(url: str, options: dict[str, Any], back: int, local_root: Path | None, recorder: Any) -> dict[str, Any]:
    loc, backup = Location(url, options), Location(engine.default_backup_url(url), options)
    before_fp = fingerprint_local(local_root) if local_root else None
    recorder.reset("plan")
    t = time.perf_counter()
    latest = max(int(p.rsplit("/", 1)[1]) for p in loc.list_tree("offsets") if p.rsplit("/", 1)[1].isdigit())
    result = plan_rollback(url, latest - back, storage_options=options, force=True)
    plan = result.plan
    t_plan = time.perf_counter() - t
    planned = {a.path for a in plan.actions}
    originals = {a.path: a.before.sha256 for a in plan.actions}
    recorder.reset("apply")
    t = time.perf_counter()
    run_id = engine.apply(plan, loc, backup, force=True)
    t_apply = time.perf_counter() - t
    outside: list[str] = []
    if local_root is not None and before_fp is not None:
        after_fp = fingerprint_local(local_root)
        changed = {p for p in before_fp.keys() | after_fp.keys() if before_fp.get(p) != after_fp.get(p)}
        outside = sorted(p for p in changed - planned if not p.startswith("_ckptfix/"))
    else:
        outside = sorted(k for k in recorder.written("apply") if k not in planned and not k.startswith("_ckptfix/"))
    recorder.reset("undo")
    t = time.perf_counter()
    engine.undo(loc, backup, run_id, force=True)
    t_undo = time.perf_counter() - t
    wrong = [
        p
        for p, sha in originals.items()
        if (data := loc.read_if_exists(p)) is None or hashlib.sha256(data).hexdigest() != sha
    ]
    return {
        "rollback_to": latest - back,
        "actions": len(plan.actions),
        "deletes": sum(a.op == "delete" for a in plan.actions),
        "seconds": {"plan": round(t_plan, 2), "apply": round(t_apply, 2), "undo": round(t_undo, 2)},
        "touched_outside_plan": outside[:20],
        "touched_outside_plan_count": len(outside),
        "not_restored_by_undo": wrong[:20],
        "requests": recorder.summary(),
    }


class NoRecorder:
    def reset(self, phase: str) -> None:
        pass

    def written(self, phase: str) -> set[str]:
        return set()

    def summary(self) -> dict[str, Any]:
        return {}


class S3Recorder:
    """Counts every HTTP request of the s3fs instance ckptfix uses, by phase and operation."""

    def __init__(self, fs: Any, root: str) -> None:
        self.root = root.rstrip("/") + "/"
        self.phase = "setup"
        self.ops: dict[str, Counter[str]] = {}
        self.keys: dict[str, set[str]] = {}
        fs.connect()
        fs.s3.meta.events.register("before-call.s3", self._on_call)

    def _on_call(self, event_name: str = "", params: Any = None, **_: Any) -> None:
        op = event_name.rsplit(".", 1)[-1]
        self.ops.setdefault(self.phase, Counter())[op] += 1
        if op in ("PutObject", "DeleteObject", "DeleteObjects", "CopyObject") and isinstance(params, dict):
            key = str(params.get("Key", ""))
            bucket_prefix = self.root.split("/", 1)[1] if "/" in self.root else ""
            if key.startswith(bucket_prefix):
                self.keys.setdefault(self.phase, set()).add(key[len(bucket_prefix) :])

    def reset(self, phase: str) -> None:
        self.phase = phase

    def written(self, phase: str) -> set[str]:
        return self.keys.get(phase, set())

    def summary(self) -> dict[str, Any]:
        return {phase: dict(c) | {"total": sum(c.values())} for phase, c in self.ops.items() if phase != "setup"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--s3-scale", type=float, default=0.02)
    parser.add_argument("--back", type=int, default=5, help="roll back this many batches")
    parser.add_argument("--no-local", action="store_true")
    parser.add_argument("--no-s3", action="store_true")
    parser.add_argument("--cache-dir", type=Path, default=Path(tempfile.gettempdir()) / "ckptfix-bench")
    parser.add_argument("--results", type=Path, default=None)
    args = parser.parse_args()
    base = synth.Params(batches=100_000, operators=2, partitions=200, versions=100)
    rows: list[dict[str, Any]] = []
    if not args.no_local:
        params = base.scaled(args.scale)
        cached, summary = bench_audit.ensure_local(params, args.cache_dir)
        scratch = Path(tempfile.mkdtemp(prefix="ckptfix-bench-repair-")) / "ckpt"
        print(f"[local] copying {summary['files']} files to {scratch} ...", file=sys.stderr)
        shutil.copytree(cached, scratch)
        try:
            print("[local] plan + apply + undo ...", file=sys.stderr)
            rows.append(
                {
                    "target": "local",
                    "files": summary["files"],
                    **run(str(scratch), {}, args.back, scratch, NoRecorder()),
                }
            )
        finally:
            shutil.rmtree(scratch.parent)
    if not args.no_s3:
        import fsspec

        params = base.scaled(args.scale * args.s3_scale)
        cached, summary = bench_audit.ensure_local(params, args.cache_dir)
        with bench_audit.moto_endpoint() as endpoint:
            options = bench_audit.s3_options(endpoint)
            fs = fsspec.filesystem("s3", **options)
            fs.mkdir("ckptfix-bench-repair")
            url = f"s3://ckptfix-bench-repair/{params.key()}"
            print(f"[s3] uploading {summary['files']} objects ...", file=sys.stderr)
            sources = [str(p) for p in cached.rglob("*") if p.is_file()]
            fs.put(sources, [f"{url[5:]}/{Path(s).relative_to(cached).as_posix()}" for s in sources], batch_size=256)
            instrumented = fsspec.filesystem("s3", **s3_options(options))  # the instance ckptfix gets
            recorder = S3Recorder(instrumented, url[5:])
            print("[s3] plan + apply + undo ...", file=sys.stderr)
            rows.append(
                {"target": "s3 (moto)", "files": summary["files"], **run(url, options, args.back, None, recorder)}
            )
    for r in rows:
        print(
            f"{r['target']:>10}  files {r['files']:>7}  actions {r['actions']:>5}  plan {r['seconds']['plan']:>6}s  "
            f"apply {r['seconds']['apply']:>6}s  undo {r['seconds']['undo']:>6}s  outside plan "
            f"{r['touched_outside_plan_count']}  not restored {len(r['not_restored_by_undo'])}"
        )
        for phase, ops in r["requests"].items():
            print(f"{'':>12}{phase}: {ops}")
    out = args.results or HERE / "results" / f"{dt.date.today().isoformat()}-repair.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "when": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                "args": {k: str(v) for k, v in vars(args).items()},
                "rows": rows,
            },
            indent=2,
        )
    )
    print(f"results: {out}")
    bad = [r for r in rows if r["touched_outside_plan_count"] or r["not_restored_by_undo"]]
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
