"""File-source logs ``sources/<k>/``: what a restart reads of them.

At start, FileStreamSource restores its seen files from the latest compaction batch up to the
latest batch (``allFiles``); the first batch then reads the entries between the start and end
``logOffset`` of batch L (``getBatch``), and ``verifyBatchIds`` fails on a missing one with the
same text as the async-tracking failure: ``batch x doesn't exist``.
"""

from __future__ import annotations

from collections.abc import Iterator

from ckptfix import layout
from ckptfix.audit import spark_errors as E
from ckptfix.audit.context import AuditContext
from ckptfix.audit.model import Evidence, Finding, SparkError
from ckptfix.audit.registry import check, define
from ckptfix.checkpoint import LogDir
from ckptfix.errors import FormatError
from ckptfix.formats.compactlog import derive_compact_interval, is_compaction_batch
from ckptfix.formats.offsetlog import file_source_log_offset, offset_kind, unusable_offset_field

SRC_MISSING = define(
    "SRC-LOG-MISSING",
    "error",
    "A file-source log entry needed at restart is missing",
    "The file source re-reads its log between the start and end offsets of the latest batch and from the "
    "latest compaction on. A missing entry fails with `batch x doesn't exist` (no 'offset log' line in the "
    "driver log: it is not the async-tracking failure).",
    "Restore the entries from a backup: the lists of files they held are in no other file. A rollback does not bring "
    "them back (the re-planned batch and the restarted source read the same entries again). Without a backup, only "
    "a new checkpoint, whose file source reads every file in the input path again: move the files already processed "
    "out of it first, or the sink gets their rows a second time.",
)
SRC_UNREADABLE = define(
    "SRC-LOG-UNREADABLE",
    "error",
    "A file-source log entry needed at restart is damaged",
    "The file source parses these entries at restart.",
    "Restore the entry from a backup.",
)

SRC_BACKWARDS = define(
    "SRC-OFFSET-BACKWARDS",
    "error",
    "A file source's offset in the latest offset file is below the one before it",
    "At the restart Spark asks the file source for the latest batch's files, from the previous batch's log offset "
    "to the latest one (getBatch, committed or not), and FileStreamSource asserts that the start is not after the "
    "end: `java.lang.AssertionError: assertion failed` (seen on 4.3, damage hunt of 2026-11-27). Spark never "
    "writes such an offset: the file was edited or damaged.",
    "Restore the offset file from a backup. Without one, `ckptfix repair` deletes it (and its commit) so that "
    "Spark plans the batch again from the offset file before it, as for a damaged latest offset file.",
)

SRC_OFFSET_UNREADABLE = define(
    "SRC-OFFSET-UNREADABLE",
    "error",
    "A source's offset in the offset log holds a value Spark cannot read",
    'Spark reads a file source\'s offset `{"logOffset":N}` and a rate-micro-batch source\'s `{"offset":N,'
    '"timestamp":M}` with json4s into Long fields; a string, boolean, null, array or object there (`"80"` for 80) '
    "fails with `org.json4s.MappingException: No usable value for <field>` when the restart reads the offset (seen "
    "on 4.3, damage hunt of 2026-11-27; recorded 3.5.9-4.2.1 for the file source). Offsets whose source the JSON "
    "does not name for sure (a bare number, Kafka's per-partition map, ...) are not checked.",
    "Restore the offset file from a backup or write the number without quotes. In the latest offset file, "
    "`ckptfix repair` deletes it (and its commit) so that Spark plans the batch again from the offset file before "
    "it; in an earlier one, roll back to the batch before it (the finding names the command).",
)


def _rollback_before(ctx: AuditContext, batch: int) -> str:
    """The fix for a damaged offset file below the latest: a backup, or the rollback to the batch before it."""
    head = f"Restore offsets/{batch} from a backup or write the number without quotes"
    b = batch - 1
    if b in ctx.ckpt.commits.files and b in ctx.ckpt.offsets.files:
        return f"{head}; or roll back to batch {b}: {ctx.rollback_command(b)} (the batches after it run again)."
    return f"{head}: without a backup, only a new checkpoint (`ckptfix offsets export` gives where its sources start)."


def present(log: LogDir, batch: int, interval: int) -> bool:
    """Whether a file-source log holds entry ``batch`` as Spark names it (``N.compact`` on compaction batches)."""
    if batch not in log.files:
        return False
    return (batch in log.compact) == is_compaction_batch(batch, interval)


