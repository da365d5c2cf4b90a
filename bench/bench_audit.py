"""How long does ``ckptfix audit`` take on a big checkpoint, locally and on S3 (moto)?

    python bench/bench_audit.py                     # full size locally, --s3-scale of it on S3
    python bench/bench_audit.py --scale 0.01        # quick run
    python bench/bench_audit.py --no-s3 / --no-local

For each target it measures, each in a fresh child process (so peak RSS is that step's own):

a. a bare recursive listing ``fs.find(root, detail=True, withdirs=True)``: wall time;
b. ``ckptfix.audit.audit(url, target_spark="4.3", storage_options=...)``: wall time;
c. files read by the audit (``report.stats.files_read``) against the total;
d. S3 HTTP requests, counted by a botocore ``before-send.s3`` handler on the s3fs client
   (every attempt, retries included; the audit reuses that client through fsspec's
   instance cache because it gets the same storage options);
e. peak RSS (``resource.getrusage``) of the child.

The synthetic checkpoint (bench/synth.py) is cached under $TMPDIR/ckptfix-bench/<params>/.
S3 runs use moto's ThreadedMotoServer on 127.0.0.1 (port 0) inside this process; uploading
the full 690k objects to moto takes too long, so S3 uses ``--s3-scale`` (default 0.1) of
the batches and partitions, and the results say which.
Results: a table on stdout, JSON in bench/results/<date>-audit.json.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import logging
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(HERE.parent))

import synth  # noqa: E402  (bench/ is not a package)

AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "bench",
    "AWS_SECRET_ACCESS_KEY": "bench",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    "NO_PROXY": "127.0.0.1,localhost",
}
BUCKET = "ckptfix-bench"


def peak_rss_mb() -> float:
    """Peak RSS of this process in MiB.

    ``getrusage(RUSAGE_SELF).ru_maxrss`` survives fork+exec on Linux: a child started by a
    parent that once held 400 MB reports at least 400 MB (measured: 411 MB for a bare
    ``python -c``). The parent holds moto's objects, so prefer the new image's own
    high-water mark ``VmHWM`` and fall back to getrusage elsewhere.
    """
    with contextlib.suppress(OSError), open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def ru_maxrss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# -- child process: one measurement --------------------------------------------------------


def _request_counter(fs: Any) -> Counter[str]:
    """Count every HTTP request the s3fs client sends, by S3 operation."""
    counts: Counter[str] = Counter()

    def on_send(event_name: str = "", **_kwargs: Any) -> None:
        counts[event_name.rsplit(".", 1)[-1]] += 1

    fs.connect()  # the sync face of ``await fs.set_session()``: creates fs.s3
    fs.s3.meta.events.register("before-send.s3", on_send)
    return counts


def measure(mode: str, url: str, storage_options: dict[str, Any]) -> dict[str, Any]:
    import fsspec

    local_dir = storage_options.pop("_local", None)  # upload mode only, not s3fs options
    upload_batch = int(storage_options.pop("_batch", 256))
    is_s3 = url.startswith("s3://")
    if is_s3:
        if mode == "audit":  # the instance ckptfix will get from fsspec's cache, so its requests are counted
            from ckptfix.storage import s3_options

            storage_options = s3_options(storage_options)
        fs = fsspec.filesystem("s3", **storage_options)
        root = url[len("s3://") :]
        counts: Counter[str] | None = _request_counter(fs)
    else:
        fs = fsspec.filesystem("file")
        root = url
        counts = None
    out: dict[str, Any] = {"mode": mode, "url": url, "rss_before_mb": round(peak_rss_mb(), 1)}

    if mode == "upload":
        local = Path(local_dir)
        sources, targets = [], []
        for dirpath, _dirs, files in os.walk(local):
            for name in files:
                p = Path(dirpath, name)
                sources.append(str(p))
                targets.append(f"{root}/{p.relative_to(local).as_posix()}")
        started = time.perf_counter()
        fs.put(sources, targets, batch_size=upload_batch)
        out["seconds"] = time.perf_counter() - started
        out["objects"] = len(sources)
    elif mode == "list":
        started = time.perf_counter()
        found = fs.find(root, detail=True, withdirs=True)
        out["seconds"] = time.perf_counter() - started
        out["entries"] = len(found)
        out["files"] = sum(1 for info in found.values() if info.get("type") != "directory")
    elif mode == "audit":
        try:
            from ckptfix.audit import audit
        except Exception as exc:  # noqa: BLE001 - the engine is still being written
            out["status"] = "missing"
            out["message"] = f"ckptfix.audit.audit is not importable yet: {type(exc).__name__}: {exc}"
        else:
            started = time.perf_counter()
            try:
                report = audit(url, target_spark="4.3", storage_options=storage_options or None)
            except Exception as exc:  # noqa: BLE001 - report, do not hide, a failing audit
                out["seconds"] = time.perf_counter() - started
                out["status"] = "error"
                out["message"] = f"{type(exc).__name__}: {exc}"
            else:
                out["seconds"] = time.perf_counter() - started
                out["status"] = "ok"
                stats = getattr(report, "stats", None)
                for name in ("files_read", "bytes_read", "list_calls", "entries_listed"):
                    out[name] = getattr(stats, name, None)
                verdict = getattr(report, "verdict", None)
                out["restarts"] = getattr(verdict, "restarts", None)
                out["findings"] = [
                    f"{getattr(f, 'rule_id', '?')}:{getattr(f, 'severity', '?')}"
                    for f in getattr(report, "findings", [])
                ]
    else:
        raise SystemExit(f"unknown mode {mode}")
    if counts is not None:
        out["requests"] = sum(counts.values())
        out["requests_by_operation"] = dict(counts.most_common())
        if mode == "audit" and out.get("status") == "ok" and not counts and (out.get("files_read") or 0) > 0:
            out["requests"] = None
            out["requests_note"] = "the audit did not use the instrumented s3fs instance; requests unknown"
    out["peak_rss_mb"] = round(peak_rss_mb(), 1)
    out["ru_maxrss_mb"] = round(ru_maxrss_mb(), 1)  # inflated by the parent's peak, see peak_rss_mb
    return out


def run_child(mode: str, url: str, storage_options: dict[str, Any], timeout: float) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", mode, url, json.dumps(storage_options)]
    env = {**os.environ, **AWS_ENV}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"mode": mode, "url": url, "status": "crashed", "message": proc.stderr.strip()[-2000:]}
    result: dict[str, Any] = json.loads(lines[-1])
    return result


# -- parent: build, serve, run -------------------------------------------------------------


def ensure_local(params: synth.Params, cache_dir: Path) -> tuple[Path, dict[str, Any]]:
    base = cache_dir / params.key()
    root, done = base / "ckpt", base / "summary.json"
    if done.exists():
        return root, json.loads(done.read_text())
    if root.exists():
        import shutil

        shutil.rmtree(root)
    print(f"writing synthetic checkpoint {params.key()} to {root} ...", file=sys.stderr)
    summary = synth.write_checkpoint(root, params, progress=lambda m: print(f"  {m}", file=sys.stderr))
    done.write_text(json.dumps(asdict(summary)))
    return root, asdict(summary)


@contextlib.contextmanager
def moto_endpoint() -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    previous = {k: os.environ.get(k) for k in AWS_ENV}
    os.environ.update(AWS_ENV)
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one log line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        yield f"http://{host}:{port}"
    finally:
        server.stop()
        for k, v in previous.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def put_into_moto(local: Path, bucket: str, prefix: str) -> dict[str, Any]:
    """Setup: every file below ``local`` into the moto server running in this process, through moto's backend (as
    tests/support/s3.py does), not one HTTP PUT each; the listing and the audit still go through HTTP."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends

    backend = s3_backends[DEFAULT_ACCOUNT_ID]["global"]
    started, n = time.perf_counter(), 0
    for dirpath, _dirs, files in os.walk(local):
        for name in files:
            path = Path(dirpath, name)
            backend.put_object(bucket, f"{prefix}/{path.relative_to(local).as_posix()}", path.read_bytes())
            n += 1
    return {"mode": "upload (moto backend, in process)", "seconds": time.perf_counter() - started, "objects": n}


