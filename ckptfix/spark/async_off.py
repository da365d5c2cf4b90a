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

Progress goes to an injected observer (events); the library never prints. A small JSON journal per run lives in
the repair engine's backup location (``<ckpt>/_ckptfix/async-off/<run-id>.json`` by default), never among
Spark's files, so an interrupted run resumes from the first step not done.
"""

from __future__ import annotations

import contextlib
import json
import os
import posixpath
import sys
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any
from urllib.parse import urlparse

from ckptfix.errors import AsyncRefused, CkptfixError, ForeignCheckpoint, Interrupted, MissingExtra, UsageError
from ckptfix.spark import jvm
from ckptfix.spark.usercode import QueryModuleError, build_writer, first_line, load_function

#: the option that names the query module (in every message about it)
OPTION = "--query"
STEPS = ("preflight", "run", "check", "verify")
JOURNAL_DIR = "async-off"
ASYNC_ENABLED = "asyncProgressTrackingEnabled"
ASYNC_INTERVAL = "asyncProgressTrackingCheckpointIntervalMs"
#: Spark's testing-only switch that skips the sink check (AsyncProgressTrackingMicroBatchExecution)
SINK_OVERRIDE = "_asyncProgressTrackingOverrideSinkSupportCheck"
#: test hook: raise Interrupted right after this step is journaled as done
STOP_AFTER_ENV = "CKPTFIX_TEST_ASYNC_OFF_STOP_AFTER"

#: ``Table.name()`` of the sinks ``validateAndGetTrigger`` accepts (read from the 3.5.9 / 4.3.0 bytecode and
#: apache/spark master): 3.5 knows noop-table, console, MemorySink, KafkaTable; 4.3 adds ForeachSink and
#: ContinuousMemorySink.
_SINKS_35 = {"noop": "noop-table", "console": "console", "memory": "MemorySink", "kafka": "KafkaTable"}
_SINKS_43 = {**_SINKS_35, "foreach": "ForeachSink"}
_FILE_FORMATS = {"parquet", "json", "csv", "orc", "text", "avro"}
#: the reasons, verbatim from Spark's source
REASON_AVAILABLE_NOW = "Async progress tracking cannot be used with AvailableNow trigger"
REASON_ONCE = "Async progress tracking cannot be used with Once trigger"
REASON_STATEFUL = "Stateful streaming queries does not support async progress tracking at this moment."


def _sink_reason(name: str) -> str:
    return f"Sink {name} does not support async progress tracking"


# ------------------------------------------------------------------------------------------- events


@dataclass(frozen=True)
class Event:
    step: str
    kind: str  # start | info | batch | done | fail | skip | warn
    message: str
    data: dict[str, Any] = field(default_factory=dict)
    at: float = field(default_factory=time.time)


Observer = Callable[[Event], None]


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


# ------------------------------------------------------------------------------- writer inspection


@dataclass(frozen=True)
class SourceInfo:
    kind: str  # the reader format ("json", "kafka", ...) or the V2 source name
    path: str | None = None
    topics: tuple[str, ...] = ()


@dataclass(frozen=True)
class WriterInfo:
    trigger: str  # ProcessingTimeTrigger, AvailableNowTrigger, OneTimeTrigger, ContinuousTrigger, ...
    sink: str  # the writer's format: foreachBatch, parquet, kafka, memory, ...
    checkpoint: str | None
    sink_override: bool
    sink_path: str | None
    sources: tuple[SourceInfo, ...]
    stateful_operators: tuple[str, ...]


def _stateful_operators(writer: Any, qe: Any) -> list[str]:
    """Stateful operators of the planned query. Spark's own test (``checkNotStatefulStreamingQuery``, at the
    first batch) looks for a ``StateStoreWriter`` in the executed plan. An unstarted streaming plan cannot be
    executed, but Spark explains it (the way ``df.explain()`` does) with the same physical operators; every
    stateful one prints its ``state info [...]``."""
    gateway = getattr(getattr(writer, "_spark", None), "_jvm", None)
    if gateway is None:
        from pyspark import SparkContext

        sc = SparkContext._active_spark_context
        gateway = sc._jvm if sc is not None else None
    if gateway is None:
        return []
    text = str(gateway.PythonSQLUtils.explainString(qe, "simple"))
    found: list[str] = []
    for line in text.splitlines():
        if "state info [" in line:
            name = line.lstrip(" +-:*()0123456789").split(" ", 1)[0]
            if name and name not in found:
                found.append(name)
    return found


def inspect_writer(writer: Any) -> WriterInfo:
    """Read trigger, sink, options and the query's sources/stateful operators from the Java writer."""
    jw = writer._jwrite
    trigger = jvm.field(jw, "trigger")
    trigger_name = jvm.simple_name(trigger) if trigger is not None else "ProcessingTimeTrigger"
    sink = str(jvm.field(jw, "source") or "")
    options = jvm.field(jw, "extraOptions")
    ckpt = jvm.map_get(options, "checkpointLocation")
    override = str(jvm.map_get(options, SINK_OVERRIDE) or "false").strip().lower() == "true"
    sink_path = jvm.map_get(options, "path")
    ds = jvm.field(jw, "ds")
    sources: list[SourceInfo] = []
    stateful: list[str] = []
    if ds is not None:
        qe = ds.queryExecution()
        for rel in jvm.streaming_relations(qe.analyzed()):
            topics = jvm.map_get(rel.options, "subscribe")
            sources.append(
                SourceInfo(
                    rel.name,
                    jvm.map_get(rel.options, "path"),
                    tuple(t.strip() for t in str(topics).split(",")) if topics else (),
                )
            )
        stateful = _stateful_operators(writer, qe)
    return WriterInfo(
        trigger_name,
        sink,
        str(ckpt) if ckpt is not None else None,
        override,
        str(sink_path) if sink_path is not None else None,
        tuple(sources),
        tuple(stateful),
    )


