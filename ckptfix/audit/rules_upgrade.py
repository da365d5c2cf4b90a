"""Pre-upgrade (and pre-downgrade) audit: what changes between the Spark that wrote the checkpoint
(inferred from its files, :mod:`ckptfix.audit.versions`) and ``--target-spark``.

Facts (real files and restarts; spark-behaviour-observed.md §8 and tests/audit_upgrade/):

* Stream-stream join, 3.5 -> 4.x. On 3.5.9 a side with ``withWatermark`` stores a row schema whose join-key
  columns are ``nullable=false`` (the optimizer's inferred ``isnotnull`` filter sits below the watermark node
  and 3.5 lets that nullability through it). 4.0.5 and 4.3.0 write the same columns as nullable (the event-time
  column stays non-null: its ``isnotnull`` sits above the watermark). Restarting a 3.5 join checkpoint on 4.3.0
  fails with STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE on ``<side>-keyWithIndexToValue``, and so do 4.0.5, 4.1.4
  and 4.2.1 (tests/audit_upgrade/join35_outcomes.json). Other operators with non-null stored fields are not
  affected: the 3.5.9 session-window fixture (non-null ``sessionStartTime``, ``session_window``, ``count``) and
  aggregations (non-null buffer ``count``) restart on 4.3.0. This is *not* the 4.3
  ``statefulOperator.alwaysNullableOutput`` fix: 4.3 pins that conf to its legacy ``false`` for a checkpoint
  whose offset log lacks it (it records ``false`` in the next offset file), and 4.0.5 behaves the same.
  The schema check (StateSchemaCompatibilityChecker) accepts a stored nullable field where the query's is
  non-null, never the reverse, so a stored schema with every field nullable restarts on every 4.x, and the
  UnsafeRow bytes of the state files do not depend on nullability (fixes_upgrade.py rewrites the files).
* Downgrade: 3.5.9 restarted checkpoints whose latest offset file 4.3.0 wrote (17 conf keys) and ignored
  ``state/<op>/_metadata/metadata`` (§8: agg_hdfs, agg_rocksdb, agg_rocksdb_cl, dedup_wm, stateless, join);
  the new keys are harmless while they hold the legacy values. Log versions a release cannot read are
  LOG-VERSION-TOO-NEW (not repeated here).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from typing import Any

from ckptfix import layout
from ckptfix.audit import versions as V
from ckptfix.audit.context import AuditContext
from ckptfix.audit.model import Evidence, Finding, Skipped, SparkError
from ckptfix.audit.registry import check, define
from ckptfix.checkpoint import OperatorDir, StoreDir
from ckptfix.errors import FormatError
from ckptfix.formats import schema as schema_format

WATERMARK_KEY = "spark.watermarkDelayMs"
JOIN_VALUE_STORES = ("left-keyWithIndexToValue", "right-keyWithIndexToValue")
JOIN_STORES = layout.JOIN_STORES
JOIN_FORMAT_KEY = "spark.sql.streaming.join.stateFormatVersion"
VALUE_SCHEMA_ERROR = "org.apache.spark.sql.execution.streaming.state.StateStoreValueSchemaNotCompatible"

JOIN_NULLABILITY = define(
    "UPGRADE-JOIN-NULLABILITY",
    "error",
    "Spark 4.x will refuse the stream-stream join state schema Spark 3.5 wrote",
    "Spark 3.5 stores a watermarked join side's row schema with the join-key columns (and any column narrowed by "
    "a filter below withWatermark) as nullable=false; Spark 4.0+ derives them as nullable and its state schema "
    "check refuses a stored non-nullable field where the query's is nullable: STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE "
    "at the first batch (verified 3.5.9 -> 4.3.0; 4.0.5 writes the same nullable schema). Not caused by 4.3's "
    "statefulOperator.alwaysNullableOutput, which stays false for checkpoints that lack it. Decided from the "
    "side's key schema, which 3.5 derives from the join key expressions: a key nullable there whose row column is "
    "non-null was narrowed by the join's inferred filter (fails); a non-null key is a non-null expression or "
    "source column, which 4.x derives non-null too (restarts: the 3.5.9 matrix join on coalesce(key), Spark's own "
    "3.5.1 and 4.0.0 join checkpoints). Other non-null row fields the files cannot tell apart: unknown.",
    "`ckptfix repair CKPT --target-spark 4.3 --apply` (the release the query restarts on) rewrites the join's schema "
    "files with every field nullable "
    "(the check accepts a nullable stored field for a non-null one; the state bytes are unchanged). Spark's own "
    "way out, spark.sql.streaming.stateStore.stateSchemaCheck=false, turns the check off for every operator.",
)
JOIN_FORMAT_1 = define(
    "UPGRADE-JOIN-FORMAT-1",
    "error",
    "Spark 4.x cannot write the missing state schema of a stream-stream join in state format 1",
    "Spark 4.x asks for a state schema file in the version of the join's state format "
    "(spark.sql.streaming.join.stateFormatVersion, 1 when the offset log does not record it, as in checkpoints "
    "written before Spark 3.0) and has a version-1 schema writer only in its own tests: a join whose schema files "
    "(state/<op>/0/<store>/_metadata/schema, written from Spark 3.1 on) are missing fails at the first batch with "
    "IllegalArgumentException: Unsupported schema writer version: 1. Verified with PySpark 4.3.0 (a 3.5.9 join in "
    "format 1 without its schema files fails; with them it restarts); Spark 3.5 restarts it and writes the files.",
    "Run the query once on Spark 3.5 (`ckptfix audit CKPT --target-spark 3.5` first), which writes the join's "
    "schema files, then audit for 4.x again (`ckptfix repair CKPT --target-spark 4.3` fixes the nullability 3.5 "
    "stores): verified with 3.5.9 -> 4.3.0.",
)
PATH = define(
    "UPGRADE-PATH",
    "info",
    "What the target Spark changes in this checkpoint",
    "The writing release is inferred from the files (conf keys of the offset log, log versions, operator "
    "metadata, schema files, checksum sidecars). A newer release records its new conf keys with the legacy "
    "values (the old behaviour is kept), and 4.x writes state/<op>/_metadata/metadata on its first batch.",
    "Nothing to do; keep a copy of the checkpoint (`ckptfix migrate relocate CKPT COPY --apply`) before the first run "
    "on the new release.",
)
DOWNGRADE = define(
    "UPGRADE-DOWNGRADE",
    "warning",
    "The target Spark is older than the one that last wrote this checkpoint",
    "An older release ignores the conf keys and the operator metadata files newer ones write (3.5.9 restarted "
    "checkpoints last written by 4.3.0), but cannot read newer log versions (LOG-VERSION-TOO-NEW) nor state "
    "written in newer formats (UPGRADE-DOWNGRADE-STATE).",
    "Check the listed items; keep the newer release if any state item applies.",
)
DOWNGRADE_STATE = define(
    "UPGRADE-DOWNGRADE-STATE",
    "error",
    "State written in a format the target Spark cannot read",
    "transformWithState operators (operator metadata v2, schema v3) exist from 4.0; state checkpoint format v2 "
    "names files <version>_<uuid> (4.0+); Avro state encoding (4.0+) and row checksums (4.2+) change the stored "
    "bytes; join state format versions above 2 are unknown to 3.5.",
    "Stay on a release that reads it, or rebuild the state with the older release from the source data.",
)

#: (conf key, value that older releases misread, first release that reads it, what it is)
_STATE_CONFS = (
    ("spark.sql.streaming.stateStore.encodingFormat", "avro", "4.0", "state rows are Avro-encoded"),
    ("spark.sql.streaming.stateStore.rowChecksum.enabled", "true", "4.2", "state values carry row checksums"),
)


def _fields(schema: dict[str, Any]) -> list[dict[str, Any]]:
    fields = schema.get("fields")
    return [f for f in fields if isinstance(f, dict)] if isinstance(fields, list) else []


def is_join(op: OperatorDir) -> bool:
    names = set(op.store_names)
    return all(s in names for s in JOIN_VALUE_STORES)


def schema_stores(op: OperatorDir) -> list[StoreDir]:
    """The stores of an operator that hold a ``_metadata/schema`` file (partition 0 only, in practice)."""
    return [s for _, stores in sorted(op.partitions.items()) for _, s in sorted(stores.items()) if s.schema]


def narrowed_fields(value_schema: dict[str, Any]) -> list[str] | None:
    """Fields of a join side's stored row that 4.x will derive nullable; None when the side has no watermark
    (no prediction: the inferred filter then sits right below the join; read from the optimized plans 3.5.9 and
    4.0.5 print, not restarted)."""
    fields = _fields(value_schema)
    if not any(WATERMARK_KEY in (f.get("metadata") or {}) for f in fields):
        return None
    return [
        str(f.get("name"))
        for f in fields
        if f.get("nullable") is False and WATERMARK_KEY not in (f.get("metadata") or {})
    ]


def _type_key(field: dict[str, Any]) -> str:
    return json.dumps(field.get("type"), sort_keys=True)


def classify_narrowed(
    key_schema: dict[str, Any], value_schema: dict[str, Any], narrowed: list[str]
) -> tuple[list[str], list[str]]:
    """Split a join side's non-null row fields into (narrowed by a filter: 4.x fails, cannot tell).

    Read from the side's key schema (the join keys, ``field0..``, then ``index``), which 3.5 derives from the
    key expressions and not from the filtered row: a key field that is nullable there while every row field of
    its type is non-null means the key column was narrowed by the join's inferred ``isnotnull`` filter sitting
    right below the watermark (the 3.5.9 fixture joined straight on the sources: 4.3 fails). Non-null row fields
    no more numerous than the non-null key fields of their type are non-null key expressions (``coalesce``, a
    non-null source column): 4.x derives them non-null too (the matrix's 3.5.9 join_nonnull restarts on 4.0.5
    to 4.3.0, as Spark's own 3.5.1 and 4.0.0 join checkpoints do). Anything else (a non-key field non-null by an
    expression or by the user's filter) the files cannot tell apart."""
    keys = [f for f in _fields(key_schema) if f.get("name") != "index"]
    fields = {str(f.get("name")): f for f in _fields(value_schema)}
    failing: list[str] = []
    unknown: list[str] = []
    by_type: dict[str, list[str]] = {}
    for name in narrowed:
        by_type.setdefault(_type_key(fields[name]), []).append(name)
    for t, names in by_type.items():
        nullable_keys = sum(1 for k in keys if _type_key(k) == t and k.get("nullable") is not False)
        nonnull_keys = sum(1 for k in keys if _type_key(k) == t and k.get("nullable") is False)
        nullable_rows = sum(1 for f in fields.values() if _type_key(f) == t and f.get("nullable") is not False)
        if nullable_keys and not nullable_rows:
            failing.extend(names)
        elif len(names) > nonnull_keys:
            unknown.extend(names)
    return failing, unknown


def committed_range(ctx: AuditContext) -> V.VersionRange | None:
    """The release that planned the newest committed batch (else the oldest offset file's): the schema files
    are those it accepted. A failed first attempt on a newer release leaves an uncommitted offset file only."""
    ck = ctx.ckpt
    K = ctx.latest_commit
    candidates = [K] if K is not None and K in ck.offsets.files else []
    candidates += sorted(ck.offsets.files)
    for b in candidates:
        entry = ck.try_offset(b)
        if entry is not None and entry.metadata is not None and V.usable_conf(entry.metadata.conf):
            return V.range_from_conf(entry.metadata.conf, f"offsets/{b}")
    return None


DEDUP_KEY_ORDER = "spark.sql.dropDuplicates.deterministicKeyOrder.enabled"
#: what an older release loses when it ignores a key set to a non-legacy value
_LOST = {
    "spark.sql.dropDuplicates.deterministicKeyOrder.enabled": "dropDuplicates on several columns may bind its state "
    "key columns in another order, SPARK-57489",
    "spark.sql.streaming.statefulOperator.alwaysNullableOutput.enabled": "state schemas were stored all-nullable; "
    "3.5.9 accepted such an aggregation checkpoint",
    "spark.sql.streaming.stateStore.rocksdb.mergeOperatorVersion": "how RocksDB merge operands (list state) "
    "are encoded; not verified on a downgrade",
}


def join_schema_findings(ctx: AuditContext) -> Iterator[Finding | Skipped]:
    t = ctx.target
    if not t.at_least(4, 0):
        return
    written = committed_range(ctx)
    if written is None or written.high is None or V.rank(written.high) > V.rank("3.5"):
        return
    ck = ctx.ckpt
    K = ctx.latest_commit
    for op in sorted(ck.state.operators.values(), key=lambda o: o.operator):
        if not is_join(op):
            continue
        ran_on_4x = [b for b in op.metadata_v2 if K is not None and b <= K]
        if ran_on_4x:  # operator metadata v2 of a committed batch: a 4.x release already accepted this schema
            continue
        failing: list[tuple[StoreDir, list[str]]] = []
        undecided: list[tuple[StoreDir, list[str]]] = []
        for store in schema_stores(op):
            if store.store not in JOIN_VALUE_STORES or store.schema is None:
                continue
            try:
                parsed = schema_format.parse(ck.read(store.schema), ck.display(store.schema))
            except (FormatError, OSError) as exc:
                yield Skipped(JOIN_NULLABILITY.id, f"{ck.display(store.schema)} unreadable: {exc}")
                continue
            if isinstance(parsed, schema_format.SchemaV3):
                continue
            narrowed = narrowed_fields(parsed.value_schema)
            if narrowed:
                fails, unsure = classify_narrowed(parsed.key_schema, parsed.value_schema, narrowed)
                if fails:
                    failing.append((store, fails))
                if unsure:
                    undecided.append((store, unsure))
        if not failing and undecided:
            if ctx.query is not None:
                continue  # --against: the QUERY-* rules compare the planned schema with the stored one
            sides = "; ".join(f"{s.store}: {', '.join(fs)}" for s, fs in undecided)
            yield JOIN_NULLABILITY.finding(
                f"operator {op.operator} is a stream-stream join whose state schema ({written.text}) stores "
                f"non-nullable row fields that are not its join keys ({sides}): Spark {t.label} refuses the schema "
                "if they were narrowed by a filter below withWatermark on 3.5, and accepts it if they are non-null "
                "expressions; the files cannot tell",
                [Evidence(ck.display(s.schema or ""), found="nullable=false", note=s.store) for s, _ in undecided],
                severity="warning",
                fix=_runnable(
                    "`ckptfix audit CKPT --against MODULE:FUNCTION` plans the query and compares its state schema "
                    "with the stored one; if they differ, " + JOIN_NULLABILITY.fix,
                    ctx,
                ),
                undecided=True,
            )
            continue
        if not failing:
            continue
        sides = "; ".join(f"{s.store}: {', '.join(fs)}" for s, fs in failing)
        evidence = [
            Evidence(
                ck.display(s.schema or ""),
                expected=f"fields {', '.join(fs)} nullable (as Spark {t.label} derives them)",
                found="nullable=false",
                note=f"value schema of {s.store}",
            )
            for s, fs in failing
        ]
        evidence.append(Evidence(ck.display("offsets"), note=f"planned by {written.text}: {written.evidence[0]}"))
        yield JOIN_NULLABILITY.finding(
            f"operator {op.operator} is a stream-stream join whose state schema {written.text} wrote with "
            f"non-nullable row fields ({sides}); Spark {t.label} derives them nullable and refuses the stored "
            f"schema at the first batch",
            evidence,
            spark_error=SparkError(
                VALUE_SCHEMA_ERROR,
                "STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE",
                "Provided value schema does not match existing state value schema.",
                ctx.next_batch,
            ),
            stage=64,
            fix=_runnable(JOIN_NULLABILITY.fix, ctx),
        )


def _runnable(fix: str, ctx: AuditContext) -> str:
    """A rule's fix text with the values this audit knows: the checkpoint for CKPT, the audit's target for the
    example release after --target-spark (the CLI refuses a placeholder such as 4.x)."""
    fix = re.sub(r"--target-spark 4\.\d+", f"--target-spark {ctx.target.label}", fix)
    from ckptfix.storage import command_flags

    flags = command_flags(ctx.ckpt.location.storage_options)
    return fix.replace("CKPT", shlex.quote(ctx.ckpt.location.url) + (f" {flags}" if flags else ""))


def join_format_findings(ctx: AuditContext) -> Iterator[Finding]:
    if not ctx.target.at_least(4, 0) or ctx.state_version == 0:
        return
    version = ctx.conf.get(JOIN_FORMAT_KEY, "1")  # Spark's legacy default for offset logs without the key
    if version != "1":
        return
    ck = ctx.ckpt
    for op in sorted(ck.state.operators.values(), key=lambda o: o.operator):
        if not is_join(op):
            continue
        first = op.partitions.get(0, {})
        missing = [name for name in JOIN_STORES if first.get(name) is None or first[name].schema is None]
        if not missing:
            continue
        recorded = "records 1" if JOIN_FORMAT_KEY in ctx.conf else "does not record it (Spark's legacy default: 1)"
        yield JOIN_FORMAT_1.finding(
            f"operator {op.operator} is a stream-stream join in state format 1 (the offset log {recorded}) without "
            f"the schema files of {', '.join(missing)}; Spark {ctx.target.label} cannot write them in version 1",
            [
                Evidence(ck.display(f"{op.rel}/0/{name}/_metadata/schema"), expected="a schema file", found="none")
                for name in missing
            ],
            spark_error=SparkError(
                "java.lang.IllegalArgumentException", None, "Unsupported schema writer version: 1", ctx.next_batch
            ),
            stage=64,
            fix=_runnable(JOIN_FORMAT_1.fix, ctx),
        )


def _new_keys(writer: V.VersionRange, target: str) -> list[str]:
    lo = writer.high
    return sorted(
        k
        for k, added in V.CONF_ADDED.items()
        if V.rank(added) <= V.rank(target) and (lo is None or V.rank(added) > V.rank(lo))
    )


def upgrade_path(ctx: AuditContext, info: V.WriterInfo) -> Iterator[Finding]:
    t = ctx.target
    w = info.latest
    if w is None or not w.older_than(t.label):
        return
    ck = ctx.ckpt
    items: list[str] = []
    keys = _new_keys(w, t.label)
    key_evidence: list[Evidence] = []
    if keys:
        items.append(
            f"the next offset file records {len(keys)} new conf keys with the values that keep the old behaviour"
        )
        key_evidence.append(
            Evidence(
                ck.display(f"offsets/{info.latest_batch}"),
                note="new keys the next offset file records: "
                + ", ".join(f"{k}={V.LEGACY_DEFAULTS.get(k, '?')}" for k in keys),
            )
        )
    if t.major >= 4 and ck.state.operators:
        missing = [op.operator for op in ck.state.operators.values() if op.metadata_v1 is None and not op.metadata_v2]
        if missing:
            items.append(
                "Spark 4.x writes operator metadata state/<op>/_metadata/metadata for operator(s) "
                + ", ".join(map(str, sorted(missing)))
                + " on its first batch (3.5 never writes it and ignores it if you go back)"
            )
    if t.label == "4.1" and ck.state.operators:  # 4.2.1 and 4.3.0 (format v1) wrote none
        items.append("new state files get visible JSON <file>.crc checksum sidecars (4.1.4 writes them by default)")
    if t.refuses_missing_metadata and ck.metadata_rel is None:
        items.append("migration guide: Spark 4.2+ refuses a checkpoint without `metadata` (see META-MISSING)")
    providers = {s.provider for op in ck.state.operators.values() for st in op.partitions.values() for s in st.values()}
    fmt = ctx.conf.get("spark.sql.streaming.stateStore.rocksdb.formatVersion")
    if "rocksdb" in providers and fmt:
        items.append(
            f"RocksDB SST format stays pinned at the recorded rocksdb.formatVersion={fmt} (SPARK-36519), so the "
            "older release can still read what the new one writes"
        )
    evidence = [Evidence(ck.display(f"offsets/{info.latest_batch}"), note=e) for e in w.evidence] + key_evidence
    yield PATH.finding(
        f"{info.text}; target Spark {t.label}: " + ("; ".join(items) if items else "no checkpoint file changes format"),
        evidence,
    )


def downgrade(ctx: AuditContext, info: V.WriterInfo) -> Iterator[Finding]:
    t = ctx.target
    w = info.latest
    ck = ctx.ckpt
    state_items: list[tuple[str, Evidence]] = []
    conf = ctx.conf
    for key, bad, first, what in _STATE_CONFS:
        if conf.get(key, "").lower() == bad and V.rank(t.label) < V.rank(first):
            state_items.append(
                (
                    f"{key}={bad}: {what}, which Spark {t.label} does not know (read from Spark {first} on)",
                    Evidence(ck.display(f"offsets/{info.latest_batch}"), expected=f"{key} absent or legacy", found=bad),
                )
            )
    join_fmt = conf.get("spark.sql.streaming.join.stateFormatVersion")
    if join_fmt and join_fmt.isdigit() and int(join_fmt) > 2 and not t.at_least(4, 0):
        state_items.append(
            (
                f"join state format {join_fmt}: Spark {t.label} knows 1 and 2",
                Evidence(ck.display(f"offsets/{info.latest_batch}"), expected="1 or 2", found=join_fmt),
            )
        )
    if not t.at_least(4, 0):
        for f in info.features:
            if f.key in ("opmeta-v2", "schema-v3", "state-uid"):
                state_items.append((f"{f.title}: Spark {t.label} has no reader for it", Evidence(f.path, note=f.title)))
    for text, ev in state_items:
        yield DOWNGRADE_STATE.finding(text, [ev])
    if w is None or not w.newer_than(t.label):
        return
    ignored = sorted(k for k, added in V.CONF_ADDED.items() if V.rank(added) > V.rank(t.label) and k in conf)
    harmless = [k for k in ignored if conf[k].lower() == V.LEGACY_DEFAULTS.get(k, "").lower()]
    names = ctx.operator_names
    # the dropDuplicates key order matters only where a dropDuplicates operator keeps state (hunt 12: every 4.3
    # checkpoint downgraded warned of it, aggregations and joins too); 3.5's files may not name their operators
    unused = (
        [DEDUP_KEY_ORDER]
        if DEDUP_KEY_ORDER in ignored
        and DEDUP_KEY_ORDER not in harmless
        and (not names or all(n is not None and not n.startswith("dedupe") for n in names.values()))
        else []
    )
    others = [k for k in ignored if k not in harmless and k not in unused]
    parts = [f"{info.text}; target Spark {t.label} is older"]
    if harmless:
        parts.append(
            f"it ignores {len(harmless)} conf keys it does not know, harmless at their legacy values: "
            + ", ".join(harmless)
        )
    if unused:
        parts.append(
            f"it ignores {DEDUP_KEY_ORDER}={conf[DEDUP_KEY_ORDER]}: no dropDuplicates operator keeps state here"
        )
    if others:
        parts.append(
            "it ignores conf keys set to non-legacy values, so their newer behaviour is lost: "
            + ", ".join(f"{k}={conf[k]} ({_LOST.get(k, 'no known effect on the files')})" for k in others)
        )
    if any(op.metadata_v1 for op in ck.state.operators.values()):
        parts.append("it ignores state/<op>/_metadata/metadata")
    newer = [
        f"{f.title} (Spark {f.since}+)"
        for f in info.features
        if V.rank(f.since) > V.rank(t.label) and f.key != "opmeta-v1"
    ]
    if newer:
        parts.append("files only newer releases write: " + ", ".join(newer))
    L = info.latest_batch
    latest_entry = ck.try_offset(L) if L is not None else None
    if latest_entry is not None and latest_entry.version > t.max_offset_version:
        parts.append(f"it cannot read offsets/{L} (v{latest_entry.version}): see LOG-VERSION-TOO-NEW")
    yield DOWNGRADE.finding(
        "; ".join(parts), [Evidence(ck.display(f"offsets/{info.latest_batch}"), note=w.evidence[0])]
    )


@check
def upgrade(ctx: AuditContext) -> Iterator[Finding | Skipped]:
    yield from join_schema_findings(ctx)
    yield from join_format_findings(ctx)
    info = V.infer(ctx.ckpt)
    yield from upgrade_path(ctx, info)
    yield from downgrade(ctx, info)
