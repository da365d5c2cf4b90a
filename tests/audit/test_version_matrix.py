"""The version matrix: ckptfix predicts whether a checkpoint written by Spark W restarts on Spark R.

``tests/fixtures/matrix/<W>/<scenario>.tar.gz`` are checkpoints written by real Spark W and
``tests/fixtures/matrix/outcomes.json`` is what real Spark R did when it restarted a fresh copy of each (one new
input file, availableNow), both recorded by ``tests/fixtures/matrix/record.py``. Every recorded pair is audited
with ``target_spark`` = R's ``major.minor`` and must agree with Spark by the rule of
``tests/support/agreement.py`` (the one tests/audit/test_restart_prediction.py uses). No Spark needed.
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any

import pytest

from tests.spark.matrix_queries import MATRIX, available
from tests.support.agreement import assert_verdict_agrees

MATRIX_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "matrix"
OUTCOMES: dict[str, dict[str, dict[str, dict[str, Any]]]] = json.loads((MATRIX_DIR / "outcomes.json").read_text())


def _label(version: str) -> str:
    return ".".join(version.split(".")[:2])


def _pairs() -> list[Any]:
    return [
        pytest.param(w, s, r, id=f"{w}-{s}-{r}")
        for w, scenarios in OUTCOMES.items()
        for s, restarts in scenarios.items()
        for r, rec in restarts.items()
        if "skipped" not in rec
    ]


def _work_root(ckpt: Path, writer: str, scenario: str) -> str:
    """The scratch root record.py wrote the checkpoint under: its input files are ``<root>/<W>/<scenario>/input/``
    in the file source log (``sources/0/0``: version line, then one JSON entry per file)."""
    entry = json.loads((ckpt / "sources" / "0" / "0").read_text().splitlines()[1])
    path = entry["path"].removeprefix("file://")
    return path.split(f"/{writer}/{scenario}/input/", 1)[0]


@pytest.mark.parametrize(("writer", "scenario", "restarter"), _pairs())
def test_matrix_outcome_matches_audit(writer: str, scenario: str, restarter: str, tmp_path: Path) -> None:
    from ckptfix.audit import audit

    rec = OUTCOMES[writer][scenario][restarter]
    with tarfile.open(MATRIX_DIR / writer / f"{scenario}.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    kwargs: dict[str, Any] = {}
    if MATRIX[scenario].sink == "file":
        kwargs["sink_path"] = str(tmp_path / "output")
    report = audit(str(tmp_path / "ckpt"), target_spark=_label(restarter), **kwargs)
    # record.py wrote "<work>" for its scratch root in Spark's text; the checkpoint still names the real one
    text = rec["text"].replace("<work>", _work_root(tmp_path / "ckpt", writer, scenario))
    said = "restarted" if rec["ok"] else "FAILED"
    context = f"\n{scenario} written by Spark {writer}, restarted by Spark {restarter}: {said} {rec.get('detail', '')}"
    assert_verdict_agrees(report, rec["ok"], text, rec.get("rows_ok"), context)


#: writers recorded against fewer restarters, on purpose: 3.3.0 is there for one fact (its dedup value schema is
#: the input row, SPARK-39650), proven against the newest release only
PARTIAL = {"3.3.0": {"4.3.0"}}


def test_matrix_is_complete() -> None:
    """Every tarball has an outcome for every restarter (or those PARTIAL names); a pair is skipped only where R
    lacks the scenario."""
    restarters = {r for scenarios in OUTCOMES.values() for restarts in scenarios.values() for r in restarts}
    assert {"3.5", "4.0", "4.1", "4.2", "4.3"} <= {_label(r) for r in restarters}
    tarballs = {(p.parent.name, p.name.removesuffix(".tar.gz")) for p in MATRIX_DIR.glob("*/*.tar.gz")}
    recorded = {(w, s) for w, scenarios in OUTCOMES.items() for s in scenarios}
    assert tarballs <= recorded, f"tarballs without outcomes: {sorted(tarballs - recorded)}"
    total = 0
    for writer, scenario in tarballs:
        size = (MATRIX_DIR / writer / f"{scenario}.tar.gz").stat().st_size
        assert size < 200_000, (writer, scenario, size)
        total += size
        for restarter in PARTIAL.get(writer, restarters):
            rec = OUTCOMES[writer][scenario].get(restarter)
            assert rec is not None, f"{scenario} by {writer} was not restarted by {restarter}"
            if "skipped" in rec:
                assert available(scenario, restarter) is not None, (writer, scenario, restarter, rec)
            else:
                assert rec["ok"] is False or rec.get("rows_ok") is not None, (writer, scenario, restarter)
    assert total < 5_000_000, total
