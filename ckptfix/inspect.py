"""What is in a checkpoint, as data: the facts `ckptfix inspect` shows.

Reads only the tail: ``metadata``, the latest offset and commit files, the latest committed
offset file and operator metadata (and, for the batch history, every offset file). Damaged files become
``problems`` entries, never crashes.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from ckptfix import layout
from ckptfix.checkpoint import Checkpoint, LogDir
from ckptfix.errors import FormatError, UsageError
from ckptfix.formats import offsetlog, opmeta

#: Spark's value for a conf an (old) offset log does not record, or, for confs without one, the restarting
#: session's value (here its default)
LEGACY_DEFAULTS = offsetlog.LEGACY_DEFAULTS
SESSION_DEFAULTS = {
    "spark.sql.shuffle.partitions": "200",
    "spark.sql.streaming.stateStore.providerClass": (
        "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
    ),
    "spark.sql.streaming.stateStore.rocksdb.formatVersion": "5",
}

RELEVANT_CONF = {
    "spark.sql.shuffle.partitions": "shuffle_partitions",
    "spark.sql.streaming.stateStore.providerClass": "state_store_provider",
    "spark.sql.streaming.stateStore.compression.codec": "state_codec",
    "spark.sql.streaming.stateStore.encodingFormat": "state_encoding",
    "spark.sql.streaming.stateStore.rocksdb.formatVersion": "rocksdb_format_version",
    "spark.sql.streaming.multipleWatermarkPolicy": "watermark_policy",
}


def _value(conf: dict[str, str], key: str) -> str | None:
    """What Spark uses on restart: the recorded value, else its legacy default, else the session's."""
    if key in conf:
        return conf[key]
    if key in LEGACY_DEFAULTS:
        return f"{LEGACY_DEFAULTS[key]} (not recorded: Spark's default for old offset logs)"
    if key in SESSION_DEFAULTS:
        return f"not recorded: the restarting session's value ({SESSION_DEFAULTS[key]} unless it sets one)"
    return None


@dataclass
class LogSummary:
    count: int
    first: int | None
    last: int | None
    gaps: list[int]
    noncanonical: list[str]
    temp_files: int


@dataclass
class SourceSummary:
    id: str
    committed_offset: str | None  # raw offset JSON at the latest commit
    planned_offset: str | None  # raw offset JSON at the latest offset
    log_entries: int | None  # file source log files, if this source has one
    log_latest: int | None


@dataclass
class OperatorSummary:
    id: int
    name: str | None
    provider: str
    partitions: int
    stores: list[str]
    versions: dict[str, list[int]]  # kind -> [min, max] over all partitions
    files: int
    bytes: int


@dataclass
class BatchRecord:
    """One batch of the offset log, as its offset file records it."""

    batch: int
    timestamp_ms: int | None  # batchTimestampMs: when the batch was planned (None: no metadata line)
    watermark_ms: int | None  # batchWatermarkMs: the event-time watermark the batch ran with
    committed: bool  # commits/<batch> exists
    offsets: dict[str, str | None] = field(default_factory=dict)  # source -> the end offset JSON it read to
    problem: str | None = None  # the offset file cannot be read, or is not there (a commit without it)
    #: when commits/<batch> was last written (its modification time; None: no commit, or the store gives no time)
    committed_at_ms: int | None = None

    @property
    def committed_at(self) -> str | None:
        return None if self.committed_at_ms is None else iso_ms(self.committed_at_ms)

    @property
    def started(self) -> str | None:
        return None if self.timestamp_ms is None else iso_ms(self.timestamp_ms)


