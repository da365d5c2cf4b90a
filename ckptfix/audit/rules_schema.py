"""State schema files that the restart reads: every store's ``_metadata/schema`` in partition 0, and the files
transformWithState's operator metadata names.

Spark 3.5 and 4.x read partition 0's ``<store>/_metadata/schema`` (v1/v2) of every operator but transformWithState
at the first batch of a restart, to compare it with the query's schemas (3.5: in the task of partition 0; 4.x: on the
driver while planning): a file cut short fails with ``java.io.EOFException`` (no message) from ``readUTF`` (damage
case schema_truncated, recorded on 3.5.9-4.2.1 and live on 4.3). Bytes after the value schema are never read.

Spark 4.x's transformWithState operators record, in operator metadata v2
(``state/<op>/_metadata/v2/<batch>``), the absolute paths of their schema files
(``stateStoreInfo[*].stateSchemaFilePaths``, one ``stateSchemaFilePath`` in early 4.0 builds), qualified with
the checkpoint's location when they were written. A checkpoint moved by a plain copy keeps naming the old
location: with the old copy gone, the first batch fails with ``FileNotFoundException: File file:<old path>
does not exist`` (PySpark 4.3.0, tests/migrate/test_relocate_live.py); while the old copy exists, the moved one
silently reads its schema files.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from ckptfix import layout
from ckptfix.audit.context import AuditContext
from ckptfix.audit.model import Evidence, Finding, SparkError
from ckptfix.audit.registry import check, define
from ckptfix.checkpoint import OperatorDir
from ckptfix.errors import CkptfixError, FormatError
from ckptfix.formats import opmeta
from ckptfix.formats import schema as schema_format
from ckptfix.formats.text import preview
from ckptfix.formats.unsaferow import spark_json_rejects, spark_json_text
from ckptfix.storage import Location, split_url, uri_forms

SCHEMA_PATH = define(
    "STATE-SCHEMA-PATH-OUTSIDE",
    "error",
    "Operator metadata names state schema files outside this checkpoint",
    "transformWithState operator metadata (v2) records absolute paths of the operator's schema files. After a "
    "checkpoint is moved by a plain copy they still name the old location: Spark 4.x fails with "
    "FileNotFoundException when the old copy is gone, and reads the old copy's files while it exists.",
    "Copy the checkpoint with `ckptfix migrate relocate CKPT NEWDIR --apply`, which rewrites the paths into the "
    "copy (it also repairs a checkpoint that was already moved by a plain copy); restart from NEWDIR.",
)


TWS_METADATA_MISSING = define(
    "STATE-TWS-METADATA-MISSING",
    "error",
    "A transformWithState operator has no operator metadata",
    "transformWithState reads its operator metadata (v2, state/<op>/_metadata/v2/<batch>) at the first batch to "
    "find its state schema files; without it Spark 4.3 fails: STDS_FAILED_TO_READ_OPERATOR_METADATA (damage hunt of "
    "2026-11-27). Other operators rewrite a missing operator metadata file and go on.",
    "Restore state/<op>/_metadata from a backup.",
)
SCHEMA_FILE_BAD = define(
    "STATE-SCHEMA-FILE-UNREADABLE",
    "error",
    "A state schema file the restart reads is missing or unreadable",
    "At the first batch of a restart Spark reads partition 0's store schema files (state/<op>/0/<store>/_metadata/"
    "schema, v1/v2) of every operator but transformWithState, and the schema files (v3, state/<op>/_stateSchema/...) "
    "a transformWithState operator's metadata names (not the older ones it no longer names). A damaged one fails: cut "
    "short, with EOFException (recorded on 3.5.9-4.2.1 and 4.3), otherwise with a JSON error; a v3 file the metadata "
    "names and that is missing, with FileNotFoundException (seen on 4.3). A file whose JSON names no Spark data type "
    "(a type name or a key edited) fails too: v1/v2 in StructType.fromString with UNSUPPORTED_DATATYPE (recorded on "
    "3.5.9-4.3), v3 likewise (recorded on 4.0.5-4.3). "
    "A missing v1/v2 file is written again.",
    "Restore the schema file from a backup. A v1/v2 file (state/<op>/0/<store>/_metadata/schema) may also be moved "
    "out of the checkpoint with its .schema.crc: Spark then writes the query's schemas there, without comparing them "
    "with the state's (make sure the query is unchanged).",
)


def schema_paths(meta: opmeta.OperatorMetadata) -> list[str]:
    out: list[str] = []
    for store in meta.raw.get("stateStoreInfo", []) or []:
        if not isinstance(store, dict):
            continue
        for key in ("stateSchemaFilePaths", "stateSchemaFilePath"):
            value = store.get(key)
            out += [v for v in (value if isinstance(value, list) else [value]) if isinstance(v, str) and v]
    return out


def _inside(value: str, roots: tuple[str, ...]) -> str | None:
    """The path relative to the checkpoint when ``value`` names a file under one of its spellings."""
    for root in roots:
        base = root.rstrip("/") + "/"
        if value.startswith(base):
            return value[len(base) :]
    return None


def _exists_elsewhere(ctx: AuditContext, value: str) -> bool | None:
    """Whether a path outside the checkpoint exists (None: cannot tell, e.g. another store without credentials)."""
    scheme, path = split_url(value if "://" in value else value.replace("file:/", "file:///", 1))
    url = path if scheme == "file" else f"{scheme}://{path}"
    try:
        parent, name = url.rsplit("/", 1)
        return Location(parent, ctx.ckpt.location.storage_options).exists(name)
    except (OSError, ValueError, CkptfixError):  # e.g. hdfs:// without a client here: cannot tell
        return None


def unreadable_error(exc: FormatError, rel: str) -> SparkError:
    """What Spark raises reading a schema file that does not parse: ``readUTF``/``readInt`` past its end throw an
    EOFException without a message (recorded); other damage fails in Spark's JSON parsing (class not recorded)."""
    if exc.kind in ("truncated", "empty"):
        return SparkError("java.io.EOFException", None, "java.io.EOFException")  # Spark's has no message
    return SparkError(None, None, rel.rsplit("/", 1)[-1])


