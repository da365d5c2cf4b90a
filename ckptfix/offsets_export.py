"""The committed offsets of each source at a batch, as what a NEW query needs to start there.

``offsets/N`` holds each source's END offset of batch N (spark-logs-and-restart.md §3); when
``commits/N`` exists, everything before those offsets has been processed, so they are exactly
where a new query (new checkpoint) should start:

* Kafka (``{"topic":{"partition":offset}}``): the JSON is the value of the ``startingOffsets``
  option as it is (Kafka reads from these offsets, inclusive: they are the next records).
  ``startingOffsets`` applies only to a query without a checkpoint.
* file source (``{"logOffset":m}``): entries ``0..m`` of ``sources/<k>/`` list the files already
  processed (§1.3, §8). Spark has no option to start a file source after a list of files;
  ``maxFileAge`` does not help (the first batch of a new query treats every file as valid, and
  the age is relative to the newest file, not a clock), nor does ``latestFirst``. The exact way:
  move the listed files out of the input path (or read a path/glob that excludes them).
* anything else (rate, custom sources): the raw offset JSON, with a note.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ckptfix.checkpoint import Checkpoint, LogDir, id_ranges
from ckptfix.errors import UsageError
from ckptfix.formats.compactlog import derive_compact_interval, is_compaction_batch

KAFKA_NOTE = (
    "startingOffsets = the committed end offsets of the batch: the new query reads from them on "
    "(inclusive). It applies only to a query started with a new checkpoint; offsets older than the "
    "topic's retention fail the query unless failOnDataLoss=false"
)
FILE_NOTE = (
    "Spark has no option to skip a list of files: move these files out of the input path (or read a "
    "path/glob that excludes them) before starting the new query. maxFileAge cannot replace this (a new "
    "query's first batch treats every file as valid, and ages are relative to the newest file seen), "
    "nor can latestFirst"
)
OTHER_NOTE = (
    "raw offset JSON as the source wrote it: this source has no generic starting-offset option in Spark "
    "(the rate source always starts at 0); pass it to the source's own option if it has one"
)
VOID_NOTE = "no offset recorded for this source at this batch ('-')"


@dataclass(frozen=True)
class SourceExport:
    source: str  # ordinal or 4.2+ source name
    kind: str  # kafka | file | other | none
    offset: Any  # parsed offset JSON (raw text when not JSON)
    options: dict[str, str] = field(default_factory=dict)  # what to pass to the new query's reader
    processed_files: tuple[str, ...] | None = None  # file source only
    newest_processed_timestamp_ms: int | None = None
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"source": self.source, "kind": self.kind, "offset": self.offset}
        if self.options:
            out["options"] = dict(self.options)
        if self.processed_files is not None:
            out["processed_files"] = list(self.processed_files)
            out["newest_processed_timestamp_ms"] = self.newest_processed_timestamp_ms
        out["note"] = self.note
        return out


@dataclass(frozen=True)
class OffsetsExport:
    checkpoint: str
    batch: int
    offset_log_version: int
    sources: tuple[SourceExport, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "checkpoint": self.checkpoint,
            "batch": self.batch,
            "offset_log_version": self.offset_log_version,
            "sources": [s.to_json() for s in self.sources],
        }


def _is_kafka(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and bool(value)
        and all(
            isinstance(parts, dict) and bool(parts) and all(_partition_offset(p, o) for p, o in parts.items())
            for parts in value.values()
        )
    )


def _partition_offset(partition: str, offset: Any) -> bool:
    return partition.isdigit() and isinstance(offset, int) and not isinstance(offset, bool)


def _is_file(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {"logOffset"} and isinstance(value["logOffset"], int)


def _processed_files(ckpt: Checkpoint, log: LogDir, source: str, upto: int) -> tuple[list[str], int | None]:
    """Paths in ``sources/<k>/`` entries 0..upto: the newest compaction at or below ``upto``
    (it holds every entry up to it) plus the batch files after it."""
    interval = derive_compact_interval(sorted(log.compact))
    base = max((c for c in log.compact if c <= upto), default=None)
    first = 0 if base is None else base
    paths: list[str] = []
    newest: int | None = None
    for b in range(first, upto + 1):
        if b not in log.files:
            name = f"{b}.compact" if is_compaction_batch(b, interval) else str(b)
            raise UsageError(
                f"{ckpt.display(f'{log.rel}/{name}')}: expected the file-source log entry {b} "
                f"(batch entries 0..{upto} list the processed files), found none"
            )
        entries = ckpt.source_log(source, b).entries  # a damaged entry: FormatError, naming the file
        for e in entries:
            batch_id = e.get("batchId")
            if isinstance(batch_id, int) and batch_id > upto:
                continue
            path = e.get("path")
            if isinstance(path, str) and path not in paths:
                paths.append(path)
                ts = e.get("timestamp")
                if isinstance(ts, int):
                    newest = ts if newest is None else max(newest, ts)
    return paths, newest


def _export_source(ckpt: Checkpoint, source: str, raw: str | None) -> SourceExport:
    if raw is None:
        return SourceExport(source, "none", None, note=VOID_NOTE)
    try:
        value: Any = json.loads(raw)
    except json.JSONDecodeError:
        return SourceExport(source, "other", raw, note=OTHER_NOTE)
    if _is_kafka(value):
        return SourceExport(source, "kafka", value, {"startingOffsets": raw.strip()}, note=KAFKA_NOTE)
    if _is_file(value) and source in ckpt.sources:
        paths, newest = _processed_files(ckpt, ckpt.sources[source], source, int(value["logOffset"]))
        return SourceExport(source, "file", value, {}, tuple(paths), newest, FILE_NOTE)
    return SourceExport(source, "other", value, note=OTHER_NOTE)


def last_committed_batch(ckpt: Checkpoint) -> int:
    both = sorted(set(ckpt.offsets.files) & set(ckpt.commits.files))
    if not both:
        raise UsageError(
            f"{ckpt.location.url}: expected a committed batch (offsets/N and commits/N), found "
            f"offsets {sorted(ckpt.offsets.files)[-3:] or 'none'} and "
            f"commits {sorted(ckpt.commits.files)[-3:] or 'none'}"
        )
    return both[-1]


def export_offsets(
    url: str, batch: int | None = None, *, storage_options: Mapping[str, Any] | None = None
) -> OffsetsExport:
    ckpt = Checkpoint.open(url, storage_options)
    N = last_committed_batch(ckpt) if batch is None else batch
    if N not in ckpt.offsets.files:
        raise UsageError(
            f"{ckpt.display(f'offsets/{N}')}: expected batch {N} in the offset log, found none (offsets "
            f"{id_ranges(sorted(ckpt.offsets.files))})"
        )
    # a later commit means batch N was processed too (Spark commits batches in order): only its commit file is gone
    if N not in ckpt.commits.files and not any(c > N for c in ckpt.commits.files):
        raise UsageError(
            f"{ckpt.display(f'commits/{N}')}: batch {N} is not committed (its offsets were planned, not processed); "
            "export a committed batch (default: the last one)"
        )
    entry = ckpt.offset(N)  # a damaged offset file: FormatError, naming the file
    sources = tuple(_export_source(ckpt, o.source_id, o.json) for o in entry.offsets)
    return OffsetsExport(ckpt.location.url, N, entry.version, sources)
