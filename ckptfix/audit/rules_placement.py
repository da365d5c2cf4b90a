"""STATE-PARTITION-MISPLACED: a partition directory holding another partition's keys.

Spark places every state key in the shuffle partition ``pmod(murmur3(partitioning columns), numPartitions)``
gives it (:mod:`ckptfix.state.placement`) and no provider checks it on load: a partition directory restored from the
wrong path, or two swapped by a copy script, load without a word, and each key is then looked up in a partition
that does not hold it. Damage hunt 8 (2026-11-27, Spark 4.3.0; an aggregation, a stream-stream join and
dropDuplicatesWithinWatermark on HDFS, RocksDB with changelog and checkpoint format v2): every such copy restarted,
then emitted a second row for a window already emitted, restarted counts from zero, or let duplicates through.

The check samples the keys of the newest file of each partition's restart chain (a delta, snapshot or changelog
the chain check reads anyway; for a zip, the first data block of its smallest SST), decodes them with the stored
schema and hashes them. It checks nothing where it could be wrong: a checkpoint whose offset log does not record
``useStrictDistribution=true`` (before Spark 3.3 an operator kept the placement of a child already partitioned by
a subset of its keys), and keys ckptfix does not place. transformWithState (RocksDB): keys of the newest zip's
smallest SST, each placed by the grouping key inside its column family's key.
"""

from __future__ import annotations

from collections.abc import Iterator

from ckptfix.audit.context import AuditContext
from ckptfix.audit.model import Evidence, Finding
from ckptfix.audit.registry import check, define
from ckptfix.audit.rules_state import CODEC, expected_partitions, store_unique_id, unique_ids
from ckptfix.checkpoint import OperatorDir, StoreDir
from ckptfix.errors import FormatError, UsageError
from ckptfix.formats import codec, rocksdbzip
from ckptfix.state.decode import Decoder
from ckptfix.state.placement import Placement, TwsPlacer, placement
from ckptfix.state.schemas import OperatorInfo, operator_info, store_schema
from ckptfix.stores import chain as chains
from ckptfix.stores import provider as providers
from ckptfix.stores import sample

STRICT = "spark.sql.streaming.statefulOperator.useStrictDistribution"
ENCODING = "spark.sql.streaming.stateStore.encodingFormat"
SAMPLE = 16  # keys decoded per partition and store
FILES = 4  # files read per partition and store, at most, to find keys

MISPLACED = define(
    "STATE-PARTITION-MISPLACED",
    "error",
    "A state partition holds keys of another partition",
    "Spark hash-partitions every stateful operator's input by its keys and loads partition p's store in task p; "
    "nothing checks that the store holds partition p's keys. A partition directory restored from another one, or "
    "two swapped, restart without an error and give wrong results: the keys are looked up where they are not, so "
    "aggregates start again (append mode then emits a window twice), deduplication lets duplicates through and "
    "joins miss their matches (damage hunt 8, Spark 4.3.0). ckptfix decodes a sample of the keys of each "
    "partition's restart chain (newest file first; a zip's smallest SST) and hashes them as Spark's "
    "HashPartitioning does.",
    "Put each partition's files back in its own directory (from a backup, or by swapping the directories the "
    "finding pairs), then audit again.",
)


@check
def state_placement(ctx: AuditContext) -> Iterator[Finding]:
    ck, N = ctx.ckpt, ctx.state_version
    if N <= 0 or not ck.state.operators or ctx.conf.get(STRICT, "").lower() != "true":
        return
    ids = unique_ids(ctx, N)
    compression = codec.normalize(ctx.conf.get(CODEC, "lz4"))
    for op_id, op in sorted(ck.state.operators.items()):
        n, store_names = expected_partitions(ctx, op)
        found = providers.of(ctx.conf, op)
        if n is None or n <= 1 or found.custom:
            continue
        try:
            info = operator_info(ck, op, N - 1)
        except FormatError:
            continue
        wrong: dict[int, dict[int, str]] = {}  # partition -> partition its keys belong to -> the file read
        if info.is_tws:
            if found.kind == "rocksdb":
                _tws_placement(ctx, op, info, n, ids, wrong)
            if wrong:
                yield _finding(ctx, op_id, wrong)
            continue
        for s_index, name in enumerate(store_names):
            try:
                sch = store_schema(ck, op, info, name)
                where, decoder = placement(info, sch), Decoder(sch, found.kind, ck.display(op.rel))
            except (FormatError, UsageError):
                continue
            if where.width == 0:  # no key columns (a global aggregation: AllTuples, one task): nothing to place
                continue
            for p in sorted(op.partitions):
                store = op.partitions[p].get(name)
                if p >= n or store is None:
                    continue
                uid = store_unique_id(ids, op_id, p, s_index)
                if ids is not None and uid is None:
                    continue
                # newest first, until a file holds keys (a dropDuplicates delta holds only the keys first seen in
                # its batch: often none)
                for step in sample.newest_steps(store, N, found.kind, uid)[:FILES]:
                    got = _partitions_of_sample(ctx, store, step, compression, decoder, where, n)
                    for g in got:
                        if g != p:
                            wrong.setdefault(p, {})[g] = step.rel
                    if got:
                        break
        if wrong:
            yield _finding(ctx, op_id, wrong)