def _unreadable(ctx: AuditContext, rel: str, data: bytes, why: str) -> Iterator[Finding]:
    """The finding for a schema file the restart reads (``rel``, checkpoint-relative), when it does not parse."""
    ck = ctx.ckpt
    try:
        model = schema_format.parse(data, ck.display(rel))
    except FormatError as exc:
        evidence = [Evidence(ck.display(rel), exc.offset, exc.expected, exc.found)]
        if exc.kind == "trailing-bytes":  # Spark reads the schemas and stops: what follows is never read
            yield SCHEMA_FILE_BAD.finding(
                f"{rel} has {exc.found} after its schemas: Spark reads the schemas and stops, it never reads them",
                evidence,
                severity="warning",
            )
            return
        yield SCHEMA_FILE_BAD.finding(
            f"{rel} cannot be read: expected {exc.expected}, found {exc.found}; {why}",
            evidence,
            spark_error=replace(unreadable_error(exc, rel), batch=ctx.next_batch),
            stage=63,
        )
        return
    for what, obj in _type_jsons(model):
        rejected = spark_json_rejects(obj)
        if rejected is None:
            continue
        shown = preview(spark_json_text(rejected))
        evidence = [Evidence(ck.display(rel), None, f"the {what} as a Spark data type", shown)]
        # StructType.fromString: DataType.fromJson, then the legacy parser, whose error shows the whole schema;
        # v3 (transformWithState) too, on 4.0.5-4.3.0 (recorded: schema_v3_type_name_flipped, restarted where the
        # operator metadata names the damaged file; until 2026-11-28 the recording restarted a copy whose metadata
        # named the undamaged base's files, and 4.0.5-4.2.1 seemed not to read v3 files at a restart)
        error = SparkError(
            "org.apache.spark.SparkIllegalArgumentException",
            "UNSUPPORTED_DATATYPE",
            f"Unsupported data type {spark_json_text(obj)}",
            batch=ctx.next_batch,
        )
        yield SCHEMA_FILE_BAD.finding(
            f"{rel} cannot be read: its {what} is JSON, but Spark reads no data type from {shown}; {why}",
            evidence,
            spark_error=error,
            stage=63,
        )
        return


