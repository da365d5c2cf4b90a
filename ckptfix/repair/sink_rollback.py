"""Roll a file sink back so that batch N is the newest batch it holds (``ckptfix rollback --with-sink``).

Spark's ``FileStreamSink`` skips every batch id at or below the newest in ``<output>/_spark_metadata``, whatever
query wrote it, and readers of the output path (``spark.read``) see exactly the files that log lists. So rolling
the checkpoint back to batch N only works if the sink forgets batches > N too: this plans, on the sink's output
path, the deletion of ``_spark_metadata/<b>`` (and its ``.<b>.crc``) for every b > N, then of every data file
those entries add (and its ``.<name>.crc``). The log entries go first: a run interrupted between them leaves data
files no log entry lists, which readers do not see and Spark never reads.

A compacted entry (``<b>.compact``, every ``spark.sql.streaming.fileSink.log.compactInterval`` batches) above N
lists the files of every batch up to b: it goes with the rest, and the files the shortened log still lists (the
newest compaction at or below N and the entries after it) stay. Refused: such a compaction when an entry the
shortened log needs is gone (Spark deletes the entries a compaction covers after a delay), since it would have to
be rewritten; an entry that is not an
``add`` of a file; a data file outside the output path (a log copied or moved from elsewhere names the original's
files); an entry ckptfix cannot read. The plan is applied by the repair engine like any other (backup, journal,
``ckptfix undo OUT RUN``).
"""

from __future__ import annotations

from urllib.parse import unquote

from ckptfix.checkpoint import Checkpoint
from ckptfix.errors import (
    FormatError,
    SinkRollbackRefused,
)
from ckptfix.formats import compactlog
from ckptfix.repair.builder import PlanBuilder
from ckptfix.repair.plan import Plan
from ckptfix.sinks import Sink
from ckptfix.storage import uri_forms

RULE = "ROLLBACK-SINK"


def relative_to(sink: Sink, url: str) -> str | None:
    """The path of ``url`` (a file sink log entry's ``path``: Hadoop's ``Path.toUri``, percent-encoded) relative
    to the sink's output path, or None when it lies outside."""
    plain = unquote(url)
    for form in uri_forms(sink.location.url):
        base = form.rstrip("/") + "/"
        if plain.startswith(base):
            rel = plain[len(base) :]
            parts = rel.split("/")
            if rel and "" not in parts and ".." not in parts and "." not in parts:
                return rel
            return None
    return None


def _added(sink: Sink, N: int, rel: str) -> list[str]:
    """The data files (relative to the output path) that the log entry ``rel`` adds."""
    where = sink.location.display(rel)
    try:
        entries = compactlog.parse(sink.location.read(rel), where).entries
    except FormatError as exc:
        raise SinkRollbackRefused(N, f"{where} is unreadable ({exc.expected}, found {exc.found})") from None
    out = []
    for e in entries:
        url = e.get("path")
        if e.get("action", "add") != "add" or e.get("isDir") is True or not isinstance(url, str):
            raise SinkRollbackRefused(
                N, f"{where}: expected entries that add a file, found {str(e)[:120]} (not written by Spark?)"
            )
        file_rel = relative_to(sink, url)
        if file_rel is None:
            raise SinkRollbackRefused(
                N,
                f"{where} adds {url}, outside the output path {sink.location.url} (a log copied or moved from "
                "elsewhere?): ckptfix only deletes files inside the sink it was given",
            )
        out.append(file_rel)
    return out


def _kept_files(sink: Sink, N: int) -> set[str]:
    """The files the log lists up to batch N once the entries above it are gone: the newest compaction at or below
    N and every entry after it. A compaction above N lists them as well (hunt 11, F2: a rollback across one was
    refused though nothing needs rewriting). Refused when an entry the shortened log needs is gone (Spark deletes
    the entries a compaction covers, after spark.sql.streaming.fileSink.log.cleanupDelay): only that compaction
    still lists batch N's files, and the log cannot end at N without rewriting it."""
    log = sink.log
    below = [b for b in log.compact if b <= N]
    start = max(below) if below else -1
    needed = range(start + 1, N + 1)
    gone = [b for b in needed if b not in log.files or b in log.compact]
    if gone:
        above = min(b for b in log.compact if b > N)
        raise SinkRollbackRefused(
            N,
            f"{sink.location.display(log.path_of(above))} is a compacted entry above batch {N}, and "
            f"{sink.location.display(log.path_of(gone[0]))}, which the log would need to end at batch {N}, is gone "
            "(Spark deletes the entries a compaction covers): the compaction would have to be rewritten (ckptfix "
            "does not); start a new checkpoint into a new output path instead (`ckptfix offsets export` gives where "
            "its sources start)",
        )
    kept: set[str] = set()
    for b in ([start] if start >= 0 else []) + list(needed):
        kept.update(_added(sink, N, log.path_of(b)))
    return kept


def plan_sink_rollback(sink: Sink, N: int, target: str) -> Plan:
    """The plan that makes batch N the newest batch of the file sink at ``sink``."""
    if sink.delta is not None:
        raise SinkRollbackRefused(N, "it is a Delta table, not a file sink")
    log = sink.log
    later = [b for b in log.listed_ids if b > N]
    kept = _kept_files(sink, N) if any(b in log.compact for b in later) else set()
    logs = sorted((b, rel) for b, rel in [*log.files.items(), *log.noncanonical.items()] if b > N)
    data: list[tuple[str, int]] = []
    seen: set[str] = set()
    missing = 0
    for b, rel in logs:
        for file_rel in _added(sink, N, rel):
            if file_rel in kept or file_rel in seen:
                continue  # a compaction above N lists the files of batches <= N too: they stay
            seen.add(file_rel)
            if file_rel not in sink.entries:
                missing += 1
            data.append((file_rel, b))
    builder = PlanBuilder(Checkpoint(sink.location, sink.entries), target)
    for b, rel in logs:  # the log first: files no entry lists are invisible to readers and to Spark
        builder.delete(rel, f"file sink log entry of batch {b} > {N}", RULE)
    for rel, b in data:
        builder.delete(rel, f"data file added by batch {b}", RULE)
    L = later[-1] if later else None
    effects = (
        [
            f"the file sink's log ends at batch {N}: Spark writes batches {N + 1}.. again (it skips only ids <= {N})",
            f"readers of {sink.location.url} (which list the files the log names) no longer see the rows of batches "
            f"{N + 1}..{L}",
        ]
        if L is not None
        else ["nothing: the file sink holds no batch after " + str(N)]
    )
    notes = [
        "the backups go under the output path's _ckptfix/ by default: Spark's readers and the sink skip it "
        "(a directory whose name starts with _)"
    ]
    if missing:
        notes.append(f"{missing} data file(s) the log entries list are already gone: nothing to delete for them")
    return builder.build(f"rollback of the file sink to batch {N}", [], effects, notes)
