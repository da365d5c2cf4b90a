"""Batch duration vs state commit time per batch: one self-contained HTML page with inline SVG.

No JavaScript, no external resources, no new dependency. One SVG per query; every executed batch is one
``<circle class="pt-batch">`` (batch duration) and, for stateful queries, one ``<circle class="pt-commit">``
(commit wall time: waves x per-task commit, see ``analyze``), each carrying ``data-batch-id``.
PNG is not offered: rendering one without a heavy dependency (matplotlib/cairo) is not worth it; open the
HTML in a browser and take a screenshot, or print it to PDF.
"""

from __future__ import annotations

from html import escape

from ckptfix.advise.analyze import Advice, QueryAdvice

W, H = 860, 300
ML, MR, MT, MB = 70, 20, 20, 40


def _fmt_ms(ms: float) -> str:
    return f"{ms / 1000:.1f} s" if ms >= 1000 else f"{ms:.0f} ms"


def _svg(q: QueryAdvice, limited: bool) -> str:
    rows = [r for r in q.batches if r.batch_ms is not None]
    commit = [(r.commit_limited_ms if limited else r.commit_full_ms) for r in rows]
    ymax = max([r.batch_ms or 0 for r in rows] + [c or 0 for c in commit] + [1])
    n = len(rows)
    pw, ph = W - ML - MR, H - MT - MB

    def x(i: int) -> float:
        return ML + (pw * (i + 0.5) / n if n else 0)

    def y(v: float) -> float:
        return MT + ph * (1 - v / ymax)

    out = [
        f'<svg width="{W}" height="{H}" viewBox="0 0 {W} {H}" role="img" '
        f'aria-label="batch duration and commit time per batch">'
    ]
    out.append(f'<rect x="{ML}" y="{MT}" width="{pw}" height="{ph}" fill="#fafafa" stroke="#ccc"/>')
    for k in range(5):
        v = ymax * k / 4
        out.append(f'<line x1="{ML}" y1="{y(v):.1f}" x2="{W - MR}" y2="{y(v):.1f}" stroke="#eee"/>')
        out.append(f'<text x="{ML - 6}" y="{y(v) + 4:.1f}" text-anchor="end" font-size="11">{_fmt_ms(v)}</text>')
    step = max(1, n // 12)
    for i, r in enumerate(rows):
        if i % step == 0:
            out.append(
                f'<text x="{x(i):.1f}" y="{H - MB + 16}" text-anchor="middle" font-size="11">{r.batch_id}</text>'
            )
    out.append(f'<text x="{ML + pw / 2}" y="{H - 6}" text-anchor="middle" font-size="12">batch id</text>')
    pts = " ".join(f"{x(i):.1f},{y(r.batch_ms or 0):.1f}" for i, r in enumerate(rows))
    out.append(f'<polyline class="line-batch" fill="none" stroke="#1f77b4" points="{pts}"/>')
    cpts = " ".join(f"{x(i):.1f},{y(c):.1f}" for i, c in enumerate(commit) if c is not None)
    if cpts:
        out.append(f'<polyline class="line-commit" fill="none" stroke="#d62728" points="{cpts}"/>')
    for i, r in enumerate(rows):
        bm = r.batch_ms or 0
        out.append(
            f'<circle class="pt-batch" data-batch-id="{r.batch_id}" cx="{x(i):.1f}" cy="{y(bm):.1f}" r="3" '
            f'fill="#1f77b4"><title>batch {r.batch_id}: {_fmt_ms(bm)}</title></circle>'
        )
        c = commit[i]
        if c is not None:
            share = (r.share_limited if limited else r.share_full) or 0.0
            out.append(
                f'<circle class="pt-commit" data-batch-id="{r.batch_id}" cx="{x(i):.1f}" cy="{y(c):.1f}" '
                f'r="3" fill="#d62728"><title>batch {r.batch_id}: commit {_fmt_ms(c)} '
                f"({100 * share:.1f} %)</title></circle>"
            )
    out.append("</svg>")
    return "\n".join(out)


def html(advice: Advice) -> str:
    limited = advice.concurrency is not None
    how = f"at {advice.concurrency} task slots" if limited else "one task slot per partition (waves = 1)"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8"><title>ckptfix advise: batch duration vs commit time</title>',
        "<style>body{font-family:sans-serif;margin:2em}h2{font-size:1.1em}.k1{color:#1f77b4}.k2{color:#d62728}"
        "</style></head><body>",
        "<h1>Batch duration vs state commit time</h1>",
        f'<p><span class="k1">&#9679; batch duration (triggerExecution)</span> &nbsp; '
        f'<span class="k2">&#9679; state commit wall time {escape(how)}</span></p>',
        f"<p>{escape(advice.model)}</p>",
    ]
    for q in advice.queries:
        parts.append(
            f'<h2 class="query" data-query-id="{escape(q.query_id)}">{escape(q.name or "(unnamed)")} '
            f"&mdash; id {escape(q.query_id)}</h2>"
        )
        if not q.batches:
            parts.append("<p>no executed batch</p>")
            continue
        parts.append(_svg(q, limited))
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
