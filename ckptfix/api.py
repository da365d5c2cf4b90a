"""The Python API: what the CLI does, callable from a notebook or a script, returning the same models the
CLI renders (``ckptfix audit`` prints a :class:`~ckptfix.audit.model.Report`, ``ckptfix repair`` a plan).

Nothing here prints. Every function takes a checkpoint URL (local path, ``file:``, ``s3://`` ... with
``storage_options`` for fsspec) or an already opened :class:`~ckptfix.checkpoint.Checkpoint`::

    import ckptfix

    ckpt = ckptfix.open_checkpoint("s3://bucket/checkpoints/q1", storage_options={"anon": False})
    report = ckptfix.audit(ckpt, target_spark="4.3")
    print(report.verdict.headline)
    for f in report.findings:
        print(f.severity, f.rule_id, f.message)

    plan = ckptfix.plan_repair(ckpt)
    print(plan.describe())
    run_id = plan.apply()          # backs up every file it changes; `ckptfix undo CKPT RUN` reverts it

    table = ckptfix.read_state(ckpt, operator=0)   # a pyarrow.Table (rows as dicts without pyarrow)
"""

from __future__ import annotations

import functools
import inspect
import os
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, cast

from ckptfix.audit.model import Report
from ckptfix.checkpoint import Checkpoint
from ckptfix.errors import FormatError, LiveQuery, UsageError
from ckptfix.progress import ProgressLike
from ckptfix.repair.plan import Plan, Unfixed
from ckptfix.storage import Location

_F = TypeVar("_F", bound=Callable[..., Any])

if TYPE_CHECKING:
    from ckptfix.audit.scan import ScanReport
    from ckptfix.repair.engine import RunInfo


def _apply(
    plan: Plan,
    url: str,
    opts: Mapping[str, Any],
    backup_url: PathLike | None,
    force: bool,
    idle_seconds: float,
    progress: ProgressLike,
) -> str:
    """Carry ``plan`` out on ``url`` through the repair engine (backup in ``backup_url`` or the default)."""
    from ckptfix.repair import engine

    if isinstance(idle_seconds, bool) or not isinstance(idle_seconds, (int, float)) or not idle_seconds >= 0:
        # the CLI's --idle-seconds refuses a negative number too
        raise UsageError(f"apply: idle_seconds: expected a number of seconds >= 0, found {idle_seconds!r}")

    backup = Location(_fspath(backup_url) or engine.default_backup_url(url), opts)
    return engine.apply(plan, Location(url, opts), backup, force=force, idle_seconds=idle_seconds, progress=progress)


#: the session confs ckptfix itself interprets (``--conf`` / ``session_conf``), with the values Spark accepts for
#: them: (kind, what Spark accepts). Spark parses a number or a boolean after trimming it (``ConfigHelpers``);
#: a value it refuses would stop the restart, so ckptfix refuses it rather than predict from it.
CHECKED_CONFS = {
    "spark.sql.shuffle.partitions": ("int", "a positive integer", 1, None),
    "spark.sql.streaming.stateStore.checkpointFormatVersion": ("int", "1 or 2", 1, 2),
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": ("bool", "true or false", None, None),
    "spark.sql.streaming.stateStore.autoSnapshotRepair.enabled": ("bool", "true or false", None, None),
}
_INT = re.compile(r"[+-]?[0-9]+")


def check_session_conf(conf: Mapping[str, str], label: str = "session_conf") -> dict[str, str]:
    """``conf`` with the values of :data:`CHECKED_CONFS` as Spark reads them (trimmed; ``" 8"`` is ``"8"``,
    ``"TRUE"`` is ``"true"``); a value Spark refuses for one of them raises :class:`UsageError` naming ``label``
    (``--conf`` in the CLI), the key, what Spark accepts and what was found. Other keys pass as they are."""
    if not isinstance(conf, Mapping):
        raise UsageError(f"{label}: expected a mapping of conf keys to values, found {conf!r}")
    checked = dict(conf)
    for key, value in conf.items():
        if key not in CHECKED_CONFS:
            continue
        kind, expected, low, high = CHECKED_CONFS[key]
        raw = str(value).strip()
        if kind == "bool":
            ok = raw.lower() in ("true", "false")
            normal = raw.lower()
        else:
            ok = bool(_INT.fullmatch(raw)) and -(2**31) <= int(raw) < 2**31
            ok = ok and (low is None or int(raw) >= low) and (high is None or int(raw) <= high)
            normal = str(int(raw)) if ok else raw
        if not ok:
            raise UsageError(f"{label} {key}: expected {expected} (Spark refuses another value), found {value!r}")
        checked[key] = normal
    return checked


#: a checkpoint or backup location: a URL or local path as ``str``, or a ``pathlib.Path``
PathLike = str | os.PathLike[str]


def _fspath(path: PathLike | None) -> str | None:
    return None if path is None else os.fspath(path)


#: the keywords of :func:`read_state` beyond its own: the options of ``ckptfix state read``
READ_OPTIONS = frozenset(
    {"version", "partition", "store_name", "join_side", "state_var", "timers", "from_snapshot", "flatten", "where"}
    | {"key_schema", "value_schema", "force_schema"}
)
#: the keywords of :func:`read_changes` beyond its own: the options of ``ckptfix state changes``
CHANGES_OPTIONS = frozenset({"partition", "store_name", "state_var", "key_schema", "value_schema", "force_schema"})
#: an API function's ``**options`` keywords, which its usage errors may name too
_EXTRA_KEYWORDS = {"read_state": READ_OPTIONS, "read_changes": CHANGES_OPTIONS}


