"""What a (new, not started) streaming query looks like, as plain data: no PySpark here.

Filled by :mod:`ckptfix.spark.queryshape` from the query's planned IncrementalExecution; the
``QUERY-*`` rules compare it with the checkpoint, and tests build it by hand.

Schemas use :class:`ckptfix.formats.unsaferow.StructType`, the same type the stored state
schema files parse into, so the comparison is like for like.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ckptfix.formats.unsaferow import ArrayType, DataType, MapType, StructType


@dataclass(frozen=True)
class SourceShape:
    """One streaming source, in the order Spark numbers them (``sources/<i>``, offset line i)."""

    kind: str  # short name: "file", "kafka", "rate", "memory", "socket", ... (lower case)
    #: the source's user options that identify WHAT it reads (path, subscribe, topic, ...)
    options: dict[str, str] = field(default_factory=dict)
    description: str = ""


@dataclass(frozen=True)
class SinkShape:
    kind: str  # "parquet", "json", ... (file sinks), "kafka", "foreachBatch", "foreach", "memory", "console", "noop"
    options: dict[str, str] = field(default_factory=dict)  # path, topic, ... (checkpointLocation removed)
    output_mode: str | None = None
    trigger: str | None = None

    FILE_FORMATS = frozenset({"parquet", "json", "csv", "orc", "text", "avro", "xml"})

    @property
    def is_file(self) -> bool:
        return self.kind.lower() in self.FILE_FORMATS

    @property
    def path(self) -> str | None:
        return self.options.get("path")


@dataclass(frozen=True)
class StoreShape:
    """One state store (or column family) of an operator, with the schemas Spark checks."""

    name: str  # "default", "left-keyToNumValues", ...
    key: StructType | None = None
    value: StructType | None = None
    #: Spark does not compare the value schema of this store (dedup's dummy value)
    ignore_value: bool = False


@dataclass(frozen=True)
class WindowShape:
    """The time window an aggregation groups by (``window(ts, duration, slide, startTime)``), in microseconds, as
    Spark computes it for the new query: windows start at ``offset + k * slide`` and last ``duration``."""

    field: int  # the window struct's index in the operator's key
    duration: int
    slide: int
    offset: int  # 0 <= offset < slide

    def describe(self) -> str:
        def span(micros: int) -> str:
            return f"{micros / 1_000_000:g} s"

        shape = "tumbling" if self.slide == self.duration else f"sliding every {span(self.slide)}"
        start = f", offset {span(self.offset)}" if self.offset else ""
        return f"{span(self.duration)} windows, {shape}{start}"


@dataclass(frozen=True)
class OperatorShape:
    operator_id: int
    name: str  # Spark's StateStoreWriter.shortName: stateStoreSave, dedupe, symmetricHashJoin, ...
    node: str = ""  # the physical node's class name
    stores: tuple[StoreShape, ...] = ()
    state_format_version: int | None = None
    num_partitions: int | None = None
    detail: str = ""  # e.g. join type, grouping keys (for messages)
    #: the time window among the keys (an aggregation by window(...)); None: none, or not one Spark could tell
    window: WindowShape | None = None


@dataclass(frozen=True)
class QueryShape:
    spec: str  # MODULE:FUNCTION it came from
    spark_version: str
    sources: tuple[SourceShape, ...]
    sink: SinkShape
    operators: tuple[OperatorShape, ...] = ()
    #: the session confs that decide restart behaviour (those the offset log also records)
    conf: dict[str, str] = field(default_factory=dict)
    watermarks: int = 0  # number of withWatermark nodes
    #: what Spark's start() refuses the query with before it reads the checkpoint (UnsupportedOperationChecker):
    #: (Java exception class, message), None when it accepts it or the check could not run
    refused: tuple[str, str] | None = None


# ----------------------------------------------------------- Spark's schema compatibility rule


def compatible(new: DataType, stored: DataType) -> bool:
    """Spark's ``DataType.equalsIgnoreNameAndCompatibleNullability(new, stored)``, the test
    ``StateSchemaCompatibilityChecker`` applies: same shape and types, field names ignored,
    and a value may only become *less* nullable (stored nullable, or new not nullable)."""
    if isinstance(new, StructType) and isinstance(stored, StructType):
        return len(new.fields) == len(stored.fields) and all(
            (s.nullable or not n.nullable) and compatible(n.data_type, s.data_type)
            for n, s in zip(new.fields, stored.fields, strict=True)
        )
    if isinstance(new, ArrayType) and isinstance(stored, ArrayType):
        return (stored.contains_null or not new.contains_null) and compatible(new.element_type, stored.element_type)
    if isinstance(new, MapType) and isinstance(stored, MapType):
        return (
            (stored.value_contains_null or not new.value_contains_null)
            and compatible(new.key_type, stored.key_type)
            and compatible(new.value_type, stored.value_type)
        )
    return new == stored


def ddl(schema: StructType | None) -> str:
    """A short human form: ``key: string, cnt: bigint NOT NULL``."""
    if schema is None:
        return "?"
    parts = []
    for f in schema.fields:
        t = f.data_type.json_value()
        parts.append(f"{f.name}: {t if isinstance(t, str) else t.get('type', t)}{'' if f.nullable else ' NOT NULL'}")
    return "(" + ", ".join(parts) + ")"
