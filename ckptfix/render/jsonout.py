"""JSON renderer: one JSON document on stdout per command, errors included.

Every document is a JSON object with ``schema_version`` (:data:`SCHEMA_VERSION`); docs/output.md
states the contract and docs/schemas/ holds one JSON Schema per document kind. No other module of
ckptfix serialises a command's output."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only: a command's JSON error line must not load the audit and repair engines
    from ckptfix.audit.model import Report
    from ckptfix.audit.registry import Rule
    from ckptfix.audit.scan import Scanned, ScanReport
    from ckptfix.inspect import Inspection
    from ckptfix.repair.engine import RunInfo
    from ckptfix.repair.plan import Plan, Unfixed
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


def report(r: Report, ignore: Sequence[str] = ()) -> str:
    return json.dumps({"schema_version": SCHEMA_VERSION, **_report_doc(r, ignore)}, indent=2)


def _report_doc(r: Report, ignore: Sequence[str]) -> dict[str, Any]:
    from ckptfix import __version__

    v = r.verdict
    return {
        "ckptfix_version": __version__,
        "checkpoint": r.checkpoint,
        "target_spark": r.target,
        "verdict": {
            "restarts": v.restarts,
            "headline": v.headline,
            "blocking_rule": v.blocking_rule,
            "error": _plain(v.error),
            "hazards": list(v.hazards),
            "unknowns": list(v.unknowns),
            "assumptions": list(v.assumptions),
        },
        "findings": [_plain(f) for f in r.findings],
        "skipped": [_plain(s) for s in r.skipped],
        "facts": r.facts,
        "stats": stats(r.stats),
        "ignored_rules": sorted({i.upper() for i in ignore}),
    }


def scan(s: ScanReport, ignore: Sequence[str] = ()) -> str:
    from ckptfix import __version__

    def one(c: Scanned) -> dict[str, Any]:
        r = c.report
        return {
            "checkpoint": c.url,
            "status": c.status,
            "restarts": None if r is None else r.verdict.restarts,
            "headline": c.error if r is None else r.verdict.headline,
            "blocking_rule": None if r is None else r.verdict.blocking_rule,
            "error": None if c.error is None else {"message": c.error, "kind": c.error_kind},
            "report": None if r is None else _report_doc(r, ignore),
        }

    doc = {
        "schema_version": SCHEMA_VERSION,
        "ckptfix_version": __version__,
        "roots": list(s.roots),
        "target_spark": s.target,
        "counts": s.counts(),
        "ignored_rules": sorted({i.upper() for i in ignore}),
        "checkpoints": [one(c) for c in s.checkpoints],
    }
    return json.dumps(doc, indent=2)


def inspection(i: Inspection) -> str:
    return json.dumps({"schema_version": SCHEMA_VERSION, **_plain(i)}, indent=2)


def plan(p: Plan, unfixed: Sequence[Unfixed], applied: str | None = None, verdict: Any = None, **extra: Any) -> str:
    doc = {
        "schema_version": SCHEMA_VERSION,
        "plan": p.to_json(),
        "unfixed": [u.to_json() for u in unfixed],
        "applied_run": applied,
    }
    if verdict is not None:
        doc["verdict_after"] = {"restarts": verdict.restarts, "headline": verdict.headline}
    doc.update(extra)
    return json.dumps(doc, indent=2)


def runs(items: list[RunInfo], elsewhere: Sequence[tuple[RunInfo, str]] = ()) -> str:
    """``history``: the runs of the backup location, and (``elsewhere``) the runs journaled in another one that
    the checkpoint points to, each with its ``backup`` location."""
    doc: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "runs": [_plain(r) for r in items]}
    if elsewhere:
        doc["elsewhere"] = [{**_plain(r), "backup": url} for r, url in elsewhere]
    return json.dumps(doc, indent=2)


def error(message: str, kind: str, **extra: Any) -> str:
    return json.dumps({"schema_version": SCHEMA_VERSION, "error": {"kind": kind, "message": message, **extra}})


def document(**body: Any) -> str:
    """Any other command's result: its fields after ``schema_version`` (values already plain JSON)."""
    return json.dumps({"schema_version": SCHEMA_VERSION, **_plain(body)}, indent=2, default=str)


def rules(items: Iterable[Rule]) -> str:
    return document(
        rules=[{"id": r.id, "severity": r.severity, "title": r.title, "docs": r.docs, "fix": r.fix} for r in items]
    )


@dataclasses.dataclass(frozen=True)
class RowsDocument:
    text: str
    rows: int


def rows_document(selection: dict[str, Any], line: Callable[[Any], str], rows: Iterable[Any]) -> RowsDocument:
    """``state read/changes -f json``: the selection, then its rows, each as the JSON line renderer writes
    it (Spark's ``to_json`` conventions, decimals exact). Every row is read before anything is printed."""
    items = [line(r).rstrip("\n") for r in rows]
    head = json.dumps({"schema_version": SCHEMA_VERSION, **_plain(selection)}, indent=2)
    body = "[]" if not items else "[\n    " + ",\n    ".join(items) + "\n  ]"
    return RowsDocument(head[: -len("\n}")] + ',\n  "rows": ' + body + "\n}", len(items))


def compact(value: Any) -> str:
    """A JSON value on one line, as a text renderer quotes it (a source's raw offset)."""
    return json.dumps(value, separators=(",", ":"))
