"""Crash: the process dies like kill -9 at every durable write of every plan kind, then the documented
recovery runs (`ckptfix apply --resume CKPT`, `ckptfix undo CKPT`, or the same `migrate relocate --apply`
again). Clean = the tree is sha256-identical to the finished result (resume) and to the original (undo), with
no stray file (hidden files and ckptfix's temp files count; only ckptfix's own `_ckptfix/` store is left out).

The plans and their real checkpoints are the suite's (tests/repair/test_crash_every_plan.py: PLANS); the
engine's own test hook (CKPTFIX_TEST_CRASH_AFTER) kills the process with SIGKILL after its n-th durable write.
Relocation has no engine run: its child is killed with SIGKILL from its progress observer after each file."""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.battery import corpus
from bench.battery.report import Section

PY = sys.executable
CHILD_TIMEOUT = 180


def _cli(args: list[str], env: dict[str, str] | None = None) -> tuple[int, str]:
    """A documented command, in-process (the recovery a user runs)."""
    from typer.testing import CliRunner

    from ckptfix.cli.main import app

    res = CliRunner().invoke(app, args, env=env)
    return res.exit_code, (res.stdout or "") + (res.stderr or "")


def _apply_child(plan_file: Path, n: int, extra: list[str], env: dict[str, str]) -> tuple[int, str]:
    from ckptfix.repair import engine

    proc = subprocess.run(
        [PY, "-m", "ckptfix", "apply", str(plan_file), "--force", *extra],
        env={**os.environ, **env, engine.CRASH_ENV: str(n)},
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT,
        cwd=corpus.ROOT,
    )
    return proc.returncode, proc.stderr[-400:]


def _undo_child(ckpt: str, n: int, extra: list[str], env: dict[str, str]) -> tuple[int, str]:
    from ckptfix.repair import engine

    proc = subprocess.run(
        [PY, "-m", "ckptfix", "undo", ckpt, "--force", *extra],
        env={**os.environ, **env, engine.CRASH_ENV: str(n)},
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT,
        cwd=corpus.ROOT,
    )
    return proc.returncode, proc.stderr[-400:]


class Target:
    """Where a crash case runs: a local directory or a prefix in moto's S3."""

    def __init__(self, s3: Any | None = None) -> None:
        self.s3 = s3  # bench.battery.s3.Moto or None

    @property
    def name(self) -> str:
        return "s3" if self.s3 else "local"

    def extra(self) -> list[str]:
        if not self.s3:
            return []
        return ["--endpoint-url", self.s3.endpoint, "-o", "use_listings_cache=false", "-o", "skip_instance_cache=true"]

    def env(self) -> dict[str, str]:
        return self.s3.env() if self.s3 else {}

    def place(self, pristine: Path, work: Path, key: str) -> str:
        if self.s3:
            return self.s3.upload(pristine, key)
        shutil.copytree(pristine, work, symlinks=True)
        return str(work)

    def tree(self, url: str) -> dict[str, str]:
        if self.s3:
            return self.s3.tree(url)
        from tests.support.trees import tree

        return tree(Path(url))

    def copy(self, url: str, key: str, work: Path) -> str:
        if self.s3:
            return self.s3.copy(url, key)
        shutil.copytree(url, work, symlinks=True)
        return str(work)

    def swap(self, a: str, b: str) -> None:
        """Put what is at ``b`` at ``a`` (the crashed state kept aside, back where its plan names it)."""
        if self.s3:
            self.s3.move(b, a)
        else:
            shutil.rmtree(a)
            os.replace(b, a)


def plans() -> dict[str, tuple[Callable[[Path], Path], Callable[[Path], Any]]]:
    from tests.repair.test_crash_every_plan import PLANS

    return dict(PLANS)


def _diff(got: dict[str, str], want: dict[str, str]) -> str:
    extra = sorted(set(got) - set(want))
    missing = sorted(set(want) - set(got))
    changed = sorted(p for p in set(got) & set(want) if got[p] != want[p])
    return f"stray {extra[:3]}, missing {missing[:3]}, other bytes {changed[:3]}"