_OPTION = r"(?<![\w-])--([a-z][a-z0-9-]*)"
#: CLI options whose API keyword is spelled otherwise (``--store`` is ``store_name=``)
_KEYWORD_OF_OPTION = {"store": "store_name", "keys": "keys_file", "rows": "rows_file", "sink": "sink_path"}


def _python_names(fn: _F) -> _F:
    """An API function whose usage errors name its own parameters: the shared checks speak the CLI's language
    (``--target-spark: expected one of ...``); called from Python, the same error names ``target_spark``. An option
    is renamed where the function takes it as a parameter (or, for ``**options``, as one of its keywords); an
    argument typed ``int`` that is not one is refused first, by name."""
    sig = inspect.signature(fn)
    params = set(sig.parameters)
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in sig.parameters.values()):
        params |= _EXTRA_KEYWORDS.get(fn.__name__, frozenset())
    # the parameters typed int (or int | None): a str, float or bool there failed deep inside ("'<' not supported
    # between instances of 'str' and 'int'", "offsets/5.0: no such file")
    ints = {
        name: p.annotation == "int | None"
        for name, p in sig.parameters.items()
        if p.annotation in ("int", "int | None")
    }

    def python_name(m: re.Match[str]) -> str:
        name = m.group(1).replace("-", "_")
        name = _KEYWORD_OF_OPTION.get(name, name)
        return name if name in params else m.group(0)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        bound = sig.bind_partial(*args, **kwargs).arguments
        for name, optional in ints.items():
            if name not in bound or (optional and bound[name] is None):
                continue
            value = bound[name]
            if not isinstance(value, int) or isinstance(value, bool):
                raise UsageError(f"{fn.__name__}: {name}: expected an int, found {value!r}")
        try:
            return fn(*args, **kwargs)
        except (UsageError, LiveQuery) as exc:  # a live-looking checkpoint: "pass force (or idle_seconds N)"
            text = str(exc)
            renamed = re.sub(_OPTION, python_name, text)
            if renamed == text:
                raise
            raise (LiveQuery if isinstance(exc, LiveQuery) else UsageError)(renamed) from None
        except FormatError as exc:  # a file that is not there may say which values an option takes
            expected = re.sub(_OPTION, python_name, exc.expected)
            if expected == exc.expected or type(exc) is not FormatError:
                raise
            raise FormatError(exc.path, exc.offset, expected, exc.found, exc.kind) from None

    return cast(_F, wrapper)


def open_checkpoint(url: PathLike, storage_options: Mapping[str, Any] | None = None) -> Checkpoint:
    """List a checkpoint once; :class:`~ckptfix.errors.NotACheckpoint` when ``url`` holds none."""
    return Checkpoint.open(os.fspath(url), storage_options)


#: the types :func:`read_state` / the state plans take for their ``**options`` (an int is not a bool)
_OPTION_TYPES: dict[str, tuple[type, ...]] = {
    **dict.fromkeys(("version", "partition", "from_snapshot"), (int,)),
    **dict.fromkeys(("store_name", "join_side", "state_var", "target_spark"), (str,)),
    **dict.fromkeys(("timers", "flatten", "force_schema"), (bool,)),
}


def _checked_options(fn: str, options: dict[str, Any]) -> dict[str, Any]:
    """``options`` of ``fn`` with their types checked (a ``"1"`` for ``partition`` failed deep inside, or read as no
    such partition "1" while naming partitions 0..1); ``key_schema`` / ``value_schema`` may be DDL text, as on the
    command line, or a :class:`ckptfix.formats.unsaferow.StructType`."""
    from ckptfix.formats import ddl
    from ckptfix.formats.unsaferow import StructType

    out = dict(options)
    for name, value in options.items():
        if value is None:
            continue
        if name in ("key_schema", "value_schema"):
            if isinstance(value, str):
                out[name] = ddl.parse_ddl(value, name)
            elif not isinstance(value, StructType):
                raise UsageError(f"{fn}: {name}: expected DDL text or a StructType, found {value!r}")
            continue
        types = _OPTION_TYPES.get(name)
        if types is None:
            continue
        if not isinstance(value, types) or (bool not in types and isinstance(value, bool)):
            raise UsageError(f"{fn}: {name}: expected {' or '.join(t.__name__ for t in types)}, found {value!r}")
    return out


def _url_and_ckpt(
    ckpt_or_url: Checkpoint | PathLike, storage_options: Mapping[str, Any] | None
) -> tuple[str, Checkpoint, dict[str, Any]]:
    if storage_options is not None and not isinstance(storage_options, Mapping):
        raise UsageError(f"storage_options: expected a mapping (fsspec keywords), found {storage_options!r}")
    if not isinstance(ckpt_or_url, (Checkpoint, str, os.PathLike)):
        raise UsageError(f"expected a checkpoint URL, a path or a Checkpoint, found {ckpt_or_url!r}")
    if not isinstance(ckpt_or_url, Checkpoint) and not isinstance(os.fspath(ckpt_or_url), str):
        raise UsageError(f"expected a checkpoint URL or path as text, found {ckpt_or_url!r}")
    if isinstance(ckpt_or_url, Checkpoint):
        loc = ckpt_or_url.location
        return loc.url, ckpt_or_url.fresh(), dict(storage_options or loc.storage_options)
    url = os.fspath(ckpt_or_url)
    return url, Checkpoint.open(url, storage_options), dict(storage_options or {})


