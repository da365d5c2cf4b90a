"""Apply, resume and undo plans.

Order of work in ``apply`` (so that a crash at any point is recoverable):

1. re-check every precondition against the bytes in the checkpoint now, and that the query
   looks idle; nothing is written if anything differs;
2. write the plan into the run directory and journal ``start``;
3. back up every original (content-addressed ``objects/<sha256>``, verified after writing);
4. per action: journal ``begin``, write or delete atomically, journal ``done``;
5. journal ``complete``.

Recovery never trusts the journal alone: ``resume`` and ``undo`` look at each file and
compare it with the action's ``before`` and ``after`` states, so a step interrupted between
its write and its journal line is still recognised.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import shlex
import signal
import socket
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from ckptfix.checkpoint import Checkpoint, mark_written
from ckptfix.errors import (
    BackupError,
    CkptfixError,
    FormatError,
    JournalError,
    LiveQuery,
    Locked,
    NoRun,
    NotACheckpoint,
    PreconditionFailed,
    RunInterrupted,
)
from ckptfix.formats import commitlog, metadata, offsetlog, opmeta
from ckptfix.progress import ProgressLike, progress_of
from ckptfix.repair.plan import Action, FileState, Plan, PlanError, loads, sha256
from ckptfix.storage import OWN_TEMP, Location

#: one step's message (the engine's internal view of :class:`ckptfix.progress.Progress`)
Say = Callable[[str], None]
RUNS = "runs"
OBJECTS = "objects"
LOCK = "lock"
#: test hook: the process is killed (SIGKILL) right after this many durable writes of a run
CRASH_ENV = "CKPTFIX_TEST_CRASH_AFTER"


def default_backup_url(checkpoint_url: str) -> str:
    """Backups live beside Spark's directories, inside the checkpoint: ``<ckpt>/_ckptfix``."""
    return checkpoint_url.rstrip("/") + "/_ckptfix"


#: in a checkpoint's own backup location, one small file per run journaled in another one (``--backup-dir``),
#: naming it: ``history`` and ``undo`` of the checkpoint find those runs through it
ELSEWHERE = "elsewhere"


def point_home(ckpt: Location, backup: Location, run_id: str) -> None:
    """Record in the checkpoint's own backup location that run ``run_id`` is journaled in ``backup`` (new-user
    trial 3: after `repair --apply --backup-dir B`, `history CKPT` did not list the run and `undo CKPT` said there
    was nothing to undo)."""
    home = Location(default_backup_url(ckpt.url), ckpt.storage_options)
    if _same_url(home.url, backup.url):
        return
    doc = {"run_id": run_id, "backup": backup.url}
    home.write_atomic(f"{ELSEWHERE}/{run_id}.json", json.dumps(doc, separators=(",", ":")).encode())


def unpoint_home(ckpt: Location, backup: Location, run_id: str) -> None:
    """Once run ``run_id`` is undone, remove what :func:`point_home` wrote for it (and the directories, once empty):
    the checkpoint holds its bytes of before the run again, ckptfix's own directory included."""
    home = Location(default_backup_url(ckpt.url), ckpt.storage_options)
    if _same_url(home.url, backup.url):
        return
    rel = f"{ELSEWHERE}/{run_id}.json"
    if home.read_if_exists(rel) is not None:
        home.delete(rel)
    prefix = home.url[len(ckpt.url.rstrip("/")) + 1 :] if home.url.startswith(ckpt.url.rstrip("/") + "/") else None
    if prefix:
        for d in (f"{prefix}/{ELSEWHERE}", prefix):
            ckpt.remove_empty_directory(d)


def runs_elsewhere(ckpt: Location, backup: Location) -> list[tuple[RunInfo, Location]]:
    """Every run on this checkpoint journaled in a backup location other than ``backup`` (that the checkpoint's
    own location points to, :func:`point_home`), oldest first; a pointer whose run cannot be read is left out."""
    home = Location(default_backup_url(ckpt.url), ckpt.storage_options)
    try:
        entries = home.list_tree(ELSEWHERE)
    except FileNotFoundError:
        return []
    found: list[tuple[RunInfo, Location]] = []
    for rel in sorted(entries):
        try:
            doc = json.loads(home.read(rel))
            where = Location(str(doc["backup"]), ckpt.storage_options)
            if _same_url(where.url, backup.url):
                continue
            found.append((Runs(where).info(str(doc["run_id"])), where))
        except (ValueError, KeyError, TypeError, OSError, CkptfixError):
            continue
    return sorted(found, key=lambda x: x[0].run_id)


def other_runs(ckpt: Location, backup: Location) -> list[tuple[RunInfo, Location]]:
    """The runs on this checkpoint journaled anywhere but ``backup``: in other locations the checkpoint points to
    and, when ``backup`` is not its own location, in that one (oldest first)."""
    found = runs_elsewhere(ckpt, backup)
    home = Location(default_backup_url(ckpt.url), ckpt.storage_options)
    if not _same_url(home.url, backup.url):
        theirs = Runs(home)
        for run_id in theirs.run_ids():
            try:
                info = theirs.info(run_id)
            except CkptfixError:
                continue
            if _same_url(info.checkpoint, ckpt.url):
                found.append((info, home))
    return sorted(found, key=lambda x: x[0].run_id)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


class _Crash:
    """The crash hook's count of durable writes: one per process, so that a command made of several runs
    (``rollback --with-sink``: the sink's, then the checkpoint's) can be killed at any of its writes."""

    _process: _Crash | None = None

    def __init__(self) -> None:
        raw = os.environ.get(CRASH_ENV)
        self.left = int(raw) if raw and raw.isdigit() else None

    @classmethod
    def of_process(cls) -> _Crash:
        if cls._process is None:
            cls._process = cls()
        return cls._process

    def tick(self) -> None:
        if self.left is None:
            return
        self.left -= 1
        if self.left <= 0:
            os.kill(os.getpid(), signal.SIGKILL)  # kill -9 itself: no cleanup, no flush of anything


