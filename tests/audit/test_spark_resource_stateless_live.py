"""Two checkpoints Apache Spark ships as test resources that are all text (stateless queries over MemoryStream),
vendored byte for byte (tests/fixtures/spark-resources-text/NOTICE), restarted in real Spark the way their Scala
suites restart them, and audited by ckptfix:

- ``checkpoint-test-offsetId-commitId-inconsistent`` (AsyncProgressTrackingMicroBatchExecutionSuite, "test gaps in
  offset log"): offsets 1, 2 and 4, no commits. With async progress tracking on (interval 0) Spark restarts and runs
  batch 4 again from offset 2 to 4 (the suite's ``CheckAnswer(3, 4)``: two rows); with it off Spark fails with
  "batch 3 doesn't exist". The audit predicts the failure by default, and the restart when ``--against`` gives the
  query that keeps tracking on.
- ``checkpoint-version-2.3.1-for-multi-watermark-policy`` (EventTimeWatermarkSuite): its offset log records no
  ``spark.sql.streaming.multipleWatermarkPolicy``, so Spark applies ``min`` whatever the session says (``max``
  here): after (120, 130) the watermark is min(120 - 10, 130 - 15) = 110, not 115. ``inspect`` names min as the
  value Spark will use; the audit cannot tell a stateless query with a watermark from a stateful one whose state/
  is gone, and says it restarts once told ``--stateless``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ckptfix.cli.main import app
from tests.spark.harness import error_text
from tests.support import memstream as M

pytestmark = pytest.mark.spark

RESOURCES = Path(__file__).resolve().parents[1] / "fixtures" / "spark-resources-text"
GAPS = RESOURCES / "checkpoint-test-offsetId-commitId-inconsistent"
WATERMARKS = RESOURCES / "checkpoint-version-2.3.1-for-multi-watermark-policy"


def _copy(src: Path, tmp_path: Path, name: str) -> Path:
    dest = tmp_path / name
    shutil.copytree(src, dest)
    return dest


def _audit(ckpt: Path, *extra: str) -> dict[str, Any]:
    res = CliRunner().invoke(app, ["audit", str(ckpt), "-f", "json", "-q", *extra])
    assert res.exit_code in (0, 1), res.output
    return json.loads(res.stdout)


def test_gaps_in_offset_log_with_and_without_async_tracking(spark: Any, tmp_path: Path) -> None:
    # the audit, before any restart: the default restart (tracking off) fails on batch 3
    doc = _audit(_copy(GAPS, tmp_path, "audit"))
    assert doc["verdict"]["restarts"] is False
    assert doc["verdict"]["error"]["message"] == "batch 3 doesn't exist", doc["verdict"]
    assert doc["verdict"]["blocking_rule"] == "LOG-ASYNC-GAP"

    # Spark, tracking off: fails as predicted
    off = _copy(GAPS, tmp_path, "off")
    query = M.sync_gap_query(spark).option("checkpointLocation", str(off)).start()
    with pytest.raises(Exception) as failed:  # noqa: PT011 - py4j/pyspark wrap Spark's exception
        query.processAllAvailable()
    query.stop()
    assert "batch 3 doesn't exist" in error_text(failed.value)

    # the audit with the query that keeps tracking on: restarts, the gap an info finding
    keep = _copy(GAPS, tmp_path, "keep")
    doc = _audit(keep, "--against", "tests.support.memstream:async_gap_query")
    assert doc["verdict"]["restarts"] is True, doc["verdict"]
    gap = [f for f in doc["findings"] if f["rule_id"] == "LOG-ASYNC-GAP"]
    assert [f["severity"] for f in gap] == ["info"], gap

    # Spark, tracking on: restarts and runs batch 4 again from offset 2 to 4 (two rows: 3 and 4)
    query = M.async_gap_query(spark).option("checkpointLocation", str(keep)).start()
    try:
        query.processAllAvailable()
        progress = [p for p in query.recentProgress if p["numInputRows"]]
    finally:
        query.stop()
    assert [(p["batchId"], p["numInputRows"]) for p in progress] == [(4, 2)], progress
    source = progress[0]["sources"][0]
    assert (source["startOffset"], source["endOffset"]) == ("2", "4"), source
    assert sorted(p.name for p in (keep / "commits").iterdir() if not p.name.startswith(".")) == ["4"]


def test_pre_2_4_checkpoint_keeps_the_min_watermark_policy(spark: Any, tmp_path: Path) -> None:
    ckpt = _copy(WATERMARKS, tmp_path, "mw")
    res = CliRunner().invoke(app, ["inspect", str(ckpt), "-f", "json"])
    assert res.exit_code == 0, res.output
    settings = json.loads(res.stdout)["settings"]
    assert settings["watermark_policy"] == "min (not recorded: Spark's default for old offset logs)", settings
    # no state/, but a watermark that advanced: the files cannot tell a stateless query with a watermark (this
    # one) from a stateful one whose state/ is gone (which fails); told, the audit says it restarts
    doc = _audit(ckpt)
    assert doc["verdict"]["restarts"] is None, doc["verdict"]
    assert [f["rule_id"] for f in doc["findings"] if f["undecided"]] == ["STATE-DIR-MISSING"], doc["findings"]
    doc = _audit(ckpt, "--stateless")
    assert doc["verdict"]["restarts"] is True, doc["verdict"]

    from pyspark.sql import functions as F

    first, second = M.memory_stream(spark), M.memory_stream(spark)
    M.add(spark, first, 20)
    M.add(spark, second, 30)
    M.add(spark, first, 10)

    def side(stream: Any, delay: str) -> Any:
        df = M.frame(spark, stream).withColumn("eventTime", F.timestamp_seconds("value"))
        return df.withWatermark("eventTime", delay)

    key = "spark.sql.streaming.multipleWatermarkPolicy"
    spark.conf.set(key, "max")
    try:
        joined = side(first, "10 seconds").union(side(second, "15 seconds")).select(F.col("eventTime").cast("int"))
        query = joined.writeStream.format("noop").option("checkpointLocation", str(ckpt)).start()
        try:
            query.processAllAvailable()
            M.add(spark, first, 120)
            M.add(spark, second, 130)
            query.processAllAvailable()
            M.add(spark, second, 150)  # the batch after: the watermark computed from (120, 130) is in force
            query.processAllAvailable()
            watermark = query.lastProgress["eventTime"]["watermark"]
        finally:
            query.stop()
    finally:
        spark.conf.unset(key)
    assert watermark == "1970-01-01T00:01:50.000Z", watermark  # 110 s: min policy (max would give 115 s)