def _qualified(path: str | None, spark_version: str) -> str:
    """The sink path as FileStreamSink prints it: 4.3.0 qualifies a local path (``file:/tmp/x``, seen live),
    3.5.9 prints it as given (shared/reference spark-behaviour-observed.md §4)."""
    if path is None:
        return "None"
    if spark_version.startswith("3.") or urlparse(path).scheme:
        return path
    return "file:" + os.path.abspath(path)


def refusals(info: WriterInfo, spark_version: str) -> list[str]:
    """Spark's reasons for refusing async progress tracking on this writer (empty: Spark accepts it, as far as
    its ``validateAndGetTrigger`` and first-batch stateful check go)."""
    reasons: list[str] = []
    if not info.sink_override:
        known = _SINKS_43 if not spark_version.startswith("3.") else _SINKS_35
        if info.sink not in known:
            if info.sink == "foreachBatch":
                name = "ForeachBatchSink"
            elif info.sink in _FILE_FORMATS:
                name = f"FileSink[{_qualified(info.sink_path, spark_version)}]"
            else:
                name = info.sink
            if info.sink == "foreach" or info.sink not in ("foreachBatch", *_FILE_FORMATS):
                # the sink's Table.name() is decided by its provider; Spark's check runs at start()
                reasons.append(
                    _sink_reason(name) + f" (predicted: a {info.sink!r} sink is not among the sinks Spark "
                    f"{spark_version} accepts: {', '.join(sorted(set(known.values())))})"
                )
            else:
                reasons.append(_sink_reason(name))
    if info.trigger == "AvailableNowTrigger":
        reasons.append(REASON_AVAILABLE_NOW)
    elif info.trigger == "OneTimeTrigger":
        reasons.append(REASON_ONCE)
    elif info.trigger == "ContinuousTrigger":
        reasons.append("a continuous-trigger query has no micro-batch logs: async progress tracking does not apply")
    if info.stateful_operators:
        reasons.append(REASON_STATEFUL + f" (operators: {', '.join(sorted(set(info.stateful_operators)))})")
    return reasons


# ------------------------------------------------------------------------------ checkpoint matching


def _norm_path(p: str) -> str:
    u = urlparse(p)
    if u.scheme in ("", "file"):
        return posixpath.normpath(os.path.abspath(u.path if u.scheme else p))
    scheme = "s3" if u.scheme in ("s3a", "s3n") else u.scheme
    return f"{scheme}://{u.netloc}{posixpath.normpath(u.path or '/')}"


def same_location(a: str, b: str) -> bool:
    return _norm_path(a) == _norm_path(b)


