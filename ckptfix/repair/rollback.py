"""Roll a checkpoint back so that batch N is the last committed batch.

What goes (spark-logs-and-restart.md §2, §6; spark-state-formats.md §0, §2.2, §4.4, §4.7):

* ``offsets/x`` and ``commits/x`` for every x > N (non-canonical names such as ``0009`` too:
  Spark lists them and opens the canonical path), with their Hadoop ``.crc`` sidecars;
* every state file of a version > N+1 (version N+1 is the state after batch N: it stays),
  whatever its kind (delta, snapshot, zip, changelog) and unique id (checkpoint format v2),
  with its sidecars; SSTs referenced only by deleted zips (never one a kept zip lists).

What stays, on purpose:

* ``commits/N``: in checkpoint format v2 it is the pointer to version N+1's unique ids.
* file-source logs (``sources/<k>/``): entries after the ``logOffset`` of ``offsets/N`` stay, except a newest
  one that cannot be read (it would stop the restart; Spark writes it again).
  On restart the source takes its current offset from the newest entry of its log and its
  "seen" set from all entries, so the re-planned batch N+1 covers ``logOffset(N) -> newest``:
  the files of the rolled-back batches are read again exactly once. Deleting the entries would
  make those files "new" again only if they pass ``maxFileAge`` (else they are silently
  skipped), and could remove a ``.compact`` file that later entries depend on (§8.1).
* operator metadata and schema files: written once per schema, not per batch.

Refusals: batch N not committed (no ``offsets/N`` or ``commits/N``); a query that looks
alive; a sink holding batches > N (it would skip the re-planned ids: silent loss), unless ``with_sink`` rolls a
file sink back too (:mod:`ckptfix.repair.sink_rollback`; a Delta table is left to Delta's ``RESTORE``); a
rolled-back checkpoint whose restart the audit predicts to fail (state version N+1 not
loadable from the files that remain, ``offsets/N-1`` missing, ...).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ckptfix.audit import audit
from ckptfix.audit.targets import parse_target
from ckptfix.checkpoint import Checkpoint, StoreDir, id_ranges
from ckptfix.errors import CkptfixError, FormatError, RollbackRefused, UsageError
from ckptfix.formats import rocksdbzip
from ckptfix.repair.builder import PlanBuilder
from ckptfix.repair.crc_edits import accept_edit, edited_logs
from ckptfix.repair.engine import LiveQuery, check_recent_writes, default_backup_url, own_writes
from ckptfix.repair.plan import Plan
from ckptfix.repair.sink_rollback import plan_sink_rollback
from ckptfix.sinks import Sink, delta_restore_version, open_sink
from ckptfix.storage import Location

RULE = "ROLLBACK"
#: ckptfix's own backup directory inside a checkpoint (engine.default_backup_url)
BACKUP_DIR = "_ckptfix"


@dataclass(frozen=True)
class RollbackResult:
    plan: Plan
    checkpoint: str  # where the plan applies (DEST with --into)
    copied_from: str | None = None
    copied_files: int = 0
    #: a dry run with --into: where --apply will copy the checkpoint before rolling the copy back
    into: str | None = None
    #: ``with_sink``: the plan that rolls the file sink back to batch N (applied first), and where it applies
    sink_plan: Plan | None = None
    sink: str | None = None


# -- liveness -------------------------------------------------------------------------------
def check_idle(ckpt: Checkpoint, idle_seconds: float, batch: int) -> None:
    """Refuse when a Spark file was written in the last ``idle_seconds`` (a running query), other than by ckptfix
    itself (its journal in the checkpoint's default backup location)."""
    own = own_writes(Location(default_backup_url(ckpt.location.url), ckpt.location.storage_options))
    try:
        check_recent_writes(ckpt.location, ckpt.entries, idle_seconds, own)
    except LiveQuery as exc:
        raise RollbackRefused(batch, str(exc)) from None


# -- --into ---------------------------------------------------------------------------------
def copy_checkpoint(
    src: Location, dest_url: str, storage_options: Mapping[str, Any] | None = None
) -> tuple[Location, int]:
    """Copy every file of ``src`` (hidden ones included; ckptfix's own ``_ckptfix`` backups
    excluded: they belong to the original) to ``dest_url``, which must not exist or be empty.
    Returns the destination and the number of files copied."""
    dest = Location(dest_url, storage_options)
    check_destination(dest, src)
    dest.create_exclusive(COPY_MARKER, f"copy of {src.url} in progress\n".encode())  # first, removed last
    entries = src.list_tree()
    files = sorted(p for p, e in entries.items() if not e.is_dir and not _is_backup(p))
    for i in range(0, len(files), 64):  # concurrent reads on object stores
        chunk = files[i : i + 64]
        got = src.read_many(chunk)
        for rel in chunk:
            dest.create_exclusive(rel, got[rel] if rel in got else src.read(rel))
    if dest.is_local:  # keep empty directories (an empty state/ or sources/<k>/ is still a fact)
        import os

        for rel, e in entries.items():
            if e.is_dir and not _is_backup(rel):
                os.makedirs(dest.path(rel), exist_ok=True)
    dest.delete(COPY_MARKER)
    return dest, len(files)


#: in DEST while ``--into`` copies: a DEST that still has it is an interrupted copy, never a checkpoint to use
COPY_MARKER = ".ckptfix-rollback-copy"


def check_destination(dest: Location, src: Location) -> None:
    """DEST must be new or empty, and not the checkpoint itself."""
    if src.url.rstrip("/") == dest.url.rstrip("/"):
        raise UsageError("--into: expected a destination other than the checkpoint itself")
    if dest.url.startswith(src.url.rstrip("/") + "/"):
        # the copy would copy itself: it changed while it was copied, and the half copy stayed (new-user trial)
        raise UsageError(
            f"--into {dest.url}: expected a destination outside the checkpoint {src.url}, found one inside it"
        )
    try:
        existing = dest.list_tree()
    except FileNotFoundError:
        return
    except NotADirectoryError:
        raise UsageError(f"--into {dest.url}: expected a new or empty directory, found a file") from None
    if COPY_MARKER in existing:
        raise UsageError(
            f"--into {dest.url}: expected a new or empty directory, found the unfinished copy of an interrupted "
            f"rollback ({COPY_MARKER}): remove {dest.url} and run the command again"
        )
    if any(not e.is_dir for e in existing.values()):
        raise UsageError(f"--into {dest.url}: expected a new or empty directory, found {len(existing)} entries")


def _is_backup(rel: str) -> bool:
    return rel == BACKUP_DIR or rel.startswith(BACKUP_DIR + "/")


def _fingerprint(entries: Mapping[str, Any]) -> dict[str, tuple[int, float | None]]:
    return {p: (e.size, e.mtime) for p, e in entries.items() if not e.is_dir and not _is_backup(p)}


# -- planning -------------------------------------------------------------------------------
def _store_deletions(store: StoreDir, keep_upto: int) -> tuple[list[str], list[str]]:
    """(state files to delete, kept zip rels) of one store: every version > ``keep_upto``."""
    doomed, kept_zips = [], []
    for (kind, version, _uid), rel in sorted(store.files.items(), key=lambda kv: (kv[0][1], kv[1])):
        if version > keep_upto:
            doomed.append(rel)
        elif kind == "zip":
            kept_zips.append(rel)
    return doomed, kept_zips


def _ssts_of(ckpt: Checkpoint, zip_rel: str) -> set[str]:
    """SST (and archived log) file names a zip lists; raises FormatError for a broken zip."""
    meta = rocksdbzip.parse(ckpt.read(zip_rel), ckpt.display(zip_rel)).metadata
    names = {s.dfs_sst_file_name for s in meta.sst_files}
    names |= {f"logs/{lf.dfs_log_file_name}" for lf in meta.log_files or ()}
    return names


def _unreferenced_ssts(ckpt: Checkpoint, store: StoreDir, doomed: list[str], kept_zips: list[str]) -> list[str]:
    """SSTs listed by a deleted zip and by no kept zip. A kept zip that cannot be read makes
    every SST look referenced (nothing is deleted)."""
    doomed_zips = [r for r in doomed if r.endswith(".zip")]
    if not doomed_zips:
        return []
    keep: set[str] = set()
    for rel in kept_zips:
        try:
            keep |= _ssts_of(ckpt, rel)
        except FormatError:
            return []
    drop: set[str] = set()
    for rel in doomed_zips:
        try:
            drop |= _ssts_of(ckpt, rel)
        except FormatError:
            continue  # an unreadable zip names nothing: its SSTs stay (harmless orphans)
    out = []
    for name in sorted(drop - keep):
        if name.startswith("logs/"):
            rel = f"{store.rel}/{name}"
            if rel in ckpt.entries:
                out.append(rel)
        elif name in store.ssts:
            out.append(f"{store.rel}/SSTs/{name}")
    return out


def state_deletions(ckpt: Checkpoint, keep_upto: int) -> list[tuple[str, str]]:
    """(path, why) of every state file of a version > ``keep_upto`` in every store, and of the SSTs that only
    those versions' zips list: what makes ``keep_upto`` the newest state version (rollback, and repair's
    re-planning of a batch whose state was already written)."""
    out: list[tuple[str, str]] = []
    for _op_id, op in sorted(ckpt.state.operators.items()):
        for _part, stores in sorted(op.partitions.items()):
            for _name, store in sorted(stores.items()):
                doomed, kept_zips = _store_deletions(store, keep_upto)
                for rel in doomed:  # the file's name says its version: one reason for all (the plan groups them)
                    out.append((rel, f"a state version above {keep_upto}"))
                for rel in _unreferenced_ssts(ckpt, store, doomed, kept_zips):
                    out.append((rel, f"referenced only by zips of versions > {keep_upto}"))
    return out


def plan_rollback(
    url: str,
    to_batch: int,
    target_spark: str | None = None,
    *,
    storage_options: Mapping[str, Any] | None = None,
    sink_path: str | None = None,
    into: str | None = None,
    copy: bool = False,
    force: bool = False,
    idle_seconds: float = 120,
    with_sink: bool = False,
    session_conf: Mapping[str, str] | None = None,
    accept_edits: bool = False,
) -> RollbackResult:
    """Plan the rollback. With ``into`` and ``copy`` (the CLI's ``--apply``), copy the checkpoint there first
    and plan on the copy; with ``into`` alone nothing is written: the plan is made on the original (its paths
    are relative, the same on the copy) and DEST is only checked. With ``with_sink``, a file sink at
    ``sink_path`` that holds batches > N is rolled back too: :attr:`RollbackResult.sink_plan` (apply it before
    the checkpoint's plan: see docs/repair.md, "the crash window"); a Delta table is refused (Delta's ``RESTORE``
    is the tool). ``session_conf``: the confs of the session that restarts the query (as ``audit --conf``), for
    what the logs do not record. ``accept_edits``: a kept log file of the new restart tail that was edited after
    Spark wrote it (its ``.crc`` sidecar disagrees) gets a sidecar recording the edit, as ``repair
    --accept-edits`` does; without it such a rollback is refused."""
    N = to_batch
    if N < 0:
        raise UsageError(f"--to-batch: expected a batch id >= 0, found {N}")
    if with_sink and sink_path is None:
        raise UsageError("--with-sink: expected --sink OUT (the file sink's output path) too")
    if with_sink and into is not None:
        raise UsageError(
            "--with-sink cannot go with --into: the sink has one location, so the checkpoint that writes to it is "
            "rolled back in place"
        )
    target = parse_target(target_spark)
    src = Checkpoint.open(url, storage_options)
    _check_committed(src, N)
    if not force and copy:  # a dry run writes nothing: it may look at a live query (the apply checks again)
        check_idle(src, idle_seconds, N)
    sink_plan: Plan | None = None
    sink_after: Sink | None = None
    if sink_path is not None:
        sink = open_sink(sink_path, storage_options)
        try:
            qid: str | None = src.query_metadata().id
        except (CkptfixError, OSError):  # no readable metadata: a file sink is still checked, a Delta txn cannot be
            qid = None
        sink_latest = sink.last_batch(qid)
        ahead = sink_latest is not None and sink_latest > N
        if ahead and with_sink and sink.delta is not None:
            raise RollbackRefused(N, _delta_restore_advice(sink, qid, N, sink_latest))
        if ahead and not with_sink:
            raise RollbackRefused(
                N,
                f"{sink.describe(qid)} at {sink_path} already holds batches up to {sink_latest} "
                f"({sink.evidence(qid)}): Spark would re-plan batches {N + 1}..{sink_latest} with new data and the "
                f"sink skips every batch id it already has (silent data loss). "
                + _sentence(sink.replan_advice(N, sink_latest or N, url)),
            )
        if with_sink and sink.delta is None:
            if not force and copy:
                try:
                    check_recent_writes(sink.location, sink.entries, idle_seconds)
                except LiveQuery as exc:
                    raise RollbackRefused(N, str(exc)) from None
            sink_plan = plan_sink_rollback(sink, N, target.label)
            sink_after = sink.without({a.path for a in sink_plan.actions})
    copied_from, copied = None, 0
    ckpt = src
    if into is not None and not copy:
        check_destination(Location(into, storage_options), src.location)
        plan = _plan_on(
            src, N, target.label, sink_path, storage_options, session_conf=session_conf, accept_edits=accept_edits
        )
        return RollbackResult(plan, src.location.url, None, 0, into=Location(into, storage_options).url)
    if sink_plan is not None:
        plan = _plan_on(src, N, target.label, sink_path, storage_options, sink_after, session_conf, accept_edits)
        return RollbackResult(plan, src.location.url, sink_plan=sink_plan, sink=sink_plan.checkpoint)
    if into is not None:
        # plan first on the original, so a refusal leaves DEST untouched
        _plan_on(src, N, target.label, sink_path, storage_options, session_conf=session_conf, accept_edits=accept_edits)
        before = _fingerprint(src.entries)
        dest, copied = copy_checkpoint(src.location, into, storage_options)
        if _fingerprint(src.location.list_tree()) != before:
            raise RollbackRefused(N, f"{src.location.url} changed while it was copied: is the query running?")
        copied_from = src.location.url
        ckpt = Checkpoint.open(dest.url, storage_options)
    plan = _plan_on(
        ckpt, N, target.label, sink_path, storage_options, session_conf=session_conf, accept_edits=accept_edits
    )
    return RollbackResult(plan, ckpt.location.url, copied_from, copied)


def _damaged_source_entries(ckpt: Checkpoint, N: int) -> list[tuple[str, str]]:
    """A file-source log's newest entry, after the logOffset of ``offsets/N`` and not a compaction, that cannot be
    read: kept, it would stop the restart (the source parses its whole log from the latest compaction on); deleted,
    the restarted source writes that entry again for batch N+1 with the files it has not seen, the lost entry's among
    them (repair hunt 10, W15 on 4.3: exact)."""
    from ckptfix.formats.compactlog import derive_compact_interval, is_compaction_batch
    from ckptfix.formats.offsetlog import file_source_log_offset

    try:
        offsets = ckpt.offset(N).offsets
    except FormatError:
        return []
    out = []
    for so in offsets:
        log = ckpt.sources.get(so.source_id)
        kept = file_source_log_offset(so.json)
        if log is None or kept is None or log.latest is None or log.latest <= kept:
            continue
        b = log.latest
        if is_compaction_batch(b, derive_compact_interval(sorted(log.compact))):
            continue
        try:
            ckpt.source_log(so.source_id, b)
        except FormatError as exc:
            out.append(
                (
                    log.path_of(b),
                    f"cannot be read ({exc.expected} expected, {exc.found} found) and is after batch {N}'s "
                    f"logOffset {kept}: the restarted source writes it again with the files it has not seen",
                )
            )
    return out


def _check_committed(ckpt: Checkpoint, N: int) -> None:
    have_offsets = N in ckpt.offsets.files
    have_commit = N in ckpt.commits.files
    if not have_offsets or not have_commit:
        missing = " and ".join(x for x, ok in ((f"offsets/{N}", have_offsets), (f"commits/{N}", have_commit)) if not ok)
        O, C = sorted(ckpt.offsets.files), sorted(ckpt.commits.files)
        known = f"offsets {id_ranges(O)}, commits {id_ranges(C)}"
        raise RollbackRefused(N, f"batch {N} is not committed: {missing} missing ({known})")
    for what, read in ((f"offsets/{N}", ckpt.offset), (f"commits/{N}", ckpt.commit)):
        try:
            read(N)
        except FormatError as exc:
            raise RollbackRefused(N, f"{what} is unreadable ({exc.expected}, found {exc.found})") from None


def _batches(first: int, last: int) -> str:
    return f"batch {first}" if first == last else f"batches {first}..{last}"


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:]