@_python_names
def audit(
    ckpt_or_url: Checkpoint | PathLike,
    target_spark: str | None = None,
    *,
    storage_options: Mapping[str, Any] | None = None,
    deep: bool = False,
    sink_path: PathLike | None = None,
    stateful: bool | None = None,
    session_conf: Mapping[str, str] | None = None,
    progress: ProgressLike = None,
) -> Report:
    """The restart verdict (``report.verdict``: ``restarts`` True/False/None for unknown, ``headline``,
    ``error``) and every finding (``report.findings``), as ``ckptfix audit`` shows them.

    ``target_spark``: "3.5" ... "4.3" (default: the newest); ``session_conf``: confs of the session that
    will restart the query (``--conf``); ``progress``: see :mod:`ckptfix.progress`."""
    from ckptfix.audit.engine import audit as run_audit

    url, ckpt, opts = _url_and_ckpt(ckpt_or_url, storage_options)
    return run_audit(
        url,
        target_spark,
        storage_options=opts,
        deep=deep,
        sink_path=_fspath(sink_path),
        stateful=stateful,
        checkpoint=ckpt,
        session_conf=check_session_conf(session_conf or {}),
        progress=progress,
    )


@_python_names
def scan(
    locations: PathLike | Sequence[PathLike],
    target_spark: str | None = None,
    *,
    storage_options: Mapping[str, Any] | None = None,
    deep: bool = False,
    session_conf: Mapping[str, str] | None = None,
    progress: ProgressLike = None,
) -> ScanReport:
    """Every checkpoint at or below ``locations`` (one or several), audited as :func:`audit` does:
    ``.checkpoints`` holds per checkpoint its ``url``, ``.status`` ("restarts", "fails", "unknown", "unreadable"),
    ``.report`` (a :class:`Report`) or ``.error`` (why it could not be audited); ``.fails(fail_on, ignore)`` is
    what ``ckptfix scan --fail-on ... --ignore ...`` exits 1 for. A location that holds no checkpoint raises."""
    from ckptfix.audit.scan import scan as run_scan

    roots = [os.fspath(locations)] if isinstance(locations, (str, os.PathLike)) else [os.fspath(p) for p in locations]
    return run_scan(
        roots,
        target_spark,
        storage_options=storage_options,
        deep=deep,
        session_conf=check_session_conf(session_conf or {}),
        progress=progress,
    )


def _plain_text(render: Callable[[Any], None]) -> str:
    """What ``render`` (a :mod:`ckptfix.render.text` function given a rich Console) prints, without colours: the
    ``describe()`` of the API's objects is the CLI's text."""
    from io import StringIO

    from rich.console import Console

    buf = StringIO()
    render(Console(file=buf, width=120, color_system=None, markup=False, emoji=False, highlight=False))
    return buf.getvalue()


def _plan_repr(obj: object, plan: Plan, *more: str) -> str:
    """A plan's repr: what it does, in one line (the dataclass repr held every byte the plan writes, and the storage
    options, which may hold secrets). ``describe()`` shows the plan itself."""
    ops = ", ".join(f"{n} {op}" for op, n in sorted(Counter(a.op for a in plan.actions).items())) or "no action"
    return f"<{type(obj).__name__} {plan.checkpoint!r} fix={plan.fix} {ops}{''.join(' ' + m for m in more)}>"


@dataclass
class RepairPlan:
    """A repair plan with the audit it answers. Nothing is written until :meth:`apply`."""

    plan: Plan
    report: Report
    #: error findings the plan does not fix: ``rule_id``, ``reason`` and the finding's file (``path``, or None);
    #: ``str(u)`` is the line ``ckptfix repair`` prints ("RULE-ID: reason")
    unfixed: list[Unfixed]
    url: str
    storage_options: dict[str, Any] = field(default_factory=dict)
    target_spark: str | None = None
    session_conf: dict[str, str] = field(default_factory=dict)  # the restarting session's confs (audit_after's too)

    @property
    def empty(self) -> bool:
        return self.plan.empty

    def __repr__(self) -> str:
        return _plan_repr(self, self.plan, f"unfixed={len(self.unfixed)}")

    def describe(self) -> str:
        """The plan as ``ckptfix repair`` prints it (without colours)."""
        from ckptfix.render import text

        return _plain_text(lambda console: text.plan(self.plan, self.unfixed, console))

    def to_json(self) -> dict[str, Any]:
        return {"plan": self.plan.to_json(), "unfixed": [u.to_json() for u in self.unfixed]}

    @_python_names
    def apply(
        self,
        *,
        backup_url: PathLike | None = None,
        force: bool = False,
        idle_seconds: float = 120,
        progress: ProgressLike = None,
        partial: bool = False,
    ) -> str:
        """Back up every file the plan changes, carry it out, journal each step; returns the run id
        (``ckptfix undo CKPT RUN`` restores every byte). Refuses while the checkpoint is being written
        (``force`` skips that check) and when a file changed since the plan was made; and, as ``ckptfix repair
        --apply`` does, while error findings stay unfixed (:attr:`unfixed`), unless ``partial``."""
        blocking = [u for u in self.unfixed if u.blocks]  # an undecided restart alone does not hold it back
        if blocking and not partial and not self.plan.empty:
            raise UsageError(
                f"not applied: {', '.join(sorted({u.rule_id for u in blocking}))} stay unfixed, so the query "
                "would still not restart as it should; deal with them first, or pass partial=True"
            )
        return _apply(self.plan, self.url, self.storage_options, backup_url, force, idle_seconds, progress)

    def audit_after(self) -> Report:
        """Audit the checkpoint again (after :meth:`apply`)."""
        return audit(self.url, self.target_spark, storage_options=self.storage_options, session_conf=self.session_conf)


