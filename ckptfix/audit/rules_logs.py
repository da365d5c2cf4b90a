"""Rules about ``metadata``, ``offsets/`` and ``commits/``: what a restart reads and when.

Stage numbers order the failures the way Spark meets them (``MicroBatchExecution``:
metadata at ``start()``, 4.3's ``initializeExecution``, the 4.2+ repartition check,
``populateStartOffsets``, then the first batch). The verdict is the lowest stage.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ckptfix import layout
from ckptfix.audit import spark_errors as E
from ckptfix.audit.context import AuditContext
from ckptfix.audit.model import Evidence, Finding, SparkError
from ckptfix.audit.registry import check, define
from ckptfix.errors import FormatError, UnsupportedVersion
from ckptfix.formats import hadoopcrc
from ckptfix.formats import metadata as metadata_format
from ckptfix.stores.chain import FORMAT_VERSION_CONF

META_MISSING = define(
    "META-MISSING",
    "error",
    "The query's metadata file is missing",
    "Spark keeps the query id in `metadata`. Without it, Spark 3.5-4.1 silently start a NEW query id "
    "(exactly-once sinks keyed on the query id then write duplicates); Spark 4.2+ refuses to start with "
    "STREAMING_CHECKPOINT_MISSING_METADATA_FILE while the logs hold batches.",
    'Restore `metadata` with the original id ({"id":"<uuid>"}, no newline) from a backup or the driver '
    "log (`ckptfix repair --query-id`).",
)
META_UNREADABLE = define(
    "META-UNREADABLE",
    "error",
    "The query's metadata file cannot be parsed",
    "`start()` parses `metadata` synchronously and fails on an empty, truncated or id-less file.",
    "Restore `metadata` from a backup, or rewrite it with the original query id.",
)
LOG_UNREADABLE = define(
    "LOG-UNREADABLE",
    "error",
    "A log file that restart reads is damaged",
    "The latest offset file, its predecessor and the latest commit file are parsed at restart. An empty "
    "file (crash mid-write), a cut-off JSON line, a bad version header or a missing metadata line stop "
    "the query.",
    "`ckptfix repair` (or restore the file from a backup): a damaged latest offset entry is removed so Spark "
    "plans that batch again (when the entry before it is missing too, `ckptfix repair --strategy truncate`); a "
    "damaged entry before it, once the latest batch is committed, is replaced by a copy of the latest (Spark "
    "reads it only as that batch's start); a damaged commit file is planned as its own case.",
)
LOG_VERSION = define(
    "LOG-VERSION-TOO-NEW",
    "error",
    "A log file has a version the target Spark cannot read",
    "Offset log v2 is readable from Spark 4.2; commit log v2/v3 from 4.2 (4.0/4.1 only read the version "
    "of spark.sql.streaming.stateStore.checkpointFormatVersion). Older Sparks fail with INVALID_LOG_VERSION "
    "(UnsupportedLogVersion on 3.5).",
    "Restart with a Spark that reads this version (ckptfix does not rewrite log entries into an older log version).",
)
LOG_NO_BATCH_METADATA = define(
    "LOG-NO-BATCH-METADATA",
    "error",
    "The latest offset file has an empty metadata line",
    "Without OffsetSeqMetadata Spark never sets up its watermark tracker and fails with a "
    "NullPointerException on restart.",
    "Rewrite the metadata line from the previous offset file's metadata (`ckptfix repair`).",
)
LOG_ASYNC_GAP = define(
    "LOG-ASYNC-GAP",
    "error",
    "The offset log lacks the entry before the latest batch",
    "A synchronous restart reads offsets/L-1 as the start of batch L. Asynchronous progress tracking "
    "(asyncProgressTrackingEnabled with an interval) writes the logs sparsely, so turning it off without "
    "the documented sequence fails with `IllegalStateException: batch L-1 doesn't exist` (4.2+ with an "
    "uncommitted latest batch: `requirement failed: Previous batch L-1 not found in offset log`).",
    "`ckptfix repair` writes offsets/L-1 as a copy of offsets/L when batch L is committed, else of the newest "
    "earlier offset file (no batch is renumbered), "
    "or run `ckptfix async-off CKPT --query MODULE:FUNCTION` (MODULE:FUNCTION builds the query: it re-enables "
    "tracking with asyncProgressTrackingCheckpointIntervalMs=0 for two batches, stops, restarts with it off).",
)
LOG_COMMIT_AHEAD = define(
    "LOG-COMMIT-AHEAD",
    "error",
    "The commit log has entries for batches the restart will run again",
    "Spark writes commits/b with create-only semantics. A commit file for a batch the restarted query must "
    "still run (commits beyond the latest offset, or the latest offset file gone while its commit stays) "
    "fails with CONCURRENT_STREAM_LOG_UPDATE - after the batch has already reached the sink.",
    "Remove the commit files beyond the latest offset file (`ckptfix repair`), after checking the sink.",
)
LOG_COMMITS_NO_OFFSETS = define(
    "LOG-COMMITS-WITHOUT-OFFSETS",
    "error",
    "Commit files exist but the offset log is empty",
    "With no offset file Spark starts a new query at batch 0: 4.3 fails an assertion, 4.1/4.2 refuse a "
    "non-empty checkpoint directory, 3.5/4.0 collide with the existing commit files.",
    "Restore the offset log from a backup, or start the query with a new checkpoint location (ckptfix has no "
    "automatic fix: where each source stood is gone with the offsets).",
)
LOG_NOT_EMPTY = define(
    "LOG-NOT-EMPTY-ON-START",
    "error",
    "The checkpoint has no offsets but its directories are not empty",
    "Spark 4.1+ verifies that offsets/, commits/ and state/ list no entries at all (hidden temp and .crc "
    "files included) before batch 0: STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY.",
    "Move the leftover entries out of the checkpoint (keep them as a backup) before the first start.",
)
LOG_REPARTITION = define(
    "LOG-UNFINISHED-REPARTITION",
    "error",
    "The latest offset file is an unfinished state repartition",
    "Spark 4.2+ refuses to restart when the latest, uncommitted batch changed the number of shuffle "
    "partitions (STREAMING_UNFINISHED_REPARTITION_DETECTED).",
    "Finish or roll back the repartition (`ckptfix rollback --to-batch K`).",
)
LOG_COMMIT_GAP = define(
    "LOG-COMMIT-GAP",
    "warning",
    "The latest commit trails the latest offset by more than one batch",
    "Spark re-runs only batch L from offsets/L-1; batches K+1..L-1 are never re-run. That is right after "
    "asynchronous progress tracking (they ran, their commits were in memory) and silent data loss otherwise.",
    "If those batches never ran, roll back to batch K (`ckptfix rollback --to-batch K`).",
)
LOG_NONCANONICAL = define(
    "LOG-NONCANONICAL-NAME",
    "warning",
    "A log file name is a number Spark reads but not its canonical form",
    "Names such as `0007` count as batch 7 when Spark lists the log, but Spark opens `7`: as the latest "
    "entry this fails with FileNotFoundException.",
    "Rename it to its canonical name if that does not exist (`ckptfix repair`).",
)
LOG_GAP = define(
    "LOG-GAP",
    "info",
    "Batches are missing in the middle of a log",
    "Only the latest offset file, its predecessor and the latest commit are read at restart; older gaps "
    "are harmless (often purge or async tracking).",
    "Nothing to do.",
)
LOG_TEMP = define(
    "LOG-TEMP-FILE",
    "info",
    "Leftover temporary files from an interrupted write",
    "CheckpointFileManager writes `.<name>.<uuid>.tmp` and renames it; a stopped query can leave one behind. "
    "Readers ignore them, but Spark 4.1+ refuses a fresh start while any entry exists.",
    "Move them out of the checkpoint once no query runs on it (keep them as a backup).",
)
LOG_JUNK = define(
    "LOG-JUNK",
    "info",
    "Files Spark ignores in a log directory",
    "Names that do not parse as a batch id are ignored by Spark (a directory named like one: LOG-ENTRY-DIRECTORY).",
    "Move them out of the checkpoint if they are not yours.",
)
LOG_CRC = define(
    "LOG-CRC-MISMATCH",
    "error",
    "A log file no longer matches its Hadoop .crc sidecar",
    "The file was edited after Spark wrote it. Spark does NOT verify these sidecars: it restarts with the "
    "edited content and may silently compute wrong results. This is worse than a crash.",
    "Find out who edited the file (or its sidecar: a .crc copied from another file looks the same); restore the "
    "original (a ckptfix backup), or, if the file's content is right (the edit intended, or only the sidecar "
    "wrong), keep it and regenerate the sidecar: `ckptfix repair CKPT --accept-edits`.",
)
LOG_ENTRY_DIR = define(
    "LOG-ENTRY-DIRECTORY",
    "info",
    "A directory named like a log entry",
    "Spark lists a log's entries by name and reads only files, so a directory named like a batch id (offsets/7/, "
    "commits/7/) is not an entry. But before writing entry N Spark checks that nothing exists at that path "
    "(HDFSMetadataLog.addNewBatchByStream): a directory there makes the write refuse, and the query stops with "
    "CONCURRENT_STREAM_LOG_UPDATE `Multiple streaming jobs detected for N` (3.5.9 to 4.3.0, recorded). So a "
    "directory at the next entry Spark writes in offsets/ or commits/ stops the restart (error), one further "
    "ahead stops the query when it gets there (warning), and one below is harmless (info).",
    "Move the directory out of the checkpoint (`rmdir` it when empty); ckptfix does not delete directories.",
)
LOG_CRC_ORPHAN = define(
    "LOG-CRC-ORPHAN",
    "info",
    "A Hadoop .crc sidecar without its data file",
    "On the local file system (Hadoop's checksummed LocalFileSystem) Spark writes a log entry N as a temporary "
    "file renamed to N, and the rename moves the temporary file's .crc to .N.crc: when .N.crc is already there, "
    "the rename fails (FileAlreadyExistsException) and Spark stops with `Multiple streaming queries are "
    "concurrently using <log>`. So an orphan sidecar of the next entry Spark writes in offsets/, commits/ or "
    "sources/<id>/ stops the restart (error), one further ahead stops the query when it gets there (warning), "
    "and one of an entry Spark will not write again is harmless, though it counts as an entry for Spark 4.1+'s "
    "empty-directory check (info). Object stores and HDFS keep no .crc files: there it is always harmless.",
    "`ckptfix repair` deletes the orphan sidecars of entries Spark will write (backed up); move any other one out "
    "of the checkpoint.",
)
LOG_VOID = define(
    "LOG-VOID-OFFSET",
    "error",
    "The latest offset file has a source without an offset ('-')",
    "Spark restarts without complaint, drops that source's end offset and re-reads its range from "
    "offsets/L-1 (or its initial offset): the batch is processed again (duplicates in append sinks).",
    "Restore the offset from a backup; check that the query's sources did not change.",
)
LOG_V2_IDS = define(
    "LOG-V2-SOURCE-ID",
    "error",
    "A v2 offset file names sources the query does not have",
    "Offset log v2 lines are `<sourceId>:<offset>`, split at the first colon. Spark 4.2+ silently ignores ids "
    "that match no source, so a mislabelled or damaged file restarts and re-reads the source from "
    'offsets/L-1 (duplicates). Seen when a v1 file is relabelled v2: `{"logOffset":5}` parses as source '
    '`{"logOffset"`.',
    "Restore the file's v1 header (or the original file from a backup).",
)
LOG_OLD_UNREADABLE = define(
    "LOG-OLD-UNREADABLE",
    "warning",
    "An older log file is damaged",
    "Restart does not read it, but rollbacks, the state reader and file-source replays may.",
    "Restore it from a backup if you may need to roll back past it.",
)

LOG_WATERMARK_EDITED = define(
    "LOG-WATERMARK-EDITED",
    "warning",
    "The latest offset file's watermark is not the one the commit before it recorded",
    "Spark writes batch L's offset file with the watermark it recorded in commits/L-1 (batchWatermarkMs = "
    "nextBatchWatermarkMs; equal in every Spark-written checkpoint we hold, 296 pairs over 3.5.9-4.3). On restart "
    "it restores max(offsets/L's, commits/L's) watermark (MicroBatchExecution.populateStartOffsets). A higher "
    "value there than Spark wrote makes rows count as late and evicts state earlier: damage hunts on 4.3 saw a "
    "windowed aggregation emit smaller counts, and session windows, joins, transformWithState timers and "
    "dropDuplicatesWithinWatermark emit wrong output, silently; so a raised value is an error (silent) where the "
    "query keeps state, a warning where it keeps none. A lower one is overridden by a committed batch's, and used "
    "as is when batch L runs again.",
    "Write the watermark commits/L-1 records back into offsets/L (`batchWatermarkMs`), or restore the file from a "
    "backup. Nothing tells which value an edit meant: ckptfix does not change it by itself.",
)


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:]


_SOURCE_ID = re.compile(r"^[A-Za-z0-9_.$-]+$")  # ordinals and user-given source names


def _parse_finding(ctx: AuditContext, log: str, batch: int, exc: FormatError, stage: int) -> Finding:
    rel = f"{log}/{batch}"
    spark = E.log_parse_error(ctx.target, log, rel, exc)
    # a version above every one a Spark release writes (the parser knows them all): damage far more likely than
    # a Spark newer than 4.3, so it is fixed like any unreadable entry, not "restart with a newer Spark"
    message = f"{rel} cannot be read: expected {exc.expected}, found {exc.found}"
    if isinstance(exc, UnsupportedVersion):
        message += (
            " (no Spark release up to 4.3 writes that version: the file is damaged, unless a newer Spark wrote it, "
            "which would then be the one to restart with)"
        )
    return LOG_UNREADABLE.finding(
        message,
        [Evidence(ctx.ckpt.display(exc_rel(ctx, log, batch)), exc.offset, exc.expected, exc.found)],
        spark_error=spark,
        stage=stage,
    )


def exc_rel(ctx: AuditContext, log: str, batch: int) -> str:
    d = ctx.ckpt.offsets if log == "offsets" else ctx.ckpt.commits
    return d.path_of(batch)


@check
def metadata_file(ctx: AuditContext) -> Iterator[Finding]:
    ck = ctx.ckpt
    has_batches = bool(ck.offsets.listed_ids or ck.commits.listed_ids)
    if ck.metadata_rel is None:
        if not has_batches:
            return
        if ctx.target.refuses_missing_metadata:
            yield META_MISSING.finding(
                "metadata is missing while the logs hold batches",
                [Evidence(ck.display(layout.METADATA), found="no file")],
                spark_error=E.missing_metadata(),
                stage=10,
            )
        else:
            yield META_MISSING.finding(
                f"metadata is missing: Spark {ctx.target.label} will silently start a new query id",
                [Evidence(ck.display(layout.METADATA), found="no file")],
                silent=True,
            )
        return
    try:
        meta = ck.query_metadata()
    except FormatError as exc:
        yield META_UNREADABLE.finding(
            f"metadata cannot be read: expected {exc.expected}, found {exc.found}",
            [Evidence(ck.display(layout.METADATA), exc.offset, exc.expected, exc.found)],
            spark_error=E.metadata_error(ctx.target, exc),
            stage=10,
        )
        return
    bad_id = metadata_format.java_uuid_error(meta.id)
    if bad_id is not None:
        expected = "a query id Java parses as a UUID (8-4-4-4-12 hex digits)"
        yield META_UNREADABLE.finding(
            f"metadata's id {meta.id!r} is not a UUID: Spark parses it with java.util.UUID.fromString when the "
            "query starts, and start() fails",
            [Evidence(ck.display(layout.METADATA), expected=expected, found=repr(meta.id))],
            spark_error=SparkError(bad_id[0], None, bad_id[1]),
            stage=10,
        )


@check
def latest_offset(ctx: AuditContext) -> Iterator[Finding]:
    ck, t = ctx.ckpt, ctx.target
    L = ctx.latest_offset
    if L is None:
        return
    stage = 20 if t.parses_latest_logs_first else 40
    if L not in ck.offsets.files:
        rel = ck.offsets.noncanonical[L]
        yield LOG_NONCANONICAL.finding(
            f"the latest offset entry is named {rel!r}; Spark opens offsets/{L}, which does not exist",
            [Evidence(ck.display(rel), expected=f"offsets/{L}", found=rel)],
            severity="error",
            spark_error=E.file_not_found(f"offsets/{L}"),
            stage=stage,
        )
        return
    entry, exc = ctx.offset_or_error(L)
    if exc is not None:
        yield _parse_finding(ctx, "offsets", L, exc, stage)
        return
    assert entry is not None
    if entry.version > t.max_offset_version:
        yield LOG_VERSION.finding(
            f"offsets/{L} is v{entry.version}; Spark {t.label} reads offset logs up to v{t.max_offset_version}",
            [Evidence(ck.display(f"offsets/{L}"), 0, f"up to v{t.max_offset_version}", f"v{entry.version}")],
            spark_error=E.unsupported_version(t, entry.version, t.max_offset_version),
            stage=stage,
        )
        return
    if entry.metadata is None:
        yield LOG_NO_BATCH_METADATA.finding(
            f"offsets/{L} has an empty metadata line",
            [Evidence(ck.display(f"offsets/{L}"), 3, "OffsetSeqMetadata JSON", "an empty line")],
            spark_error=E.watermark_npe(),
            stage=45,
        )
    if entry.version == 2:
        prev = ctx.offset_or_error(L - 1)[0] if L > 0 and (L - 1) in ck.offsets.files else None
        known = {o.source_id for o in prev.offsets} if prev is not None and prev.version == 2 else None
        bad = [
            o.source_id
            for o in entry.offsets
            if not _SOURCE_ID.match(o.source_id) or (known is not None and o.source_id not in known)
        ]
        if bad:
            yield LOG_V2_IDS.finding(
                f"offsets/{L} names source(s) {', '.join(map(repr, bad))}, which are not source ids of this query"
                + ("" if known is None else f" (offsets/{L - 1} has {', '.join(sorted(known))})"),
                [Evidence(ck.display(f"offsets/{L}"), expected="'<sourceId>:<offset>' lines", found=bad[0])],
                silent=True,
            )
    voids = [o.source_id for o in entry.offsets if o.json is None]
    if voids:
        yield LOG_VOID.finding(
            f"offsets/{L} has no offset for source(s) {', '.join(voids)}",
            [Evidence(ck.display(f"offsets/{L}"), found="-")],
            silent=True,
        )


@check
def latest_commit(ctx: AuditContext) -> Iterator[Finding]:
    ck, t = ctx.ckpt, ctx.target
    K = ctx.latest_commit
    if K is None:
        return
    stage = 21 if t.parses_latest_logs_first else 50
    if K not in ck.commits.files:
        rel = ck.commits.noncanonical[K]
        yield LOG_NONCANONICAL.finding(
            f"the latest commit entry is named {rel!r}; Spark opens commits/{K}, which does not exist",
            [Evidence(ck.display(rel), expected=f"commits/{K}", found=rel)],
            severity="error",
            spark_error=E.file_not_found(f"commits/{K}"),
            stage=stage,
        )
        return
    entry, exc = ctx.commit_or_error(K)
    if exc is not None:
        yield _parse_finding(ctx, "commits", K, exc, stage)
        return
    assert entry is not None
    ev = [Evidence(ck.display(f"commits/{K}"), 0, None, f"v{entry.version}")]
    # the session's checkpointFormatVersion (not recorded): told, else the one the state files show was in use
    told = ctx.session_conf.get(FORMAT_VERSION_CONF, "").strip()
    expected = int(told) if told.isdigit() else 2 if ck.state_format_v2() else 1
    if t.commit_version_exact and entry.version != expected:
        how = "set with --conf" if told.isdigit() else "as the state files show" if expected == 2 else "1 unless set"
        relabelled = entry.version < expected and bool(entry.state_unique_ids)
        yield LOG_VERSION.finding(
            f"commits/{K} is v{entry.version}; Spark {t.label} reads only the version of "
            f"{FORMAT_VERSION_CONF} ({expected}: {how})"
            + (f", and the ids it holds are a v{expected} commit's: its first line was edited" if relabelled else ""),
            ev,
            spark_error=E.exact_version(entry.version, expected),
            stage=stage,
            # repair hunt 13: "restart with a Spark that reads this version" for a v1 header over a v2 commit,
            # which no Spark reads as it is
            fix=f"Set the first line of commits/{K} back to v{expected} (`ckptfix repair` does): its ids are there."
            if relabelled
            else f"Restore commits/{K} from a backup: no Spark reads a v{entry.version} commit in a checkpoint "
            f"whose state files are format v{expected}."
            if entry.version < expected and not told.isdigit()
            else None,
        )
    elif not t.commit_version_exact and entry.version > t.max_commit_version:
        yield LOG_VERSION.finding(
            f"commits/{K} is v{entry.version}; Spark {t.label} reads commit logs up to v{t.max_commit_version}",
            ev,
            spark_error=E.unsupported_version(t, entry.version, t.max_commit_version),
            stage=stage,
        )


def _keeps_async(ctx: AuditContext) -> bool:
    """Whether the restarting query (``audit --against``) has asyncProgressTrackingEnabled=true: Spark's
    AsyncProgressTrackingMicroBatchExecution restarts from the sparse logs it wrote (Spark's own test "test gaps in
    offset log" restarts offsets 1, 2, 4 with it; verified live on 4.3 with that very checkpoint)."""
    if ctx.query is None:
        return False
    options = {k.lower(): str(v).strip().lower() for k, v in ctx.query.sink.options.items()}
    return options.get("asyncprogresstrackingenabled") == "true"


def stateful_gap_fix(ctx: AuditContext) -> str:
    """LOG-ASYNC-GAP where state/ has stateful operators: asynchronous progress tracking never runs them, so the
    gap has another cause and neither a copied offset file nor `async-off` is the way out (repair refuses both);
    the audit and the repair's refusal say the same."""
    ck = ctx.ckpt
    L, K = ck.offsets.latest, ck.commits.latest
    if L is not None and K is not None and K >= L:
        return (
            f"this gap has another cause than asynchronous progress tracking, which never runs the stateful operators "
            f"state/ has; batch {L} is committed, so `ckptfix repair` writes offsets/{L - 1} as a copy of offsets/{L} "
            f"(the restart runs batch {L + 1} on state version {L + 1}); or restore offsets/{L - 1} from a backup"
        )
    before = [b for b in ck.commits.files if b in ck.offsets.files and L is not None and b < L - 1]
    back = (
        f"{ctx.rollback_command(max(before))}, the newest batch both logs hold before the gap"
        if before
        else "`ckptfix rollback`"
    )
    return (
        "this gap has another cause than asynchronous progress tracking, which never runs the stateful operators "
        f"state/ has; restore offsets/{'L-1' if L is None else L - 1} from a backup or roll back ({back})"
    )


@check
def previous_offset(ctx: AuditContext) -> Iterator[Finding]:
    """The async-off blocker: offsets/L-1 must exist and parse (D1/F1)."""
    ck, t = ctx.ckpt, ctx.target
    L, K = ctx.latest_offset, ctx.latest_commit
    if L is None or L <= 0:
        return
    repartition_first = t.checks_unfinished_repartition and K is not None and 0 <= K < L
    stage = 30 if repartition_first else 41
    prev = L - 1
    if prev not in ck.offsets.files:
        P = max((b for b in ck.offsets.files if b < L), default=None)
        if _keeps_async(ctx) and not repartition_first and P is not None:
            yield LOG_ASYNC_GAP.finding(
                f"offsets/{prev} is missing, and the query given with --against keeps asynchronous progress "
                f"tracking on: Spark restarts it, running batch {L} again from offsets/{P} (the logs it writes stay "
                "sparse; to turn tracking off later, `ckptfix async-off` drives the documented sequence)",
                [Evidence(ck.display(f"offsets/{prev}"), expected="a file", found="none")],
                severity="info",
                fix="Nothing to do while tracking stays on; `ckptfix async-off` when it is to be turned off.",
                stage=stage,
            )
            return
        sparse = ctx.ckpt.looks_async()
        why = " (the logs look written by asynchronous progress tracking)" if sparse else ""
        err = E.previous_batch_not_found(prev) if repartition_first else E.batch_missing(prev)
        ev = [
            Evidence(ck.display(f"offsets/{prev}"), expected="a file", found="none"),
            Evidence(ck.display(f"offsets/{L}"), note=f"latest offset (L={L})"),
        ]
        if K is not None:
            ev.append(Evidence(ck.display(f"commits/{K}"), note=f"latest commit (K={K})"))
        if K is None:
            shape = "no commits"
        elif K == L:
            shape = "latest offset committed"
        elif K > L:
            shape = f"the latest commit, {K}, is beyond it (Spark then runs batch {L} again)"
        else:
            shape = "latest offset not committed"
        yield LOG_ASYNC_GAP.finding(
            f"offsets/{prev} is missing; a restart without async progress tracking needs it as the start of "
            f"batch {L}{why}. Newest earlier offset file: "
            f"{'offsets/' + str(P) if P is not None else 'none'}; {shape}.",
            ev,
            spark_error=err,
            stage=stage,
            fix=_sentence(stateful_gap_fix(ctx)) + "." if ck.state.operators else None,
        )
        return
    _, exc = ctx.offset_or_error(prev)
    if exc is not None:
        yield _parse_finding(ctx, "offsets", prev, exc, stage)


@check
def repartition(ctx: AuditContext) -> Iterator[Finding]:
    ck, t = ctx.ckpt, ctx.target
    L, K = ctx.latest_offset, ctx.latest_commit
    if not (t.checks_unfinished_repartition and L and K is not None and 0 <= K < L):
        return
    cur, _ = ctx.offset_or_error(L) if L in ck.offsets.files else (None, None)
    prev, _ = ctx.offset_or_error(L - 1) if (L - 1) in ck.offsets.files else (None, None)
    if cur is None or prev is None or cur.metadata is None or prev.metadata is None:
        return  # reported by latest_offset / previous_offset
    key = "spark.sql.shuffle.partitions"
    a, b = prev.metadata.conf.get(key), cur.metadata.conf.get(key)
    if a is not None and b is not None and a != b:
        yield LOG_REPARTITION.finding(
            f"offsets/{L} changes {key} from {a} to {b} and batch {L} never committed",
            [Evidence(ck.display(f"offsets/{L}"), expected=a, found=b)],
            spark_error=E.unfinished_repartition(L),
            stage=31,
            fix=f"Roll the repartition back (`ckptfix rollback {shlex.quote(ck.location.url)} --to-batch {L - 1}`), "
            f"then repartition again if {b} partitions are wanted (`ckptfix state repartition "
            f"{shlex.quote(ck.location.url)} --partitions {b}`).",
        )


@check
def empty_offsets(ctx: AuditContext) -> Iterator[Finding]:
    ck, t = ctx.ckpt, ctx.target
    if ck.offsets.listed_ids:
        return
    if ck.commits.listed_ids:
        first = min(ck.commits.listed_ids)
        if t.asserts_no_commits_without_offsets:
            err, stage = E.no_offsets_assertion(), 22
        elif t.checks_empty_dirs_on_start:
            err, stage = E.checkpoint_not_empty(), 40
        else:
            err, stage = E.concurrent_update(first), 80
        yield LOG_COMMITS_NO_OFFSETS.finding(
            f"offsets/ has no batch files but commits/ has {len(ck.commits.listed_ids)} (first: {first})",
            [Evidence(ck.display("offsets"), found="no batch files"), Evidence(ck.display(ck.commits.path_of(first)))],
            spark_error=err,
            stage=stage,
        )
        return
    leftovers = ck.offsets.entry_count + ck.commits.entry_count + ck.state.entry_count
    if leftovers and t.checks_empty_dirs_on_start:
        yield LOG_NOT_EMPTY.finding(
            f"no offset file, but {leftovers} entries remain in offsets/, commits/ or state/",
            [
                Evidence(ck.display(d), found="entries")
                for d in ("offsets", "commits", "state")
                if (ck.offsets if d == "offsets" else ck.commits if d == "commits" else ck.state).entry_count
            ],
            spark_error=E.checkpoint_not_empty(),
            stage=40,
        )


@check
def commit_collision(ctx: AuditContext) -> Iterator[Finding]:
    """F2: the first batch id the restart must commit that already has a commit file."""
    ck = ctx.ckpt
    L, K = ctx.latest_offset, ctx.latest_commit
    if L is None or K is None:
        return
    start = ctx.next_batch or 0
    ahead = sorted(c for c in ck.commits.listed_ids if c >= start)
    if not ahead:
        return
    first = ahead[0]
    if K == L + 1 and K in ck.commits.files and K not in ck.offsets.listed_ids:
        what = f"offsets/{K} is missing while commits/{K} exists"
    elif K > L:
        listed = ", ".join(f"commits/{c}" for c in ahead[:5]) + ("..." if len(ahead) > 5 else "")
        what = f"{listed} exist, the latest offset being {L}"
    else:
        what = f"commits/{first} exists"
    when = "immediately" if first == start else f"after running batches {start}..{first - 1} (when new input arrives)"
    yield LOG_COMMIT_AHEAD.finding(
        f"{what}; the restart re-runs from batch {start} and fails {when} when it tries to commit batch {first}",
        [Evidence(ck.display(ck.commits.path_of(c)), note="commit of a batch the restart must run") for c in ahead[:5]],
        spark_error=E.concurrent_update(first),
        stage=80,
    )


@check
def commit_gap(ctx: AuditContext) -> Iterator[Finding]:
    L, K = ctx.latest_offset, ctx.latest_commit
    if K is None and L is not None and L >= 1 and (L - 1) in ctx.ckpt.offsets.files and not ctx.ckpt.looks_async():
        # no commit at all (commits/ emptied or deleted): populateStartOffsets takes batch L as not committed
        yield LOG_COMMIT_GAP.finding(
            f"commits/ holds no commit although offsets/0..{L} exist: Spark runs batch {L} again from offsets/"
            f"{L - 1} (its rows reach the sink a second time unless the sink is idempotent) and never re-runs "
            f"batches 0..{L - 1}: right if the commit files were lost after those batches ran, silent data loss "
            "if they never ran",
            [
                Evidence(ctx.ckpt.display("commits"), expected=f"commits up to {L - 1} or {L}", found="none"),
                Evidence(ctx.ckpt.display(f"offsets/{L}")),
            ],
            fix="Nothing to do if the commit files were deleted after the batches ran (Spark writes commits/"
            f"{L} again). If batches 0..{L - 1} never ran, no rollback reaches before them: start the query on a "
            "new checkpoint.",
        )
        return
    if L is None or K is None or K >= L - 1 or (L - 1) not in ctx.ckpt.offsets.files:
        return
    async_like = ctx.ckpt.looks_async()
    yield LOG_COMMIT_GAP.finding(
        f"latest commit {K} trails latest offset {L}: batches {K + 1}..{L - 1} will not be re-run"
        + (" (consistent with asynchronous progress tracking: they ran before the stop)" if async_like else ""),
        [Evidence(ctx.ckpt.display(f"commits/{K}")), Evidence(ctx.ckpt.display(f"offsets/{L}"))],
        severity="info" if async_like else "warning",
        fix=f"If batches {K + 1}..{L - 1} never ran, roll back to batch {K} ({ctx.rollback_command(K)}).",
    )


@check
def gaps_and_leftovers(ctx: AuditContext) -> Iterator[Finding]:
    ck, L = ctx.ckpt, ctx.latest_offset
    for log in (ck.offsets, ck.commits):
        ids = sorted(log.files)
        if ids:
            missing = sorted(set(range(ids[0], ids[-1] + 1)) - set(ids))
            relevant = [m for m in missing if L is None or m < L - 1]
            if relevant:
                yield LOG_GAP.finding(
                    f"{log.rel}/ has no entries for {_ranges(relevant)} (between {ids[0]} and {ids[-1]})",
                    [Evidence(ck.display(log.rel), found=f"{len(relevant)} missing")],
                )
        for rel in log.temp:
            yield LOG_TEMP.finding(f"{rel} is a leftover temporary file", [Evidence(ck.display(rel))])
        for rel in log.junk:
            yield LOG_JUNK.finding(f"{rel} is ignored by Spark", [Evidence(ck.display(rel))])
        for b, rel in sorted(log.noncanonical.items()):
            if b != log.latest:
                yield LOG_NONCANONICAL.finding(
                    f"{rel} counts as batch {b}, but Spark opens {log.rel}/{b}", [Evidence(ck.display(rel))]
                )

    # when Spark writes: a commit entry when it commits a batch (as LOG-COMMIT-AHEAD's failure, stage 80); a new
    # batch's source and offset entries when it plans it: first thing when the latest batch is committed (before
    # the state loads, stage 70), else after re-running the latest batch and committing it
    planned_first = ctx.latest_commit is not None and ctx.latest_commit == L
    for d in entry_directories(ctx, planned_first):
        where = [Evidence(d.display, expected=f"no file or directory at {d.rel}", found="a directory")]
        # the file sink's log is in the output path, not the checkpoint (hunt 14)
        home = "the output path" if ctx.sink is not None and d.log == ctx.sink.log.rel else "the checkpoint"
        fix = f"Move {d.display} out of {home} (`rmdir` it when empty); ckptfix does not delete directories."
        if d.stage is not None:
            yield LOG_ENTRY_DIR.finding(
                f"{d.rel} is a directory where Spark writes its next entry ({d.log}/{d.name}): the write is "
                "refused and the query stops",
                where,
                severity="error",
                fix=fix,
                spark_error=d.spark_error,
                stage=d.stage,
            )
        elif d.batch > d.next:
            yield LOG_ENTRY_DIR.finding(
                f"{d.rel} is a directory: Spark stops when it writes entry {d.batch} of {d.log}/ (the next one it "
                f"writes is {d.next})",
                where,
                severity="warning",
                fix=fix,
            )
        else:
            yield LOG_ENTRY_DIR.finding(
                f"{d.rel} is a directory: Spark reads no entry there and writes none there again", where, fix=fix
            )
    for orphan in crc_orphans(ctx):
        where = [Evidence(ck.display(orphan.rel))]
        if orphan.blocks is None:
            yield LOG_CRC_ORPHAN.finding(
                f"{orphan.rel} has no data file {orphan.target}",
                where,
                fix="Nothing for the restart: "
                + (
                    "Spark does not write this entry again"
                    if ck.location.is_local
                    else "an object store keeps no .crc sidecars, and Spark never reads or renames onto this one"
                )
                + ". Move it out of the checkpoint if it is in your way.",
            )
        elif orphan.blocks:
            yield LOG_CRC_ORPHAN.finding(
                f"{orphan.rel} has no data file {orphan.target}, the next entry Spark writes in {orphan.log}/: "
                "the rename of the new entry onto it fails",
                where,
                severity="error",
                spark_error=E.concurrent_use(orphan.log, orphan.batch),
                stage=80 if orphan.log == ck.commits.rel else 67 if planned_first else 85,
            )
        else:
            yield LOG_CRC_ORPHAN.finding(
                f"{orphan.rel} has no data file {orphan.target}: Spark stops when it writes entry {orphan.batch} "
                f"of {orphan.log}/ (the next one it writes is {orphan.next})",
                where,
                severity="warning",
            )


@dataclass(frozen=True)
class EntryDirectory:
    """A directory named like an entry of a log Spark writes (LOG-ENTRY-DIRECTORY)."""

    rel: str  # as the finding names it (the sink's under its own location)
    display: str
    log: str
    name: str  # the entry name Spark writes next in this log
    batch: int  # the directory's entry id
    next: int  # the next entry id Spark writes in this log
    #: when the restart's first write in this log hits it: the stage and what Spark raises; None otherwise
    stage: int | None
    spark_error: SparkError | None


def entry_directories(ctx: AuditContext, planned_first: bool) -> list[EntryDirectory]:
    """Every directory named like an entry of offsets/, commits/, a file source's log or the file sink's
    ``_spark_metadata`` (given ``--sink``). Before writing entry N each of these logs checks that nothing exists at
    its path (``HDFSMetadataLog.addNewBatchByStream``), so a directory at the next entry stops the query: offsets and
    commits with CONCURRENT_STREAM_LOG_UPDATE, a file source's log with ``IllegalStateException: Concurrent update to
    the log``, the file sink's with ``IllegalStateException: Race while writing batch N`` (3.5.9 to 4.3.0, recorded).
    The next entry: offsets L+1, commits the batch the restart runs, a source log its newest entry + 1 (written when
    new files are planned), the sink the first batch it does not hold."""
    from ckptfix.formats import compactlog

    ck, L = ctx.ckpt, ctx.latest_offset
    nb = ctx.next_batch or 0
    logs: list[tuple[Any, int, int | None, int, Any, Any]] = [
        (ck.offsets, 0 if L is None else L + 1, None, 67 if planned_first else 85, E.concurrent_update, ck.display),
        (ck.commits, nb, None, 80, E.concurrent_update, ck.display),
    ]
    for source in ck.sources.values():
        ids = source.listed_ids
        every = compactlog.derive_compact_interval(sorted(source.compact), 10)
        logs.append((source, ids[-1] + 1 if ids else 0, every, 66 if planned_first else 84, _source_race, ck.display))
    sink = ctx.sink
    if sink is not None and sink.delta is not None:
        sink = None
    if sink is not None:
        held = sink.log.latest
        logs.append(
            (
                sink.log,
                max(nb, -1 if held is None else held + 1),
                sink.compact_interval(),
                79,
                _sink_race,
                sink.location.display,
            )
        )
    out = []
    for log, nxt, interval, stage, error, display in logs:
        for rel in log.numeric_dirs:
            name = rel.rsplit("/", 1)[-1]
            batch = layout.parse_batch_name(name.removesuffix(compactlog.COMPACT_SUFFIX))
            if batch is None:
                continue
            written = str(nxt)
            if interval is not None and compactlog.is_compaction_batch(nxt, interval):
                written += compactlog.COMPACT_SUFFIX
            hit = name == written
            out.append(
                EntryDirectory(
                    rel, display(rel), log.rel, written, batch, nxt, stage if hit else None, error(nxt) if hit else None
                )
            )
    return out


def _source_race(batch: int) -> SparkError:
    """FileStreamSource.fetchMaxOffset when its log refuses entry ``batch`` (3.5.9 to 4.3.0, recorded)."""
    return SparkError("java.lang.IllegalStateException", None, f"Multiple streaming jobs detected for {batch}", batch)


def _sink_race(batch: int) -> SparkError:
    """FileStreamSink.addBatch when its log refuses entry ``batch`` (3.5.9 to 4.3.0, recorded)."""
    return SparkError("java.lang.IllegalStateException", None, f"Race while writing batch {batch}", batch)


@dataclass(frozen=True)
class CrcOrphan:
    rel: str  # the sidecar
    target: str  # the data file it names
    log: str  # offsets, commits or sources/<id>
    batch: int | None  # the entry id of the data file (None: not an entry name)
    next: int  # the next entry Spark writes in this log
    #: True: stops the restart; False: stops the query later; None: harmless (not a checksummed file system, an
    #: entry Spark does not write again, or not an entry name)
    blocks: bool | None


def crc_orphans(ctx: AuditContext) -> list[CrcOrphan]:
    """Every Hadoop .crc sidecar of offsets/, commits/ and sources/<id>/ without its data file, with what it does
    to Spark (see LOG-CRC-ORPHAN)."""
    ck = ctx.ckpt
    L = ctx.latest_offset
    # the next commit Spark writes is the next batch's: L+1 when L is committed, else L (run again), whatever K is
    logs = [(ck.offsets, 0 if L is None else L + 1), (ck.commits, ctx.next_batch or 0)]
    for source in ck.sources.values():
        ids = source.listed_ids
        logs.append((source, ids[-1] + 1 if ids else 0))
    checksummed = ck.location.is_local
    out = []
    for log, nxt in logs:
        names = {
            rel.rsplit("/", 1)[-1] for rel in [*log.files.values(), *log.noncanonical.values(), *log.temp, *log.junk]
        }
        for target, rel in sorted(log.crc.items()):
            if target in names:
                continue
            stem = target.removesuffix(".compact")
            batch = int(stem) if stem.isdigit() else None
            blocks = None if not checksummed or batch is None or batch < nxt else batch == nxt
            out.append(CrcOrphan(rel, target, log.rel, batch, nxt, blocks))
    return out


def _ranges(ids: list[int]) -> str:
    out: list[str] = []
    start = prev = ids[0]
    for i in [*ids[1:], None]:
        if i is not None and i == prev + 1:
            prev = i
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        if i is not None:
            start = prev = i
    return ", ".join(out[:10]) + (" ..." if len(out) > 10 else "")


def _tail_files(ctx: AuditContext) -> list[str]:
    ck = ctx.ckpt
    rels: list[str] = []
    if ck.metadata_rel:
        rels.append(ck.metadata_rel)
    if ctx.deep:
        rels += [*ck.offsets.files.values(), *ck.commits.files.values()]
        for src in ck.sources.values():
            rels += list(src.files.values())
        return rels
    L, K = ctx.latest_offset, ctx.latest_commit
    for b in (L, None if L is None else L - 1):
        if b is not None and b in ck.offsets.files:
            rels.append(ck.offsets.files[b])
    if K is not None and K in ck.commits.files:
        rels.append(ck.commits.files[K])
    return rels


def _unreadable(ctx: AuditContext, rel: str) -> bool:
    ck = ctx.ckpt
    head, _, name = rel.partition("/")
    try:
        if rel == layout.METADATA:
            ck.query_metadata()
        elif head == layout.OFFSETS and name.isdigit():
            ck.offset(int(name))
        elif head == layout.COMMITS and name.isdigit():
            ck.commit(int(name))
    except FormatError:
        return True
    return False


@check
def crc_sidecars(ctx: AuditContext) -> Iterator[Finding]:
    ck = ctx.ckpt
    for rel in _tail_files(ctx):
        if _unreadable(ctx, rel):
            continue  # LOG-UNREADABLE / META-UNREADABLE already say so
        parent, _, name = rel.rpartition("/")
        crc_rel = f"{parent}/{layout.hadoop_crc_name(name)}" if parent else layout.hadoop_crc_name(name)
        if crc_rel not in ck.entries:
            continue
        try:
            crc = hadoopcrc.parse(ck.read(crc_rel), ck.display(crc_rel))
        except FormatError as exc:
            yield LOG_CRC.finding(
                f"{crc_rel} is not a valid Hadoop checksum file",
                [Evidence(ck.display(crc_rel), exc.offset, exc.expected, exc.found)],
                severity="warning",
            )
            continue
        data = ck.read(rel)
        at = hadoopcrc.first_mismatch(crc, data)
        if at is not None and rel == layout.METADATA and hadoopcrc.first_mismatch(crc, data.strip()) is None:
            # whitespace around the JSON Spark wrote (a newline an editor added): json4s reads the same id
            yield LOG_CRC.finding(
                f"{rel} is what Spark wrote (per {crc_rel}) plus whitespace around it: Spark reads the same query id",
                [Evidence(ck.display(rel), at, "the bytes recorded in the .crc sidecar", "the same, with whitespace")],
                severity="info",
            )
        elif at is not None:
            yield LOG_CRC.finding(
                f"{rel} differs from what Spark wrote (per {crc_rel}) from byte {at}; Spark will use the edited "
                "content without noticing",
                [
                    Evidence(ck.display(rel), at, "the bytes recorded in the .crc sidecar", "different bytes"),
                    Evidence(ck.display(crc_rel)),
                ],
                silent=True,
            )


@check
def deep_logs(ctx: AuditContext) -> Iterator[Finding]:
    if not ctx.deep:
        return
    ck, L, K = ctx.ckpt, ctx.latest_offset, ctx.latest_commit
    tail = {("offsets", L), ("offsets", None if L is None else L - 1), ("commits", K)}
    for log_name, log in (("offsets", ck.offsets), ("commits", ck.commits)):
        for b in sorted(log.files):
            if (log_name, b) in tail:
                continue
            _, exc = ctx.offset_or_error(b) if log_name == "offsets" else ctx.commit_or_error(b)
            ctx.progress.advance()
            if exc is not None:
                yield LOG_OLD_UNREADABLE.finding(
                    f"{log_name}/{b} cannot be read: expected {exc.expected}, found {exc.found}",
                    [Evidence(ck.display(log.files[b]), exc.offset, exc.expected, exc.found)],
                )


@check
def watermark_edited(ctx: AuditContext) -> Iterator[Finding]:
    L = ctx.latest_offset
    entry = ctx.latest_offset_file
    if L is None or L == 0 or entry is None or entry.metadata is None or L - 1 not in ctx.ckpt.commits.files:
        return
    commit = ctx.commit_or_error(L - 1)[0]
    if commit is None:
        return
    wrote, recorded = entry.metadata.batch_watermark_ms, commit.next_batch_watermark_ms
    if wrote == recorded:
        return
    ck = ctx.ckpt
    after = None  # batch L committed: Spark restores max(offsets/L's, commits/L's)
    if ctx.latest_commit == L:
        last = ctx.commit_or_error(L)[0]
        after = last.next_batch_watermark_ms if last is not None else None
    if after is not None and max(wrote, after) == max(recorded, after):
        effect = (
            f"batch {L} is committed, and Spark restores the higher of the two with commits/{L}'s ({after} ms), "
            "the same as without the edit: no effect"
        )
    elif wrote > recorded:
        effect = (
            f"Spark restarts with a watermark of {wrote} ms instead of {max(recorded, after or recorded)}: rows "
            "with an event time in between count as late and are dropped, and state is evicted earlier; results "
            "may be silently wrong"
        )
    else:
        effect = (
            f"Spark runs batch {L} again with {wrote} ms instead of {recorded}: rows the first run dropped as late "
            "are kept, and state is evicted later; results may differ from the first run's"
        )
    yield LOG_WATERMARK_EDITED.finding(
        f"offsets/{L} records batchWatermarkMs {wrote}, but commits/{L - 1} recorded {recorded} as the watermark "
        f"of batch {L} (an edit): {effect}",
        [
            Evidence(ck.display(ck.offsets.files[L]), expected=f"batchWatermarkMs {recorded}", found=str(wrote)),
            Evidence(ck.display(ck.commits.files[L - 1]), note=f"nextBatchWatermarkMs {recorded}"),
        ],
        # raised under stateful operators: a damage hunt on 4.3 saw wrong output in every stateful shape (session
        # windows, joins, transformWithState timers, dropDuplicatesWithinWatermark: hunt 6, wm_up)
        **(
            {"severity": "error", "silent": True}
            if wrote > recorded and "no effect" not in effect and ck.state.operators
            else {"severity": "info" if "no effect" in effect else "warning"}
        ),
    )