def _delta_restore_advice(sink: Sink, qid: str | None, N: int, latest: int | None) -> str:
    """--with-sink on a Delta table: ckptfix does not rewrite a Delta log; Delta's own RESTORE does."""
    v = delta_restore_version(sink.location, qid, N) if qid is not None else None
    version = (
        f"{v} (the table version before the commit whose txn for query {qid} is batch {N + 1})"
        if v is not None
        else "v, the table version before the commit whose txn for this query id is batch "
        f"{N + 1} (ckptfix could not find it in _delta_log)"
    )
    return (
        f"--with-sink rolls back file sinks only, and {sink.location.url} is a Delta table whose txn of query {qid} "
        f"holds batches up to {latest}: Delta's own `RESTORE TABLE delta.`{sink.location.url}` TO VERSION "
        f"{v if v is not None else 'v'}` is the tool, with v = {version}; it also reverts any other writer's "
        "commits after v. Then run this rollback again with --sink and without --with-sink"
    )


def _gap_hint(ckpt: Checkpoint, N: int) -> str:
    """Where the offset log has a hole before batch N (asynchronous progress tracking writes offsets sparsely):
    the batches a rollback can reach, the ones committed with the offset file before them (Spark re-reads it), and
    for the latest batch the repair that writes the missing file."""
    offsets, commits = ckpt.offsets.files, ckpt.commits.files
    reachable = [n for n in sorted(commits) if n in offsets and (n == 0 or n - 1 in offsets)]
    parts = []
    if ckpt.offsets.latest == N:
        parts.append(f"`ckptfix repair {shlex.quote(ckpt.location.url)}` writes the offset file batch {N} needs")
    which = "batch" if len(reachable) == 1 else "batches"
    parts.append(
        f"the logs allow a rollback to {which} {id_ranges(reachable)} (committed, with the offset file before it)"
        if reachable
        else "no committed batch has the offset file before it: no rollback can reach one"
    )
    return "; " + "; ".join(parts)


