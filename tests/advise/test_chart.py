"""``--chart OUT.html``: a self-contained page, one SVG per query, one point per batch."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

from tests.advise.helpers import FIXTURES, progress_event, run


def svgs(html: str) -> list[ET.Element]:
    return [ET.fromstring(m) for m in re.findall(r"<svg\b.*?</svg>", html, flags=re.S)]


def test_chart_real_log(tmp_path: Path) -> None:
    log = FIXTURES / "spark-4.3.0" / "driver.log"
    out = tmp_path / "chart.html"
    code, stdout, stderr = run(str(log), "--concurrency", "2", "--chart", str(out))
    assert code == 0, stderr
    html = out.read_text()
    assert html.startswith("<!DOCTYPE html>")
    # self-contained: no scripts, no external resources
    assert "<script" not in html and "http://" not in html and "https://" not in html and "src=" not in html
    meta = json.loads((FIXTURES / "spark-4.3.0" / "meta.json").read_text())
    charts = svgs(html)
    assert len(charts) == len(meta["queries"]) == 3
    for svg in charts:
        batch_pts = [c for c in svg.iter("circle") if c.get("class") == "pt-batch"]
        commit_pts = [c for c in svg.iter("circle") if c.get("class") == "pt-commit"]
        assert [c.get("data-batch-id") for c in batch_pts] == [str(i) for i in range(meta["batches_per_query"])]
        assert [c.get("data-batch-id") for c in commit_pts] == [str(i) for i in range(meta["batches_per_query"])]
    assert f"chart written to {out}" in stderr


def test_chart_values(tmp_path: Path) -> None:
    """Higher batch duration is drawn higher (smaller y); the tooltip carries the hand-computed share."""
    p = tmp_path / "p.jsonl"
    events = [progress_event(batch_id=0, trigger_ms=547730), progress_event(batch_id=1, trigger_ms=273865)]
    p.write_text("".join(json.dumps(e) + "\n" for e in events))
    out = tmp_path / "c.html"
    code, _, stderr = run(str(p), "--concurrency", "32", "--chart", str(out), "--format", "json")
    assert code == 0, stderr
    (svg,) = svgs(out.read_text())
    b0, b1 = (c for c in svg.iter("circle") if c.get("class") == "pt-batch")
    assert float(b0.get("cy", "0")) < float(b1.get("cy", "0"))
    c0 = next(c for c in svg.iter("circle") if c.get("class") == "pt-commit")
    title = c0.find("title")
    assert title is not None and title.text is not None
    assert "18.2 %" in title.text  # 2 waves x 49791 ms / 547730 ms


def test_chart_unwritable(tmp_path: Path) -> None:
    p = tmp_path / "p.json"
    p.write_text(json.dumps(progress_event()))
    (tmp_path / "a-dir").mkdir()
    code, stdout, stderr = run(str(p), "--chart", str(tmp_path / "a-dir"))
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert code == 2 and "Traceback" not in stderr
    assert lines[-1].startswith("ckptfix: error: ") and "a-dir" in lines[-1]
