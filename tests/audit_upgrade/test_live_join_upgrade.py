"""Live: the Spark 3.5.9 stream-stream join fixture restarted on Spark 4.3 (the `spark` session fixture).

1. the audit predicts STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE (UPGRADE-JOIN-NULLABILITY);
2. real Spark 4.3 fails with exactly that, on the predicted fields;
3. `ckptfix repair --target-spark 4.3 --apply` rewrites the schema files;
4. Spark 4.3 restarts and the join output over ALL input (3.5's recorded sink output + the new batch) is exactly
   the matches computed here from the raw input rows, each once.

The file source log records absolute input paths under /tmp/ckptfix-state35-gen/join_hdfs/ (the fixture's
``checkpoint_path_when_generated``); the inputs are recreated there from the tarball, as state35/prove_rebuild.py
does, with one more file per side.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ckptfix.audit import audit
from ckptfix.audit import versions as V
from ckptfix.checkpoint import Checkpoint
from ckptfix.cli.main import app
from tests.audit_upgrade.record_join35 import NEW, RECORDED_DIR, join, place_inputs
from tests.audit_upgrade.support import FIXTURES, unpack
from tests.spark.harness import error_text

EXPECTED = json.loads((FIXTURES / "state35" / "join_hdfs.expected.json").read_text())
# record_join35.NEW, one more input file per side (batch 5): one new match (8, 107); neither row is late
# (watermark after batch 4 is 30 s) and neither matches a buffered row (|50 - 44| > 5, |52 - 40| > 5)


def _ts(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def expected_pairs() -> Counter[tuple[int, int]]:
    """Inner join lk = rk AND rts BETWEEN lts - 5s AND lts + 5s over every input row (none is late)."""
    left = [*EXPECTED["inputs"]["left"], NEW["left"]]
    right = [*EXPECTED["inputs"]["right"], NEW["right"]]
    return Counter(
        (lr["lid"], rr["rid"])
        for lr in left
        for rr in right
        if lr["lk"] == rr["rk"] and -5 <= _ts(rr["rts"]) - _ts(lr["lts"]) <= 5
    )


def _restart(spark: Any, ckpt: Path) -> tuple[bool, str, list[dict[str, Any]]]:
    rows: list[dict[str, Any]] = []

    def collect(df: Any, batch_id: int) -> None:
        rows.extend(json.loads(r) for r in df.toJSON().collect())

    query = (
        join(spark)
        .writeStream.foreachBatch(collect)
        .outputMode("append")
        .option("checkpointLocation", str(ckpt))
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination(240)
    except Exception as exc:  # noqa: BLE001 - the failure text is the result
        return False, error_text(exc), rows
    jexc = query._jsq.exception()
    if jexc.isDefined():
        return False, error_text(None, jexc.get()), rows
    return True, "", rows


def test_35_join_fails_on_43_as_predicted_and_restarts_exactly_after_repair(spark: Any, tmp_path: Path) -> None:
    assert Path(EXPECTED["checkpoint_path_when_generated"]).parent == RECORDED_DIR  # where place_inputs writes
    work = unpack(FIXTURES / "state35" / "join_hdfs.tar.gz", tmp_path / "join")
    ckpt = work / "ckpt"
    place_inputs(work)

    predicted = audit(str(ckpt), "4.3")
    assert predicted.verdict.blocking_rule == "UPGRADE-JOIN-NULLABILITY"
    assert predicted.verdict.error is not None

    ok, text, _ = _restart(spark, ckpt)
    assert not ok
    assert "STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE" in text and predicted.verdict.error.message in text
    existing, new = text.split("Existing value_schema=", 1)[1].split(" and new value_schema=", 1)
    # the predicted fields: lk (or rk, whichever side Spark checks first) stored false, derived true;
    # the event-time column stays non-null on 4.3
    assert "StructField(lk,StringType,false)" in existing or "StructField(rk,StringType,false)" in existing
    assert "StructField(lk,StringType,true)" in new.split(")).")[0] or "StructField(rk,StringType,true)" in new
    assert "TimestampType,false)" in new.split(")).")[0]

    # the failed attempt left an uncommitted offsets/5 written by 4.3.0: 17 keys, alwaysNullableOutput pinned
    # to its legacy false (so it is not what changes the schema)
    ck = Checkpoint.open(str(ckpt))
    meta = ck.offset(5).metadata
    assert meta is not None and ck.commits.latest == 4
    assert len(meta.conf) == 17 and set(V.CONF_ADDED) <= set(meta.conf)
    assert meta.conf["spark.sql.streaming.statefulOperator.alwaysNullableOutput.enabled"] == "false"
    info = V.infer(ck)
    assert info.latest is not None and info.latest.low == "4.3"
    assert info.text == "written by Spark >= 4.3 (its oldest offset file, batch 0, by Spark <= 3.5)"
    after_failure = audit(str(ckpt), "4.3")
    assert after_failure.verdict.blocking_rule == "UPGRADE-JOIN-NULLABILITY"

    done = CliRunner().invoke(app, ["repair", str(ckpt), "--target-spark", "4.3", "--apply", "--idle-seconds", "0"])
    assert done.exit_code == 0, done.output
    assert audit(str(ckpt), "4.3").verdict.restarts

    ok, text, rows = _restart(spark, ckpt)
    assert ok, text
    before = [json.loads(line) for p in sorted((work / "output").iterdir()) for line in p.read_text().splitlines()]
    got = Counter((r["lid"], r["rid"]) for r in before + rows)
    assert got == expected_pairs()
    assert max(got.values()) == 1 and len(got) == 6
    assert [(r["lid"], r["rid"]) for r in rows] == [(8, 107)]


pytestmark = pytest.mark.spark  # starts Spark (checked by tests/spark/plugin.py)