def _plan_on(
    ckpt: Checkpoint,
    N: int,
    target: str,
    sink_path: str | None,
    storage_options: Mapping[str, Any] | None,
    sink_after: Sink | None = None,
    session_conf: Mapping[str, str] | None = None,
    accept_edits: bool = False,
) -> Plan:
    builder = PlanBuilder(ckpt, target)
    why_log = f"batch {N} becomes the last batch"
    L = ckpt.offsets.latest
    for log in (ckpt.offsets, ckpt.commits):
        for x, rel in sorted({**log.files, **log.noncanonical}.items(), key=lambda kv: (kv[0], kv[1])):
            if x > N:
                builder.delete(rel, why_log, RULE)
        # a sidecar left by a log file deleted by hand (.7.crc without 7): Spark's write of batch x would trip on it
        # (new-user trial: the rollback refused for the orphan it left, LOG-CRC-ORPHAN)
        for name, sidecar in sorted(log.crc.items()):
            if name.isdigit() and int(name) > N and int(name) not in log.files:
                builder.delete(sidecar, f"sidecar of {log.rel}/{name}, which is gone: {why_log}", RULE)
        for x, rel in sorted(log.noncanonical.items()):  # a second spelling of a kept id (e.g. 0007)
            if x <= N and x in log.files:
                builder.delete(rel, f"non-canonical duplicate of {log.rel}/{x}", RULE)
    keep_upto = N + 1
    for rel, why in state_deletions(ckpt, keep_upto):
        builder.delete(rel, why, RULE)
    for rel, why in _damaged_source_entries(ckpt, N):
        builder.delete(rel, why, RULE)
    doomed_paths = {a.path for a in builder.actions if a.op == "delete"}
    after = ckpt.without(doomed_paths)
    accepted = edited_logs(after) if accept_edits else []
    for rel, crc in accepted:
        accept_edit(builder, after, rel, crc, RULE)
    if accepted:
        writes = {a.path: a.content for a in builder.actions if a.op == "write" and a.content is not None}
        after = ckpt.planned(writes, doomed_paths)
    report = audit(
        ckpt.location.url,
        target,
        storage_options=storage_options,
        sink_path=sink_path,
        checkpoint=after,
        sink=sink_after,
        session_conf=session_conf,
    )
    blocking = [f for f in report.findings if f.severity == "error"]
    if not report.verdict.restarts or blocking:
        first = blocking[0] if blocking else None
        reason = first.message if first else report.verdict.headline
        rule = f" [{first.rule_id}]" if first else ""
        hint = _gap_hint(ckpt, N) if first is not None and first.rule_id == "LOG-ASYNC-GAP" else ""
        if first is not None and first.rule_id == "LOG-CRC-MISMATCH" and not accept_edits:
            hint = (
                "; restore the original file from a backup, or keep the edit with --accept-edits (the rollback then "
                "writes a sidecar that records it, and Spark relies on the edit)"
            )
        raise RollbackRefused(N, f"after the rollback Spark could not restart correctly: {reason}{rule}{hint}")
    replay = (
        f"; the data of {_batches(N + 1, L)} is planned again (new batch boundaries)" if L is not None and L > N else ""
    )
    if L is None or L <= N:
        sink_effect = "nothing to replay"
    elif sink_after is not None:
        sink_effect = (
            f"the file sink at {sink_after.location.url} is rolled back to batch {N} by its own plan (applied first): "
            f"Spark writes batches {N + 1}.. to it again"
        )
    elif sink_path is not None:
        sink_effect = (
            f"the sink at {sink_path} holds no batch after {N}: it skips none of the re-planned ids; a sink keyed by "
            "batch id elsewhere (foreachBatch) still holds the old ones"
        )
    else:
        sink_effect = (
            f"NOT CHECKED without --sink: an exactly-once sink (a file sink, a Delta table) that holds "
            f"{_batches(N + 1, L)} skips those ids when Spark plans them anew, and their new rows are lost: give it "
            "with --sink OUT and ckptfix refuses (for a file sink, --with-sink rolls it back too); a foreachBatch sink "
            "keyed by batch id overwrites the ids the new run reuses and keeps the rest stale; an append sink sees "
            "the replayed data twice"
        )
    effects = [
        f"Spark resumes at batch {N + 1} from the offsets of batch {N}, loading state version {keep_upto}{replay}",
        sink_effect,
        *(
            f"--accept-edits: Spark uses the edited {rel} as if it had written it; ckptfix cannot tell whether the "
            "edit is right"
            for rel, _ in accepted
        ),
    ]
    notes = []
    if ckpt.sources:
        notes.append(
            "file-source logs (sources/<k>/) keep their entries after batch "
            f"{N}'s logOffset: the source resumes from its newest entry, so the files of the rolled-back "
            "batches are read again exactly once (deleting the entries could lose them to maxFileAge, or break "
            "a .compact file later entries depend on)"
        )
        notes.append("file-source logs hold absolute input paths: restart with the same input path")
    ids = None
    try:
        ids = ckpt.commit(N).state_unique_ids
    except FormatError:
        ids = None
    if ids is not None:
        notes.append(f"checkpoint format v2: commits/{N} stays as the pointer to state version {keep_upto}'s ids")
    if any(op.metadata_v2 or op.state_schema for op in ckpt.state.operators.values()):
        notes.append("operator metadata v2 and state schema files are kept as they are")
    return builder.build(f"rollback to batch {N}", [], effects, notes)
