"""A sink that remembers batch ids, against the checkpoint's logs (when the sink path is given).

FileStreamSink skips every batch id <= the newest id in ``_spark_metadata``; Delta's sink skips every batch id
<= the newest ``txn`` version of appId = the query id (:mod:`ckptfix.sinks`). A sink ahead of the offset log
silently drops the batches Spark plans again with new data.
"""

from __future__ import annotations

from collections.abc import Iterator

from ckptfix.audit import spark_errors as E
from ckptfix.audit.context import AuditContext
from ckptfix.audit.model import Evidence, Finding, Skipped, SparkError
from ckptfix.audit.registry import check, define
from ckptfix.errors import CkptfixError, FormatError
from ckptfix.formats import compactlog
from ckptfix.sinks import Sink, next_compaction, told_compact_interval

SINK_AHEAD = define(
    "SINK-AHEAD",
    "error",
    "The sink holds batches the checkpoint will plan again",
    "FileStreamSink.addBatch skips any batch id at or below the newest id in _spark_metadata; Delta's "
    "DeltaSink.addBatch skips any batch id at or below the newest txn version recorded for the query id. When "
    "the sink is ahead of the offset log (a rolled-back or replaced checkpoint), the next batches are planned "
    "with new data and silently dropped by the sink.",
    "File sink (its log is keyed by batch id alone, whatever query writes): roll the sink back with the checkpoint "
    "(`ckptfix rollback CKPT --to-batch N --sink OUT --with-sink`), or start a new checkpoint into a new output path "
    "(`ckptfix offsets export CKPT` gives where its sources start); a new checkpoint into the same path is skipped "
    "too, and this checkpoint into a new path leaves a log that starts past batch 0, which readers and the log's "
    "compaction fail on. Delta table (its txn is per query id): keep it and restart from a new "
    "checkpoint (a new query id) that starts where this one ended (`ckptfix offsets export CKPT`), or write to a "
    "new table. Never re-plan batch ids the sink holds.",
)
SINK_BEHIND = define(
    "SINK-BEHIND",
    "warning",
    "The sink's log is behind the commit log",
    "Committed batches are missing from the sink's log (_spark_metadata, or the Delta table's txn for the query): "
    "their rows are not in the sink (the sink log was damaged or restored, or the path changed), and Spark will "
    "not write them again.",
    "Check whether the sink log was damaged or restored (Delta RESTORE) or the sink path changed. After an "
    "interrupted `ckptfix rollback --with-sink` (the sink rolled back, the checkpoint not yet), run the same "
    "command again, or undo the sink's run (`ckptfix undo OUT RUN`).",
)
SINK_SKIP_V2 = define(
    "SINK-SKIP-STATE-V2",
    "error",
    "Spark cannot run again a batch the sink skips, with state checkpoint format v2",
    "A sink that already holds the batch the restart runs first skips it without executing the query "
    "(FileStreamSink, DeltaSink), so the stateful operators report no state checkpoint info; with state checkpoint "
    "format v2 Spark 4.x then fails: `assertion failed: CheckpointInfo length: 0, numPartitions: N` (4.0: "
    "`ChekpointInfo`; MicroBatchExecution; recorded on 4.0.5 to 4.2.1, seen on 4.3 after a crash between the sink's "
    "commit and the commit log's).",
    "Take the batch out of the sink so that Spark writes it again, or restart into a new sink.",
)
SINK_NO_LOG = define(
    "SINK-NO-LOG",
    "info",
    "The given sink path has no sink log of this query",
    "Only Spark's file sink (_spark_metadata) and Delta's sink (a txn per query id in _delta_log) remember batch "
    "ids in files; a Delta table without a txn of this query id was not written by its Delta sink (a foreachBatch "
    "writer's txnAppId is its own choice and is not checked). A path with neither a _spark_metadata log nor data "
    "files while batches are committed is a warning: a wrong --sink path, or an output emptied entirely, whose next "
    "log compaction then fails (the files cannot tell which; SINK-LOG-COMPACT is not reported for it).",
    "Pass the file sink's output path or the Delta table's path, or leave --sink out.",
)
SINK_COMPACT = define(
    "SINK-LOG-COMPACT",
    "error",
    "The file sink's next log compaction reads an entry that is missing or damaged",
    "Every compactInterval batches (spark.sql.streaming.fileSink.log.compactInterval, 10; or the interval the "
    "existing .compact files show) the file sink writes _spark_metadata/<b>.compact: CompactibleFileStreamLog.compact "
    "reads the previous compaction and every entry after it (getValidBatchesBeforeCompactionBatch) and fails before "
    "the batch commits, on a missing entry with `[BATCH_METADATA_NOT_FOUND] Unable to find batch "
    ".../_spark_metadata/<b>` and on a damaged one with its parse error (recorded on 3.5.9-4.2.1, live on 4.3). When "
    "the restart's first batch is that compaction batch the restart fails; otherwise the query restarts and fails "
    "at that batch, on every later run too. A batch the sink already holds is skipped without writing, so the first "
    "batch the sink writes counts. An output path without any _spark_metadata is a file sink's whose log was "
    "deleted whole, or another writer's: one with _SUCCESS markers (a batch write, e.g. foreachBatch; the file sink "
    "writes none) is not checked, one without gets a warning, and the verdict is unknown when the restart's first "
    "batch compacts.",
    "Restore the entry from a backup: the file sink's log is the only record of which files a batch added. Without "
    "one, an entry holding only the line `v1` lets the compaction pass, but readers of the output then no longer see "
    "the files the lost entry listed (they stay in the directory, unlisted); deleting the output's _spark_metadata "
    "does not help (the compaction needs the entries all the same).",
)


