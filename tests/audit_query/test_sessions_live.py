"""`audit --against` on a session-window aggregation Spark 3.5.9 wrote (tests/fixtures/state35/session_hdfs): its
state schemas come from the plan like a windowed aggregation's (hunt 12, F2: every session-window query was
"cannot tell", explained as a transformWithState limitation, where Spark restarted the unchanged query and one
with another gap)."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ckptfix.cli.main import app

pytestmark = pytest.mark.spark  # plans the query with the live session

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "state35" / "session_hdfs.tar.gz"


@pytest.mark.parametrize("fn", ["session", "longer_gap"])
def test_a_session_window_is_compared_not_unchecked(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fn: str
) -> None:
    with tarfile.open(FIXTURE) as tar:
        tar.extractall(tmp_path, filter="data")
    (tmp_path / "input").mkdir(exist_ok=True)
    # the file source's log names the input where the fixture was written: moved here, as `migrate relocate
    # --input-from/--input-to` moves it (the query reads tmp_path/input)
    log = tmp_path / "ckpt" / "sources" / "0"
    first = json.loads((log / "0").read_text().splitlines()[1])["path"]  # an input file, where the fixture was made
    recorded = first.rsplit("/", 1)[0]
    for entry in log.iterdir():
        if entry.name.startswith("."):
            entry.unlink()  # Hadoop sidecars of the rewritten entries
        else:
            entry.write_text(entry.read_text().replace(recorded, f"file://{tmp_path}/input"))
    monkeypatch.setenv("CKPTFIX_AQ_INPUT", str(tmp_path / "input"))
    args = ["audit", str(tmp_path / "ckpt"), "--target-spark", "3.5", "-f", "json", "-q"]
    res = CliRunner().invoke(app, [*args, "--against", f"tests.audit_query.queries.sessions:{fn}"])
    doc = json.loads(res.stdout)
    rules = [f["rule_id"] for f in doc["findings"] if f["rule_id"].startswith("QUERY-")]
    assert "QUERY-UNCHECKED" not in rules and not any(r.startswith("QUERY-STATE") for r in rules), doc["findings"]
    assert doc["verdict"]["restarts"] is True, doc["verdict"]
