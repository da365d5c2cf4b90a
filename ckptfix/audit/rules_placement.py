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

from ckptfix.audit import sampled
from ckptfix.audit.context import AuditContext
from ckptfix.audit.model import Evidence, Finding, SparkError
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
            fits = sampled.store_rows(ctx, op, name)
            if fits is not None and any(r.error is not None for r in fits.values()):
                continue  # rows the stored schema does not describe decode as garbage keys: STATE-SCHEMA-ROWS
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


SCHEMA_ROWS = define(
    "STATE-SCHEMA-ROWS",
    "error",
    "A stored state schema does not describe the stored rows",
    "At the first batch of a restart Spark reads partition 0's <store>/_metadata/schema and compares it with the "
    "query's key and value schemas; the rows in the state files were written by the query. A schema file restored "
    "from another operator or store, or a partition directory copied from another operator, breaks that (damage "
    "hunt 8, 4.3: STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE for an aggregation whose schema file was a join store's, "
    "and for an operator's partition 0 copied from another operator; 3.5's StateSchemaNotCompatible). ckptfix "
    "decodes a sample of every partition's rows (the newest state file's first rows, keys and values; a zip's "
    "smallest SSTs' first entries) with the stored schema: a row fits when it decodes and, with fixed-width "
    "fields only, has exactly their size. Where no partition's rows fit, the schema file is not the query's, and "
    "Spark's check fails (the query being the one that wrote the rows); where some partitions' rows fit and "
    "others' do not, rows or schema came from elsewhere, and what Spark does depends on which (not recorded: "
    "unknown). Not checked: transformWithState, Avro-encoded state, row checksums.",
    "Put the operator's own schema file (or the partition directories that came from elsewhere) back from a "
    "backup of this checkpoint, then audit again; `ckptfix audit --against MODULE:FUNCTION` compares the stored "
    "schema with the query's.",
)


@check
def schema_rows(ctx: AuditContext) -> Iterator[Finding]:
    ck, N = ctx.ckpt, ctx.state_version
    if N <= 0 or not ck.state.operators:
        return
    for op_id, op in sorted(ck.state.operators.items()):
        _, store_names = expected_partitions(ctx, op)
        for name in store_names:
            by_part = sampled.store_rows(ctx, op, name)
            bad = {p: r for p, r in (by_part or {}).items() if r.error is not None}
            if by_part and bad:
                yield _schema_rows_finding(ctx, op_id, name, sampled.schema_file(ctx, op, name), by_part, bad)


def _schema_rows_finding(
    ctx: AuditContext,
    op_id: int,
    store: str,
    schema_file: str,
    by_part: dict[int, sampled.Rows],
    bad: dict[int, sampled.Rows],
) -> Finding:
    ck = ctx.ckpt
    label = f"operator {op_id}" + ("" if store == "default" else f" store {store}")
    first = bad[min(bad)]
    assert first.error is not None
    evidence = [
        Evidence(
            ck.display(r.rel),
            expected=f"rows {schema_file} describes",
            found=f"{'a key' if r.in_key else 'a value'} where {r.error.expected} was expected" if r.error else "",
        )
        for _, r in sorted(bad.items())[:4]
    ]
    if len(bad) < len(by_part):
        good = sorted(set(by_part) - set(bad))
        return SCHEMA_ROWS.finding(
            f"{label}: the rows of partition(s) {', '.join(map(str, sorted(bad)))} do not fit the stored schema "
            f"({schema_file}), the rows of partition(s) {', '.join(map(str, good))} do: rows or schema came from "
            "another operator or store; what Spark does at the restart depends on which (unknown)",
            evidence,
            undecided=True,
        )
    what = "key" if any(r.in_key for r in bad.values()) else "value"
    if ctx.target.error_classes:
        cls = "Key" if what == "key" else "Value"
        error = (
            SparkError(
                f"org.apache.spark.sql.execution.streaming.state.StateStore{cls}SchemaNotCompatible",
                f"STATE_STORE_{what.upper()}_SCHEMA_NOT_COMPATIBLE",
                f"Provided {what} schema does not match existing state {what} schema.",
            )
            if what == "key"
            # a value that does not fit: the key may still look compatible to Spark or not (a foreign key schema can
            # decode as garbage): Spark's check fails on one of the two
            else SparkError(
                None,
                None,
                "STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE or STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE: Provided key (or "
                "value) schema does not match existing state key (or value) schema.",
            )
        )
    else:
        error = SparkError(
            "org.apache.spark.sql.execution.streaming.state.StateSchemaNotCompatible",
            None,
            "Provided schema doesn't match to the schema for existing state!",
        )
    err = first.error
    return SCHEMA_ROWS.finding(
        f"{label}: no partition's rows fit the stored schema ({schema_file}): a {what} in {ck.display(first.rel)} "
        f"(row {first.decoded + 1}): expected {err.expected}, found {err.found}; the schema file is not the one of "
        "the query that wrote the rows, and Spark's schema check fails at the first batch",
        evidence,
        spark_error=error,
        stage=62,
    )


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


__all__ = ["MISPLACED", "SCHEMA_ROWS", "schema_rows", "state_placement"]
