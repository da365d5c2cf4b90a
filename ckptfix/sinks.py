"""The sinks that remember batch ids: what a restart (or a rollback, or a repair) will find already written.

Spark re-plans a batch id with new data when its offsets are gone (rolled back, truncated, lost), but two
exactly-once sinks remember the ids they hold and silently skip them:

* the file sink: ``FileStreamSink.addBatch`` skips any batch id at or below the newest in
  ``<output>/_spark_metadata`` (whatever query wrote it);
* Delta Lake's sink: ``DeltaSink.addBatch`` skips a batch id at or below the newest ``txn`` version recorded
  for ``appId`` = the query id (the ``id`` in the checkpoint's ``metadata``; it survives restarts), read from
  ``<table>/_delta_log`` (:mod:`ckptfix.formats.deltalog`).

One model for audit, repair and rollback: :meth:`Sink.last_batch` is the newest batch id the sink will skip.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ckptfix import layout
from ckptfix.checkpoint import LogDir, index_log
from ckptfix.errors import FormatError
from ckptfix.formats import compactlog, deltalog
from ckptfix.storage import Entry, Location

#: the session conf a file sink's log compacts by, and its default (``FileStreamSinkLog.defaultCompactInterval``)
COMPACT_INTERVAL_CONF = "spark.sql.streaming.fileSink.log.compactInterval"
DEFAULT_COMPACT_INTERVAL = 10


def told_compact_interval(session_conf: Mapping[str, str]) -> int:
    """The file sink log's compact interval the restarting session sets (``--conf``), else Spark's default."""
    told = session_conf.get(COMPACT_INTERVAL_CONF, "").strip()
    return int(told) if told.isdigit() and int(told) > 0 else DEFAULT_COMPACT_INTERVAL


def next_compaction(batch: int, interval: int) -> int:
    """The first compaction batch at or after ``batch``: b compacts when ``(b + 1) % interval == 0``."""
    return batch + (interval - (batch + 1) % interval) % interval


@dataclass(frozen=True)
class DeltaTable:
    """The replayed transaction identifiers of a Delta table: the table's version and the newest ``txn`` per
    application id (checkpoint first, then every later commit in order, as Delta's log replay does)."""

    version: int | None
    txns: dict[str, deltalog.Txn] = field(default_factory=dict)
    checkpoint: str | None = None  # the rel path of the checkpoint the replay started from


@dataclass
class Sink:
    location: Location
    log: LogDir  # the file sink's _spark_metadata (empty when the path holds none)
    delta: DeltaTable | None = None
    #: a file sink's listing (the whole output path); empty for a Delta table (only its log is listed)
    entries: dict[str, Entry] = field(default_factory=dict)

    @property
    def kind(self) -> str:
        if self.delta is not None:
            return "delta"
        return "file" if self.log.latest is not None else "none"

    @property
    def data_files(self) -> int:
        """How many files of data a file sink's output path holds: files outside ``_spark_metadata`` and other
        ``_``/``.`` names (what a query's file sink writes there: ``part-*`` files, partition directories)."""
        return sum(
            1
            for rel, entry in self.entries.items()
            if not entry.is_dir and not any(part.startswith(("_", ".")) for part in rel.split("/"))
        )

    @property
    def has_log_dir(self) -> bool:
        """Whether the output path has a ``_spark_metadata`` directory at all (a file sink creates it with its
        first batch; foreachBatch and other writers never do)."""
        return any(rel == "_spark_metadata" or rel.startswith("_spark_metadata/") for rel in self.entries)

    @property
    def batch_written(self) -> bool:
        """Whether a batch writer's ``_SUCCESS`` marker is in the output (foreachBatch's ``df.write``): Hadoop's
        output committer leaves one per job, the file sink never does (its commit protocol writes the log)."""
        return any(
            rel.rsplit("/", 1)[-1] == "_SUCCESS" and not rel.startswith("_spark_metadata") for rel in self.entries
        )

    def last_batch(self, query_id: str | None) -> int | None:
        """The newest batch id this sink holds and will skip when Spark plans it again, or None."""
        if self.delta is not None:
            txn = self.delta.txns.get(query_id or "")
            return None if txn is None else txn.version
        return self.log.latest

    def evidence(self, query_id: str | None) -> str:
        """The file that says so (for findings and refusals)."""
        if self.delta is not None:
            txn = self.delta.txns.get(query_id or "")
            return self.location.display(txn.rel if txn is not None else deltalog.LOG_DIR)
        latest = self.log.latest
        return self.location.display(self.log.path_of(latest) if latest is not None else layout.SINK_LOG)

    def describe(self, query_id: str | None) -> str:
        """Who remembers the batch ids, in words."""
        if self.delta is not None:
            return f"the Delta table's transaction log (txn of appId {query_id})"
        return "the file sink's _spark_metadata"

    def compact_interval(self, default: int = DEFAULT_COMPACT_INTERVAL) -> int:
        """The interval Spark's file sink log compacts by at the restart (``CompactibleFileStreamLog.compactInterval``:
        the existing ``.compact`` files, else ``default``, the session's ``COMPACT_INTERVAL_CONF``)."""
        return compactlog.derive_compact_interval(sorted(self.log.compact), default)

    def entry_rel(self, batch: int, interval: int) -> str:
        """``_spark_metadata/<batch>[.compact]``, the name Spark's ``batchIdToPath`` reads and writes."""
        compact = compactlog.is_compaction_batch(batch, interval)
        return f"{layout.SINK_LOG}/{batch}{compactlog.COMPACT_SUFFIX if compact else ''}"

    def compaction_reads(self, batch: int, interval: int) -> list[tuple[int, str]]:
        """(batch, entry) of every entry Spark's compaction at compaction batch ``batch`` reads, in its order
        (``getValidBatchesBeforeCompactionBatch``: the previous compaction and every batch after it)."""
        return [(b, self.entry_rel(b, interval)) for b in range(max(0, batch - interval), batch)]

    def without(self, rels: set[str]) -> Sink:
        """This file sink as it will be once ``rels`` are deleted (a rollback's plan, audited before it runs)."""
        if self.delta is not None:
            return self
        kept = {p: e for p, e in self.entries.items() if p not in rels}
        return Sink(self.location, index_log(layout.SINK_LOG, kept, compactible=True), None, kept)

    def replan_advice(self, keep: int, last: int, checkpoint: str = "CKPT") -> str:
        """What to do instead of letting Spark plan batches ``keep+1..last`` again while this sink holds them
        (``keep``: the batch the checkpoint resumes after, -1 when none is committed).

        A file sink's log is keyed by batch id alone (``FileStreamSink`` skips every id <= the newest in
        ``_spark_metadata``, whatever query wrote it): a new checkpoint's batches 0.. are skipped just the same, so
        the way out is to roll the sink back with the checkpoint, or a new checkpoint into a new output path (this
        checkpoint into a new path starts that log at batch keep+1: reading the output fails on the entries before
        it, and so does the log's compaction; damage hunt 9, D23, on 4.3.0). Delta's sink
        keys by query id: a new checkpoint (a new query id) from the old one's offsets writes into the same table."""
        start = f"`ckptfix offsets export {checkpoint} --batch {keep}`" if keep >= 0 else "`ckptfix offsets export`"
        if self.delta is not None:
            return (
                f"keep the table and start a new checkpoint (a new query id: Delta's txn is per query id) from batch "
                f"{keep}'s offsets ({start}), or write to a new table"
            )
        roll = (
            f"`ckptfix rollback {checkpoint} --to-batch {keep} --sink {self.location.url} --with-sink` deletes its log "
            f"entries of batches {keep + 1}..{last} and the files they add, with backup"
            if keep >= 0
            else f"its log entries of batches 0..{last} and the files they add"
        )
        return (
            f"roll the file sink back with the checkpoint ({roll}), or start a new checkpoint that writes to a new "
            f"output path ({start} gives where its sources start; its batch ids and the new path's log both start "
            "at 0); not a new checkpoint into the same path (the file sink's log is keyed by batch id alone: a new "
            "query's batches are skipped too), nor this checkpoint into a new path (that log would start past batch "
            "0: reading the output, and the log's compaction, fail on the entries before it)"
        )


def delta_restore_version(loc: Location, app_id: str, batch: int) -> int | None:
    """The table version before the first commit whose ``txn`` of ``app_id`` is above ``batch`` (what Delta's
    ``RESTORE TABLE ... TO VERSION v`` takes to forget batches > ``batch``), or None when the log cannot tell
    (the commits that would say were cleaned up, or no commit of ``app_id`` is above ``batch``)."""
    commits: dict[int, str] = {}
    for rel, entry in loc.list_tree(deltalog.LOG_DIR).items():
        f = None if entry.is_dir or rel.count("/") != 1 else deltalog.classify(rel.rsplit("/", 1)[1], rel)
        if f is not None and f.kind == "commit":
            commits[f.version] = rel
    first_above: int | None = None
    version = max(commits, default=-1)
    while version >= 0:
        commit = commits.get(version)
        if commit is None:
            return None  # cleaned up (or a gap): an older commit may hold an earlier txn above batch
        got = deltalog.txns_in_json(loc.read(commit), loc.display(commit), commit).get(app_id)
        if got is not None:
            if got.version <= batch:
                break
            first_above = version
        version -= 1
    if first_above is None or first_above == 0:
        return None
    return first_above - 1


def _replay(loc: Location) -> DeltaTable:
    """Delta's log replay, reduced to ``txn`` actions: the newest complete checkpoint, then every commit after it.

    Commits after the checkpoint must be contiguous up to the newest one (Delta itself refuses a gap)."""
    entries = loc.list_tree(deltalog.LOG_DIR)
    commits: dict[int, str] = {}
    checkpoints: dict[tuple[int, str], list[deltalog.LogFile]] = {}
    for rel, entry in entries.items():
        if entry.is_dir or rel.count("/") != 1:
            continue
        f = deltalog.classify(rel.rsplit("/", 1)[1], rel)
        if f is None:
            continue
        if f.kind == "commit":
            commits[f.version] = rel
        else:
            key = (f.version, f.form if f.form != "multi" else f"multi-{f.parts}")
            checkpoints.setdefault(key, []).append(f)
    complete = sorted(
        (version, sorted(files, key=lambda f: f.part))
        for (version, _form), files in checkpoints.items()
        if files[0].form != "multi" or {f.part for f in files} == set(range(1, files[0].parts + 1))
    )
    newest = max([*commits, *(v for v, _ in complete)], default=None)
    if newest is None:
        return DeltaTable(None)
    start: int = -1
    txns: dict[str, deltalog.Txn] = {}
    used: str | None = None
    if complete:
        start, files = complete[-1]
        used = files[0].rel
        for f in files:
            data, path = loc.read(f.rel), loc.display(f.rel)
            found = (
                deltalog.txns_in_json(data, path, f.rel)
                if f.form == "v2-json"
                else deltalog.txns_in_parquet(data, path, f.rel)
            )
            txns.update(found)
    for version in range(start + 1, newest + 1):
        commit = commits.get(version)
        if commit is None:
            have = f"commit {version - 1}" if version - 1 in commits else "no earlier file"
            raise FormatError(
                loc.display(f"{deltalog.LOG_DIR}/{version:020d}.json"),
                0,
                f"every Delta commit from {start + 1} to {newest} (the log replays them in order)",
                f"none; the log has {have} and continues at {min((v for v in commits if v > version), default=newest)}",
                kind="missing",
            )
        txns.update(deltalog.txns_in_json(loc.read(commit), loc.display(commit), commit))
    return DeltaTable(newest, txns, used)


def open_sink(path: str, storage_options: Mapping[str, Any] | None = None) -> Sink:
    """The sink at ``path``: a Delta table when it has ``_delta_log``, else a file sink's ``_spark_metadata``."""
    loc = Location(path, storage_options)
    if loc.exists(deltalog.LOG_DIR):  # only the log is listed, never the table's data files
        return Sink(loc, index_log(layout.SINK_LOG, {}, compactible=True), _replay(loc))
    entries = loc.list_tree()
    return Sink(loc, index_log(layout.SINK_LOG, entries, compactible=True), None, entries)


__all__ = [
    "COMPACT_INTERVAL_CONF",
    "DEFAULT_COMPACT_INTERVAL",
    "DeltaTable",
    "Sink",
    "delta_restore_version",
    "open_sink",
]