def crash_plan(section: Section, name: str, target: Target, tmp: Path, step: int, max_points: int | None) -> None:
    """Every crash point of one plan (every ``step``-th), each recovered by resume and, on a copy, by undo."""
    from ckptfix.repair import engine
    from ckptfix.storage import Location

    setup, make_plan = plans()[name]
    pristine = setup(tmp / "pristine")
    plan = make_plan(pristine)
    opts = target.s3.options() if target.s3 else None
    ref_url = target.place(pristine, tmp / "reference", f"{name}/reference")
    before = target.tree(ref_url)
    ref_loc = Location(ref_url, opts)
    engine.apply(
        dataclasses.replace(plan, checkpoint=ref_loc.url), ref_loc, Location(ref_url + "/_ckptfix", opts), force=True
    )
    after = target.tree(ref_url)
    n, points = 1, 0
    while max_points is None or points < max_points:
        url = target.place(pristine, tmp / f"c{n}", f"{name}/c{n}")
        loc = Location(url, opts)
        plan_file = tmp / f"plan-{n}.json"
        plan_file.write_text(dataclasses.replace(plan, checkpoint=loc.url).dumps())
        code, err = _apply_child(plan_file, n, target.extra(), target.env())
        case = {"plan": name, "target": target.name, "crash_after_write": n}
        if code == 0:
            got = target.tree(url)
            section.case(got == after, {**case, "failure": f"uninterrupted apply differs: {_diff(got, after)}"})
            break
        if code != -signal.SIGKILL:
            section.case(False, {**case, "failure": f"apply exited {code}, not killed: {err}"})
            break
        points += 1
        kept = target.copy(url, f"{name}/k{n}", tmp / f"k{n}")
        rc, out = _cli(["apply", "--resume", url, *target.extra()], target.env())
        got = target.tree(url)
        ok = rc == 0 and got == after
        section.case(
            ok, {**case, "recovery": "apply --resume", "failure": f"exit {rc}: {out[-300:]} / {_diff(got, after)}"}
        )
        target.swap(url, kept)  # the crashed state, where its plan names it
        rc, out = _cli(["undo", url, "--force", *target.extra()], target.env())
        got = target.tree(url)
        ok = rc == 0 and got == before
        section.case(ok, {**case, "recovery": "undo", "failure": f"exit {rc}: {out[-300:]} / {_diff(got, before)}"})
        n += step


def crash_undo(section: Section, name: str, target: Target, tmp: Path, max_points: int | None, step: int = 1) -> None:
    """Kill `undo` itself after each of its writes; `undo` again must restore the original."""
    from ckptfix.repair import engine
    from ckptfix.storage import Location

    setup, make_plan = plans()[name]
    pristine = setup(tmp / "pristine")
    plan = make_plan(pristine)
    opts = target.s3.options() if target.s3 else None
    before = None
    n = 1
    points = 0
    while max_points is None or points < max_points:
        points += 1
        url = target.place(pristine, tmp / f"u{n}", f"{name}/u{n}")
        loc = Location(url, opts)
        before = before or target.tree(url)
        engine.apply(dataclasses.replace(plan, checkpoint=loc.url), loc, Location(url + "/_ckptfix", opts), force=True)
        code, err = _undo_child(url, n, target.extra(), target.env())
        case = {"plan": f"undo of {name}", "target": target.name, "crash_after_write": n}
        if code == 0:
            got = target.tree(url)
            section.case(got == before, {**case, "failure": f"undo differs: {_diff(got, before)}"})
            break
        if code != -signal.SIGKILL:
            section.case(False, {**case, "failure": f"undo exited {code}, not killed: {err}"})
            break
        rc, out = _cli(["undo", url, "--force", *target.extra()], target.env())
        got = target.tree(url)
        # killed after its last write (the journal's "undone"): the undo was finished, and undo again says so
        finished = rc == 2 and "is undone" in out
        section.case(
            (rc == 0 or finished) and got == before,
            {**case, "recovery": "undo", "failure": f"exit {rc}: {out[-300:]} / {_diff(got, before)}"},
        )
        n += step


RELOCATE_CHILD = r"""
import os, signal, sys
from ckptfix.migrate.relocate import relocate
from ckptfix.progress import NullProgress
k = int(sys.argv[3])
class Kill(NullProgress):
    done = 0
    def stage(self, name, total=None):
        if k == 0:
            os.kill(os.getpid(), signal.SIGKILL)
    def advance(self, n=1):
        Kill.done += n
        if Kill.done >= k:
            os.kill(os.getpid(), signal.SIGKILL)
opts = {"client_kwargs": {"endpoint_url": sys.argv[4]}} if len(sys.argv) > 4 else None
relocate(sys.argv[1], sys.argv[2], apply=True, dest_options=opts, progress=Kill())
"""


