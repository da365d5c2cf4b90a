"""Parsers: mutations of real files through ckptfix's format functions, and a sample of them through every read
command (in-process CLI, as a user runs it). Clean = the function returns, or raises FormatError /
UnsupportedVersion (ckptfix/errors.py); the command exits 0, 1 or 2 with its message and no traceback. Failed =
any other exception, exit 3, a traceback, a hang (timeout) or memory growing past the bound."""

from __future__ import annotations

import multiprocessing as mp
import os
import resource
import shutil
import signal
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

from bench.battery import corpus, mutate
from bench.battery.report import Section

TIMEOUT_S = 10.0  # one mutation through one format function
CLI_TIMEOUT_S = 60.0  # one command on a mutated checkpoint
MEMORY_BOUND_MB = 256.0  # growth of a worker's peak RSS that one mutation may cause
SEED = 16


class Hang(Exception):
    pass


def _alarm(_signum: int, _frame: Any) -> None:
    raise Hang()


def _peak_mb() -> float:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# ---------------------------------------------------------------- format functions (worker processes)

_FILES: list[corpus.CorpusFile] = []


def _init() -> None:
    _FILES[:] = corpus.collect()
    signal.signal(signal.SIGALRM, _alarm)
    os.environ.setdefault("CKPTFIX_BATTERY_WORKER", "1")


def _run_chunk(task: tuple[int, list[tuple[str, int]]]) -> dict[str, Any]:
    from ckptfix.errors import FormatError

    index, todo = task
    f = _FILES[index]
    data = f.data
    out: dict[str, Any] = {"tried": 0, "clean": 0, "failures": [], "outcomes": Counter(), "kind": f.kind}
    for family, k in todo:
        mutated, what = mutate.apply(data, family, k, SEED)
        before = _peak_mb()
        started = time.monotonic()
        signal.setitimer(signal.ITIMER_REAL, TIMEOUT_S)
        failure: str | None = None
        try:
            f.read(mutated, str(f.path))
            out["outcomes"]["parsed"] += 1
        except FormatError:  # UnsupportedVersion is one
            out["outcomes"]["FormatError"] += 1
        except Hang:
            failure = f"hang: no answer in {TIMEOUT_S:.0f} s"
        except BaseException as exc:  # noqa: BLE001 - counting every other exception is the point
            tb = traceback.extract_tb(exc.__traceback__)
            where = next((f"{fr.filename.split('ckptfix/')[-1]}:{fr.lineno}" for fr in reversed(tb)), "?")
            failure = f"{type(exc).__name__}: {str(exc)[:160]} (at {where})"
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        grown = _peak_mb() - before
        if failure is None and grown > MEMORY_BOUND_MB:
            failure = f"memory: peak RSS grew {grown:.0f} MB"
        out["tried"] += 1
        if failure is None:
            out["clean"] += 1
        else:
            out["failures"].append(
                {
                    "kind": f.kind,
                    "file": str(f.path.relative_to(corpus.ROOT) if f.path.is_relative_to(corpus.ROOT) else f.path),
                    "mutation": f"{family}:{k}",
                    "what": what,
                    "failure": failure,
                    "seconds": round(time.monotonic() - started, 3),
                }
            )
    out["peak_mb"] = _peak_mb()
    return out


def plan_mutations(files: list[corpus.CorpusFile], limit: int | None, per_family: int) -> list[tuple[int, str, int]]:
    todo = [(i, fam, k) for i, f in enumerate(files) for fam, k in mutate.plan(f.data, per_family)]
    if limit is not None and limit < len(todo):
        step = len(todo) / limit
        todo = [todo[int(j * step)] for j in range(limit)]
    return todo


