"""Public entry points: the state of a committed version, and the change feed between batches.

Semantics follow Spark's ``statestore`` data source: ``batch`` b reads state version b+1
(the state after batch b); the default is the last committed batch; ``from_snapshot``
(a batch id, like ``snapshotStartBatchId``) loads the snapshot of version
``from_snapshot + 1`` and replays the deltas/changelogs after it, ignoring newer
snapshots. Codec, provider and row-checksum mode come from the offset log entry of the
batch read, as Spark's reader takes them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

from ckptfix.checkpoint import Checkpoint, OperatorDir, StoreDir
from ckptfix.errors import FormatError, UsageError
from ckptfix.formats import codec
from ckptfix.formats.statefile import Op
from ckptfix.formats.unsaferow import (
    ArrayType,
    BooleanType,
    DataType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructType,
)
from ckptfix.state.decode import Decoder, bulk_decodable, column_family_of, decode_columns, decode_pair, plain_rows
from ckptfix.state.edits import parse_where
from ckptfix.state.schemas import OperatorInfo, StoreSchema, operator_info, recorded_partitions, store_schema
from ckptfix.stores import chain as chains
from ckptfix.stores import provider as providers
from ckptfix.stores import records

PROVIDER = "spark.sql.streaming.stateStore.providerClass"
CODEC = "spark.sql.streaming.stateStore.compression.codec"
ROW_CHECKSUM = "spark.sql.streaming.stateStore.rowChecksum.enabled"
ENCODING = "spark.sql.streaming.stateStore.encodingFormat"
CHANGE_TYPE = {Op.PUT: "update", Op.DELETE: "delete", Op.MERGE: "append"}
JOIN_SIDES = ("left", "right")
#: transformWithState's timer column families (key: grouping key + expiryTimestampMs)
TIMER_FAMILIES = ("$procTimers_keyToTimestamp", "$eventTimers_keyToTimestamp")


@dataclass
class Selection:
    """What to read: resolved against the checkpoint by :func:`select`."""

    ckpt: Checkpoint
    op: OperatorDir
    info: OperatorInfo
    batch: int
    version: int
    provider: str
    codec: str
    row_checksum: bool
    partitions: list[int]
    store_name: str
    join_side: str | None = None
    state_var: str | None = None
    from_snapshot: int | None = None
    key_schema: StructType | None = None
    value_schema: StructType | None = None
    conf: dict[str, str] = field(default_factory=dict)
    #: use key_schema/value_schema even where they disagree with the stored schema
    force_schema: bool = False

    @property
    def delimiter(self) -> bytes | None:
        """RocksDB's merge (list append) delimiter, by the frozen mergeOperatorVersion;
        None when there is no offset log to tell."""
        from ckptfix.stores import rocks

        if not self.conf:
            return None
        try:
            return rocks.merge_delimiter(self.conf)
        except ValueError as exc:
            raise FormatError(
                self.ckpt.display(f"offsets/{self.batch}"), 0, "mergeOperatorVersion 1 or 2", str(exc), kind="bad-conf"
            ) from None


@dataclass
class StateRead:
    selection: Selection
    columns: list[str]
    rows: Iterator[dict[str, Any]]
    #: partition -> how its version was built ("3.snapshot + deltas 4..6"), filled as read
    chains: dict[int, str] = field(default_factory=dict)
    #: the base zip's metadata fields (RocksDB), of the partition read last
    meta: dict[str, Any] = field(default_factory=dict)
    #: column -> Spark type (for typed outputs such as Parquet)
    schemas: dict[str, DataType] = field(default_factory=dict)
    #: where the pair of a key came from, for pairs read without their position (HDFS deltas)
    locate: Callable[[bytes], tuple[str, int, int]] | None = None
    #: the rows of a selection (the same read restricted to other partitions)
    make_rows: Callable[[Selection, StateRead], Iterator[dict[str, Any]]] | None = None

    def partition_rows(self, partition: int) -> Iterator[dict[str, Any]]:
        """The rows of one of the selected partitions, read afresh (for parallel readers)."""
        assert self.make_rows is not None
        one = dataclasses.replace(self.selection, partitions=[partition])
        return self.make_rows(one, StateRead(one, self.columns, iter(()), schemas=self.schemas))

    @property
    def version(self) -> int:
        return self.selection.version

    @property
    def batch(self) -> int:
        return self.selection.batch

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return self.rows


def _open(path: str | Checkpoint, storage_options: Mapping[str, Any] | None) -> Checkpoint:
    return path if isinstance(path, Checkpoint) else Checkpoint.open(path, storage_options)


def _conf_for(ckpt: Checkpoint, batch: int) -> dict[str, str]:
    if batch in ckpt.offsets.files:
        entry = ckpt.try_offset(batch)
        if entry is not None and entry.metadata is not None:
            return dict(entry.metadata.conf)
    return ckpt.recorded_conf()


def _provider(conf: Mapping[str, str], op: OperatorDir) -> str:
    return providers.of(conf, op).kind


def select(
    path: str | Checkpoint,
    *,
    operator: int = 0,
    batch: int | None = None,
    version: int | None = None,
    partition: int | None = None,
    store_name: str | None = None,
    join_side: str | None = None,
    state_var: str | None = None,
    timers: bool = False,
    from_snapshot: int | None = None,
    key_schema: StructType | None = None,
    value_schema: StructType | None = None,
    force_schema: bool = False,
    storage_options: Mapping[str, Any] | None = None,
    whole: bool = True,
    sides: bool = True,
) -> Selection:
    """``timers``: transformWithState's registered timers (Spark's ``readRegisteredTimers``). ``whole``: refuse a
    read of every partition where one Spark loads has no directory (else the selection holds the others).
    ``sides``: the command offers ``--join-side`` (``state changes`` does not: one store at a time)."""
    ckpt = _open(path, storage_options)
    if batch is not None and version is not None:
        raise UsageError("give --batch or --version, not both (version N is the state after batch N-1)")
    if version is not None:
        if version < 1:
            raise UsageError(f"--version: expected at least 1 (version 0 is the empty state), found {version}")
        batch = version - 1
    if batch is None:
        batch = ckpt.commits.latest
        if batch is None:
            raise FormatError(
                ckpt.display("commits"),
                0,
                "a committed batch to read the state of",
                "none (--version N reads a version the state files hold all the same)",
                kind="no-commits",
            )
    if batch < 0:
        raise UsageError(f"--batch: expected at least 0, found {batch}")
    latest = ckpt.commits.latest
    if latest is not None and batch > latest:
        asked = (
            f"version {version} is the state after batch {batch}, which" if version is not None else f"batch {batch}"
        )
        raise UsageError(
            f"{asked} is not committed (last committed batch: {latest}, state version {latest + 1}); "
            "the state files of an uncommitted batch may be partial"
        )
    if from_snapshot is not None and from_snapshot > batch:
        raise UsageError(f"--from-snapshot {from_snapshot} is after the batch read ({batch})")
    op = ckpt.state.operators.get(operator)
    if op is None:
        found = ", ".join(str(o) for o in sorted(ckpt.state.operators))
        if not found:
            raise UsageError(
                f"{ckpt.display('state')}: no state stores (state/<operator>/...): the query is stateless, "
                "or its state/ directory is gone"
            )
        raise UsageError(f"--operator {operator}: no such operator in {ckpt.display('state')} (has {found})")
    info = operator_info(ckpt, op, batch, damaged_metadata_ok=True)
    if join_side is not None:
        if join_side not in JOIN_SIDES:
            raise UsageError(f"--join-side: expected one of left, right, found {join_side!r}")
        if not info.is_join:
            raise UsageError(
                f"operator {operator} is not a stream-stream join ({info.name or 'stores ' + ', '.join(info.stores)})"
            )
        if store_name is not None:
            raise UsageError("--join-side and --store are exclusive (as in Spark's reader)")
    if timers:
        if state_var is not None:
            raise UsageError("--timers and --state-var are exclusive (as in Spark's reader)")
        timer_families = [n for n in TIMER_FAMILIES if n in info.column_families]
        if not info.is_tws or not timer_families:
            raise UsageError(f"--timers needs a transformWithState operator with timers; operator {operator} has none")
        state_var = timer_families[0]
    if state_var is not None and not info.is_tws:
        raise UsageError(f"--state-var needs a transformWithState operator; operator {operator} has no column families")
    if info.is_tws and state_var is None:
        names = ", ".join(n for n in info.column_families if not n.startswith("$")) or "none"
        raise UsageError(f"operator {operator} is a transformWithState operator: choose --state-var ({names})")
    if state_var is not None and state_var not in info.column_families:
        raise UsageError(
            f"no state variable {state_var!r} in operator {operator} (has {', '.join(info.column_families)})"
        )
    name = store_name or "default"
    # ("default" is also how ckptfix's own listing and rebuild ask for an operator whatever its stores)
    if store_name not in (None, "default") and op.store_names and store_name not in op.store_names:
        raise UsageError(
            f"--store {store_name}: no such store in {ckpt.display(op.rel)} (has {', '.join(sorted(op.store_names))})"
        )
    if store_name is None and info.is_join and join_side is None:
        raise UsageError(
            f"operator {operator} is a stream-stream join: choose "
            + ("--join-side left|right or " if sides else "")
            + f"--store ({', '.join(info.stores)})"
        )
    conf = _conf_for(ckpt, batch)
    # the partitions Spark loads: directories beyond the recorded number are never read, one below it missing
    # would make an export silently partial (a new user's trial: 4 of 6 rows, exit 0)
    n = recorded_partitions(ckpt, op, conf)
    parts = sorted(p for p in op.partitions if n is None or p < n)
    if partition is not None:
        if partition not in parts:
            have = f"{parts[0]}..{parts[-1]}" if parts else "none"
            raise UsageError(f"--partition {partition}: no such partition in {ckpt.display(op.rel)} (has {have})")
        parts = [partition]
    elif whole and n is not None and (missing := [p for p in range(n) if p not in op.partitions]):
        raise FormatError(
            ckpt.display(f"{op.rel}/{missing[0]}"),
            0,
            f"the state of partition {missing[0]} (the query has {n} partitions; Spark fails loading it)",
            "no directory" + (f" (also missing: {', '.join(map(str, missing[1:]))})" if missing[1:] else ""),
            kind="missing-file",
        )
    return Selection(
        ckpt,
        op,
        info,
        batch,
        batch + 1,
        _provider(conf, op),
        codec.normalize(conf.get(CODEC, "lz4")),
        conf.get(ROW_CHECKSUM, "false").lower() == "true",
        parts,
        name,
        join_side,
        state_var,
        from_snapshot,
        key_schema,
        value_schema,
        conf,
        force_schema,
    )


def _unique_id(sel: Selection, store_index: int, partition: int, version: int) -> str | None:
    b = version - 1
    if b < 0 or b not in sel.ckpt.commits.files:
        return None
    try:
        entry = sel.ckpt.commit(b)
    except FormatError:
        return None
    ids = (entry.state_unique_ids or {}).get(str(sel.op.operator))
    if not ids or partition >= len(ids) or store_index >= len(ids[partition]):
        return None
    return ids[partition][store_index]


def store_chain(
    sel: Selection, store: StoreDir, version: int | None = None, exclude: tuple[int, ...] = ()
) -> chains.Chain:
    version = sel.version if version is None else version
    index = sel.info.stores.index(store.store) if store.store in sel.info.stores else 0
    uid = _unique_id(sel, index, store.partition, version) if sel.provider == "rocksdb" else None
    base = None if sel.from_snapshot is None else sel.from_snapshot + 1
    try:
        return chains.resolve(
            store,
            version,
            sel.provider,
            unique_id=uid,
            from_snapshot=base,
            exclude=exclude,
            read_lineage=lambda rel: records.changelog_header(sel.ckpt, rel, sel.codec),
            # checkpoint format v2 with the lineage's zip gone: Spark 4.2+ reaches back to an older zip through the
            # lineages of older changelogs (auto snapshot repair), and so does the read (new-user trial: the audit
            # said the restart loads it, `state read` that it cannot)
            reach_back=uid is not None and chains.skips_bad_snapshot(store, sel.provider, sel.conf),
        )
    except FormatError as exc:
        if exc.kind != "missing-file":
            raise
        raise _missing(sel, store, version, exc, exclude) from None


def _missing(
    sel: Selection, store: StoreDir, version: int, exc: FormatError, exclude: tuple[int, ...] = ()
) -> FormatError:
    """The file a load needs that is not there, named by its path in the checkpoint as every error names a file.
    A RocksDB store without changelog checkpointing (no ``N.changelog`` at all) holds each version as its own
    ``N.zip`` alone: the file version N needs is that zip, not a changelog the store never had."""
    rel, expected, found = exc.path, exc.expected, exc.found
    if sel.provider == "rocksdb" and rel.endswith(".changelog") and not store.versions("changelog"):
        zips = sorted(v for v, entries in store.versions("zip").items() if entries and v < version)
        newest = f"; the newest zip before it is {zips[-1]}.zip" if zips else ""
        rel = f"{store.rel}/{chains.layout.state_file_name(version, 'zip', None)}"
        if version in exclude and store.versions("zip").get(version):
            # the zip is there but cannot be loaded (the caller looks past it): say that, not "none"
            expected = f"a loadable {version}.zip (without changelog checkpointing only it holds version {version})"
            found = "a damaged one"
        else:
            only = f"without changelog checkpointing only {version}.zip holds it"
            expected = f"a file (version {version}: {only}{newest})"
    return FormatError(sel.ckpt.display(rel), exc.offset, expected, found, kind=exc.kind)


def _store(sel: Selection, partition: int, name: str) -> StoreDir:
    store = sel.op.partitions[partition].get(name)
    if store is None:
        rel = f"{sel.op.rel}/{partition}" + ("" if name == "default" else f"/{name}")
        raise FormatError(sel.ckpt.display(rel), 0, f"the state store {name!r}", "no directory", kind="missing-file")
    return store


def _pairs(sel: Selection, stack: ExitStack, store: StoreDir, read: StateRead) -> Iterator[records.Pair]:
    chain = store_chain(sel, store)
    read.chains[store.partition] = chain.describe()
    read.locate = lambda key: records.locate(sel.ckpt, chain, sel.codec, key, sel.row_checksum)
    if sel.provider == "hdfs":
        return records.hdfs_pairs(sel.ckpt, chain, sel.codec, sel.row_checksum)
    delimiter = sel.delimiter
    pairs, meta = stack.enter_context(
        records.rocksdb_pairs(sel.ckpt, chain, sel.codec, b"," if delimiter is None else delimiter)
    )
    read.meta = meta
    return pairs


def _schema(sel: Selection, name: str) -> StoreSchema:
    return store_schema(sel.ckpt, sel.op, sel.info, name, sel.key_schema, sel.value_schema, sel.force_schema)


def _avro(sel: Selection) -> bool:
    """Whether the rows read are Avro-encoded (``encodingFormat=avro``: transformWithState's column families)."""
    return sel.conf.get(ENCODING, "unsaferow").lower() == "avro" and sel.state_var is not None


def _decodable(sel: Selection) -> None:
    encoding = sel.conf.get(ENCODING, "unsaferow").lower()
    if encoding == "avro" and sel.state_var is not None:
        return  # transformWithState state variables and timers
    if encoding != "unsaferow":
        found = (
            f"{encoding}: Avro-encoded state is decoded for transformWithState state variables and timers only "
            "(state rebuild copies it unchanged)"
            if encoding == "avro"
            else f"{encoding}: an encoding ckptfix does not know"
        )
        raise FormatError(
            sel.ckpt.display(f"offsets/{sel.batch}"),
            0,
            f"{ENCODING}=unsaferow or avro (the encodings ckptfix decodes)",
            found,
            kind="unsupported-encoding",
        )


def read_state(path: str | Checkpoint, *, flatten: bool = True, where: str | None = None, **kwargs: Any) -> StateRead:
    """The rows of one operator's state at one committed version (see :func:`select`). ``where``: only the rows
    whose key matches, in the syntax of ``state delete --where`` (:func:`ckptfix.state.edits.parse_where`)."""
    sel = select(path, **kwargs)
    _decodable(sel)
    read = StateRead(sel, ["key", "value", "partition_id"], iter(()))
    if sel.state_var is not None:
        read.columns, read.schemas = _tws_columns(sel, flatten)
    elif sel.join_side is not None:
        side = sel.join_side
        value = _schema(sel, f"{side}-keyWithIndexToValue").value
        if value.fields and value.fields[-1].name == "matched" and isinstance(value.fields[-1].data_type, BooleanType):
            value = StructType(value.fields[:-1])
        read.schemas = {"key": _schema(sel, f"{side}-keyToNumValues").key, "value": value}
    else:
        sch = _schema(sel, sel.store_name)
        read.schemas = {"key": sch.key, "value": sch.value}
    read.schemas["partition_id"] = IntegerType()
    match = None
    if where is not None:
        key = read.schemas.get("key")
        if not isinstance(key, StructType):
            raise UsageError("--where: expected rows with a key to match, found a read without a key column")
        match = parse_where(where, key)
    read.make_rows = lambda one, r: Rows(one, r, flatten, match)
    read.rows = Rows(sel, read, flatten, match)
    return read


#: rows per Arrow record batch of the bulk path
BATCH_ROWS = 65_536


class _LazyRows(Iterator[dict[str, Any]]):
    """Row dicts made on the first ``next`` (:meth:`_make`), so a writer that asks for ``batches()`` instead
    never starts the row-by-row decoder."""

    _rows: Iterator[dict[str, Any]] | None = None

    def _make(self) -> Iterator[dict[str, Any]]:
        raise NotImplementedError

    def __iter__(self) -> _LazyRows:
        return self

    def __next__(self) -> dict[str, Any]:
        if self._rows is None:
            self._rows = self._make()
        return next(self._rows)


class Rows(_LazyRows):
    """The rows of :func:`read_state`: an iterator of dicts, decoded row by row as always; writers
    that can take Arrow ask :meth:`batches` instead, which decodes whole stores column by column
    where it can."""

    def __init__(
        self, sel: Selection, read: StateRead, flatten: bool, match: Callable[[dict[str, Any]], bool] | None = None
    ) -> None:
        self.selection, self.read, self.flatten, self.match = sel, read, flatten, match

    def _make(self) -> Iterator[dict[str, Any]]:
        rows = _rows(self.selection, self.read, self.flatten)
        match = self.match
        return rows if match is None else (r for r in rows if match(r["key"]))

    def batches(self) -> Iterator[Any]:
        """Per partition either ``pyarrow.RecordBatch`` es (columns key, value, partition_id, at most
        :data:`BATCH_ROWS` rows each) decoded in bulk, or, where the bulk path does not apply
        (joins, transformWithState, nested or large-decimal fields, RocksDB zips, row checksums,
        anything irregular), lists of at most :data:`BATCH_ROWS` row dicts, as iterating gives.
        Rows of a partition come in the same order either way."""
        for part in self.selection.partitions:
            columnar = None if self.match is not None else _columnar(self.selection, part, self.read)
            if columnar is not None:
                yield from columnar
                continue
            one = dataclasses.replace(self.selection, partitions=[part])
            chunk: list[dict[str, Any]] = []
            for row in Rows(one, self.read, self.flatten, self.match):
                chunk.append(row)
                if len(chunk) >= BATCH_ROWS:
                    yield chunk
                    chunk = []
            if chunk:
                yield chunk


def _columnar(sel: Selection, part: int, read: StateRead) -> list[Any] | None:
    """The rows of one partition as Arrow record batches, decoded in bulk; None where that does not
    apply (then nothing was yielded and the row-by-row path reads the partition)."""
    if sel.join_side is not None or sel.state_var is not None or sel.row_checksum:
        return None
    try:
        import numpy as np
        import pyarrow as pa

        from ckptfix.state.export import arrow_type
    except ImportError:
        return None
    sch = _schema(sel, sel.store_name)
    if not (bulk_decodable(sch.key) and bulk_decodable(sch.value)):
        return None
    if sel.provider == "rocksdb" and sch.encoding.kind != "none":
        return None
    store = _store(sel, part, sel.store_name)
    chain = store_chain(sel, store)
    if sel.provider == "rocksdb" and chain.base is not None:
        delimiter = sel.delimiter
        segments = records.rocksdb_bulk_pairs(sel.ckpt, chain, sel.codec, b"," if delimiter is None else delimiter)
    else:
        segments = records.bulk_pairs(sel.ckpt, chain, sel.codec, sel.provider)
    if segments is None:
        return None
    key_type, value_type = arrow_type(sch.key), arrow_type(sch.value)
    schema = pa.schema([("key", key_type), ("value", value_type), ("partition_id", pa.int32())])
    out = []
    for keys, values in segments:
        for at in range(0, len(keys), BATCH_ROWS):
            k = decode_columns(keys.slice(at, BATCH_ROWS), sch.key, key_type)
            v = decode_columns(values.slice(at, BATCH_ROWS), sch.value, value_type)
            if k is None or v is None:
                return None
            ids = records.arrow_of(np.full(len(k), part, dtype=np.int32))
            out.append(pa.RecordBatch.from_arrays([k, v, ids], schema=schema))
    read.chains[part] = chain.describe()
    return out


def _rows(sel: Selection, read: StateRead, flatten: bool) -> Iterator[dict[str, Any]]:
    for part in sel.partitions:
        with ExitStack() as stack:
            if sel.join_side is not None:
                yield from _join_rows(sel, stack, part, read)
            elif sel.state_var is not None:
                yield from _tws_rows(sel, stack, part, read, flatten)
            else:
                sch = _schema(sel, sel.store_name)
                store = _store(sel, part, sel.store_name)
                dec = Decoder(
                    sch,
                    sel.provider,
                    sel.ckpt.display(store.rel),
                    row_checksum=sel.row_checksum and sel.provider == "rocksdb",
                )
                pairs = _pairs(sel, stack, store, read)
                yield from plain_rows(pairs, dec, part, read.locate)


# ---------------------------------------------------------------- stream-stream join


def _join_rows(sel: Selection, stack: ExitStack, part: int, read: StateRead) -> Iterator[dict[str, Any]]:
    """A join side as Spark's reader shows it: each key of ``<side>-keyToNumValues`` with its
    values at indexes 0..n-1 in ``<side>-keyWithIndexToValue``."""
    side = sel.join_side
    counts_name, values_name = f"{side}-keyToNumValues", f"{side}-keyWithIndexToValue"
    counts_sch, values_sch = _schema(sel, counts_name), _schema(sel, values_name)
    counts_store, values_store = _store(sel, part, counts_name), _store(sel, part, values_name)
    cdec = Decoder(
        counts_sch,
        sel.provider,
        sel.ckpt.display(counts_store.rel),
        row_checksum=sel.row_checksum and sel.provider == "rocksdb",
    )
    vdec = Decoder(
        values_sch,
        sel.provider,
        sel.ckpt.display(values_store.rel),
        row_checksum=sel.row_checksum and sel.provider == "rocksdb",
    )
    index_key = values_sch.key.keys[-1]
    last = values_sch.value.fields[-1] if values_sch.value.fields else None
    matched = last is not None and last.name == "matched" and isinstance(last.data_type, BooleanType)
    by_key: dict[tuple[Any, ...], dict[int, dict[str, Any]]] = {}
    for pair in _pairs(sel, stack, values_store, read):
        key, value = decode_pair(vdec, pair, read.locate)
        index = key.pop(index_key)
        by_key.setdefault(_freeze(key), {})[index] = value
    for pair in _pairs(sel, stack, counts_store, read):
        key, counted = decode_pair(cdec, pair, read.locate)
        count = next(iter(counted.values()))
        values = by_key.get(_freeze(key), {})
        for i in range(count or 0):
            stored = values.get(i)
            if stored is not None:
                value = {k: v for k, v in stored.items() if k != "matched"} if matched else stored
                yield {"key": key, "value": value, "partition_id": part}


def _freeze(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple((k, _freeze(v)) for k, v in value.items())
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


# ---------------------------------------------------------------- transformWithState


def _tws_columns(sel: Selection, flatten: bool) -> tuple[list[str], dict[str, DataType]]:
    kind = _var_kind(sel)
    sch = sel.info.column_families[sel.state_var or ""]
    if kind == "Timers":
        return ["key", "expiration_timestamp_ms", "partition_id"], {
            "key": sch.key.fields[0].data_type,
            "expiration_timestamp_ms": LongType(),
        }
    if kind == "ListState":
        if flatten:  # the column name Spark 4.3's reader gives (its source's SchemaUtil says "value")
            return ["key", "list_element", "partition_id"], {"key": sch.key, "list_element": sch.value}
        return ["key", "list_value", "partition_id"], {"key": sch.key, "list_value": ArrayType(sch.value)}
    if kind == "MapState":
        grouping = sch.key.fields[0].data_type
        user = sch.user_key or sch.key.fields[1].data_type
        if flatten:
            return (
                ["key", "user_map_key", "user_map_value", "partition_id"],
                {"key": grouping, "user_map_key": user, "user_map_value": sch.value},
            )
        return ["key", "map_value", "partition_id"], {"key": grouping, "map_value": MapType(user, sch.value)}
    return ["key", "value", "partition_id"], {"key": sch.key, "value": sch.value}


def _tws_rows(sel: Selection, stack: ExitStack, part: int, read: StateRead, flatten: bool) -> Iterator[dict[str, Any]]:
    name = sel.state_var or ""
    sch = sel.info.column_families[name]
    store = _store(sel, part, "default")
    pairs = _pairs(sel, stack, store, read)
    mapping = read.meta.get("columnFamilyMapping") or _cf_mapping(sel, store)
    if name not in mapping:
        return  # the column family was never written in this version
    cf_id = mapping[name]
    dec = Decoder(
        sch,
        sel.provider,
        sel.ckpt.display(store.rel),
        column_family=True,
        delimiter=sel.delimiter,
        row_checksum=sel.row_checksum and sel.provider == "rocksdb",
        avro_encoded=_avro(sel),
    )
    kind = _var_kind(sel)
    grouped: dict[Any, dict[str, Any]] = {}
    for k, v, path, k_at, v_at in pairs:
        if column_family_of(k) != cf_id:
            continue
        key = dec.key(k, path, k_at)
        if kind == "Timers":
            grouping, expiry = key.values()
            yield {"key": grouping, "expiration_timestamp_ms": expiry, "partition_id": part}
        elif kind == "ListState":
            elements = dec.values(v, path, v_at)
            if flatten:
                for e in elements:
                    yield {"key": key, "list_element": e, "partition_id": part}
            else:
                yield {"key": key, "list_value": elements, "partition_id": part}
        elif kind == "MapState":
            value = dec.value(v, path, v_at)
            if flatten:
                yield {"key": key["key"], "user_map_key": key["userKey"], "user_map_value": value, "partition_id": part}
            else:
                entry = grouped.setdefault(
                    _freeze(key["key"]), {"key": key["key"], "map_value": {}, "partition_id": part}
                )
                entry["map_value"][_freeze(key["userKey"])] = value
        else:
            yield {"key": key, "value": dec.value(v, path, v_at), "partition_id": part}
    yield from grouped.values()


# ---------------------------------------------------------------- change feed


def read_changes(
    path: str | Checkpoint,
    *,
    from_batch: int,
    to_batch: int | None = None,
    operator: int = 0,
    partition: int | None = None,
    store_name: str | None = None,
    state_var: str | None = None,
    key_schema: StructType | None = None,
    value_schema: StructType | None = None,
    force_schema: bool = False,
    storage_options: Mapping[str, Any] | None = None,
) -> StateRead:
    """Puts and deletes per batch, as ``readChangeFeed`` with changeStartBatchId /
    changeEndBatchId: the deltas/changelogs of versions from_batch+1 .. to_batch+1."""
    sel = select(
        path,
        operator=operator,
        batch=to_batch,
        partition=partition,
        store_name=store_name,
        state_var=state_var,
        key_schema=key_schema,
        value_schema=value_schema,
        force_schema=force_schema,
        storage_options=storage_options,
        sides=False,
    )
    _decodable(sel)
    if sel.provider == "rocksdb" and not any(
        store.versions("changelog") for p in sel.partitions for store in sel.op.partitions[p].values()
    ):
        raise UsageError(
            f"{sel.ckpt.display(sel.op.rel)}: expected RocksDB changelogs (the change feed is read from them; Spark's "
            "readChangeFeed needs changelog checkpointing too), found none: this query ran without "
            "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled; `ckptfix state read --batch N` "
            "reads each version whole"
        )
    if from_batch < 0 or from_batch > sel.batch:
        raise UsageError(f"--from: expected a batch from 0 to the end batch {sel.batch}, found {from_batch}")
    read = StateRead(sel, [], iter(()))
    sch = sel.info.column_families[sel.state_var] if sel.state_var is not None else _schema(sel, sel.store_name)
    kind = _var_kind(sel)
    read.schemas = {"batch_id": LongType(), "change_type": StringType()}
    if kind == "ListState":  # one row per appended element (Spark's list_element)
        read.schemas.update({"key": sch.key, "list_element": sch.value})
    elif kind == "MapState":
        read.schemas.update(
            {
                "key": sch.key.fields[0].data_type,
                "user_map_key": sch.user_key or sch.key.fields[1].data_type,
                "user_map_value": sch.value,
            }
        )
    else:
        read.schemas.update({"key": sch.key, "value": sch.value})
    read.schemas["partition_id"] = IntegerType()
    read.columns = list(read.schemas)
    read.make_rows = lambda one, r: Changes(one, from_batch, r)
    read.rows = Changes(sel, from_batch, read)
    return read


class Changes(_LazyRows):
    """The rows of :func:`read_changes`: an iterator of dicts, as :class:`Rows`; :meth:`batches` gives
    the changes of a plain store's files as Arrow record batches decoded in bulk."""

    def __init__(self, sel: Selection, from_batch: int, read: StateRead) -> None:
        self.selection, self.from_batch, self.read = sel, from_batch, read

    def _make(self) -> Iterator[dict[str, Any]]:
        return _changes(self.selection, self.from_batch)

    def batches(self) -> Iterator[Any]:
        """Either ``pyarrow.RecordBatch`` es (the columns of :func:`read_changes`, at most :data:`BATCH_ROWS` rows
        each) decoded in bulk, consecutive files of a partition together, or, for a file where that does not apply
        (transformWithState, row checksums, nested or large-decimal fields, prefix-scan keys, anything irregular),
        lists of at most :data:`BATCH_ROWS` row dicts, as iterating gives. The same rows in the same order."""
        sel = self.selection
        for part in sel.partitions:
            feed = _partition_feed(sel, part)
            if feed is None:
                continue
            bulk = _bulk_feed(sel, feed)
            group: list[tuple[chains.Step, Any]] = []
            held = 0
            for version in range(self.from_batch + 1, sel.batch + 2):
                step = _feed_step(sel, feed.store, part, version)
                sliced = None
                if bulk:
                    sliced = records.step_slices(
                        sel.ckpt, step, sel.codec, feed.store.checksums, sel.provider == "rocksdb"
                    )
                if sliced is not None:
                    group.append((step, sliced))
                    held += len(sliced[0])
                    if held >= GROUP_ROWS:
                        yield from self._decoded(feed, group)
                        group, held = [], 0
                    continue
                yield from self._decoded(feed, group)
                group, held = [], 0
                yield from row_chunks(_file_changes(sel, feed, step))
            yield from self._decoded(feed, group)

    def _decoded(self, feed: _Feed, group: list[tuple[chains.Step, Any]]) -> Iterator[Any]:
        if not group:
            return
        columnar = _columnar_changes(self.selection, feed, group, self.read)
        if columnar is not None:
            yield from columnar
            return
        for step, _ in group:  # a row the bulk decoder does not take: these files row by row
            yield from row_chunks(_file_changes(self.selection, feed, step))


#: rows of consecutive change files decoded together
GROUP_ROWS = BATCH_ROWS


def row_chunks(rows: Iterator[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    """Rows in lists of at most :data:`BATCH_ROWS` (the row-by-row items of ``batches()``)."""
    chunk: list[dict[str, Any]] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) >= BATCH_ROWS:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


@dataclass
class _Feed:
    """How the change feed of one partition's store is decoded."""

    part: int
    store: StoreDir
    sch: StoreSchema
    dec: Decoder
    kind: str | None
    cf_id: int | None


def _partition_feed(sel: Selection, part: int) -> _Feed | None:
    """None: the state variable has no column family in this partition (no changes to show)."""
    store = _store(sel, part, sel.store_name)
    cf_id: int | None = None
    if sel.state_var is not None:
        sch = sel.info.column_families[sel.state_var]
        cf_id = _cf_mapping(sel, store).get(sel.state_var)
        if cf_id is None:
            return None
    else:
        sch = _schema(sel, sel.store_name)
    dec = Decoder(
        sch,
        sel.provider,
        sel.ckpt.display(store.rel),
        column_family=cf_id is not None,
        delimiter=sel.delimiter,
        row_checksum=sel.row_checksum and sel.provider == "rocksdb",
        avro_encoded=_avro(sel),
    )
    return _Feed(part, store, sch, dec, _var_kind(sel), cf_id)


def _feed_step(sel: Selection, store: StoreDir, part: int, version: int) -> chains.Step:
    """The delta or changelog that holds the changes of ``version`` (batch version - 1)."""
    step_kind = chains.STEP_KIND[sel.provider]
    index = sel.info.stores.index(store.store) if store.store in sel.info.stores else 0
    uid = _unique_id(sel, index, part, version) if sel.provider == "rocksdb" else None
    entries = store.versions(step_kind).get(version, [])
    uids = [u for u, _ in entries]
    if uid is None and uids:
        uid = uids[0]
    if uid not in uids:
        rel = f"{store.rel}/{version}{'_' + uid if uid else ''}.{step_kind}"
        raise chains.missing(store, sel.ckpt.display(rel), f"the change feed of batch {version - 1}")
    return chains.Step(f"{store.rel}/{chains.layout.state_file_name(version, step_kind, uid)}", step_kind, version, uid)


def _changes(sel: Selection, from_batch: int) -> Iterator[dict[str, Any]]:
    for part in sel.partitions:
        feed = _partition_feed(sel, part)
        if feed is None:
            continue
        for version in range(from_batch + 1, sel.batch + 2):
            yield from _file_changes(sel, feed, _feed_step(sel, feed.store, part, version))


def _file_changes(sel: Selection, feed: _Feed, step: chains.Step) -> Iterator[dict[str, Any]]:
    """The changes one delta or changelog holds, decoded record by record."""
    dec, kind, cf_id, part = feed.dec, feed.kind, feed.cf_id, feed.part
    path = records.inner(sel.ckpt, step.rel, sel.codec)
    for rec in records.file_records(sel.ckpt, step, sel.codec, feed.store.checksums):
        if cf_id is not None and column_family_of(rec.key) != cf_id:
            continue
        key_bytes = rec.key
        if sel.row_checksum and sel.provider == "hdfs":
            key_bytes = key_bytes[records.ROW_CHECKSUM_BYTES :] if rec.value is None else key_bytes
        raw = None
        if rec.value is not None:
            raw = rec.value
            if sel.provider == "hdfs":  # RocksDB values carry theirs inside (the decoder's job)
                raw = rec.value[records.ROW_CHECKSUM_BYTES :] if sel.row_checksum else rec.value
                raw = records.trim_value(raw)
        key = dec.key(key_bytes, path, rec.offset + 4)
        head = {"batch_id": step.version - 1, "change_type": CHANGE_TYPE[rec.op]}
        at = rec.offset + 8 + len(rec.key)
        if kind == "ListState":
            elements = [None] if raw is None else dec.values(raw, path, at)
            for element in elements:
                yield {**head, "key": key, "list_element": element, "partition_id": part}
        elif kind == "MapState":
            value = None if raw is None else dec.value(raw, path, at)
            yield {
                **head,
                "key": key["key"],
                "user_map_key": key["userKey"],
                "user_map_value": value,
                "partition_id": part,
            }
        else:
            value = None if raw is None else dec.value(raw, path, at)
            yield {**head, "key": key, "value": value, "partition_id": part}


def _bulk_feed(sel: Selection, feed: _Feed) -> bool:
    """Whether the change files of this store may be decoded in bulk (:func:`_columnar_changes`)."""
    return bulk_store(sel, feed.sch)


def bulk_store(sel: Selection, sch: StoreSchema) -> bool:
    """Whether the rows of a plain store of schema ``sch`` decode in bulk: no state variable, no row checksums,
    flat keys and values, RocksDB keys without prefix or range encoding, numpy and pyarrow installed."""
    if sel.state_var is not None or sel.row_checksum:
        return False
    if not (bulk_decodable(sch.key) and bulk_decodable(sch.value)):
        return False
    if sel.provider == "rocksdb" and sch.encoding.kind != "none":
        return False
    try:
        import numpy  # noqa: F401
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True


def _columnar_changes(
    sel: Selection, feed: _Feed, group: list[tuple[chains.Step, Any]], read: StateRead
) -> list[Any] | None:
    """The changes of consecutive files (each ``(step, records.step_slices(...))``) as Arrow record batches, decoded
    in bulk; None where a row does not decode in bulk (then nothing was yielded and the files are read row by
    row)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from ckptfix.state.export import arrow_type

    sch = feed.sch
    keys = pa.concat_arrays([sliced[0] for _, sliced in group])
    values = pa.concat_arrays([sliced[1] for _, sliced in group])
    live = np.concatenate([sliced[2] for _, sliced in group]) != records.OP_DELETE
    batch_ids = np.repeat(
        np.array([step.version - 1 for step, _ in group], dtype=np.int64),
        np.array([len(sliced[0]) for _, sliced in group], dtype=np.int64),
    )
    key_type, value_type = arrow_type(sch.key), arrow_type(sch.value)
    schema = pa.schema([(name, arrow_type(t)) for name, t in read.schemas.items()])
    change_type = schema.field("change_type").type
    out = []
    for at in range(0, len(keys), BATCH_ROWS):
        part_live = live[at : at + BATCH_ROWS]
        k = decode_columns(keys.slice(at, BATCH_ROWS), sch.key, key_type)
        kept = values.slice(at, BATCH_ROWS).filter(records.arrow_of(part_live))
        v = decode_columns(kept, sch.value, value_type)
        if k is None or v is None:
            return None
        n = len(k)
        if not part_live.all():  # a removal's value is null
            v = v.take(records.arrow_of(np.cumsum(part_live, dtype=np.int64) - 1, valid=part_live))
        change = pc.if_else(records.arrow_of(part_live), "update", "delete").cast(change_type)
        ids = records.arrow_of(np.full(n, feed.part, dtype=np.int32))
        batch = records.arrow_of(batch_ids[at : at + BATCH_ROWS])
        out.append(pa.RecordBatch.from_arrays([batch, change, k, v, ids], schema=schema))
    return out


def _var_kind(sel: Selection) -> str | None:
    if sel.state_var is None:
        return None
    if sel.state_var in TIMER_FAMILIES:
        return "Timers"
    var = sel.info.state_variables.get(sel.state_var)
    return var.kind if var else "ValueState"


def _cf_mapping(sel: Selection, store: StoreDir) -> dict[str, int]:
    """The column family ids of the newest zip at or before the read version, else of the
    oldest after it (ids are assigned once, when a family is created, and a new family
    forces a snapshot, so a later zip maps every family an earlier version used)."""
    from ckptfix.formats import rocksdbzip

    zips = sorted(store.versions("zip").items())
    ordered = [z for z in reversed(zips) if z[0] <= sel.version] + [z for z in zips if z[0] > sel.version]
    for _v, entries in ordered:
        for _uid, rel in entries:
            try:
                meta = rocksdbzip.parse(sel.ckpt.location.read(rel), sel.ckpt.display(rel)).metadata
            except FormatError:
                continue
            return dict(meta.column_family_mapping or {})
    return {}