def foreign_checkpoint(ckpt: Any, info: WriterInfo, query_id: str | None) -> list[str]:
    """Why this checkpoint was written by another query (empty: nothing says so). Checked: the metadata id
    (``--query-id``), the number of sources in the latest offset file, the file sources' recorded input files
    (under the reader's path) and the Kafka topics."""
    from ckptfix.errors import FormatError

    why: list[str] = []
    if query_id is not None:
        try:
            found = ckpt.query_metadata().id
        except (FormatError, OSError) as exc:
            found = f"an unreadable metadata file ({exc})"
        if found != query_id:
            why.append(f"{ckpt.display('metadata')}: expected query id {query_id} (--query-id), found {found}")
    L = ckpt.offsets.latest
    entry = ckpt.try_offset(L) if L is not None else None
    if entry is None or not info.sources:
        return why
    offs = list(entry.offsets)
    if len(offs) != len(info.sources):
        why.append(
            f"{ckpt.display(f'offsets/{L}')}: expected {len(info.sources)} source offset(s) (the query reads "
            f"{', '.join(s.kind for s in info.sources)}), found {len(offs)}"
        )
        return why
    for i, (src, off) in enumerate(zip(info.sources, offs, strict=True)):
        try:
            value = json.loads(off.json) if off.json else None
        except ValueError:
            value = None
        if src.kind in _FILE_FORMATS or src.kind == "text":
            if off.json is not None and not (isinstance(value, dict) and "logOffset" in value):
                why.append(
                    f"{ckpt.display(f'offsets/{L}')}: source {i}: expected a file source offset "
                    f'{{"logOffset":N}} (the query reads {src.kind} files), found {off.json}'
                )
                continue
            bad = _foreign_files(ckpt, str(i), src)
            if bad:
                why.append(bad)
        elif src.kind == "kafka" and src.topics and isinstance(value, dict) and not set(value) & set(src.topics):
            why.append(
                f"{ckpt.display(f'offsets/{L}')}: source {i}: expected offsets of topic(s) "
                f"{', '.join(src.topics)}, found topic(s) {', '.join(sorted(value))}"
            )
    return why


def _foreign_files(ckpt: Any, source: str, src: SourceInfo) -> str | None:
    from ckptfix.errors import FormatError

    log = ckpt.sources.get(source)
    if log is None or not log.files or not src.path or any(c in src.path for c in "*?[{"):
        return None
    b = max(log.files)
    try:
        entries = ckpt.source_log(source, b).entries
    except (FormatError, OSError):
        return None
    want = _norm_path(src.path).rstrip("/") + "/"
    for e in entries:
        p = e.get("path")
        if isinstance(p, str) and not _norm_path(p).startswith(want):
            return (
                f"{ckpt.display(log.path_of(b))}: expected input files under {src.path} (the query's "
                f"{src.kind} source), found {p}"
            )
    return None


# ---------------------------------------------------------------------------------------- journal


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


class Journal:
    """``<backup>/async-off/<run-id>.json``: which steps are done, rewritten atomically after each."""

    def __init__(self, backup: Any, data: dict[str, Any]) -> None:
        self.backup = backup
        self.data = data

    @property
    def run_id(self) -> str:
        return str(self.data["run_id"])

    @classmethod
    def new(cls, backup: Any, checkpoint: str, query: str) -> Journal:
        run_id = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:8]
        data = {
            "run_id": run_id,
            "checkpoint": checkpoint,
            "query": query,
            "created_at": _now(),
            "status": "running",
            "steps": {},
        }
        j = cls(backup, data)
        j.save()
        return j

    @classmethod
    def runs(cls, backup: Any) -> list[str]:
        try:
            entries = backup.list_tree(JOURNAL_DIR)
        except (FileNotFoundError, NotADirectoryError):
            return []
        return sorted(
            p.rsplit("/", 1)[-1][: -len(".json")]
            for p, e in entries.items()
            if not e.is_dir and p.endswith(".json") and "/" not in p[len(JOURNAL_DIR) + 1 :]
        )

    @classmethod
    def load(cls, backup: Any, run_id: str) -> Journal:
        rel = f"{JOURNAL_DIR}/{run_id}.json"
        raw = backup.read(rel)
        try:
            data = json.loads(raw)
            if not isinstance(data, dict) or "steps" not in data:
                raise ValueError("no steps")
        except ValueError as exc:
            raise UsageError(f"{backup.display(rel)}: expected an async-off journal (JSON), found {exc}") from None
        return cls(backup, data)

    @classmethod
    def latest_running(cls, backup: Any) -> Journal | None:
        for run_id in reversed(cls.runs(backup)):
            j = cls.load(backup, run_id)
            if j.data.get("status") == "running":
                return j
        return None

    def save(self) -> None:
        self.backup.write_atomic(f"{JOURNAL_DIR}/{self.run_id}.json", json.dumps(self.data, indent=1).encode())

    def done(self, step: str) -> bool:
        return bool(self.data["steps"].get(step, {}).get("status") == "done")

    def mark(self, step: str, status: str, **data: Any) -> None:
        self.data["steps"][step] = {"status": status, "at": _now(), **data}
        self.save()

    def finish(self, status: str) -> None:
        self.data["status"] = status
        self.data["finished_at"] = _now()
        self.save()


