"""Planners for state findings: rebuild the restart's state version past a bad snapshot.

A corrupt snapshot, a zip whose SST is missing, or a base file failing its checksum sidecar:
version N is rebuilt from the newest good snapshot before it plus the deltas/changelogs
(:mod:`ckptfix.repair.rebuild`), so Spark 3.5-4.1, which do not fall back by themselves,
restart. A damaged or missing delta/changelog has no such way around it.
"""

from __future__ import annotations

from typing import Any

from ckptfix import layout
from ckptfix.audit.model import Finding
from ckptfix.audit.rules_state import metadata_crc_orphans
from ckptfix.checkpoint import StoreDir
from ckptfix.errors import CannotFix, FormatError
from ckptfix.repair.fixes import FixContext, fixes


def _store_of(fc: FixContext, finding: Finding) -> StoreDir:
    ck = fc.ckpt
    for ev in finding.evidence:
        for op in ck.state.operators.values():
            for stores in op.partitions.values():
                for store in stores.values():
                    prefix = ck.display(store.rel) + "/"
                    if ev.path.startswith(prefix) and (
                        "/" not in ev.path[len(prefix) :] or ev.path[len(prefix) :].startswith("SSTs/")
                    ):
                        return store
    raise CannotFix("the finding names no file of a state store")


@fixes("STATE-SNAPSHOT-CORRUPT", "STATE-SST-MISSING", "STATE-SST-CORRUPT", "STATE-CHECKSUM-MISMATCH", each=True)
def rebuild_snapshot(fc: FixContext, finding: Finding) -> list[str]:
    """Each finding's store gets version N written again (every damaged store of the restart, not only the first);
    a store already rebuilt in this plan (two findings in one store) is covered."""
    from ckptfix.repair.rebuild import RULE, rebuild_store
    from ckptfix.state.read import select
    from ckptfix.state.schemas import any_kind

    N = fc.audit.state_version
    if not N:
        raise CannotFix("the restart loads no state version")
    store = _store_of(fc, finding)
    if f"rebuilt:{store.rel}" in fc.covered:
        return []
    unreadable = _unreadable_checksum_file(fc, store, finding)
    if unreadable is not None:
        # Spark parses a checksum file before the file it covers and fails on one it cannot parse; without one it
        # loads the file unchecked (hunt 13: 4.1.4, 4.2.1 restarted right once the empty file was gone, where the
        # repair tried a rebuild, failed on that file, and advised a rollback)
        why = "a checksum file Spark cannot parse (it loads the file it covers without one)"
        fc.builder.delete(unreadable, why, finding.rule_id)
        return [f"Spark loads {unreadable.removesuffix('.crc')} without a checksum file; no batch re-runs"]
    mark = fc.builder.mark()
    sel = None
    try:
        sel = select(
            fc.ckpt,
            operator=store.operator,
            version=N,
            partition=store.partition,
            store_name=store.store,
            **any_kind(fc.ckpt, store.operator),
        )
        result = rebuild_store(sel, store, fc.builder, prune=False, retain=None)
        if not result.written:
            # version N's own snapshot reads well here, but the audit found it damaged for Spark (its Hadoop .crc
            # disagrees, a block only RocksDB's checks see): write N again from the older snapshot + changelogs
            result = rebuild_store(sel, store, fc.builder, prune=False, retain=None, damaged=(N,))
    except FormatError as exc:
        fc.builder.rollback(mark)
        raise CannotFix(
            f"version {N} of {store.rel} cannot be rebuilt: {exc} ({_otherwise(fc, sel, store, N)})"
        ) from None
    if not result.written:
        raise CannotFix(f"version {N} of {store.rel} already loads from a good snapshot")
    fc.covered.add(f"rebuilt:{store.rel}")
    return [
        f"{store.rel}: Spark loads state version {N} from a snapshot ckptfix writes from {result.chain} "
        f"({result.keys} key{'' if result.keys == 1 else 's'}; {RULE}); no batch re-runs"
    ]


def _unreadable_checksum_file(fc: FixContext, store: StoreDir, finding: Finding) -> str | None:
    """The Spark 4.x checksum file (``<file>.crc``) the finding names, when it does not parse; None otherwise."""
    from ckptfix.formats import filechecksum

    for rel in store.checksums.values():
        if not any(e.path == fc.ckpt.display(rel) for e in finding.evidence):
            continue
        try:
            filechecksum.parse(fc.ckpt.read(rel), fc.ckpt.display(rel))
        except FormatError:
            return rel
        return None
    return None


def _otherwise(fc: FixContext, sel: Any, store: StoreDir, N: int) -> str:
    """What is left when version N cannot be rebuilt: a backup, or a rollback to the newest older version whose
    every file verifies (``state ls --verify``'s facts: zips that share a damaged SST do not count), or, when no
    older version loads either, a new checkpoint."""
    from ckptfix.state.inventory import verified_loadable

    head = "restore the file from a backup"
    older = [v for v in verified_loadable(sel, store) if v < N] if sel is not None else []
    if not older:
        return (
            f"{head}; no older version of {store.rel} loads either, so without it only a new checkpoint restarts "
            "the query (`ckptfix offsets export` carries the source offsets over)"
        )
    v = max(older)
    return (
        f"{head}, or roll back to batch {v - 1} ({fc.audit.rollback_command(v - 1)}: the newest version of "
        f"{store.rel} that loads is {v}; Spark runs batches {v}.. again)"
    )