#: a run id: creation time in UTC to the microsecond, the run's number in its backup store (one more than the
#: highest before it, given under the lock), a random tag: ``20250102T030405.123456-0007-1a2b3c4d``
RUN_ID = re.compile(r"(?P<time>[0-9]{8}T[0-9]{6}\.[0-9]{6})-(?P<seq>[0-9]{4,})-(?P<tag>[0-9a-f]+)")
#: the ids of ckptfix before sequence numbers: time to the second and a random tag (``20250102T030405-1a2b3c4d``)
OLD_RUN_ID = re.compile(r"(?P<time>[0-9]{8}T[0-9]{6})-(?P<tag>[0-9a-f]+)")


def new_run_id(existing: Iterable[str], now: datetime | None = None) -> str:
    """The id of a run created after ``existing``: its sequence number is one more than the highest recorded (and
    than the number of runs, so that it reads as the run's place after older ids without one)."""
    ids = list(existing)
    seqs = [int(m.group("seq")) for m in map(RUN_ID.fullmatch, ids) if m is not None]
    seq = max([len(ids), *seqs]) + 1
    stamp = (now or datetime.now(timezone.utc)).strftime("%Y%m%dT%H%M%S.%f")
    return f"{stamp}-{seq:04d}-{uuid.uuid4().hex[:8]}"


def run_order(run_ids: Iterable[str], started_at: Callable[[str], str]) -> list[str]:
    """Runs oldest first, i.e. in the order they were created. Ids with a sequence number (:data:`RUN_ID`) go by
    it, whatever the clocks of the machines that made them said; older ids (:data:`OLD_RUN_ID`, time to the
    second) come before them (a ckptfix that numbers runs came later), by time, and two in the same second by
    ``started_at`` (the first journal entry, to the millisecond), never by their random tags."""
    ids = set(run_ids)
    old: dict[str, str] = {}  # an old id -> its second
    for run_id in ids:
        m = None if RUN_ID.fullmatch(run_id) else OLD_RUN_ID.fullmatch(run_id)
        if m is not None:
            old[run_id] = m.group("time")
    seconds = Counter(old.values())

    def key(run_id: str) -> tuple[int, int, str, str, str]:
        new = RUN_ID.fullmatch(run_id)
        if new is not None:
            return (1, int(new.group("seq")), new.group("time"), "", run_id)
        stamp = old.get(run_id)
        if stamp is None:  # a directory ckptfix did not name: by its name, before every run it did
            return (0, 0, "", "", run_id)
        tie = started_at(run_id) if seconds[stamp] > 1 else ""
        return (0, 1, stamp, tie, run_id)

    return sorted(ids, key=key)


@dataclass
class RunInfo:
    run_id: str
    fix: str
    checkpoint: str
    created_at: str
    actions: int
    status: str  # complete | incomplete | undone | undo-incomplete | failed (a driver's run that did not get there)
    events: list[dict[str, Any]] = field(default_factory=list)


class Runs:
    """The backup location: content-addressed objects and one directory per run."""

    def __init__(self, backup: Location) -> None:
        self.loc = backup
        self.crash = _Crash.of_process()

    # -- objects ----------------------------------------------------------------------------
    def store_object(self, data: bytes) -> str:
        digest = sha256(data)
        rel = f"{OBJECTS}/{digest}"
        try:
            self.loc.create_exclusive(rel, data)
            self.crash.tick()
        except FileExistsError:
            pass  # stored by an earlier run (or an interrupted one): verified below like a new one
        existing = self.loc.read(rel)
        if sha256(existing) != digest:
            raise BackupError(f"{self.loc.display(rel)}: expected sha256 {digest}, found {sha256(existing)}")
        return rel

    def load_object(self, state: FileState) -> bytes:
        assert state.sha256 is not None
        rel = f"{OBJECTS}/{state.sha256}"
        data = self.loc.read_if_exists(rel)
        if data is None:
            raise BackupError(
                f"{self.loc.display(rel)}: expected the backup of a file ({state.describe()}), found none"
            )
        if sha256(data) != state.sha256:
            raise BackupError(
                f"{self.loc.display(rel)}: expected sha256 {state.sha256}, found {sha256(data)} (backup altered)"
            )
        return data

    # -- runs -------------------------------------------------------------------------------
    def new_run(self, plan: Plan) -> str:
        """A new run directory holding the plan; its id is :func:`new_run_id` (callers hold the lock, so the
        sequence number is this store's next one)."""
        run_id = new_run_id(self.run_ids())
        self.loc.create_exclusive(f"{RUNS}/{run_id}/plan.json", plan.dumps().encode())
        self.crash.tick()
        return run_id

    def journal(self, run_id: str, event: str, **fields: Any) -> None:
        rel = f"{RUNS}/{run_id}/journal.jsonl"
        line = json.dumps({"at": _now(), "event": event, **fields}, separators=(",", ":")) + "\n"
        if self.loc.is_local:
            path = self.loc.path(rel)
            with open(path, "ab") as fh:
                fh.write(line.encode())
                fh.flush()
                os.fsync(fh.fileno())
        else:  # object stores cannot append: rewrite the (small) journal in one PUT
            self.loc.write_atomic(rel, (self.loc.read_if_exists(rel) or b"") + line.encode())
        self.crash.tick()

    def events(self, run_id: str) -> list[dict[str, Any]]:
        rel = f"{RUNS}/{run_id}/journal.jsonl"
        data = self.loc.read_if_exists(rel)
        if data is None:
            return []
        out: list[dict[str, Any]] = []
        offset = 0
        for number, line in enumerate(data.split(b"\n"), 1):
            if not line:
                offset += 1
                continue
            try:
                event = json.loads(line)
                if not isinstance(event, dict) or "event" not in event:
                    raise ValueError
            except ValueError:
                cut = offset + len(line) == len(data)
                raise JournalError(
                    f"{self.loc.display(rel)}: at byte {offset} (line {number}): expected a journal entry, found "
                    + ("a line cut off mid-write" if cut else repr(line[:40].decode(errors="replace")))
                ) from None
            out.append(event)
            offset += len(line) + 1
        return out

    def plan_of(self, run_id: str) -> Plan:
        rel = f"{RUNS}/{run_id}/plan.json"
        data = self.loc.read_if_exists(rel)
        if data is None:
            known = self.run_ids()
            more = " (the 5 newest; `ckptfix history` lists all)" if len(known) > 5 else ""
            listed = f"; runs recorded here: {', '.join(known[-5:])}{more}" if known else "; no runs are recorded here"
            raise JournalError(f"{self.loc.display(rel)}: expected the plan of run {run_id}, found none{listed}")
        return loads(data.decode("utf-8", errors="replace"), self.loc.display(rel))

    def run_ids(self) -> list[str]:
        """Every run recorded here, oldest first (:func:`run_order`): the one order of runs that ``undo``,
        ``history``, ``apply --resume`` and every "latest run" use."""
        try:
            entries = self.loc.list_tree(RUNS)
        except FileNotFoundError:
            return []
        ids = {p.split("/")[1] for p in entries if p.count("/") >= 1 and p.startswith(RUNS + "/")}
        return run_order(ids, self._started_at)

    def _started_at(self, run_id: str) -> str:
        """When the run's journal begins (milliseconds), "" when it has none or cannot be read."""
        try:
            events = self.events(run_id)
        except CkptfixError:
            return ""
        return str(events[0].get("at", "")) if events else ""

    def info(self, run_id: str) -> RunInfo:
        plan = self.plan_of(run_id)
        events = self.events(run_id)
        names = [e["event"] for e in events]
        if "undone" in names:
            status = "undone"
        elif "undo-start" in names:
            status = "undo-incomplete"
        elif "complete" in names:
            outcome = next(e.get("outcome") for e in events if e["event"] == "complete")
            status = "complete" if outcome in (None, "done") else "failed"
        else:
            status = "incomplete"
        return RunInfo(run_id, plan.fix, plan.checkpoint, plan.created_at, len(plan.actions), status, events)


