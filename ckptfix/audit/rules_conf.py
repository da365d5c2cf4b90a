"""Confs the offset log does not record: the restarting session's value decides.

Spark restores every ``OffsetSeqMetadata.relevantSQLConfs`` key from the offset log; a key the log lacks gets
its legacy default when Spark has one (``relevantSQLConfDefaultValues``), else the session's value prevails
(``OffsetSeqMetadata.setSessionConf``). ``spark.sql.shuffle.partitions`` has no legacy default: a checkpoint
whose offset log does not record it (written by Spark 2.1, or edited) restarts with the session's value
(200 unless set), while its state was written hash-partitioned into the number of partition directories it
has. Seen with PySpark 4.3.0 on an aggregation with 3 state partitions whose offset files lost the key:
with the session's default the first batch fails loading a partition that has no state directory; with 2 it
restarts and silently computes wrong counts (keys hashed into partition 2 are never read); with 3 it restarts
correctly and records 3 in the new offset file. Spark's own 2.1.0 checkpoint (10 partitions) behaves the
same in its suite, which sets the conf to 10.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from ckptfix.audit import spark_errors as E
from ckptfix.audit.context import AuditContext
from ckptfix.audit.model import Evidence, Finding, SparkError
from ckptfix.audit.registry import check, define
from ckptfix.formats import offsetlog
from ckptfix.state import schemas
from ckptfix.stores import provider as providers

SHUFFLE = "spark.sql.shuffle.partitions"
SPARK_DEFAULT_SHUFFLE = "200"

SHUFFLE_NOT_RECORDED = define(
    "CONF-SHUFFLE-PARTITIONS-NOT-RECORDED",
    "error",
    "The offset log does not record spark.sql.shuffle.partitions",
    "Spark restores the number of state partitions from the offset log. Where it is not recorded (checkpoints "
    "written by Spark 2.1, or an edited offset file), the restarting session's value is used (200 by default). "
    "More partitions than the state has: the first batch fails loading a partition without state. Fewer: Spark "
    "restarts and silently reads only part of the state (wrong aggregates, duplicates let through).",
    "Restart with `--conf spark.sql.shuffle.partitions=N` (N = the number of state partitions the finding names) "
    "in the session that runs the query; Spark then records it in the next offset file. Tell the audit the same "
    "with `ckptfix audit CKPT --conf spark.sql.shuffle.partitions=N`.",
)


def state_partitions(ctx: AuditContext) -> tuple[int, int] | None:
    """(operator, number of partitions) of the operator with the most partition directories, when the state
    is hash-partitioned into more than one (a global limit keeps one partition whatever the conf says)."""
    ops = [(max(op.partitions) + 1, op.operator) for op in ctx.ckpt.state.operators.values() if op.partitions]
    if not ops:
        return None
    n, op_id = max(ops)
    return (op_id, n) if n > 1 else None


@check
def shuffle_partitions(ctx: AuditContext) -> Iterator[Finding]:
    entry = ctx.latest_offset_file
    if entry is None or entry.metadata is None or SHUFFLE in entry.metadata.conf:
        return
    found = state_partitions(ctx)
    if found is None or ctx.state_version == 0:
        return
    op_id, P = found
    told = ctx.session_conf.get(SHUFFLE)
    S = told if told is not None else SPARK_DEFAULT_SHUFFLE
    whose = "the session's value you gave" if told is not None else "Spark's default, unless the session sets it"
    L = ctx.latest_offset
    evidence = [
        Evidence(ctx.ckpt.display(f"offsets/{L}"), expected=f"{SHUFFLE} in the conf map", found="not recorded"),
        Evidence(ctx.ckpt.display(f"state/{op_id}"), note=f"partition directories 0..{P - 1}"),
    ]
    head = (
        f"offsets/{L} does not record {SHUFFLE}, so Spark restarts with the session's value ({S}: {whose}), "
        f"but the state of operator {op_id} has {P} partitions"
    )
    if not S.isdigit():
        return
    if int(S) == P:
        yield SHUFFLE_NOT_RECORDED.finding(
            f"{head}: they agree; keep {SHUFFLE}={P} in every session that restarts this query until Spark has "
            "recorded it in a new offset file",
            evidence,
            severity="info",
        )
    elif int(S) > P:
        rocks = providers.of(ctx.conf).kind == "rocksdb"
        rel = f"/1.{'changelog' if rocks else 'delta'}"  # the first of the partitions without state: which varies
        err = E.streaming_file_missing(ctx.target, rel) if rocks else E.delta_missing(ctx.target, rel)
        yield SHUFFLE_NOT_RECORDED.finding(
            f"{head}: partitions {P}..{int(S) - 1} have no state and the first batch fails loading them; "
            f"restart with {SHUFFLE}={P}",
            evidence,
            spark_error=err,
            stage=66,
        )
    else:
        yield SHUFFLE_NOT_RECORDED.finding(
            f"{head}: Spark restarts but reads only partitions 0..{int(S) - 1} of the state and hashes keys into "
            f"{S} partitions, so results are silently wrong; restart with {SHUFFLE}={P}",
            evidence,
            silent=True,
        )


# --------------------------------------------------------------------------- state format versions

#: the offset-log key that selects an operator's state format -> (operator, what the user calls it)
FORMAT_KEYS: dict[str, tuple[str, str]] = {
    "spark.sql.streaming.aggregation.stateFormatVersion": (schemas.AGGREGATION, "streaming aggregation"),
    "spark.sql.streaming.flatMapGroupsWithState.stateFormatVersion": (
        schemas.FLATMAP_GROUPS_WITH_STATE,
        "flatMapGroupsWithState",
    ),
    "spark.sql.streaming.join.stateFormatVersion": (schemas.JOIN, "stream-stream join"),
}
SCHEMA_35 = "org.apache.spark.sql.execution.streaming.state.StateSchemaNotCompatible"
VALUE_SCHEMA = "org.apache.spark.sql.execution.streaming.state.StateStoreValueSchemaNotCompatible"

_FORMAT_SEEN = (
    "Seen on 3.5.9 to 4.3 with an aggregation, an inner and a left outer stream-stream join, and "
    "applyInPandasWithState (whose state format flatMapGroupsWithState's key selects): every restart fails. 4.x: "
    "STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE; 3.5: StateSchemaNotCompatible from partition 0's task (or "
    "InvalidUnsafeRowException, 'state format invalidation', when another partition's task fails first); an outer "
    "join restarted in format 1 fails earlier, at planning (IllegalArgumentException: '... join with state format "
    "version 1 - correctness issue is discovered')."
)
_FORMAT_FIX = (
    "`ckptfix repair CKPT` writes the format the state was written in into the latest offset file (a session "
    "--conf cannot: Spark takes the value from the offset log, and a key the file lacks gets the legacy default)."
)

FORMAT_NOT_RECORDED = define(
    "CONF-STATE-FORMAT-NOT-RECORDED",
    "error",
    "The latest offset file lost the state format its operator was written in",
    "A stateful operator's state layout is chosen once, by spark.sql.streaming.{aggregation,join,"
    "flatMapGroupsWithState}.stateFormatVersion, and Spark writes that value into every offset file. On restart "
    "it takes the value from the latest offset file; a key that file does not record gets Spark's legacy default, "
    "1 (OffsetSeqMetadata.relevantSQLConfDefaultValues), whatever the session sets. Where the state was written "
    "in format 2 and the latest file lost the key (an edit), the restarted query plans format 1 against it. "
    + _FORMAT_SEEN,
    _FORMAT_FIX,
)
FORMAT_CHANGED = define(
    "CONF-STATE-FORMAT-CHANGED",
    "error",
    "The latest offset file records another state format than the state was written in",
    "Spark takes a stateful operator's state format (spark.sql.streaming.{aggregation,join,"
    "flatMapGroupsWithState}.stateFormatVersion) from the latest offset file and never changes it for a "
    "checkpoint: every offset file records the same value. Where the latest records another value than the older "
    "files, or than the stored state schema shows (an edit), the restarted query plans that format against state "
    "written in the other. " + _FORMAT_SEEN,
    _FORMAT_FIX,
)


@dataclass(frozen=True)
class FormatConflict:
    """A state format key whose value at restart differs from the format the state was written in."""

    key: str
    recorded: str | None  # what offsets/L records (None: not recorded)
    restart: str  # what Spark restarts with: the recorded value, else the legacy default
    written: str  # the format the state was written in
    where: str  # the file that shows it: an older offset file, or the stored schema


def _recorded_before(ctx: AuditContext, key: str, before: int) -> tuple[str, str] | None:
    """(offsets/<b>, value) when the newest readable offset file older than ``before`` records ``key``; None when
    it does not (a checkpoint from a release that did not record it, or more files edited) or there is none."""
    for b in sorted((b for b in ctx.ckpt.offsets.files if b < before), reverse=True):
        entry = ctx.ckpt.try_offset(b)
        if entry is not None and entry.metadata is not None:
            return (f"offsets/{b}", entry.metadata.conf[key]) if key in entry.metadata.conf else None
    return None


def format_conflicts(ctx: AuditContext) -> dict[str, FormatConflict]:
    """Format keys whose value at restart (offsets/L's, else the legacy default) contradicts the format the state
    was written in. Evidence, in order: the newest older offset file that records the key (Spark writes every key
    into every file; where it agrees with offsets/L, that is taken as the truth), else the stored schema of an
    operator the key governs. Only formats 1 and 2, whose layouts :func:`schemas.written_format` tells apart.
    Shared with the repair that writes the written format back."""
    entry, L = ctx.latest_offset_file, ctx.latest_offset
    if entry is None or entry.metadata is None or L is None or not ctx.ckpt.state.operators:
        return {}
    out = {}
    for key, (name, _) in FORMAT_KEYS.items():
        recorded = entry.metadata.conf.get(key)
        restart = recorded if recorded is not None else offsetlog.LEGACY_DEFAULTS[key]
        found = _recorded_before(ctx, key, L)
        if found is None:
            ops = [
                op
                for op in ctx.ckpt.state.operators.values()
                if schemas.layout_name(ctx.operator_names[op.operator]) == name
            ]
            found = next((f for op in ops if (f := schemas.written_format(ctx.ckpt, op, name)) is not None), None)
        if found is not None and found[1] != restart and {found[1], restart} <= {"1", "2"}:
            out[key] = FormatConflict(key, recorded, restart, found[1], found[0])
    return out


def _join_type(ctx: AuditContext, op_id: int) -> str | None:
    """The join type of operator ``op_id`` when the audit has the query (``--against``): the files do not say."""
    if ctx.query is None:
        return None
    shape = next((o for o in ctx.query.operators if o.operator_id == op_id), None)
    return shape.detail.split()[0] if shape is not None and shape.detail.endswith(" join") else None


@check
def state_format_recorded(ctx: AuditContext) -> Iterator[Finding]:
    if ctx.state_version == 0:
        return
    conflicts = format_conflicts(ctx)
    if not conflicts:
        return
    ck, L, t = ctx.ckpt, ctx.latest_offset, ctx.target
    names = ctx.operator_names
    for key, c in conflicts.items():
        name, what = FORMAT_KEYS[key]
        rule = FORMAT_NOT_RECORDED if c.recorded is None else FORMAT_CHANGED
        from_log = c.where.startswith("offsets/")
        shown = f"{c.where} records {c.written}" if from_log else f"{c.where} is format {c.written}'s"
        evidence = [
            Evidence(
                ck.display(f"offsets/{L}"),
                expected=f"{key}={c.written}",
                found="not recorded" if c.recorded is None else f"{key}={c.recorded}",
            ),
            Evidence(ck.display(c.where) if from_log else c.where, note=shown),
        ]
        ops = sorted(op for op, n in names.items() if schemas.layout_name(n) == name)
        unknown = sorted(op for op, n in names.items() if n is None)
        head = (
            f"offsets/{L} does not record {key}, so Spark restarts with its legacy default {c.restart}"
            if c.recorded is None
            else f"offsets/{L} records {key}={c.recorded}, so Spark restarts with it"
        ) + f", but {shown}"
        if not ops:
            if unknown:
                yield rule.finding(
                    f"{head}; whether operator(s) {', '.join(map(str, unknown))} are a {what} the files do not "
                    "say (no operator metadata, no schema file)",
                    evidence,
                    severity="warning",
                    undecided=True,
                )
            continue
        if names[ops[0]] != name:  # applyInPandasWithState keeps flatMapGroupsWithState's layout and key
            what = str(names[ops[0]])
        evidence.append(Evidence(ck.display(f"state/{ops[0]}"), note=f"a {what} (state format {c.written})"))
        how = _join_type(ctx, ops[0]) if name == schemas.JOIN else None
        if how is not None and how != "Inner" and c.restart == "1":
            yield rule.finding(
                f"{head}: operator {ops[0]} is a {how} {what}; Spark refuses format 1 for it when it plans the "
                "first batch",
                evidence,
                spark_error=SparkError(
                    "java.lang.IllegalArgumentException",
                    None,
                    f"The query is using stream-stream {how} join with state format version 1 - correctness issue "
                    "is discovered.",
                    ctx.next_batch,
                ),
                stage=64,
            )
            continue
        if t.at_least(4, 0):
            err = SparkError(
                VALUE_SCHEMA,
                "STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE",
                "Provided value schema does not match existing state value schema.",
                ctx.next_batch,
            )
        else:  # 3.5 checks the schema in partition 0's task only; another partition's task may fail first
            err = SparkError(
                SCHEMA_35, None, "Provided schema doesn't match to the schema for existing state!", ctx.next_batch
            )
        race = (
            ""
            if t.at_least(4, 0)
            else " (Spark 3.5 checks the schema in partition 0's task; when another partition's task fails first, "
            "the error is InvalidUnsafeRowException: 'The streaming query failed by state format invalidation')"
        )
        outer = (
            " An outer join fails earlier, when Spark plans the first batch: IllegalArgumentException 'The query is "
            "using stream-stream <type> join with state format version 1 - correctness issue is discovered' (the "
            "files do not record the join type; `--against` tells it)."
            if name == schemas.JOIN and how is None and c.restart == "1"
            else ""
        )
        yield rule.finding(
            f"{head}: operator {ops[0]} is a {what} whose state was written in format {c.written}; format "
            f"{c.restart} reads it as rows of another shape and the first batch fails{race}.{outer}",
            evidence,
            spark_error=err,
            stage=64,
        )
