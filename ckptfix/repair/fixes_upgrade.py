"""Planners for upgrade findings: rewrite the state schema files a newer Spark refuses.

UPGRADE-JOIN-NULLABILITY: Spark 4.x derives a 3.5 stream-stream join's key columns as nullable and refuses
the stored row schema where they are ``nullable=false``. Its check (StateSchemaCompatibilityChecker) accepts a
stored nullable field where the query's is non-null, never the reverse, so every ``_metadata/schema`` of the
join is rewritten with every field nullable (nested struct fields, array elements and map values too; names,
types, metadata and unknown JSON keys kept). The state files are untouched: an UnsafeRow has a null bit for
every field whatever the schema says, so the stored rows read the same. Hadoop ``.crc`` sidecars are rewritten
by the plan builder. Verified with real Spark: 3.5.9 join checkpoint -> this rewrite -> 4.3.0 restarts and the
join output over all input is exact (tests/audit_upgrade/test_live_join_upgrade.py); 4.0.5, 4.1.4, 4.2.1, 4.3.0 and
3.5.9 itself restart the rewritten files (recorded in tests/audit_upgrade/join35_outcomes.json).
"""

from __future__ import annotations

from typing import Any

from ckptfix.audit.model import Finding
from ckptfix.audit.rules_upgrade import JOIN_NULLABILITY, is_join, schema_stores
from ckptfix.errors import CannotFix, FormatError
from ckptfix.formats import schema as schema_format
from ckptfix.repair.fixes import FixContext, fixes


def nullable_type(t: Any) -> Any:
    """A Spark type JSON with every nested field, array element and map value nullable."""
    if not isinstance(t, dict):
        return t
    kind = t.get("type")
    out = dict(t)
    if kind == "struct" and isinstance(t.get("fields"), list):
        out["fields"] = [
            {**f, "nullable": True, "type": nullable_type(f.get("type"))} if isinstance(f, dict) else f
            for f in t["fields"]
        ]
    elif kind == "array":
        out["containsNull"] = True
        out["elementType"] = nullable_type(t.get("elementType"))
    elif kind == "map":
        out["valueContainsNull"] = True
        out["keyType"] = nullable_type(t.get("keyType"))
        out["valueType"] = nullable_type(t.get("valueType"))
    return out


def nullable_schema(model: schema_format.StateSchema) -> schema_format.StateSchema:
    if isinstance(model, schema_format.SchemaV1):
        return schema_format.SchemaV1(nullable_type(model.key_schema), nullable_type(model.value_schema))
    if isinstance(model, schema_format.SchemaV2):
        return schema_format.SchemaV2(nullable_type(model.key_schema), nullable_type(model.value_schema))
    return model  # v3 (transformWithState) is never a 3.5 join


def _changed_fields(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    b = before.get("fields") or []
    return [
        str(x.get("name")) for x, y in zip(b, after.get("fields") or [], strict=False) if isinstance(x, dict) and x != y
    ]


@fixes(JOIN_NULLABILITY.id)
def widen_join_schema(fc: FixContext, finding: Finding) -> list[str]:
    ck = fc.ckpt
    named = {ev.path for ev in finding.evidence}
    effects: list[str] = []
    for op in sorted(ck.state.operators.values(), key=lambda o: o.operator):
        stores = schema_stores(op)
        if not is_join(op) or not any(ck.display(s.schema or "") in named for s in stores):
            continue
        for store in stores:
            rel = store.schema or ""
            try:
                before = schema_format.parse(ck.read(rel), ck.display(rel))
            except FormatError as exc:
                raise CannotFix(f"{exc} (restore the schema file from a backup first)") from None
            after = nullable_schema(before)
            if after == before:
                continue
            assert isinstance(before, schema_format.SchemaV1 | schema_format.SchemaV2)
            assert isinstance(after, schema_format.SchemaV1 | schema_format.SchemaV2)
            changed = _changed_fields(before.key_schema, after.key_schema) + _changed_fields(
                before.value_schema, after.value_schema
            )
            fc.builder.write(
                rel,
                schema_format.dump(after),
                f"{store.store}: fields {', '.join(changed)} stored as nullable (Spark {fc.audit.target.label} "
                "derives them nullable; a nullable stored field accepts a non-null one)",
                JOIN_NULLABILITY.id,
            )
        effects.append(
            f"operator {op.operator} (stream-stream join): Spark {fc.audit.target.label}'s state schema check "
            "accepts the rewritten schema files (a stored nullable field is compatible with a nullable or "
            "non-null query field); the state rows are not touched (UnsafeRow keeps a null bit per field "
            "whatever the schema says), so the restart resumes the join with its buffered rows; Spark 3.5 "
            "accepts the rewritten files too"
        )
    if not effects:
        raise CannotFix("no schema file of a stream-stream join needs a change")
    return effects
