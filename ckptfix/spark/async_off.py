"""Turn asynchronous progress tracking off the documented way, with real PySpark.

The sequence (Spark's docs; verified on 3.5.9 and 4.3.0, shared/reference spark-behaviour-observed.md §4 C):

1. ``preflight``: load the user's query builder, build the writer (nothing is started), audit the checkpoint,
   refuse what Spark would refuse (trigger, sink, stateful query: Spark's own reason), a checkpoint that belongs
   to another query, a checkpoint that looks alive;
2. ``run``: start the query with ``asyncProgressTrackingEnabled=true`` and
   ``asyncProgressTrackingCheckpointIntervalMs=0`` until ``min_batches`` NEW batches are in ``commits/`` (every
   batch then persists its offsets and commit), stop. No new input means no batch: after ``timeout`` seconds the
   query is stopped and the offline repair (``ckptfix repair``) is offered instead;
3. ``check``: ckptfix's own audit: no LOG-ASYNC-GAP, latest commit = latest offset, Spark restarts;
4. ``verify`` (optional): restart with tracking off until one batch commits (or ``timeout``), stop.

Query-module contract: ``MODULE:FUNCTION`` names an importable module (``pkg.mod:build``) or a file
(``path/to/job.py:build``); ``FUNCTION(spark)`` returns the UNSTARTED ``DataStreamWriter`` of the query as it
ran (same sources, sink and trigger) without ``checkpointLocation``. It is called once per Spark run.

Progress goes to ``progress`` (:class:`ckptfix.progress.Progress`): each event is a step whose data holds the
step name, its kind and details; the library never prints. The run is recorded in the repair
engine's journal (``<backup>/runs/<run-id>/``, by default ``<ckpt>/_ckptfix``), never among Spark's files: a plan
with ``driver="async-off"`` and no file actions, one event per step, and the spans in which Spark ran the query
(so that the idle guard of later commands knows those writes are ckptfix's). An interrupted run resumes from the
first step not done; ``ckptfix history`` lists it beside repairs; the engine takes the same lock.

The checks of step 1 that only read the writer (Spark's refusals, another query's checkpoint) are in
:mod:`ckptfix.spark.async_rules`.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from typing import Any

from ckptfix.errors import AsyncRefused, CkptfixError, ForeignCheckpoint, Interrupted, UsageError
from ckptfix.formats.metadata import parse_query_id
from ckptfix.progress import Progress, ProgressLike, progress_of
from ckptfix.repair.engine import SPARK_START, SPARK_STOP
from ckptfix.spark.async_rules import foreign_checkpoint, inspect_writer, refusals, same_location
from ckptfix.spark.usercode import QueryModuleError, build_writer, first_line, load_function

#: the option that names the query module (in every message about it)
OPTION = "--query"
STEPS = ("preflight", "run", "check", "verify")
#: the runs this driver records in the repair engine's journal carry ``Plan.driver == DRIVER``
DRIVER = "async-off"
ASYNC_ENABLED = "asyncProgressTrackingEnabled"
ASYNC_INTERVAL = "asyncProgressTrackingCheckpointIntervalMs"
#: test hook: raise Interrupted right after this step is journaled as done
STOP_AFTER_ENV = "CKPTFIX_TEST_ASYNC_OFF_STOP_AFTER"

# ------------------------------------------------------------------------------------------- events


@dataclass(frozen=True)
class Event:
    step: str
    kind: str  # start | info | batch | done | fail | skip | warn
    message: str
    data: dict[str, Any] = field(default_factory=dict)
    at: float = field(default_factory=time.time)


@dataclass
class Outcome:
    """What happened (or, in a dry run, what would happen)."""

    status: str  # planned | done | no-data | too-few-batches | check-failed | verify-failed
    checkpoint: str
    query: str
    run_id: str | None = None
    applied: bool = False
    query_id: str | None = None
    baseline: dict[str, int | None] = field(default_factory=dict)
    new_batches: list[int] = field(default_factory=list)
    steps: dict[str, str] = field(default_factory=dict)
    findings_before: list[dict[str, str]] = field(default_factory=list)
    findings_after: list[dict[str, str]] = field(default_factory=list)
    verified: bool | None = None
    offline: str | None = None
    events: list[Event] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status in ("planned", "done")

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["ok"] = self.ok
        return out


# ------------------------------------------------------------------------------------ query module


def load_builder(spec: str) -> Callable[[Any], Any]:
    """``MODULE:FUNCTION`` or ``path/to/file.py:FUNCTION`` -> the callable (errors name ``--query``)."""
    return load_function(spec, OPTION)


# ------------------------------------------------------------------------------------------- the run


@dataclass
class Options:
    apply: bool = False
    verify: bool = False
    min_batches: int = 2
    timeout: float = 300.0
    resume: bool = False
    query_id: str | None = None
    master: str | None = None
    confs: dict[str, str] = field(default_factory=dict)
    backup_dir: str | None = None
    force: bool = False
    idle_seconds: float = 120.0
    storage_options: dict[str, Any] = field(default_factory=dict)
    poll_seconds: float = 0.5


@dataclass
class _Ctx:
    """What the steps share. The run's journal is the repair engine's (``runs/<id>/`` in the backup location):
    a plan with ``driver="async-off"`` and no file actions, then one ``step`` event per step status and
    ``spark-start``/``spark-stop`` around each Spark run (so the idle guard knows those writes are ckptfix's)."""

    url: str
    spec: str
    opts: Options
    loc: Any  # Location of the checkpoint
    runs: Any  # repair.engine.Runs of the backup location
    outcome: Outcome
    progress: Progress
    run_id: str | None = None
    done: set[str] = field(default_factory=set)
    spark: Any = None
    fn: Callable[[Any], Any] | None = None
    #: this process ran the query already (its own fresh writes are not another writer's)
    ran_query: bool = False

    def emit(self, step: str, kind: str, message: str, **data: Any) -> None:
        ev = Event(step, kind, message, data)
        self.outcome.events.append(ev)
        self.progress.step(message, step=step, kind=kind, **data)

    def journal(self, event: str, **data: Any) -> None:
        if self.run_id is not None:
            self.runs.journal(self.run_id, event, **data)

    def step(self, step: str, status: str, **data: Any) -> None:
        self.outcome.steps[step] = status
        if status == "done":
            self.done.add(step)
        self.journal("step", step=step, status=status, **data)
        if status == "done" and os.environ.get(STOP_AFTER_ENV) == step:
            raise Interrupted(f"stopped after step {step} ({STOP_AFTER_ENV}); continue with --resume")

    def finish(self, status: str) -> Outcome:
        self.outcome.status = status
        self.journal("complete", outcome=status)
        return self.outcome

    def checkpoint(self) -> Any:
        from ckptfix.checkpoint import Checkpoint

        return Checkpoint.open(self.url, self.opts.storage_options)

    def committed(self) -> list[int]:
        from ckptfix.checkpoint import index_log

        try:
            entries = self.loc.list_tree("commits")
        except (FileNotFoundError, NotADirectoryError):
            return []
        return index_log("commits", entries).listed_ids

    def writer(self) -> Any:
        assert self.fn is not None
        return build_writer(self.fn, self.spark, self.spec, OPTION)

    def target(self) -> str:
        from ckptfix.audit.targets import NEWEST, SUPPORTED

        label = ".".join(str(self.spark.version).split(".")[:2]) if self.spark is not None else NEWEST
        return label if label in SUPPORTED else NEWEST

    def audit(self) -> Any:
        from ckptfix.audit import audit

        return audit(self.url, self.target(), storage_options=self.opts.storage_options)

    def check_idle(self) -> None:
        if self.opts.force:
            return
        from ckptfix.repair.engine import check_recent_writes, own_writes

        check_recent_writes(self.loc, self.loc.list_tree(), self.opts.idle_seconds, own_writes(self.runs.loc))
        # a query of this session on the same checkpoint (the tree check above covers other processes)
        for q in self.spark.streams.active:
            try:
                root = str(q._jsq.streamingQuery().resolvedCheckpointRoot())
            except Exception:
                continue
            if same_location(root, self.url):
                raise _live(f"{self.url}: expected no running query on it, found query {q.id} in this session")


# -- the journal (the engine's runs) ---------------------------------------------------------------------------
def _interrupted(runs: Any) -> str | None:
    """The newest async-off run that never finished."""
    for run_id in reversed(runs.run_ids()):
        try:
            if runs.plan_of(run_id).driver == DRIVER and runs.info(run_id).status == "incomplete":
                return str(run_id)
        except CkptfixError:
            continue
    return None


def _reopen(ctx: _Ctx, run_id: str) -> None:
    """Continue ``run_id``: what its plan and journal say was found and done. A run killed right after its plan
    was written (no ``start`` event yet) resumes like a new one, with the baseline its plan holds."""
    o = ctx.outcome
    plan = ctx.runs.plan_of(run_id)
    events = ctx.runs.events(run_id)
    start: dict[str, Any] = next((e for e in events if e["event"] == "start"), {})
    if start and start.get("query") != ctx.spec:
        raise UsageError(f"--resume: expected --query {start.get('query')} as in run {run_id}, found {ctx.spec}")
    ctx.run_id = o.run_id = run_id
    o.applied = True
    o.baseline = {"latest_offset": plan.latest_offset, "latest_commit": plan.latest_commit}
    o.query_id = plan.query_id
    o.findings_before = list(start.get("findings_before") or [])
    for e in events:
        if e["event"] == "step" and e.get("status") == "done":
            ctx.done.add(str(e["step"]))
            o.steps[str(e["step"])] = "done"
            if e["step"] == "run":
                o.new_batches = list(e.get("new_batches") or [])


def _open(ctx: _Ctx) -> None:
    """A new run in the engine's journal, holding what preflight found (a resumed run starts from it)."""
    from ckptfix.repair.plan import Plan

    o = ctx.outcome
    plan = Plan(
        checkpoint=ctx.url,
        query_id=o.query_id,
        target_spark=ctx.target(),
        fix=f"async-off --query {ctx.spec}: run the query with asynchronous progress tracking checkpointing "
        "every batch, then audit",
        actions=(),
        latest_offset=o.baseline.get("latest_offset"),
        latest_commit=o.baseline.get("latest_commit"),
        created_at=_now(),
        driver=DRIVER,
    )
    ctx.run_id = o.run_id = ctx.runs.new_run(plan)
    ctx.journal("start", query=ctx.spec, findings_before=o.findings_before)


def _now() -> str:

    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


# -- the steps -------------------------------------------------------------------------------------------------
def preflight(ctx: _Ctx) -> None:
    """Step 1: load the query, refuse what Spark or the checkpoint would refuse, audit (nothing is started)."""
    o = ctx.outcome
    ctx.emit("preflight", "start", f"checking {ctx.url}")
    ckpt = ctx.checkpoint()
    if ckpt.metadata_rel is None:
        raise ForeignCheckpoint(
            f"{ckpt.display('metadata')}: expected the query's metadata file (written at its first start), found none"
        )
    meta_id = ckpt.query_metadata().id
    if o.query_id is not None and o.query_id != meta_id:
        raise ForeignCheckpoint(
            f"{ckpt.display('metadata')}: expected query id {o.query_id} (journal), found {meta_id}"
        )
    o.query_id = meta_id
    if not o.baseline:
        o.baseline = {"latest_offset": ckpt.offsets.latest, "latest_commit": ckpt.commits.latest}
    from ckptfix.spark import session

    ctx.fn = load_builder(ctx.spec)
    ctx.spark = session(ctx.opts.master, "ckptfix-async-off", ctx.opts.confs)
    info = inspect_writer(ctx.writer())
    ctx.emit(
        "preflight",
        "info",
        f"query {meta_id}: trigger {info.trigger}, sink {info.sink}, "
        f"{len(info.sources)} source(s) ({', '.join(s.kind for s in info.sources) or 'none found'})",
        trigger=info.trigger,
        sink=info.sink,
        sources=[asdict(s) for s in info.sources],
    )
    if info.checkpoint is not None and not same_location(info.checkpoint, ctx.url):
        raise QueryModuleError(
            f"{OPTION} {ctx.spec}: the writer sets checkpointLocation {info.checkpoint}, expected none or {ctx.url}"
        )
    reasons = refusals(info, str(ctx.spark.version))
    if reasons:
        raise AsyncRefused(
            f"Spark {ctx.spark.version} refuses asynchronous progress tracking for this query: " + "; ".join(reasons)
        )
    why = foreign_checkpoint(ckpt, info, ctx.opts.query_id)
    if why:
        raise ForeignCheckpoint("this checkpoint belongs to another query: " + "; ".join(why))
    if "run" not in ctx.done:
        ctx.check_idle()
    if not o.findings_before:
        _audit_before(ctx)
    o.offline = _offline_hint(ctx)
    plan = [
        f"run the query with {ASYNC_ENABLED}=true, {ASYNC_INTERVAL}=0 until {ctx.opts.min_batches} new batch(es) "
        f"commit after batch {o.baseline.get('latest_commit')} (at most {ctx.opts.timeout:.0f} s), then stop",
        "check with ckptfix's audit: no LOG-ASYNC-GAP, latest commit = latest offset",
    ]
    if ctx.opts.verify:
        plan.append(f"restart with {ASYNC_ENABLED}=false until one batch commits (at most {ctx.opts.timeout:.0f} s)")
    ctx.emit("preflight", "done", "preflight passed", steps=plan)
    o.steps.setdefault("preflight", "done")


def _audit_before(ctx: _Ctx) -> None:
    report = ctx.audit()
    ctx.outcome.findings_before = [
        {"rule": f.rule_id, "severity": f.severity, "message": f.message} for f in report.findings
    ]
    blockers = [f for f in report.findings if f.spark_error is not None and f.rule_id != "LOG-ASYNC-GAP"]
    if blockers and not ctx.opts.force:
        b = blockers[0]
        raise AsyncRefused(
            f"the audit finds {b.rule_id} ({b.message}), which the asynchronous restart does not fix: "
            f"repair it first (`ckptfix repair {ctx.url}`), or --force"
        )
    gap = [f for f in report.findings if f.rule_id == "LOG-ASYNC-GAP"]
    ctx.emit(
        "preflight",
        "info",
        (f"audit: {gap[0].message}" if gap else f"audit: {report.verdict.headline} (no LOG-ASYNC-GAP)"),
        verdict=report.verdict.headline,
    )


def _offline_hint(ctx: _Ctx) -> str:
    gap = [f for f in ctx.outcome.findings_before if f["rule"] == "LOG-ASYNC-GAP"]
    base = f"ckptfix repair {ctx.url}"
    if gap:
        return f"`{base}` (offline, no new data needed) fixes what the audit found: {gap[0]['message']}"
    return f"`{base}` shows what an offline repair would change"


def _spark_run(ctx: _Ctx, writer: Any, step: str, until: Callable[[], bool]) -> tuple[str | None, str | None]:
    """Start ``writer`` and poll until ``until()`` (or the query ends, or the timeout), then stop it between
    batches. Journaled as ckptfix's own Spark run. Returns (the query's error, what stopping interrupted)."""
    ctx.ran_query = True
    ctx.journal(SPARK_START, step=step)
    try:
        query = writer.start()
    except Exception:
        ctx.journal(SPARK_STOP, step=step)
        raise
    deadline = time.monotonic() + ctx.opts.timeout
    error: str | None = None
    try:
        while not until():
            if not query.isActive:
                qexc = query.exception()
                error = first_line(qexc) if qexc is not None else "the query stopped by itself"
                break
            if time.monotonic() >= deadline:
                break
            time.sleep(ctx.opts.poll_seconds)
    finally:
        late = _stop_between_batches(query)
        ctx.journal(SPARK_STOP, step=step)
    return error, late


def run_with_tracking(ctx: _Ctx) -> bool:
    """Step 2: run with tracking on, checkpointing every batch, until ``min_batches`` new batches commit."""
    o = ctx.outcome
    floor = -1 if o.baseline.get("latest_commit") is None else int(o.baseline["latest_commit"])  # type: ignore[arg-type]
    ctx.step("run", "started")
    writer = ctx.writer().option("checkpointLocation", ctx.url)
    writer = writer.option(ASYNC_ENABLED, "true").option(ASYNC_INTERVAL, "0")
    ctx.emit("run", "start", f"starting the query with {ASYNC_ENABLED}=true, {ASYNC_INTERVAL}=0")
    seen: set[int] = set(b for b in o.new_batches if b > floor)

    def enough() -> bool:
        for b in ctx.committed():
            if b > floor and b not in seen:
                seen.add(b)
                ctx.emit("run", "batch", f"batch {b} committed", batch=b)
        return len(seen) >= ctx.opts.min_batches

    try:
        error, late = _spark_run(ctx, writer, "run", enough)
    except Exception as exc:
        raise AsyncRefused(f"Spark refused to start the query: {first_line(exc)}") from None
    if error is None and late is not None:
        ctx.emit("run", "warn", f"stopping interrupted a running batch ({late}); step 3 audits what it left")
    seen.update(b for b in ctx.committed() if b > floor)
    o.new_batches = sorted(seen)
    ctx.emit("run", "info", f"query stopped; new committed batches: {o.new_batches or 'none'}")
    if error is not None:
        ctx.step("run", "failed", error=error, new_batches=o.new_batches)
        if "does not support async progress tracking" in error or "cannot be used with" in error:
            raise AsyncRefused(f"Spark refuses asynchronous progress tracking for this query: {error}")
        ctx.emit("run", "fail", f"the query failed: {error}")
        o.status = "run-failed"
        return False
    if len(o.new_batches) < ctx.opts.min_batches:
        ctx.step("run", "short", new_batches=o.new_batches)
        return False
    ctx.step("run", "done", new_batches=o.new_batches)
    ctx.emit("run", "done", f"{len(o.new_batches)} new batch(es) committed with tracking checkpointing every batch")
    return True


def _stopped_short(ctx: _Ctx) -> Outcome:
    o = ctx.outcome
    status = o.status
    if status != "run-failed":
        if not o.new_batches:
            status = "no-data"
            msg = f"no new data arrived in {ctx.opts.timeout:.0f} s; no batch ran"
        else:
            status = "too-few-batches"
            msg = (
                f"only {len(o.new_batches)} new batch(es) ran in {ctx.opts.timeout:.0f} s "
                f"(wanted {ctx.opts.min_batches})"
            )
        ctx.emit("run", "fail", msg + "; the query is stopped", new_batches=o.new_batches)
    ctx.emit("run", "info", f"offline alternative: {o.offline}")
    return ctx.finish(status)


def check(ctx: _Ctx) -> bool:
    """Step 3: ckptfix's audit: no LOG-ASYNC-GAP, the logs' tails as Spark needs them, a restart predicted."""
    o = ctx.outcome
    ctx.emit("check", "start", "auditing the checkpoint")
    report = ctx.audit()
    o.findings_after = [{"rule": f.rule_id, "severity": f.severity, "message": f.message} for f in report.findings]
    L, K = report.facts.get("latest_offset"), report.facts.get("latest_commit")
    problems = []
    if any(f.rule_id == "LOG-ASYNC-GAP" for f in report.findings):
        problems.append("LOG-ASYNC-GAP is still reported")
    # Spark's own requirement (MicroBatchExecution's "doesn't exist" message): "the latest batch for commit
    # log is equal or one batch earlier than the latest batch for offset log". One behind happens when the
    # stop interrupted a batch: it is re-run from offsets/L-1, which the sequence has just written.
    if L is None or K is None or not (K == L or K == L - 1):
        problems.append(f"expected the latest commit to equal the latest offset {L} or be one behind, found {K}")
    if not report.verdict.restarts:
        problems.append(report.verdict.headline)
    if problems:
        ctx.step("check", "failed", problems=problems)
        ctx.emit("check", "fail", "; ".join(problems))
        ctx.emit("check", "info", f"offline alternative: {o.offline}")
        return False
    ctx.step("check", "done", latest_offset=L, latest_commit=K)
    state = (
        f"latest offset = latest commit = {L}" if K == L else f"latest offset {L}, batch {L} re-runs from offsets/{K}"
    )
    ctx.emit("check", "done", f"{state}; {report.verdict.headline} with tracking off")
    return True


def verify(ctx: _Ctx) -> bool:
    """Step 4 (``--verify``): restart with tracking off until one batch commits."""
    o = ctx.outcome
    if not ctx.ran_query:  # resumed: another process may have started the query since
        ctx.check_idle()
    committed_before = ctx.committed()
    before = committed_before[-1] if committed_before else None
    writer = ctx.writer().option("checkpointLocation", ctx.url).option(ASYNC_ENABLED, "false")
    ctx.emit("verify", "start", f"restarting with {ASYNC_ENABLED}=false")
    committed: list[int] = []

    def one_batch() -> bool:
        ids = ctx.committed()
        if ids and (before is None or ids[-1] > before):
            committed.append(ids[-1])
        return bool(committed)

    try:
        error, late = _spark_run(ctx, writer, "verify", one_batch)
    except Exception as exc:
        o.verified = False
        ctx.step("verify", "failed", error=first_line(exc))
        ctx.emit("verify", "fail", f"the restart failed: {first_line(exc)}")
        return False
    if error is None and late is not None:
        if not committed:
            error = late
        else:
            ctx.emit("verify", "warn", f"stopping interrupted a running batch ({late})")
    if error is not None:
        o.verified = False
        ctx.step("verify", "failed", error=error)
        ctx.emit("verify", "fail", f"the restart with tracking off failed: {error}")
        return False
    if not committed:
        o.verified = None
        ctx.step("verify", "done", batch=None)
        ctx.emit(
            "verify",
            "warn",
            f"the query restarted with tracking off without error, but no new data arrived in "
            f"{ctx.opts.timeout:.0f} s, so no batch ran",
        )
        return True
    o.verified = True
    ctx.step("verify", "done", batch=committed[0])
    ctx.emit("verify", "done", f"batch {committed[0]} committed with tracking off")
    return True


def _stop_between_batches(query: Any, wait: float = 1.0) -> str | None:
    """Stop ``query``, preferably while no trigger runs: stopping interrupts a running batch, and Spark then may
    report the interruption of a foreachBatch callback as a query failure (seen on 4.3.0: a StackOverflowError in
    the stream thread, STREAM_FAILED without a message). A busy query (batches back to back) has no idle moment,
    so the wait is short; the interrupted batch is uncommitted and re-run at the next start. Returns what the
    query raised."""
    deadline = time.monotonic() + wait
    with contextlib.suppress(Exception):
        while time.monotonic() < deadline and query.isActive and query.status.get("isTriggerActive"):
            time.sleep(0.05)
    with contextlib.suppress(Exception):
        query.stop()
    try:
        qexc = query.exception()
    except Exception as exc:  # the query object itself is broken
        return first_line(exc)
    return first_line(qexc) if qexc is not None else None


def _live(message: str) -> CkptfixError:
    from ckptfix.repair.engine import LiveQuery

    return LiveQuery(message)


# -- the sequence ----------------------------------------------------------------------------------------------
def async_off(url: str, query: str, options: Options | None = None, progress: ProgressLike = None) -> Outcome:
    """Run (or, without ``options.apply``, plan) the documented sequence on checkpoint ``url``."""
    from ckptfix.repair.engine import Runs, default_backup_url, locked
    from ckptfix.storage import Location

    opts = options or Options()
    if opts.min_batches < 1:
        raise UsageError(f"--min-batches: expected at least 1, found {opts.min_batches}")
    if opts.timeout <= 0:
        raise UsageError(f"--timeout: expected a positive number of seconds, found {opts.timeout}")
    if opts.query_id is not None:
        opts = replace(opts, query_id=parse_query_id(opts.query_id))
    loc = Location(url, opts.storage_options)
    backup = Location(opts.backup_dir or default_backup_url(loc.url), opts.storage_options)
    outcome = Outcome("planned", loc.url, query, applied=opts.apply)
    ctx = _Ctx(loc.url, query, opts, loc, Runs(backup), outcome, progress_of(progress))
    pending = _interrupted(ctx.runs) if opts.apply or opts.resume else None
    if opts.resume:
        if pending is None:
            raise UsageError(f"{backup.display('runs')}: expected an interrupted async-off run, found none")
        _reopen(ctx, pending)
        done = ", ".join(s for s in STEPS if s in ctx.done) or "nothing"
        ctx.emit("preflight", "info", f"resuming run {pending} (done: {done})")
    elif pending is not None:
        raise UsageError(
            f"{backup.display(f'runs/{pending}')}: an interrupted async-off run exists: continue it with --resume"
        )
    preflight(ctx)  # writes nothing: a refusal leaves no trace
    if not opts.apply and not opts.resume:
        return ctx.outcome
    with locked(backup, "async-off"):  # one ckptfix run at a time on this checkpoint, as for repairs
        if ctx.run_id is None:
            if _interrupted(ctx.runs) is not None:  # another async-off began meanwhile (and was interrupted)
                raise UsageError(f"{backup.url}: an interrupted async-off run exists: continue it with --resume")
            _open(ctx)
            ctx.step("preflight", "done")
        return _sequence(ctx)


def _sequence(ctx: _Ctx) -> Outcome:
    """Steps 2 to 4, each skipped when the journal says it is done."""
    if "run" not in ctx.done:
        try:
            ran = run_with_tracking(ctx)
        except AsyncRefused:
            ctx.finish("refused")  # nothing to resume: Spark will refuse again
            raise
        if not ran:
            return _stopped_short(ctx)
    if "check" not in ctx.done and not check(ctx):
        return ctx.finish("check-failed")
    if ctx.opts.verify and "verify" not in ctx.done and not verify(ctx):
        return ctx.finish("verify-failed")
    return ctx.finish("done")