# -- checking the checkpoint ---------------------------------------------------------------
def current_states(ckpt: Location, actions: tuple[Action, ...]) -> dict[str, bytes | None]:
    """The bytes now of every path the plan touches, and of every file a write copies."""
    paths = {a.path for a in actions} | {a.copy_of for a in actions if a.copy_of is not None}
    return {p: ckpt.read_if_exists(p) for p in sorted(paths)}


def check_preconditions(ckpt: Location, plan: Plan, now: dict[str, bytes | None]) -> None:
    for a in plan.actions:
        found = FileState.of(now[a.path])
        if found != a.before:
            raise PreconditionFailed(
                f"{ckpt.display(a.path)}: expected {a.before.describe()}, found {found.describe()} "
                "(the checkpoint changed since the plan was made; plan again)"
            )
    for a in plan.actions:
        if a.copy_of is not None:
            check_source(ckpt, a, now[a.copy_of])


def check_source(ckpt: Location, a: Action, data: bytes | None) -> None:
    """A copy's source must still hold the bytes the plan copied (its sha256 is in the plan)."""
    if a.copy_of is None or a.copy_of_state is None:
        return
    source = FileState.of(data)
    if source != a.copy_of_state:
        found = f"sha256 {source.sha256}" if source.exists else "no file"
        raise PreconditionFailed(
            f"{ckpt.display(a.copy_of)}: expected sha256 {a.copy_of_state.sha256} (the plan writes {a.path} as a "
            f"copy of it), found {found} (the checkpoint changed since the plan was made; plan again)"
        )


#: journal events around a driver's Spark run (async-off): what Spark writes between them is ckptfix's doing
SPARK_START, SPARK_STOP = "spark-start", "spark-stop"


@dataclass(frozen=True)
class OwnWrites:
    """What ckptfix itself wrote recently, so that the idle guard does not take it for a running query: the files
    its runs wrote or restored, and the time spans in which a driver of ckptfix (async-off) ran the query."""

    paths: frozenset[str] = frozenset()
    spans: tuple[tuple[float, float], ...] = ()

    def covers(self, path: str, mtime: float) -> bool:
        return path in self.paths or any(start - 1 <= mtime <= stop + 1 for start, stop in self.spans)

    def plus(self, paths: frozenset[str]) -> OwnWrites:
        return OwnWrites(self.paths | paths, self.spans)


def _stamp(event: dict[str, Any]) -> float | None:
    try:
        return datetime.fromisoformat(str(event.get("at"))).timestamp()
    except ValueError:
        return None


def own_writes(backup: Location, last: int = 20) -> OwnWrites:
    """What ckptfix's own recent runs (journal in ``backup``) wrote: not a running query's. A Spark run of a
    driver counts from its start to its journaled stop (a run killed before that stop counts not at all)."""
    runs = Runs(backup)
    paths: set[str] = set()
    spans: list[tuple[float, float]] = []
    for run_id in runs.run_ids()[-last:]:
        try:
            paths.update(a.path for a in runs.plan_of(run_id).actions)
            start: float | None = None
            for event in runs.events(run_id):
                if event["event"] == SPARK_START:
                    start = _stamp(event)
                elif event["event"] == SPARK_STOP and start is not None:
                    stop = _stamp(event)
                    if stop is not None:
                        spans.append((start, stop))
                    start = None
        except CkptfixError:
            continue
    return OwnWrites(frozenset(paths), tuple(spans))


def check_idle(ckpt: Location, plan: Plan, idle_seconds: float, ignore: OwnWrites = OwnWrites()) -> None:
    """Refuse a checkpoint that looks alive: recent writes (other than ``ignore``: ckptfix's own), or a batch
    newer than the plan."""
    from ckptfix.checkpoint import Checkpoint

    entries = ckpt.list_tree()
    fresh = Checkpoint(ckpt, entries)
    if (fresh.offsets.latest, fresh.commits.latest) != (plan.latest_offset, plan.latest_commit):
        raise LiveQuery(
            f"{ckpt.url}: expected latest offset {plan.latest_offset} and commit {plan.latest_commit} as when planned, "
            f"found {fresh.offsets.latest} and {fresh.commits.latest}: is the query running? (--force to override)"
        )
    check_recent_writes(ckpt, entries, idle_seconds, ignore)