def run_formats(limit: int | None, per_family: int, jobs: int, chunk: int = 400) -> Section:
    files = corpus.collect()
    section = Section("parsers: format functions")
    baseline_bad = [  # the error names the file by its absolute path: the report names no machine path
        f"{Path(p).relative_to(corpus.ROOT)}: {why.replace(str(corpus.ROOT), '<repo>')}"
        for p, why in corpus.REJECTED.items()
    ]
    todo = plan_mutations(files, limit, per_family)
    by_file: dict[int, list[tuple[str, int]]] = {}
    for i, fam, k in todo:
        by_file.setdefault(i, []).append((fam, k))
    tasks = [(i, ms[j : j + chunk]) for i, ms in sorted(by_file.items()) for j in range(0, len(ms), chunk)]
    started = time.monotonic()
    kinds: Counter[str] = Counter()
    outcomes: Counter[str] = Counter()
    peak = 0.0

    def take(r: dict[str, Any]) -> None:
        nonlocal peak
        section.tried += r["tried"]
        section.clean += r["clean"]
        section.failures += r["failures"]
        kinds[r["kind"]] += r["tried"]
        outcomes.update(r["outcomes"])
        peak = max(peak, r["peak_mb"])

    if jobs <= 1:  # in this process (the test suite's sample)
        previous = signal.signal(signal.SIGALRM, _alarm)
        _FILES[:] = files
        try:
            for t in tasks:
                take(_run_chunk(t))
        finally:
            signal.signal(signal.SIGALRM, previous)
    else:
        ctx = mp.get_context("forkserver")
        with ctx.Pool(jobs, initializer=_init, maxtasksperchild=50) as pool:
            pending = [pool.apply_async(_run_chunk, (t,)) for t in tasks]
            for t, res in zip(tasks, pending, strict=True):
                try:
                    take(res.get(timeout=TIMEOUT_S * len(t[1]) + 120))
                except mp.TimeoutError:
                    section.add_failures(len(t[1]), [{"failure": f"chunk of {files[t[0]].path} did not finish"}])
    section.figures = {
        "files": len(files),
        "formats": dict(sorted(kinds.items())),
        "outcomes": dict(outcomes),
        "worker_peak_rss_mb": round(peak, 1),
        "seconds": round(time.monotonic() - started, 1),
        "corpus_files_not_clean": baseline_bad,
    }
    if baseline_bad:
        section.notes.append(
            f"{len(baseline_bad)} file(s) left out: they do not read as the format their path suggests"
        )
    return section


# ---------------------------------------------------------------- read commands (in-process CLI)

COMMANDS: tuple[tuple[str, ...], ...] = (
    ("inspect", "{ckpt}"),
    ("audit", "{ckpt}", "-q"),
    ("audit", "{ckpt}", "-q", "-f", "json", "--deep"),
    ("state", "ls", "{ckpt}", "--verify"),
    ("state", "read", "{ckpt}", "--out", "{out}"),
    ("offsets", "export", "{ckpt}"),
    ("repair", "{ckpt}"),
)


def _checkpoint_of(path: Path) -> tuple[Path, Path, Path | None] | None:
    """(tree root, checkpoint, sink) for a corpus file that lies in a whole checkpoint."""
    parts = path.parts
    if "ckpt" in parts:
        i = parts.index("ckpt")
        root = Path(*parts[:i])
        sink = root / "output"
        return root, root / "ckpt", sink if (sink / "_spark_metadata").is_dir() else None
    if "_spark_metadata" in parts:
        i = parts.index("_spark_metadata")
        root = Path(*parts[: i - 1])
        if (root / "ckpt").is_dir():
            return root, root / "ckpt", root / parts[i - 1]
    sample = corpus.ROOT / "samples" / "async-sparse"
    if path.is_relative_to(sample):
        return sample.parent, sample, None
    return None