@_python_names
def plan_repair(
    ckpt_or_url: Checkpoint | PathLike,
    target_spark: str | None = None,
    *,
    storage_options: Mapping[str, Any] | None = None,
    sink_path: PathLike | None = None,
    stateful: bool | None = None,
    strategy: str | None = None,
    query_id: str | None = None,
    accept_edits: bool = False,
    session_conf: Mapping[str, str] | None = None,
) -> RepairPlan:
    """The plan ``ckptfix repair`` shows: a fix for every error finding that has one. ``query_id`` and
    ``accept_edits`` are ``repair --query-id`` (the query id to restore a missing metadata file with) and
    ``--accept-edits`` (keep log files edited after Spark wrote them, regenerating their .crc sidecars);
    ``session_conf`` the confs of the session that will restart the query (``repair --conf``, as for
    :func:`audit`)."""
    from ckptfix.repair.planning import STRATEGIES
    from ckptfix.repair.planning import plan_repair as make_plan

    url, _, opts = _url_and_ckpt(ckpt_or_url, storage_options)
    plan, report, unfixed = make_plan(
        url,
        target_spark,
        strategy=strategy or STRATEGIES[0],
        storage_options=opts,
        sink_path=_fspath(sink_path),
        stateful=stateful,
        options={"query_id": query_id, "accept_edits": accept_edits},
        session_conf=check_session_conf(session_conf or {}),
    )
    return RepairPlan(plan, report, unfixed, url, opts, target_spark, dict(session_conf or {}))


@dataclass
class StatePlan:
    """A state surgery plan (``ckptfix state delete`` / ``state put``): the snapshots of state version
    last batch + 1 for the partitions that change. Nothing is written until :meth:`apply`."""

    plan: Plan
    url: str
    storage_options: dict[str, Any] = field(default_factory=dict)
    #: input keys that are not in the state (delete), as "file: line n"
    not_found: list[str] = field(default_factory=list)

    def __repr__(self) -> str:
        return _plan_repr(self, self.plan)

    def describe(self) -> str:
        """The plan as ``ckptfix state delete/put`` prints it (without colours)."""
        from ckptfix.render import text

        return _plain_text(lambda console: text.plan(self.plan, [], console))

    @_python_names
    def apply(
        self,
        *,
        backup_url: PathLike | None = None,
        force: bool = False,
        idle_seconds: float = 120,
        progress: ProgressLike = None,
    ) -> str:
        """Back up, write, journal; returns the run id (``ckptfix undo CKPT RUN`` restores every byte). Refuses
        while the query runs (``force`` skips that check) and when a file changed since the plan."""

        return _apply(self.plan, self.url, self.storage_options, backup_url, force, idle_seconds, progress)


@_python_names
def plan_state_delete(
    ckpt_or_url: Checkpoint | PathLike,
    operator: int = 0,
    *,
    keys_file: PathLike | None = None,
    where: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
    **options: Any,
) -> StatePlan:
    """``ckptfix state delete``: delete the keys of ``keys_file`` (JSON lines / Parquet) or those matching ``where``
    (``"key IN ('a', 'b')"``; see docs/state-surgery.md) from the state the restart loads. ``options``:
    ``key_schema``/``value_schema`` (StructType), ``force_schema``, ``target_spark``."""
    from ckptfix.repair.surgery import plan_state_delete as make_plan

    options = _checked_options("plan_state_delete", options)
    url, ckpt, opts = _url_and_ckpt(ckpt_or_url, storage_options)
    result = make_plan(
        ckpt, operator=operator, keys_file=_fspath(keys_file), where=where, storage_options=opts, **options
    )
    return StatePlan(result.plan, url, opts, result.not_found)


@_python_names
def plan_state_put(
    ckpt_or_url: Checkpoint | PathLike,
    rows_file: PathLike,
    operator: int = 0,
    *,
    storage_options: Mapping[str, Any] | None = None,
    **options: Any,
) -> StatePlan:
    """``ckptfix state put``: write the rows of ``rows_file`` (``{"key": ..., "value": ...}`` per line, or
    Parquet), checked against the stored schemas, into the state the restart loads."""
    from ckptfix.repair.surgery import plan_state_put as make_plan

    options = _checked_options("plan_state_put", options)
    url, ckpt, opts = _url_and_ckpt(ckpt_or_url, storage_options)
    result = make_plan(ckpt, operator=operator, rows_file=os.fspath(rows_file), storage_options=opts, **options)
    return StatePlan(result.plan, url, opts)


