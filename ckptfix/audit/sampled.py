"""Rows of the state, sampled and decoded with the stored schema, once per audit: the evidence that a stored
schema describes the stored rows (``STATE-SCHEMA-ROWS``), that keys sit in their partitions
(``STATE-PARTITION-MISPLACED``) and that operator metadata, not a schema file, is what contradicts the state
(``STATE-OPERATOR-METADATA-MISMATCH``).

Per partition, the rows of the newest file of the restart chain that holds a value (a file of removals only proves
little: any key schema of the right width decodes), else of the newest with rows, at most :data:`SAMPLE` of them; a
zip's smallest SST's first entries. Not sampled (None): transformWithState, Avro-encoded state, row checksums, a
custom provider, a schema ckptfix cannot read.
"""

from __future__ import annotations

from dataclasses import dataclass

from ckptfix.audit.context import AuditContext
from ckptfix.checkpoint import OperatorDir, StoreDir
from ckptfix.errors import FormatError, UsageError
from ckptfix.formats import codec
from ckptfix.formats.unsaferow import StructType, fixed_width
from ckptfix.state.decode import Decoder
from ckptfix.state.read import ENCODING, ROW_CHECKSUM
from ckptfix.state.schemas import operator_info, store_schema
from ckptfix.stores import chain as chains
from ckptfix.stores import provider as providers
from ckptfix.stores import sample

SAMPLE = 16  # rows decoded per partition and store
FILES = 4  # files read per partition and store, at most


@dataclass(frozen=True)
class Rows:
    """A sample of one state file's rows decoded with the stored schema."""

    rel: str
    decoded: int  # rows (keys, and values where the file holds them) that decoded
    values: int = 0  # values among them
    error: FormatError | None = None  # the first row that did not
    in_key: bool = False  # that row's key did not decode (else its value)


def _sample_rows(
    ctx: AuditContext, store: StoreDir, step: chains.Step, compression: str, decoder: Decoder
) -> Rows | None:
    """The first :data:`SAMPLE` rows of ``step`` decoded (None: the file cannot be read, which the chain check
    reports, or holds no row)."""
    try:
        records = sample.first_records(ctx.ckpt, store, step, compression, SAMPLE)
    except FormatError:
        return None
    if not records:
        return None
    decoded = values = 0
    for rec in records:
        try:
            decoder.key(rec.key)
            _exact(decoder, rec.key, decoder.sch.key, key=True)
        except (FormatError, UsageError, TypeError, ValueError, KeyError) as exc:
            return Rows(step.rel, decoded, values, _as_format_error(exc, ctx.ckpt.display(step.rel)), in_key=True)
        if rec.value is not None and not _dummy(decoder, rec.value):
            try:
                decoder.value(rec.value)
                _exact(decoder, rec.value, decoder.sch.value, key=False)
            except (FormatError, UsageError, TypeError, ValueError, KeyError) as exc:
                return Rows(step.rel, decoded, values, _as_format_error(exc, ctx.ckpt.display(step.rel)))
            values += 1
        decoded += 1
    return Rows(step.rel, decoded, values)


def schema_file(ctx: AuditContext, op: OperatorDir, name: str) -> str:
    """Where the stored schema of ``op``'s store ``name`` comes from (for messages)."""
    try:
        return store_schema(ctx.ckpt, op, operator_info(ctx.ckpt, op, ctx.state_version - 1), name).source or ""
    except FormatError:
        return ctx.ckpt.display(op.rel)


def store_rows(ctx: AuditContext, op: OperatorDir, name: str) -> dict[int, Rows] | None:
    """Per partition, the sampled rows of ``op``'s store ``name`` (None: not sampled, see the module)."""
    key = ("store_rows", op.operator, name)
    if key not in ctx.memo:
        ctx.memo[key] = _store_rows(ctx, op, name)
    result: dict[int, Rows] | None = ctx.memo[key]
    return result


def _store_rows(ctx: AuditContext, op: OperatorDir, name: str) -> dict[int, Rows] | None:
    from ckptfix.audit.rules_state import CODEC, expected_partitions, store_unique_id, unique_ids  # (imports us)

    ck, N = ctx.ckpt, ctx.state_version
    if N <= 0:
        return None
    if ctx.conf.get(ENCODING, "unsaferow").lower() != "unsaferow" or ctx.conf.get(ROW_CHECKSUM, "").lower() == "true":
        return None
    found = providers.of(ctx.conf, op)
    if found.custom:
        return None
    try:
        info = operator_info(ck, op, N - 1)
        if info.is_tws:
            return None
        decoder = Decoder(store_schema(ck, op, info, name), found.kind, ck.display(op.rel))
    except (FormatError, UsageError):
        return None
    n, store_names = expected_partitions(ctx, op)
    s_index = store_names.index(name) if name in store_names else 0
    ids = unique_ids(ctx, N)
    compression = codec.normalize(ctx.conf.get(CODEC, "lz4"))
    provider = found.kind
    out: dict[int, Rows] = {}
    for p in sorted(op.partitions):
        store = op.partitions[p].get(name)
        uid = store_unique_id(ids, op.operator, p, s_index)
        if (n is not None and p >= n) or store is None or (ids is not None and uid is None):
            continue
        for step in sample.newest_steps(store, N, provider, uid)[:FILES]:
            rows = _sample_rows(ctx, store, step, compression, decoder)
            if rows is None:
                continue
            if p not in out or out[p].error is None and not out[p].values:
                out[p] = rows
            if rows.error is not None or rows.values:
                break
    return out


def fixed_size(schema: StructType) -> int | None:
    """The size of every UnsafeRow of ``schema`` when all its fields are fixed-width (null bitset and slots, no
    variable-length region: Spark's UnsafeRowWriter writes nothing more), else None."""
    if not all(fixed_width(f.data_type) for f in schema.fields):
        return None
    n = len(schema.fields)
    return 8 * ((n + 63) // 64) + 8 * n


def _exact(decoder: Decoder, data: bytes, schema: StructType, key: bool) -> None:
    """A row of only fixed-width fields has exactly their size: more bytes are fields the schema does not have (a
    string key read as a long decodes, as garbage, but leaves its characters over)."""
    size = fixed_size(schema)
    if size is None:
        return
    if decoder.provider == "hdfs":
        row = data
    elif decoder.cf or decoder.avro or decoder.row_checksum or (key and decoder.sch.encoding.kind != "none"):
        return
    else:
        row = data[1:]  # after the encoding version byte
    if len(row) != size:
        raise FormatError(
            decoder.path,
            0,
            f"a row of exactly {size} bytes ({len(schema.fields)} fixed-width fields)",
            f"{len(row)} bytes",
            kind="bad-row",
        )


#: a deduplication's value: one null field (Spark never compares it with the schema; before 3.5 the schema file
#: recorded the input row there, matrix/3.3.0/dedup)
_DUMMY_ROW = (1).to_bytes(8, "little") + bytes(8)


def _dummy(decoder: Decoder, data: bytes) -> bool:
    return (data if decoder.provider == "hdfs" else data[1:]) == _DUMMY_ROW


def _as_format_error(exc: Exception, path: str) -> FormatError:
    if isinstance(exc, FormatError):
        return exc
    return FormatError(path, 0, "a row the stored schema describes", str(exc)[:120], kind="bad-row")