def iso_ms(ms: int) -> str:
    """Epoch milliseconds as ISO 8601 in UTC (``2024-01-01T10:00:00.250Z``)."""
    t = dt.datetime.fromtimestamp(ms / 1000, tz=dt.timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S") + (f".{ms % 1000:03d}" if ms % 1000 else "") + "Z"


def batch_history(ckpt: Checkpoint) -> list[BatchRecord]:
    """Every batch the offset or commit log holds, oldest first: when it was planned, its watermark, whether and
    when (the commit file's modification time) it committed, and each source's offset. Reads every offset file
    (Spark keeps about ``minBatchesToRetain`` of them)."""
    ckpt.prefetch([ckpt.offsets.path_of(b) for b in sorted(ckpt.offsets.files)])
    out = []
    for b in sorted(set(ckpt.offsets.files) | set(ckpt.commits.files)):
        committed = b in ckpt.commits.files
        mtime = getattr(ckpt.entries.get(ckpt.commits.path_of(b)), "mtime", None) if committed else None
        at = None if mtime is None else int(mtime * 1000)
        if b not in ckpt.offsets.files:  # a commit whose offset file is gone (new-user trial 4: no row at all)
            out.append(BatchRecord(b, None, None, committed, problem=f"offsets/{b} is missing", committed_at_ms=at))
            continue
        try:
            entry = ckpt.offset(b)
        except FormatError as exc:
            out.append(BatchRecord(b, None, None, committed, problem=str(exc), committed_at_ms=at))
            continue
        meta = entry.metadata
        out.append(
            BatchRecord(
                b,
                meta.batch_timestamp_ms if meta else None,
                meta.batch_watermark_ms if meta else None,
                committed,
                {o.source_id: o.json for o in entry.offsets},
                committed_at_ms=at,
            )
        )
    return out


#: epoch milliseconds below this are before 1973-03-03: a number that small is epoch seconds, not milliseconds
_SECONDS_LOOKALIKE = 100_000_000_000


def parse_time(text: str | int | dt.datetime, option: str = "--to-time") -> int:
    """A point in time as epoch milliseconds: an ISO 8601 time with its zone (``2026-11-27T10:00:00Z``,
    ``2026-11-27 11:00+01:00``), a timezone-aware ``datetime``, or epoch milliseconds. A time without a zone is
    refused (the offset log's times are UTC, and guessing the zone could pick another batch), and so is a number
    that reads as epoch seconds (new-user trial 4: seconds were taken as milliseconds of 1970)."""
    if isinstance(text, bool) or not isinstance(text, (str, int, dt.datetime)):
        raise UsageError(
            f"{option}: expected an ISO 8601 string with its zone, a timezone-aware datetime or epoch milliseconds "
            f"(int), found {type(text).__name__} {text!r}"
        )
    if isinstance(text, dt.datetime):
        when = text
    else:
        raw = str(text).strip()
        if raw.isdigit():
            ms = int(raw)
            if ms < _SECONDS_LOOKALIKE:
                raise UsageError(
                    f"{option} {text}: expected epoch milliseconds, found a number that reads as epoch seconds "
                    f"({iso_ms(ms * 1000)} as seconds, {iso_ms(ms)} as milliseconds): give {ms * 1000} or an ISO time"
                )
            return ms
        try:
            when = dt.datetime.fromisoformat(raw[:-1] + "+00:00" if raw.endswith(("Z", "z")) else raw)
        except ValueError:
            raise UsageError(
                f"{option} {text}: expected an ISO 8601 time with its zone (2026-11-27T10:00:00Z) or epoch milliseconds"
            ) from None
    if when.tzinfo is None:
        raise UsageError(
            f"{option} {text}: expected a time zone (Z or +hh:mm): the offset log records UTC, and a time without a "
            "zone could name another batch"
        )
    return int(when.timestamp() * 1000)


def batch_at(ckpt: Checkpoint, when_ms: int, option: str = "--to-time") -> BatchRecord:
    """The batch a rollback "to a time" keeps: the newest committed batch before the first batch planned after
    ``when_ms`` (offset files' batchTimestampMs). Batches are kept as a prefix: where the recorded times go
    backwards (clock skew, a restart on another driver), a later batch with an earlier time is not kept past one
    planned after ``when_ms`` (new-user trial 4). Raises :class:`UsageError` naming the oldest batch kept when none
    is that old."""
    history = [r for r in batch_history(ckpt) if r.batch in ckpt.offsets.files]  # a time needs the offset file
    kept: BatchRecord | None = None
    for r in history:
        if r.timestamp_ms is None or r.timestamp_ms > when_ms:
            break
        if r.committed:
            kept = r
    if kept is not None:
        return kept
    dated = [r for r in history if r.committed and r.timestamp_ms is not None]
    found = (
        f"the oldest committed batch the offset log keeps, {dated[0].batch}, was planned at {dated[0].started}"
        if dated
        else "no committed batch with a recorded time"
    )
    raise UsageError(
        f"{option}: expected a committed batch planned at or before {iso_ms(when_ms)}, found none: {found}"
    )


def committed_after(ckpt: Checkpoint, batch: int, when_ms: int) -> str | None:
    """When batch's commit file was last written, if after ``when_ms`` (its modification time: a batch planned
    before a deploy may have been run and committed by the code deployed after it; new-user trial 4). None when it
    was not, or the store gives no time."""
    entry = ckpt.entries.get(ckpt.commits.path_of(batch)) if batch in ckpt.commits.files else None
    mtime = getattr(entry, "mtime", None)
    if mtime is None:
        return None
    ms = int(mtime * 1000)
    return iso_ms(ms) if ms > when_ms else None


@dataclass
class Inspection:
    checkpoint: str
    query_id: str | None
    conf: dict[str, str]
    settings: dict[str, Any]
    offsets: LogSummary
    commits: LogSummary
    last_committed_batch: int | None
    sources: list[SourceSummary]
    operators: list[OperatorSummary]
    total_files: int
    total_bytes: int
    problems: list[str] = field(default_factory=list)
    #: every batch of the offset log (``inspect --batches``); None when not asked
    batches: list[BatchRecord] | None = None


def _summary(log: LogDir) -> LogSummary:
    ids = sorted(log.files)
    gaps = sorted(set(range(ids[0], ids[-1] + 1)) - set(ids)) if ids else []
    return LogSummary(
        len(ids),
        ids[0] if ids else None,
        ids[-1] if ids else None,
        gaps,
        sorted(log.noncanonical.values()),
        len(log.temp),
    )


def inspect_checkpoint(ckpt: Checkpoint, batches: bool = False) -> Inspection:
    """``batches``: also the history of every batch in the offset log (:func:`batch_history`)."""
    problems: list[str] = []
    qid = None
    if ckpt.metadata_rel:
        try:
            qid = ckpt.query_metadata().id
        except FormatError as exc:
            problems.append(str(exc))
    else:
        problems.append(f"{ckpt.display(layout.METADATA)}: no query metadata file")
    L, K = ckpt.offsets.latest, ckpt.commits.latest
    latest = committed = None
    for b, label in ((L, "latest"), (K, "committed")):
        if b is None or b not in ckpt.offsets.files:
            continue
        try:
            entry = ckpt.offset(b)
        except FormatError as exc:
            if str(exc) not in problems:
                problems.append(str(exc))
            continue
        if label == "latest":
            latest = entry
        else:
            committed = entry
    conf = dict(latest.metadata.conf) if latest and latest.metadata else ckpt.recorded_conf()
    if latest is not None and latest.metadata is not None:  # a metadata line: a key it lacks gets Spark's default
        settings: dict[str, Any] = {name: _value(conf, key) for key, name in RELEVANT_CONF.items()}
    else:
        settings = {name: conf.get(key) for key, name in RELEVANT_CONF.items()}
    settings["offset_log_version"] = latest.version if latest else None
    commit_version = None
    ckpt_format = 1
    if K is not None and K in ckpt.commits.files:
        try:
            c = ckpt.commit(K)
            commit_version = c.version
            if c.state_unique_ids:
                ckpt_format = 2
        except FormatError as exc:
            problems.append(str(exc))
    stores = [s for op in ckpt.state.operators.values() for st in op.partitions.values() for s in st.values()]
    if ckpt.state_format_v2():
        ckpt_format = 2
    settings["commit_log_version"] = commit_version
    settings["state_checkpoint_format"] = ckpt_format if stores else None
    settings["changelog_checkpointing"] = (
        any(k == "changelog" for s in stores for (k, _, _) in s.files)
        if any(s.provider == "rocksdb" for s in stores)
        else None
    )
    sparse = ckpt.looks_async()
    settings["async_progress_tracking"] = "likely (sparse offset and commit logs)" if sparse else "no evidence"
    if latest is not None:
        settings["batch_watermark_ms"] = latest.metadata.batch_watermark_ms if latest.metadata else None

    sources: list[SourceSummary] = []
    ids = [o.source_id for o in latest.offsets] if latest else sorted(ckpt.sources)
    for sid in ids:
        planned = next((o.json for o in latest.offsets if o.source_id == sid), None) if latest else None
        done = next((o.json for o in committed.offsets if o.source_id == sid), None) if committed else None
        log = ckpt.sources.get(sid)
        sources.append(SourceSummary(sid, done, planned, len(log.files) if log else None, log.latest if log else None))

    operators: list[OperatorSummary] = []
    for op_id, op in sorted(ckpt.state.operators.items()):
        name = None
        if op.metadata_v1 or op.metadata_v2:
            rel = op.metadata_v1 or op.metadata_v2[max(op.metadata_v2)]
            try:
                name = opmeta.parse(ckpt.read(rel), ckpt.display(rel)).operator_name
            except FormatError as exc:
                problems.append(str(exc))
        versions: dict[str, list[int]] = {}
        op_stores = [s for st in op.partitions.values() for s in st.values()]
        for s in op_stores:
            for kind, v, _ in s.files:
                lo_hi = versions.setdefault(kind, [v, v])
                lo_hi[0], lo_hi[1] = min(lo_hi[0], v), max(lo_hi[1], v)
        prefix = op.rel + "/"
        files = [e for p, e in ckpt.entries.items() if p.startswith(prefix) and not e.is_dir]
        kinds = {s.provider for s in op_stores} - {"unknown"}
        operators.append(
            OperatorSummary(
                op_id,
                name,
                ",".join(sorted(kinds)) or "unknown",
                len(op.partitions),
                op.store_names,
                versions,
                len(files),
                sum(e.size for e in files),
            )
        )
    files = [e for e in ckpt.entries.values() if not e.is_dir]
    return Inspection(
        ckpt.location.url,
        qid,
        conf,
        settings,
        _summary(ckpt.offsets),
        _summary(ckpt.commits),
        K,
        sources,
        operators,
        len(files),
        sum(e.size for e in files),
        problems,
        batch_history(ckpt) if batches else None,
    )
