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
from dataclasses import dataclass, field

from ckptfix.audit import sampled
from ckptfix.audit.context import AuditContext
from ckptfix.audit.model import Evidence, Finding, SparkError
from ckptfix.audit.registry import check, define
from ckptfix.audit.rules_stale import replay
from ckptfix.audit.rules_state import (
    CODEC,
    _watermark,
    expected_partitions,
    shuffle_edit,
    store_unique_id,
    unique_ids,
)
from ckptfix.checkpoint import OperatorDir, StoreDir
from ckptfix.errors import FormatError, UsageError
from ckptfix.formats import codec, rocksdbzip
from ckptfix.state.decode import Decoder
from ckptfix.state.placement import Placement, TwsPlacer, placement
from ckptfix.state.schemas import AGGREGATION, DEDUPE, JOIN, OperatorInfo, operator_info, operator_name, store_schema
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
    "partition's restart chain (newest file first, and its base snapshot; a zip's smallest SST) and hashes them as "
    "Spark's HashPartitioning does. Where only base snapshots hold the wrong keys (snapshot files swapped alone; "
    "repair hunt 10) and the older files hold the partition's own: the state each partition loads is replayed "
    "(HDFS); when its own keys come out exactly as its own files make them (every one written again after the "
    "snapshot) and nothing scans the store (an aggregation, deduplication or join, no watermark yet), the restart "
    "is right and the finding a warning (recorded on 3.5.9-4.3.0); otherwise the restart misses keys, or emits "
    "the foreign ones where a watermark evicts them.",
    "Put each partition's files back in its own directory (from a backup, or by swapping the directories the "
    "finding pairs), then audit again. Where only base snapshots hold the wrong keys, `ckptfix repair` deletes "
    "them: Spark then loads the older snapshot and deltas, which hold the partition's own keys.",
)


@dataclass
class Misplaced:
    """One operator's partitions that hold keys of other partitions (the rule's evidence and the repair's targets)."""

    op_id: int
    #: partition -> partition its keys belong to -> the file read
    wrong: dict[int, dict[int, str]] = field(default_factory=dict)
    #: partition -> the snapshot files (or zips) that alone hold the wrong keys: without them the partition's load
    #: is complete from older files that hold its own keys (repair hunt 10, M03: only two snapshots swapped)
    only_snapshots: dict[int, list[str]] = field(default_factory=dict)
    #: with :attr:`only_snapshots` (HDFS): the state each partition loads, keys of other partitions set aside, is
    #: exactly the state its own files make (every own key written after the foreign snapshot): only the foreign
    #: keys loaded with it are wrong, and a lookup never reaches them
    lookups_right: bool = False
    #: :attr:`lookups_right` and nothing scans the store: no event-time watermark yet, and an aggregation,
    #: deduplication or join (no state timeouts): the restart's results are right
    harmless: bool = False


@check
def state_placement(ctx: AuditContext) -> Iterator[Finding]:
    for m in find_misplaced(ctx):
        yield _finding(ctx, m)


def find_misplaced(ctx: AuditContext) -> list[Misplaced]:
    """Every operator whose sampled keys sit in the wrong partition (memoized per audit)."""
    key = ("placement",)
    if key not in ctx.memo:
        ctx.memo[key] = list(_find_misplaced(ctx))
    result: list[Misplaced] = ctx.memo[key]
    return result