def _cli_task(task: tuple[str, str, int]) -> dict[str, Any]:
    from typer.testing import CliRunner

    from ckptfix.cli.main import app

    file_s, family, k = task
    path = Path(file_s)
    found = _checkpoint_of(path)
    assert found is not None
    root, ckpt, sink = found
    work = Path(tempfile.mkdtemp(prefix="battery-cli-"))
    try:
        shutil.copytree(root, work / "t", symlinks=True, ignore=shutil.ignore_patterns("input"))
        rel = path.relative_to(root)
        wckpt = work / "t" / ckpt.relative_to(root)
        mutated, what = mutate.apply(path.read_bytes(), family, k, SEED)
        (work / "t" / rel).write_bytes(mutated)
        out: dict[str, Any] = {"tried": 0, "clean": 0, "failures": [], "exits": Counter()}
        runner = CliRunner()
        signal.signal(signal.SIGALRM, _alarm)
        for cmd in COMMANDS:
            args = [a.format(ckpt=wckpt, out=work / "rows.jsonl") for a in cmd]
            if sink is not None and cmd[0] == "audit":
                args += ["--sink", str(work / "t" / sink.relative_to(root))]
            failure = None
            signal.setitimer(signal.ITIMER_REAL, CLI_TIMEOUT_S)
            try:
                res = runner.invoke(app, args, env={"CKPTFIX_DEBUG": ""})
                text = (res.stdout or "") + (res.stderr or "")
                out["exits"][res.exit_code] += 1
                if isinstance(res.exception, Hang):
                    failure = f"hang: no answer in {CLI_TIMEOUT_S:.0f} s"
                elif res.exit_code not in (0, 1, 2):
                    failure = f"exit {res.exit_code}: {text.strip().splitlines()[-1:] if text.strip() else ''}"
                elif "Traceback (most recent call last)" in text:
                    failure = "a traceback in the output"
                elif res.exit_code == 2 and not (res.stderr or res.stdout).strip():
                    failure = "exit 2 without a message"
            except Hang:
                failure = f"hang: no answer in {CLI_TIMEOUT_S:.0f} s"
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            out["tried"] += 1
            if failure is None:
                out["clean"] += 1
            else:
                out["failures"].append(
                    {
                        "command": " ".join(a for a in cmd if not a.startswith("{")),
                        "file": str(rel),
                        "mutation": f"{family}:{k}",
                        "what": what,
                        "failure": failure[:300],
                    }
                )
        out["peak_mb"] = _peak_mb()
        return out
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run_cli(samples: int, jobs: int, per_family: int) -> Section:
    files = corpus.collect()
    section = Section("parsers: read commands")
    usable = [(i, f) for i, f in enumerate(files) if _checkpoint_of(f.path) is not None]
    todo = [
        (str(f.path), fam, k)
        for i, f in usable
        for fam, k in mutate.plan(f.data, per_family)
        if fam != "truncate" or k in (0, 1, len(f.data) // 2, len(f.data) - 1)
    ]
    if samples < len(todo):
        step = len(todo) / samples
        todo = [todo[int(j * step)] for j in range(samples)]
    started = time.monotonic()
    exits: Counter[int] = Counter()
    peak = 0.0
    ctx = mp.get_context("forkserver")
    with ctx.Pool(jobs, maxtasksperchild=20) as pool:
        pending = [pool.apply_async(_cli_task, (t,)) for t in todo]
        for t, res in zip(todo, pending, strict=True):
            try:
                r = res.get(timeout=CLI_TIMEOUT_S * len(COMMANDS) + 120)
            except mp.TimeoutError:
                section.add_failures(len(COMMANDS), [{"failure": f"{t}: the commands did not finish"}])
                continue
            section.tried += r["tried"]
            section.clean += r["clean"]
            section.failures += r["failures"]
            exits.update(r["exits"])
            peak = max(peak, r["peak_mb"])
    section.figures = {
        "mutated_checkpoints": len(todo),
        "commands": [" ".join(a for a in c if not a.startswith("{")) for c in COMMANDS],
        "exit_codes": {str(k): v for k, v in sorted(exits.items())},
        "worker_peak_rss_mb": round(peak, 1),
        "seconds": round(time.monotonic() - started, 1),
    }
    return section
