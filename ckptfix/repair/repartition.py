"""``state repartition``: move the state of the last committed batch into M partitions (a new
``spark.sql.shuffle.partitions``), in the shape Spark 4.3's own ``OfflineStateRepartitionRunner``
gives it, through the repair engine (plan, apply, undo).

What Spark's runner writes (4.3.0, ``spark._streamingCheckpointManager.repartition(ckpt, M)``,
observed on real checkpoints), and so what the plan writes, with L the last committed batch
and N = L + 1 the "repartition batch":

- ``offsets/N``: ``offsets/L`` with ``spark.sql.shuffle.partitions`` = M (watermark, timestamp,
  source offsets and every other conf unchanged). The batch reads no input: its offsets are
  those of batch L.
- state version N + 1 of every store of every operator in partitions 0..M-1, as a full
  snapshot (HDFS ``N+1.snapshot`` in the query's codec; RocksDB ``N+1.zip`` + fresh SSTs, no
  changelog), each key in the partition Spark's ``HashPartitioning`` gives it
  (:mod:`ckptfix.state.placement`). The state read is version L + 1 (the state after batch
  L), the key and value bytes are moved as they are. Partitions >= M keep their old files
  and neither Spark's restart nor its ``statestore`` reader opens them again (seen live), but
  tools that list partition directories (ckptfix's own reader) would load their old state as
  version N + 1: so, beyond what Spark's runner does, the plan writes an EMPTY snapshot of
  version N + 1 in every existing partition >= M (older versions stay). Directories above the recorded count (left by an
  earlier repartition to fewer partitions) are not read.
- operator metadata v1 and ``_metadata/schema`` / ``_stateSchema`` files are left as they are
  (they do not change with the partition count); operator metadata v2 (transformWithState) is
  versioned by batch: ``_metadata/v2/N`` is the newest one at or before L with every store's
  ``numPartitions`` = M (byte for byte what the runner writes);
- ``commits/N``: ``commits/L`` as it is; with state checkpoint format v2 (RocksDB), its
  ``stateUniqueIds`` name the new snapshots ``N+1_<id>.zip`` (a fresh id per operator,
  partition and store, as the runner does), and partitions >= M get nothing (their ids are
  not in the commit log, so no reader looks there).

On restart Spark sees batch N committed, runs batch N + 1 with M partitions and loads state
version N + 1 from the new snapshots. Spark's own runner refuses the HDFS provider
(``STATE_REPARTITION_INVALID_CHECKPOINT.UNSUPPORTED_PROVIDER``, leaving an uncommitted
``offsets/N`` behind); ckptfix does both providers.

Refused, with the reason (exit 2, nothing written): no state, no committed batch, an
uncommitted batch after the last commit (Spark: ``LAST_BATCH_FAILED``), no metadata or no
recorded shuffle partitions in ``offsets/L``, M equal to the current count (Spark:
``SHUFFLE_PARTITIONS_ALREADY_MATCH``), a custom provider, a transformWithState column family
whose keys hold no grouping key ckptfix knows (:func:`ckptfix.state.placement.tws_grouping`: TTL
indexes are placed), state checkpoint format v2 on HDFS, Avro encoding outside transformWithState
(whose Avro keys are decoded to be placed; the bytes move as they are), a directory layout that
disagrees with the recorded partition count.
Row checksums (``rowChecksum.enabled``: CRC32C of the key and value bytes, which do not
change) move with their values. Every state file of version L + 1 is read and every key
decoded before anything is planned.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ckptfix.checkpoint import Checkpoint, StoreDir
from ckptfix.errors import (
    FormatError,
    RepartitionRefused,
    UsageError,
)
from ckptfix.formats import commitlog, offsetlog, opmeta, sparkhash, unsaferow
from ckptfix.formats.unsaferow import StructType
from ckptfix.progress import ProgressLike, progress_of
from ckptfix.repair.builder import PlanBuilder
from ckptfix.repair.plan import Plan
from ckptfix.repair.rebuild import read_version, write_snapshot
from ckptfix.repair.sink_entry import DEFAULT_COMPACT_INTERVAL, plan_sink_entry
from ckptfix.sinks import open_sink
from ckptfix.state.decode import Decoder, decode_columns
from ckptfix.state.placement import TwsPlacer, placement
from ckptfix.state.read import ENCODING, Selection, bulk_store, select, store_chain
from ckptfix.state.schemas import keyless, operator_info, store_schema
from ckptfix.stores import records
from ckptfix.stores.records import ROW_CHECKSUM_BYTES

RULE = "STATE-REPARTITION"
SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"


@dataclass
class StoreMove:
    operator: int
    store: str  # store name ("default", "left-keyToNumValues", ...)
    columns: str  # the partitioning columns, for the report
    keys: int
    #: new partition -> number of keys placed there
    placed: dict[int, int] = field(default_factory=dict)
    written: list[str] = field(default_factory=list)
    #: checkpoint format v2: new partition -> the unique id of its new snapshot
    ids: dict[int, str] = field(default_factory=dict)
    #: partitions read, checked and placed in bulk (numpy, Arrow); the others one key at a time
    bulk: int = 0


@dataclass
class Repartition:
    plan: Plan
    batch: int  # the repartition batch N
    version: int  # the state version written (N + 1)
    before: int  # partitions before
    after: int  # partitions after
    stores: list[StoreMove]
    #: ``--sink OUT``: the plan that gives the file sink its entry for batch N (applied after ``plan``), and where
    sink_plan: Plan | None = None
    sink: str | None = None


def plan_repartition(
    url: str | Checkpoint,
    partitions: int,
    *,
    target_spark: str = "4.3",
    storage_options: Mapping[str, Any] | None = None,
    progress: ProgressLike = None,
    sink_path: str | None = None,
    sink_compact_interval: int = DEFAULT_COMPACT_INTERVAL,
) -> Repartition:
    """Plan the move into ``partitions`` partitions. ``sink_path``: the query's file sink (its output path), which
    then gets an entry for the repartition batch (:mod:`ckptfix.repair.sink_entry`); ``sink_compact_interval``: the
    query's ``spark.sql.streaming.fileSink.log.compactInterval`` (used when the sink's log has no compact file)."""
    say = progress_of(progress).step
    if partitions < 1:
        raise UsageError(f"--partitions: expected at least 1, found {partitions}")
    ckpt = url if isinstance(url, Checkpoint) else Checkpoint.open(url, storage_options)
    if not ckpt.state.operators:
        raise RepartitionRefused(f"{ckpt.display('state')} holds no state store (a stateless query?)")
    last = ckpt.commits.latest
    if last is None:
        raise RepartitionRefused(f"{ckpt.display('commits')} holds no committed batch: there is no state to move")
    latest = ckpt.offsets.latest
    if latest is not None and latest > last:
        raise RepartitionRefused(
            f"{ckpt.display(f'offsets/{latest}')}: batch {latest} is not committed (last commit: {last}); "
            "Spark's runner refuses this too (LAST_BATCH_FAILED): restart the query once so it commits, "
            f"or drop the batch (`ckptfix rollback {ckpt.location.url} --to-batch {last}"
            + (f" --sink {sink_path} --with-sink`" if sink_path else "`; with a file sink add `--sink OUT --with-sink`")
            + ")"
        )
    if last not in ckpt.offsets.files:
        raise RepartitionRefused(
            f"{ckpt.display(f'offsets/{last}')} is missing: the confs of the last batch are unknown"
        )
    entry = ckpt.offset(last)
    where = ckpt.display(f"offsets/{last}")
    if entry.metadata is None:
        raise RepartitionRefused(f"{where} has no metadata line to record the partition count in")
    conf = dict(entry.metadata.conf)
    recorded = conf.get(SHUFFLE_PARTITIONS)
    if recorded is None or not recorded.strip().isdigit():
        raise RepartitionRefused(f"{where}: expected {SHUFFLE_PARTITIONS} recorded, found {recorded!r}")
    current = int(recorded)
    sink = open_sink(sink_path, storage_options) if sink_path is not None else None
    if sink is not None and sink.delta is None and sink.log.latest is None:
        raise RepartitionRefused(
            f"--sink {sink_path}: expected a file sink (_spark_metadata) or a Delta table, found neither"
        )
    if current == partitions:
        if sink is not None and sink.delta is None and sink.log.latest == last - 1:
            # the checkpoint was repartitioned as batch `last` and the sink's entry is still to write (a run
            # interrupted between the two): finish it
            done = PlanBuilder(ckpt, target_spark).build(
                f"nothing: batch {last} already moved the state into {partitions} partitions", [], []
            )
            sink_entry = plan_sink_entry(sink, last, target_spark, sink_compact_interval, "the repartition batch")
            return Repartition(done, last, last + 1, current, partitions, [], sink_entry, sink_path)
        raise RepartitionRefused(f"{where}: the query already has {partitions} partitions ({SHUFFLE_PARTITIONS})")
    n = last + 1
    builder = PlanBuilder(ckpt, target_spark)
    moves: list[StoreMove] = []
    for op_id in sorted(ckpt.state.operators):
        op = ckpt.state.operators[op_id]
        info = operator_info(ckpt, op, last)
        if keyless(ckpt, op):
            raise RepartitionRefused(
                f"{ckpt.display(op.rel)}: an aggregation without grouping keys runs in one task whatever "
                f"{SHUFFLE_PARTITIONS} says (its state is in partition 0 only): there is nothing to repartition"
            )
        missing = [p for p in range(current) if p not in op.partitions]
        if missing:
            raise RepartitionRefused(
                f"{ckpt.display(op.rel)}: expected partitions 0..{current - 1} ({SHUFFLE_PARTITIONS}={current} in "
                f"{where}), found {_ranges(sorted(op.partitions))}"
            )
        for name in op.store_names:
            var = next(iter(info.column_families)) if info.is_tws else None
            sel = select(ckpt, operator=op_id, batch=last, store_name=name, state_var=var)
            _check(sel, where)
            say(f"{ckpt.display(op.rel)} {name}: reading version {sel.version}")
            moves.append(_move(sel, name, current, partitions, n + 1, builder))
        if op.metadata_v2:
            _operator_metadata_v2(ckpt, op.rel, op.metadata_v2, last, n, partitions, builder)
    rel = ckpt.offsets.files[last]
    conf[SHUFFLE_PARTITIONS] = str(partitions)
    new = dataclasses.replace(entry, metadata=dataclasses.replace(entry.metadata, conf=conf))
    builder.write(
        f"offsets/{n}",
        offsetlog.dump(new),
        f"repartition batch {n}: {rel} with {SHUFFLE_PARTITIONS}={partitions}",
        RULE,
    )
    commit = ckpt.read(ckpt.commits.files[last])
    if any(m.ids for m in moves):  # checkpoint format v2: the ids of the new snapshots, per operator/partition/store
        entry_l = ckpt.commit(last)
        ids: dict[str, list[list[str]]] = {}
        for m in moves:
            stores = operator_info(ckpt, ckpt.state.operators[m.operator], last).stores
            per = ids.setdefault(str(m.operator), [[""] * len(stores) for _ in range(partitions)])
            for part, uid in m.ids.items():
                per[part][stores.index(m.store)] = uid
        commit = commitlog.dump(dataclasses.replace(entry_l, state_unique_ids=ids))
    builder.write(f"commits/{n}", commit, f"commit of the repartition batch {n}", RULE)
    keys = sum(m.keys for m in moves)
    fix = (
        f"{RULE}: move the state after batch {last} ({keys} keys in {len(moves)} store(s)) from {current} to "
        f"{partitions} partitions as repartition batch {n}"
    )
    effects = [
        f"Spark restarts at batch {n + 1} with {SHUFFLE_PARTITIONS}={partitions} (recorded in offsets/{n}) and loads "
        f"state version {n + 1} from the new snapshots",
        f"batch {n} reads no input and writes no output (its offsets are those of batch {last}); no batch is re-run",
        "the state content is the same; each key is in the partition Spark's hash partitioning gives it",
    ]
    sink_plan: Plan | None = None
    if sink is None:
        effects.append(
            f"a file sink (_spark_metadata) gets no entry for batch {n}: Spark fails when its log next compacts "
            f"across batch {n} (BATCH_METADATA_NOT_FOUND, seen live; Spark's runner leaves the same gap): for a "
            "query that writes to a file sink, give its output path with --sink OUT"
        )
    elif sink.delta is not None:
        effects.append(
            f"the Delta sink needs no entry for batch {n}: it skips a batch id at or below the largest it committed"
        )
    else:
        sink_plan = plan_sink_entry(sink, n, target_spark, sink_compact_interval, "the repartition batch")
        effects.append(f"then the file sink at {sink_path} gets its entry for batch {n} (a second run, on the sink)")
    if partitions < current:
        effects.append(
            f"partitions {partitions}..{current - 1} keep their old files and get an empty version {n + 1}: "
            "Spark does not open them again; readers that list partition directories see no stale rows there"
        )
    notes = [
        f"operator {m.operator} {m.store}: {m.keys} keys by {m.columns} -> "
        + ", ".join(f"{p}:{c}" for p, c in sorted(m.placed.items()))
        for m in moves
    ]
    plan = builder.build(fix, [RULE], effects, notes, aims_at_restart=False)
    return Repartition(plan, n, n + 1, current, partitions, moves, sink_plan, sink_path)


def _operator_metadata_v2(
    ckpt: Checkpoint, rel: str, files: dict[int, str], last: int, n: int, partitions: int, builder: PlanBuilder
) -> None:
    """Operator metadata v2 is versioned by batch: the runner writes ``_metadata/v2/N``, the newest one at or
    before batch L with every store's ``numPartitions`` = M."""
    older = [b for b in files if b <= last]
    if not older:
        raise RepartitionRefused(
            f"{ckpt.display(rel + '/_metadata/v2')}: no operator metadata at or before batch {last}"
        )
    src = files[max(older)]
    meta = opmeta.parse(ckpt.read(src), ckpt.display(src))
    raw = json.loads(json.dumps(meta.raw))
    for store in raw.get("stateStoreInfo", []):
        store["numPartitions"] = partitions
    new = dataclasses.replace(meta, raw=raw)
    builder.write(
        f"{rel}/_metadata/v2/{n}",
        opmeta.dump(new),
        f"operator metadata of batch {n}: {src} with {partitions} partitions",
        RULE,
    )


