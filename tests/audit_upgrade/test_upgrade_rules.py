"""UPGRADE-* rules and the join schema repair on real checkpoints (no Spark needed).

What real Spark does with these files is proven in test_live_join_upgrade.py (3.5.9 join on 4.3.0) and
test_live_downgrade.py (4.3.0 files on 3.5.9); here the audit and the plan are checked against the files.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ckptfix.audit import audit
from ckptfix.audit.model import Finding
from ckptfix.cli.main import app
from ckptfix.formats import schema as schema_format
from tests.audit_upgrade.support import RECORDED, SCENARIOS, STATE35, recorded, state35
from tests.support.trees import tree

JOIN = "UPGRADE-JOIN-NULLABILITY"
SIDES = ("left-keyWithIndexToValue", "right-keyWithIndexToValue")
STORES = ("left-keyToNumValues", *SIDES[:1], "right-keyToNumValues", SIDES[1])


def upgrade_findings(report_findings: list[Finding]) -> list[Finding]:
    return [f for f in report_findings if f.rule_id.startswith("UPGRADE-")]


# -- no spurious findings -------------------------------------------------------------------
@pytest.mark.parametrize("version", sorted(RECORDED))
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_recorded_fixture_at_its_own_version_has_no_upgrade_findings(
    version: str, scenario: str, tmp_path: Path
) -> None:
    report = audit(str(recorded(version, scenario, tmp_path)), RECORDED[version])
    assert upgrade_findings(report.findings) == []


@pytest.mark.parametrize("scenario", STATE35)
def test_state35_fixture_at_35_has_no_upgrade_findings(scenario: str, tmp_path: Path) -> None:
    assert upgrade_findings(audit(str(state35(scenario, tmp_path)), "3.5").findings) == []


@pytest.mark.parametrize("scenario", [s for s in STATE35 if s != "join_hdfs"])
def test_only_the_join_gets_the_nullability_error(scenario: str, tmp_path: Path) -> None:
    report = audit(str(state35(scenario, tmp_path)), "4.3")
    assert [f.rule_id for f in upgrade_findings(report.findings)] == ["UPGRADE-PATH"]
    assert report.verdict.restarts


# -- what an upgrade changes ----------------------------------------------------------------
def test_upgrade_path_35_to_43(tmp_path: Path) -> None:
    report = audit(str(recorded("3.5.9", "agg_hdfs", tmp_path)), "4.3")
    (f,) = upgrade_findings(report.findings)
    assert (f.rule_id, f.severity) == ("UPGRADE-PATH", "info") and report.verdict.restarts
    assert f.message.startswith("written by Spark <= 3.5; target Spark 4.3: the next offset file records 7 new")
    # the keys and their legacy values are evidence, so the message stays one readable sentence per change
    keys = next(e.note for e in f.evidence if e.note and e.note.startswith("new keys"))
    assert "spark.sql.streaming.statefulOperator.alwaysNullableOutput.enabled=false" in keys
    assert "alwaysNullableOutput" not in f.message
    assert "state/<op>/_metadata/metadata for operator(s) 0" in f.message
    assert "without `metadata`" not in f.message  # it has one: nothing to say


def test_upgrade_path_mentions_missing_metadata_without_repeating_the_rule(tmp_path: Path) -> None:
    ckpt = recorded("3.5.9", "stateless", tmp_path)
    (ckpt / "metadata").unlink()
    (ckpt / ".metadata.crc").unlink(missing_ok=True)
    report = audit(str(ckpt), "4.2")
    ids = [f.rule_id for f in report.findings]
    assert ids.count("META-MISSING") == 1 and "UPGRADE-PATH" in ids
    path = next(f for f in report.findings if f.rule_id == "UPGRADE-PATH")
    assert "Spark 4.2+ refuses a checkpoint without `metadata` (see META-MISSING)" in path.message


def test_upgrade_within_the_inferred_range_says_nothing(tmp_path: Path) -> None:
    # 4.0.5 files cannot be told from 4.1 files: target 4.1 may be the writer itself
    assert upgrade_findings(audit(str(recorded("4.0.5", "stateless", tmp_path)), "4.1").findings) == []


# -- downgrades -----------------------------------------------------------------------------
def test_downgrade_42_to_35_lists_the_ignored_keys(tmp_path: Path) -> None:
    report = audit(str(recorded("4.2.1", "agg_hdfs", tmp_path)), "3.5")
    (f,) = upgrade_findings(report.findings)
    assert (f.rule_id, f.severity) == ("UPGRADE-DOWNGRADE", "warning")
    assert "written by Spark 4.2; target Spark 3.5 is older" in f.message
    assert "harmless at their legacy values" in f.message and "rowChecksum.enabled" in f.message
    assert "it ignores state/<op>/_metadata/metadata" in f.message
    assert report.verdict.restarts  # nothing here stops 3.5 (test_live_downgrade.py restarts such files)


def test_downgrade_state_in_a_format_the_target_cannot_read(tmp_path: Path) -> None:
    ckpt = recorded("4.2.1", "agg_hdfs", tmp_path)
    latest = max(int(p.name) for p in (ckpt / "offsets").iterdir() if p.name.isdigit())
    path = ckpt / "offsets" / str(latest)
    lines = path.read_text().split("\n")
    meta = json.loads(lines[1])
    meta["conf"]["spark.sql.streaming.stateStore.rowChecksum.enabled"] = "true"
    lines[1] = json.dumps(meta, separators=(",", ":"))
    path.write_text("\n".join(lines))
    ids = {f.rule_id: f for f in audit(str(ckpt), "4.1").findings}
    assert ids["UPGRADE-DOWNGRADE-STATE"].severity == "error"
    assert "rowChecksum.enabled=true" in ids["UPGRADE-DOWNGRADE-STATE"].message
    assert "UPGRADE-DOWNGRADE-STATE" not in {f.rule_id for f in audit(str(ckpt), "4.2").findings}


# -- the 3.5 join -> 4.x nullability failure ------------------------------------------------
@pytest.mark.parametrize("target", ["4.0", "4.1", "4.2", "4.3"])
def test_join_nullability_predicted(target: str, tmp_path: Path) -> None:
    report = audit(str(state35("join_hdfs", tmp_path)), target)
    assert not report.verdict.restarts and report.verdict.blocking_rule == JOIN
    assert report.verdict.error_class == "STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE"
    f = next(f for f in report.findings if f.rule_id == JOIN)
    # the fixture's query: left(lid, lk, lts) JOIN right(rid, rk, rts) ON lk = rk, watermarks on lts/rts
    assert "left-keyWithIndexToValue: lk; right-keyWithIndexToValue: rk" in f.message
    assert [e.path.rsplit("/", 3)[-3] for e in f.evidence[:2]] == list(SIDES)


def test_join_at_35_is_fine(tmp_path: Path) -> None:
    assert JOIN not in {f.rule_id for f in audit(str(state35("join_hdfs", tmp_path)), "3.5").findings}


def _rewrite_value_schema(path: Path, fn: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
    model = schema_format.parse(path.read_bytes())
    assert isinstance(model, schema_format.SchemaV2)
    path.write_bytes(schema_format.dump(schema_format.SchemaV2(model.key_schema, fn(model.value_schema))))
    (path.parent / ".schema.crc").unlink(missing_ok=True)


def test_join_side_without_watermark_is_not_predicted(tmp_path: Path) -> None:
    ckpt = state35("join_hdfs", tmp_path)

    def drop_watermark(value: dict[str, Any]) -> dict[str, Any]:
        return {**value, "fields": [{**f, "metadata": {}} for f in value["fields"]]}

    _rewrite_value_schema(ckpt / "state/0/0/left-keyWithIndexToValue/_metadata/schema", drop_watermark)
    f = next(f for f in audit(str(ckpt), "4.3").findings if f.rule_id == JOIN)
    assert "(right-keyWithIndexToValue: rk)" in f.message  # left: the filter sits right below the join


def _schemas(ckpt: Path) -> dict[str, schema_format.StateSchema]:
    return {s: schema_format.parse((ckpt / f"state/0/0/{s}/_metadata/schema").read_bytes()) for s in STORES}


def _fields(model: schema_format.StateSchema) -> list[dict[str, Any]]:
    assert isinstance(model, schema_format.SchemaV2)
    return list(model.key_schema["fields"]) + list(model.value_schema["fields"])


def test_join_repair_dry_run_apply_undo(tmp_path: Path) -> None:
    ckpt = state35("join_hdfs", tmp_path)
    before_tree, before = tree(ckpt), _schemas(ckpt)
    runner = CliRunner()
    dry = runner.invoke(app, ["repair", str(ckpt), "--target-spark", "4.3", "-f", "json"])
    assert dry.exit_code == 0, dry.output
    doc = json.loads(dry.stdout)
    paths = sorted(a["path"] for a in doc["plan"]["actions"])
    assert paths == sorted(
        [f"state/0/0/{s}/_metadata/schema" for s in SIDES] + [f"state/0/0/{s}/_metadata/.schema.crc" for s in SIDES]
    )
    assert any("stored nullable field" in e or "state rows are not touched" in e for e in doc["plan"]["effects"])
    assert tree(ckpt) == before_tree

    done = runner.invoke(app, ["repair", str(ckpt), "--target-spark", "4.3", "--apply"])
    assert done.exit_code == 0, done.output
    after = _schemas(ckpt)
    for store in STORES:
        old, new = _fields(before[store]), _fields(after[store])
        assert all(f["nullable"] is True for f in new)
        # only nullability changed: names, types, watermark metadata kept
        assert [{**f, "nullable": True} for f in old] == new
        crc = (ckpt / f"state/0/0/{store}/_metadata/.schema.crc").read_bytes()
        data = (ckpt / f"state/0/0/{store}/_metadata/schema").read_bytes()
        assert crc[8:12] == zlib.crc32(data[:512]).to_bytes(4, "big")  # Hadoop: CRC32 per 512-byte chunk
    report = audit(str(ckpt), "4.3")
    assert report.verdict.restarts and JOIN not in {f.rule_id for f in report.findings}

    undone = runner.invoke(app, ["undo", str(ckpt)])
    assert undone.exit_code == 0, undone.output
    assert tree(ckpt) == before_tree


def test_audit_json_shows_upgrade_findings(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["audit", str(state35("join_hdfs", tmp_path)), "--target-spark", "4.3", "-f", "json"]
    )
    assert result.exit_code == 1, result.output
    doc = json.loads(result.stdout)
    assert [f["rule_id"] for f in doc["findings"]][:2] == [JOIN, "UPGRADE-PATH"]
    assert doc["verdict"]["blocking_rule"] == JOIN


# -- against the restarts recorded with every real release (record_join35.py) -----------------
OUTCOMES = json.loads((Path(__file__).with_name("join35_outcomes.json")).read_text())


def test_outcomes_cover_every_release() -> None:
    assert sorted(v.rsplit(".", 1)[0] for v in OUTCOMES) == ["3.5", "4.0", "4.1", "4.2", "4.3"]


@pytest.mark.parametrize("version", sorted(OUTCOMES))
def test_join_prediction_matches_the_recorded_restart(version: str, tmp_path: Path) -> None:
    label = version.rsplit(".", 1)[0]
    outcome = OUTCOMES[version]
    ckpt = state35("join_hdfs", tmp_path)
    report = audit(str(ckpt), label)
    assert report.verdict.restarts == outcome["before"]["ok"]
    if not outcome["before"]["ok"]:
        err = report.verdict.error
        assert err is not None and err.error_class is not None
        assert err.error_class in outcome["before"]["text"] and err.message in outcome["before"]["text"]
    # after the repair (planned for 4.3, the same files for every target) every release restarts, exactly
    assert outcome["after_repair"]["ok"] and outcome["after_repair"]["pairs"] == [[8, 107]]
    done = CliRunner().invoke(app, ["repair", str(ckpt), "--target-spark", "4.3", "--apply"])
    assert done.exit_code == 0, done.output
    assert audit(str(ckpt), label).verdict.restarts


# The damage catalogue at each recorded version's own label: no UPGRADE-* finding. Checked in
# tests/audit/test_restart_prediction.py::test_recorded_outcome_matches_audit, on the report it makes anyway.


@pytest.mark.parametrize(("scenario", "warned"), [("agg_hdfs", False), ("dedup_agg", True)])
def test_the_dedup_key_order_is_lost_only_where_a_dedup_keeps_state(
    tmp_path: Path, scenario: str, warned: bool
) -> None:
    """Hunt 12: every checkpoint last written by 4.3.0, downgraded, warned that dropDuplicates may bind its key
    columns in another order, aggregations and joins too. Only a checkpoint with a dropDuplicates operator says so."""
    report = audit(str(recorded("4.3.0", scenario, tmp_path)), "4.2")
    (f,) = upgrade_findings(report.findings)
    assert f.rule_id == "UPGRADE-DOWNGRADE" and ("SPARK-57489" in f.message) is warned, f.message
    assert ("no dropDuplicates operator keeps state here" in f.message) is not warned