@check
def file_sources(ctx: AuditContext) -> Iterator[Finding]:
    ck, L = ctx.ckpt, ctx.latest_offset
    cur = ctx.latest_offset_file
    if L is None or cur is None:
        return
    prev = ctx.offset_or_error(L - 1)[0] if L > 0 and (L - 1) in ck.offsets.files else None
    for src in cur.offsets:
        log = ck.sources.get(src.source_id)
        end = file_source_log_offset(src.json)
        if end is None:
            continue
        if log is None:
            yield _whole_log_missing(ctx, src.source_id, end)
            continue
        interval = derive_compact_interval(sorted(log.compact))
        latest = log.latest
        restored: list[int] = []  # what the source parses at start (allFiles): the latest compaction on
        if latest is not None:
            restored = [b for b in range(max(0, (latest + 1) // interval * interval - 1), latest + 1)]
            first = max(0, (latest + 1) // interval * interval - 1)
            for b in range(first, latest + 1):
                if not present(log, b, interval):
                    name = f"{b}.compact" if is_compaction_batch(b, interval) else str(b)
                    yield SRC_MISSING.finding(
                        f"{log.rel}/{name} is missing; the source restores its file list from it",
                        [Evidence(ck.display(f"{log.rel}/{name}"), expected="a file", found="none")],
                        spark_error=E.source_compaction_missing(ctx.target, name, latest, interval),
                        stage=15,
                    )
                    break
        start = -1
        if prev is not None:
            p = next((o for o in prev.offsets if o.source_id == src.source_id), None)
            found = file_source_log_offset(p.json if p else None)
            start = -1 if found is None else found
        if end < start:  # getBatch(start, end) of batch L at the restart: assert(startOffset <= endOffset)
            yield SRC_BACKWARDS.finding(
                f"offsets/{L} records source {src.source_id} at log entry {end}, below the {start} of offsets/{L - 1}",
                [
                    Evidence(ck.display(f"offsets/{L}"), expected=f"a logOffset >= {start}", found=str(end)),
                    Evidence(ck.display(f"offsets/{L - 1}"), note=f"logOffset {start}"),
                ],
                spark_error=E.get_batch_assertion(),
                stage=60,
            )
            continue
        needed = list(range(start + 1, end + 1))
        missing = [b for b in needed if not present(log, b, interval)]
        if missing:
            err = _some_missing(needed, missing)
            names = [f"{log.rel}/{b}{'.compact' if is_compaction_batch(b, interval) else ''}" for b in missing]
            # every entry the batches before L read is there, and none after the missing ones
            beyond = log.latest is not None and log.latest >= start and all(b > log.latest for b in missing)
            fix = None
            if beyond and L - 1 in ck.commits.files and L - 1 in ck.offsets.files:
                # no entry after the missing ones: they may never have existed, offsets/L edited past the log (hunt
                # 13: "restore from a backup" for entries nobody lost, and a rollback command without its batch)
                fix = (
                    f"Restore {', '.join(names[:3])} from a backup; if none was lost (offsets/{L} names entries past "
                    f"the newest the log ever had, as an edit of offsets/{L} does), roll back to batch {L - 1}: "
                    f"{ctx.rollback_command(L - 1)} (batch {L} is planned again from the log as it is)."
                )
            yield SRC_MISSING.finding(
                f"{', '.join(names[:3])} missing; batch {L} reads source {src.source_id} entries {start + 1}..{end}",
                [Evidence(ck.display(n), expected="a file", found="none") for n in names[:3]],
                spark_error=err,
                stage=60,
                fix=fix,
            )
            continue
        behind = _log_behind_offset(ctx, src.source_id, latest, end)
        if behind is not None:
            yield behind
        parsed = sorted(log.files) if ctx.deep else sorted({*needed, *(b for b in restored if b in log.files)})
        for b in parsed:
            try:
                ck.source_log(src.source_id, b)
            except FormatError as exc:
                yield SRC_UNREADABLE.finding(
                    f"{log.path_of(b)} cannot be read: expected {exc.expected}, found {exc.found}",
                    [Evidence(ck.display(log.path_of(b)), exc.offset, exc.expected, exc.found)],
                    spark_error=E.log_parse_error(ctx.target, "sources", log.path_of(b), exc)
                    or SparkError(None, None, log.path_of(b)),
                    stage=60,
                    fix=_newest_entry_fix(ctx, src.source_id, log, b, end, interval),
                )


def _newest_entry_fix(ctx: AuditContext, source_id: str, log: LogDir, b: int, end: int, interval: int) -> str | None:
    """The fix for a damaged newest entry ``b`` (not a compaction) that batches up to the latest one recorded as read
    (``end == b``): without a backup, deleting it leaves the log one entry below the offset log, which Spark writes
    again with the files it has not seen (repair hunt 10, W15: exact, with one file per trigger and nothing new);
    else rolling back to before the batch that read it (None: not that case)."""
    if b != log.latest or b != end or is_compaction_batch(b, interval):
        return None
    L = ctx.latest_offset
    first = L  # the batch that first recorded entry b as read (a no-data batch after it records it again)
    k = L - 1 if L is not None else -1
    while L is not None and k >= 0:
        prev = ctx.offset_or_error(k)[0]
        p = next((o for o in prev.offsets if o.source_id == source_id), None) if prev else None
        found = file_source_log_offset(p.json if p else None)
        if found is None or found < b:
            break
        first, k = k, k - 1
    if first is None or first < 1:
        return None
    rel = log.path_of(b)
    return (
        f"Restore {rel} from a backup. Without one: if no file has landed in the source's directory since batch "
        f"{first} read it (or the query reads one file per trigger), delete {rel} (and its .crc): the restarted "
        "source writes the entry again with the files it has not seen, which are then that entry's (seen exact on "
        "4.3); otherwise roll back to before that batch, "
        f"{ctx.rollback_command(first - 1)}, so that batch {first} lists and reads its files again"
    )


def _log_behind_offset(ctx: AuditContext, source_id: str, latest: int | None, end: int) -> Finding | None:
    """The source's log ends (``latest``) more than one entry below the offset batch L recorded (``end``), while
    batch L itself needs none of the missing entries (it read no file: start == end, as a watermark's no-data batch
    does; else :data:`SRC_MISSING` fails it first). The restarted source numbers its next batch from its own log:
    latest + 1 when it finds files it has not seen (the deleted entries' files are such), latest when it finds none;
    either way below ``end`` and different from it, so Spark plans a batch from ``end`` back to that offset and
    ``getBatch``'s ``assert(startOffset <= endOffset)`` fails (damage hunt of 2026-11-27, F07 on 4.3; recorded
    3.5.9-4.2.1). One entry below (latest + 1 == end) restarts: the source writes entry ``end`` again with every
    file it has not seen, new ones included, and the offset log counts it as read: their rows are lost (a silent
    hazard; repair hunt 10, W14 on 4.3.0)."""
    L = ctx.latest_offset
    rel = f"{layout.SOURCES}/{source_id}"
    if latest is not None and latest + 1 == end:
        # the restarted source logs the files it has not seen (the deleted entry's, and every new one) as entry
        # `end`, which the offset log records as read: the first batch after the restart skips them, and the rows of
        # every file that arrived since are lost without an error (repair hunt 10, W14 on 4.3.0: 3 rows missing)
        return SRC_MISSING.finding(
            f"{rel}/{end} is missing (the log ends at entry {latest}), but offsets/{L} records that source "
            f"{source_id} read entry {end}: the restarted source writes the files it has not seen (the lost entry's "
            f"and every new one, up to its per-batch limit) as entry {end} again, which the offset log already "
            "counts as read, so the first batch after the restart reads none of them: the rows of new files that "
            "land in that entry are lost without an error (with one file per trigger, only that batch is empty)",
            [Evidence(ctx.ckpt.display(f"{rel}/{end}"), expected="a file", found="none")],
            silent=True,
            fix=f"Restore {rel}/{end} from a backup before the restart. Without it, restart only once no file has "
            "arrived since batch {L} (the entry is then written again with the files it held), or start the query on "
            "a new checkpoint (`ckptfix offsets export` gives where its sources start).".replace("{L}", str(L)),
        )
    if latest is None or latest + 1 >= end:
        return None
    committed = L is not None and ctx.latest_commit == L
    return SRC_MISSING.finding(
        f"{rel}/ ends at entry {latest}, but offsets/{L} records that source {source_id} read its log up to entry "
        f"{end}: the next batch numbers its files from {latest + 1}, and reading from {end} back to it fails",
        [Evidence(ctx.ckpt.display(rel), expected=f"log entries up to {end}", found=f"up to {latest}")],
        spark_error=E.get_batch_assertion(),
        stage=60 if committed else 88,  # the batch after L: the first one when L committed, else after L's commit
    )


def _some_missing(needed: list[int], missing: list[int]) -> SparkError:
    """HDFSMetadataLog.verifyBatchIds(ids, Some(first), Some(last)) on the entries getBatch reads (from javap of
    4.3 and Spark's messages, seen in the damage hunt of 2026-11-27): none there: "batch <first> doesn't exist";
    the first ones missing: "batches (<first> .. <min present>) don't exist"; the last ones: "batches (<max present>
    .. <last>) don't  exist" (two spaces; both ranges include the present id at their end); a gap between present
    ones: "batches (<the gap>) don't exist"."""
    present = [b for b in needed if b not in set(missing)]
    if not present:
        return E.batch_missing(needed[0])
    if present[0] != needed[0]:
        ids = range(needed[0], present[0] + 1)
        tail = ""  # not recorded: the fragment every wording starts with
    elif present[-1] != needed[-1]:
        ids = range(present[-1], needed[-1] + 1)
        tail = "  exist"  # Spark's two spaces (recorded on 3.5.9-4.3.0: offset_source_moved_forward)
    else:
        return SparkError(E.ISE, None, f"don't exist (startId: Some({needed[0]}), endId: Some({needed[-1]}))")
    # the whole sentence where Spark's wording is recorded: a headline that stopped at "don't" read as cut off
    # (new-user trial 4)
    return SparkError(E.ISE, None, f"batches ({', '.join(map(str, ids))}) don't{tail}")


def _whole_log_missing(ctx: AuditContext, source_id: str, end: int) -> Finding:
    """``sources/<k>/`` gone while the offset log says the file source read entries 0..end. At the restart Spark
    calls ``getBatch`` for batch L (committed or not), which reads L's entries: ``batch x doesn't exist``
    (recorded on 3.5.9-4.2.1). When L read no entry (a no-data batch) the source starts from an empty log, numbers
    the next new file 0, below the recorded offset, and ``getBatch``'s ``assert(startOffset <= endOffset)`` fails
    (seen on 4.3, damage hunt of 2026-11-27)."""
    rel = f"{layout.SOURCES}/{source_id}"
    L = ctx.latest_offset
    prev = ctx.offset_or_error(L - 1)[0] if L is not None and L > 0 and (L - 1) in ctx.ckpt.offsets.files else None
    p = next((o for o in prev.offsets if o.source_id == source_id), None) if prev else None
    found = file_source_log_offset(p.json if p else None)
    start = found if found is not None else -1
    if end > start:
        err = E.batch_missing(start + 1)
        when = f"the restart reads batch {L}'s entries {start + 1}..{end} again"
    else:
        err = E.get_batch_assertion()
        when = f"the next batch plans new files from log entry 0, below the recorded {end}"
    return SRC_MISSING.finding(
        f"{rel}/ is missing, but offsets/{L} records that source {source_id} read its log up to entry {end}: {when}",
        [Evidence(ctx.ckpt.display(rel), expected=f"log entries 0..{end}", found="no directory")],
        spark_error=err,
        stage=60,
        fix=f"Restore {rel}/ from a backup: the list of files the source has read is in no other file. A new "
        "checkpoint would read every input file again (the sink gets old rows a second time).",
    )


@check
def source_offsets_readable(ctx: AuditContext) -> Iterator[Finding]:
    """The offsets the restart parses: a file source's in offsets/L-1 and offsets/L (``getBatch(start, end)`` of
    batch L, committed or not); a rate-micro-batch source's in offsets/L (the next batch's start, or batch L's end
    when it runs again) and, when L runs again, in offsets/L-1 if it differs (its start)."""
    L, cur = ctx.latest_offset, ctx.latest_offset_file
    if L is None or cur is None:
        return
    prev = ctx.offset_or_error(L - 1)[0] if L > 0 and (L - 1) in ctx.ckpt.offsets.files else None
    rerun = ctx.latest_commit != L
    for src in cur.offsets:
        p = next((o for o in prev.offsets if o.source_id == src.source_id), None) if prev else None
        before = p.json if p else None
        kind = offset_kind(src.json) or offset_kind(before)
        if kind is None:
            continue
        read = [(L - 1, before)] if kind == "file" or (rerun and before != src.json) else []
        for batch, raw in [*read, (L, src.json)]:
            bad = unusable_offset_field(raw)
            if bad is None:
                continue
            name, value = bad
            yield SRC_OFFSET_UNREADABLE.finding(
                f"offsets/{batch} records {kind} source {src.source_id}'s {name} as {value}, which Spark cannot "
                "read as a number",
                [Evidence(ctx.ckpt.display(f"offsets/{batch}"), expected=f"a number for {name}", found=value)],
                spark_error=E.offset_field_unusable(name),
                stage=60,
                fix=None if batch == L else _rollback_before(ctx, batch),
            )
            break
