"""CONF-STATE-FORMAT-NOT-RECORDED without Spark, on Spark 3.5.9's aggregation checkpoint (tests/fixtures/state35/
agg_hdfs: offsets 0..4, every file records aggregation.stateFormatVersion 2; the stored value schema holds the
aggregation buffers only, format 2's). What Spark does with the damage is recorded (damage cases
``offset_latest_agg_format_dropped*``, tests/audit/test_restart_prediction.py); here, which evidence the audit takes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ckptfix.audit import audit
from ckptfix.repair.planning import plan_repair
from tests.state.test_state35 import extract

KEY = "spark.sql.streaming.aggregation.stateFormatVersion"
RULE = "CONF-STATE-FORMAT-NOT-RECORDED"


def _set(ckpt: Path, batch: int, value: str | None, key: str = KEY) -> None:
    path = ckpt / "offsets" / str(batch)
    lines = path.read_text().split("\n")
    meta = json.loads(lines[1])
    if value is None:
        del meta["conf"][key]
    else:
        meta["conf"][key] = value
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


JOIN_KEY = "spark.sql.streaming.join.stateFormatVersion"
FMGWS_KEY = "spark.sql.streaming.flatMapGroupsWithState.stateFormatVersion"


@pytest.mark.parametrize(
    ("fixture", "key", "value", "rule", "target"),
    [
        # a join's target is 3.5: on 4.x, 3.5.9's non-nullable join schema fails first (UPGRADE-JOIN-NULLABILITY)
        ("join_hdfs", JOIN_KEY, None, RULE, "3.5"),
        ("fmgws_hdfs", FMGWS_KEY, None, RULE, "4.3"),
    ],
)
def test_lost_from_every_file_the_schema_shows_format_2(
    fixture: str, key: str, value: str | None, rule: str, target: str, tmp_path: Path
) -> None:
    """The key removed from every offset file of Spark 3.5.9's checkpoint: no file shows the format the state was
    written in, but its stored schema does (a join's keyWithIndexToValue ends with format
    2's ``matched`` flag; applyInPandasWithState nests its state in format 2's ``groupState``)."""
    ckpt = extract(fixture, tmp_path)
    batches = sorted(int(p.name) for p in (ckpt / "offsets").iterdir() if p.name.isdigit())
    for b in batches:
        _set(ckpt, b, value, key)
    report = audit(str(ckpt), target)
    assert report.verdict.restarts is False and report.verdict.blocking_rule == rule, report.verdict.headline
    assert ("STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE" if target == "4.3" else "StateSchemaNotCompatible") in (
        report.verdict.headline
    )
    finding = next(f for f in report.findings if f.rule_id == rule)
    assert "_metadata/schema is format 2's" in finding.message
    plan, _report, unfixed = plan_repair(str(ckpt), target)
    assert unfixed == [] and [a.path for a in plan.actions] == [f"offsets/{batches[-1]}"], plan.actions
    assert f'"{key}":"2"' in (plan.actions[0].content or b"").decode()


def test_the_key_set_to_2_everywhere_is_no_finding(tmp_path: Path) -> None:
    """Recorded 2 in every file, as Spark writes it: nothing to say (the schema agrees)."""
    for fixture in ("join_hdfs", "fmgws_hdfs", "agg_hdfs"):
        ckpt = extract(fixture, tmp_path / fixture)
        report = audit(str(ckpt), "4.3")
        assert not [f for f in report.findings if f.rule_id.startswith("CONF-STATE-FORMAT")], fixture


def test_the_latest_file_set_to_1_against_older_files(tmp_path: Path) -> None:
    """offsets/L records 1 where offsets/L-1 records 2 (an edit: Spark never changes a checkpoint's format):
    CONF-STATE-FORMAT-CHANGED, and the repair writes 2 back. Where every file records 1, the log is taken as the
    truth (as where an older file records 1: the test above), whatever the schema shows."""
    ckpt = extract("fmgws_hdfs", tmp_path)
    last = max(int(p.name) for p in (ckpt / "offsets").iterdir() if p.name.isdigit())
    _set(ckpt, last, "1", FMGWS_KEY)
    report = audit(str(ckpt), "4.3")
    assert report.verdict.blocking_rule == "CONF-STATE-FORMAT-CHANGED", report.verdict.headline
    plan, _report, unfixed = plan_repair(str(ckpt), "4.3")
    assert unfixed == [] and f'"{FMGWS_KEY}":"2"' in (plan.actions[0].content or b"").decode()
    for b in range(last):
        _set(ckpt, b, "1", FMGWS_KEY)
    assert not [f for f in audit(str(ckpt), "4.3").findings if f.rule_id.startswith("CONF-STATE-FORMAT")]
