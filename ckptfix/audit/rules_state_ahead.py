"""State versions beyond what the offset log replays: what a hand rollback of offsets/ and commits/ leaves.

Batch b writes state version b+1. The restart replays the batches the offset log holds (up to L) with their
recorded offsets, so state versions up to L+1 come out as they were; every later batch is planned anew, with new
offsets, and its state version is written again with other contents. Files of versions > L+1 are left from batches
that no longer exist (``rm offsets/<b> commits/<b>`` with state/ left as it was; ``ckptfix rollback`` and
``ckptfix repair`` delete them). Spark meets them only when it writes or loads those versions again (real runs on
3.5.9, 4.0.5, 4.1.4, 4.2.1 and 4.3.0, damage cases ``state_ahead_*``):

* HDFS-backed store: the batch writes ``V.delta`` again (over the old one) but leaves ``V.snapshot``; maintenance
  takes the stale snapshot for the newest one and writes none. The run that writes V keeps it in memory and is
  right; the next run that loads V, or any later version before a newer snapshot, starts from the stale snapshot
  (``HDFSBackedStateStoreProvider.loadMap``, 4.3.0 jar: its in-memory map of the run, else ``loadSnapshot`` then the
  deltas after the snapshot): the aggregates silently lose what the batches planned anew read.
* RocksDB with changelog checkpointing: the batch writes ``V.changelog`` again, and the snapshot of V only in the
  maintenance task, after the commit. Until that upload the stale ``V.zip`` stays and the next run that loads V or a
  later version starts from it (silently wrong, seen on 4.3.0 and 3.5.9 with a 60 s maintenance interval: the run
  ended before maintenance came). With a 200 ms interval the upload replaced it in every recorded run.
* RocksDB without changelog checkpointing: every commit uploads ``V.zip`` over the old one (harmless).

Stores with state checkpoint format v2 (unique ids in the file names) are not reported: the batches that run again
write their versions under new unique ids, the commit log names those, and the stale files are never loaded (damage
case ``state_ahead_zip_hand_rollback_v2``: right on both restarts, on 4.3.0 with a 60 s maintenance interval too).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from ckptfix.audit.context import AuditContext
from ckptfix.audit.model import Evidence, Finding
from ckptfix.audit.registry import check, define
from ckptfix.checkpoint import StoreDir
from ckptfix.stores import chain as chains

SHOWN = 6  # file names listed in a message

AHEAD = define(
    "STATE-AHEAD",
    "error",
    "State files of versions beyond the offset log (left by a hand rollback)",
    "Batch b writes state version b+1; the restart replays the batches the offset log holds and plans later ones "
    "anew, so state files of versions > L+1 (L = latest offset) are left from batches that no longer exist. An "
    "HDFS-backed store's stale V.snapshot survives the batch that writes V again (it writes V.delta only), and so "
    "does a RocksDB store's stale V.zip with changelog checkpointing until the maintenance task uploads the new "
    "snapshot: the next run that loads V or a later version starts from the stale snapshot and its state is "
    "silently wrong (the first restart is right: it keeps the versions it writes in memory). Stale deltas, "
    "changelogs, and zips without changelog checkpointing are written again by the batches that re-run (seen on "
    "Spark 3.5.9 to 4.3.0).",
    "`ckptfix repair CKPT --apply` deletes every state file of a version > L+1 (and the SSTs only their zips list), "
    "as `ckptfix rollback CKPT --to-batch L --apply` would; then restart.",
)


@dataclass(frozen=True)
class Stale:
    store: StoreDir
    kind: str  # snapshot | delta | zip | changelog
    version: int
    rel: str


def stale_files(ctx: AuditContext) -> list[Stale]:
    """State files (checkpoint format v1 names) of versions > L+1, L = the latest offset; none without offsets."""
    L = ctx.latest_offset
    if L is None:
        return []
    out: list[Stale] = []
    for _op, op in sorted(ctx.ckpt.state.operators.items()):
        for _part, stores in sorted(op.partitions.items()):
            for _name, store in sorted(stores.items()):
                for (kind, version, uid), rel in sorted(store.files.items(), key=lambda kv: (kv[0][1], kv[1])):
                    if uid is None and version > L + 1:
                        out.append(Stale(store, kind, version, rel))
    return out


def harmful(ctx: AuditContext, stale: Stale) -> bool:
    """A snapshot a later load prefers to the files written again: an HDFS snapshot, or a RocksDB zip with
    changelog checkpointing on (see the module doc)."""
    if stale.kind == "snapshot":
        return stale.store.provider == "hdfs"
    return stale.kind == "zip" and chains.changelog_checkpointing(stale.store, ctx.session_conf)


def _names(ctx: AuditContext, files: list[Stale]) -> str:
    shown = ", ".join(ctx.ckpt.display(s.rel) for s in files[:SHOWN])
    more = len(files) - SHOWN
    return shown + (f" and {more} more" if more > 0 else "")


def _evidence(ctx: AuditContext, files: list[Stale], L: int) -> list[Evidence]:
    return [Evidence(ctx.ckpt.display(s.rel), note=f"state version {s.version} > {L + 1}") for s in files[:SHOWN]] + [
        Evidence(ctx.ckpt.display("offsets"), note=f"latest offset {L}")
    ]


@check
def state_ahead(ctx: AuditContext) -> Iterator[Finding]:
    L = ctx.latest_offset
    files = stale_files(ctx)
    if L is None or not files:
        return
    bad = [s for s in files if harmful(ctx, s)]
    inert = [s for s in files if not harmful(ctx, s)]
    fix = (
        f"`ckptfix repair {ctx.ckpt.location.url} --apply` deletes every state file of a version > {L + 1} (as "
        f"`ckptfix rollback {ctx.ckpt.location.url} --to-batch {L} --apply` would); then restart"
    )
    top = max(s.version for s in files)
    if bad:
        first = min(s.version for s in bad)
        yield AHEAD.finding(
            f"the offset log ends at batch {L}, but state/ holds versions up to {top}, written by batches > {L} "
            f"that Spark plans anew (a hand rollback of offsets/ and commits/ that left state/): the snapshot(s) "
            f"{_names(ctx, bad)} stay when those batches write their versions again ({_how(bad)}), and the next "
            f"run that loads version {first} or later (not this restart, which keeps what it writes in memory) "
            f"starts from a stale snapshot: the state silently loses what the batches planned anew read (seen on "
            f"Spark 3.5.9 to 4.3.0: wrong aggregates from the second restart on)",
            _evidence(ctx, bad, L),
            silent=True,
            fix=fix,
        )
    if inert:
        yield AHEAD.finding(
            f"the offset log ends at batch {L}, but state/ holds {_names(ctx, inert)}, written by batches > {L} "
            f"that Spark plans anew (a hand rollback of offsets/ and commits/ that left state/): harmless, the "
            f"batches that run again write those versions over them",
            _evidence(ctx, inert, L),
            severity="warning",
            fix=fix,
        )


def _how(files: list[Stale]) -> str:
    kinds = {s.kind for s in files}
    parts = []
    if "snapshot" in kinds:
        parts.append("an HDFS-backed store writes only a delta")
    if "zip" in kinds:
        parts.append(
            "RocksDB with changelog checkpointing writes a changelog, and the zip only when the maintenance task "
            "uploads the new snapshot, if it does before the query stops"
        )
    return "; ".join(parts)