WATCHED = ("offsets/", "commits/", "state/", "sources/", "metadata")
#: a file sink's log: its output path is the location of ``rollback --with-sink``'s sink run
SINK_LOG_PREFIX = "_spark_metadata/"


def spark_file_test(entries: dict[str, Any]) -> Callable[[str], bool]:
    """Which paths of this listing a running query writes. A checkpoint: its logs, state and metadata
    (:data:`WATCHED`). A file sink's output path (it has ``_spark_metadata/``): its log and every data file,
    i.e. every path outside directories Spark's readers skip (``_*``, ``.*``: ckptfix's ``_ckptfix`` too)."""
    if not any(p.startswith(SINK_LOG_PREFIX) for p in entries):
        return lambda p: p.startswith(WATCHED)

    def in_sink(p: str) -> bool:
        return p.startswith(SINK_LOG_PREFIX) or not any(part.startswith(("_", ".")) for part in p.split("/")[:-1])

    return in_sink


def check_recent_writes(
    ckpt: Location, entries: dict[str, Any], idle_seconds: float, ignore: OwnWrites = OwnWrites()
) -> None:
    now = time.time()
    spark_file = spark_file_test(entries)
    recent = [
        (now - e.mtime, p)
        for p, e in entries.items()
        if e.mtime is not None
        and spark_file(p)
        and not e.is_dir
        and not ignore.covers(p, e.mtime)
        and not OWN_TEMP.match(posixpath.basename(p))  # ckptfix's own, not a running query's
    ]
    young = [x for x in recent if x[0] < idle_seconds]
    if young:
        age, path = min(young)
        stamp = datetime.fromtimestamp(now - age, timezone.utc).isoformat(timespec="seconds")
        ages = [a for a, _ in young]
        copied = len(young) >= 3 and max(ages) - min(ages) < 2  # many files written within moments: a copy?
        hint = (
            f" ({len(young)} files written within {max(ages) - min(ages):.1f} s, as a copy writes them: if you just "
            "copied it, nothing is running)"
            if copied
            else ""
        )
        raise LiveQuery(
            f"{ckpt.display(path)}: expected no write in the last {idle_seconds:.0f} s, found one at {stamp} "
            f"({max(age, 0):.0f} s ago): is the query running?{hint} Stop it and wait, or pass --force "
            "(or --idle-seconds N) once you are sure nothing writes to this checkpoint"
        )


# -- before the first write -------------------------------------------------------------------
#: what a written file must parse as, by its path
_FORMATS: tuple[tuple[re.Pattern[str], Callable[[bytes, str], Any]], ...] = (
    (re.compile(r"offsets/[0-9]+"), offsetlog.parse),
    (re.compile(r"commits/[0-9]+"), commitlog.parse),
    (re.compile(r"metadata"), metadata.parse),
    (re.compile(r"state/[0-9]+/_metadata/(metadata|v2/[0-9]+)"), opmeta.parse),
)


def validate(plan: Plan, ckpt: Location, backup: Location) -> None:
    """Refuse a plan that cannot be carried out safely, before anything is written: one action per path,
    paths inside the checkpoint and outside the backup store, ``metadata`` never deleted, the checkpoint's
    query id the plan's, and every written log file parsing as the format its path says."""
    seen: set[str] = set()
    backup_rel = _inside_rel(backup.url, ckpt.url)
    for i, a in enumerate(plan.actions):
        where = f"plan action {i} ({a.op} {a.path})"
        if not a.path or a.path.startswith("/") or ".." in a.path.split("/") or "\\" in a.path:
            raise PlanError(f"{where}: expected a path inside the checkpoint, found {a.path!r}")
        if a.path in seen:
            raise PlanError(f"{where}: expected one action per path, found a second one for {a.path}")
        seen.add(a.path)
        if backup_rel is not None and (a.path == backup_rel or a.path.startswith(backup_rel + "/")):
            raise PlanError(f"{where}: expected a checkpoint file, found a path in the backup store {backup.url}")
        if a.op == "delete" and a.path == "metadata":
            raise PlanError(f"{where}: the query's metadata file is never deleted (it holds the query id)")
        if a.op == "write":
            for pattern, parse in _FORMATS:
                if pattern.fullmatch(a.path):
                    try:
                        parse(a.content or b"", f"{where}: the new {a.path}")
                    except FormatError as exc:
                        raise PlanError(f"{exc}: the plan would write a file Spark cannot read") from None
    if plan.query_id is not None:
        current = ckpt.read_if_exists("metadata")
        if current is not None:
            try:
                found = metadata.parse(current, ckpt.display("metadata")).id
            except FormatError:
                found = None  # a damaged metadata file: the plan may be the one that repairs it
            if found is not None and found != plan.query_id:
                raise PlanError(
                    f"{ckpt.display('metadata')}: expected query id {plan.query_id} (the plan's), found {found}: "
                    "the plan was made for another query's checkpoint"
                )


def _inside_rel(child: str, parent: str) -> str | None:
    base = parent.rstrip("/") + "/"
    return child[len(base) :].rstrip("/") if child.startswith(base) else None


def clean_own_temps(ckpt: Location, plan: Plan, say: Say) -> None:
    """Remove the temp files a killed ckptfix write left next to the plan's files (recognisable by name:
    ``.<name>.<uuid>.ckptfix.tmp``); nothing else is touched."""
    targets: dict[str, set[str]] = {}
    for a in plan.actions:
        directory, name = posixpath.split(a.path)
        targets.setdefault(directory, set()).add(name)
    for directory, names in sorted(targets.items()):
        try:
            entries = ckpt.list_tree(directory) if directory else ckpt.list_tree()
        except FileNotFoundError:
            continue
        for rel, entry in sorted(entries.items()):
            parent, base = posixpath.split(rel)
            m = OWN_TEMP.match(base)
            if entry.is_dir or parent != directory or m is None or m.group("name") not in names:
                continue
            ckpt.delete(rel)
            say(f"removed {rel}, left by an interrupted ckptfix write")