def _ranges(parts: list[int]) -> str:
    return ", ".join(str(p) for p in parts[:12]) + (" ..." if len(parts) > 12 else "") if parts else "none"


def _check(sel: Selection, where: str) -> None:
    ckpt = sel.ckpt
    if sel.provider not in ("hdfs", "rocksdb"):
        raise RepartitionRefused(f"{ckpt.display(sel.op.rel)}: provider {sel.provider!r} is not repartitioned")
    encoding = sel.conf.get(ENCODING, "unsaferow").lower()
    if encoding != "unsaferow" and not (encoding == "avro" and sel.info.is_tws):
        raise RepartitionRefused(
            f"{where}: {ENCODING}={encoding}: only UnsafeRow-encoded state (and transformWithState's Avro-encoded "
            "column families) is repartitioned"
        )
    if _format_v2(sel) and sel.provider != "rocksdb":
        raise RepartitionRefused(
            f"{ckpt.display(f'commits/{sel.batch}')}: state checkpoint format v2 on the {sel.provider} provider"
        )


def _format_v2(sel: Selection) -> bool:
    """State checkpoint format v2: unique ids in the commit log (and in RocksDB file names)."""
    try:
        return bool(sel.ckpt.commit(sel.batch).state_unique_ids)
    except FormatError:
        return False