def crash_relocate(section: Section, target: Target, tmp: Path, step: int, max_points: int | None) -> None:
    """SIGKILL after the marker and after each copied file; the same command again must finish the copy."""
    source = corpus.extracted("matrix/4.3.0/agg_rocksdb_cl") / "ckpt"
    opts = target.s3.options() if target.s3 else None
    extra = target.extra()

    def dest_for(key: str) -> str:
        return f"{target.s3.bucket_url}/relocate/{key}" if target.s3 else str(tmp / key)

    ref = dest_for("reference")
    from ckptfix.migrate.relocate import relocate

    relocate(str(source), ref, apply=True, dest_options=opts)
    want = target.tree(ref)
    k, points = 0, 0
    while max_points is None or points < max_points:
        dest = dest_for(f"r{k}")
        argv = [PY, "-c", RELOCATE_CHILD, str(source), dest, str(k), *([target.s3.endpoint] if target.s3 else [])]
        proc = subprocess.run(
            argv, env={**os.environ, **target.env()}, capture_output=True, text=True, timeout=CHILD_TIMEOUT
        )
        case = {"plan": "migrate relocate", "target": target.name, "killed_after_files": k}
        if proc.returncode == 0:
            got = target.tree(dest)
            section.case(got == want, {**case, "failure": f"uninterrupted relocate differs: {_diff(got, want)}"})
            break
        if proc.returncode != -9:
            section.case(False, {**case, "failure": f"exit {proc.returncode}: {proc.stderr[-300:]}"})
            break
        points += 1
        rc, out = _cli(["migrate", "relocate", str(source), dest, "--apply", *extra], target.env())
        got = target.tree(dest)
        section.case(
            rc == 0 and got == want,
            {
                **case,
                "recovery": "migrate relocate --apply (again)",
                "failure": f"exit {rc}: {out[-300:]} / {_diff(got, want)}",
            },
        )
        k += step


#: plans run on S3 too (one of every kind; the local run covers every plan)
S3_PLANS = (
    "async_gap",
    "rollback_to_3",
    "state_rebuild_rocksdb",
    "migrate_provider_to_hdfs",
    "metadata_truncated",
    "state_delete_rocksdb_cl",
    "state_put_hdfs",
    "state_repartition_join",
)
#: crash points taken from big plans (every write is covered by the smaller ones)
STEPS = {
    "async_gap_truncate": 3,
    "migrate_provider_to_rocksdb": 5,
    "migrate_provider_to_hdfs": 5,
    "state_repartition_join": 3,
}


#: the kill sweeps that need live Spark are tests of the suite (which samples them); here every point runs
SPARK_SWEEPS = {
    "async-off": (
        "tests/spark_async/test_async_off_crash_live.py",
        {"CKPTFIX_ASYNC_CRASH_POINTS": ",".join(map(str, range(1, 10)))},
    ),
    "rollback --with-sink": (
        "tests/repair/test_rollback_with_sink.py::test_a_kill_at_any_write_of_either_run_is_recovered",
        {"CKPTFIX_CRASH_STEP": "1"},
    ),
}


def crash_spark(section: Section, tmp: Path) -> None:
    """The sweeps of :data:`SPARK_SWEEPS` through pytest (they need the suite's Spark session and fixtures); one
    case per test case pytest reports."""
    import xml.etree.ElementTree as ET

    for label, (target, env) in SPARK_SWEEPS.items():
        report = tmp / f"{label.split()[0]}.xml"
        proc = subprocess.run(
            [PY, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider", target, f"--junitxml={report}"],
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=3600,
            cwd=corpus.ROOT,
        )
        cases = ET.parse(report).getroot().iter("testcase") if report.exists() else iter(())
        seen = 0
        for case in cases:
            seen += 1
            bad = case.find("failure") if case.find("failure") is not None else case.find("error")
            section.case(
                bad is None,
                {"plan": label, "case": case.get("name"), "failure": (bad.get("message") or "")[:300] if bad else ""},
            )
        if seen == 0:
            section.case(False, {"plan": label, "failure": f"pytest exit {proc.returncode}: {proc.stdout[-300:]}"})


def run(quick: bool, s3: Any | None) -> Section:
    section = Section("crash: kill -9 at every write")
    started = time.monotonic()
    names = sorted(plans())
    with tempfile.TemporaryDirectory(prefix="battery-crash-") as d:
        tmp = Path(d)

        def sub(label: str) -> Path:
            p = tmp / label
            p.mkdir()
            return p

        if quick:
            crash_plan(section, "async_gap", Target(), sub("async_gap"), 1, 2)
        else:
            for name in names:
                crash_plan(section, name, Target(), sub(name), STEPS.get(name, 1), None)
            crash_undo(section, "rollback_to_3", Target(), sub("undo-rollback"), None)
            crash_undo(section, "state_rebuild_rocksdb", Target(), sub("undo-rebuild"), None)
            crash_relocate(section, Target(), sub("relocate"), 3, None)
            crash_spark(section, sub("spark"))
            if s3 is not None:
                for name in S3_PLANS:  # every 3rd write: moto takes ~20 s a crash point here
                    crash_plan(section, name, Target(s3), sub(f"s3-{name}"), STEPS.get(name, 1) * 3, None)
                crash_undo(section, "rollback_to_3", Target(s3), sub("s3-undo"), None, 9)
                crash_relocate(section, Target(s3), sub("s3-relocate"), 8, None)
    section.figures = {
        "seconds": round(time.monotonic() - started, 1),
        "plans_local": names if not quick else ["async_gap"],
        "spark_sweeps": list(SPARK_SWEEPS) if not quick else [],
        "plans_s3": list(S3_PLANS) if (s3 is not None and not quick) else [],
    }
    return section
