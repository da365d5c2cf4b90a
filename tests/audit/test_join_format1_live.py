"""UPGRADE-JOIN-FORMAT-1 against real Spark. Spark 3.5.9 writes a stream-stream join in join state format 1
(the format of checkpoints written before Spark 3.0); its schema files are removed, as a checkpoint written
before Spark 3.1 has none. Spark 4.3 then fails with "Unsupported schema writer version: 1" (predicted by the
audit for 4.3), Spark 3.5.9 restarts it and writes the schema files (predicted for 3.5), after which the audit
no longer reports the rule (the 3.5 nullability finding remains: its repair is proven elsewhere)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ckptfix.audit import audit
from tests.audit import join_format1_query as q

pytestmark = pytest.mark.spark

RULE = "UPGRADE-JOIN-FORMAT-1"
SHUFFLE = "spark.sql.shuffle.partitions"


def run35(py35: Path, base: Path, ckpt: Path, files: int, *fmt: str) -> dict[str, Any]:
    proc = subprocess.run(
        [str(py35), q.__file__, str(base), str(ckpt), str(files), *fmt], capture_output=True, text=True, timeout=600
    )
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
    assert line is not None, proc.stderr[-3000:]
    result: dict[str, Any] = json.loads(line[len("RESULT ") :])
    assert result["spark"].startswith("3.5"), result
    return result


def test_join_format_1_without_schema_files(spark: Any, py35: Path, tmp_path: Path) -> None:
    base, ckpt = tmp_path / "input", tmp_path / "ckpt"
    written = run35(py35, base, ckpt, 2, "1")
    assert written["ok"], written["error"]
    schemas = sorted(ckpt.glob("state/0/*/*/_metadata"))
    assert schemas, "Spark 3.5.9 wrote no join schema files"
    for d in schemas:
        shutil.rmtree(d)

    predicted = audit(str(ckpt), "4.3")
    assert predicted.verdict.blocking_rule == RULE
    assert audit(str(ckpt), "3.5").verdict.restarts

    failed_copy = tmp_path / "failed"
    shutil.copytree(ckpt, failed_copy)
    q.write_inputs(base, 3)
    old = spark.conf.get(SHUFFLE)
    spark.conf.set(SHUFFLE, "2")
    try:
        outcome = q.run(spark, base, failed_copy)
    finally:
        spark.conf.set(SHUFFLE, old)
    err = predicted.verdict.error
    assert not outcome["ok"] and err is not None
    assert err.message in outcome["error"], outcome["error"]

    restarted = run35(py35, base, ckpt, 3)
    assert restarted["ok"], restarted["error"]
    assert len(list(ckpt.glob("state/0/0/*/_metadata/schema"))) == 4
    after = audit(str(ckpt), "4.3")
    assert RULE not in {f.rule_id for f in after.findings}
    assert after.verdict.blocking_rule == "UPGRADE-JOIN-NULLABILITY"  # file sources: 3.5 narrowed the keys