def _type_jsons(model: schema_format.StateSchema) -> Iterator[tuple[str, Any]]:
    """(what, JSON value) of every schema a state schema file holds, in the order Spark reads them."""
    if isinstance(model, schema_format.SchemaV3):
        for cf in model.column_families:
            yield f"column family {cf.name}'s key schema", cf.key_schema
            yield f"column family {cf.name}'s value schema", cf.value_schema
        return
    yield "key schema", model.key_schema
    yield "value schema", model.value_schema


def _store_schemas(ctx: AuditContext, op: OperatorDir) -> Iterator[Finding]:
    """Partition 0's ``<store>/_metadata/schema`` of the stores Spark opens (v1/v2: not transformWithState)."""
    for name, store in sorted(op.partitions.get(0, {}).items()):
        if store.schema is not None and name in layout.SPARK_STORES:
            why = "Spark reads it at the first batch to check the query's schemas"
            yield from _unreadable(ctx, store.schema, ctx.ckpt.read(store.schema), why)


@check
def schema_files(ctx: AuditContext) -> Iterator[Finding]:
    ck = ctx.ckpt
    roots = uri_forms(ck.location.url)
    for op in sorted(ck.state.operators.values(), key=lambda o: o.operator):
        if not op.state_schema:
            yield from _store_schemas(ctx, op)
        if not op.metadata_v2:
            if op.state_schema and ctx.target.at_least(4, 0):  # schema v3 files: transformWithState's
                where = f"state/{op.operator}/_metadata"
                yield TWS_METADATA_MISSING.finding(
                    f"operator {op.operator} has state schema files ({op.state_schema[0]}) but no operator metadata: "
                    "transformWithState cannot find its schemas",
                    [Evidence(ck.display(where + "/v2"), expected="operator metadata v2", found="none")],
                    spark_error=SparkError(
                        "org.apache.spark.sql.execution.datasources.v2.state.StateDataSourceReadOperatorMetadataFailure",
                        "STDS_FAILED_TO_READ_OPERATOR_METADATA",
                        "Failed to read the operator metadata",
                    ),
                    stage=63,
                )
            continue
        rel = op.metadata_v2[max(op.metadata_v2)]  # the newest: what the restart plans with
        try:
            meta = opmeta.parse(ck.read(rel), ck.display(rel))
        except FormatError:
            continue  # STATE-OPERATOR-METADATA-UNREADABLE reports it
        for value in schema_paths(meta):
            inner = _inside(value, roots)
            if inner is not None:
                yield from _inner_schema(ctx, op.operator, rel, inner)
                continue
            exists = _exists_elsewhere(ctx, value)
            bare = value.split(":", 1)[1] if value.startswith("file:") else value
            bare = "/" + bare.lstrip("/") if value.startswith("file:") else bare
            evidence = [Evidence(ck.display(rel), expected=f"a path under {ck.location.url}", found=value)]
            if exists is False:
                yield SCHEMA_PATH.finding(
                    f"operator {op.operator}'s metadata names the schema file {value}, outside this checkpoint and "
                    "gone (the checkpoint was moved by a plain copy?): the first batch fails to read it",
                    evidence,
                    spark_error=SparkError("java.io.FileNotFoundException", None, f"{bare} does not exist"),
                    stage=63,
                )
            else:
                state = "it exists there" if exists else "ckptfix cannot check whether it exists"
                yield SCHEMA_PATH.finding(
                    f"operator {op.operator}'s metadata names the schema file {value}, outside this checkpoint "
                    f"({state}): Spark reads that location's file, and fails once it is removed",
                    evidence,
                    severity="warning",
                )


def _inner_schema(ctx: AuditContext, op: int, meta_rel: str, inner: str) -> Iterator[Finding]:
    """A schema file the operator metadata names inside this checkpoint: there, and readable."""
    ck = ctx.ckpt
    try:
        data = ck.read(inner)
    except FileNotFoundError:
        yield SCHEMA_FILE_BAD.finding(
            f"{inner} is missing; operator {op}'s metadata ({meta_rel}) names it",
            [Evidence(ck.display(inner), expected="a file", found="none")],
            spark_error=SparkError("java.io.FileNotFoundException", None, f"{inner} does not exist"),
            stage=63,
        )
        return
    yield from _unreadable(ctx, inner, data, f"operator {op}'s metadata ({meta_rel}) names it")
