"""``state rebuild``: write a snapshot of version N built from the newest good snapshot before
it plus the deltas/changelogs, through the repair engine (plan, apply, undo).

HDFS-backed stores get ``N.snapshot`` (records in any order, the query's codec). RocksDB
stores get ``N.zip`` plus fresh SSTs under ``SSTs/`` (a new database holding exactly the key
and value bytes of version N, with the column-family mapping of the base snapshot and exact
key counts); checkpoint format v2 names the zip ``N_<id>.zip`` with the unique id the commit
log gives version N. A corrupt snapshot at N is replaced (it is backed up first); a corrupt
older one is skipped the way Spark 4.2+ skips it, so 3.5 checkpoints can be repaired.

``prune`` then deletes what Spark's own cleanup would delete once the new snapshot exists:
every file older than the base of the oldest version Spark retains
(``minBatchesToRetain``, default 100), so a query whose maintenance fell behind does not
keep replaying a pile of changelogs -- and nothing Spark still expects goes away.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ckptfix import layout
from ckptfix.checkpoint import Checkpoint, StoreDir
from ckptfix.errors import (
    FormatError,
    RebuildRefused,
)
from ckptfix.formats import codec, filechecksum, rocksdbzip, statefile, unsaferow
from ckptfix.formats.statefile import Record
from ckptfix.repair.builder import PlanBuilder
from ckptfix.repair.plan import Plan
from ckptfix.state.read import Selection, select, store_chain
from ckptfix.state.schemas import any_kind
from ckptfix.stores import chain as chains
from ckptfix.stores import records

RULE = "STATE-REBUILD"
RETAIN_CONF = "spark.sql.streaming.minBatchesToRetain"
DEFAULT_RETAIN = 100
ROCKS_COMPRESSION = "spark.sql.streaming.stateStore.rocksdb.compression"


@dataclass
class StoreRebuild:
    store: str  # rel path of the store directory
    chain: str  # what the new snapshot was built from
    keys: int
    written: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # unreadable snapshots passed over


@dataclass
class RebuildResult:
    plan: Plan
    version: int
    stores: list[StoreRebuild]


def _chain_past_corruption(
    sel: Selection, store: StoreDir, skipped: list[str], damaged: tuple[int, ...] = ()
) -> tuple[chains.Chain, list[Any]]:
    """The chain for the version and its checked content, skipping unreadable snapshots and the ``damaged``
    ones (snapshot versions the audit found damaged where ckptfix's reader is not hurt: a Hadoop sidecar that
    disagrees, a bloom filter block)."""
    exclude: list[int] = list(damaged)
    while True:
        chain = store_chain(sel, store, exclude=tuple(exclude))
        try:
            return chain, _content(sel, chain)
        except FormatError as exc:
            base = chain.base
            # a delta/changelog failing is fatal; the base (or an SST it lists) failing is not
            in_step = any(f"/{step.name}" in exc.path for step in chain.steps)
            if base is None or in_step or sel.from_snapshot is not None:
                raise
            skipped.append(f"{base.rel}: expected {exc.expected}, found {exc.found}")
            exclude.append(base.version)


def rebuild_hint(sel: Selection, exc: FormatError, checkpoint: str) -> str | None:
    """The next step after reading ``sel`` failed with ``exc``: when the damaged file is the snapshot (HDFS
    ``N.snapshot``, RocksDB ``N.zip``) a selected store's version starts from, and the version can be built
    without it (an older snapshot plus the deltas/changelogs after it, all there), the ``state rebuild``
    command that writes a new snapshot of the version that way. None where rebuild cannot help: a damaged
    delta or changelog (rebuild refuses), a snapshot asked for with ``--from-snapshot``, no other chain
    to the version. For a missing or damaged SST (an older zip may list the same file), the audit that decides
    whether ``repair`` can write the version again."""
    if sel.from_snapshot is not None:
        return None
    if "/SSTs/" in exc.path and exc.kind in ("missing-file", "sst-size", "corrupt-sst"):
        # an older zip may list the same table: the audit decides, and repair rebuilds where it can
        return (
            f"`ckptfix audit {shlex.quote(checkpoint)}` says whether `ckptfix repair` can write version "
            f"{sel.version} again from an older zip and the changelogs after it (changelog checkpointing); else "
            "restore the SST from a backup"
        )
    for part in sel.partitions:
        for store in sel.op.partitions.get(part, {}).values():
            try:
                chain = store_chain(sel, store)
            except FormatError:
                continue
            base = chain.base
            if base is None or exc.path != sel.ckpt.display(base.rel):
                continue
            try:
                other = store_chain(sel, store, exclude=(base.version,))
            except FormatError:
                return None
            command = (
                f"ckptfix state rebuild {shlex.quote(checkpoint)} --version {sel.version} "
                f"--operator {sel.op.operator} --partition {part}"
            )
            hint = f"`{command}` writes a new snapshot of version {sel.version} from {other.describe()}"
            if other.base is None:
                return hint
            # read past it without writing: --from-snapshot takes the batch after which the snapshot was written
            read = (
                f"ckptfix state read {shlex.quote(checkpoint)} --version {sel.version} "
                f"--operator {sel.op.operator} --from-snapshot {other.base.version - 1}"
            )
            return f"{hint}; `{read}` reads the version from there without writing anything"
    return None


def _content(sel: Selection, chain: chains.Chain) -> list[Any]:
    if chain.provider == "hdfs":
        return list(_hdfs_raw(sel, chain))
    return _rocks_raw(sel, chain)


def _hdfs_raw(sel: Selection, chain: chains.Chain) -> list[tuple[bytes, bytes]]:
    """(key, value) records of the version exactly as a snapshot stores them (row checksums
    and all), in any order."""
    ck, sidecars = sel.ckpt, chain.store.checksums
    state: dict[bytes, bytes] = {}
    if chain.base is not None:
        for rec in records.file_records(ck, chain.base, sel.codec, sidecars):
            assert rec.value is not None
            state[rec.key] = rec.value
    for step in chain.steps:
        for rec in records.file_records(ck, step, sel.codec, sidecars):
            if rec.value is None:
                key = rec.key[records.ROW_CHECKSUM_BYTES :] if sel.row_checksum else rec.key
                state.pop(key, None)
            else:
                state[rec.key] = rec.value
    return list(state.items())


def _rocks_raw(sel: Selection, chain: chains.Chain) -> list[Any]:
    delimiter = sel.delimiter
    with records.rocksdb_pairs(sel.ckpt, chain, sel.codec, b"," if delimiter is None else delimiter) as (pairs, meta):
        return [(k, v) for k, v, *_ in pairs] + [meta]


def plan_rebuild(
    url: str | Checkpoint,
    *,
    version: int | None = None,
    batch: int | None = None,
    operator: int | None = None,
    partition: int | None = None,
    prune: bool = False,
    retain: int | None = None,
    target_spark: str = "4.3",
    storage_options: Mapping[str, Any] | None = None,
) -> RebuildResult:
    ckpt = url if isinstance(url, Checkpoint) else Checkpoint.open(url, storage_options)
    if not ckpt.state.operators:
        raise RebuildRefused(f"{ckpt.display('state')} holds no state store")
    builder = PlanBuilder(ckpt, target_spark)
    stores: list[StoreRebuild] = []
    ops = [operator] if operator is not None else sorted(ckpt.state.operators)
    sel = None
    for op_id in ops:
        sel = select(
            ckpt,
            operator=op_id,
            version=version,
            batch=batch,
            partition=partition,
            store_name="default",
            **any_kind(ckpt, op_id),
        )
        for part in sel.partitions:
            for name in sorted(sel.op.partitions[part]):
                store = sel.op.partitions[part][name]
                stores.append(rebuild_store(sel, store, builder, prune, retain))
    assert sel is not None
    n = sel.version
    fix = f"{RULE}: write a snapshot of state version {n} (after batch {n - 1}) for {len(stores)} store(s)"
    effects = [
        f"Spark loads version {n} from the new snapshot instead of replaying deltas/changelogs",
        "no batch is re-run and no output changes: the state content is the same",
    ]
    if prune:
        effects.append("older files Spark's own cleanup would delete are deleted (backed up first)")
    notes = [f"{s.store}: from {s.chain}, {s.keys} keys" for s in stores]
    notes += [f"skipped unreadable {bad}" for s in stores for bad in s.skipped]
    return RebuildResult(builder.build(fix, [RULE], effects, notes, aims_at_restart=False), n, stores)


def rebuild_store(
    sel: Selection,
    store: StoreDir,
    builder: PlanBuilder,
    prune: bool,
    retain: int | None,
    damaged: tuple[int, ...] = (),
) -> StoreRebuild:
    skipped: list[str] = []
    chain, content = _chain_past_corruption(sel, store, skipped, damaged)
    n = sel.version
    if chain.base is not None and chain.base.version == n:
        # version N already loads from a good snapshot: nothing to write
        if prune:
            _prune(sel, store, builder, retain)
        keys = len(content) - (0 if chain.provider == "hdfs" else 1)
        return StoreRebuild(store.rel, chain.describe() + " (already a snapshot, kept)", keys, [], skipped)
    reason = f"snapshot of version {n} = {chain.describe()}"
    meta = None if chain.provider == "hdfs" else content.pop()
    written = write_snapshot(sel, store, chain, content, meta, builder, reason, RULE)
    result = StoreRebuild(store.rel, chain.describe(), len(content), written, skipped)
    if prune:
        _prune(sel, store, builder, retain)
    return result


def read_version(sel: Selection, chain: chains.Chain) -> tuple[list[tuple[bytes, bytes]], dict[str, Any] | None]:
    """The (key, value) pairs of the chain's version exactly as a snapshot stores them (RocksDB: with the
    base zip's metadata fields, None for HDFS). Every file of the chain is read and checked."""
    content = _content(sel, chain)
    if chain.provider == "hdfs":
        return content, None
    meta: dict[str, Any] = content.pop()
    return content, meta


