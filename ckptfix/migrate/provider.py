"""``migrate provider``: convert the state of the last committed version from the HDFS-backed
state store provider to RocksDB or back, in place, through the repair engine (plan, apply, undo).

What Spark does on restart, and so what the plan writes (Spark 3.5 / 4.x source, checked live):

- Version ``N = last committed batch + 1`` is the version the restart loads (the next batch
  runs on it). For every operator / partition / store the plan reads version N with the
  source provider's chain and writes the target provider's files of version N: HDFS
  ``N.snapshot`` (the query's codec); RocksDB ``N.zip`` + its SSTs (:func:`rocks.build_snapshot`).
  Spark's HDFS provider loads ``N.snapshot`` directly; its RocksDB provider loads ``N.zip``
  with changelog checkpointing off, and with it on takes the newest zip <= N (= N) and
  replays no changelog. Every file of the source provider (deltas, snapshots, zips,
  changelogs, SSTs, their ``.crc`` sidecars) is deleted,
  backed up by the engine: the store holds what the target provider would have written.
- Encodings: HDFS keys and values are bare UnsafeRows (a value is read as its first
  ``floor(len/8)*8`` bytes); RocksDB keys and values of a store without column families and
  without a key prefix are ``0x00`` (STATE_ENCODING_VERSION) + the same UnsafeRow bytes.
- ``spark.sql.streaming.stateStore.providerClass`` is one of ``OffsetSeqMetadata``'s
  relevant confs: on restart ``setSessionConf`` copies the confs of the LATEST offset file into
  the session (overriding the user's), and the statestore reader takes the confs of the offset
  file of the batch it reads. So the conf is rewritten in the offset file of the last committed
  batch and in every later (uncommitted) one. ``rocksdb.formatVersion``, ``compression.codec``,
  ``encodingFormat`` and ``mergeOperatorVersion`` are recorded there too and kept.
  ``rocksdb.changelogCheckpointing.enabled`` and ``checkpointFormatVersion`` are NOT recorded:
  they come from the restarting session, so the user sets them (the plan says so).
- Operator metadata (``state/<op>/_metadata``) and state schema files do not record the
  provider: they are kept as they are.

Refused, with the reason: no committed batch, an uncommitted batch that left state (a file sink that logged it
makes Spark commit it without running it: :func:`ckptfix.repair.surgery.refuse_uncommitted_state`), a target equal
to the source, a custom provider
class, transformWithState / column families (HDFS cannot hold them; RocksDB -> RocksDB is not
a provider change), prefix-scan keys (session windows: RocksDB frames their keys
differently), Avro encoding, row checksums, state checkpoint format v2, a target Spark that
cannot read the result, unreadable state (every file of the chain is read and checked).
A running query is refused by the engine when the plan is applied.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from ckptfix import layout
from ckptfix.audit.targets import NEWEST, parse_target
from ckptfix.checkpoint import Checkpoint, StoreDir
from ckptfix.errors import (
    FormatError,
    ProviderRefused,
    UsageError,
)
from ckptfix.formats import codec, offsetlog, statefile, unsaferow
from ckptfix.formats.statefile import Record
from ckptfix.progress import ProgressLike, progress_of
from ckptfix.repair.builder import PlanBuilder
from ckptfix.repair.surgery import refuse_uncommitted_state
from ckptfix.state.read import ENCODING, ROW_CHECKSUM, Selection, select, store_chain
from ckptfix.state.schemas import OperatorInfo, operator_info, store_schema
from ckptfix.stores import provider as providers
from ckptfix.stores import records
from ckptfix.stores.chain import CHANGELOG_CONF, FORMAT_VERSION_CONF
from ckptfix.stores.provider import CLASSES, PROVIDER_CONF

RULE = "MIGRATE-PROVIDER"
ROCKS_COMPRESSION_CONF = "spark.sql.streaming.stateStore.rocksdb.compression"
#: the provider Spark uses when the offset log records none (SQLConf default)
DEFAULT_PROVIDER = providers.DEFAULT
SOURCE_KINDS = {"hdfs": ("delta", "snapshot"), "rocksdb": ("zip", "changelog")}
_VERSION_BYTE = bytes([unsaferow.STATE_ENCODING_VERSION])


@dataclass
class StoreMigration:
    store: str  # rel path of the store directory
    chain: str  # what version N was read from
    keys: int
    written: list[str] = field(default_factory=list)
    deleted: int = 0


@dataclass
class ProviderMigration:
    plan: Any  # repair.plan.Plan
    source: str
    target: str
    version: int
    stores: list[StoreMigration]
    #: confs Spark does not take from the offset log: the restarting session must set them
    session_confs: dict[str, str]


def provider_of(conf: Mapping[str, str]) -> str | None:
    """``hdfs``/``rocksdb`` of a recorded providerClass (Spark's default when none is recorded); None for any
    other class (the store model, :mod:`ckptfix.stores.provider`)."""
    found = providers.of(conf)
    return None if found.custom else found.kind


def plan_provider(
    url: str | Checkpoint,
    to: str,
    *,
    changelog: bool | None = None,
    target_spark: str = NEWEST,
    storage_options: Mapping[str, Any] | None = None,
    progress: ProgressLike = None,
) -> ProviderMigration:
    say = progress_of(progress).step
    target = to.strip().lower()
    if target not in CLASSES:
        raise UsageError(f"--to: expected rocksdb or hdfs, found {to!r}")
    if changelog is not None and target != "rocksdb":
        raise UsageError("--changelog applies to --to rocksdb only (the HDFS provider has no changelog)")
    spark = parse_target(target_spark)
    ckpt = url if isinstance(url, Checkpoint) else Checkpoint.open(url, storage_options)
    if not ckpt.state.operators:
        raise ProviderRefused(f"{ckpt.display('state')} holds no state store (a stateless query?)")
    last = ckpt.commits.latest
    if last is None:
        raise ProviderRefused(f"{ckpt.display('commits')} holds no committed batch: there is no state to convert")
    if last not in ckpt.offsets.files:
        raise ProviderRefused(f"{ckpt.display(f'offsets/{last}')} is missing: the confs of the last batch are unknown")
    latest = ckpt.offsets.latest
    assert latest is not None
    if latest > last + 1:
        raise ProviderRefused(
            f"offsets run to batch {latest} but the last commit is {last}: more than one uncommitted batch "
            "(repair the logs first: `ckptfix repair`)"
        )
    refuse_uncommitted_state(ckpt, ProviderRefused, "a conversion")
    entry = ckpt.offset(last)
    if entry.metadata is None:
        raise ProviderRefused(f"{ckpt.display(f'offsets/{last}')} has no metadata line to record the provider in")
    conf = dict(entry.metadata.conf)
    source = provider_of(conf)
    if source is None:
        raise ProviderRefused(f"{PROVIDER_CONF}={conf[PROVIDER_CONF]} is neither HDFS nor RocksDB")
    if source == target:
        raise ProviderRefused(f"the query already uses the {target} provider ({ckpt.display(f'offsets/{last}')})")
    _check_confs(ckpt, conf, last)
    _check_format_v1(ckpt, last)
    if spark.major < 4 and _spark4(conf):
        raise ProviderRefused(
            f"--target-spark {spark.label}: the checkpoint was written by Spark 4.x (4.x confs in its offset log); "
            "a query does not go back from 4.x to 3.5, so ckptfix writes no 3.5-shaped files for it"
        )
    version = last + 1
    builder = PlanBuilder(ckpt, spark.label)
    jobs: list[_Job] = []
    for op_id in sorted(ckpt.state.operators):
        op = ckpt.state.operators[op_id]
        info = operator_info(ckpt, op, last)
        for name in op.store_names:
            _check_operator(ckpt, op.rel, info, name, target)
            sel = select(ckpt, operator=op_id, batch=last, store_name=name)
            for part in sel.partitions:
                store = op.partitions[part].get(name)
                if store is None:
                    raise ProviderRefused(f"{ckpt.display(f'{op.rel}/{part}')}: no state store {name!r}")
                if store.provider not in (source, "unknown"):
                    raise ProviderRefused(
                        f"{ckpt.display(store.rel)}: holds {store.provider} files but the offset log records {source}"
                    )
                jobs.append(_Job(sel, store, store_chain(sel, store)))
    stores: list[StoreMigration] = []
    for job, converted in zip(jobs, _convert_all(jobs, target, spark.major >= 4), strict=True):
        say(f"{job.store.rel}: version {version} converted ({converted.keys} keys)")
        stores.append(_write_store(job, converted, builder, source, target))
    for b in range(last, latest + 1):
        _record_provider(ckpt, builder, b, target)
    session: dict[str, str] = {}
    if target == "rocksdb":
        session[CHANGELOG_CONF] = "true" if changelog else "false"
    fix = (
        f"{RULE}: convert state version {version} (after batch {last}) of {len(stores)} store(s) "
        f"from {source} to {target}"
    )
    effects = [
        f"Spark restarts on the {target} provider ({PROVIDER_CONF} in offsets/{last}"
        + (f"..{latest}" if latest > last else "")
        + ") and loads version "
        + f"{version} from the new {'N.zip' if target == 'rocksdb' else 'N.snapshot'} files",
        "no batch is re-run and no output changes: the state content is the same",
        f"only version {version} is kept: older versions cannot be read any more (undo restores them)",
    ]
    effects += [
        f"set {k}={v} in the session that restarts the query (Spark does not record it)" for k, v in session.items()
    ]
    notes = [f"{s.store}: {s.keys} keys from {s.chain}" for s in stores]
    return ProviderMigration(
        builder.build(fix, [RULE], effects, notes, aims_at_restart=False), source, target, version, stores, session
    )


def _spark4(conf: Mapping[str, str]) -> bool:
    """Whether a 4.x Spark wrote the checkpoint (the rule of ``state rebuild``)."""
    from ckptfix.repair.rebuild import written_by_spark4 as written_by_4x

    return written_by_4x(SimpleNamespace(conf=conf))  # type: ignore[arg-type]


def _check_confs(ckpt: Checkpoint, conf: Mapping[str, str], batch: int) -> None:
    where = ckpt.display(f"offsets/{batch}")
    encoding = conf.get(ENCODING, "unsaferow").lower()
    if encoding != "unsaferow":
        raise ProviderRefused(f"{where}: {ENCODING}={encoding}: only UnsafeRow-encoded state is converted")
    if conf.get(ROW_CHECKSUM, "false").lower() == "true":
        raise ProviderRefused(f"{where}: {ROW_CHECKSUM}=true: row checksums frame values differently per provider")


def _check_format_v1(ckpt: Checkpoint, last: int) -> None:
    """State checkpoint format v2 (unique ids in file names and the commit log) is refused."""
    for op in ckpt.state.operators.values():
        for stores in op.partitions.values():
            for store in stores.values():
                if any(uid for (_k, _v, uid) in store.files):
                    raise ProviderRefused(
                        f"{ckpt.display(store.rel)}: state checkpoint format v2 ({FORMAT_VERSION_CONF}=2) "
                        "is not converted"
                    )
    try:
        ids = ckpt.commit(last).state_unique_ids
    except FormatError:
        ids = None
    if ids:
        raise ProviderRefused(f"{ckpt.display(f'commits/{last}')}: state checkpoint format v2 is not converted")


def _check_operator(ckpt: Checkpoint, rel: str, info: OperatorInfo, name: str, target: str) -> None:
    where = ckpt.display(rel)
    if info.is_tws:
        raise ProviderRefused(
            f"{where}: transformWithState keeps column families ({', '.join(info.column_families)}) "
            f"that the {'HDFS' if target == 'hdfs' else 'target'} provider cannot hold"
        )
    prefix = info.num_prefix.get(name, 0)
    if not prefix:
        try:  # 3.5 wrote no operator metadata: a session window's key ends in sessionStartTime
            prefix = store_schema(ckpt, ckpt.state.operators[info.operator], info, name).encoding.num_prefix
        except FormatError:
            prefix = 0
    if prefix:
        raise ProviderRefused(
            f"{where}: store {name!r} scans by a key prefix ({prefix} column(s), e.g. session windows): "
            "RocksDB frames such keys differently; not converted"
        )


@dataclass
class _Job:
    """One store to convert: what the parent checked, for the worker that reads and converts it."""

    sel: Selection
    store: StoreDir
    chain: Any


@dataclass
class _Converted:
    """A store's version in the other provider's files (built in a worker; the parent writes them into the plan).
    ``files``: (path under the store, bytes, why) in writing order; ``keys``: the distinct keys read;
    ``built_keys``: what the built RocksDB database counts (None for a snapshot)."""

    files: list[tuple[str, bytes, str]]
    keys: int
    built_keys: int | None = None


def _convert_all(jobs: list[_Job], target: str, spark4: bool) -> Iterator[_Converted]:
    """Every store converted, in order: in forked workers, one store at a time each, where the checkpoint is local
    and forking is safe (:func:`ckptfix.state.parallel.available`), else in this process. The stores are
    independent; a worker's error reaches here as the same one-line error."""
    from ckptfix.state import parallel

    def convert(job: _Job) -> _Converted:
        if target == "rocksdb":
            return _to_rocksdb(job.sel, job.store, job.chain, spark4)
        return _to_hdfs(job.sel, job.store, job.chain)

    url = jobs[0].sel.ckpt.location.url if jobs else ""
    local = url.startswith(("file://", "/")) or "://" not in url  # remote clients do not survive a fork
    workers = parallel.default_jobs(len(jobs)) if local and parallel.available() else 1
    if workers < 2:
        yield from map(convert, jobs)
        return
    chunks = parallel.parallel_chunks(
        list(range(len(jobs))), lambda i: iter([convert(jobs[i])]), lambda items: items, workers, columnar=False
    )
    for items, _n in chunks:
        yield from items


def _write_store(job: _Job, converted: _Converted, builder: PlanBuilder, source: str, target: str) -> StoreMigration:
    sel, store, chain = job.sel, job.store, job.chain
    n = sel.version
    result = StoreMigration(store.rel, chain.describe(), converted.keys)
    for name, data, why in converted.files:
        rel = f"{store.rel}/{name}"
        builder.write(rel, data, why, RULE)
        result.written.append(rel)
    if converted.built_keys is not None and converted.built_keys != converted.keys:
        raise FormatError(
            sel.ckpt.display(store.rel),
            0,
            f"{converted.keys} distinct keys in version {n}",
            f"{converted.built_keys} in the RocksDB database built from them",
            kind="duplicate-keys",
        )
    for rel in sorted(store.files.values()):
        builder.delete(rel, f"{source} file: the {target} provider loads version {n} from the new files", RULE)
        result.deleted += 1
    for sst in sorted(store.ssts):
        builder.delete(f"{store.rel}/SSTs/{sst}", f"SST of the {source} provider", RULE)
        result.deleted += 1
    for rel in sorted(store.temp):
        builder.delete(rel, "temporary file of an unfinished write", RULE)
        result.deleted += 1
    return result


def _to_rocksdb(sel: Selection, store: StoreDir, chain: Any, spark4: bool) -> _Converted:
    """``spark4``: the target Spark is 4.x -- its zip metadata shape (column-family fields) and default codec."""
    from ckptfix.stores import rocks

    counted = [0]

    def framed() -> Iterator[tuple[bytes, bytes]]:
        for key, value, *_ in records.hdfs_pairs(sel.ckpt, chain, sel.codec):
            counted[0] += 1
            yield _VERSION_BYTE + key, _VERSION_BYTE + value

    # in bulk where the chain allows it (else the record-by-record reader, which reports a file it cannot frame);
    # bulk pairs hold one pair per distinct key (its last write, found by a hash checked against the keys), so
    # RocksDB need not count them again
    segments = records.bulk_pairs(sel.ckpt, chain, sel.codec, "hdfs")
    num_keys = None
    if segments is not None:
        num_keys = counted[0] = sum(len(keys) for keys, _ in segments)
    compression = sel.conf.get(ROCKS_COMPRESSION_CONF, "lz4" if spark4 else "snappy").lower()
    built = rocks.build_snapshot(
        framed() if segments is None else records.prefixed_pairs(segments, _VERSION_BYTE),
        compression=compression,
        column_family_fields=rocks.NO_COLUMN_FAMILIES_4X if spark4 else None,
        num_keys=num_keys,
    )
    n = sel.version
    files = [(f"SSTs/{dfs}", data, f"SST of the new {n}.zip") for dfs, data in sorted(built.ssts.items())]
    files.append(
        (layout.state_file_name(n, "zip"), built.zip_bytes, f"RocksDB snapshot of version {n} = {chain.describe()}")
    )
    return _Converted(files, counted[0], built.metadata.num_keys)


def _unframe(data: bytes, what: str, where: str) -> bytes:
    if not data or data[0] != unsaferow.STATE_ENCODING_VERSION:
        found = f"0x{data[0]:02x}" if data else "0 bytes"
        raise FormatError(where, 0, f"a RocksDB {what} starting with version byte 0x00", found, kind="bad-row")
    return data[1:]


def _to_hdfs(sel: Selection, store: StoreDir, chain: Any) -> _Converted:
    n = sel.version
    name = layout.state_file_name(n, "snapshot")
    display = sel.ckpt.display(f"{store.rel}/{name}")
    # in bulk where every key and value frames cleanly: changelogs alone (no zip, so no column families) are
    # replayed, a zip's database is read into Arrow arrays (the version byte cut off)
    delimiter = b"," if sel.delimiter is None else sel.delimiter
    meta: dict[str, Any] = {}
    if chain.base is None:
        segments = records.bulk_pairs(sel.ckpt, chain, sel.codec, "rocksdb")
    else:
        segments = records.rocksdb_bulk_pairs(sel.ckpt, chain, sel.codec, delimiter, meta)
        _refuse_column_families(sel, store, chain, meta)
    if segments is not None:
        raw = records.snapshot_bytes(segments)
        keys = sum(len(k) for k, _ in segments)
    else:
        out: list[Record] = []
        with records.rocksdb_pairs(sel.ckpt, chain, sel.codec, delimiter) as (pairs, meta):
            _refuse_column_families(sel, store, chain, meta)
            for key, value, where, *_ in pairs:
                out.append(Record(_unframe(key, "key", where), _unframe(value, "value", where)))
        raw = statefile.dump_snapshot(out)
        keys = len(out)
    return _Converted([(name, codec.compress(sel.codec, raw, display), f"snapshot of version {n}")], keys)


def _refuse_column_families(sel: Selection, store: StoreDir, chain: Any, meta: Mapping[str, Any]) -> None:
    if meta.get("columnFamilyMapping"):
        raise ProviderRefused(
            f"{sel.ckpt.display(chain.base.rel if chain.base else store.rel)}: column families "
            f"({', '.join(meta['columnFamilyMapping'])}) cannot be held by the HDFS provider"
        )


def _record_provider(ckpt: Checkpoint, builder: PlanBuilder, batch: int, target: str) -> None:
    rel = ckpt.offsets.files[batch]
    entry = ckpt.offset(batch)
    if entry.metadata is None:
        raise ProviderRefused(f"{ckpt.display(rel)} has no metadata line to record the provider in")
    conf = dict(entry.metadata.conf)
    conf[PROVIDER_CONF] = CLASSES[target]
    new = dataclasses.replace(entry, metadata=dataclasses.replace(entry.metadata, conf=conf))
    builder.write(rel, offsetlog.dump(new), f"record {PROVIDER_CONF}={CLASSES[target]}", RULE)
