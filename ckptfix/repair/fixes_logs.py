"""Planners for damaged or inconsistent ``metadata``, ``offsets/`` and ``commits/``.

Each planner derives its change from Spark's restart logic (spark-logs-and-restart.md §6.1,
§6.3, §12.3 R4-R8): which batch Spark runs first after the change, with which offsets, and
what a sink sees again. Two rules hold everywhere:

* never make Spark *re-plan* (new offsets for) a batch id a file sink's ``_spark_metadata``
  already holds: the sink skips it and the new data is lost (§8.3);
* never drop a commit that is a state pointer (v2 ``stateUniqueIds``) or re-plan a batch
  whose state version exists: that is a rollback (``ckptfix rollback``), which the refusal names.
"""

from __future__ import annotations

import contextlib
import shlex
import uuid
from dataclasses import replace

from ckptfix import layout
from ckptfix.audit.model import Finding
from ckptfix.audit.rules_conf import FORMAT_CHANGED, FORMAT_NOT_RECORDED, format_conflicts
from ckptfix.audit.rules_logs import stateful_gap_fix
from ckptfix.errors import CannotFix, CkptfixError, FormatError
from ckptfix.formats import commitlog, offsetlog
from ckptfix.formats import metadata as metadata_format
from ckptfix.formats.offsetlog import file_source_log_offset
from ckptfix.repair.crc_edits import accept_edit, crc_rel, edited_logs, sidecar_proven
from ckptfix.repair.fixes import FixContext, fixes
from ckptfix.repair.rollback import state_deletions

# -- shared facts --------------------------------------------------------------------------


def _query_id(fc: FixContext) -> str | None:
    try:
        return fc.ckpt.query_metadata().id
    except (CkptfixError, OSError):
        return None


def _sink_latest(fc: FixContext) -> int | None:
    """The newest batch id the sink (file sink or Delta table, :mod:`ckptfix.sinks`) holds and would skip."""
    sink = fc.audit.sink
    return sink.last_batch(_query_id(fc)) if sink is not None else None


def _sink_words(fc: FixContext) -> str:
    sink = fc.audit.sink
    return "the sink" if sink is None else sink.describe(_query_id(fc))


def _unchecked_sink(batch: int) -> str:
    """What a plan that plans a committed batch id again cannot check without the sink (seen with Spark 4.3: a file
    sink that held the batch skipped the new one, its rows never arrived, and the next restart failed on the state
    version that batch never wrote)."""
    return (
        f"NOT CHECKED without --sink: batch {batch} was committed, so an exactly-once sink (a file sink, a Delta "
        f"table) most likely holds it and skips the batch planned again under id {batch}: the rows it reads now "
        "would be lost and its state never written (the next restart then fails to load it). Give the sink with "
        f"--sink OUT and ckptfix refuses when it holds batch {batch}; a sink that does not skip batch ids "
        "(foreach, Kafka, console) is not affected"
    )


def _no_replan(fc: FixContext, first: int, why: str) -> None:
    """Refuse when Spark would plan batch ids >= ``first`` anew that the file sink already holds."""
    S = _sink_latest(fc)
    if S is not None and first <= S:
        sink = fc.audit.sink
        advice = sink.replan_advice(first - 1, S, fc.ckpt.location.url) if sink is not None else ""
        raise CannotFix(
            f"{why}: Spark would plan batch {first} anew, but {_sink_words(fc)} already holds batches "
            f"up to {S}; the sink skips them and their new data is lost ({advice})"
        )


def _state_versions_from(fc: FixContext, version: int) -> list[str]:
    """State files of version >= ``version`` (state version v+1 is written by batch v)."""
    out: list[str] = []
    for op in fc.ckpt.state.operators.values():
        for stores in op.partitions.values():
            for store in stores.values():
                out += [rel for (_k, v, _u), rel in store.files.items() if v >= version]
    return sorted(out)


def _stateful(fc: FixContext) -> bool:
    if fc.audit.stateful is not None:
        return fc.audit.stateful
    return bool(fc.ckpt.state.operators)


def _roll_state_back(fc: FixContext, batch: int, rule: str, why: str) -> str | None:
    """Every planner that makes Spark run ``batch`` again (it deletes ``offsets/batch`` or ``commits/batch``, or a
    commit beyond a lost offset file) calls this: the batch must not meet a state version it or a later batch
    already wrote. The state versions > ``batch`` go, as a rollback to ``batch - 1`` would remove them
    (:func:`ckptfix.repair.rollback.state_deletions`), so Spark loads version ``batch`` and writes ``batch + 1``
    again; a stale ``batch + 1`` snapshot or zip would otherwise be preferred to the rewritten delta on a later
    load (silently wrong state). Returns the sentence for the plan's effects, or None when no such state exists
    (or the query is stateless)."""
    if not _stateful(fc):
        return None
    if fc.audit.stateful and not fc.ckpt.state.operators:
        raise CannotFix(f"{why}: the query is stateful but state/ is missing; fix the state first")
    found = _state_versions_from(fc, batch + 1)
    if not found:
        return None
    for rel, what in state_deletions(fc.ckpt, batch):
        if fc.builder.touches(rel):  # another planner of this plan deletes it already
            continue
        fc.builder.delete(rel, f"{why}: batch {batch} is planned again, so the state it wrote goes ({what})", rule)
    return (
        f"batch {batch} had already written state version {batch + 1}: those files go (as "
        f"`ckptfix rollback --to-batch {batch - 1}` would), Spark loads state version {batch} and writes version "
        f"{batch + 1} again"
    )


def _rerun_into_v2_sink(fc: FixContext, batch: int, why: str) -> str | None:
    """A plan that makes Spark re-run the committed ``batch`` with its recorded offsets: a sink that holds it (file
    sink, Delta) skips it, so its stateful operators report no state checkpoint info, which state checkpoint format v2
    does not survive on 4.x (``assertion failed: CheckpointInfo length: 0``, seen on 4.3: SINK-SKIP-STATE-V2). Refuse
    when the sink given holds the batch; without --sink, the sentence that says it is not checked (None: v1)."""
    if not (fc.ckpt.state_format_v2() and fc.audit.target.at_least(4, 0)):
        return None
    S = _sink_latest(fc)
    sink = fc.audit.sink
    if sink is not None and S is not None and batch <= S:
        raise CannotFix(
            f"{why}: Spark would re-run batch {batch}, but {_sink_words(fc)} already holds it: the sink skips it, its "
            "stateful operators report no state checkpoint info, and with state checkpoint format v2 Spark fails "
            f"(assertion failed: CheckpointInfo length: 0); {sink.replan_advice(batch - 1, S, fc.ckpt.location.url)}"
        )
    if sink is not None:
        return None
    return (
        f"NOT CHECKED without --sink: this checkpoint uses state checkpoint format v2, so if an exactly-once sink (a "
        f"file sink, a Delta table) holds batch {batch}, it skips the re-run and Spark fails (assertion failed: "
        f"CheckpointInfo length: 0). Give the sink with --sink OUT and ckptfix refuses when it holds batch {batch}; "
        "a sink that does not skip batch ids (foreach, Kafka, console) is not affected"
    )


def _is_state_pointer(data: bytes) -> bool:
    try:
        return bool(commitlog.parse(data).state_unique_ids)
    except FormatError:
        return b"stateUniqueIds" in data  # a damaged v2 commit: still treat it as one