@contextmanager
def locked(backup: Location, command: str) -> Iterator[None]:
    """One ckptfix run at a time per checkpoint: a create-only lock file in the backup store (a conditional
    PUT on S3) naming its owner. A lock whose owner died on this host (a killed run) is taken over."""
    me = {"command": command, "pid": os.getpid(), "host": socket.gethostname(), "started_at": _now()}
    body = json.dumps(me).encode()
    for _ in range(2):
        try:
            backup.create_exclusive(LOCK, body)
            break
        except FileExistsError:
            held = _lock_owner(backup)
            if held is not None and held.get("host") == me["host"] and not _alive(held.get("pid")):
                backup.delete(LOCK)  # its owner was killed: recovery takes over
                continue
            raise Locked(_lock_message(backup, held)) from None
    else:
        raise Locked(_lock_message(backup, _lock_owner(backup)))
    try:
        yield
    finally:
        with suppress(FileNotFoundError):
            backup.delete(LOCK)


def _lock_owner(backup: Location) -> dict[str, Any] | None:
    data = backup.read_if_exists(LOCK)
    try:
        owner = json.loads(data) if data is not None else None
    except ValueError:
        return None
    return owner if isinstance(owner, dict) else None


def _alive(pid: Any) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return True  # cannot tell: treat as alive
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _lock_message(backup: Location, held: dict[str, Any] | None) -> str:
    where = backup.display(LOCK)
    if held is None:
        return f"{where}: expected no lock, found an unreadable one: if no ckptfix is running, remove it"
    started = str(held.get("started_at", "?"))
    try:
        age = f", {time.time() - datetime.fromisoformat(started).timestamp():.0f} s ago"
    except ValueError:
        age = ""
    return (
        f"{where}: another ckptfix run holds this checkpoint ({held.get('command')}, pid {held.get('pid')} on "
        f"{held.get('host')}, since {started}{age}); wait for it, or remove the lock file if it is gone"
    )


# -- apply / resume / undo -------------------------------------------------------------------


def _perform(ckpt: Location, a: Action) -> None:
    if a.op == "delete":
        ckpt.delete(a.path)
    elif a.before.exists:
        ckpt.write_atomic(a.path, a.content or b"")
    else:
        ckpt.create_exclusive(a.path, a.content or b"")


def apply(
    plan: Plan,
    ckpt: Location,
    backup: Location,
    *,
    force: bool = False,
    idle_seconds: float = 120,
    progress: ProgressLike = None,
) -> str:
    """Carry a plan out. Returns the run id."""
    say = progress_of(progress).step
    if plan.empty:
        raise PlanError("the plan has no actions: nothing to apply")
    validate(plan, ckpt, backup)
    check_no_pending_run(ckpt, backup)
    check_not_applied(ckpt, plan, backup)
    if not force:
        check_idle(ckpt, plan, idle_seconds, own_writes(backup))
    check_preconditions(ckpt, plan, current_states(ckpt, plan.actions))  # refuse before creating anything
    with locked(backup, "apply"), _changes(ckpt):
        return _apply(plan, ckpt, backup, say)


@contextmanager
def _changes(ckpt: Location) -> Iterator[None]:
    """Around a run that writes the checkpoint: afterwards (also after a failure part-way) the API re-lists a
    handle listed before it (:meth:`ckptfix.checkpoint.Checkpoint.fresh`)."""
    try:
        yield
    finally:
        mark_written(ckpt.url)


def _same_actions(a: Plan, b: Plan) -> bool:
    def key(p: Plan) -> list[tuple[str, str, FileState, bytes | None]]:
        return [(x.op, x.path, x.before, x.content) for x in p.actions]

    return key(a) == key(b)


def check_not_applied(ckpt: Location, plan: Plan, backup: Location) -> None:
    """A plan applied a second time (the same actions as a complete run, not undone since) is named as such: its
    preconditions fail, but "the checkpoint changed" or "is the query running?" would send the user looking for a
    writer that is ckptfix itself."""
    runs = Runs(backup)
    for run_id in reversed(runs.run_ids()[-20:]):
        try:
            if runs.info(run_id).status == "complete" and _same_actions(runs.plan_of(run_id), plan):
                raise PlanError(
                    f"this plan was already applied to {ckpt.url} as run {run_id} (`ckptfix history` lists it; "
                    f"`ckptfix undo {shlex.quote(ckpt.url)} {run_id}` reverts it)"
                )
        except JournalError:
            continue


def interrupted_run(ckpt: Location) -> str | None:
    """What :func:`check_no_pending_run` says of a run that stopped part way in the checkpoint's own backup
    location (and the ones it points to), for the audit to show (new-user trial 4: after a crash mid-apply the audit
    called the half-applied logs a hand rollback and advised a repair that then refused); None when there is none
    or the journal cannot be read (``history`` says why)."""
    try:
        check_no_pending_run(ckpt, Location(default_backup_url(ckpt.url), ckpt.storage_options))
    except RunInterrupted as exc:
        return str(exc).removesuffix("; then run this command again")
    except (CkptfixError, OSError):
        return None
    return None


def check_no_pending_run(ckpt: Location, backup: Location) -> None:
    """Every run starts here (``repair``, ``apply``, ``rollback``, ``state ...``, ``migrate ...`` with --apply):
    refuse while an earlier run on this checkpoint stopped part way (its files are half the old state, half the
    new). It is finished or undone first: a second run on top would leave two incomplete runs, neither of which
    can be resumed or undone cleanly any more."""
    runs = Runs(backup)
    for run_id in reversed(runs.run_ids()):
        info = runs.info(run_id)
        if info.status not in ("incomplete", "undo-incomplete"):
            continue
        at = "" if backup.url == default_backup_url(ckpt.url) else f" --backup-dir {backup.url}"
        plan = runs.plan_of(run_id)
        if plan.driver is not None:
            how = driver_run(runs, run_id, plan, ckpt, "resumed")
        elif info.status == "undo-incomplete":
            how = f"its undo stopped part way: `ckptfix undo {ckpt.url} {run_id}{at}` finishes restoring every file"
        else:
            how = (
                f"`ckptfix apply --resume {ckpt.url} --run {run_id}{at}` finishes it, "
                f"`ckptfix undo {ckpt.url} {run_id}{at}` restores every file it changed"
            )
        raise RunInterrupted(
            f"{ckpt.url}: expected no interrupted ckptfix run, found run {run_id} ({info.fix}) stopped part way: "
            f"{how}; then run this command again",
            run_id,
            ckpt.url,
        )