@dataclass(repr=False)  # the one-line repr of StatePlan, not every byte and the storage options
class SinkPairPlan(StatePlan):
    """A checkpoint's plan and, with a file sink, a second plan on the sink (``sink_plan``, applied where
    ``sink``). :attr:`SINK_FIRST` says which runs first: the order that leaves a crash between them recoverable.
    Nothing is written until :meth:`apply`."""

    SINK_FIRST: ClassVar[bool] = False
    sink_plan: Plan | None = None
    sink: str | None = None
    #: the sink's run id, once :meth:`apply` ran it
    sink_run: str | None = None

    @_python_names
    def apply(
        self,
        *,
        backup_url: PathLike | None = None,
        force: bool = False,
        idle_seconds: float = 120,
        progress: ProgressLike = None,
        sink_backup_url: PathLike | None = None,
    ) -> str:
        """Both runs, in :attr:`SINK_FIRST` order; returns the checkpoint's run id ("" when its plan is empty; the
        sink's is ``self.sink_run``)."""

        def checkpoint() -> str:
            if self.plan.empty:
                return ""
            return StatePlan.apply(
                self, backup_url=backup_url, force=force, idle_seconds=idle_seconds, progress=progress
            )

        def sink() -> None:
            if self.sink_plan is not None and self.sink is not None and not self.sink_plan.empty:
                self.sink_run = _apply(
                    self.sink_plan, self.sink, self.storage_options, sink_backup_url, force, idle_seconds, progress
                )

        if self.SINK_FIRST:
            sink()
            return checkpoint()
        run_id = checkpoint()
        sink()
        return run_id


@dataclass(repr=False)  # the one-line repr of StatePlan, not every byte and the storage options
class RepartitionPlan(SinkPairPlan):
    """``ckptfix state repartition``: the repartition batch, and with ``sink_path`` the file sink's entry for it.
    The checkpoint's run comes first: a failure between them leaves the sink without its entry, and planning
    again writes it."""


@dataclass(repr=False)  # the one-line repr of StatePlan, not every byte and the storage options
class RollbackPlan(SinkPairPlan):
    """``ckptfix rollback``: offsets, commits and state versions after batch N deleted, and with ``with_sink`` the
    file sink's rollback. The sink's run comes first (docs/repair.md, "the crash window"): a failure between them
    leaves the sink behind the checkpoint, which Spark fills again, never ahead of it; plan again to finish."""

    SINK_FIRST: ClassVar[bool] = True


@_python_names
def plan_rollback(
    ckpt_or_url: Checkpoint | PathLike,
    to_batch: int | None = None,
    target_spark: str | None = None,
    *,
    to_time: str | int | datetime | None = None,
    storage_options: Mapping[str, Any] | None = None,
    sink_path: PathLike | None = None,
    with_sink: bool = False,
    force: bool = False,
    idle_seconds: float = 120,
    session_conf: Mapping[str, str] | None = None,
    accept_edits: bool = False,
) -> RollbackPlan:
    """``ckptfix rollback --to-batch N``: batch N becomes the last committed one. Raises ``RollbackRefused`` (a
    ``CkptfixError``) with the reason when N is not committed, the query looks alive (``force`` skips that check),
    the sink (``sink_path``) holds later batches and ``with_sink`` is not given, or state version N+1 cannot be
    loaded from what remains. ``session_conf``: the restarting session's confs (``--conf``), for what the logs do
    not record. ``accept_edits``: keep a log file of the new restart tail edited after Spark wrote it (its ``.crc``
    sidecar is rewritten to record the edit), as ``repair(accept_edits=True)``; without it that rollback is
    refused. ``to_time`` instead of ``to_batch`` (``--to-time``): the newest committed batch planned at or before
    it (an ISO 8601 string with its zone, a timezone-aware ``datetime``, or epoch milliseconds).
    ``rollback --into`` (roll back a copy) has no API form: copy the checkpoint first."""
    from ckptfix.inspect import batch_at, parse_time
    from ckptfix.repair.rollback import plan_rollback as make_plan

    url, ckpt, opts = _url_and_ckpt(ckpt_or_url, storage_options)
    if (to_batch is None) == (to_time is None):
        raise UsageError("plan_rollback: give to_batch or to_time (one of them)")
    if to_time is not None:
        to_batch = batch_at(ckpt, parse_time(to_time, "to_time"), "to_time").batch
    assert to_batch is not None
    result = make_plan(
        url,
        to_batch,
        target_spark,
        storage_options=opts,
        sink_path=_fspath(sink_path),
        force=force,
        idle_seconds=idle_seconds,
        with_sink=with_sink,
        session_conf=session_conf,
        accept_edits=accept_edits,
    )
    return RollbackPlan(result.plan, url, opts, sink_plan=result.sink_plan, sink=result.sink)


@_python_names
def undo(
    ckpt_or_url: Checkpoint | PathLike,
    run_id: str | None = None,
    *,
    backup_url: PathLike | None = None,
    storage_options: Mapping[str, Any] | None = None,
    force: bool = False,
    idle_seconds: float = 120,
    progress: ProgressLike = None,
) -> str:
    """``ckptfix undo``: restore every file run ``run_id`` (default: the latest run not yet undone) changed, byte
    for byte, after checking that each still holds what ckptfix wrote; returns the run id. ``backup_url``: where
    the run's backups are (the default of ``apply``: ``<checkpoint>/_ckptfix``; a file sink's runs are in
    ``<sink>/_ckptfix``: pass the sink as ``ckpt_or_url``)."""
    from ckptfix.repair import engine

    ckpt, backup = _runs_of(ckpt_or_url, storage_options, backup_url)
    return engine.undo(ckpt, backup, run_id, progress, force=force, idle_seconds=idle_seconds)