def _readable_offset(fc: FixContext, batch: int) -> offsetlog.OffsetFile | None:
    if batch not in fc.ckpt.offsets.files:
        return None
    return fc.ckpt.try_offset(batch)


def _readable_commit(fc: FixContext, batch: int) -> commitlog.CommitFile | None:
    if batch not in fc.ckpt.commits.files:
        return None
    try:
        return fc.ckpt.commit(batch)
    except (FormatError, OSError):
        return None


def _source_files(fc: FixContext, source: str, lo: int, hi: int) -> int | None:
    """Entries with ``lo < batchId <= hi`` in the file source log ``sources/<source>``
    (compaction files hold every earlier entry); None if the log cannot tell."""
    log = fc.ckpt.sources.get(source)
    if log is None:
        return None
    total = 0
    for n in range(lo + 1, hi + 1):
        candidates = [n] if n in log.files else []
        candidates += sorted(c for c in log.compact if c >= n)
        for c in candidates:
            try:
                entries = fc.ckpt.source_log(source, c).entries
            except (FormatError, OSError):
                continue
            mine = [e for e in entries if e.get("batchId") == n]
            if mine:
                total += len(mine)
                break
        else:
            return None
    return total


def _replayed(fc: FixContext, start: int | None, end: int | None) -> str | None:
    """What file sources deliver between offsets/start and offsets/end (``end`` None: up to
    everything their logs hold, i.e. a batch planned anew). None when not derivable."""
    if start is None:
        return None
    first = _readable_offset(fc, start)
    if first is None:
        return None
    last = _readable_offset(fc, end) if end is not None else None
    parts: list[str] = []
    for i, so in enumerate(first.offsets):
        source = so.source_id if first.version == 2 else str(i)
        lo = file_source_log_offset(so.json)
        if lo is None:
            return None
        if last is not None:
            hi = file_source_log_offset(last.offsets[i].json) if i < len(last.offsets) else None
        else:
            log = fc.ckpt.sources.get(source)
            hi = log.latest if log is not None else None
        if hi is None:
            return None
        count = _source_files(fc, source, lo, hi)
        if count is None:
            return None
        parts.append(f"{count} input file(s) of sources/{source} (entries {lo + 1}..{hi})" if hi > lo else "")
    named = [p for p in parts if p]
    return ", ".join(named) if named else "no input file"


def _again(fc: FixContext, start: int | None, end: int | None, batch: int, before: str = "an earlier run") -> str:
    """The sentence on what a sink sees again when batch ``batch`` reads offsets/start -> end."""
    what = _replayed(fc, start, end)
    if what is None:
        return (
            f"batch {batch}'s input reaches the sink again: an append sink may see it twice "
            "(how many rows cannot be derived from the checkpoint for these sources)"
        )
    # planned anew (end None): Spark plans the batch up to what the sources hold at the restart, so it also takes
    # input that arrived since, one more file-source entry under maxFilesPerTrigger (damage hunt 7, F4)
    anew = (
        f"; planned anew, batch {batch} also takes the input that arrives before the restart (a file source lists "
        "new files on top, as many as maxFilesPerTrigger allows), so the batch boundaries after it shift"
        if end is None
        else ""
    )
    if what == "no input file":
        return f"batch {batch} reads no input file already read before: no sink sees rows twice{anew}"
    return (
        f"batch {batch} reads {what} that {before} already delivered: an append (at-least-once) sink "
        "may receive their rows twice; a sink idempotent by batch id rewrites batch "
        f"{batch}; a file sink skips batch ids it holds{anew}"
    )


# -- LOG-COMMIT-AHEAD (R4) ------------------------------------------------------------------


@fixes("LOG-COMMIT-AHEAD")
def commit_ahead(fc: FixContext, finding: Finding) -> list[str]:
    """Delete every commit file beyond the latest offset batch L (§6.3 condition 6).

    Spark then resumes exactly where the surviving logs say: at L+1 when commits/L exists
    (no batch re-runs), else re-running L with its recorded offsets. The alternative of
    deleting offsets back to the commits re-runs more and renumbers batches."""
    ck, rule = fc.ckpt, finding.rule_id
    L = ck.offsets.latest
    if L is None:
        raise CannotFix("the offset log is empty (LOG-COMMITS-WITHOUT-OFFSETS)")
    if L not in ck.offsets.files:
        raise CannotFix(f"the latest offset entry is not named offsets/{L}; fix LOG-NONCANONICAL-NAME first")
    ahead = [c for c in ck.commits.listed_ids if c > L]
    if not ahead:
        raise CannotFix(f"no commit file lies beyond the latest offset batch {L}")
    rels = [ck.commits.files.get(c) or ck.commits.noncanonical[c] for c in ahead]
    if all(fc.builder.touches(rel) for rel in rels):
        return []  # a damaged offsets/L's fix deletes them already (it plans batch L anew)
    for rel in rels:
        if _is_state_pointer(ck.read(rel)):
            raise CannotFix(
                f"{rel} carries stateUniqueIds (state checkpoint format v2): it points into state/, which repair does "
                f"not judge; roll back to batch {L} ({fc.audit.rollback_command(L)}), which deletes it with the "
                f"state it points to, or restore offsets/{L + 1} from a backup"
            )
    # commits at or below L are left alone: a gap K2 < L-1 is LOG-COMMIT-GAP's (or async tracking's) business
    K2 = max((c for c in ck.commits.listed_ids if c <= L), default=None)
    _no_replan(fc, L + 1, "deleting the commits beyond the latest offset")
    for c, rel in zip(ahead, rels, strict=True):
        lost = c == L + 1 and c not in ck.offsets.listed_ids
        why = f"commit of batch {c}, beyond the latest offset batch {L}" + (
            f" (no offsets/{c}: batch {c} will be planned anew)" if lost else ""
        )
        fc.builder.delete(rel, why, rule)
    # batch L+1 and later are planned anew: the state versions they wrote (> L+1) go
    rolled = _roll_state_back(fc, L + 1, rule, f"commits beyond the latest offset batch {L} are deleted")
    # batch L+1 ran and committed, then its offset file was lost: Spark plans a new batch under the same id, which
    # an exactly-once sink that holds the old one skips (the same case as a damaged offsets/L+1, LOG-UNREADABLE)
    # (its source entries outlive its offsets; a file-source log without an entry for it says it never ran)
    rerun = L + 1 in ahead and _replayed(fc, L, None) != "no input file"
    if K2 == L:
        effects = [
            f"Spark resumes at batch {L + 1} from the offsets of batch {L}"
            + ("" if rerun else "; no recorded batch re-runs")
        ]
    else:
        effects = [
            f"Spark re-runs batch {L} with its recorded offsets/{L} (as after a crash); " + _again(fc, L - 1, L, L)
        ]
    if rolled is not None:
        effects.append(rolled)
    if rerun:
        effects.append(
            f"batch {L + 1} ran before its offset file was lost and is planned anew: " + _again(fc, L, None, L + 1)
        )
    if rerun and fc.audit.sink is None:
        effects.append(_unchecked_sink(L + 1))
    return effects


# -- LOG-UNREADABLE (R5, R6), LOG-NO-BATCH-METADATA ------------------------------------------