def _tws_placer(sel: Selection, rel: str, meta: dict[str, Any], partitions: int) -> Callable[[bytes], int]:
    """The new partition of a transformWithState key (:class:`ckptfix.state.placement.TwsPlacer`)."""
    placer = TwsPlacer(
        sel.info,
        meta.get("columnFamilyMapping") or {},
        sel.ckpt.display(rel),
        delimiter=sel.delimiter,
        row_checksum=sel.row_checksum,
        avro=sel.conf.get(ENCODING, "unsaferow").lower() == "avro",  # the key bytes move as they are, either way
    )

    def place(key: bytes) -> int:
        try:
            return placer.partition(key, partitions)
        except UsageError as exc:
            raise RepartitionRefused(f"{sel.ckpt.display(rel)}: {exc}") from None

    return place


def _store_dir(sel: Selection, name: str, part: int) -> StoreDir:
    existing = sel.op.partitions.get(part, {}).get(name)
    if existing is not None:
        return existing
    rel = f"{sel.op.rel}/{part}" + ("" if name == "default" else f"/{name}")
    return StoreDir(rel, sel.op.operator, part, name)


def _move(sel: Selection, name: str, current: int, partitions: int, version: int, builder: PlanBuilder) -> StoreMove:
    """Read version ``version - 1`` of partitions 0..current-1 (directories above them are left by an earlier
    repartition to fewer partitions, or are empty: Spark does not open them) and plan version ``version`` of
    partitions 0..partitions-1."""
    ckpt = sel.ckpt
    if sel.info.is_tws:
        if sel.provider != "rocksdb":
            raise RepartitionRefused(f"{ckpt.display(sel.op.rel)}: transformWithState on {sel.provider}")
        where = None
        cols = "the grouping key of each column family"
    else:
        sch = store_schema(ckpt, sel.op, sel.info, name)
        try:
            where = placement(sel.info, sch)
        except UsageError as exc:
            raise RepartitionRefused(f"{ckpt.display(sel.op.rel)}: {exc}") from None
        cols = "(" + ", ".join(where.columns.names) + ")"
    move = StoreMove(sel.op.operator, name, cols, 0)
    buckets: list[list[tuple[bytes, bytes]]] = [[] for _ in range(partitions)]
    #: the bulk path's pairs: per new partition, (key rows, value rows) Arrow segments
    placed: list[list[tuple[Any, Any]]] = [[] for _ in range(partitions)]
    meta: dict[str, Any] | None = None
    chain = None
    for part in range(current):
        store = sel.op.partitions[part].get(name)
        if store is None:
            rel = f"{sel.op.rel}/{part}" + ("" if name == "default" else f"/{name}")
            raise FormatError(ckpt.display(rel), 0, f"the state store {name!r}", "no directory", kind="missing-file")
        chain = store_chain(sel, store)
        if where is not None:
            bulk = _bulk_placed(sel, chain, sch, where.width, partitions)
            if bulk is not None:
                for new_part, (keys, values) in enumerate(bulk):
                    if len(keys):
                        placed[new_part].append((keys, values))
                        move.keys += len(keys)
                move.bulk += 1
                continue
        pairs, part_meta = read_version(sel, chain)
        if meta is None or (part_meta and part_meta.get("columnFamilyMapping")):
            meta = part_meta
        if where is None:
            place = _tws_placer(sel, store.rel, part_meta or {}, partitions)
            for k, v in pairs:
                buckets[place(k)].append((k, v))
        else:
            strip = sel.row_checksum and sel.provider == "hdfs"
            dec = Decoder(
                sch, sel.provider, ckpt.display(store.rel), delimiter=sel.delimiter, row_checksum=sel.row_checksum
            )
            for k, v in pairs:
                # every value is checked before anything is planned (HDFS: after its row checksum, if any)
                dec.value(v[ROW_CHECKSUM_BYTES:] if strip else v)
                buckets[where.partition(dec.key(k), partitions)].append((k, v))
        move.keys += len(pairs)
    assert chain is not None
    target = dataclasses.replace(sel, batch=version - 1, version=version)
    v2 = _format_v2(sel)
    for part, pairs in enumerate(buckets):
        segments = placed[part]
        count = len(pairs) + sum(len(keys) for keys, _ in segments)
        move.placed[part] = count
        store = _store_dir(sel, name, part)
        reason = f"version {version}: {count} key(s) Spark's hash partitioning places in partition {part}"
        uid = str(uuid.uuid4()) if v2 else None
        if uid is not None:
            move.ids[part] = uid
        if segments and pairs:  # some partitions read one by one (the bulk path did not take them): all as pairs
            pairs = pairs + _pairs_of(segments, sel.provider)
            segments = []
        move.written += write_snapshot(
            target, store, chain, pairs, meta, builder, reason, RULE, unique_id=uid, segments=segments or None
        )
    if v2:  # the commit log names the snapshot of each partition < M; Spark's runner leaves the others alone too
        return move
    for part in sorted(p for p in sel.op.partitions if p >= partitions):
        store = _store_dir(sel, name, part)
        reason = (
            f"version {version}: empty (partition {part} is not used with {partitions} partitions; its older "
            "versions stay, and readers that list partition directories show no stale rows)"
        )
        move.written += write_snapshot(target, store, chain, [], meta, builder, reason, RULE)
    return move


