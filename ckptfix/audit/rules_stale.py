"""STATE-SNAPSHOT-STALE: an HDFS state snapshot that holds an older version's state.

A snapshot ``S.snapshot`` is the whole state of version S; Spark loads the newest one at or below the restart's
version and replays the deltas after it, never checking that the snapshot agrees with them. A snapshot
overwritten with an older one (a restore or a copy that took the wrong file, repair hunt 10, M04 on 3.5.9 and M05
on 4.3.0) loads without an error and silently drops every update of the versions between: Spark restarted with
rows lost and rows wrong. The files prove it when ``S.snapshot`` is byte for byte an older ``S'.snapshot`` of the
same store while a delta in between records a change, and the state the restart loads (that snapshot and the
deltas after it) differs from the one the files make (the older snapshot and every delta after it): keys the skipped
deltas changed and no later one wrote again. Where every such key is written again later (an aggregation whose every
batch updates every key: recorded as `state_snapshot_overwritten_by_older`, restarted right), nothing is reported.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from ckptfix.audit.context import AuditContext
from ckptfix.audit.model import Evidence, Finding
from ckptfix.audit.registry import check, define
from ckptfix.audit.rules_state import CODEC
from ckptfix.checkpoint import StoreDir
from ckptfix.errors import FormatError
from ckptfix.formats import codec
from ckptfix.stores import chain as chains
from ckptfix.stores import provider as providers
from ckptfix.stores import sample

STALE = define(
    "STATE-SNAPSHOT-STALE",
    "error",
    "A state snapshot holds an older version's state",
    "Spark loads the newest snapshot at or below the restart's version and replays the deltas after it; nothing "
    "checks that the snapshot is the version its name says. One overwritten with an older snapshot (byte for byte "
    "the same file) while a delta in between records a change restarts without an error and silently drops the "
    "updates of the versions between (repair hunt 10: 3.5.9 and 4.3.0, rows lost and rows wrong).",
    "`ckptfix repair` deletes the stale snapshot (with backup): Spark then loads the older snapshot and replays "
    "every delta up to the version, which all exist.",
)


@check
def stale_snapshots(ctx: AuditContext) -> Iterator[Finding]:
    ck, N = ctx.ckpt, ctx.state_version
    for stale in find_stale(ctx):
        yield STALE.finding(
            f"{stale.rel} is byte for byte {stale.same_as}, while {stale.changed} records changes in between: it "
            f"holds the state of version {stale.older}, not {stale.version}; Spark loads it for version {N} and "
            f"silently drops the updates of versions {stale.older + 1}..{stale.version}",
            [
                Evidence(
                    ck.display(stale.rel),
                    expected=f"the state of version {stale.version}",
                    found=f"the bytes of {stale.same_as}",
                )
            ],
            silent=True,
        )


@dataclass(frozen=True)
class Stale:
    rel: str  # the snapshot a restart loads
    version: int
    same_as: str  # the older snapshot with the same bytes
    older: int
    changed: str  # a delta in between that records a change


def find_stale(ctx: AuditContext) -> list[Stale]:
    """Every HDFS store's restart base that is byte for byte an older snapshot of the store while a delta in between
    records a change (the rule's evidence and the repair's targets)."""
    ck, N = ctx.ckpt, ctx.state_version
    if N <= 0:
        return []
    compression = codec.normalize(ctx.conf.get(CODEC, "lz4"))
    out = []
    for op in ck.state.operators.values():
        if providers.of(ctx.conf, op).kind != "hdfs":
            continue
        for part in sorted(op.partitions):
            for store in op.partitions[part].values():
                found = _stale(ctx, store, N, compression)
                if found is not None:
                    out.append(found)
    return out


def _stale(ctx: AuditContext, store: StoreDir, N: int, compression: str) -> Stale | None:
    ck = ctx.ckpt
    try:
        chain = chains.plan(store, N, "hdfs")
    except FormatError:
        return None
    base = chain.base
    if base is None or base.kind != "snapshot" or chain.gap is not None:
        return None
    snapshots = {v: rel for (kind, v, _), rel in store.files.items() if kind == "snapshot"}
    entry = ck.entries.get(base.rel)
    if entry is None:
        return None

    def same_size(rel: str) -> bool:
        other = ck.entries.get(rel)
        return other is not None and other.size == entry.size

    same = [v for v in sorted(snapshots, reverse=True) if v < base.version and same_size(snapshots[v])]
    if not same:
        return None
    data = ck.read(base.rel)
    for v in same:
        if ck.read(snapshots[v]) != data:
            continue
        changed = _changed_between(ctx, store, v, base.version, compression)
        if changed is None:
            return None
        # what the restart loads (the stale base and the deltas after it) against what the files say version N is
        # (the older snapshot and every delta after it): where every key the skipped deltas changed is written again
        # later, both agree and the restart is right (recorded: an aggregation whose every batch updates every key)
        deltas = [store.files.get(("delta", d, None)) for d in range(v + 1, N + 1)]
        if any(rel is None for rel in deltas):
            return None
        loaded = replay(ctx, [snapshots[v], *deltas[base.version - v :]], compression)
        right = replay(ctx, [snapshots[v], *deltas], compression)
        if loaded is None or right is None or loaded == right:
            return None
        return Stale(base.rel, base.version, snapshots[v], v, changed)
    return None


_REPLAY_LIMIT = 2_000_000  # records read to compare, at most


def replay(ctx: AuditContext, rels: list[str | None], compression: str) -> dict[bytes, bytes] | None:
    """The state the files ``rels`` (a snapshot, then deltas) make, as raw key -> value bytes (None: more than
    :data:`_REPLAY_LIMIT` records, or a file that cannot be read: the chain check reports that)."""
    state: dict[bytes, bytes] = {}
    seen = 0
    for rel in rels:
        assert rel is not None
        kind = "snapshot" if rel.endswith(".snapshot") else "delta"
        try:
            records = sample.changes(ctx.ckpt, rel, kind, compression, _REPLAY_LIMIT - seen)
        except FormatError:
            return None
        if records is None:
            return None
        seen += len(records)
        for rec in records:
            if rec.value is None:
                state.pop(rec.key, None)
            else:
                state[rec.key] = rec.value
    return state


def _changed_between(ctx: AuditContext, store: StoreDir, low: int, high: int, compression: str) -> str | None:
    """The first delta of versions low+1..high that records a change (None: none does, or one cannot be read: then
    the two snapshots may rightly be equal)."""
    for v in range(low + 1, high + 1):
        rel = store.files.get(("delta", v, None))
        if rel is None:
            return None
        try:
            records = sample.changes(ctx.ckpt, rel, "delta", compression, 1)
        except FormatError:
            return None
        if records is None or records:  # (None: more than one record)
            return rel
    return None


__all__ = ["STALE", "Stale", "find_stale", "replay", "stale_snapshots"]