def _tws_placement(
    ctx: AuditContext,
    op: OperatorDir,
    info: OperatorInfo,
    n: int,
    ids: dict[str, list[list[str]]] | None,
    wrong: dict[int, dict[int, str]],
) -> None:
    """transformWithState (RocksDB, one store whose keys start with a column family id): keys sampled from the
    smallest SST of the chain's newest zip, each placed by the grouping key inside its family's key."""
    ck = ctx.ckpt
    avro = ctx.conf.get(ENCODING, "unsaferow").lower() == "avro"
    for p in sorted(op.partitions):
        store = op.partitions[p].get("default")
        uid = store_unique_id(ids, op.operator, p, 0)
        if p >= n or store is None or (ids is not None and uid is None):
            continue
        for step in [s for s in sample.newest_steps(store, ctx.state_version, "rocksdb", uid) if s.kind == "zip"][:1]:
            path = ck.display(step.rel)
            try:
                meta = rocksdbzip.parse(ck.read(step.rel), path).metadata
                keys = sample.sst_keys(ck, store, meta, SAMPLE)
            except FormatError:
                continue
            placer = TwsPlacer(info, meta.column_family_mapping or {}, path, avro=avro)
            for key in keys:
                try:
                    got = placer.partition(key, n)
                except (FormatError, UsageError, TypeError, ValueError, KeyError):
                    continue  # a family ckptfix does not place (or cannot decode): no evidence either way
                if got != p:
                    wrong.setdefault(p, {})[got] = step.rel


def _partitions_of_sample(
    ctx: AuditContext,
    store: StoreDir,
    step: chains.Step,
    compression: str,
    decoder: Decoder,
    where: Placement,
    n: int,
) -> list[int]:
    """The partitions Spark's hash partitioning gives the first :data:`SAMPLE` keys of ``step`` ([] when the file
    cannot be read: the chain check reports that)."""
    try:
        keys = sample.first_keys(ctx.ckpt, store, step, compression, SAMPLE)
        return [where.partition(decoder.key(key), n) for key in keys]
    except (FormatError, UsageError, TypeError, ValueError, KeyError):
        return []


def _finding(ctx: AuditContext, op_id: int, wrong: dict[int, dict[int, str]]) -> Finding:
    ck = ctx.ckpt
    pairs = [
        f"partition {p} holds keys of partition(s) {', '.join(str(g) for g in sorted(gs))}" for p, gs in wrong.items()
    ]
    swapped = sorted({tuple(sorted((p, g))) for p, gs in wrong.items() for g in gs if p in wrong.get(g, {})})
    hint = (
        "; looks swapped: " + ", ".join(f"state/{op_id}/{a} <-> state/{op_id}/{b}" for a, b in swapped)
        if swapped
        else ""
    )
    evidence = [
        Evidence(ck.display(rel), expected=f"keys of partition {p}", found=f"keys of partition {g}")
        for p, gs in sorted(wrong.items())
        for g, rel in sorted(gs.items())
    ]
    return MISPLACED.finding(
        f"operator {op_id}: {'; '.join(pairs)} (Spark's hash partitioning of the decoded keys){hint}: Spark "
        "restarts and looks each key up in the partition it belongs to, where it is not: counts start again, "
        "windows are emitted twice, duplicates pass",
        evidence[:6],
        silent=True,
    )


__all__ = ["MISPLACED", "state_placement"]
