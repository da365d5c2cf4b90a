"""``offsets/<batch>``: the write-ahead offset log (``OffsetSeqLog``).

v1 (all Spark versions)::

    v1
    {"batchWatermarkMs":..,"batchTimestampMs":..,"conf":{..}}   <- may be an empty line
    <source 0 offset JSON or "-">
    ...

v2 (``OffsetMap``, readable from Spark 4.2): metadata is mandatory and each source line is
``<sourceId>:<offset JSON or ->``, split at the first colon.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ckptfix.errors import FormatError
from ckptfix.formats.text import (
    Line,
    dumps,
    java_long,
    loads,
    long_field,
    parse_json_object,
    parse_version,
    preview,
    split_lines,
    strict_utf8,
)

MAX_KNOWN_VERSION = 2
VOID_OFFSET = "-"  # SERIALIZED_VOID_OFFSET: a source without an offset yet
_KNOWN_META = ("batchWatermarkMs", "batchTimestampMs", "conf")

#: the value Spark sets for a ``relevantSQLConfs`` key an offset file does not record
#: (``OffsetSeqMetadata.relevantSQLConfDefaultValues``, read with javap from the 3.5.9 and 4.3.0 jars): the
#: behaviour of the release that wrote files without the key. A key is in the table from the release that
#: added it (3.5.9 has the first seven); keys without an entry (``spark.sql.shuffle.partitions``, the
#: provider class, ``rocksdb.formatVersion``) take the restarting session's value instead.
LEGACY_DEFAULTS: dict[str, str] = {
    "spark.sql.streaming.multipleWatermarkPolicy": "min",
    "spark.sql.streaming.flatMapGroupsWithState.stateFormatVersion": "1",
    "spark.sql.streaming.aggregation.stateFormatVersion": "1",
    "spark.sql.streaming.join.stateFormatVersion": "1",
    "spark.sql.streaming.stateStore.compression.codec": "lz4",
    "spark.sql.streaming.statefulOperator.useStrictDistribution": "false",
    "spark.sql.optimizer.pruneFiltersCanPruneStreamingSubplan": "true",
    "spark.sql.streaming.stateStore.encodingFormat": "unsaferow",
    "spark.sql.streaming.stateStore.rowChecksum.enabled": "false",
    "spark.sql.streaming.stateStore.rocksdb.mergeOperatorVersion": "1",
    "spark.sql.function.protobufExtensions.enabled": "false",
    "spark.sql.streaming.queryEvolution.enableSourceEvolution": "false",
    "spark.sql.streaming.statefulOperator.alwaysNullableOutput.enabled": "false",
    "spark.sql.dropDuplicates.deterministicKeyOrder.enabled": "false",
}


@dataclass(frozen=True)
class OffsetSeqMetadata:
    batch_watermark_ms: int = 0
    batch_timestamp_ms: int = 0
    conf: dict[str, str] = field(default_factory=dict)
    #: every other key (sourceMetadataInfo, controlBatchInfo, keys of newer Sparks), kept
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "batchWatermarkMs": self.batch_watermark_ms,
            "batchTimestampMs": self.batch_timestamp_ms,
            "conf": dict(self.conf),
        }
        out.update(self.extra)
        return out


@dataclass(frozen=True)
class SourceOffset:
    source_id: str  # ordinal ("0", "1", ...) or the 4.2+ source name
    json: str | None  # raw offset JSON text as written; None for "-"


@dataclass(frozen=True)
class OffsetFileV1:
    metadata: OffsetSeqMetadata | None
    offsets: tuple[SourceOffset, ...]
    version: int = 1


@dataclass(frozen=True)
class OffsetFileV2:
    metadata: OffsetSeqMetadata
    offsets: tuple[SourceOffset, ...]
    version: int = 2


OffsetFile = OffsetFileV1 | OffsetFileV2


def _metadata(path: str, line: Line) -> OffsetSeqMetadata:
    obj = parse_json_object(path, line, "offset-log metadata JSON")
    conf = obj.get("conf", {})
    if not isinstance(conf, dict):
        raise FormatError(path, line.offset, "'conf' as a JSON object", preview(dumps(conf)), kind="invalid-json")
    wm = long_field(path, line, obj, "batchWatermarkMs")
    ts = long_field(path, line, obj, "batchTimestampMs")
    extra = {k: v for k, v in obj.items() if k not in _KNOWN_META}
    return OffsetSeqMetadata(wm, ts, {str(k): str(v) for k, v in conf.items()}, extra)


def parse(data: bytes, path: str = "<offsets>") -> OffsetFile:
    strict_utf8(data, path)
    lines = split_lines(data)
    if not lines:
        raise FormatError(path, 0, "an offset log entry", "an empty file", kind="empty")
    version = parse_version(path, lines[0], MAX_KNOWN_VERSION)
    if len(lines) < 2:
        raise FormatError(
            path, len(data), "a metadata line after the version line", "the end of the file", kind="header-only"
        )
    meta_line = lines[1]
    meta: OffsetSeqMetadata | None = None
    if meta_line.data.strip():
        meta = _metadata(path, meta_line)
    body = lines[2:]
    if version == 1:
        offsets = tuple(SourceOffset(str(i), None if ln.text == VOID_OFFSET else ln.text) for i, ln in enumerate(body))
        return OffsetFileV1(meta, offsets)
    if meta is None:
        raise FormatError(
            path, meta_line.offset, "metadata JSON (mandatory in v2)", "an empty line", kind="empty-metadata"
        )
    v2_offsets = []
    for ln in body:
        text = ln.text
        if ":" not in text:
            raise FormatError(path, ln.offset, "'<sourceId>:<offset>'", preview(text), kind="v2-no-colon")
        sid, _, raw = text.partition(":")
        v2_offsets.append(SourceOffset(sid, None if raw == VOID_OFFSET else raw))
    return OffsetFileV2(meta, tuple(v2_offsets))


def dump(entry: OffsetFile) -> bytes:
    """Bytes as Spark writes them: no trailing newline."""
    meta = "" if entry.metadata is None else dumps(entry.metadata.to_json())
    lines = [f"v{entry.version}", meta]
    for o in entry.offsets:
        value = VOID_OFFSET if o.json is None else o.json
        lines.append(value if entry.version == 1 else f"{o.source_id}:{value}")
    return "\n".join(lines).encode("utf-8")


def file_source_log_offset(raw: str | None) -> int | None:
    """The file source's offset ``{"logOffset":N}`` (an entry of ``sources/<k>/``), N as json4s reads it into a
    Long; None for any other source's offset, or one Spark cannot read (:func:`unusable_offset_field`)."""
    value = _json_object(raw)
    if value is None or "logOffset" not in value:
        return None
    return java_long(value["logOffset"])