def _drop_latest_offset(fc: FixContext, rule: str, why: str, replay: str | None = None) -> list[str]:
    """R5: delete offsets/L (and commits/L) so that Spark plans batch L again from offsets/L-1. ``replay``: what a
    sink sees again when the file-source log cannot tell (its entries of batch L are gone)."""
    ck = fc.ckpt
    L, K = ck.offsets.latest, ck.commits.latest
    assert L is not None
    if L == 0:
        raise CannotFix(
            f"{why}, and it is offsets/0: without it the query starts from scratch; restore it from a backup "
            "or start a new checkpoint"
        )
    if _readable_offset(fc, L - 1) is None and L - 1 not in ck.offsets.files:
        sparse = _back_to_committed(fc, rule, why)
        if sparse is not None:
            return sparse
    if _readable_offset(fc, L - 1) is None:
        raise CannotFix(
            f"{why}, and offsets/{L - 1}, where Spark would plan it from, is missing or unreadable: "
            "`ckptfix repair --strategy truncate` cuts the logs back to the newest batch whose predecessor exists "
            "(its data is processed again), or restore the file from a backup"
        )
    ahead = [c for c in ck.commits.listed_ids if c > L]
    if ahead:  # commits beyond batch L (LOG-COMMIT-AHEAD) go with it: Spark plans batch L and later anew
        rels = [ck.commits.files.get(c) or ck.commits.noncanonical[c] for c in ahead]
        if any(_is_state_pointer(ck.read(rel)) for rel in rels):
            raise CannotFix(
                f"{why}, and the commit log reaches {ahead[-1]} beyond it with state pointers (stateUniqueIds): "
                f"restore offsets/{L} from a backup, or roll back to batch {L - 1} "
                f"({fc.audit.rollback_command(L - 1)})"
            )
        for c, rel in zip(ahead, rels, strict=True):
            fc.builder.delete(rel, f"{why}: commit of batch {c}, beyond it; batch {c} is planned anew", rule)
        K = max((c for c in ck.commits.listed_ids if c <= L), default=None)
    if K is None or K < L - 1:
        raise CannotFix(f"{why}, and the latest commit is {K}: batches before {L} would be skipped")
    if K == L and _is_state_pointer(ck.read(ck.commits.path_of(L))):
        raise CannotFix(
            f"{why}, and commits/{L} is a state pointer (stateUniqueIds, state checkpoint format v2), which repair "
            f"does not judge: restore the damaged file from a backup, or roll back to batch {L - 1} "
            f"({fc.audit.rollback_command(L - 1)})"
        )
    _no_replan(fc, L, why)
    rolled = _roll_state_back(fc, L, rule, why)
    fc.builder.delete(ck.offsets.files[L], f"{why}: Spark plans batch {L} again from offsets/{L - 1}", rule)
    effects = [f"Spark plans batch {L} again from offsets/{L - 1}, up to what the sources hold now"]
    if rolled is not None:
        effects.append(rolled)
    if K == L:
        fc.builder.delete(
            ck.commits.files[L], f"batch {L} is planned again, so its commit must go (else it collides)", rule
        )
        effects.append(replay or _again(fc, L - 1, None, L))
        if fc.audit.sink is None:
            effects.append(_unchecked_sink(L))
    else:
        effects.append(
            f"batch {L} never committed; " + (replay or _again(fc, L - 1, None, L, "its interrupted run may have"))
        )
    return effects


def _back_to_committed(fc: FixContext, rule: str, why: str) -> list[str] | None:
    """A damaged latest offset file L whose predecessor was never written (asynchronous progress tracking writes
    the logs sparsely): go back to the newest earlier batch P that is readable and committed, as the async-gap fix
    does for a committed latest batch. Delete offsets/L and every commit above P, and write offsets/P-1 as a copy
    of offsets/P when it is missing. Spark then resumes at batch P+1 from the offsets of batch P and processes the
    data of batches P+1..L again, instead of everything after the last consecutive pair (--strategy truncate).
    None when that does not apply (a stateful query, no such P): the caller refuses as before."""
    ck = fc.ckpt
    L = ck.offsets.latest
    assert L is not None
    if _stateful(fc) or fc.strategy == "truncate":  # truncate: LOG-ASYNC-GAP's fix cuts the logs instead
        return None
    P = max((b for b in ck.offsets.files if b < L), default=None)
    if P is None or _readable_offset(fc, P) is None or P not in ck.commits.files or _readable_commit(fc, P) is None:
        return None
    if any(c > L for c in ck.commits.files):
        return None
    _no_replan(fc, P + 1, why)
    fc.builder.delete(ck.offsets.files[L], f"{why}: Spark resumes after batch {P}, the newest committed one", rule)
    for c in sorted(ck.commits.files):
        if c > P:
            fc.builder.delete(ck.commits.files[c], f"batch {c} comes after batch {P}: planned again", rule)
    if P > 0 and P - 1 not in ck.offsets.files:
        fc.builder.copy(
            ck.offsets.path_of(P - 1),
            ck.offsets.files[P],
            f"copy of offsets/{P}: batch {P} is committed (a restart reads offsets/{P - 1} too)",
            rule,
        )
    return [
        f"Spark resumes at batch {P + 1} from the offsets of batch {P}; no recorded batch before it is re-run",
        f"the data of batches {P + 1}..{L} is processed again: " + _again(fc, P, None, P + 1, "the lost batches"),
    ]


def _commit_as_written(fc: FixContext, batch: int) -> bytes | None:
    """commits/<batch> as Spark wrote it, when its ``.crc`` sidecar proves it: the file's own content written the
    way Spark writes it (an edit that changed only the formatting), or a v1 commit whose nextBatchWatermarkMs is
    one this checkpoint records for the batch (offsets/<batch>'s watermark, the commit before's, 0)."""
    ck = fc.ckpt
    rel = ck.commits.files.get(batch)
    if rel is None:
        return None
    candidates: list[bytes] = []
    with contextlib.suppress(FormatError, OSError):
        candidates.append(commitlog.dump(ck.commit(batch)))
    marks: list[int] = []
    off = _readable_offset(fc, batch)
    if off is not None and off.metadata is not None:
        marks.append(off.metadata.batch_watermark_ms)
    before = _readable_commit(fc, batch - 1) if batch > 0 else None
    if before is not None and before.next_batch_watermark_ms is not None:
        marks.append(before.next_batch_watermark_ms)
    marks.append(0)
    candidates += [commitlog.dump(commitlog.CommitFile(1, w)) for w in dict.fromkeys(marks)]
    return sidecar_proven(ck, rel, dict.fromkeys(candidates))


def _same_commit(fc: FixContext, batch: int, written: bytes) -> bool:
    try:
        return commitlog.dump(fc.ckpt.commit(batch)) == written
    except (FormatError, OSError):
        return False


def _keeps_state(fc: FixContext, batch: int) -> str | None:
    """The effect of re-running ``batch`` with its recorded offsets (its commit deleted) on the state it wrote:
    version batch+1 stays, as in Spark's own recovery from a crash before the commit. The re-run writes the same
    version from the same input; a file sink that holds the batch skips it, runs no operator, and the restart
    after it loads the version that stayed (deleting it made that restart fail: damage hunt 7, F3)."""
    if not _stateful(fc) or not _state_versions_from(fc, batch + 1):
        return None
    text = (
        f"state version {batch + 1}, which batch {batch} wrote, stays: the re-run writes it again from the same "
        "input, or, where a file sink skips the batch, the next batch loads it as it is"
    )
    off = _readable_offset(fc, batch)
    mark = off.metadata.batch_watermark_ms if off is not None and off.metadata is not None else 0
    # a skipped batch feeds no event time to the watermark (tests/repair/test_edited_commit_file_sink_live.py)
    if mark:
        text += (
            f"; a skipped re-run observes no event time, so batch {batch + 1} runs with batch {batch}'s watermark "
            f"({mark} ms): what that watermark would have closed then (a window, a state entry) closes one batch "
            "later, nothing is lost or written twice"
        )
    return text


