"""CONF-STATE-FORMAT-NOT-RECORDED without Spark, on Spark 3.5.9's aggregation checkpoint (tests/fixtures/state35/
agg_hdfs: offsets 0..4, every file records aggregation.stateFormatVersion 2; the stored value schema holds the
aggregation buffers only, format 2's). What Spark does with the damage is recorded (damage cases
``offset_latest_agg_format_dropped*``, tests/test_restart_prediction.py); here, which evidence the audit takes."""

from __future__ import annotations

import json
from pathlib import Path

from ckptfix.audit import audit
from ckptfix.repair.planning import plan_repair
from tests.state.test_state35 import extract

KEY = "spark.sql.streaming.aggregation.stateFormatVersion"
RULE = "CONF-STATE-FORMAT-NOT-RECORDED"


def _set(ckpt: Path, batch: int, value: str | None) -> None:
    path = ckpt / "offsets" / str(batch)
    lines = path.read_text().split("\n")
    meta = json.loads(lines[1])
    if value is None:
        del meta["conf"][KEY]
    else:
        meta["conf"][KEY] = value
    lines[1] = json.dumps(meta, separators=(",", ":"))
    path.write_text("\n".join(lines))
    (ckpt / "offsets" / f".{batch}.crc").unlink(missing_ok=True)


def _rules(ckpt: Path, target: str = "4.3") -> list[str]:
    return [f.rule_id for f in audit(str(ckpt), target).findings if f.rule_id == RULE]


def test_lost_from_the_latest_file_only(tmp_path: Path) -> None:
    ckpt = extract("agg_hdfs", tmp_path)
    assert _rules(ckpt) == []
    _set(ckpt, 4, None)
    report = audit(str(ckpt), "3.5")
    assert report.verdict.restarts is False and report.verdict.blocking_rule == RULE
    assert "Provided schema doesn't match to the schema for existing state!" in report.verdict.headline
    plan, _report, unfixed = plan_repair(str(ckpt), "3.5")
    assert unfixed == [] and [a.path for a in plan.actions] == ["offsets/4"]


def test_lost_from_every_file_the_schema_still_shows_format_2(tmp_path: Path) -> None:
    """An edit of every offset file: no file records 2, but the stored value schema is format 2's (format 1
    stores the grouping columns in the value too)."""
    ckpt = extract("agg_hdfs", tmp_path)
    for b in range(5):
        _set(ckpt, b, None)
    report = audit(str(ckpt), "4.3")
    assert report.verdict.restarts is False and report.verdict.blocking_rule == RULE
    assert "STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE" in report.verdict.headline
    plan, _report, unfixed = plan_repair(str(ckpt), "4.3")
    assert unfixed == [] and f'"{KEY}":"2"' in (plan.actions[0].content or b"").decode()


def test_an_older_file_recording_the_legacy_value_is_no_finding(tmp_path: Path) -> None:
    """offsets/3 records 1 (the format Spark would take anyway): nothing to say, whatever the schema shows."""
    ckpt = extract("agg_hdfs", tmp_path)
    _set(ckpt, 3, "1")
    _set(ckpt, 4, None)
    assert _rules(ckpt) == []