#: offsets whose source the JSON's keys name for sure -> (the source, the fields Spark's json4s reads into a Long,
#: in the case class's order): FileStreamSourceOffset(logOffset) and RatePerMicroBatchStreamOffset(offset,
#: timestamp). Other shapes (a bare number: rate, socket, memory; Kafka's {"topic":{"0":N}}; ...) say nothing.
OFFSET_KINDS: dict[frozenset[str], tuple[str, tuple[str, ...]]] = {
    frozenset({"logOffset"}): ("file", ("logOffset",)),
    frozenset({"offset", "timestamp"}): ("rate-micro-batch", ("offset", "timestamp")),
}


def offset_kind(raw: str | None) -> str | None:
    """The source an offset JSON belongs to when its keys say so for sure (:data:`OFFSET_KINDS`); else None."""
    known = _known_offset(raw)
    return known[0] if known else None


def unusable_offset_field(raw: str | None) -> tuple[str, str] | None:
    """(field, what it holds) for the first field of an offset of a known kind that json4s cannot read into a
    Long (a string, boolean, null, array or object: ``MappingException: No usable value for <field>``); numbers
    are read (a fraction truncated, as :func:`java_long`). None when Spark reads it, or the kind is unknown."""
    known = _known_offset(raw)
    if known is None:
        return None
    for name in known[1]:
        if java_long(known[2][name]) is None:
            return name, dumps(known[2][name])
    return None


def _known_offset(raw: str | None) -> tuple[str, tuple[str, ...], dict[str, Any]] | None:
    value = _json_object(raw)
    kind = None if value is None else OFFSET_KINDS.get(frozenset(value))
    return (kind[0], kind[1], value) if kind and value is not None else None


def _json_object(raw: str | None) -> dict[str, Any] | None:
    """An offset's JSON when it is an object; None for "-", other JSON, or text that does not parse."""
    if raw is None:
        return None
    try:
        value = loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