def _commit_v1(fc: FixContext, batch: int, watermark: int, rule: str, why: str) -> None:
    """Rewrite commits/<batch> as ``v1\\n{"nextBatchWatermarkMs":W}`` (refused for state pointers)."""
    ck = fc.ckpt
    prev = max((c for c in ck.commits.files if c < batch), default=None)
    older = _readable_commit(fc, prev) if prev is not None else None
    if older is not None and (older.version != 1 or older.state_unique_ids):
        raise CannotFix(
            f"commits/{prev} is v{older.version}{' with stateUniqueIds' if older.state_unique_ids else ''}: this "
            f"checkpoint writes state pointers into its commits, so a v1 commits/{batch} would lose them"
        )
    content = commitlog.dump(commitlog.CommitFile(1, watermark))
    fc.builder.write(ck.commits.files[batch], content, why, rule)


def _damaged_commit(fc: FixContext, rule: str, why: str) -> list[str]:
    """R6: the latest commit file K is damaged."""
    ck = fc.ckpt
    L, K = ck.offsets.latest, ck.commits.latest
    assert K is not None
    if L is None or _readable_offset(fc, L) is None:
        raise CannotFix(f"{why}, and the latest offset file is missing or unreadable; fix that first")
    if K == L:
        if L > 0 and _readable_offset(fc, L - 1) is None:
            raise CannotFix(f"{why}, and offsets/{L - 1} (the start of batch {L}) is missing or unreadable")
        lost = _lost_source_entries(fc, "restore them from a backup")
        if lost:  # batch L cannot re-run, nor resume after it (the restart reads its entries): plan it again
            return _replan_lost_batch(fc, rule, lost)
        written = _commit_as_written(fc, K) if fc.strategy != "truncate" else None
        if written is not None:
            fc.builder.write(
                ck.commits.files[K], written, f"{why}: the bytes Spark wrote, which commits/.{K}.crc checks", rule
            )
            return [
                f"Spark resumes at batch {L + 1}; no batch re-runs (commits/{K} holds again the bytes Spark wrote: "
                "its .crc sidecar matches them)"
            ]
        off = _readable_offset(fc, L)
        assert off is not None
        prev_commit = _readable_commit(fc, L - 1) if L > 0 else None
        no_watermark = (
            off.metadata is not None
            and off.metadata.batch_watermark_ms == 0
            and (prev_commit is None or prev_commit.next_batch_watermark_ms == 0)
            and not _stateful(fc)
        )
        if fc.strategy != "truncate" and no_watermark:
            _commit_v1(fc, K, 0, rule, f"{why}: batch {L} completed (its commit was being written)")
            return [
                f"Spark resumes at batch {L + 1}; no batch re-runs (the query has no event-time watermark: "
                f"offsets/{L} and commits/{L - 1} record 0, so commits/{L} says nextBatchWatermarkMs 0)"
            ]
        unchecked = _rerun_into_v2_sink(fc, L, why)
        fc.builder.delete(ck.commits.files[K], f"{why}: batch {L} re-runs with its recorded offsets", rule)
        rolled = _keeps_state(fc, L)
        return [
            f"Spark re-runs batch {L} with its recorded offsets (offsets/{L - 1} -> offsets/{L}), as after a crash "
            "before the commit; a file sink skips it (it holds the batch already); " + _again(fc, L - 1, L, L),
            *([rolled] if rolled is not None else []),
            *([unchecked] if unchecked is not None else []),
        ]
    if K == L - 1:
        off = _readable_offset(fc, L)
        assert off is not None
        if off.metadata is None:
            raise CannotFix(f"{why}, and offsets/{L} has no metadata to take batch {L}'s watermark from")
        W = off.metadata.batch_watermark_ms
        _commit_v1(fc, K, W, rule, f"{why}: batch {K} completed; its next-batch watermark is batch {L}'s ({W})")
        return [
            f"commits/{K} says nextBatchWatermarkMs {W}, the watermark offsets/{L} recorded for batch {L} "
            f"(Spark takes batch {L}'s watermark from the tracker after batch {K} committed)",
            f"Spark re-runs batch {L} from offsets/{L - 1} to offsets/{L}, as after any crash mid-batch; "
            + _again(fc, L - 1, L, L),
        ]
    raise CannotFix(
        f"{why}, and the latest offset batch is {L}: deleting it would leave batches without commits; restore it"
    )


def _damaged(fc: FixContext) -> list[tuple[str, int]]:
    """The latest offset/commit files (and the offset file before the latest) that do not parse. A version header
    above every one a Spark release writes (the parser's UnsupportedVersion) counts: the audit reports it as
    damage (LOG-UNREADABLE), unlike a version the target Spark is merely too old for (LOG-VERSION-TOO-NEW)."""
    ck = fc.ckpt
    L, K = ck.offsets.latest, ck.commits.latest
    out: list[tuple[str, int]] = []
    for b in (L, None if L is None else L - 1):
        if b is not None and b >= 0 and b in ck.offsets.files:
            try:
                ck.offset(b)
            except FormatError:
                out.append(("offsets", b))
    if K is not None and K in ck.commits.files:
        try:
            ck.commit(K)
        except FormatError:
            out.append(("commits", K))
    return out


@fixes("LOG-UNREADABLE")
def unreadable(fc: FixContext, finding: Finding) -> list[str]:
    ck, rule = fc.ckpt, finding.rule_id
    damaged = _damaged(fc)
    if not damaged:
        raise CannotFix("no damaged latest offset or commit file found (the checkpoint changed?)")
    L = ck.offsets.latest
    if sorted(damaged) == [("commits", L), ("offsets", L)]:
        # both files of batch L: planning batch L again from offsets/L-1 drops both (R5)
        return _drop_latest_offset(fc, rule, f"offsets/{L} and commits/{L} are damaged")
    if len(damaged) > 1:
        raise CannotFix(
            "several log files restart reads are damaged ("
            + ", ".join(f"{log}/{b}" for log, b in damaged)
            + "): restore them from a backup"
        )
    log, b = damaged[0]
    if log == "commits":
        return _damaged_commit(fc, rule, f"commits/{b} is damaged")
    assert L is not None  # offsets/b is listed
    if b == L:
        return _drop_latest_offset(fc, rule, f"offsets/{b} is damaged")
    # offsets/L-1: only the start of batch L; useless once L is committed
    if ck.commits.latest == L:
        fc.builder.copy(
            ck.offsets.files[b],
            ck.offsets.files[L],
            f"offsets/{b} is damaged; batch {L} is committed, so its predecessor is only read as a start",
            rule,
        )
        return [f"Spark resumes at batch {L + 1} from the offsets of batch {L}; no batch re-runs"]
    raise CannotFix(
        f"offsets/{b} is damaged and batch {L} is not committed: it is the start of batch {L}'s range; restore it"
    )


# -- SRC-LOG-MISSING ---------------------------------------------------------------------------