@_python_names
def resume(
    ckpt_or_url: Checkpoint | PathLike,
    run_id: str | None = None,
    *,
    backup_url: PathLike | None = None,
    storage_options: Mapping[str, Any] | None = None,
    progress: ProgressLike = None,
) -> str:
    """``ckptfix apply --resume``: finish run ``run_id`` (default: the interrupted one) that stopped part way, as
    :class:`~ckptfix.errors.RunInterrupted` says (its ``run_id``); returns the run id. ``backup_url`` as for
    :func:`undo`."""
    from ckptfix.repair import engine

    ckpt, backup = _runs_of(ckpt_or_url, storage_options, backup_url)
    return engine.resume(ckpt, backup, run_id, progress)


@_python_names
def history(
    ckpt_or_url: Checkpoint | PathLike,
    *,
    backup_url: PathLike | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> list[RunInfo]:
    """``ckptfix history``: every ckptfix run on the checkpoint (``run_id``, ``fix``, ``created_at``, ``actions``,
    ``status``: complete, incomplete, undone, undo-incomplete or failed), oldest first."""
    from ckptfix.repair import engine

    _, backup = _runs_of(ckpt_or_url, storage_options, backup_url)
    runs = engine.Runs(backup)
    return [runs.info(r) for r in runs.run_ids()]


def _runs_of(
    ckpt_or_url: Checkpoint | PathLike, storage_options: Mapping[str, Any] | None, backup_url: PathLike | None
) -> tuple[Location, Location]:
    """The checkpoint (or file sink) and the backup location holding its runs (``backup_url`` or the default),
    checked to be that location's runs (undo, resume, history)."""
    from ckptfix.repair import engine

    url, opts = _url_of(ckpt_or_url, storage_options)
    backup = Location(_fspath(backup_url) or engine.default_backup_url(url), opts)
    engine.runs_home(url, backup, opts)
    return Location(url, opts), backup


def _url_of(
    ckpt_or_url: Checkpoint | PathLike, storage_options: Mapping[str, Any] | None
) -> tuple[str, dict[str, Any]]:
    """The URL and storage options, without listing (undo and history also take a file sink ckptfix rolled back)."""
    if isinstance(ckpt_or_url, Checkpoint):
        loc = ckpt_or_url.location
        return loc.url, dict(storage_options or loc.storage_options)
    return os.fspath(ckpt_or_url), dict(storage_options or {})


@_python_names
def plan_repartition(
    ckpt_or_url: Checkpoint | PathLike,
    partitions: int,
    *,
    sink_path: PathLike | None = None,
    sink_compact_interval: int = 10,
    target_spark: str = "4.3",
    storage_options: Mapping[str, Any] | None = None,
) -> RepartitionPlan:
    """``ckptfix state repartition``: move the state of the last committed batch into ``partitions`` partitions
    (docs/state-repartition.md); ``sink_path``: the query's file sink, which gets its entry for that batch."""
    from ckptfix.repair.repartition import plan_repartition as make_plan

    url, ckpt, opts = _url_and_ckpt(ckpt_or_url, storage_options)
    result = make_plan(
        ckpt,
        partitions,
        target_spark=target_spark,
        storage_options=opts,
        sink_path=_fspath(sink_path),
        sink_compact_interval=sink_compact_interval,
    )
    return RepartitionPlan(result.plan, url, opts, sink_plan=result.sink_plan, sink=result.sink)


@_python_names
def read_state(
    ckpt_or_url: Checkpoint | PathLike,
    operator: int = 0,
    batch: int | None = None,
    *,
    storage_options: Mapping[str, Any] | None = None,
    as_arrow: bool | None = None,
    **options: Any,
) -> Any:
    """The state rows of ``operator`` after ``batch`` (default: the last committed batch), with the columns
    Spark's ``statestore`` reader shows (key, value, partition_id; flattened as ``ckptfix state read`` does).

    Returns a ``pyarrow.Table`` when pyarrow is installed (``as_arrow=False``: an iterator of dicts instead;
    ``as_arrow=True`` without pyarrow raises :class:`~ckptfix.errors.MissingExtra`). ``options`` are those of
    ``ckptfix state read``: ``version``, ``partition``, ``store_name``, ``join_side``, ``state_var``, ``timers``,
    ``from_snapshot``, ``flatten``, ``where`` (only the rows whose key matches: ``"k = 3"``, as ``--where``)."""
    from ckptfix.state.read import read_state as run_read

    unknown = sorted(set(options) - READ_OPTIONS)
    if unknown:
        raise UsageError(f"read_state: expected keywords among {', '.join(sorted(READ_OPTIONS))}, found {unknown[0]!r}")
    options = _checked_options("read_state", options)
    _, ckpt, opts = _url_and_ckpt(ckpt_or_url, storage_options)
    flatten = options.pop("flatten", True)
    read = run_read(ckpt, flatten=flatten, operator=operator, batch=batch, storage_options=opts, **options)
    return _rows_out(read, as_arrow)


def _rows_out(read: Any, as_arrow: bool | None) -> Any:
    """A state read's rows: a ``pyarrow.Table`` (``as_arrow`` None: when pyarrow is installed), or the iterator of
    dicts."""
    from ckptfix.state import export

    if as_arrow is None:
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            as_arrow = False
        else:
            as_arrow = True
    if as_arrow:
        return export.arrow_table(read.rows, read.columns, read.schemas)
    return read.rows


@_python_names
def read_changes(
    ckpt_or_url: Checkpoint | PathLike,
    from_batch: int,
    to_batch: int | None = None,
    operator: int = 0,
    *,
    storage_options: Mapping[str, Any] | None = None,
    as_arrow: bool | None = None,
    **options: Any,
) -> Any:
    """``ckptfix state changes``: the change feed (batch_id, change_type, key, value, partition_id) of batches
    ``from_batch`` .. ``to_batch`` (default: the last committed), as Spark's ``readChangeFeed`` shows it; a
    ``pyarrow.Table`` or an iterator of dicts, as :func:`read_state`. ``options``: ``partition``, ``store_name``,
    ``state_var``, ``key_schema``, ``value_schema``, ``force_schema``."""
    from ckptfix.state.read import read_changes as run_changes

    unknown = sorted(set(options) - CHANGES_OPTIONS)
    if unknown:
        raise UsageError(
            f"read_changes: expected keywords among {', '.join(sorted(CHANGES_OPTIONS))}, found {unknown[0]!r}"
        )
    options = _checked_options("read_changes", options)
    _, ckpt, opts = _url_and_ckpt(ckpt_or_url, storage_options)
    read = run_changes(
        ckpt, from_batch=from_batch, to_batch=to_batch, operator=operator, storage_options=opts, **options
    )
    return _rows_out(read, as_arrow)


@_python_names
def inspect_checkpoint(
    ckpt_or_url: Checkpoint | PathLike, *, batches: bool = False, storage_options: Mapping[str, Any] | None = None
) -> Any:
    """``ckptfix inspect``: a :class:`ckptfix.inspect.Inspection` (query id, recorded confs, offsets and commits,
    sources, stateful operators, and the problems met while reading them); ``batches`` (``--batches``): also
    ``.batches``, every batch of the offset log with its time, watermark, commit and source offsets."""
    from ckptfix.inspect import inspect_checkpoint as run_inspect

    _, ckpt, _ = _url_and_ckpt(ckpt_or_url, storage_options)
    return run_inspect(ckpt, batches=batches)


@_python_names
def list_state(
    ckpt_or_url: Checkpoint | PathLike, *, verify: bool = False, storage_options: Mapping[str, Any] | None = None
) -> Any:
    """``ckptfix state ls``: a :class:`ckptfix.state.inventory.StateListing` of every operator, store and
    partition and the versions each can load (``.ok``: the last committed version loads everywhere). ``verify``
    reads and checks every file of the last version's chain."""
    from ckptfix.state.inventory import list_state as run_list

    _, ckpt, _ = _url_and_ckpt(ckpt_or_url, storage_options)
    return run_list(ckpt, verify=verify)


@_python_names
def export_offsets(
    ckpt_or_url: Checkpoint | PathLike, batch: int | None = None, *, storage_options: Mapping[str, Any] | None = None
) -> Any:
    """``ckptfix offsets export``: each source's committed offsets at ``batch`` (default: the last committed), as
    a new query's starting point (a :class:`ckptfix.offsets_export.OffsetsExport`; ``.to_json()``)."""
    from ckptfix.offsets_export import export_offsets as run_export

    url, opts = _url_of(ckpt_or_url, storage_options)
    return run_export(url, batch, storage_options=opts)


@dataclass(repr=False)  # the one-line repr of StatePlan, not every byte and the storage options
class ProviderPlan(StatePlan):
    """``ckptfix migrate provider``: the last committed state version written for the other provider, the old
    provider's files deleted, the offset log's provider changed. :attr:`session_confs` are the confs the
    restarting session must set (Spark does not keep them in the offset log)."""

    session_confs: dict[str, str] = field(default_factory=dict)


@_python_names
def plan_provider(
    ckpt_or_url: Checkpoint | PathLike,
    to: str,
    *,
    changelog: bool | None = None,
    target_spark: str = "4.3",
    storage_options: Mapping[str, Any] | None = None,
) -> ProviderPlan:
    """``ckptfix migrate provider --to rocksdb|hdfs`` (``changelog``: ``--changelog on|off``)."""
    from ckptfix.migrate.provider import plan_provider as make_plan

    url, ckpt, opts = _url_and_ckpt(ckpt_or_url, storage_options)
    result = make_plan(ckpt, to, changelog=changelog, target_spark=target_spark, storage_options=opts)
    return ProviderPlan(result.plan, url, opts, session_confs=dict(result.session_confs))


@_python_names
def plan_rebuild(
    ckpt_or_url: Checkpoint | PathLike,
    *,
    version: int | None = None,
    batch: int | None = None,
    operator: int | None = None,
    partition: int | None = None,
    prune: bool = False,
    retain: int | None = None,
    target_spark: str = "4.3",
    storage_options: Mapping[str, Any] | None = None,
) -> StatePlan:
    """``ckptfix state rebuild``: a snapshot of a state version (default: the last committed) written from the
    newest good snapshot before it and the deltas/changelogs; ``prune`` then deletes what Spark's cleanup would
    (``retain``: minBatchesToRetain)."""
    from ckptfix.repair.rebuild import plan_rebuild as make_plan

    url, ckpt, opts = _url_and_ckpt(ckpt_or_url, storage_options)
    result = make_plan(
        ckpt,
        version=version,
        batch=batch,
        operator=operator,
        partition=partition,
        prune=prune,
        retain=retain,
        target_spark=target_spark,
        storage_options=opts,
    )
    return StatePlan(result.plan, url, opts)


@dataclass
class RelocatePlan:
    """``ckptfix migrate relocate``: the copy of a checkpoint to ``dest`` with what holds absolute paths
    rewritten (``plan``: a :class:`ckptfix.migrate.relocate.RelocationPlan`). The source is only read; nothing is
    written until :meth:`apply`."""

    plan: Any
    storage_options: dict[str, Any] = field(default_factory=dict)
    dest_storage_options: dict[str, Any] = field(default_factory=dict)

    def __repr__(self) -> str:
        p = self.plan
        return f"<RelocatePlan {p.source!r} -> {p.dest!r} files={len(p.files)} rewrites={len(p.rewrites)}>"

    def describe(self) -> str:
        """The plan as ``ckptfix migrate relocate`` prints it."""
        from ckptfix.render import text

        return _plain_text(lambda console: text.relocation({"plan": self.plan.to_json()}, False, console))

    def to_json(self) -> dict[str, Any]:
        return dict(self.plan.to_json())

    def apply(self, *, progress: ProgressLike = None) -> Any:
        """Copy and rewrite into ``dest``; returns a :class:`ckptfix.migrate.relocate.RelocationResult`. An
        interrupted apply leaves ``dest`` without ``metadata``: plan and apply again to finish it."""
        from ckptfix.migrate.relocate import apply_relocation

        return apply_relocation(
            self.plan, source_options=self.storage_options, dest_options=self.dest_storage_options, progress=progress
        )


@_python_names
def plan_relocation(
    source: Checkpoint | PathLike,
    dest: PathLike,
    *,
    input_from: str | None = None,
    input_to: str | None = None,
    force: bool = False,
    idle_seconds: float = 120,
    storage_options: Mapping[str, Any] | None = None,
    dest_storage_options: Mapping[str, Any] | None = None,
    progress: ProgressLike = None,
) -> RelocatePlan:
    """``ckptfix migrate relocate SRC DEST``: refuses a non-empty ``dest``, ``dest`` inside ``source``, a source
    that looks alive (``force`` / ``idle_seconds``). ``input_from``/``input_to``: the file source's input moved too.
    ``dest_storage_options`` default to ``storage_options``."""
    from ckptfix.migrate.relocate import plan_relocation as make_plan

    url, opts = _url_of(source, storage_options)
    dest_opts = dict(dest_storage_options) if dest_storage_options is not None else opts
    plan = make_plan(
        url,
        os.fspath(dest),
        source_options=opts,
        dest_options=dest_opts,
        input_from=input_from,
        input_to=input_to,
        force=force,
        idle_seconds=idle_seconds,
        progress=progress,
    )
    return RelocatePlan(plan, opts, dest_opts)


@_python_names
def advise(
    progress_files: PathLike | list[PathLike],
    *,
    concurrency: int | None = None,
    query: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> Any:
    """``ckptfix advise``: per query, batch durations, state commit times and recommendations with the numbers
    behind them (a :class:`ckptfix.advise.analyze.Advice`) from ``StreamingQueryProgress`` events: JSON, JSON lines
    or a driver log, as paths or fsspec URLs. ``query``: only the query with this name, id or runId;
    ``concurrency``: the task slots running the stateful stage."""
    from ckptfix.advise import advise as run_advise

    files = progress_files if isinstance(progress_files, list) else [progress_files]
    if isinstance(concurrency, bool) or (
        concurrency is not None and (not isinstance(concurrency, int) or concurrency < 1)
    ):
        raise UsageError(f"advise: concurrency: expected a positive int, found {concurrency!r}")
    return run_advise([os.fspath(f) for f in files], dict(storage_options or {}), concurrency=concurrency, query=query)


@_python_names
def async_off(
    ckpt_or_url: Checkpoint | PathLike,
    query: str,
    *,
    apply: bool = False,
    verify: bool = False,
    min_batches: int = 2,
    timeout: float = 300.0,
    resume: bool = False,
    query_id: str | None = None,
    master: str | None = None,
    session_conf: Mapping[str, str] | None = None,
    backup_url: PathLike | None = None,
    force: bool = False,
    idle_seconds: float = 120,
    storage_options: Mapping[str, Any] | None = None,
    progress: ProgressLike = None,
) -> Any:
    """``ckptfix async-off``: the documented sequence for turning asynchronous progress tracking off, run with
    PySpark (a :class:`ckptfix.spark.async_off.Outcome`: ``status``, ``steps``, ``new_batches``, ``ok``).
    ``query`` is ``"MODULE:FUNCTION"`` (MODULE may be a .py path): FUNCTION(spark) returns the query's unstarted
    DataStreamWriter; a name, not a callable, because an interrupted run is resumed (``resume=True``) from its
    journal. Without ``apply`` nothing runs: the preflight and the steps it would take."""
    from ckptfix.spark.async_off import Options
    from ckptfix.spark.async_off import async_off as run_async_off

    url, opts = _url_of(ckpt_or_url, storage_options)
    options = Options(
        apply=apply,
        verify=verify,
        min_batches=min_batches,
        timeout=timeout,
        resume=resume,
        query_id=query_id,
        master=master,
        confs=dict(session_conf or {}),
        backup_dir=_fspath(backup_url),
        force=force,
        idle_seconds=idle_seconds,
        storage_options=opts,
    )
    return run_async_off(url, query, options, progress)