def s3_options(endpoint: str) -> dict[str, Any]:
    return {
        "key": "bench",
        "secret": "bench",
        "client_kwargs": {"endpoint_url": endpoint},
        "use_listings_cache": False,  # (a) and (b) must each pay for their own listing
    }


def bench_target(
    name: str, url: str, options: dict[str, Any], summary: dict[str, Any], timeout: float
) -> dict[str, Any]:
    print(f"[{name}] listing {url} ...", file=sys.stderr)
    listing = run_child("list", url, options, timeout)
    print(f"[{name}] audit ...", file=sys.stderr)
    audited = run_child("audit", url, options, timeout)
    return {"target": name, "url": url, "synthetic": summary, "list": listing, "audit": audited}


def _fmt(value: Any, spec: str = "") -> str:
    if value is None:
        return "-"
    return format(value, spec) if spec else str(value)


def table(rows: list[dict[str, Any]]) -> str:
    head = [
        "target",
        "batches",
        "files",
        "list s",
        "list req",
        "list RSS MB",
        "audit s",
        "files read",
        "audit req",
        "audit RSS MB",
    ]
    lines = [head]
    for r in rows:
        listing, audited, syn = r["list"], r["audit"], r["synthetic"]
        ok = audited.get("status") == "ok"
        read = f"{audited.get('files_read')}/{syn['files']}" if ok else audited.get("status", "?")
        lines.append(
            [
                r["target"],
                _fmt(syn["params"]["batches"]),
                _fmt(syn["files"]),
                _fmt(listing.get("seconds"), ".2f"),
                _fmt(listing.get("requests")),
                _fmt(listing.get("peak_rss_mb")),
                _fmt(audited.get("seconds"), ".2f"),
                read,
                _fmt(audited.get("requests")),
                _fmt(audited.get("peak_rss_mb")),
            ]
        )
    widths = [max(len(str(row[i])) for row in lines) for i in range(len(head))]
    return "\n".join("  ".join(str(c).rjust(w) for c, w in zip(row, widths, strict=True)) for row in lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="benchmark ckptfix audit on a synthetic checkpoint")
    parser.add_argument("--batches", type=int, default=synth.Params.batches)
    parser.add_argument("--operators", type=int, default=synth.Params.operators)
    parser.add_argument("--partitions", type=int, default=synth.Params.partitions)
    parser.add_argument("--versions", type=int, default=synth.Params.versions)
    parser.add_argument("--scale", type=float, default=1.0, help="scale batches and partitions of every target")
    parser.add_argument("--s3-scale", type=float, default=0.1, help="further scale for the S3 target (upload time)")
    parser.add_argument("--no-local", action="store_true")
    parser.add_argument("--no-s3", action="store_true")
    parser.add_argument("--cache-dir", type=Path, default=Path(tempfile.gettempdir()) / "ckptfix-bench")
    parser.add_argument("--results", type=Path, default=None, help="default bench/results/<date>-audit.json")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per measurement")
    parser.add_argument(
        "--storage-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra s3fs option for the S3 list/audit steps, as the CLI takes it (e.g. max_concurrency=1)",
    )
    parser.add_argument("--upload-batch", type=int, default=256, help="concurrent PUTs during the S3 upload")
    parser.add_argument(
        "--upload-over-http",
        action="store_true",
        help="upload with s3fs PUTs (about 140 objects/s) instead of moto's in-process backend (setup, not measured)",
    )
    args = parser.parse_args(argv)

    full = synth.Params(args.batches, args.operators, args.partitions, args.versions)
    rows: list[dict[str, Any]] = []
    extra: dict[str, Any] = {}
    if not args.no_local:
        params = full.scaled(args.scale)
        root, summary = ensure_local(params, args.cache_dir)
        rows.append(bench_target("local", str(root), {}, summary, args.timeout))
    if not args.no_s3:
        s3_scale = args.scale * args.s3_scale
        params = full.scaled(s3_scale)
        root, summary = ensure_local(params, args.cache_dir)
        with moto_endpoint() as endpoint:
            options = s3_options(endpoint)
            import s3fs

            s3fs.S3FileSystem(**options, skip_instance_cache=True).mkdir(BUCKET)
            url = f"s3://{BUCKET}/{params.key()}"
            print(f"[s3] uploading {summary['files']} objects to moto ...", file=sys.stderr)
            if args.upload_over_http:
                upload = run_child(
                    "upload", url, {**options, "_local": str(root), "_batch": args.upload_batch}, args.timeout
                )
            else:
                upload = put_into_moto(root, BUCKET, params.key())
            if upload.get("seconds"):
                upload["objects_per_second"] = round(upload["objects"] / upload["seconds"], 1)
            extra["s3_upload"] = upload
            extra["s3_scale"] = s3_scale
            from ckptfix.storage import parse_storage_options

            extra_options = parse_storage_options(args.storage_option)
            row = bench_target("s3 (moto)", url, {**options, **extra_options}, summary, args.timeout)
            row["extra_storage_options"] = extra_options
            row["scale"] = s3_scale
            rows.append(row)

    print(table(rows))
    for r in rows:
        audited = r["audit"]
        if audited.get("status") != "ok":
            print(f"[{r['target']}] audit {audited.get('status')}: {audited.get('message')}")
        elif audited.get("findings"):
            print(f"[{r['target']}] findings: {', '.join(audited['findings'])}")
    if "s3_upload" in extra:
        up = extra["s3_upload"]
        print(
            f"[s3] scale {extra['s3_scale']:g}: uploaded {up.get('objects')} objects in "
            f"{_fmt(up.get('seconds'), '.1f')} s ({up.get('objects_per_second')}/s, {up.get('requests')} requests)"
        )

    now = dt.datetime.now(dt.timezone.utc)
    results = args.results or HERE / "results" / f"{now:%Y-%m-%d}-audit.json"
    results.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "when": now.isoformat(timespec="seconds"),
        "machine": {"python": platform.python_version(), "platform": platform.platform(), "cpus": os.cpu_count()},
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "rows": rows,
        **extra,
    }
    results.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"results: {results}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        print(json.dumps(measure(sys.argv[2], sys.argv[3], json.loads(sys.argv[4]))))
        sys.exit(0)
    sys.exit(main())