def _find_misplaced(ctx: AuditContext) -> Iterator[Misplaced]:
    ck, N = ctx.ckpt, ctx.state_version
    if N <= 0 or not ck.state.operators or ctx.conf.get(STRICT, "").lower() != "true":
        return
    ids = unique_ids(ctx, N)
    compression = codec.normalize(ctx.conf.get(CODEC, "lz4"))
    edit = shuffle_edit(ctx)
    for op_id, op in sorted(ck.state.operators.items()):
        n, store_names = expected_partitions(ctx, op)
        if edit is not None and n == edit.edited:
            n = edit.state  # keys are where the state's own count puts them: the edit is a finding of its own
        found = providers.of(ctx.conf, op)
        if n is None or n <= 1 or found.custom:
            continue
        try:
            info = operator_info(ck, op, N - 1)
        except FormatError:
            continue
        m = Misplaced(op_id)
        if info.is_tws:
            if found.kind == "rocksdb":
                _tws_placement(ctx, op, info, n, ids, m.wrong)
            if m.wrong:
                yield m
            continue
        swapped_files: dict[int, list[tuple[StoreDir, chains.Step]]] = {}
        placers: dict[str, tuple[Placement, Decoder]] = {}
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
            placers[name] = (where, decoder)
            for p in sorted(op.partitions):
                store = op.partitions[p].get(name)
                if p >= n or store is None:
                    continue
                uid = store_unique_id(ids, op_id, p, s_index)
                if ids is not None and uid is None:
                    continue
                # newest first, until a file holds keys (a dropDuplicates delta holds only the keys first seen in
                # its batch: often none); and the chain's base snapshot, which a copy may have swapped alone
                steps = sample.newest_steps(store, N, found.kind, uid)
                read: list[tuple[chains.Step, list[int]]] = []
                for step in steps[:FILES]:
                    read.append((step, _partitions_of_sample(ctx, store, step, compression, decoder, where, n)))
                    if read[-1][1]:
                        break
                base = steps[-1] if steps and steps[-1].kind in ("snapshot", "zip") else None
                if base is not None and all(step != base for step, _ in read):
                    read.append((base, _partitions_of_sample(ctx, store, base, compression, decoder, where, n)))
                for step, got in read:
                    if any(g != p for g in got):
                        for g in got:
                            if g != p:
                                m.wrong.setdefault(p, {})[g] = step.rel
                        swapped_files.setdefault(p, []).append((store, step))
        if not m.wrong:
            continue
        if ids is None:
            for p, files in swapped_files.items():
                droppable = _only_snapshots(ctx, files, N, found.kind, compression, placers, p, n)
                if droppable:
                    m.only_snapshots[p] = droppable
        if found.kind == "hdfs" and m.only_snapshots and set(m.only_snapshots) == set(m.wrong):
            _partner_snapshots(ctx, op, m, swapped_files, N, compression, store_names)
            m.lookups_right = all(
                _own_state_right(ctx, store, N, compression, placers[store.store], p, n)
                for p, files in swapped_files.items()
                for store, _ in files
            )
            # the operators that only look keys up while no watermark evicts (a state timeout scans the store)
            lookups_only = operator_name(ck, op) in (AGGREGATION, DEDUPE, JOIN)
            m.harmless = m.lookups_right and lookups_only and _watermark(ctx) == 0
        yield m


def _partner_snapshots(
    ctx: AuditContext,
    op: OperatorDir,
    m: Misplaced,
    swapped_files: dict[int, list[tuple[StoreDir, chains.Step]]],
    N: int,
    compression: str,
    store_names: list[str],
) -> None:
    """A snapshot swapped alone has a partner: the partition whose keys it holds got the other one, which the
    sample cannot see when it holds no keys (an empty partition's). Each such partition whose base snapshot is not
    what its own older files make joins ``m`` (HDFS: a snapshot is the map of its version, written from them)."""
    for p in list(m.wrong):
        for g in list(m.wrong[p]):
            if g in m.wrong or g not in op.partitions:
                continue
            for name in store_names:
                store = op.partitions[g].get(name)
                if store is None:
                    continue
                try:
                    chain = chains.plan(store, N, "hdfs")
                    base = chain.base
                    if base is None or base.kind != "snapshot" or chain.gap is not None:
                        continue
                    older = chains.plan(store, base.version, "hdfs", exclude=(base.version,))
                    alt = chains.plan(store, N, "hdfs", exclude=(base.version,))
                except FormatError:
                    continue
                if older.gap is not None or alt.gap is not None:
                    continue
                have = replay(ctx, [base.rel], compression)
                own = replay(ctx, [s.rel for s in older.files], compression)
                if have is None or own is None or have == own:
                    continue
                m.wrong.setdefault(g, {})[p] = base.rel
                m.only_snapshots.setdefault(g, []).append(base.rel)
                swapped_files.setdefault(g, []).append((store, base))