def _query_id(ctx: AuditContext) -> str | None:
    try:
        return ctx.ckpt.query_metadata().id
    except (CkptfixError, OSError):
        return None  # the metadata rules report it


@check
def sink_log(ctx: AuditContext) -> Iterator[Finding | Skipped]:
    if ctx.sink is None:
        L = ctx.latest_offset
        if L is not None and ctx.next_batch == L and ctx.ckpt.state_format_v2() and ctx.target.at_least(4, 0):
            # the crash window between a sink's commit of batch L and commits/L (seen on 4.3): only the sink tells
            yield Skipped(
                SINK_SKIP_V2.id,
                f"not checked without --sink: batch {L} runs again and the state checkpoint format is v2, so if an "
                f"exactly-once sink (a file sink, a Delta table) already holds batch {L}, it skips it and Spark "
                f"{ctx.target.label} fails (assertion failed: CheckpointInfo length: 0); audit with --sink OUT",
            )
        return
    sink, qid = ctx.sink, _query_id(ctx)
    S = sink.last_batch(qid)
    if S is None:
        if sink.delta is not None:
            others = ", ".join(sorted(sink.delta.txns)) or "none"
            message = (
                f"the Delta table {sink.location.url} records no txn of query {qid} (appIds it records: {others}): "
                "its Delta sink never committed a batch there"
            )
        elif ctx.latest_commit is not None and sink.data_files == 0:
            yield SINK_NO_LOG.finding(
                f"{sink.location.url} holds no _spark_metadata log and no data files, though batches up to "
                f"{ctx.latest_commit} are committed: either it is not where this query's file sink writes (a wrong "
                "--sink path?), or everything in it was deleted, and then the sink's next log compaction fails, "
                "missing the entries of the batches before the restart",
                [Evidence(sink.evidence(qid), expected="a file sink's _spark_metadata and data files", found="none")],
                severity="warning",
                fix="Check --sink: the query's output path holds _spark_metadata/<batch> files. If this is it and "
                "its contents were deleted, restore them from a backup.",
            )
            return
        elif not sink.has_log_dir and sink.batch_written:
            message = (
                f"{sink.location.url} holds a batch writer's output (_SUCCESS markers: foreachBatch's df.write, a "
                "job of its own) and no _spark_metadata: nothing there records batch ids, nothing to check"
            )
        elif not sink.has_log_dir:
            message = (
                f"{sink.location.url} holds data files but no _spark_metadata: the output of a writer that records "
                "no batch ids (foreachBatch, a job of its own), nothing to check; or a file sink's whose log was "
                "deleted entirely, whose next log compaction then fails"
            )
        else:
            message = f"{sink.location.display('_spark_metadata')} has no batch files"
        yield SINK_NO_LOG.finding(message, [Evidence(sink.evidence(qid))])
        return
    L, K = ctx.latest_offset, ctx.latest_commit
    who = sink.describe(qid)
    first = ctx.next_batch
    if first is not None and first <= S and ctx.ckpt.state_format_v2() and ctx.target.at_least(4, 0):
        # 4.0's message spells it "ChekpointInfo" (recorded with 4.0.5)
        spelled = "CheckpointInfo" if ctx.target.at_least(4, 1) else "ChekpointInfo"
        yield SINK_SKIP_V2.finding(
            f"{who} already holds batch {first}, the first batch the restart runs: the sink skips it, its stateful "
            f"operators report no state checkpoint info, and with state checkpoint format v2 Spark "
            f"{ctx.target.label} fails",
            [
                Evidence(sink.evidence(qid), note="newest batch the sink holds"),
                Evidence(ctx.ckpt.display("commits"), note=f"latest commit {K}"),
            ],
            spark_error=SparkError("java.lang.AssertionError", None, f"{spelled} length: 0"),
            stage=78,
            fix=sink.replan_advice(first - 1, S, ctx.ckpt.location.url),
        )
    if L is None or S > L:
        first = 0 if L is None else L + 1
        yield SINK_AHEAD.finding(
            f"{who} reaches batch {S} but the offset log only {L}: batches {first}..{S} will be planned "
            "with new data and skipped by the sink (silent data loss)",
            [
                Evidence(sink.evidence(qid), note="newest batch the sink holds"),
                Evidence(ctx.ckpt.display("offsets"), note=f"latest offset {L}"),
            ],
            silent=True,
            # a rollback keeps a batch both logs hold: commits beyond the offset log (LOG-COMMIT-AHEAD) do not count
            fix=sink.replan_advice(-1 if K is None or L is None else min(K, L), S, ctx.ckpt.location.url),
        )
    elif K is not None and S < K:
        yield SINK_BEHIND.finding(
            f"{who} ends at batch {S} but batches up to {K} are committed",
            [Evidence(sink.evidence(qid)), Evidence(ctx.ckpt.display(f"commits/{K}"))],
            # a rollback to the sink's last batch runs the others again into the sink (repair hunt 10: W10, W18, S04,
            # D06 on 4.3.0 restarted with exactly the reference rows; the advice had been a restore only)
            fix=None
            if sink.delta is not None or S < 0
            else f"Roll the checkpoint back to batch {S}, the file sink's last ({ctx.rollback_command(S)}): Spark "
            f"runs batches {S + 1}..{K} again and the sink writes their rows (the source must still hold their "
            "input). Or restore the sink's log from a backup. After an interrupted `ckptfix rollback --with-sink` "
            "(the sink rolled back, the checkpoint not yet), run the same command again, or undo the sink's run "
            "(`ckptfix undo OUT RUN`).",
        )


