"""Query-change rules (``audit --against MODULE:FUNCTION``): the new query against the checkpoint.

Categories come from Spark's guide, "Recovery Semantics after Changes in a Streaming Query"
(structured-streaming-programming-guide / apis-on-dataframes-and-datasets.md): *allowed*
("you can do the specified change but whether the semantics of its effect is well-defined
depends on the query and the change"), *not allowed* ("the restarted query is likely to fail
with unpredictable errors") and *ill-defined* (the guide's word for e.g. other changes in a
stream-stream join condition). Where Spark itself checks (source count, state schemas), the
finding carries the error Spark raises, verified on Spark 4.3.0 (see tests/audit_query).

Every rule here runs only when the audit context carries a :class:`QueryShape`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any
from urllib.parse import unquote, urlparse

from ckptfix.audit.context import AuditContext
from ckptfix.audit.model import Evidence, Finding, Skipped, SparkError
from ckptfix.audit.queryshape import OperatorShape, QueryShape, SourceShape, StoreShape, WindowShape, compatible, ddl
from ckptfix.audit.registry import check, define
from ckptfix.audit.rules_state import CODEC, first_state_file_missing, store_unique_id, unique_ids
from ckptfix.audit.targets import SparkTarget
from ckptfix.checkpoint import OperatorDir
from ckptfix.errors import FormatError, UsageError
from ckptfix.formats import codec
from ckptfix.formats.offsetlog import SourceOffset, file_source_log_offset
from ckptfix.formats.unsaferow import StructType
from ckptfix.sinks import next_compaction, told_compact_interval
from ckptfix.state.decode import Decoder
from ckptfix.state.schemas import AGGREGATION, OperatorInfo, StoreSchema, operator_info, store_schema
from ckptfix.stores import provider as providers
from ckptfix.stores import sample

GUIDE = "Spark guide, Recovery Semantics after Changes in a Streaming Query"

Q_SOURCES = define(
    "QUERY-SOURCES",
    "error",
    "The new query has a different number or kind of sources",
    f"{GUIDE}: 'Changes in the number or type (i.e. different source) of input sources: This is not allowed.' "
    "Spark checks the number when it restores the offsets of the latest batch (OffsetSeq.toStreamProgress): "
    "'There are [n] sources in the checkpoint offsets and now there are [m] sources requested by the query. "
    "Cannot continue.'",
    "Keep the sources of the checkpointed query (same number, same order, same kind), or start the changed "
    "query on a new checkpoint.",
)
Q_SOURCE_PARAMS = define(
    "QUERY-SOURCE-PARAMS",
    "warning",
    "A source reads something else than the checkpoint recorded",
    f"{GUIDE}: 'Changes to subscribed topics/files is generally not allowed as the results are unpredictable' "
    "(rate limits may change: 'Addition/deletion/modification of rate limits is allowed'). The file source "
    "remembers the files it read by path, and on restart lists the latest batch's files again with the (new) "
    "path as basePath: another directory fails with `IllegalArgumentException: Wrong basePath <new> for the root "
    "path: <old file>` (seen on 3.5.9 and 4.3.0), when the latest batch read files; after a batch that read none "
    "the restart works, and every file under the new path is new to the source (it remembers files by full path: "
    "files it read before are read again where they are there too; seen on 4.3.0). Kafka offsets are kept per "
    "topic partition.",
    "Read the same path/topics as before, or start the changed query on a new checkpoint.",
)
Q_OPERATORS = define(
    "QUERY-STATEFUL-OPERATORS",
    "error",
    "The new query's stateful operators differ from the checkpoint's",
    f"{GUIDE}: 'any changes (that is, additions, deletions, or schema modifications) to the stateful operations "
    "of a streaming query are not allowed between restarts'. Operators are matched by id (Spark numbers them "
    "in plan order). Spark 4.x compares them with the operator metadata (state/<op>/_metadata) on the first "
    "batch after a restart and fails with STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA; without "
    "operator metadata (3.5) an added operator finds no state, a removed one leaves its state unused, and a "
    "different operator at an id reads state written by another.",
    "Keep the stateful operators of the checkpointed query, or start the changed query on a new checkpoint.",
)
Q_KEY = define(
    "QUERY-STATE-KEY-SCHEMA",
    "error",
    "A stateful operator's key schema is not compatible with the stored one",
    f"{GUIDE}: for a streaming aggregation 'Any change in number or type of grouping keys or aggregates is not "
    "allowed'; the same for deduplication keys and join keys. Spark's StateSchemaCompatibilityChecker compares "
    "the new key schema with state/<op>/0/_metadata/schema (field count and types, names ignored, a field may "
    "only become non-nullable) and fails with STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE.",
    "Keep the grouping/deduplication/join keys (same number and types), or start on a new checkpoint. "
    "spark.sql.streaming.stateStore.stateSchemaCheck=false only hides the check: rows are then misread.",
)
Q_VALUE = define(
    "QUERY-STATE-VALUE-SCHEMA",
    "error",
    "A stateful operator's value schema is not compatible with the stored one",
    f"{GUIDE}: for a streaming aggregation 'Any change in number or type of grouping keys or aggregates is not "
    "allowed'. Spark compares the new value schema (the aggregation buffers) with the stored one and fails "
    "with STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE (deduplication without watermark stores a dummy value and is "
    "not checked).",
    "Keep the aggregates (same number, order and types), or start on a new checkpoint.",
)
Q_RENAMED = define(
    "QUERY-STATE-RENAMED",
    "info",
    "State schema fields were renamed only",
    "Spark compares state schemas ignoring field names ('Detected schema change which is compatible'): the "
    "restart works and the stored values are read by position. Allowed.",
    "Nothing to do, as long as the fields still mean the same in the same order.",
)
Q_MEANING = define(
    "QUERY-STATE-MEANING",
    "error",
    "State fields keep their types under other names: the state may hold something else",
    "Spark compares state schemas by field count and types only, so the restart works and the stored values are "
    "read as whatever the new query puts in their place. An aggregation's buffer fields are named by its aggregate "
    "functions (count, sum, max, ...; not by the aliases of the output), so other names there are other functions, "
    "which continue from the stored values (seen on 4.3.0: count(*) changed to sum(id) continued the count as the "
    "sum: silently wrong). A key (grouping, deduplication or join key) under another name is another column or "
    "expression, unless the query only renamed it: then the state continues; otherwise no stored key matches a "
    "new one (counts start again, duplicates pass: seen on 4.3.0 for a grouping by concat('x', k) and "
    "dropDuplicates on another column), a warning, since the files cannot tell the two apart. A stream-stream "
    "join whose sides swapped reads each side's stored rows as the other's (an error).",
    "Keep the aggregate functions and the keys, or start the changed query on a new checkpoint (`ckptfix offsets "
    "export` keeps the sources' positions).",
)
Q_WINDOW = define(
    "QUERY-WINDOW",
    "error",
    "The new query's time windows are not the stored windows",
    "A windowed aggregation stores its state by window (start, end) and the key schema is the same for any "
    "window duration, slide or start time, so Spark's schema check passes and the restart works (seen on 4.3.0, "
    "damage hunt 9: 10 s windows changed to 20 s, and tumbling windows changed to sliding ones). The stored "
    "windows are never updated again and are emitted (append mode) with what they held; the new windows start "
    "without the rows already consumed, and the windows a sliding query adds between stored ones are never "
    "complete. ckptfix decodes a sample of the stored keys of each partition and compares their windows with the "
    "windows Spark computes for the new query's window(...) call.",
    "Keep the window(...) arguments of the checkpointed query, or run the changed query on a new checkpoint that "
    "reads its input from the start (its windows need the rows the old query consumed).",
)
Q_REORDERED = define(
    "QUERY-STATE-REORDERED",
    "error",
    "State schema fields are in a different order: Spark restarts and reads the wrong values",
    "Spark compares state schemas by position and ignores names, so a new schema with the same types in another "
    "order passes the check, and the stored values are read into the wrong fields (seen on 4.3.0: the stored "
    "sum read as count). The guide calls changed aggregates not allowed; a projection or column order change "
    "after an aggregation can reorder the aggregation buffers too, because the optimizer prunes and reorders "
    "them.",
    "Keep the aggregates in the original order (and the columns the projection keeps), or start on a new "
    "checkpoint. Check the new plan's value schema with this audit before restarting.",
)
Q_CONF = define(
    "QUERY-CONF-IGNORED",
    "info",
    "A session conf differs from the value recorded in the checkpoint (the recorded one is used)",
    "On restart Spark restores the confs recorded in the latest offset file (OffsetSeqMetadata.setSessionConf): "
    "spark.sql.shuffle.partitions (the number of state partitions), the state store providerClass, "
    "spark.sql.streaming.multipleWatermarkPolicy and the state format versions. A different session value is "
    "allowed and ignored.",
    "To really change them, start a new checkpoint (or repartition the state where a tool supports it).",
)
Q_SINK = define(
    "QUERY-SINK",
    "warning",
    "The new query's sink may not continue the old one",
    f"{GUIDE}: 'Changes in the type of output sink: Changes between a few specific combinations of sinks are "
    "allowed' (file sink to Kafka allowed, Kafka to file sink not allowed, Kafka to foreach and back allowed); "
    "'Changes to output directory of a file sink is not allowed'; 'Changes to output topic is allowed'. The "
    "checkpoint does not record the sink kind, so only what the files prove is checked.",
    "Write to the same sink (same file sink path) as before, or start the changed query on a new checkpoint.",
)
Q_REFUSED = define(
    "QUERY-UNSUPPORTED",
    "error",
    "Spark refuses to start the new query",
    "Before a streaming query reads its checkpoint, start() checks the plan against the output mode "
    "(UnsupportedOperationChecker.checkForStreaming: e.g. an aggregation without watermark in append mode, "
    "STREAMING_OUTPUT_MODE.UNSUPPORTED_OPERATION; a second stateful operator after an aggregation in append mode, "
    "the global watermark 'correctness' check). ckptfix runs the same check on the planned query (seen on 4.3.0).",
    "Change the output mode or the query so that Spark accepts it; the checkpoint is not the cause.",
)
Q_UNCHECKED = define(
    "QUERY-UNCHECKED",
    "warning",
    "Part of the new query could not be compared with the checkpoint",
    "Some operators (transformWithState, whose processor declares its state variables when it runs) keep schemas "
    "ckptfix does not derive from the plan. Spark compares them at the restart all the same, so whether the query "
    "restarts is unknown (the verdict says so): a changed key or variable type fails (STATE_STORE_*_SCHEMA_NOT_"
    "COMPATIBLE, STATE_STORE_INVALID_VARIABLE_TYPE_CHANGE on 4.3.0), a renamed variable starts empty.",
    "Check these operators by hand against the guide, or test the restart on a copy of the checkpoint.",
)

_POLICY = "spark.sql.streaming.multipleWatermarkPolicy"
_CONFS = {
    "spark.sql.shuffle.partitions": "the number of state partitions stays the recorded one",
    "spark.sql.streaming.stateStore.providerClass": "the state store provider stays the recorded one",
    _POLICY: "the recorded multiple-watermark policy is used",
    "spark.sql.streaming.aggregation.stateFormatVersion": "aggregation state keeps the recorded format",
    "spark.sql.streaming.join.stateFormatVersion": "join state keeps the recorded format",
    "spark.sql.streaming.flatMapGroupsWithState.stateFormatVersion": "flatMapGroupsWithState keeps the recorded format",
    "spark.sql.streaming.stateStore.compression.codec": "state files keep the recorded codec",
    "spark.sql.streaming.stateStore.encodingFormat": "state rows keep the recorded encoding",
}


def _schema_error(target: SparkTarget, what: str, stored: StructType, new: StructType) -> SparkError:
    if target.error_classes:
        cls = f"StateStore{what.capitalize()}SchemaNotCompatible"
        return SparkError(
            f"org.apache.spark.sql.execution.streaming.state.{cls}",
            f"STATE_STORE_{what.upper()}_SCHEMA_NOT_COMPATIBLE",
            f"Provided {what} schema does not match existing state {what} schema.",
        )
    # 3.5 (facts: 3.5's StateSchemaCompatibilityChecker; not run live here)
    return SparkError(
        "org.apache.spark.sql.execution.streaming.state.StateSchemaNotCompatible",
        None,
        "Provided schema doesn't match to the schema for existing state!",
    )


def _query(ctx: AuditContext) -> QueryShape | None:
    return getattr(ctx, "query", None)


# ------------------------------------------------------------------------------------ sources


def _stored_kind(ctx: AuditContext, src: SourceOffset) -> str | None:
    """What the offset line and the sources/<i> log prove about a recorded source."""
    if src.source_id in ctx.ckpt.sources or file_source_log_offset(src.json) is not None:
        return "file"
    if src.json is None:
        return None
    try:
        value = json.loads(src.json)
    except ValueError:
        return None
    if (
        isinstance(value, dict)
        and value
        and all(isinstance(v, dict) and all(k.lstrip("-").isdigit() for k in v) for v in value.values())
    ):
        return "kafka"  # {"topic": {"0": offset, ...}}
    return None


def _local(url: str) -> str:
    p = urlparse(url)
    return unquote(p.path) if p.scheme in ("file", "") else url


@check
def query_refused(ctx: AuditContext) -> Iterator[Finding]:
    q = _query(ctx)
    if q is None:
        return
    mode = (q.sink.output_mode or "append").lower()
    if q.refused is None and q.sink.is_file and mode != "append" and ctx.target.at_least(4, 0):
        # the file sink takes append only (DataSource.createSink), checked at start() too (damage hunt 9, D26:
        # update mode into a parquet sink, seen on 4.3.0; 3.5's message is not recorded)
        yield Q_REFUSED.finding(
            f"not allowed: Spark refuses to start the new query: a file sink ({q.sink.kind}) takes append mode only, "
            f"the query asks for {mode}",
            [Evidence(q.spec, note=f"output mode {mode}")],
            spark_error=SparkError(
                "org.apache.spark.sql.AnalysisException",
                "STREAMING_OUTPUT_MODE.UNSUPPORTED_DATASOURCE",
                f"Invalid streaming output mode: {mode}. This output mode is not supported in Data Source "
                f"{q.sink.kind}",
            ),
            stage=10,
        )
        return
    if q.refused is None:
        return
    cls, message = q.refused
    first = message.split("\n", 1)[0]
    m = re.match(r"\[([A-Z_.]+)\]\s*(.*)", first)
    error_class, text = (m.group(1), m.group(2)) if m else (None, first)
    yield Q_REFUSED.finding(
        f"not allowed: Spark refuses to start the new query: {first}",
        [Evidence(q.spec, note=f"output mode {q.sink.output_mode or 'append'}")],
        spark_error=SparkError(cls, error_class, text.split(" SQLSTATE")[0][:200]),
        stage=10,
    )


@check
def query_sources(ctx: AuditContext) -> Iterator[Finding | Skipped]:
    q = _query(ctx)
    if q is None:
        return
    cur = ctx.latest_offset_file
    L = ctx.latest_offset
    if cur is None or L is None:
        yield Skipped(Q_SOURCES.id, "no readable offset file: the sources cannot be compared (a new query)")
        return
    off = ctx.ckpt.display(f"offsets/{L}")
    n_old, n_new = len(cur.offsets), len(q.sources)
    if n_old != n_new:
        yield Q_SOURCES.finding(
            f"not allowed: {off} records {n_old} source(s), the new query has {n_new} "
            f"({', '.join(s.description or s.kind for s in q.sources)}); Spark refuses to continue",
            [Evidence(off, expected=f"{n_new} source offset lines", found=f"{n_old}")],
            spark_error=SparkError(
                "java.lang.AssertionError",
                None,
                f"assertion failed: There are [{n_old}] sources in the checkpoint offsets and now there are "
                f"[{n_new}] sources requested by the query. Cannot continue.",
                batch=L,
            ),
            stage=50,
        )
        return
    for i, (rec, new) in enumerate(zip(cur.offsets, q.sources, strict=True)):
        old_kind = _stored_kind(ctx, rec)
        new_kind = "file" if new.kind == "file" else new.kind
        if old_kind is not None and (old_kind == "file") != (new_kind == "file"):
            # the new source parses the old one's offset JSON when the restart restores it: seen on 4.3.0, a rate
            # (micro-batch) source given a file source's {"logOffset":N} (damage hunt 9, D11); what other sources
            # raise is not recorded, and then the verdict is unknown, not "restarts"
            to_rate = old_kind == "file" and new.kind.startswith("rate")
            yield Q_SOURCES.finding(
                f"not allowed: source {i} was a {old_kind} source (offset {rec.json!r} in {off}), the new query "
                f"reads it with {new.kind} ({new.description}); the new source cannot resume from that offset"
                + ("" if to_rate else ": Spark fails on it (what it raises depends on the source)"),
                [Evidence(off, expected=f"a {new.kind} offset", found=str(rec.json)[:80])],
                spark_error=SparkError(None, None, "No usable value for offset", batch=L) if to_rate else None,
                stage=50 if to_rate else None,
                undecided=not to_rate,
            )
            continue
        yield from _source_params(ctx, i, rec, new, old_kind)


def _source_params(
    ctx: AuditContext, i: int, rec: SourceOffset, new: SourceShape, old_kind: str | None
) -> Iterator[Finding]:
    if new.kind == "file" and old_kind == "file" and "path" in new.options:
        log = ctx.ckpt.sources.get(rec.source_id)
        latest = file_source_log_offset(rec.json)
        if log is None or latest is None:
            return
        # on restart Spark calls getBatch(previous, latest) of the latest batch (MicroBatchExecution: the last
        # batch is run again, or, committed, "recovered" for sources that expect it): the file source builds a
        # DataFrame of the files that batch added, with the new path as basePath. A batch that added none (the
        # no-data batch an AvailableNow run ends with) builds nothing (damage hunt 9, D12/D13: restarted on 4.3)
        previous = _previous_log_offset(ctx, i)
        try:
            entries = [
                e
                for b in range(previous + 1, latest + 1)
                if b in log.files
                for e in ctx.ckpt.source_log(rec.source_id, b).entries
            ]
        except FormatError:
            return  # SRC-LOG-UNREADABLE reports it
        path = new.options["path"]
        if any(ch in path for ch in "*?[{"):
            return  # a glob: cannot tell
        root = _local(path).rstrip("/") + "/"
        paths = [_entry_path(e) for e in entries]
        outside = [p for p in paths if p and not _local(p).startswith(root)]
        if not paths:  # the latest batch read nothing: what the source read before says where it read
            earlier = sorted((b for b in log.files if b <= latest), reverse=True)[:20]
            for b in earlier:
                try:
                    before = [_entry_path(e) for e in ctx.ckpt.source_log(rec.source_id, b).entries]
                except FormatError:
                    return
                away = [p for p in before if p and not _local(p).startswith(root)]
                if before:
                    if away:
                        yield Q_SOURCE_PARAMS.finding(
                            f"not allowed (results unpredictable): source {i} now reads {path}, but it read files "
                            f"elsewhere before (e.g. {away[0]}, {ctx.ckpt.display(log.path_of(b))}); the latest "
                            "batch read none, so the restart works, and the file source remembers files by their "
                            "full path: every file under the new path is new to it, and rows of files it read "
                            "under the old path are read again where those files are there too (damage hunt 9, "
                            "D12: counts doubled on 4.3.0)",
                            [Evidence(ctx.ckpt.display(log.path_of(b)), expected=f"files under {path}", found=away[0])],
                        )
                    return
            return
        if paths and outside:
            rel = log.path_of(latest)
            yield Q_SOURCE_PARAMS.finding(
                f"not allowed: source {i} now reads {path}, but the latest batch read files elsewhere (e.g. "
                f"{outside[0]}, {ctx.ckpt.display(rel)}); on restart the file source lists the files of the "
                "latest batch again with the new directory as basePath and fails",
                [Evidence(ctx.ckpt.display(rel), expected=f"files under {path}", found=outside[0])],
                severity="error",
                spark_error=SparkError(
                    "java.lang.IllegalArgumentException", None, "Wrong basePath", batch=ctx.latest_offset
                ),
                stage=55,
            )
    elif new.kind == "kafka" and old_kind == "kafka" and rec.json:
        try:
            old_topics = set(json.loads(rec.json))
        except ValueError:
            return
        sub = new.options.get("subscribe")
        if sub is None:
            return
        new_topics = {t.strip() for t in sub.split(",") if t.strip()}
        if new_topics != old_topics:
            yield Q_SOURCE_PARAMS.finding(
                f"not allowed (results unpredictable): source {i} subscribes to {sorted(new_topics)}, the "
                f"checkpoint has offsets for {sorted(old_topics)}",
                [Evidence(ctx.ckpt.display(f"offsets/{ctx.latest_offset}"), found=rec.json[:120])],
            )


def _previous_log_offset(ctx: AuditContext, i: int) -> int:
    """Source ``i``'s file source log offset in the offset file before the latest (-1: none, or not a file source's
    offset there)."""
    L = ctx.latest_offset
    prev = ctx.ckpt.try_offset(L - 1) if L is not None and L > 0 else None
    if prev is None or i >= len(prev.offsets):
        return -1
    value = file_source_log_offset(prev.offsets[i].json)
    return -1 if value is None else value


def _entry_path(entry: dict[str, Any]) -> str:
    v = entry.get("path")
    return v if isinstance(v, str) else ""


# ------------------------------------------------------------------------------------- state


@check
def query_state(ctx: AuditContext) -> Iterator[Finding | Skipped]:
    q = _query(ctx)
    if q is None:
        return
    ck = ctx.ckpt
    stored = ck.state.operators
    new = {op.operator_id: op for op in q.operators}
    infos: dict[int, OperatorInfo] = {}
    for op_id, op in stored.items():
        try:
            infos[op_id] = operator_info(ck, op)
        except FormatError as exc:
            yield Skipped(Q_OPERATORS.id, f"operator {op_id}: metadata unreadable ({exc}); not compared")
    old_names = {i: infos[i].name for i in infos if infos[i].name}
    new_names = {i: o.name for i, o in new.items()}
    if ctx.target.major >= 4 and old_names and old_names != new_names:
        # 4.x: IncrementalExecution.checkOperatorValidWithMetadata compares every operator id of the first
        # batch after a restart with state/<op>/_metadata (seen on 4.3.0: a removed operator)
        def listing(names: dict[int, str | None]) -> str:
            return ", ".join(f"(OperatorId: {i} -> OperatorName: {n})" for i, n in sorted(names.items()))

        yield Q_OPERATORS.finding(
            f"not allowed: the checkpoint's operator metadata has [{listing(dict(old_names))}], the new query "
            f"has [{listing(dict(new_names))}]; Spark refuses the restart",
            [
                Evidence(ck.display(f"state/{i}/_metadata"), expected=new_names.get(i), found=n)
                for i, n in old_names.items()
            ],
            spark_error=SparkError(
                "org.apache.spark.SparkRuntimeException",
                "STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA",
                "Streaming stateful operator name does not match with the operator in state metadata.",
            ),
            stage=61,
        )
        return
    committed = ctx.latest_commit is not None
    for op_id in sorted(set(new) - set(stored)):
        added = new[op_id]
        if committed:
            yield Q_OPERATORS.finding(
                f"not allowed: the new query has stateful operator {op_id} ({added.name}, "
                f"{added.detail or added.node}) "
                f"but {ck.display('state')} has no state for it; Spark loads its state version "
                f"{ctx.state_version} at the first batch and fails",
                [Evidence(ck.display(f"state/{op_id}"), expected="state of the operator", found="none")],
                spark_error=first_state_file_missing(ctx) if ctx.state_version else None,
                stage=65,
            )
    for op_id in sorted(set(stored) - set(new)):
        yield Q_OPERATORS.finding(
            f"not allowed: {ck.display(f'state/{op_id}')} holds state of operator {op_id}, which the new query "
            "does not have; that state would be silently unused",
            [Evidence(ck.display(f"state/{op_id}"), note="no matching operator in the new plan")],
            silent=True,
        )
    for op_id in sorted(set(infos) & set(new)):
        yield from _compare_operator(ctx, stored[op_id], infos[op_id], new[op_id])


def _compare_operator(
    ctx: AuditContext, op: OperatorDir, info: OperatorInfo, new: OperatorShape
) -> Iterator[Finding | Skipped]:
    ck = ctx.ckpt
    if info.name and info.name != new.name:
        yield Q_OPERATORS.finding(
            f"not allowed: operator {op.operator} is {info.name} in the checkpoint's operator metadata and "
            f"{new.name} in the new query",
            [Evidence(ck.display(f"{op.rel}/_metadata"), expected=new.name, found=info.name)],
        )
        return
    if info.is_tws or not new.stores:
        # Spark compares them at the restart all the same: an unchanged query restarts, a changed one may fail
        # (damage hunt 9 on 4.3.0, transformWithState: a state variable's type changed failed with
        # STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE or STATE_STORE_INVALID_VARIABLE_TYPE_CHANGE, a renamed one
        # restarted with its state gone): whether this one restarts is not known here
        yield Q_UNCHECKED.finding(
            f"operator {op.operator} ({new.name}): its state schemas are not derived from the plan here (a "
            "transformWithState processor declares its state variables when it runs), so they are not compared; "
            "Spark compares them at the restart and fails on a changed key, a changed variable type or a variable "
            "of another kind, and a renamed variable starts empty",
            [Evidence(ck.display(op.rel))],
            severity="warning",
            undecided=True,
        )
        return
    old_names = set(info.stores)
    new_names = {s.name for s in new.stores}
    if old_names != new_names and not (old_names == {"default"} and len(new.stores) == 1):
        yield Q_OPERATORS.finding(
            f"not allowed: operator {op.operator} stores {sorted(old_names)} in the checkpoint, the new "
            f"{new.name} has {sorted(new_names)} (a different operator or state format)",
            [Evidence(ck.display(op.rel), expected=", ".join(sorted(new_names)), found=", ".join(sorted(old_names)))],
        )
        return
    if info.is_join:
        swapped = _join_sides_swapped(ctx, op, info, new)
        if swapped is not None:
            yield swapped
            return
    for store in new.stores:
        yield from _compare_store(ctx, op, info, new, store)


def _join_sides_swapped(ctx: AuditContext, op: OperatorDir, info: OperatorInfo, new: OperatorShape) -> Finding | None:
    """The new join's left rows have the stored right side's columns and the other way round (damage hunt 9, D14:
    a.join(b) changed to b.join(a) restarted on 4.3.0 and joined each side's stored rows as the other's)."""
    names = {s.name: s for s in new.stores}
    sides = ("left-keyWithIndexToValue", "right-keyWithIndexToValue")
    if not all(n in names and names[n].value is not None for n in sides):
        return None
    try:
        old = [store_schema(ctx.ckpt, op, info, n).value for n in sides]
    except FormatError:
        return None
    new_left, new_right = (names[n].value for n in sides)
    assert new_left is not None and new_right is not None
    if old[0].names == old[1].names or (new_left.names, new_right.names) != (old[1].names, old[0].names):
        return None
    return Q_MEANING.finding(
        f"not allowed (silently wrong): operator {op.operator} ({new.name}): the stored left side holds rows "
        f"{ddl(old[0])} and the right side {ddl(old[1])}; the new query's sides are the other way round, so each "
        "side's stored rows are joined as the other's",
        [Evidence(ctx.ckpt.display(f"{op.rel}/0/{sides[0]}"), expected=ddl(new_left), found=ddl(old[0]))],
        silent=True,
    )


def _compare_store(
    ctx: AuditContext, op: OperatorDir, info: OperatorInfo, new: OperatorShape, store: StoreShape
) -> Iterator[Finding | Skipped]:
    ck = ctx.ckpt
    try:
        old = store_schema(ck, op, info, store.name)
    except FormatError as exc:
        yield Skipped(Q_KEY.id, f"operator {op.operator} store {store.name}: {exc}")
        return
    where = old.source or ck.display(op.rel)
    label = f"operator {op.operator} ({new.name}{', ' + new.detail if new.detail else ''})"
    if store.name != "default":
        label += f" store {store.name}"
    renamed: list[tuple[StructType, StructType, str]] = []
    checked = [("key", Q_KEY, store.key, old.key)]
    if not store.ignore_value:
        checked.append(("value", Q_VALUE, store.value, old.value))
    for what, rule, new_schema, old_schema in checked:
        if new_schema is None:
            continue
        if not compatible(new_schema, old_schema):
            yield rule.finding(
                f"not allowed: {label}: the stored {what} schema is {ddl(old_schema)}, the new query's is "
                f"{ddl(new_schema)}; Spark refuses the restart",
                [Evidence(where, expected=ddl(new_schema), found=ddl(old_schema))],
                spark_error=_schema_error(ctx.target, what, old_schema, new_schema),
                stage=62,
            )
            return
        if old_schema.names != new_schema.names:
            renamed.append((old_schema, new_schema, what))
    for old_s, new_s, what in renamed:
        if sorted(old_s.names) == sorted(new_s.names):
            moved = [f"{n} -> {o}" for o, n in zip(old_s.names, new_s.names, strict=True) if o != n]
            yield Q_REORDERED.finding(
                f"not allowed (silently wrong): {label}: the stored {what} schema is {ddl(old_s)}, the new "
                f"query's is {ddl(new_s)}: same types in another order, so Spark's check passes and the new "
                f"fields read the stored values of others ({', '.join(moved)})",
                [Evidence(where, expected=ddl(new_s), found=ddl(old_s))],
                silent=True,
            )
            return
    for old_s, new_s, what in renamed:
        if what == "value" and new.name == AGGREGATION:
            yield Q_MEANING.finding(
                f"not allowed (silently wrong): {label}: the stored aggregation buffers are {ddl(old_s)}, the new "
                f"query's {ddl(new_s)}: buffers are named by their aggregate functions, so the new functions "
                "continue from the values the old ones stored",
                [Evidence(where, expected=ddl(new_s), found=ddl(old_s))],
                silent=True,
            )
            return
    keys = [(old_s, new_s) for old_s, new_s, what in renamed if what == "key"]
    if keys:
        old_k, new_k = keys[0]
        yield Q_MEANING.finding(
            f"{label}: the stored key is {ddl(old_k)}, the new query's {ddl(new_k)}: same types, other names. If "
            "the query only renamed the column, the state continues; if it groups (deduplicates, joins) by "
            "another column or expression, no stored key matches a new one and results are silently wrong",
            [Evidence(where, expected=ddl(new_k), found=ddl(old_k))],
            severity="warning",
        )
        return
    if renamed:
        yield Q_RENAMED.finding(
            f"allowed: {label}: stored {ddl(old.key)} -> {ddl(old.value)}, new {ddl(store.key)} -> "
            f"{ddl(store.value)}: only names differ; Spark reads the stored values by position",
            [Evidence(where)],
        )


# ------------------------------------------------------------------------------------ windows

WINDOW_SAMPLE = 16  # keys decoded per partition
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


@check
def query_windows(ctx: AuditContext) -> Iterator[Finding]:
    q = _query(ctx)
    if q is None or ctx.state_version <= 0:
        return
    for new in q.operators:
        op = ctx.ckpt.state.operators.get(new.operator_id)
        if new.window is None or op is None:
            continue
        try:
            info = operator_info(ctx.ckpt, op)
            schema = store_schema(ctx.ckpt, op, info, "default")
        except FormatError:
            continue
        if info.name not in (None, AGGREGATION) or new.window.field >= len(schema.key.fields):
            continue
        field = schema.key.fields[new.window.field].name
        stored, where = _stored_windows(ctx, op, schema, field)
        if stored:
            found = list(_compare_windows(ctx, new, new.window, stored, where))
            yield from found or _compare_last_batch(ctx, op, schema, field, new, new.window)


def _stored_windows(
    ctx: AuditContext, op: OperatorDir, schema: StoreSchema, field: str
) -> tuple[set[tuple[int, int]], dict[tuple[int, int], str]]:
    """The (start, end) of the windows in a sample of the stored keys (microseconds), and a file each was read from.
    Keys that do not decode, or whose window is not a (timestamp, timestamp) struct, give nothing."""
    ck, N = ctx.ckpt, ctx.state_version
    ids = unique_ids(ctx, N)
    found = providers.of(ctx.conf, op)
    compression = codec.normalize(ctx.conf.get(CODEC, "lz4"))
    decoder = Decoder(schema, found.kind, ck.display(op.rel))
    windows: dict[tuple[int, int], str] = {}
    for p in sorted(op.partitions):
        store = op.partitions[p].get("default")
        uid = store_unique_id(ids, op.operator, p, 0)
        if store is None or (ids is not None and uid is None):
            continue
        for step in sample.newest_steps(store, N, found.kind, uid)[:4]:
            try:
                keys = [decoder.key(k) for k in sample.first_keys(ck, store, step, compression, WINDOW_SAMPLE)]
            except (FormatError, UsageError, TypeError, ValueError, KeyError):
                break
            for key in keys:
                w = key.get(field)
                if isinstance(w, dict) and isinstance(w.get("start"), datetime) and isinstance(w.get("end"), datetime):
                    windows.setdefault((_micros(w["start"]), _micros(w["end"])), ck.display(step.rel))
            if keys:
                break
    return set(windows), windows


def _micros(t: datetime) -> int:
    return (t - _EPOCH) // timedelta(microseconds=1)


def _when(micros: int) -> str:
    return (_EPOCH + timedelta(microseconds=micros)).strftime("%Y-%m-%d %H:%M:%S.%f").rstrip("0").rstrip(".")


def _span(pair: tuple[int, int]) -> str:
    return f"[{_when(pair[0])}, {_when(pair[1])})"


def _compare_windows(
    ctx: AuditContext,
    new: OperatorShape,
    window: WindowShape,
    stored: set[tuple[int, int]],
    where: dict[tuple[int, int], str],
) -> Iterator[Finding]:
    label = f"operator {new.operator_id} ({new.name})"
    lengths = sorted({e - s for s, e in stored})
    other = sorted(w for w in stored if w[1] - w[0] != window.duration)
    misaligned = sorted(w for w in stored if (w[0] - window.offset) % window.slide)
    example = (other or misaligned or sorted(stored))[0]
    evidence = [Evidence(where[example], expected=window.describe(), found=f"stored window {_span(example)}")]
    if other or misaligned:
        what = (
            "the stored windows last " + ", ".join(f"{n / 1_000_000:g} s" for n in lengths)
            if other
            else f"stored windows start at times the new windows never start at (e.g. {_span(misaligned[0])})"
        )
        yield Q_WINDOW.finding(
            f"not allowed (silently wrong): {label}: {what}; the new query's windows are {window.describe()}. "
            "Spark restarts (the key schema is the same): the stored windows (e.g. "
            f"{_span(example)}) are never updated again, and the new windows start without the rows already "
            "consumed",
            evidence,
            silent=True,
        )
        return


def _compare_last_batch(
    ctx: AuditContext, op: OperatorDir, schema: StoreSchema, field: str, new: OperatorShape, window: WindowShape
) -> Iterator[Finding]:
    """A batch updates every window its rows fall in: windows the last batch updated alone, where the new query
    would put their rows in others too, were made by other windows (damage hunt 9, D22: tumbling 10 s changed to
    10 s sliding every 5 s restarted on 4.3.0 and never emitted the windows between the stored ones)."""
    if window.slide == window.duration:
        return
    label = f"operator {new.operator_id} ({new.name})"
    last = _last_batch_windows(ctx, op, schema, field)
    if last is None:
        return
    version, groups = last
    for rest, files in groups.items():
        updated = set(files)
        lone = next((w for w in sorted(updated) if not _rows_fit(w, updated, window)), None)
        if lone is None:
            continue
        rel = files[lone]
        others = sorted(updated - {lone})
        yield Q_WINDOW.finding(
            f"not allowed (silently wrong): {label}: the batch of state version {version} updated window "
            f"{_span(lone)} of key ({rest}) "
            + (f"and {', '.join(_span(w) for w in others[:3])}" if others else "and no other window of it")
            + f"; the new query's windows are {window.describe()}, which puts every row of that window in "
            "others too: the checkpoint was written with other windows. Spark restarts (the key schema is the "
            "same); the windows the new query adds beside the stored ones start without the rows already consumed",
            [Evidence(ctx.ckpt.display(rel), expected=window.describe(), found=f"{_span(lone)} alone")],
            silent=True,
        )
        return


_MAX_CHANGES = 50_000  # records read from one version's deltas/changelogs, all partitions together


def _last_batch_windows(
    ctx: AuditContext, op: OperatorDir, schema: StoreSchema, field: str
) -> tuple[int, dict[str, dict[tuple[int, int], str]]] | None:
    """The windows the newest batch that updated any put rows in, per the rest of the key (all partitions: the
    window is part of the partitioning key). Read from each partition's delta/changelog of that version, which holds
    every window the batch updated (removals aside). None where that is not known: a version without such a file
    in every partition, format v2 before the latest version, too many records."""
    ck, N = ctx.ckpt, ctx.state_version
    ids = unique_ids(ctx, N)
    compression = codec.normalize(ctx.conf.get(CODEC, "lz4"))
    decoder = Decoder(schema, providers.of(ctx.conf, op).kind, ck.display(op.rel))
    for version in range(N, max(N - 4, 0), -1):
        if ids is not None and version != N:
            return None
        groups: dict[str, dict[tuple[int, int], str]] = {}
        total = 0
        for p in sorted(op.partitions):
            store = op.partitions[p].get("default")
            uid = store_unique_id(ids, op.operator, p, 0)
            if store is None:
                continue
            rel, kind = next(
                ((r, k) for k in ("delta", "changelog") if (r := store.files.get((k, version, uid)))), (None, "")
            )
            if rel is None:
                return None
            try:
                records = sample.changes(ck, rel, kind, compression, _MAX_CHANGES - total)
                if records is None:
                    return None
                total += len(records)
                for rec in records:
                    if rec.value is None:
                        continue  # a removal (an evicted window): no rows
                    key = decoder.key(rec.key)
                    w = key.get(field)
                    if not (isinstance(w, dict) and isinstance(w.get("start"), datetime)):
                        return None
                    rest = ", ".join(f"{k}={v!r}" for k, v in key.items() if k != field)
                    groups.setdefault(rest, {}).setdefault((_micros(w["start"]), _micros(w["end"])), rel)
            except (FormatError, UsageError, TypeError, ValueError, KeyError):
                return None
        if groups:
            return version, groups
    return None


def _rows_fit(w: tuple[int, int], updated: set[tuple[int, int]], window: WindowShape) -> bool:
    """Whether a row somewhere in window ``w`` would, under the new query's windows, update only windows in
    ``updated``: a batch updates every window its rows fall in. Windows the new query would not make are left to
    the duration and alignment checks (True). Checked at each point where the set of windows holding a time
    changes."""
    D, S, O = window.duration, window.slide, window.offset
    s, e = w
    if e - s != D or (s - O) % S or D // S > 1000:
        return True
    points = {s + m * S for m in range(-(-D // S))}
    points |= {x + D for x in range(s - ((D // S) * S), s, S) if s <= x + D < e}
    for t in sorted(p for p in points if s <= p < e):
        first = t - ((t - O) % S)  # the newest window start at or before t
        holding = [(x, x + D) for x in range(first, t - D, -S)]
        if all(h in updated for h in holding):
            return True
    return False


# -------------------------------------------------------------------------------------- confs


@check
def query_confs(ctx: AuditContext) -> Iterator[Finding]:
    q = _query(ctx)
    if q is None or ctx.latest_offset is None:
        return
    stored = ctx.conf
    off = ctx.ckpt.display(f"offsets/{ctx.latest_offset}")
    for key, effect in _CONFS.items():
        new = q.conf.get(key)
        old = stored.get(key)
        if new is None or old is None or new == old:
            continue
        if key == _POLICY and q.watermarks < 2:
            note = " (the query has fewer than two watermarks: the policy does not matter)"
        else:
            note = ""
        yield Q_CONF.finding(
            f"allowed, ignored: the session sets {key}={new}, {off} records {old}: {effect}{note}",
            [Evidence(off, expected=f"{key}={new}", found=f"{key}={old}")],
        )


# --------------------------------------------------------------------------------------- sink


def _log_starts_past_zero(ctx: AuditContext, path: str) -> Iterator[Finding]:
    """The new query's file sink writes to ``path``, which holds no _spark_metadata log (or does not exist), while
    batches are committed: its first entry is the restart's batch (damage hunt 9, D23 and D24 on 4.3.0: a new sink
    path, and foreachBatch turned into a file sink over its old output; both restarted, then reading the output
    failed: `_spark_metadata/0 doesn't exist (latestId: 5, compactInterval: 10)`)."""
    first, K = ctx.next_batch, ctx.latest_commit
    if first is None or first <= 0 or K is None:
        return
    interval = told_compact_interval(ctx.session_conf)
    compaction = next_compaction(first, interval)
    yield Q_SINK.finding(
        f"not allowed (silently wrong): the new query's file sink writes to {path}, which has no _spark_metadata "
        f"log, while batches 0..{K} are committed: the restart writes _spark_metadata/{first} as the log's first "
        f"entry; reading {path} then fails (FileNotFoundException: .../_spark_metadata/0 doesn't exist), and so "
        f"does the query at batch {compaction}, where the log compacts (compact interval {interval}) and finds "
        "entries 0.. missing",
        [Evidence(f"{path.rstrip('/')}/_spark_metadata", expected=f"entries 0..{first - 1}", found="none")],
        severity="error",
        silent=compaction != first,
        # the restart's first batch compacts: it fails there (the file sink log's compaction, SINK-LOG-COMPACT)
        spark_error=SparkError(
            "org.apache.spark.SparkFileNotFoundException", "BATCH_METADATA_NOT_FOUND", "_spark_metadata/"
        )
        if compaction == first
        else None,
        stage=79 if compaction == first else None,
        fix="Write to the file sink path the checkpointed query wrote (its _spark_metadata has these batches), or "
        f"start the changed query on a new checkpoint (`ckptfix offsets export {ctx.ckpt.location.url}` gives "
        "where its sources start): a new checkpoint's batch ids, and so its sink log, start at 0.",
    )


@check
def query_sink(ctx: AuditContext) -> Iterator[Finding]:
    q = _query(ctx)
    if q is None or ctx.latest_commit is None:
        return
    sink = q.sink
    old_file_sink = ctx.sink is not None and ctx.sink.log.latest is not None
    if sink.is_file:
        same = ctx.sink is not None and _local(sink.path or "").rstrip("/") == _local(ctx.sink.location.url).rstrip("/")
        if ctx.sink is not None and not same:
            if old_file_sink:
                yield Q_SINK.finding(
                    f"not allowed: the checkpoint's file sink is {ctx.sink.location.url} (its _spark_metadata has "
                    f"batches), the new query writes to {sink.path}: 'Changes to output directory of a file sink "
                    "is not allowed'",
                    [Evidence(ctx.sink.location.display("_spark_metadata"), expected=str(sink.path))],
                )
            return
        if ctx.sink is not None and old_file_sink:
            return  # the same file sink, its log there: the sink rules compare it with the logs
        yield from _log_starts_past_zero(ctx, str(sink.path))
        return
    if old_file_sink:
        assert ctx.sink is not None
        if sink.kind.lower() == "kafka":
            yield Q_SINK.finding(
                f"allowed: the checkpoint's file sink {ctx.sink.location.url} is replaced by Kafka: 'File sink to "
                "Kafka sink is allowed. Kafka will see only the new data.'",
                [Evidence(ctx.sink.location.display("_spark_metadata"))],
                severity="info",
            )
        else:
            yield Q_SINK.finding(
                f"ill-defined: the checkpoint's file sink {ctx.sink.location.url} is replaced by {sink.kind}: "
                "'Changes between a few specific combinations of sinks are allowed. This needs to be verified on "
                "a case-by-case basis.'",
                [Evidence(ctx.sink.location.display("_spark_metadata"))],
            )
        return
    if sink.kind.lower() in ("memory", "console", "noop"):
        yield Q_SINK.finding(
            f"ill-defined: the new query writes to the {sink.kind} sink; the checkpoint does not record the old "
            "sink, and the guide allows sink changes only for specific combinations ('This needs to be verified "
            f"on a case-by-case basis'); the {sink.kind} sink keeps nothing of what batches 0..{ctx.latest_commit} "
            "wrote",
            [Evidence(ctx.ckpt.display(f"commits/{ctx.latest_commit}"), note="committed batches")],
            severity="info",
        )