@fixes("STATE-METADATA-CRC-ORPHAN")
def delete_metadata_sidecars(fc: FixContext, finding: Finding) -> list[str]:
    """Delete every leftover Hadoop sidecar of a state metadata file that is gone (the audit's list, not only this
    finding's: a rule is planned once): Spark writes each file and its sidecar again."""
    orphans = metadata_crc_orphans(fc.audit)
    if not orphans:
        raise CannotFix("no leftover sidecar of a state metadata file is there any more")
    for crc_rel, _ in orphans:
        why = "the sidecar of a file that is gone: Spark's rename onto it would fail"
        fc.builder.delete(crc_rel, why, finding.rule_id)
    return [f"Spark writes {', '.join(data for _, data in orphans)} again at the first batch"]


@fixes("STATE-OPERATOR-METADATA-MISMATCH", each=True)
def delete_operator_metadata(fc: FixContext, finding: Finding) -> list[str]:
    """An operator metadata file (v1: checkpoint format v1 on Spark 4.x) that contradicts the state it describes:
    Spark 4.x compares it with the restarted plan and fails, finds none and skips the check, and writes it again at
    the first batch from the plan. Delete it (and its sidecar); the backup keeps it (hunt 14 on 4.3: deleted by
    hand as the text says, the query restarted with the right aggregates)."""
    ck = fc.ckpt
    named = {ck.display(op.metadata_v1): op for op in ck.state.operators.values() if op.metadata_v1 is not None}
    op = named.get(finding.evidence[0].path) if finding.evidence else None
    if op is None or op.metadata_v1 is None:
        raise CannotFix(f"the operator metadata file is not there any more: {finding.fix}")
    fc.builder.delete(op.metadata_v1, "it contradicts the operator's state: Spark 4.x fails the check", finding.rule_id)
    return [f"Spark writes {op.metadata_v1} again at the first batch, from the restarted query's plan"]


@fixes("STATE-SNAPSHOT-STALE")
def delete_stale_snapshots(fc: FixContext, finding: Finding) -> list[str]:
    """Delete every stale snapshot the audit proves (with its sidecar): Spark then loads the older snapshot and
    replays every delta up to the version (repair hunt 10, M04/M05: the restart had dropped those updates)."""
    from ckptfix.audit.rules_stale import find_stale

    stale = find_stale(fc.audit)
    if not stale:
        raise CannotFix("no stale snapshot found again (the checkpoint changed?)")
    effects = []
    for s in stale:
        fc.builder.delete(
            s.rel, f"byte for byte {s.same_as}: the state of version {s.older}, not {s.version}", finding.rule_id
        )
        effects.append(
            f"Spark loads version {s.version} of {s.rel.rsplit('/', 1)[0]} from {s.same_as} and the deltas "
            f"{s.older + 1}..{s.version}"
        )
    return effects


@fixes("STATE-PARTITION-MISPLACED")
def delete_misplaced_snapshots(fc: FixContext, finding: Finding) -> list[str]:
    """Where only a partition's newest snapshot (or zip) holds another partition's keys and the older files it
    would load instead hold its own, delete that snapshot (repair hunt 10, M03: two snapshots swapped, the deltas in
    place; deleting them restarted exactly). Anything else (whole directories swapped or copied) has no exact fix
    from the files: the backup, or the directories put back by hand."""
    from ckptfix.audit.rules_placement import find_misplaced

    effects = []
    for m in find_misplaced(fc.audit):
        if set(m.only_snapshots) != set(m.wrong):
            raise CannotFix(
                f"operator {m.op_id}: partition(s) {', '.join(map(str, sorted(set(m.wrong) - set(m.only_snapshots))))} "
                "hold other partitions' keys in more than their newest snapshot: put each partition's files back in "
                "its own directory (from a backup, or by swapping the directories the finding pairs), then audit again"
            )
        for p, rels in sorted(m.only_snapshots.items()):
            for rel in rels:
                fc.builder.delete(rel, f"holds keys of another partition than {p}", finding.rule_id)
                effects.append(
                    f"Spark loads partition {p} of operator {m.op_id} from the older files of "
                    f"{rel.rsplit('/', 1)[0]}, which hold its own keys"
                )
    if not effects:
        raise CannotFix("no misplaced keys found again (the checkpoint changed?)")
    return effects


@fixes("STATE-FILE-V2-NAME")
def rename_v2_names(fc: FixContext, finding: Finding) -> list[str]:
    """In a format-v1 checkpoint, give every state file with a format-v2 name (``<v>_<uuid>.zip|changelog``) its
    version name (``<v>.zip``), sidecars moved along, when no file of that name is there (hunt 13: the fix text
    said "rename", and nothing did). With both names present which one is version v is unclear: refused."""
    ck = fc.ckpt
    if ck.state_format_v2():
        raise CannotFix("the checkpoint is of format v2: its state files carry unique ids by design")
    moved: list[str] = []
    for op in sorted(ck.state.operators.values(), key=lambda o: o.operator):
        for _part, stores in sorted(op.partitions.items()):
            for _name, store in sorted(stores.items()):
                for (kind, version, uid), rel in sorted(store.files.items(), key=lambda kv: kv[1]):
                    if not uid or kind not in ("zip", "changelog"):
                        continue
                    canonical = f"{store.rel}/{layout.state_file_name(version, kind)}"
                    if (kind, version, None) in store.files or canonical in ck.entries:
                        raise CannotFix(
                            f"{rel} and {canonical} both exist: which one is version {version} is unclear; move the "
                            "wrong one out of the checkpoint"
                        )
                    fc.builder.copy(
                        canonical, rel, f"the version name of {rel} (format v1 reads only it)", finding.rule_id
                    )
                    fc.builder.delete(rel, f"renamed to {canonical}", finding.rule_id)
                    moved.append(rel)
    if not moved:
        raise CannotFix("no state file with a format-v2 name (the checkpoint changed?)")
    return [f"Spark reads the {len(moved)} renamed state file(s) under their version names; no batch re-runs"]
