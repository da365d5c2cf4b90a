"""Write a file sink's log entry for a batch that wrote nothing (``state repartition --sink OUT``).

A repartition batch N (ckptfix's, like Spark's offline runner's) is committed in the checkpoint without running the
query, so the file sink's ``_spark_metadata`` gets no entry for it. Spark does not notice until the sink's log
next compacts across N: ``CompactibleFileStreamLog.compact`` reads every batch since the previous compaction and
fails on the missing one (seen live: ``BATCH_METADATA_NOT_FOUND ... _spark_metadata/N``). This plans the entry a
batch that adds no file leaves (Spark's ``serialize``: the version line alone, ``v1``), under the name Spark's
``batchIdToPath`` gives it:

* the compact interval is the one Spark derives at the restart (:func:`compactlog.derive_compact_interval`: the
  existing ``.compact`` files, else ``spark.sql.streaming.fileSink.log.compactInterval``, 10 unless the query sets
  another);
* when N is a compaction batch under it, the entry is ``N.compact`` holding what Spark's ``compact(N, [])`` would
  write: the entries of batches ``max(0, N - interval)``..N-1 (the previous compaction first), less the files a
  ``delete`` entry removes (``FileStreamSinkLog.compactLogs``), each line as the log holds it.

Refused: a Delta table (its skipped-batch check compares with the largest committed batch id, so it needs no
entry), a sink whose log does not end at batch N-1 (the checkpoint's last batch before N: the sink commits each
batch before the checkpoint does), an entry of a batch the compaction reads that is missing or unreadable.
"""

from __future__ import annotations

import json

from ckptfix import layout
from ckptfix.checkpoint import Checkpoint
from ckptfix.errors import FormatError, SinkEntryRefused
from ckptfix.formats import compactlog
from ckptfix.formats.text import split_lines
from ckptfix.repair.builder import PlanBuilder
from ckptfix.repair.plan import Plan
from ckptfix.sinks import DEFAULT_COMPACT_INTERVAL, Sink

RULE = "SINK-ENTRY"


def sink_entry_name(sink: Sink, batch: int, default_interval: int = DEFAULT_COMPACT_INTERVAL) -> tuple[str, int]:
    """(``_spark_metadata/<batch>[.compact]``, the interval) as Spark names the entry at the restart."""
    interval = sink.compact_interval(default_interval)
    return sink.entry_rel(batch, interval), interval


def plan_sink_entry(
    sink: Sink, batch: int, target: str, default_interval: int = DEFAULT_COMPACT_INTERVAL, why: str = ""
) -> Plan:
    """The plan that gives the file sink at ``sink`` an entry for ``batch``, a batch that added no file."""
    if sink.delta is not None:
        raise SinkEntryRefused(batch, "it is a Delta table, which needs no entry for a batch without data")
    latest = sink.log.latest
    if latest != batch - 1:
        raise SinkEntryRefused(
            batch,
            f"expected {sink.location.display(layout.SINK_LOG)} to end at batch {batch - 1} (the batch before it), "
            f"found {'no entry' if latest is None else f'batch {latest}'}",
        )
    rel, interval = sink_entry_name(sink, batch, default_interval)
    lines: list[bytes] = []
    if rel.endswith(compactlog.COMPACT_SUFFIX):
        for _, entry_rel in sink.compaction_reads(batch, interval):
            where = sink.location.display(entry_rel)
            data = sink.location.read_if_exists(entry_rel) if entry_rel in sink.entries else None
            if data is None:
                raise SinkEntryRefused(
                    batch, f"{where} is missing: the compaction at batch {batch} reads it (Spark would fail too)"
                )
            try:
                compactlog.parse(data, where)
            except FormatError as exc:
                raise SinkEntryRefused(batch, f"{where} is unreadable ({exc.expected}, found {exc.found})") from None
            lines += [ln.data for ln in split_lines(data)[1:] if ln.data.strip()]
        deleted = {e.get("path") for e in map(json.loads, lines) if e.get("action") == "delete"}
        if deleted:  # FileStreamSinkLog.compactLogs: a deleted file is dropped with its delete entries
            lines = [ln for ln in lines if json.loads(ln).get("path") not in deleted]
    content = b"\n".join([b"v1", *lines])
    builder = PlanBuilder(Checkpoint(sink.location, sink.entries), target)
    compacting = rel.endswith(compactlog.COMPACT_SUFFIX)
    kind = f"the compaction of batches {max(0, batch - interval)}..{batch - 1}" if compacting else "no file"
    builder.write(rel, content, f"file sink log entry of batch {batch} ({kind}; compact interval {interval})", RULE)
    effects = [
        f"{sink.location.display(layout.SINK_LOG)} holds batch {batch}, {why or 'a batch that wrote nothing'}: "
        f"its next compaction across batch {batch} reads it instead of failing",
        f"readers of {sink.location.url} see the same files as before",
    ]
    return builder.build(f"file sink entry for batch {batch}", [], effects)
