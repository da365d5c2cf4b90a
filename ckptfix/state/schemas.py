"""Key and value schemas of a state store, and how its keys are laid out.

Sources, in order: ``--key-schema`` / ``--value-schema`` (Spark DDL) when given; the
store's ``_metadata/schema`` (v1/v2, written in partition 0 only); for transformWithState
the v3 schema files under ``state/<op>/_stateSchema/<store>/`` (one entry per column
family, the newest file written at or before the batch being read). Operator metadata
(4.x) says how many leading key columns form a scan prefix (session windows); a 3.5
checkpoint has none, so a key ending in ``sessionStartTime`` is read as a session window's
key (grouping columns + session start), which is how Spark builds it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ckptfix import layout
from ckptfix.checkpoint import Checkpoint, OperatorDir
from ckptfix.errors import FormatError, UsageError
from ckptfix.formats import opmeta, schema
from ckptfix.formats.unsaferow import BooleanType, NullType, StructType, parse_schema, same_layout, simple_string

SESSION_START = "sessionStartTime"


@dataclass(frozen=True)
class Encoding:
    """How a RocksDB key is laid out (Spark's ``KeyStateEncoderSpec``)."""

    kind: str = "none"  # none | prefix | range
    num_prefix: int = 0  # prefix: the first n key columns
    ordinals: tuple[int, ...] = ()  # range: the ordering columns

    @classmethod
    def from_spec(cls, spec: dict, path: str) -> Encoding:
        kind = spec.get("keyStateEncoderType")
        if kind == "NoPrefixKeyStateEncoderSpec":
            return cls()
        if kind == "PrefixKeyScanStateEncoderSpec":
            return cls("prefix", int(spec.get("numColsPrefixKey", 0)))
        if kind == "RangeKeyScanStateEncoderSpec":
            return cls("range", ordinals=tuple(int(i) for i in spec.get("orderingOrdinals", [])))
        raise FormatError(path, 0, "a known key state encoder spec", json.dumps(spec)[:120], kind="unsupported-encoder")


@dataclass(frozen=True)
class StoreSchema:
    name: str  # store name, or column family name for transformWithState
    key: StructType
    value: StructType
    encoding: Encoding = field(default_factory=Encoding)
    multi_value: bool = False  # ListState: several values per key
    user_key: StructType | None = None  # MapState: the user key part of the composite key
    source: str = ""  # where the schema came from (for messages)
    #: the schema ids of the v3 schema file (Avro-encoded rows carry the one they were written with)
    key_schema_id: int = 0
    value_schema_id: int = 0


@dataclass(frozen=True)
class StateVariable:
    name: str
    kind: str  # ValueState | ListState | MapState | TimerState
    ttl: bool = False


@dataclass
class OperatorInfo:
    operator: int
    name: str | None = None  # operator metadata's operatorName (4.x)
    stores: list[str] = field(default_factory=list)
    num_partitions: int | None = None
    num_prefix: dict[str, int] = field(default_factory=dict)  # store -> numColsPrefixKey
    column_families: dict[str, StoreSchema] = field(default_factory=dict)  # transformWithState
    state_variables: dict[str, StateVariable] = field(default_factory=dict)
    schema_file: str | None = None  # the v3 file column_families came from

    @property
    def is_join(self) -> bool:
        return self.name == "symmetricHashJoin" or any(s.endswith("-keyToNumValues") for s in self.stores)

    @property
    def is_tws(self) -> bool:
        return bool(self.column_families)


def operator_info(
    ckpt: Checkpoint, op: OperatorDir, batch: int | None = None, *, damaged_metadata_ok: bool = False
) -> OperatorInfo:
    """What ``op`` is: its operator metadata (v2 of ``batch``, else v1) and transformWithState's schema file.
    ``damaged_metadata_ok`` (reading state): an operator metadata file that does not parse is passed over, as if
    absent (a checkpoint of Spark 3.5 has none): the store directories and schema files say the rest. Spark
    rewrites a damaged v1 file at the next batch and restarts (the audit's STATE-OPERATOR-METADATA-UNREADABLE is a
    warning); a new user's `state read` refused the state for it."""
    info = OperatorInfo(op.operator, stores=op.store_names or ["default"])
    meta_rel = op.metadata_v1
    if op.metadata_v2:
        eligible = [b for b in op.metadata_v2 if batch is None or b <= batch] or list(op.metadata_v2)
        meta_rel = op.metadata_v2[max(eligible)]
    meta = None
    if meta_rel is not None:
        try:
            meta = opmeta.parse(ckpt.read(meta_rel), ckpt.display(meta_rel))
        except FormatError:
            if not damaged_metadata_ok:
                raise
    if meta is not None:
        info.name = meta.operator_name
        if meta.stores:
            info.stores = [s.store_name for s in meta.stores]
            info.num_partitions = max(s.num_partitions for s in meta.stores)
            info.num_prefix = {s.store_name: s.num_cols_prefix_key for s in meta.stores}
        props = meta.raw.get("operatorPropertiesJson")
        if isinstance(props, str):
            try:
                parsed = json.loads(props)
            except json.JSONDecodeError:
                parsed = {}
            for var in parsed.get("stateVariables", []) if isinstance(parsed, dict) else []:
                name = str(var.get("stateName"))
                info.state_variables[name] = StateVariable(
                    name, str(var.get("stateVariableType")), bool(var.get("ttlEnabled"))
                )
    if op.state_schema:
        _load_v3(ckpt, op, batch, info)
    return info


def any_kind(ckpt: Checkpoint, op_id: int) -> dict[str, Any]:
    """The selection options that let state selection accept operator ``op_id`` whatever its kind, for the jobs
    that go over every store (listing, rebuilding) rather than read one: transformWithState's first variable."""
    info = operator_info(ckpt, ckpt.state.operators[op_id], damaged_metadata_ok=True)
    return {"state_var": next(iter(info.column_families))} if info.is_tws else {}


#: Spark's shortName of each stateful operator (StatefulOperatorsUtils, 4.x), as operator metadata records it
AGGREGATION = "stateStoreSave"
DEDUPE = "dedupe"
DEDUPE_WITHIN_WATERMARK = "dedupeWithinWatermark"
JOIN = "symmetricHashJoin"
FLATMAP_GROUPS_WITH_STATE = "flatMapGroupsWithState"
SESSION_WINDOW = "sessionWindowStateStoreSaveExec"
GLOBAL_LIMIT = "globalLimit"
TRANSFORM_WITH_STATE = "transformWithStateExec"


#: operator names that share a state layout (the plan may name either); any other known name has its own
_SAME_LAYOUT = {
    FLATMAP_GROUPS_WITH_STATE: {FLATMAP_GROUPS_WITH_STATE, "applyInPandasWithState"},
    AGGREGATION: {AGGREGATION, "StatefulStreamlineAggregate"},
    TRANSFORM_WITH_STATE: {TRANSFORM_WITH_STATE, "transformWithStateInPandasExec", "transformWithStateInPySparkExec"},
}
#: every shortName Spark 4.0-4.3 gives a stateful operator (StatefulOperatorsUtils, read with javap from 4.3.0)
KNOWN_NAMES = frozenset(
    {DEDUPE, DEDUPE_WITHIN_WATERMARK, JOIN, SESSION_WINDOW, GLOBAL_LIMIT}.union(*_SAME_LAYOUT.values())
)


def layout_name(name: str | None) -> str | None:
    """The name of the state layout an operator name stands for (applyInPandasWithState keeps
    flatMapGroupsWithState's, ...)."""
    return next((k for k, names in _SAME_LAYOUT.items() if name in names), name)


def name_contradiction(ckpt: Checkpoint, op: OperatorDir) -> str | None:
    """Why the operator metadata (4.x) cannot be what Spark wrote for ``op``, or None: an operator id other than
    the directory's, a name no Spark release gives, or a name whose state layout the files contradict (a join's
    four stores, a deduplication's ``__dummy__`` value, ...: the evidence :func:`operator_name` reads on 3.5).
    Spark compares the (id, name) pairs of every operator's metadata with the restarted plan's at the first batch
    and fails on any difference (STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA, recorded on 4.3)."""
    if op.metadata_v1 is None or op.metadata_v2:
        return None
    try:
        meta = opmeta.parse(ckpt.read(op.metadata_v1), ckpt.display(op.metadata_v1))
    except FormatError:
        return None  # unreadable: Spark skips the check (an empty map)
    name, op_id = meta.operator_name, meta.raw.get("operatorInfo", {}).get("operatorId")
    if isinstance(op_id, int) and op_id != op.operator:
        return f"it names operator {op_id}, in the directory of operator {op.operator}"
    if name is None:
        return None
    if name not in KNOWN_NAMES:
        return f"no Spark release names a stateful operator {name!r}"
    bare = replace(op, metadata_v1=None, metadata_v1_crc=None, metadata_v2={})
    found = operator_name(ckpt, bare)  # what the files say without the metadata
    if found is None:
        return None
    if found == AGGREGATION:  # the fallback, no layout of its own: only a name that needs one is contradicted
        if name in {JOIN, DEDUPE, DEDUPE_WITHIN_WATERMARK, TRANSFORM_WITH_STATE}:
            return f"it names {name!r}, whose state layout the files do not have"
        return None
    if name not in _SAME_LAYOUT.get(found, {found}):
        return f"it names {name!r}, but the files hold a {found!r} operator's state"
    return None


def operator_name(ckpt: Checkpoint, op: OperatorDir) -> str | None:
    """Which stateful operator wrote ``op``, as Spark's shortName; None when the files do not say.

    4.x records it in operator metadata. A 3.5 checkpoint has none; there the store layout and partition 0's
    schema file tell, from the schemas the operators declare (3.5.9's classes): a join keeps its four stores,
    deduplication a ``__dummy__`` null value (``expiresAtMicros`` within a watermark), flatMapGroupsWithState
    and applyInPandasWithState (both named flatMapGroupsWithState here) a ``groupState`` struct (format 2) or a
    value ending in ``timeoutTimestamp`` (format 1 with a timeout), a session window a key ending in
    ``sessionStartTime``, a global limit a null ``key``; any other single store with a schema is an
    aggregation (its value: the aggregation buffers; a format-1 flatMapGroupsWithState without a timeout, which
    only a session setting its format to 1 writes, looks the same)."""
    try:
        info = operator_info(ckpt, op)
    except FormatError:
        return None
    if info.name:
        return info.name
    if info.is_join:
        return JOIN
    if op.state_schema:
        return TRANSFORM_WITH_STATE
    if info.stores != ["default"]:
        return None
    try:
        stored = store_schema(ckpt, op, info, "default")
    except FormatError:
        return None
    key, value = stored.key.names, stored.value.names
    if value == ("__dummy__",):
        return DEDUPE
    if value == ("expiresAtMicros",):
        return DEDUPE_WITHIN_WATERMARK
    if value and (value[0] == "groupState" or value[-1] == "timeoutTimestamp"):
        return FLATMAP_GROUPS_WITH_STATE
    if key and key[-1] == SESSION_START:
        return SESSION_WINDOW
    if key == ("key",) and isinstance(stored.key.fields[0].data_type, NullType):
        return GLOBAL_LIMIT
    return AGGREGATION


def written_format(ckpt: Checkpoint, op: OperatorDir, name: str | None) -> tuple[str, str] | None:
    """(schema file, state format version) that an operator's stored schema shows, for the operators whose
    format versions lay state out differently (Spark 3.5-4.3's classes); None where the schema does not tell:

    * aggregation: format 1 stores the whole input row (the grouping columns, then the buffers:
      ``StreamingAggregationStateManagerImplV1``), format 2 the buffers only; without grouping columns both
      are the same;
    * stream-stream join: format 2 appends a boolean ``matched`` to the value of ``<side>-keyWithIndexToValue``
      (``KeyWithIndexToValueRowConverterFormatV2``);
    * flatMapGroupsWithState / applyInPandasWithState: format 2 nests the state in a ``groupState`` struct
      (followed by ``timeoutTimestamp`` with a timeout: ``StateManagerImplV2``), format 1 flattens it."""
    name = layout_name(name)
    stores = {AGGREGATION: "default", FLATMAP_GROUPS_WITH_STATE: "default", JOIN: "left-keyWithIndexToValue"}
    if name not in stores:
        return None
    try:
        stored = store_schema(ckpt, op, operator_info(ckpt, op), stores[name])
    except (FormatError, UsageError):
        return None
    key, value = stored.key.names, stored.value.names
    if name == AGGREGATION:
        if not key:
            return None
        return stored.source, "1" if value[: len(key)] == key else "2"
    if name == JOIN:
        last = stored.value.fields[-1] if stored.value.fields else None
        matched = last is not None and last.name == "matched" and isinstance(last.data_type, BooleanType)
        return stored.source, "2" if matched else "1"
    nested = (
        bool(value)
        and value[0] == "groupState"
        and value[1:] in ((), ("timeoutTimestamp",))
        and isinstance(stored.value.fields[0].data_type, StructType)
    )
    return stored.source, "2" if nested else "1"


SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"


def recorded_partitions(ckpt: Checkpoint, op: OperatorDir, conf: Mapping[str, str]) -> int | None:
    """How many partitions of ``op`` Spark loads at a restart: ``spark.sql.shuffle.partitions`` of the offset log
    (``conf``; it wins over the session's), else the operator metadata's numPartitions (4.x); 1 for a global
    limit, which runs in one task whatever they say (PySpark 4.3.0 writes state/<op>/0 only and restarts it).
    None when nothing records it; 1 for an aggregation without grouping keys too (:func:`keyless`). Directories
    beyond it are never read; one below it missing fails the load."""
    try:
        n = operator_info(ckpt, op).num_partitions
    except FormatError:
        n = None
    raw = conf.get(SHUFFLE_PARTITIONS)
    if raw is not None and raw.isdigit():
        n = int(raw)
    if operator_name(ckpt, op) == GLOBAL_LIMIT or keyless(ckpt, op):
        n = 1
    return n


def keyless(ckpt: Checkpoint, op: OperatorDir) -> bool:
    """An aggregation without grouping keys (``groupBy().count()``): its state key has no column, Spark requires
    AllTuples of its input and runs it in one task, so it writes and loads state/<op>/0 only, whatever the partition
    count (seen on 4.3.0: a global count with 4 shuffle partitions restarts with the right count; operator metadata
    says numPartitions 4)."""
    try:
        info = operator_info(ckpt, op)
        if info.is_tws or info.is_join or info.stores != ["default"]:
            return False
        return not store_schema(ckpt, op, info, "default").key.fields
    except FormatError:
        return False


def _v3_batch(rel: str) -> int | None:
    name = rel.rsplit("/", 1)[-1]
    return layout.parse_batch_name(name.split("_", 1)[0])


def _load_v3(ckpt: Checkpoint, op: OperatorDir, batch: int | None, info: OperatorInfo) -> None:
    files = [(b, rel) for rel in op.state_schema if (b := _v3_batch(rel)) is not None]
    eligible = [f for f in files if batch is None or f[0] <= batch] or files
    if not eligible:
        return
    _, rel = max(eligible)
    path = ckpt.display(rel)
    parsed = schema.parse(ckpt.read(rel), path)
    if not isinstance(parsed, schema.SchemaV3):
        return
    info.schema_file = rel
    names = {cf.name for cf in parsed.column_families}
    for cf in parsed.column_families:
        if cf.name not in info.state_variables and not cf.name.startswith("$"):
            # no operator metadata v2: ListState keeps a "$rowCounter_<name>" family (4.3),
            # MapState has a user key schema
            kind = (
                "ListState"
                if f"$rowCounter_{cf.name}" in names
                else ("MapState" if cf.user_key_encoder_schema else "ValueState")
            )
            info.state_variables[cf.name] = StateVariable(cf.name, kind)
        var = info.state_variables.get(cf.name)
        info.column_families[cf.name] = StoreSchema(
            cf.name,
            parse_schema(cf.key_schema, path),
            parse_schema(cf.value_schema, path),
            Encoding.from_spec(cf.key_state_encoder_spec, path),
            multi_value=var is not None and var.kind == "ListState",
            user_key=parse_schema(cf.user_key_encoder_schema, path) if cf.user_key_encoder_schema else None,
            source=path,
            key_schema_id=cf.key_schema_id,
            value_schema_id=cf.value_schema_id,
        )


def store_schema(
    ckpt: Checkpoint,
    op: OperatorDir,
    info: OperatorInfo,
    store_name: str,
    key_ddl: StructType | None = None,
    value_ddl: StructType | None = None,
    force_schema: bool = False,
) -> StoreSchema:
    """The schema of one (non-transformWithState) store. A user schema (``key_ddl``/``value_ddl``) that does
    not lay values out like the stored one (field count and types by position, as Spark's own check) is
    refused unless ``force_schema``: decoding with it would print garbage."""
    rel = None
    for part in sorted(op.partitions):
        store = op.partitions[part].get(store_name)
        if store is not None and store.schema is not None:
            rel = store.schema
            break
    key, value, source = key_ddl, value_ddl, "--key-schema/--value-schema"
    given_both = key is not None and value is not None
    if rel is not None and not (given_both and force_schema):
        path = ckpt.display(rel)
        try:
            parsed = schema.parse(ckpt.read(rel), path)
        except FormatError:
            if not given_both:
                raise
            parsed = None  # a damaged schema file: the user's schema is what is left
    else:
        parsed = None
    if parsed is not None and rel is not None:
        path = ckpt.display(rel)
        if isinstance(parsed, schema.SchemaV3):
            raise FormatError(path, 0, "a v1/v2 store schema", "a v3 (transformWithState) schema", kind="bad-schema")
        stored_key, stored_value = parse_schema(parsed.key_schema, path), parse_schema(parsed.value_schema, path)
        if not force_schema:
            for flag, given, stored in (("--key-schema", key, stored_key), ("--value-schema", value, stored_value)):
                if given is not None and not same_layout(given, stored):
                    raise UsageError(
                        f"{flag} {simple_string(given)} does not match the schema stored in {path}: "
                        f"{simple_string(stored)} (fields and types by position); decoding with it would give "
                        "garbage. Drop the flag, or pass --force-schema to use it anyway"
                    )
        key, value = key or stored_key, value or stored_value
        source = path
    if key is None or value is None:
        missing = "--key-schema" if key is None else "--value-schema"
        where = f"{op.rel}/0/{'' if store_name == 'default' else store_name + '/'}_metadata/schema"
        raise FormatError(
            ckpt.display(where), 0, f"a stored schema file (or {missing} in Spark DDL)", "none", kind="missing-schema"
        )
    num_prefix = info.num_prefix.get(store_name, 0)
    if not num_prefix and key.names and key.names[-1] == SESSION_START and len(key.names) > 1:
        num_prefix = len(key.names) - 1  # a 3.5 session window (no operator metadata)
    encoding = Encoding("prefix", num_prefix) if num_prefix else Encoding()
    return StoreSchema(store_name, key, value, encoding, source=source)