def _apply(plan: Plan, ckpt: Location, backup: Location, say: Say) -> str:
    check_no_pending_run(ckpt, backup)  # again, under the lock: another process may have just been interrupted
    now = current_states(ckpt, plan.actions)  # again, under the lock: another run may have just finished
    check_preconditions(ckpt, plan, now)
    baseline = _watched(ckpt)
    runs = Runs(backup)
    run_id = runs.new_run(plan)
    point_home(ckpt, backup, run_id)
    runs.journal(run_id, "start", checkpoint=ckpt.url, actions=len(plan.actions), **_new_dirs(ckpt, plan))
    for a in plan.actions:
        data = now[a.path]
        if data is not None:
            runs.store_object(data)
    runs.journal(run_id, "backed-up")

    def guard() -> None:  # a query writing meanwhile makes the result something nobody planned
        foreign = foreign_writes(ckpt, plan, baseline)
        if foreign:
            runs.journal(run_id, "foreign-writes", paths=foreign[:20])
            raise LiveQuery(
                f"{ckpt.display(foreign[0])}: written by something else during run {run_id} "
                f"({len(foreign)} file(s)): is the query running? Stop it, then `ckptfix undo {ckpt.url} {run_id}` "
                "restores what the run changed (or `ckptfix apply --resume` finishes it)"
            )

    try:
        _run_steps(runs, run_id, plan, ckpt, say, guard)
        guard()
    except LiveQuery:
        raise
    except (OSError, CkptfixError, KeyboardInterrupt) as exc:
        # the checkpoint holds part of the plan: say so, and how to go on, on the one line the user sees
        what = "interrupted" if isinstance(exc, KeyboardInterrupt) else str(exc)
        raise RunInterrupted(
            f"{what}; run {run_id} stopped part way, its journal and backups are kept: "
            f"`ckptfix apply --resume {ckpt.url}` finishes it, `ckptfix undo {ckpt.url} {run_id}` restores every file",
            run_id,
            ckpt.url,
        ) from exc
    runs.journal(run_id, "complete", **{LOGS: _log_heads(ckpt)})
    return run_id


#: the journal field (of ``complete``) recording the newest offsets/ and commits/ ids the run left
LOGS = "logs"


def _log_heads(ckpt: Location) -> dict[str, int | None]:
    """The newest batch id of offsets/ and of commits/ (None: none)."""
    heads: dict[str, int | None] = {}
    for log in ("offsets", "commits"):
        try:
            names = [p.rsplit("/", 1)[-1] for p, e in ckpt.list_tree(log).items() if not e.is_dir]
        except (OSError, CkptfixError):
            names = []
        ids = [int(n) for n in names if n.isdigit()]
        heads[log] = max(ids) if ids else None
    return heads


def check_not_moved_on(ckpt: Location, run_id: str, events: list[dict[str, Any]]) -> None:
    """Refuse to undo a run after which the logs' newest entries changed. Forward: the query ran batches, and Spark
    wrote state and logs from the run's result, which restoring the run's files would leave beside the restored ones
    (hunt 11, F5: after a repartition or a provider conversion Spark then failed to load the state; after a `state
    put` the edit stayed in later versions, while undo said every file was restored). Backward: a later rollback
    deleted entries the run's restored files need (new-user trial 3: a rollback's undo over a hand rollback left
    offsets 0..5 and 7, and Spark failed with `batch 6 doesn't exist`)."""
    recorded = next((e[LOGS] for e in reversed(events) if e["event"] == "complete" and LOGS in e), None)
    if not recorded:
        return  # a run journaled before the heads were recorded
    now = _log_heads(ckpt)
    for log in ("offsets", "commits"):
        before, after = recorded.get(log), now[log]
        if after == before:
            continue
        shown = "none" if after is None else after
        if after is not None and (before is None or after > before):
            why = (
                "the query ran after the run, on what it wrote, so restoring the run's files now would mix them with "
                "state Spark wrote since"
            )
        else:  # new-user trial 3: undo restored a rollback's files over a later hand rollback, and said so with exit 0
            why = (
                "the log went back after the run (a rollback by hand, or a run journaled elsewhere), so restoring "
                "the run's files now would leave the entries in between missing"
            )
        raise PreconditionFailed(
            f"{ckpt.display(f'{log}/{shown}' if after is not None else log)}: expected the newest {log} entry to be "
            f"the one run {run_id} left ({'none' if before is None else before}), found {shown}: {why}; nothing was "
            "undone. To go back further, stop the query and roll back (`ckptfix rollback`)"
        )


#: the journal field (of ``start`` and ``resume``) listing the directories a run's writes create
DIRS = "dirs"


def _new_dirs(ckpt: Location, plan: Plan) -> dict[str, list[str]]:
    """The directories that the files the plan creates would create (local disk: object stores have none), as
    the journal field :data:`DIRS`: journaled before the first write, so that ``undo`` removes exactly these
    (when they are empty again) and never a directory that existed before the run."""
    dirs = {
        d for a in plan.actions if a.op == "write" and not a.before.exists for d in ckpt.missing_directories(a.path)
    }
    return {DIRS: sorted(dirs)} if dirs else {}


def _created_dirs(events: list[dict[str, Any]]) -> list[str]:
    """Every directory the run's journal says it created, deepest first."""
    dirs = {str(d) for e in events if e["event"] in ("start", "resume") for d in e.get(DIRS) or ()}
    return sorted(dirs, key=lambda d: (-d.count("/"), d))


def _watched(ckpt: Location) -> dict[str, tuple[int, float | None]]:
    """Size and modification time of every Spark file (not ckptfix's own, not Hadoop sidecars)."""
    entries = ckpt.list_tree()
    spark_file = spark_file_test(entries)
    return {
        p: (e.size, e.mtime)
        for p, e in entries.items()
        if not e.is_dir
        and spark_file(p)
        and not OWN_TEMP.match(posixpath.basename(p))
        and not p.startswith(("_ckptfix/", ".ckptfix"))
        and not posixpath.basename(p).startswith(".")  # Hadoop sidecars move with their files
    }


