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

from ckptfix.audit import spark_errors as E
from ckptfix.audit.context import AuditContext
from ckptfix.audit.model import Evidence, Finding
from ckptfix.audit.registry import check, define
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