def write_snapshot(
    sel: Selection,
    store: StoreDir,
    chain: chains.Chain,
    pairs: list[tuple[bytes, bytes]],
    meta: dict[str, Any] | None,
    builder: PlanBuilder,
    reason: str,
    rule: str,
    unique_id: str | None = None,
    segments: list[tuple[Any, Any]] | None = None,
) -> list[str]:
    """Plan the snapshot of version ``sel.version`` holding exactly ``pairs`` (HDFS: ``N.snapshot`` in the
    query's codec; RocksDB: ``N.zip`` + fresh SSTs, ``meta`` giving the column-family fields). An existing
    snapshot of that version is replaced (the engine backs it up). ``unique_id``: name a RocksDB zip
    ``N_<unique_id>.zip`` (checkpoint format v2) with this id instead of the one the chain gives version N.
    ``segments``: the pairs as (key rows, value rows) Arrow arrays instead (:func:`ckptfix.stores.records.bulk_pairs`:
    RocksDB rows without the version byte; no column families). Returns the files written."""
    n = sel.version
    if chain.provider == "hdfs":
        rel = f"{store.rel}/{layout.state_file_name(n, 'snapshot')}"
        if segments is not None:
            raw = records.snapshot_bytes(segments)
        else:
            raw = statefile.dump_snapshot([Record(k, v) for k, v in pairs])
        builder.write(rel, codec.compress(sel.codec, raw, sel.ckpt.display(rel)), reason, rule)
        return [rel]
    if segments is not None:
        if (meta or {}).get("columnFamilyMapping"):
            raise ValueError("segments of a store with column families")
        content: Iterable[tuple[bytes, bytes]] = records.prefixed_pairs(
            segments, bytes([unsaferow.STATE_ENCODING_VERSION])
        )
        count = sum(len(keys) for keys, _ in segments)
        return _rocks_snapshot(sel, store, chain, content, meta or {}, builder, reason, rule, unique_id, count)
    return _rocks_snapshot(sel, store, chain, pairs, meta or {}, builder, reason, rule, unique_id)