@check
def sink_compaction(ctx: AuditContext) -> Iterator[Finding]:
    """The file sink log's next compaction, from the first batch the restart makes the sink write: the entries it
    reads that the restart does not write itself must be there and parse."""
    sink = ctx.sink
    if sink is None or sink.delta is not None or ctx.next_batch is None:
        return
    if sink.log.latest is None and sink.data_files == 0 and ctx.latest_commit is not None:
        return  # no log and no data: maybe not the sink at all; SINK-NO-LOG says both readings
    S = sink.log.latest
    first = max(ctx.next_batch, -1 if S is None else S + 1)  # FileStreamSink.addBatch skips ids <= the newest
    interval = sink.compact_interval(told_compact_interval(ctx.session_conf))
    compaction = next_compaction(first, interval)
    for b, rel in sink.compaction_reads(compaction, interval):
        if b >= first:
            break  # written by this run before it gets there
        err, evidence, what = _entry_problem(ctx, sink, rel)
        if err is None:
            continue
        fails = f"batch {compaction}, a compaction batch of the file sink's log (compact interval {interval}),"
        if not sink.has_log_dir:  # data files, no log: another writer's output, or a file sink's log deleted whole
            if sink.batch_written:
                return  # _SUCCESS markers: a batch writer's (foreachBatch) output, which no compaction reads
            when = (
                f"the restart's first batch the sink writes is {fails} and fails"
                if compaction == first
                else f"the restart runs, but {fails} fails"
            )
            yield SINK_COMPACT.finding(
                f"{sink.location.url} has no _spark_metadata: if it is this query's file sink, whose log was deleted, "
                f"{when} missing {sink.location.display(rel)}; if the query writes it otherwise (foreachBatch), "
                "nothing reads a log there",
                [evidence],
                severity="warning",
                undecided=compaction == first,  # the restart itself depends on which
                fix="Audit without --sink if the query does not write this path with a file sink; if it does, "
                "restore its _spark_metadata from a backup.",
            )
            return
        if compaction == first:
            when = f"the restart's first batch the sink writes is {fails} and fails"
        else:
            before = f"batch {first} runs" if compaction == first + 1 else f"batches {first}..{compaction - 1} run"
            when = (
                f"the restart runs, but {fails} fails with {err.headline} ({before} first; a query that runs on "
                "reaches it)"
            )
        # readers of the output read the same entries (MetadataLogFileIndex: every entry since the last compaction,
        # up to the newest): damage hunt 7, F5 (4.3): after the restart wrote entries past a deleted one,
        # spark.read.parquet(OUT) failed with "_spark_metadata/4 doesn't exist (latestId: 6, compactInterval: 10)"
        now = S is not None and b < S  # below the newest entry: readers reach it already
        newest = S if now else "<the newest entry then>"
        reader_error = (
            f"FileNotFoundException: ... doesn't exist (latestId: {newest}, compactInterval: {interval})"
            if rel not in sink.entries
            else "the same parse error"
        )
        moment = "already" if now else "as soon as the restart writes an entry after it"
        readers = f"; reading the output (spark.read on the sink's path) fails on it {moment}: {reader_error}"
        yield SINK_COMPACT.finding(
            f"{sink.location.display(rel)} is {what}, and the compaction reads it: {when}{readers}",
            [evidence, Evidence(sink.evidence(None), note="newest entry of the sink's log")],
            spark_error=err if compaction == first else None,
            stage=79 if compaction == first else None,
        )
        return


def _entry_problem(ctx: AuditContext, sink: Sink, rel: str) -> tuple[SparkError | None, Evidence, str]:
    """Spark's error reading log entry ``rel`` (the name it asks for) of the file sink, the evidence, in words."""
    where = sink.location.display(rel)
    if rel not in sink.entries:
        other = next(
            (
                p
                for p in (rel.removesuffix(compactlog.COMPACT_SUFFIX), rel + compactlog.COMPACT_SUFFIX)
                if p != rel and p in sink.entries
            ),
            None,
        )
        found = f"none ({other.rsplit('/', 1)[1]} is there, a name Spark does not read)" if other else "none"
        return E.batch_metadata_not_found(rel), Evidence(where, expected="a file", found=found), "missing"
    try:
        compactlog.parse(sink.location.read(rel), where)
    except FormatError as exc:
        err = E.log_parse_error(ctx.target, "_spark_metadata", rel, exc) or SparkError(None, None, rel)
        return err, Evidence(where, exc.offset, exc.expected, exc.found), f"damaged ({exc.expected}, found {exc.found})"
    return None, Evidence(where), "readable"