def _lost_source_entries(fc: FixContext, advice: str) -> list[str]:
    """The file-source log entries of the latest batch L (``sources/<k>/`` start+1..end) that are gone, when the
    logs hold nothing after them (named ``sources/<k>/<ids>``; [] when none is gone). Raises :class:`CannotFix`
    (ending with ``advice``) when more is gone: an entry the restart restores the source's file list from (the
    latest compaction on, up to start), a later entry, or the whole log."""
    from ckptfix.audit.rules_sources import present
    from ckptfix.formats.compactlog import derive_compact_interval

    ck = fc.ckpt
    L = ck.offsets.latest
    cur = _readable_offset(fc, L) if L is not None else None
    if L is None or cur is None:
        return []
    prev = _readable_offset(fc, L - 1) if L > 0 else None
    lost: list[str] = []
    for i, so in enumerate(cur.offsets):
        source = so.source_id if cur.version == 2 else str(i)
        end = file_source_log_offset(so.json)
        if end is None:
            continue
        log = ck.sources.get(source)
        if log is None:
            raise CannotFix(f"sources/{source}/ is gone as a whole: {advice}")
        start = -1
        if prev is not None:
            p = next((o for o in prev.offsets if o.source_id == so.source_id), None) if prev.version == 2 else None
            before = p.json if p is not None else (prev.offsets[i].json if i < len(prev.offsets) else None)
            found = file_source_log_offset(before)
            start = found if found is not None else -1
        interval = derive_compact_interval(sorted(log.compact))
        if all(present(log, b, interval) for b in range(start + 1, end + 1)):
            continue
        missing = min(b for b in range(start + 1, end + 1) if not present(log, b, interval))
        # entries after the first missing one: the lost ones are not the log's tail (an entry batch L read before
        # them is no obstacle: the re-planned batch reads it again; hunt 14, offset_source_moved_forward)
        later = [b for b in log.listed_ids if b > missing]
        first = max(0, (start + 1) // interval * interval - 1)
        gone = [b for b in range(first, start + 1) if not present(log, b, interval)]
        if later or gone or prev is None:
            what = (
                f"sources/{source}/{later[0]} exists"
                if later
                else f"sources/{source}/{gone[0]} is missing too"
                if gone
                else f"offsets/{L - 1}, where Spark would plan batch {L} from, is missing or unreadable"
            )
            raise CannotFix(f"{what}: not only batch {L}'s entries are gone; {advice}")
        lost.append(f"sources/{source}/{missing}..{end}" if end > missing else f"sources/{source}/{end}")
    return lost


def _replan_lost_batch(fc: FixContext, rule: str, lost: list[str]) -> list[str]:
    """Delete offsets/L (and commits/L) so that Spark plans batch L, whose file-source entries ``lost`` are gone,
    again from offsets/L-1; the source lists the lost entries' files again (seen with Spark 4.3)."""
    L = fc.ckpt.offsets.latest
    why = f"the file-source log entries of batch {L} are missing ({', '.join(lost)})"
    replay = (
        f"the input files that {', '.join(lost)} listed are no longer known as read: batch {L} reads them again (how "
        "many rows cannot be derived: their entries are gone); an append (at-least-once) sink may receive rows of "
        f"the earlier batch {L} twice; a sink idempotent by batch id rewrites batch {L}"
    )
    return _drop_latest_offset(fc, rule, why, replay)


@fixes("SRC-LOG-MISSING")
def source_entries_missing(fc: FixContext, finding: Finding) -> list[str]:
    """The file-source log entries the latest batch L read are gone, and the log holds nothing after them: Spark
    writes those entries while it plans batch L, so without them it is as if batch L had never been planned. Delete
    offsets/L (and commits/L) as for a damaged offsets/L (R5): Spark plans batch L again from offsets/L-1, and the
    source, which no longer knows the lost entries' files as read, lists them again."""
    ck = fc.ckpt
    L = ck.offsets.latest
    if L is not None and L in ck.offsets.files and fc.builder.touches(ck.offsets.files[L]):
        if not any(a.path == ck.offsets.files[L] and a.op == "delete" for a in fc.builder.actions):
            raise CannotFix(f"another fix rewrites offsets/{L}; {finding.fix}")
        return []  # another fix (a damaged commit or offset file) plans batch L again already
    lost = _lost_source_entries(fc, finding.fix)
    if not lost:
        raise CannotFix(f"the missing entries are not the latest batch's: {finding.fix}")
    return _replan_lost_batch(fc, finding.rule_id, lost)


@fixes("SRC-OFFSET-UNREADABLE", "SRC-OFFSET-BACKWARDS")
def source_offset_unusable(fc: FixContext, finding: Finding) -> list[str]:
    """The latest offset file records a source offset Spark cannot use (a quoted number, an offset below the one
    before): Spark never writes one, so the file was edited or damaged. As for a damaged offsets/L (R5): delete it
    (and commits/L) and Spark plans batch L again from offsets/L-1 (repair hunt 13: no planner, though the
    LOG-UNREADABLE one applies). An earlier offset file is the start of a committed range: not judged here."""
    ck = fc.ckpt
    L = ck.offsets.latest
    if L is None or L not in ck.offsets.files or finding.evidence[0].path != ck.display(ck.offsets.files[L]):
        raise CannotFix(f"the offset file is not the latest: {finding.fix}")
    if fc.builder.touches(ck.offsets.files[L]):
        if not any(a.path == ck.offsets.files[L] and a.op == "delete" for a in fc.builder.actions):
            raise CannotFix(f"another fix rewrites offsets/{L}; {finding.fix}")
        return []  # another fix plans batch L again already
    return _drop_latest_offset(fc, finding.rule_id, f"offsets/{L} records an offset Spark cannot use")


@fixes("LOG-VERSION-TOO-NEW", "STATE-V2-IDS-MISSING")
def relabelled_commit(fc: FixContext, finding: Finding) -> list[str]:
    """The latest commit of a format-v2 checkpoint whose first line says v1 while it holds the stateUniqueIds only a
    v2 commit has (an edit): Spark 4.0/4.1 refuse the version, 4.2+ read no ids from it and load the state the v1
    way. Its first line goes back to v2; nothing else changes (repair hunt 13, on 4.0.5: set by hand, the query
    restarted exactly once)."""
    ck = fc.ckpt
    K = ck.commits.latest
    if K is None or K not in ck.commits.files or not ck.state_format_v2():
        raise CannotFix(finding.fix)
    rel = ck.commits.files[K]
    if not finding.evidence or finding.evidence[0].path != ck.display(rel):
        raise CannotFix(finding.fix)  # another log's version (LOG-VERSION-TOO-NEW of offsets/L), or another commit
    entry = _readable_commit(fc, K)
    if entry is None or entry.version != 1 or not entry.state_unique_ids:
        raise CannotFix(finding.fix)
    if fc.builder.touches(rel):
        return []  # the other rule's finding planned it
    data = ck.read(rel)
    fc.builder.write(
        rel, b"v2" + data[data.index(b"\n") :], "its first line back to v2: it holds a v2 commit's ids", finding.rule_id
    )
    return [
        f"Spark reads commits/{K} as the v2 commit it is: state version {K + 1} loads from the files its ids name; "
        "no batch re-runs"
    ]


@fixes("LOG-NO-BATCH-METADATA")
def no_batch_metadata(fc: FixContext, finding: Finding) -> list[str]:
    """Rebuild offsets/L's metadata line: conf from offsets/L-1 (it must not change across
    batches), watermark from commits/L-1 (the watermark batch L ran with), timestamp of L-1."""
    ck, rule = fc.ckpt, finding.rule_id
    L, K = ck.offsets.latest, ck.commits.latest
    if L is None or L == 0:
        raise CannotFix("offsets/0 has no earlier batch to take its metadata from; restore it")
    cur = _readable_offset(fc, L)
    prev = _readable_offset(fc, L - 1)
    if cur is None or prev is None or prev.metadata is None:
        raise CannotFix(f"offsets/{L - 1} is missing or has no metadata to rebuild offsets/{L}'s from")
    if K not in (L - 1, L):
        raise CannotFix(f"the latest commit is {K}, not {L - 1} or {L}: fix the commit log first")
    commit = _readable_commit(fc, L - 1)
    if commit is None:
        raise CannotFix(f"commits/{L - 1} is missing or unreadable: batch {L}'s watermark is unknown")
    meta = replace(prev.metadata, batch_watermark_ms=commit.next_batch_watermark_ms)
    content = offsetlog.dump(replace(cur, metadata=meta))
    fc.builder.write(
        ck.offsets.files[L],
        content,
        f"metadata line rebuilt: conf of offsets/{L - 1}, watermark {meta.batch_watermark_ms} from "
        f"commits/{L - 1}, timestamp of batch {L - 1}",
        rule,
    )
    after = (
        f"Spark resumes at batch {L + 1}; no batch re-runs"
        if K == L
        else f"Spark re-runs batch {L} with its recorded offsets, as after a crash mid-batch; "
        + _again(fc, L - 1, L, L)
    )
    return [
        after,
        f"batch {L}'s processing timestamp becomes batch {L - 1}'s ({meta.batch_timestamp_ms}); it only matters "
        "to current_timestamp() and processing-time timeouts in a re-run",
    ]


@fixes(FORMAT_NOT_RECORDED.id, FORMAT_CHANGED.id)
def restore_format_keys(fc: FixContext, finding: Finding) -> list[str]:
    """Write the state format version(s) the state was written in (as older offset files or the stored schema
    show) into offsets/L: Spark takes them from there on restart (a session conf cannot set them: a key the file
    lacks gets the legacy default)."""
    ck = fc.ckpt
    conflicts = format_conflicts(fc.audit)
    L = ck.offsets.latest
    cur = None if L is None else _readable_offset(fc, L)
    if not conflicts or L is None or cur is None or cur.metadata is None:
        raise CannotFix(f"offsets/{L} records the state format versions the state was written in")
    rel = ck.offsets.files[L]
    if fc.builder.touches(rel):
        if any(a.path == rel and a.op == "delete" for a in fc.builder.actions):
            return []  # batch L is planned again from offsets/L-1, whose conf records the version
        if any(a.path == rel and a.rule in (FORMAT_NOT_RECORDED.id, FORMAT_CHANGED.id) for a in fc.builder.actions):
            return []  # planned for the other rule: one rewrite sets every key
        raise CannotFix(f"another fix rewrites offsets/{L}; apply it and run repair again")
    conf = dict(cur.metadata.conf)
    conf.update({key: c.written for key, c in conflicts.items()})
    fc.builder.write(
        rel,
        offsetlog.dump(replace(cur, metadata=replace(cur.metadata, conf=conf))),
        "conf " + ", ".join(f"{key}={c.written} (as {c.where} shows)" for key, c in conflicts.items()),
        finding.rule_id,
    )
    return [
        "Spark restarts with the state format the state was written in ("
        + ", ".join(f"{key}={c.written}" for key, c in conflicts.items())
        + "); no batch re-runs because of this change"
    ]


@fixes("CONF-SHUFFLE-PARTITIONS-EDITED")
def restore_shuffle_partitions(fc: FixContext, finding: Finding) -> list[str]:
    """Write the state's partition count (the previous offset file's) back into offsets/L: the edit is undone and
    no batch re-runs (new-user trial 3: the audit blamed healthy state directories)."""
    from ckptfix.audit.rules_state import SHUFFLE, shuffle_edit

    edit = shuffle_edit(fc.audit)
    if edit is None:
        raise CannotFix("the latest offset file records the state's shuffle partitions (the checkpoint changed?)")
    done = _write_conf_back(
        fc,
        finding,
        edit.batch,
        SHUFFLE,
        str(edit.state),
        f"as offsets/{edit.batch - 1} and the state's {edit.state} partitions show (it read {edit.edited})",
    )
    return (
        [f"Spark restarts with the state's {edit.state} partitions; no batch re-runs because of this change"]
        if done
        else []
    )


def _write_conf_back(fc: FixContext, finding: Finding, batch: int, key: str, value: str, why: str) -> bool:
    """Rewrite offsets/<batch> with conf ``key`` = ``value`` (an edit undone). False when another fix of the plan
    deletes that file (batch L is then planned again from offsets/L-1, which records the value)."""
    cur = _readable_offset(fc, batch)
    if cur is None or cur.metadata is None:
        raise CannotFix(f"offsets/{batch} cannot be read with its metadata (the checkpoint changed?)")
    rel = fc.ckpt.offsets.files[batch]
    if fc.builder.touches(rel):
        if any(a.path == rel and a.op == "delete" for a in fc.builder.actions):
            return False
        raise CannotFix(f"another fix rewrites offsets/{batch}; apply it and run repair again")
    conf = {**cur.metadata.conf, key: value}
    meta = replace(cur.metadata, conf=conf)
    fc.builder.write(rel, offsetlog.dump(replace(cur, metadata=meta)), f"conf {key}={value}, {why}", finding.rule_id)
    return True


@fixes("CONF-PROVIDER-EDITED")
def restore_provider(fc: FixContext, finding: Finding) -> list[str]:
    """Write the state's provider (the previous offset file's) back into offsets/L: the edit is undone and no batch
    re-runs (hunt 13: the audit said the state was lost)."""
    from ckptfix.audit.rules_state import provider_edit
    from ckptfix.stores.provider import PROVIDER_CONF

    edit = provider_edit(fc.audit)
    if edit is None:
        raise CannotFix("the latest offset file records the state's provider (the checkpoint changed?)")
    why = f"as offsets/{edit.batch - 1} and the state files show (it read {edit.edited})"
    if not _write_conf_back(fc, finding, edit.batch, PROVIDER_CONF, edit.state, why):
        return []
    return ["Spark loads the state with the provider that wrote it; no batch re-runs because of this change"]


# -- META-MISSING / META-UNREADABLE (R7) -----------------------------------------------------


def _ids_in_backups(fc: FixContext) -> dict[str, list[str]]:
    """Query ids ckptfix recorded: each run's plan, and backed-up ``metadata`` files."""
    from ckptfix.repair.engine import Runs, default_backup_url
    from ckptfix.storage import Location

    url = fc.options.get("backup_dir") or default_backup_url(fc.ckpt.location.url)
    found: dict[str, list[str]] = {}
    try:
        runs = Runs(Location(url, fc.ckpt.location.storage_options))
        run_ids = runs.run_ids()
    except (CkptfixError, OSError):
        return found
    for run_id in run_ids:
        try:
            plan = runs.plan_of(run_id)
        except (CkptfixError, OSError):
            continue
        if plan.query_id:
            found.setdefault(plan.query_id, []).append(f"{url}/runs/{run_id}/plan.json")
        for a in plan.actions:
            if a.path == layout.METADATA and a.before.exists:
                try:
                    meta = metadata_format.parse(runs.load_object(a.before))
                except (CkptfixError, OSError):
                    continue
                found.setdefault(meta.id, []).append(f"{url}/objects/{a.before.sha256}")
    return {qid: where for qid, where in found.items() if _uuid(qid) == qid}


def _uuid(text: str) -> str | None:
    try:
        return str(uuid.UUID(text))
    except (ValueError, AttributeError, TypeError):
        return None


@fixes("META-MISSING", "META-UNREADABLE")
def restore_metadata(fc: FixContext, finding: Finding) -> list[str]:
    t = fc.audit.target
    given = fc.options.get("query_id")
    known = _ids_in_backups(fc)
    notes: list[str] = []
    if given is not None:
        qid = metadata_format.parse_query_id(given)  # plan_repair checked it: the canonical form
        source = "--query-id"
        others = sorted(set(known) - {qid})
        if others:
            notes.append(f"ckptfix's own records name another id ({', '.join(others)}); --query-id wins")
    elif len(known) == 1:
        qid, where = next(iter(known.items()))
        source = f"ckptfix's records ({where[0]})"
    elif known:
        raise CannotFix(
            "ckptfix's records name several query ids (" + ", ".join(sorted(known)) + "): pass the right one "
            "with --query-id"
        )
    else:
        if finding.rule_id == "META-UNREADABLE":  # the file is there: Spark fails parsing it (the audit says how)
            consequence = f"the file stays unreadable and Spark {t.label} fails on it; deleted,"
            consequence += (
                " Spark refuses to start (STREAMING_CHECKPOINT_MISSING_METADATA_FILE)"
                if t.refuses_missing_metadata
                else " Spark silently starts the query under a NEW id"
            )
            lead = "With no id"
        else:
            consequence = (
                f"Spark {t.label} refuses to start (STREAMING_CHECKPOINT_MISSING_METADATA_FILE)"
                if t.refuses_missing_metadata
                else f"Spark {t.label} silently starts the query under a NEW id"
            )
            lead = "Without the file"
        raise CannotFix(
            "the query id is unknown: pass --query-id <uuid> (the driver log's 'Query [id = ...]', the Spark UI, "
            f"or StreamingQueryListener events name it). {lead} {consequence}; a new id breaks "
            "exactly-once sinks that key on it (e.g. Delta's idempotent writes by query id, foreachBatch "
            "deduplication by (queryId, batchId)): they take the next batches for new ones and write them again"
        )
    fc.builder.write(
        layout.METADATA,
        metadata_format.dump(metadata_format.StreamMetadata(qid)),
        f"query id {qid} from {source}",
        finding.rule_id,
    )
    return [f"Spark restarts the query under its id {qid} (from {source}); no batch re-runs", *notes]


# -- LOG-CRC-MISMATCH --------------------------------------------------------------------------


@fixes("LOG-CRC-MISMATCH")
def crc_mismatch(fc: FixContext, finding: Finding) -> list[str]:
    """Never accept an edited file silently: let Spark re-create it where that is safe, or,
    only with --accept-edits, regenerate the sidecar. The engine backs up every original
    (the edited bytes included) before touching anything."""
    ck, rule = fc.ckpt, finding.rule_id
    planned = {a.path for a in fc.builder.actions}
    found = edited_logs(ck)
    if not found:
        raise CannotFix("no file of the restart tail differs from its .crc (the checkpoint changed?)")
    # a file another fix already rewrites or deletes gets its sidecar from the builder
    edited = [(rel, crc) for rel, crc in found if rel not in planned]
    if not edited:
        return []
    L, K = ck.offsets.latest, ck.commits.latest
    effects: list[str] = []
    if fc.options.get("accept_edits"):
        next_batch = fc.audit.next_batch
        for rel, crc in edited:
            accept_edit(fc.builder, ck, rel, crc, rule)
            effects.append(
                f"Spark uses the edited {rel} as if it had written it; ckptfix cannot tell whether the edit is right: "
                + (
                    f"batch {next_batch} starts from the edited offsets (an offset moved back re-reads "
                    "data: duplicates; moved forward skips data: loss)"
                    if rel == ck.offsets.files.get(L if L is not None else -1)
                    else "whatever the edit changed, Spark now relies on it"
                )
            )
        return effects
    paths = {rel for rel, _ in edited}
    off_L = ck.offsets.files.get(L) if L is not None else None
    com_K = ck.commits.files.get(K) if K is not None else None
    if off_L in paths:
        try:
            effects += _drop_latest_offset(fc, rule, f"offsets/{L} was edited after Spark wrote it")
        except CannotFix as exc:
            # repair hunt 10 (W12, S07 on 4.3.0): a sidecar copied from another file, or a formatting-only edit;
            # --accept-edits restarted exactly, and neither the audit nor the refusal named it
            raise CannotFix(
                f"{exc}; or, if offsets/{L} holds what it should (only its .crc sidecar wrong, or the edit intended), "
                f"keep it: `ckptfix repair {shlex.quote(ck.location.url)} --accept-edits` regenerates the sidecar"
            ) from None
        effects.append(f"the edited offsets/{L} stays in the backup; --accept-edits keeps it instead")
        paths.discard(off_L)
        if K == L:
            paths.discard(com_K)
    written = _commit_as_written(fc, K) if com_K in paths and K is not None else None
    if written is not None and com_K is not None and K is not None:
        fc.builder.write(
            com_K,
            written,
            f"commits/{K} was edited after Spark wrote it: the bytes Spark wrote, which its .crc checks",
            rule,
        )
        effects.append(
            f"commits/{K} holds again the bytes Spark wrote (its .crc sidecar matches them; the edit "
            f"{'changed only their formatting' if _same_commit(fc, K, written) else 'is undone'}): nothing re-runs"
        )
        paths.discard(com_K)
    if com_K in paths and K == L and L is not None:
        unchecked = _rerun_into_v2_sink(fc, L, f"commits/{K} was edited after Spark wrote it")
        fc.builder.delete(com_K, f"commits/{K} was edited after Spark wrote it: batch {L} re-runs", rule)
        rolled = _keeps_state(fc, L)
        effects.append(
            f"Spark re-runs batch {L} with its recorded offsets, as after a crash before the commit; a file sink "
            "skips it; " + _again(fc, L - 1, L, L)
            if L
            else f"Spark re-runs batch {L}"
        )
        if rolled is not None:
            effects.append(rolled)
        if unchecked is not None:
            effects.append(unchecked)
        paths.discard(com_K)
    if paths:
        rest = ", ".join(sorted(paths))
        raise CannotFix(
            f"{rest} was edited after Spark wrote it and Spark cannot re-create it safely: restore the original "
            "(a backup), or keep the edit with --accept-edits (Spark then relies on it)"
        )
    return effects


# -- LOG-NONCANONICAL-NAME (R8) ----------------------------------------------------------------


@fixes("LOG-NONCANONICAL-NAME")
def noncanonical_name(fc: FixContext, finding: Finding) -> list[str]:
    """Rename ``0007`` to ``7`` (write the canonical file, delete the other), when ``7`` does
    not exist and the content parses. The sidecar moves along, byte for byte."""
    ck, rule = fc.ckpt, finding.rule_id
    effects: list[str] = []
    for log, parser in ((ck.offsets, offsetlog.parse), (ck.commits, commitlog.parse)):
        for b, rel in sorted(log.noncanonical.items()):
            latest = b == log.latest
            canonical = f"{log.rel}/{layout.batch_file_name(b)}"
            if b in log.files or canonical in ck.entries:
                if latest:
                    raise CannotFix(f"{rel} and {canonical} both exist: which one is batch {b} is unclear")
                continue
            data = ck.read(rel)
            try:
                parser(data, ck.display(rel))
            except FormatError as exc:
                if latest:
                    raise CannotFix(f"{rel} cannot be read ({exc.found}): renaming it would not help") from None
                continue
            fc.builder.write(canonical, data, f"canonical name of {rel}", rule)
            old_crc = crc_rel(rel)
            if old_crc in ck.entries:
                fc.builder.write(crc_rel(canonical), ck.read(old_crc), f"sidecar of {rel}, moved along", rule)
            fc.builder.delete(rel, f"renamed to {canonical}", rule)
            effects.append(f"Spark opens {canonical} for batch {b}, as it reads the listing; nothing re-runs")
    if not effects:
        raise CannotFix("no non-canonical log file name can be renamed")
    return effects


# -- LOG-ASYNC-GAP ----------------------------------------------------------------------------
def _truncate_to_consecutive(fc: FixContext, rule: str) -> list[str]:
    """Conservative: drop offsets and commits after the newest batch b whose predecessor exists."""
    ck = fc.ckpt
    O = sorted(ck.offsets.files)
    b = next((x for x in reversed(O) if x == 0 or x - 1 in ck.offsets.files), None)
    if b is None:
        raise CannotFix("no offset file has its predecessor: nothing consecutive to truncate to")
    S = _sink_latest(fc)
    if S is not None and b < S:
        raise CannotFix(
            f"{_sink_words(fc)} holds batches up to {S}; truncating to {b} makes Spark re-plan batches {b + 1}..{S} "
            "with new data and the sink would skip them (data loss)"
        )
    L = ck.offsets.latest
    for log in (ck.offsets, ck.commits):
        for x in sorted(log.files):
            if x > b:
                fc.builder.delete(log.files[x], f"truncate the logs to batch {b}", rule)
    K2 = max((c for c in ck.commits.files if c <= b), default=None)
    rerun = f"batch {b} is re-run from offsets/{b - 1}" if b != K2 else f"Spark resumes at batch {b + 1}"
    return [
        f"{rerun}; everything after it (batches {b + 1}..{L}) is processed again under new batch ids",
        "a sink idempotent by batch id (foreachBatch keyed on batchId) can receive the same data twice under "
        "different ids; an append sink sees it twice",
    ]


@fixes("LOG-ASYNC-GAP")
def async_gap(fc: FixContext, finding: Finding) -> list[str]:
    """Write offsets/L-1 so that a synchronous restart does what the async restart would
    (spark-logs-and-restart.md §7.5, verified on 3.5.9 and 4.3.0)."""
    ck, rule = fc.ckpt, finding.rule_id
    L0, K0 = ck.offsets.latest, ck.commits.latest
    stateful_committed = L0 is not None and K0 is not None and K0 >= L0
    if ck.state.operators and (not stateful_committed or fc.strategy == "truncate"):
        raise CannotFix(stateful_gap_fix(fc.audit))
    if fc.strategy == "truncate":
        return _truncate_to_consecutive(fc, rule)
    L, K = ck.offsets.latest, ck.commits.latest
    assert L is not None and L > 0
    try:
        ck.offset(L)
    except FormatError as exc:
        raise CannotFix(
            f"offsets/{L} itself is unreadable ({exc.found}): `ckptfix repair --strategy truncate` cuts the logs back "
            "to the newest batch whose predecessor exists, or restore it from a backup"
        ) from None
    target = f"offsets/{L - 1}"
    if K is not None and K >= L:
        fc.builder.copy(target, ck.offsets.files[L], f"copy of offsets/{L}: batch {L} is committed", rule)
        if ck.state.operators:
            # batch L committed: the restart runs batch L+1 on state version L+1 and reads offsets/L-1 only to find
            # it there; the batches of the gap ran, their effects are in the state (repair hunt 10, A11: offsets and
            # commits of two batches deleted by hand; restarted on 4.3.0 with the rows of an undamaged run)
            return [f"Spark resumes at batch {L + 1} from the offsets of batch {L} and state version {L + 1}"]
        return [
            f"Spark resumes at batch {L + 1} from the offsets of batch {L}; no recorded batch re-runs",
            # batches after L ran in memory before the stop, their offsets never persisted
            _again(fc, L, None, L + 1, "the asynchronous run"),
        ]
    P = max((b for b in ck.offsets.files if b < L), default=None)
    if P is None:
        raise CannotFix(
            f"offsets/{L} is the only offset file: the async restart would replay from each source's initial offset; "
            "use --strategy truncate, or start a new checkpoint from exported offsets (`ckptfix offsets export`)"
        )
    try:
        ck.offset(P)
    except FormatError as exc:
        raise CannotFix(f"offsets/{P} is unreadable ({exc.found}); restore it first") from None
    S = _sink_latest(fc)
    if S is not None and S >= L:
        raise CannotFix(
            f"{_sink_words(fc)} already holds batch {S} >= {L}: re-running batch {L} over a wider range would be "
            "skipped by the sink (data loss); use --strategy truncate only after moving the sink's output"
        )
    fc.builder.copy(target, ck.offsets.files[P], f"copy of offsets/{P}, the newest earlier offset file", rule)
    return [
        f"Spark re-runs batch {L} over the range offsets/{P} -> offsets/{L}: the batches {P + 1}..{L} that "
        "asynchronous progress tracking had not persisted are processed again as one batch "
        "(at-least-once, as after an async restart)",
        _again(fc, P, L, L, "the asynchronous run"),
        _again(fc, L, None, L + 1, "the asynchronous run"),
    ]


@fixes("LOG-CRC-ORPHAN")
def crc_orphans(fc: FixContext, finding: Finding) -> list[str]:
    """Delete every orphan .crc sidecar of an entry Spark will write (offsets/, commits/, sources/<id>/): the rename
    of that entry onto it would fail (LOG-CRC-ORPHAN). Sidecars of entries Spark does not write again stay."""
    from ckptfix.audit.rules_logs import crc_orphans as orphans_of

    doomed = [o for o in orphans_of(fc.audit) if o.blocks is not None]
    if not doomed:
        raise CannotFix("no orphan sidecar of an entry Spark writes (the checkpoint changed?)")
    for o in doomed:
        fc.builder.delete(
            o.rel,
            f"sidecar without {o.log}/{o.target}; Spark's rename of its new entry {o.batch} onto it would fail",
            finding.rule_id,
        )
    effects = [f"Spark writes {', '.join(f'{o.log}/{o.target}' for o in doomed)} without a leftover sidecar in the way"]
    # what the deleted data file (the damage, not this plan) makes Spark run again: the plan says it too
    ck = fc.ckpt
    L, K = ck.offsets.latest, ck.commits.latest
    if L is None or fc.builder.touches(ck.offsets.files.get(L, "")) or fc.builder.touches(ck.commits.files.get(L, "")):
        return effects  # no batch, or another fix of this plan re-plans the latest batch and says what that re-runs
    if K == L - 1 and any(o.log == layout.COMMITS and o.batch == L for o in doomed):
        effects.append(
            f"batch {L} has no commit: Spark re-runs it with its recorded offsets; {_again(fc, L - 1, L, L)}"
        )
    elif (
        K == L
        and any(o.log == layout.OFFSETS and o.batch == L + 1 for o in doomed)
        and _replayed(fc, L, None) not in (None, "no input file")
    ):
        effects.append(f"batch {L + 1} is planned anew from offsets/{L}: {_again(fc, L, None, L + 1)}")
    return effects