def foreign_writes(ckpt: Location, plan: Plan, baseline: dict[str, tuple[int, float | None]]) -> list[str]:
    """Spark files created or changed since ``baseline`` was listed that the plan does not touch (a live
    writer). Compared with the listing, not with a clock: a file written just before the run is not foreign."""
    touched = {a.path for a in plan.actions}
    return sorted(p for p, seen in _watched(ckpt).items() if p not in touched and baseline.get(p) != seen)


#: steps journaled together: recovery compares each file with its before/after state, so the
#: journal only has to say which steps may have started (a big plan on S3 stays linear)
STEP_CHUNK = 64


def _run_steps(
    runs: Runs, run_id: str, plan: Plan, ckpt: Location, say: Say, before_last: Callable[[], None] | None = None
) -> None:
    touched = {a.path for a in plan.actions}
    for first in range(0, len(plan.actions), STEP_CHUNK):
        if before_last is not None and first + STEP_CHUNK >= len(plan.actions):
            before_last()
        chunk = list(enumerate(plan.actions))[first : first + STEP_CHUNK]
        todo = []
        for i, a in chunk:
            found = FileState.of(ckpt.read_if_exists(a.path))
            if found == a.after:
                continue  # done before a crash (resume)
            if found != a.before:
                expected = f"{a.before.describe()} or {a.after.describe()}"
                raise PreconditionFailed(f"{ckpt.display(a.path)}: expected {expected}, found {found.describe()}")
            if a.copy_of is not None and a.copy_of not in touched:  # the source, right before its copy is written
                check_source(ckpt, a, ckpt.read_if_exists(a.copy_of))
            todo.append((i, a))
        if not todo:
            continue
        steps = [i for i, _ in todo]
        runs.journal(run_id, "begin", steps=steps)
        for _, a in todo:
            _perform(ckpt, a)
            runs.crash.tick()
            say(a.describe())
        runs.journal(run_id, "done", steps=steps)


def latest_run(runs: Runs, statuses: tuple[str, ...], *, in_order: bool = False) -> str:
    """The newest run whose status is one of ``statuses``; with ``in_order``, the newest run of
    the first status that has one (resume prefers an interrupted run to a complete one)."""
    infos = [runs.info(r) for r in reversed(runs.run_ids())]
    groups = [(s,) for s in statuses] if in_order else [statuses]
    for group in groups:
        for info in infos:
            if info.status in group:
                return info.run_id
    if "undo-incomplete" in statuses and infos and all(i.status == "undone" for i in infos):  # `undo` once more
        raise NoRun(f"{runs.loc.url}: nothing to undo: every run recorded there is undone already (`ckptfix history`)")
    newest = f"; the newest run, {infos[0].run_id}, is {infos[0].status}" if infos else ""
    raise NoRun(f"{runs.loc.url}: expected a run that is {' or '.join(statuses)}, found none{newest}")


def _any_run(ckpt: Location, backup: Location, what: str) -> None:
    """Refuse before the lock is taken (which would create the backup location in the checkpoint) when no run was
    ever recorded there: a command that fails writes nothing."""
    if not Runs(backup).run_ids() and not (what == "to undo" and other_runs(ckpt, backup)):
        raise NoRun(f"{ckpt.url}: no ckptfix runs recorded (in {backup.url}): nothing {what}")


def _same_url(a: str, b: str) -> bool:
    return a.rstrip("/") == b.rstrip("/")


def _same_checkpoint(plan: Plan, ckpt: Location) -> None:
    if plan.checkpoint.rstrip("/") != ckpt.url.rstrip("/"):
        raise PlanError(f"expected a plan for {ckpt.url}, found one for {plan.checkpoint}")


def driver_run(runs: Runs, run_id: str, plan: Plan, ckpt: Location, verb: str) -> str:
    """Why a driver's run (async-off) is not resumed or undone by the engine, and what to do instead."""
    start = next((e for e in runs.events(run_id) if e["event"] == "start"), {})
    query = start.get("query", "MODULE:FUNCTION")
    if verb == "resumed":
        return (
            f"run {run_id} is a `ckptfix {plan.driver}` run: continue it with "
            f"`ckptfix {plan.driver} {ckpt.url} --query {query} --resume`"
        )
    back = (
        f"; to go back to where it started, `ckptfix rollback {ckpt.url} --to-batch {plan.latest_commit}`"
        if plan.latest_commit is not None
        else ""
    )
    return (
        f"run {run_id} is a `ckptfix {plan.driver}` run: Spark wrote its batches and ckptfix wrote no file of the "
        f"checkpoint, so there is nothing to restore{back}"
    )


def resume(ckpt: Location, backup: Location, run_id: str | None = None, progress: ProgressLike = None) -> str:
    """Finish an interrupted apply (its stray temp files removed first)."""
    _any_run(ckpt, backup, "to resume")
    with locked(backup, "apply --resume"), _changes(ckpt):
        return _resume(ckpt, backup, run_id, progress_of(progress).step)


def _resume(ckpt: Location, backup: Location, run_id: str | None, say: Say) -> str:
    runs = Runs(backup)
    # the crash may have come after the last journal line: then the newest run is complete
    run_id = run_id or latest_run(runs, ("incomplete", "complete"), in_order=True)
    info = runs.info(run_id)
    if info.status == "complete":
        return run_id
    plan = runs.plan_of(run_id)
    if plan.driver is not None:
        raise PlanError(driver_run(runs, run_id, plan, ckpt, "resumed"))
    if info.status != "incomplete":
        raise PlanError(f"run {run_id} is {info.status}; only an interrupted run can be resumed")
    _same_checkpoint(plan, ckpt)
    clean_own_temps(ckpt, plan, say)
    for a in plan.actions:  # a crash during the backup phase: back up what is still original
        data = ckpt.read_if_exists(a.path)
        state = FileState.of(data)
        if state == a.before and data is not None:
            runs.store_object(data)
        elif state not in (a.before, a.after):
            expected = f"{a.before.describe()} or {a.after.describe()}"
            raise PreconditionFailed(f"{ckpt.display(a.path)}: expected {expected}, found {state.describe()}")
    runs.journal(run_id, "resume", **_new_dirs(ckpt, plan))
    _run_steps(runs, run_id, plan, ckpt, say)
    runs.journal(run_id, "complete", **{LOGS: _log_heads(ckpt)})
    return run_id