# ------------------------------------------------------------------------------------ Spark session


def spark_session(master: str | None, confs: Mapping[str, str]) -> Any:
    """The active SparkSession (confs set on it) or a new one with ``confs`` (``ckptfix.spark.session``)."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise MissingExtra("pyspark", "spark") from None
    active = SparkSession.getActiveSession()
    if active is None and confs:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        builder = SparkSession.builder.appName("ckptfix-async-off")
        builder = builder.master(master or os.environ.get("SPARK_MASTER", "local[*]"))
        builder = builder.config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
        for k, v in confs.items():
            builder = builder.config(k, v)
        return builder.getOrCreate()
    from ckptfix.spark import session

    spark = session(master, app="ckptfix-async-off")
    for k, v in confs.items():
        try:
            spark.conf.set(k, v)
        except Exception as exc:
            raise UsageError(f"--conf {k}={v}: the running session refuses it: {first_line(exc)}") from None
    return spark


# ------------------------------------------------------------------------------------------- runner


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


class _Run:
    def __init__(self, url: str, spec: str, opts: Options, observer: Observer | None) -> None:
        from ckptfix.repair.engine import default_backup_url
        from ckptfix.storage import Location

        if opts.min_batches < 1:
            raise UsageError(f"--min-batches: expected at least 1, found {opts.min_batches}")
        if opts.timeout <= 0:
            raise UsageError(f"--timeout: expected a positive number of seconds, found {opts.timeout}")
        self.opts = opts
        self.spec = spec
        self.loc = Location(url, opts.storage_options)
        self.url = self.loc.url
        self.backup = Location(opts.backup_dir or default_backup_url(self.url), opts.storage_options)
        self.observer = observer
        self.outcome = Outcome("planned", self.url, spec, applied=opts.apply)
        self.journal: Journal | None = None
        self.spark: Any = None
        self.fn: Callable[[Any], Any] | None = None
        #: this process ran the query already (its own fresh writes are not another writer's)
        self.ran_query = False

    # -- helpers -------------------------------------------------------------------------------
    def emit(self, step: str, kind: str, message: str, **data: Any) -> None:
        ev = Event(step, kind, message, data)
        self.outcome.events.append(ev)
        if self.observer is not None:
            self.observer(ev)

    def step_status(self, step: str, status: str, **data: Any) -> None:
        self.outcome.steps[step] = status
        if self.journal is not None:
            self.journal.mark(step, status, **data)
        if status == "done" and os.environ.get(STOP_AFTER_ENV) == step:
            raise Interrupted(f"stopped after step {step} ({STOP_AFTER_ENV}); continue with --resume")

    def checkpoint(self) -> Any:
        from ckptfix.checkpoint import Checkpoint

        return Checkpoint.open(self.url, self.opts.storage_options)

    def latest_commit(self) -> tuple[int | None, list[int]]:
        from ckptfix.checkpoint import index_log

        try:
            entries = self.loc.list_tree("commits")
        except (FileNotFoundError, NotADirectoryError):
            return None, []
        ids = index_log("commits", entries).listed_ids
        return (ids[-1] if ids else None), ids

    def writer(self) -> Any:
        assert self.fn is not None
        return build_writer(self.fn, self.spark, self.spec, OPTION)

    def target(self) -> str:
        from ckptfix.audit.targets import NEWEST, SUPPORTED

        label = ".".join(str(self.spark.version).split(".")[:2])
        return label if label in SUPPORTED else NEWEST

    def audit(self) -> Any:
        from ckptfix.audit import audit

        return audit(self.url, self.target(), storage_options=self.opts.storage_options)

    def check_idle(self) -> None:
        if self.opts.force:
            return
        from ckptfix.repair.engine import check_recent_writes

        check_recent_writes(self.loc, self.loc.list_tree(), self.opts.idle_seconds)
        # a query of this session on the same checkpoint (the tree check above covers other processes)
        for q in self.spark.streams.active:
            try:
                root = str(q._jsq.streamingQuery().resolvedCheckpointRoot())
            except Exception:
                continue
            if same_location(root, self.url):
                raise _live(f"{self.url}: expected no running query on it, found query {q.id} in this session")

    # -- the sequence --------------------------------------------------------------------------
    def go(self) -> Outcome:
        o = self.outcome
        if self.opts.resume:
            j = Journal.latest_running(self.backup)
            if j is None:
                raise UsageError(
                    f"{self.backup.display(JOURNAL_DIR)}: expected an interrupted async-off run, found none"
                )
            if j.data.get("query") != self.spec:
                raise UsageError(
                    f"--resume: expected --query {j.data.get('query')} as in run {j.run_id}, found {self.spec}"
                )
            self.journal = j
            o.run_id = j.run_id
            o.applied = True
            o.baseline = dict(j.data.get("baseline") or {})
            o.query_id = j.data.get("query_id")
            o.findings_before = list(j.data.get("findings_before") or [])
            o.new_batches = list(j.data.get("new_batches") or [])
            for s in STEPS:
                if j.done(s):
                    o.steps[s] = "done"
            self.emit("preflight", "info", f"resuming run {j.run_id} (done: {', '.join(o.steps) or 'nothing'})")
        elif self.opts.apply:
            j = Journal.latest_running(self.backup)
            if j is not None:
                raise UsageError(
                    f"{self.backup.display(f'{JOURNAL_DIR}/{j.run_id}.json')}: an interrupted async-off run exists: "
                    "continue it with --resume"
                )
        self.preflight()
        if not self.opts.apply and not self.opts.resume:
            o.status = "planned"
            return o
        if self.journal is None:
            self.journal = Journal.new(self.backup, self.url, self.spec)
            o.run_id = self.journal.run_id
            self.journal.data.update(
                baseline=o.baseline, query_id=o.query_id, findings_before=o.findings_before, new_batches=[]
            )
            self.step_status("preflight", "done")
        if not self.journal.done("run"):
            try:
                ran = self.run_async()
            except AsyncRefused:
                self.journal.finish("refused")  # nothing to resume: Spark will refuse again
                raise
            if not ran:
                return self.stop_short()
        if not self.journal.done("check") and not self.check():
            o.status = "check-failed"
            self.journal.finish(o.status)
            return o
        if self.opts.verify and not self.journal.done("verify") and not self.verify():
            o.status = "verify-failed"
            self.journal.finish(o.status)
            return o
        o.status = "done"
        self.journal.finish("done")
        return o

    def preflight(self) -> None:
        o = self.outcome
        self.emit("preflight", "start", f"preflight: {self.url}")
        ckpt = self.checkpoint()
        if ckpt.metadata_rel is None:
            raise ForeignCheckpoint(
                f"{ckpt.display('metadata')}: expected the query's metadata file (written at its first start), "
                "found none"
            )
        meta_id = ckpt.query_metadata().id
        if o.query_id is not None and o.query_id != meta_id:
            raise ForeignCheckpoint(
                f"{ckpt.display('metadata')}: expected query id {o.query_id} (journal), found {meta_id}"
            )
        o.query_id = meta_id
        if not o.baseline:
            o.baseline = {"latest_offset": ckpt.offsets.latest, "latest_commit": ckpt.commits.latest}
        self.fn = load_builder(self.spec)
        self.spark = spark_session(self.opts.master, self.opts.confs)
        writer = self.writer()
        info = inspect_writer(writer)
        self.emit(
            "preflight",
            "info",
            f"query {meta_id}: trigger {info.trigger}, sink {info.sink}, "
            f"{len(info.sources)} source(s) ({', '.join(s.kind for s in info.sources) or 'none found'})",
            trigger=info.trigger,
            sink=info.sink,
            sources=[asdict(s) for s in info.sources],
        )
        if info.checkpoint is not None and not same_location(info.checkpoint, self.url):
            raise QueryModuleError(
                f"{OPTION} {self.spec}: the writer sets checkpointLocation {info.checkpoint}, "
                f"expected none or {self.url}"
            )
        reasons = refusals(info, str(self.spark.version))
        if reasons:
            raise AsyncRefused(
                f"Spark {self.spark.version} refuses asynchronous progress tracking for this query: "
                + "; ".join(reasons)
            )
        why = foreign_checkpoint(ckpt, info, self.opts.query_id)
        if why:
            raise ForeignCheckpoint("this checkpoint belongs to another query: " + "; ".join(why))
        if not (self.journal is not None and self.journal.done("run")):
            self.check_idle()
        if not o.findings_before:
            report = self.audit()
            o.findings_before = [
                {"rule": f.rule_id, "severity": f.severity, "message": f.message} for f in report.findings
            ]
            blockers = [f for f in report.findings if f.spark_error is not None and f.rule_id not in ("LOG-ASYNC-GAP",)]
            if blockers and not self.opts.force:
                b = blockers[0]
                raise AsyncRefused(
                    f"the audit finds {b.rule_id} ({b.message}), which the asynchronous restart does not fix: "
                    f"repair it first (`ckptfix repair {self.url}`), or --force"
                )
            gap = [f for f in report.findings if f.rule_id == "LOG-ASYNC-GAP"]
            self.emit(
                "preflight",
                "info",
                (f"audit: {gap[0].message}" if gap else f"audit: {report.verdict.headline} (no LOG-ASYNC-GAP)"),
                verdict=report.verdict.headline,
            )
        o.offline = self.offline_hint()
        plan = [
            f"run the query with {ASYNC_ENABLED}=true, {ASYNC_INTERVAL}=0 until {self.opts.min_batches} new batch(es) "
            f"commit after batch {o.baseline.get('latest_commit')} (at most {self.opts.timeout:.0f} s), then stop",
            "check with ckptfix's audit: no LOG-ASYNC-GAP, latest commit = latest offset",
        ]
        if self.opts.verify:
            plan.append(
                f"restart with {ASYNC_ENABLED}=false until one batch commits (at most {self.opts.timeout:.0f} s)"
            )
        self.emit("preflight", "done", "preflight passed", steps=plan)
        self.outcome.steps.setdefault("preflight", "done")

    def offline_hint(self) -> str:
        gap = [f for f in self.outcome.findings_before if f["rule"] == "LOG-ASYNC-GAP"]
        base = f"ckptfix repair {self.url}"
        if gap:
            return f"`{base}` (offline, no new data needed) fixes what the audit found: {gap[0]['message']}"
        return f"`{base}` shows what an offline repair would change"

    def run_async(self) -> bool:
        o = self.outcome
        assert self.journal is not None
        baseline = o.baseline.get("latest_commit")
        floor = -1 if baseline is None else int(baseline)
        self.journal.mark("run", "started")
        self.ran_query = True
        writer = self.writer().option("checkpointLocation", self.url)
        writer = writer.option(ASYNC_ENABLED, "true").option(ASYNC_INTERVAL, "0")
        self.emit("run", "start", f"starting the query with {ASYNC_ENABLED}=true, {ASYNC_INTERVAL}=0")
        try:
            query = writer.start()
        except Exception as exc:
            raise AsyncRefused(f"Spark refused to start the query: {first_line(exc)}") from None
        seen: set[int] = set(b for b in o.new_batches if b > floor)
        deadline = time.monotonic() + self.opts.timeout
        error: str | None = None
        try:
            while True:
                _, ids = self.latest_commit()
                for b in ids:
                    if b > floor and b not in seen:
                        seen.add(b)
                        self.emit("run", "batch", f"batch {b} committed", batch=b)
                if len(seen) >= self.opts.min_batches:
                    break
                if not query.isActive:
                    qexc = query.exception()
                    error = first_line(qexc) if qexc is not None else "the query stopped by itself"
                    break
                if time.monotonic() >= deadline:
                    break
                time.sleep(self.opts.poll_seconds)
        finally:
            late = _stop_between_batches(query)
        if error is None and late is not None:
            self.emit("run", "warn", f"stopping interrupted a running batch ({late}); step 3 audits what it left")
        _, ids = self.latest_commit()
        seen.update(b for b in ids if b > floor)
        o.new_batches = sorted(seen)
        self.journal.data["new_batches"] = o.new_batches
        self.emit("run", "info", f"query stopped; new committed batches: {o.new_batches or 'none'}")
        if error is not None:
            self.step_status("run", "failed", error=error)
            if "does not support async progress tracking" in error or "cannot be used with" in error:
                raise AsyncRefused(f"Spark refuses asynchronous progress tracking for this query: {error}")
            self.emit("run", "fail", f"the query failed: {error}")
            o.status = "run-failed"
            return False
        if len(o.new_batches) < self.opts.min_batches:
            self.step_status("run", "short", new_batches=o.new_batches)
            return False
        self.step_status("run", "done", new_batches=o.new_batches)
        self.emit(
            "run", "done", f"{len(o.new_batches)} new batch(es) committed with tracking checkpointing every batch"
        )
        return True

    def stop_short(self) -> Outcome:
        o = self.outcome
        assert self.journal is not None
        if o.status != "run-failed":
            if not o.new_batches:
                o.status = "no-data"
                msg = f"no new data arrived in {self.opts.timeout:.0f} s; no batch ran"
            else:
                o.status = "too-few-batches"
                msg = (
                    f"only {len(o.new_batches)} new batch(es) ran in {self.opts.timeout:.0f} s "
                    f"(wanted {self.opts.min_batches})"
                )
            self.emit("run", "fail", msg + "; the query is stopped", new_batches=o.new_batches)
        self.emit("run", "info", f"offline alternative: {o.offline}")
        self.journal.finish(o.status)
        return o

    def check(self) -> bool:
        o = self.outcome
        self.emit("check", "start", "auditing the checkpoint")
        report = self.audit()
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
            self.step_status("check", "failed", problems=problems)
            self.emit("check", "fail", "; ".join(problems))
            self.emit("check", "info", f"offline alternative: {o.offline}")
            return False
        self.step_status("check", "done", latest_offset=L, latest_commit=K)
        state = (
            f"latest offset = latest commit = {L}"
            if K == L
            else f"latest offset {L}, batch {L} re-runs from offsets/{K}"
        )
        self.emit("check", "done", f"{state}; {report.verdict.headline} with tracking off")
        return True

    def verify(self) -> bool:
        o = self.outcome
        if self.spark is None or self.fn is None:  # pragma: no cover - preflight always ran
            raise UsageError("internal: no session")
        if not self.ran_query:  # resumed: another process may have started the query since
            self.check_idle()
        self.ran_query = True
        before, _ = self.latest_commit()
        writer = self.writer().option("checkpointLocation", self.url).option(ASYNC_ENABLED, "false")
        self.emit("verify", "start", f"restarting with {ASYNC_ENABLED}=false")
        try:
            query = writer.start()
        except Exception as exc:
            o.verified = False
            self.step_status("verify", "failed", error=first_line(exc))
            self.emit("verify", "fail", f"the restart failed: {first_line(exc)}")
            return False
        deadline = time.monotonic() + self.opts.timeout
        committed: int | None = None
        error: str | None = None
        try:
            while time.monotonic() < deadline:
                latest, _ = self.latest_commit()
                if latest is not None and (before is None or latest > before):
                    committed = latest
                    break
                if not query.isActive:
                    qexc = query.exception()
                    error = first_line(qexc) if qexc is not None else "the query stopped by itself"
                    break
                time.sleep(self.opts.poll_seconds)
        finally:
            late = _stop_between_batches(query)
        if error is None and late is not None:
            if committed is None:
                error = late
            else:
                self.emit("verify", "warn", f"stopping interrupted a running batch ({late})")
        if error is not None:
            o.verified = False
            self.step_status("verify", "failed", error=error)
            self.emit("verify", "fail", f"the restart with tracking off failed: {error}")
            return False
        if committed is None:
            o.verified = None
            self.step_status("verify", "done", batch=None)
            self.emit(
                "verify",
                "warn",
                f"the query restarted with tracking off without error, but no new data arrived in "
                f"{self.opts.timeout:.0f} s, so no batch ran",
            )
            return True
        o.verified = True
        self.step_status("verify", "done", batch=committed)
        self.emit("verify", "done", f"batch {committed} committed with tracking off")
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


def async_off(url: str, query: str, options: Options | None = None, observer: Observer | None = None) -> Outcome:
    """Run (or, without ``options.apply``, plan) the documented sequence on checkpoint ``url``."""
    return _Run(url, query, options or Options(), observer).go()