def _own_state_right(
    ctx: AuditContext,
    store: StoreDir,
    N: int,
    compression: str,
    placer: tuple[Placement, Decoder],
    p: int,
    n: int,
) -> bool:
    """Whether the state the restart loads for ``store`` (its foreign snapshot and the deltas after it), keys of other
    partitions set aside, is the state the partition's own files make (an older snapshot and every delta)."""
    try:
        loaded_chain = chains.plan(store, N, "hdfs")
        base = loaded_chain.base
        right_chain = chains.plan(store, N, "hdfs", exclude=(base.version,) if base else ())
    except FormatError:
        return False
    loaded = replay(ctx, [s.rel for s in loaded_chain.files], compression)
    right = replay(ctx, [s.rel for s in right_chain.files], compression)
    if loaded is None or right is None:
        return False
    where, decoder = placer
    try:
        own = {k: v for k, v in loaded.items() if where.partition(decoder.key(k), n) == p}
    except (FormatError, UsageError, TypeError, ValueError, KeyError):
        return False
    return own == right


def _only_snapshots(
    ctx: AuditContext,
    files: list[tuple[StoreDir, chains.Step]],
    N: int,
    provider: str,
    compression: str,
    placers: dict[str, tuple[Placement, Decoder]],
    p: int,
    n: int,
) -> list[str]:
    """The misplaced files of partition ``p`` when each is a snapshot (HDFS) or a zip with changelogs after an older
    one (RocksDB), and the load without it is complete and holds, in every file sampled, only keys of ``p``;
    else []."""
    out = []
    for store, step in files:
        if step.kind not in ("snapshot", "zip"):
            return []
        try:
            alt = chains.plan(store, N, provider, exclude=(step.version,))
        except FormatError:
            return []
        # a zip gives way to an older one and changelogs only where the restart replays changelogs
        if alt.gap is not None or (step.kind == "zip" and not chains.changelog_checkpointing(store, ctx.conf)):
            return []
        where, decoder = placers[store.store]
        for other in alt.files:
            got = _partitions_of_sample(ctx, store, other, compression, decoder, where, n)
            if any(g != p for g in got):
                return []
        out.append(step.rel)
    return out


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


def _finding(ctx: AuditContext, m: Misplaced) -> Finding:
    ck, op_id, wrong = ctx.ckpt, m.op_id, m.wrong
    pairs = [
        f"partition {p} holds keys of partition(s) {', '.join(str(g) for g in sorted(gs))}" for p, gs in wrong.items()
    ]
    fix, severity, silent = None, None, True
    effect = (
        "Spark restarts and looks each key up in the partition it belongs to, where it is not: counts start again, "
        "windows are emitted twice, duplicates pass"
    )
    if set(m.only_snapshots) == set(wrong):
        files = [ck.display(rel) for p in sorted(m.only_snapshots) for rel in m.only_snapshots[p]]
        hint = (
            f"; only the base snapshot{'s' if len(files) > 1 else ''} of the restart's load ({', '.join(files)}) "
            "hold the wrong keys: every older file the load would read instead holds the partition's own"
        )
        fix = (
            f"Delete {', '.join(files)} (`ckptfix repair --apply` does it, with a backup): Spark then loads each "
            "partition from its older snapshot and deltas (or changelogs), which hold its own keys. Swapping whole "
            "directories would move those correct files to the wrong partition."
        )
        if m.harmless:
            severity, silent = "warning", False
            effect = (
                "every key of the partition was written again after that snapshot, so each lookup finds the right "
                "value, and nothing scans the store for the foreign keys loaded with them (no watermark yet; an "
                "aggregation, deduplication or join): the restart's results are right, but the foreign keys stay "
                "in the state, and come out where a later watermark evicts them"
            )
        elif m.lookups_right:
            effect = (
                "every key of the partition was written again after that snapshot, so each lookup finds the right "
                "value, but the foreign keys loaded with them come out where Spark scans the store: evictions by "
                "the watermark (append mode emits those windows a second time), state timeouts"
            )
        else:
            effect = (
                "Spark restarts with the other partition's keys as of that snapshot and without this partition's "
                "keys that no later delta wrote: their counts start again, windows are emitted twice, duplicates pass"
            )
    else:
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
        f"operator {op_id}: {'; '.join(pairs)} (Spark's hash partitioning of the decoded keys){hint}: {effect}",
        evidence[:6],
        fix=fix,
        severity=severity,
        silent=silent,
    )


__all__ = ["MISPLACED", "SCHEMA_ROWS", "Misplaced", "find_misplaced", "schema_rows", "state_placement"]
