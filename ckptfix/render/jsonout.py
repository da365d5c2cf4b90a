"""JSON renderer: one JSON document on stdout per command, errors included."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from ckptfix.audit.model import Report
from ckptfix.inspect import Inspection
from ckptfix.repair.engine import RunInfo
from ckptfix.repair.plan import Plan
from ckptfix.storage import IOStats

SCHEMA_VERSION = 1


def _plain(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: _plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    return obj


def stats(s: IOStats | None) -> dict[str, Any] | None:
    if s is None:
        return None
    return {
        "list_calls": s.list_calls,
        "entries_listed": s.entries_listed,
        "files_read": s.files_read,
        "bytes_read": s.bytes_read,
    }


def report(r: Report) -> str:
    v = r.verdict
    doc = {
        "schema_version": SCHEMA_VERSION,
        "checkpoint": r.checkpoint,
        "target_spark": r.target,
        "verdict": {
            "restarts": v.restarts,
            "headline": v.headline,
            "blocking_rule": v.blocking_rule,
            "error": _plain(v.error),
            "hazards": list(v.hazards),
            "unknowns": list(v.unknowns),
        },
        "findings": [_plain(f) for f in r.findings],
        "skipped": [_plain(s) for s in r.skipped],
        "facts": r.facts,
        "stats": stats(r.stats),
    }
    return json.dumps(doc, indent=2)


def inspection(i: Inspection) -> str:
    return json.dumps({"schema_version": SCHEMA_VERSION, **_plain(i)}, indent=2)


def plan(p: Plan, unfixed: list[str], applied: str | None = None, verdict: Any = None) -> str:
    doc = {"schema_version": SCHEMA_VERSION, "plan": p.to_json(), "unfixed": unfixed, "applied_run": applied}
    if verdict is not None:
        doc["verdict_after"] = {"restarts": verdict.restarts, "headline": verdict.headline}
    return json.dumps(doc, indent=2)


def runs(items: list[RunInfo]) -> str:
    return json.dumps({"schema_version": SCHEMA_VERSION, "runs": [_plain(r) for r in items]}, indent=2)


def error(message: str, kind: str, **extra: Any) -> str:
    return json.dumps({"schema_version": SCHEMA_VERSION, "error": {"kind": kind, "message": message, **extra}})
