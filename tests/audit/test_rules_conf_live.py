"""CONF-SHUFFLE-PARTITIONS-NOT-RECORDED against real Spark: an offset log without spark.sql.shuffle.partitions
(as Spark 2.1 wrote them; here the key is removed from a live 4.3 aggregation checkpoint with 3 state
partitions) restarts with the session's value. Each session value is restarted by the test session's PySpark
and audited with the same value (``session_conf``, the CLI's ``--conf``): 3 restarts correctly, 2 restarts with
wrong results (a silent hazard the audit must call an error), 5 fails as the audit predicts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ckptfix.audit import audit
from tests.spark.harness import copy_base, restart

pytestmark = pytest.mark.spark

SHUFFLE = "spark.sql.shuffle.partitions"
RULE = "CONF-SHUFFLE-PARTITIONS-NOT-RECORDED"


def forget_shuffle_partitions(ckpt: Path) -> None:
    for f in (ckpt / "offsets").iterdir():
        if f.name.startswith("."):
            f.unlink()  # the Hadoop .crc sidecar of the file rewritten below
            continue
        lines = f.read_text().split("\n")
        meta = json.loads(lines[1])
        del meta["conf"][SHUFFLE]
        lines[1] = json.dumps(meta, separators=(",", ":"))
        f.write_text("\n".join(lines))


@pytest.mark.parametrize("session_value", ["3", "2", "5"])
def test_session_value_decides(spark: Any, spark_bases: Any, tmp_path: Path, session_value: str) -> None:
    ckpt, input_dir, output_dir = copy_base(spark_bases("agg_hdfs"), tmp_path / "copy")
    assert sorted(int(p.name) for p in (ckpt / "state" / "0").iterdir() if p.name.isdigit()) == [0, 1, 2]
    forget_shuffle_partitions(ckpt)

    report = audit(str(ckpt), "4.3", session_conf={SHUFFLE: session_value})
    (finding,) = [f for f in report.findings if f.rule_id == RULE]
    assert "has 3 partitions" in finding.message

    old = spark.conf.get(SHUFFLE)
    spark.conf.set(SHUFFLE, session_value)
    try:
        outcome = restart(spark, "agg_hdfs", ckpt, input_dir, output_dir)
    finally:
        spark.conf.set(SHUFFLE, old)

    if session_value == "3":
        assert outcome.ok and outcome.correct, outcome.text or outcome.detail
        assert finding.severity == "info" and report.verdict.restarts
    elif session_value == "2":
        assert outcome.ok and outcome.correct is False, outcome.detail  # restarts, silently wrong
        assert finding.severity == "error" and finding.spark_error is None
        assert report.verdict.restarts and finding.message in report.verdict.hazards
    else:
        assert not outcome.ok
        assert not report.verdict.restarts and report.verdict.blocking_rule == RULE
        err = report.verdict.error
        assert err is not None and err.message in outcome.text, (err, outcome.text[:3000])
        assert err.error_class is None or err.error_class in outcome.text


def test_spark_default_is_assumed_when_not_told(spark_bases: Any, tmp_path: Path) -> None:
    ckpt, _, _ = copy_base(spark_bases("agg_hdfs"), tmp_path / "copy")
    forget_shuffle_partitions(ckpt)
    report = audit(str(ckpt), "4.3")
    assert report.verdict.blocking_rule == RULE
    (finding,) = [f for f in report.findings if f.rule_id == RULE]
    assert "(200: Spark's default, unless the session sets it)" in finding.message
