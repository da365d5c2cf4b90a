"""What Spark says about a query and asynchronous progress tracking, read from its unstarted writer (no query
runs): the trigger, sink and sources (:func:`inspect_writer`), the refusals Spark would raise (:func:`refusals`,
its own words), and whether a checkpoint belongs to this query (:func:`foreign_checkpoint`). The async-off
driver (:mod:`ckptfix.spark.async_off`) runs its preflight on these."""

from __future__ import annotations

import json
import os
import posixpath
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from ckptfix.spark import jvm

#: Spark's testing-only switch that skips the sink check (AsyncProgressTrackingMicroBatchExecution)
SINK_OVERRIDE = "_asyncProgressTrackingOverrideSinkSupportCheck"

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
    """The sink path as FileStreamSink prints it: 4.3.0 qualifies a local path (``/data/out`` as ``file:/data/out``,
    seen live), 3.5.9 prints it as given (shared/reference spark-behaviour-observed.md §4)."""
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