def _bulk_placed(sel: Selection, chain: Any, sch: Any, width: int, partitions: int) -> list[tuple[Any, Any]] | None:
    """Version ``chain.version`` of one partition's store split by new partition, in bulk: the store read into
    Arrow arrays as ``state read`` reads it (:func:`ckptfix.stores.records.bulk_pairs`), every key and value
    decoded column by column (which checks them as the row-by-row decoder would), the partitioning columns
    hashed with numpy (:func:`ckptfix.formats.sparkhash.hash_columns`). (keys, values) per new partition, as a
    snapshot stores them (RocksDB without the version byte). None where this does not apply (then the pairs are
    read, checked and placed one by one, which reports anything wrong)."""
    if sel.join_side is not None or not bulk_store(sel, sch):
        return None
    import numpy as np

    from ckptfix.state.export import arrow_type

    ckpt = sel.ckpt
    if sel.provider == "rocksdb" and chain.base is not None:
        if _column_families(sel, chain):
            return None
        delimiter = sel.delimiter
        segments = records.rocksdb_bulk_pairs(ckpt, chain, sel.codec, b"," if delimiter is None else delimiter)
    else:
        segments = records.bulk_pairs(ckpt, chain, sel.codec, sel.provider)
    if segments is None:
        return None
    key_type, value_type = arrow_type(sch.key), arrow_type(sch.value)
    columns = StructType(sch.key.fields[:width])
    out: list[tuple[list[Any], list[Any]]] = [([], []) for _ in range(partitions)]
    for keys, values in segments:
        for at in range(0, len(keys), _BULK_ROWS):
            k, v = keys.slice(at, _BULK_ROWS), values.slice(at, _BULK_ROWS)
            decoded = decode_columns(k, sch.key, key_type)
            if decoded is None or decode_columns(v, sch.value, value_type) is None:
                return None
            hashes = sparkhash.hash_columns([decoded.field(i) for i in range(width)], columns)
            if hashes is None:
                return None
            target = np.mod(hashes.astype(np.int64), partitions)
            order = np.argsort(target, kind="stable")
            bounds = np.searchsorted(target[order], np.arange(partitions + 1))
            for p in range(partitions):
                if bounds[p] < bounds[p + 1]:
                    take = records.arrow_of(order[bounds[p] : bounds[p + 1]])
                    out[p][0].append(k.take(take))
                    out[p][1].append(v.take(take))
    return [_concat(ks, vs) for ks, vs in out]


