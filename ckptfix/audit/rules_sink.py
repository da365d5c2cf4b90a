"""A file sink's ``_spark_metadata`` against the commit log (when the sink path is given).

FileStreamSink skips every batch id <= the newest id in its log (exactly-once handshake), so a
sink log ahead of the checkpoint silently drops the re-planned batches.
"""

from __future__ import annotations

from collections.abc import Iterator

from ckptfix.audit.context import AuditContext
from ckptfix.audit.model import Evidence, Finding
from ckptfix.audit.registry import check, define

SINK_AHEAD = define(
    "SINK-AHEAD",
    "error",
    "The file sink has batches the checkpoint will plan again",
    "FileStreamSink.addBatch skips any batch id at or below the newest id in _spark_metadata. When the sink "
    "log is ahead of the offset log (a rolled-back or replaced checkpoint), the next batches are planned "
    "with new data and silently dropped by the sink.",
    "Roll the sink log back too, or write to a new output path; never re-plan batch ids the sink holds.",
)
SINK_BEHIND = define(
    "SINK-BEHIND",
    "warning",
    "The file sink's log is behind the commit log",
    "Committed batches are missing from _spark_metadata: their files (if any) are invisible to readers "
    "that use the sink log.",
    "Check whether _spark_metadata was damaged or the sink path changed.",
)
SINK_NO_LOG = define(
    "SINK-NO-LOG",
    "info",
    "The given sink path has no _spark_metadata",
    "Only Spark's file sink keeps _spark_metadata; other sinks cannot be checked from files.",
    "Pass the file sink's output path, or leave --sink out.",
)


@check
def sink_log(ctx: AuditContext) -> Iterator[Finding]:
    if ctx.sink is None:
        return
    log, loc = ctx.sink.log, ctx.sink.location
    S = log.latest
    if S is None:
        yield SINK_NO_LOG.finding(
            f"{loc.display('_spark_metadata')} has no batch files", [Evidence(loc.display("_spark_metadata"))]
        )
        return
    L, K = ctx.latest_offset, ctx.latest_commit
    if L is None or S > L:
        first = 0 if L is None else L + 1
        yield SINK_AHEAD.finding(
            f"the sink log reaches batch {S} but the offset log only {L}: batches {first}..{S} will be planned "
            "with new data and skipped by the sink (silent data loss)",
            [
                Evidence(loc.display(log.path_of(S)), note="newest sink batch"),
                Evidence(ctx.ckpt.display("offsets"), note=f"latest offset {L}"),
            ],
            silent=True,
        )
    elif K is not None and S < K:
        yield SINK_BEHIND.finding(
            f"the sink log ends at batch {S} but batches up to {K} are committed",
            [Evidence(loc.display(log.path_of(S))), Evidence(ctx.ckpt.display(f"commits/{K}"))],
        )
