"""Spark's own pre-release transformWithState checkpoint (``checkpoint-version-4.0.0-tws-unsaferow``, written by a
4.0.0 snapshot on a Spark developer's machine): its operator metadata v2 names the schema file by an absolute path
on that machine (``stateSchemaFilePath``, the single-path form of early 4.0 builds), so the checkpoint cannot
restart anywhere else. Only its text files are vendored (tests/fixtures/spark-resources-text/NOTICE); the
schema file itself is not in Spark's resources at all.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from ckptfix.audit import audit

RESOURCE = (
    Path(__file__).resolve().parents[1] / "fixtures" / "spark-resources-text" / "checkpoint-version-4.0.0-tws-unsaferow"
)
RECORDED = (
    "file:/Users/anish.shrigondekar/spark/spark/target/tmp/spark-ae28252a-e696-4653-a9a5-7a9a0766f4c1/state/0/"
    "_stateSchema/default/0_2e8e6b52-e3c3-4184-b8ef-8d391b75d751"
)


def test_the_absolute_schema_path_of_a_pre_release_tws_checkpoint_is_a_blocker(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    shutil.copytree(RESOURCE, ckpt)
    report = audit(str(ckpt), "4.3")
    (finding,) = [f for f in report.findings if f.rule_id == "STATE-SCHEMA-PATH-OUTSIDE"]
    assert RECORDED in finding.message and finding.spark_error is not None
    assert finding.evidence[0].path.endswith("state/0/_metadata/v2/0")
    assert report.verdict.restarts is False