def runs_home(where: str, backup: Location, opts: dict[str, Any]) -> None:
    """``history``, ``undo`` and ``apply --resume`` take a checkpoint, or a file sink ckptfix rolled back (its runs
    are in OUT/_ckptfix): a path that is neither, with no run recorded for it (a mistyped or wrong path), gets
    the error every other command gives, not "no ckptfix runs recorded"."""
    location = Location(where, opts)
    location.require_directory()  # no such path: FileNotFoundError, as everywhere
    if Runs(backup).run_ids():
        return
    try:
        Checkpoint.open(where, opts)
    except NotACheckpoint:
        if not location.exists("_spark_metadata"):
            raise


def undo(
    ckpt: Location,
    backup: Location,
    run_id: str | None = None,
    progress: ProgressLike = None,
    *,
    force: bool = False,
    idle_seconds: float = 120,
) -> str:
    """Restore every file a run touched, byte for byte, after checking it still holds what
    the run wrote (or is still untouched). Nothing changes if any check fails."""
    _any_run(ckpt, backup, "to undo")
    with locked(backup, "undo"), _changes(ckpt):
        return _undo(ckpt, backup, run_id, progress_of(progress).step, force, idle_seconds)


def _undo(ckpt: Location, backup: Location, run_id: str | None, say: Say, force: bool, idle_seconds: float) -> str:
    runs = Runs(backup)
    elsewhere = [(i, where) for i, where in other_runs(ckpt, backup) if i.status != "undone"]
    try:
        run_id = run_id or latest_run(runs, ("complete", "incomplete", "undo-incomplete"))
    except NoRun:
        if not elsewhere:
            raise
        run_id = ""
    newer = [(i, where) for i, where in elsewhere if i.run_id > run_id]
    if newer:  # run ids sort by time: a newer run journaled in another location is undone first
        i, where = newer[-1]
        raise PlanError(
            f"run {i.run_id} ({i.status}), journaled in {where.url}, is "
            + (f"newer than run {run_id} and not undone" if run_id else "the newest run not undone")
            + f": runs are undone newest first (`ckptfix undo {ckpt.url} {i.run_id} --backup-dir {where.url}`)"
        )
    info = runs.info(run_id)
    if info.status == "undone":
        raise PlanError(f"run {run_id} is already undone")
    plan = runs.plan_of(run_id)
    if plan.driver is not None:
        raise PlanError(driver_run(runs, run_id, plan, ckpt, "undone"))
    _same_checkpoint(plan, ckpt)
    check_newest(runs, run_id, ckpt, backup)
    if info.status != "undo-incomplete":  # a stopped undo has put back part of the run's logs: finish it
        check_not_moved_on(ckpt, run_id, info.events)
    clean_own_temps(ckpt, plan, say)  # a killed run's temp files are ckptfix's, not a live query's
    if not force:  # ckptfix's own fresh writes do not count as a live query
        touched = own_writes(backup).plus(frozenset(a.path for a in plan.actions))
        check_recent_writes(ckpt, ckpt.list_tree(), idle_seconds, touched)
    todo: list[tuple[Action, bytes | None]] = []
    for a in plan.actions:
        state = FileState.of(ckpt.read_if_exists(a.path))
        if state == a.before:
            continue
        if state != a.after:
            raise PreconditionFailed(
                f"{ckpt.display(a.path)}: expected what ckptfix wrote ({a.after.describe()}), found "
                f"{state.describe()}: changed after the repair; nothing was undone"
            )
        todo.append((a, runs.load_object(a.before) if a.before.exists else None))
    runs.journal(run_id, "undo-start")
    todo.reverse()
    for first in range(0, len(todo), STEP_CHUNK):
        chunk = todo[first : first + STEP_CHUNK]
        for a, original in chunk:
            if original is None:
                ckpt.delete(a.path)
            elif a.after.exists:
                ckpt.write_atomic(a.path, original)
            else:
                ckpt.create_exclusive(a.path, original)
            runs.crash.tick()
            say(f"restored {a.path}")
        runs.journal(run_id, "undo-done", paths=[a.path for a, _ in chunk])
    # then the directories the run created, once empty again (a killed undo's next run removes the rest)
    removed = []
    for d in _created_dirs(info.events):
        if ckpt.remove_empty_directory(d):
            runs.crash.tick()
            removed.append(d)
            say(f"removed {d}/, created by the run")
    runs.journal(run_id, "undone", **({DIRS: removed} if removed else {}))
    unpoint_home(ckpt, backup, run_id)
    return run_id


def check_newest(runs: Runs, run_id: str, ckpt: Location, backup: Location) -> None:
    """Runs are undone newest first: a run made after ``run_id`` and not undone planned against what ``run_id``
    wrote, so undoing ``run_id`` under it would leave files of both (a checkpoint no run ever saw)."""
    order = runs.run_ids()
    later = order[order.index(run_id) + 1 :] if run_id in order else []
    infos = [runs.info(r) for r in later]
    # a backup directory shared by several checkpoints (--backup-dir) holds their runs too: only this one's count
    newer = [(i.run_id, i.status) for i in infos if i.status != "undone" and _same_url(i.checkpoint, ckpt.url)]
    if not newer:
        return
    at = "" if backup.url == default_backup_url(ckpt.url) else f" --backup-dir {backup.url}"
    listed = ", ".join(f"{r} ({status})" for r, status in reversed(newer))
    raise PlanError(
        f"run {run_id}: expected it to be the newest run not undone, found {len(newer)} newer: {listed}; runs are "
        f"undone newest first (`ckptfix undo {ckpt.url} {newer[-1][0]}{at}`), since undoing an older run under a "
        "newer one would not restore the checkpoint exactly"
    )