def _rocks_snapshot(
    sel: Selection,
    store: StoreDir,
    chain: chains.Chain,
    content: Iterable[Any],
    meta: dict[str, Any],
    builder: PlanBuilder,
    reason: str,
    rule: str,
    unique_id: str | None = None,
    count: int | None = None,
) -> list[str]:
    from ckptfix.stores import rocks

    n = sel.version
    uid = unique_id
    if uid is None and any(u for (_, _, u) in store.files):  # checkpoint format v2
        uid = chain.steps[-1].unique_id if chain.steps else (chain.base.unique_id if chain.base else None)
    mapping = meta.get("columnFamilyMapping") or {}
    types = meta.get("columnFamilyTypeMap") or {}
    cf_fields: dict[str, Any] | None = None
    if count is None:
        content = list(content)
        count = len(content)
    num_keys = count
    if mapping:
        assert isinstance(content, list)
        internal_ids = {i for name, i in mapping.items() if types.get(name)}
        internal = sum(
            1 for k, _ in content if len(k) >= 2 and int.from_bytes(k[:2], "little", signed=True) in internal_ids
        )
        num_keys = count - internal
        cf_fields = {
            "numInternalKeys": internal,
            "columnFamilyMapping": mapping,
            "columnFamilyTypeMap": types,
            "maxColumnFamilyId": meta.get("maxColumnFamilyId") or max(mapping.values()),
        }
    elif written_by_spark4(sel):
        cf_fields = dict(rocks.NO_COLUMN_FAMILIES_4X)
    compression = sel.conf.get(ROCKS_COMPRESSION, "lz4" if written_by_spark4(sel) else "snappy").lower()
    built = rocks.build_snapshot(
        iter(content),
        compression=compression,
        column_family_fields=cf_fields,
        num_keys=num_keys,
        metadata_version=meta.get("metadataVersion") or zip_metadata_version(sel.ckpt, store),
    )
    written = []
    for dfs, data in sorted(built.ssts.items()):
        rel = f"{store.rel}/SSTs/{dfs}"
        builder.write(rel, data, f"SST of the new {n}.zip", rule)
        written.append(rel)
    zip_rel = f"{store.rel}/{layout.state_file_name(n, 'zip', uid)}"
    builder.write(zip_rel, built.zip_bytes, reason, rule)
    written.append(zip_rel)
    if uid is not None and f"{zip_rel.rsplit('/', 1)[-1]}.crc" not in store.checksums and store.checksums:
        # the store has 4.x checksum sidecars: give the new zip one too
        side = f"{zip_rel}.crc"
        builder.write(side, filechecksum.dump(filechecksum.make(built.zip_bytes)), f"checksum of {zip_rel}", rule)
        written.append(side)
    return written