#: pairs decoded and hashed at a time on the bulk path
_BULK_ROWS = 1 << 20


def _concat(keys: list[Any], values: list[Any]) -> tuple[Any, Any]:
    import pyarrow as pa

    if not keys:
        empty = pa.array([], type=pa.binary())
        return empty, empty
    return pa.concat_arrays(keys), pa.concat_arrays(values)


def _pairs_of(segments: list[tuple[Any, Any]], provider: str) -> list[tuple[bytes, bytes]]:
    """Bulk segments as the pairs the row-by-row path holds (RocksDB: with the version byte)."""
    if provider == "rocksdb":
        return list(records.prefixed_pairs(segments, bytes([unsaferow.STATE_ENCODING_VERSION])))
    return [pair for keys, values in segments for pair in zip(keys.to_pylist(), values.to_pylist(), strict=True)]


def _column_families(sel: Selection, chain: Any) -> bool:
    """Whether the base zip of a RocksDB chain maps column families (its keys then carry their ids)."""
    from ckptfix.formats import rocksdbzip

    rel = chain.base.rel
    try:
        meta = rocksdbzip.parse(sel.ckpt.location.read(rel), sel.ckpt.display(rel)).metadata
    except FormatError:
        return True  # the row-by-row path reports it
    return bool(meta.column_family_mapping)


__all__ = ["RULE", "Repartition", "RepartitionRefused", "StoreMove", "plan_repartition"]
