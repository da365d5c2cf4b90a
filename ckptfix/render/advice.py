"""Renderers for ``ckptfix advise``: text (rich) and one JSON document."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from rich.console import Console

from ckptfix.advise.analyze import COMMIT_PHASES, COMMIT_SUBPHASES, Advice, QueryAdvice, Stat
from ckptfix.render.jsonout import SCHEMA_VERSION
from ckptfix.render.text import folding_table, styled

_STYLE = {"high": "bold red", "warning": "yellow", "info": "cyan"}


def _plain(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: _plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    return obj


def to_json(a: Advice) -> str:
    doc = {"schema_version": SCHEMA_VERSION, **_plain(a), "worst_level": a.worst_level()}
    return json.dumps(doc, indent=2)


def _ms(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v / 1000:.1f} s" if v >= 1000 else f"{v:.0f} ms"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f} %"


def _stat_cells(s: Stat | None, fmt: Any) -> list[str]:
    return ["-", "-", "-"] if s is None else [fmt(s.median), fmt(s.p95), fmt(s.max)]


def _query(q: QueryAdvice, a: Advice, console: Console) -> None:
    console.print()
    styled(
        console,
        "bold",
        f"query {q.name or '(unnamed)'}",
        f" id {q.query_id}  runs: {len(q.run_ids)}  batches: {len(q.batches)}  idle triggers: {q.idle_triggers}",
    )
    cl = {True: "on", False: "off", None: "unknown"}[q.changelog]
    prov = f"state store: {q.provider}"
    if q.provider == "rocksdb":
        prov += f", changelog checkpointing {cl}" + (f" ({q.changelog_evidence})" if q.changelog_evidence else "")
    if q.snapshot_lag is not None:
        prov += f", versions since oldest reported snapshot upload: {q.snapshot_lag}"
    console.print(prov, highlight=False, soft_wrap=True)
    if not q.batches:
        return
    limited = a.concurrency is not None
    t = folding_table(
        "batch",
        "duration",
        "commit sum",
        "per task",
        "share",
        *(["waves", f"share@{a.concurrency}"] if limited else []),
        "logs",
        title_justify="left",
    )
    rows = q.batches if len(q.batches) <= 20 else q.batches[:5] + q.batches[-15:]
    for r in rows:
        waves = max((o.waves or 0) for o in r.ops) if r.ops else None
        total = sum(o.commit_ms or 0 for o in r.ops) if r.ops else None
        t.add_row(
            str(r.batch_id),
            _ms(r.batch_ms),
            _ms(total),
            _ms(r.commit_full_ms),
            _pct(r.share_full),
            *([str(waves) if waves else "-", _pct(r.share_limited)] if limited else []),
            _ms(r.offset_log_ms),
        )
    caption = (
        "commit sum = commitTimeMs of all tasks; share = per-task commit / duration; logs = walCommit + commitOffsets"
    )
    if len(q.batches) > 20:
        caption = f"first 5 and last 15 of {len(q.batches)} batches (all in --format json); " + caption
    t.caption = caption
    console.print(t)
    s = folding_table("metric", "median", "p95", "max", title="over all batches", title_justify="left")
    for key, label, fmt in (
        ("batch_ms", "batch duration", _ms),
        ("commit_per_task_ms", "commit per task", _ms),
        ("share_full", "commit share (waves = 1)", _pct),
        ("share_limited", f"commit share at {a.concurrency} slots", _pct),
        ("offset_log_ms", "walCommit + commitOffsets", _ms),
        ("offset_log_share", "offset/commit log share", _pct),
    ):
        if key in q.stats:
            s.add_row(label, *_stat_cells(q.stats[key], fmt))
    console.print(s)
    if q.rocksdb_commit_shares:
        main = {k: v for k, v in q.rocksdb_commit_shares.items() if k in COMMIT_PHASES}
        sub = {k: v for k, v in q.rocksdb_commit_shares.items() if k in COMMIT_SUBPHASES}
        parts = ", ".join(f"{k} {_pct(v)}" for k, v in sorted(main.items(), key=lambda kv: -kv[1]))
        if sub:
            parts += "; inside fileSync: " + ", ".join(f"{k} {_pct(v)}" for k, v in sub.items())
        console.print(f"RocksDB commit phases (share of summed commitTimeMs): {parts}", highlight=False, soft_wrap=True)
    if not q.recommendations:
        console.print("no recommendation: commit and log writes stay under every threshold", highlight=False)
    for rec in q.recommendations:
        styled(console, _STYLE[rec.level], rec.level.upper(), f" {rec.id}: {rec.title}")
        console.print(f"  {rec.text}", highlight=False, soft_wrap=True)
        console.print(f"  threshold: {rec.threshold}", highlight=False, soft_wrap=True)
        if rec.availability:
            console.print(f"  availability: {rec.availability}", highlight=False, soft_wrap=True)
        for k, v in rec.settings.items():
            console.print(f"  set {k}={v}", highlight=False, soft_wrap=True)


def text(a: Advice, console: Console) -> None:
    how = (
        f"{a.concurrency} task slots (waves = ceil(partitions / {a.concurrency}))"
        if a.concurrency is not None
        else "one task slot per partition (waves = 1, the lower bound; pass --concurrency for your cluster)"
    )
    styled(console, "bold", "model", f": {a.model}; concurrency: {how}")
    for q in a.queries:
        _query(q, a, console)


def summary(a: Advice, console: Console) -> None:
    """Inputs and warnings (stderr)."""
    for i in a.inputs:
        extra = f", {i.other_lines} other lines" if i.other_lines else ""
        console.print(
            f"read {i.path}: {i.kind}, {i.events} progress events, {i.skipped} skipped{extra}",
            highlight=False,
            soft_wrap=True,
        )
    for sk in a.skipped[:20]:
        console.print(f"ckptfix: warning: skipped {sk}", highlight=False, markup=False, soft_wrap=True)
    if len(a.skipped) > 20:
        console.print(
            f"ckptfix: warning: ... and {len(a.skipped) - 20} more skipped (all in --format json)",
            highlight=False,
            markup=False,
        )
    if a.duplicates:
        console.print(
            f"{a.duplicates} duplicate events (same id, runId, batchId, timestamp) counted once", highlight=False
        )