def zip_metadata_version(ckpt: Checkpoint, store: StoreDir) -> int:
    """The ``v<N>`` header of the store's newest readable zip's metadata, for a zip written without a base zip to
    copy it from (hunt 13: a rebuilt zip of a Spark 4.0 format-v2 store said ``v1``, and 4.0.5 refused it with
    CANNOT_READ_CHECKPOINT; it reads only ``v2`` there). 1 when the store has no readable zip."""
    for (kind, _, _), rel in sorted(store.files.items(), key=lambda item: item[0][1], reverse=True):
        if kind != "zip":
            continue
        try:
            return rocksdbzip.parse(ckpt.read(rel), ckpt.display(rel)).metadata.version
        except (FormatError, OSError):
            continue
    return rocksdbzip.METADATA_VERSION


def written_by_spark4(sel: Selection) -> bool:
    """Whether a 4.x Spark wrote the checkpoint (4.x-only confs in the offset log)."""
    return any(
        k in sel.conf
        for k in (
            "spark.sql.streaming.stateStore.encodingFormat",
            "spark.sql.streaming.stateStore.rocksdb.mergeOperatorVersion",
        )
    )


def _prune(sel: Selection, store: StoreDir, builder: PlanBuilder, retain: int | None) -> None:
    """Delete what Spark's cleanup would delete with the new snapshot in place.

    HDFS (``HDFSBackedStateStoreProvider.cleanup``): the oldest retained version is
    ``latest - minBatchesToRetain``; every file older than its base snapshot goes (nothing
    when it has none). RocksDB (``RocksDBFileManager.deleteOldVersions``): the newest
    snapshot at or below ``newest snapshot - minBatchesToRetain + 1`` is kept with everything
    after it; older zips and changelogs go, and SSTs no kept zip lists.
    """
    keep = retain if retain is not None else int(sel.conf.get(RETAIN_CONF, DEFAULT_RETAIN))
    snap_kind = chains.SNAPSHOT_KIND[sel.provider]
    snaps = set(store.versions(snap_kind)) | {sel.version}
    if sel.provider == "hdfs":
        latest = max([v for (_, v, _) in store.files] + [sel.version])
        oldest_kept = latest - keep
        floor = max((s for s in snaps if s <= oldest_kept), default=0) if oldest_kept > 0 else 0
    else:
        oldest_kept = max(snaps) - keep + 1
        floor = max((s for s in snaps if s <= oldest_kept), default=0)
    if floor <= 0:
        return
    for (_kind, v, _uid), rel in sorted(store.files.items(), key=lambda kv: kv[0][1]):
        if v < floor:
            builder.delete(rel, f"older than version {floor}, the base Spark's cleanup keeps", RULE)
    if sel.provider == "rocksdb":
        _prune_ssts(sel, store, builder, floor)


def _prune_ssts(sel: Selection, store: StoreDir, builder: PlanBuilder, floor: int) -> None:
    """SSTs no kept zip lists (and no zip the plan writes)."""
    listed: set[str] = set()
    for (kind, v, _uid), rel in store.files.items():
        if kind == "zip" and v >= floor:
            data = builder.current(rel)
            for action in builder.actions:
                if action.path == rel and action.content is not None:
                    data = action.content
            if data is None:
                continue
            listed |= {s.dfs_sst_file_name for s in rocksdbzip.parse(data, sel.ckpt.display(rel)).metadata.sst_files}
    new = {a.path.rsplit("/", 1)[-1] for a in builder.actions if a.op == "write" and "/SSTs/" in a.path}
    for name in sorted(store.ssts):
        if name not in listed and name not in new:
            builder.delete(f"{store.rel}/SSTs/{name}", "listed by no retained zip", RULE)
