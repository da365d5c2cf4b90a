"""Live: checkpoints Spark 4.3 wrote (the `spark` session fixture), restarted with a real Spark 3.5 (subprocess in
the 3.5 venv, restart35.py). Proves both sides of UPGRADE-DOWNGRADE:

* harmless: offset files with 4.3's 17 conf keys (alwaysNullableOutput=true, deterministicKeyOrder=true, ...),
  ``state/0/_metadata/metadata`` and the all-nullable state schema 4.3 stores -> 3.5 restarts, output exact;
* blocking: an offset log v2 (``spark.sql.streaming.offsetLog.formatVersion=2``) -> 3.5 fails as predicted
  (LOG-VERSION-TOO-NEW, named in the UPGRADE-DOWNGRADE finding).

The Python with PySpark 3.5 comes from tests/support/spark35.py (the suite installs it itself).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ckptfix.audit import audit
from ckptfix.audit import versions as V
from ckptfix.checkpoint import Checkpoint

SCRIPT = Path(__file__).with_name("restart35.py")
OFFSET_VERSION = "spark.sql.streaming.offsetLog.formatVersion"
PROVIDER = "spark.sql.streaming.stateStore.providerClass"
HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"


def _write_43(spark: Any, root: Path, offset_version: str) -> Path:
    inp = root / "input"
    inp.mkdir(parents=True)
    for i in range(2):
        (inp / f"part-{i:04d}.json").write_text(json.dumps({"key": f"k{i}", "value": i}) + "\n")
    old = {k: spark.conf.get(k, None) for k in (OFFSET_VERSION, PROVIDER)}
    spark.conf.set(OFFSET_VERSION, offset_version)
    spark.conf.set(PROVIDER, HDFS)
    try:
        src = spark.readStream.format("json").schema("key STRING, value LONG").option("maxFilesPerTrigger", 1)
        query = (
            src.load(str(inp))
            .groupBy("key")
            .count()
            .writeStream.foreachBatch(lambda df, b: df.collect())
            .outputMode("update")
            .option("checkpointLocation", str(root / "ckpt"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(240)
        assert query.exception() is None
    finally:
        for k, v in old.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)
    return root / "ckpt"


def test_43_checkpoints_on_35(spark: Any, py35: Path, tmp_path: Path) -> None:
    v1 = _write_43(spark, tmp_path / "v1", "1")
    v2 = _write_43(spark, tmp_path / "v2", "2")

    ck = Checkpoint.open(str(v1))
    conf = ck.offset(1).metadata.conf  # type: ignore[union-attr]
    assert len(conf) == 17 and set(V.CONF_ADDED) <= set(conf)  # 4.3.0's key set, as versions.py says
    assert conf["spark.sql.streaming.statefulOperator.alwaysNullableOutput.enabled"] == "true"
    info = V.infer(ck)
    assert info.latest is not None and info.latest.low == "4.3" and info.feature("opmeta-v1") is not None

    harmless = audit(str(v1), "3.5")
    assert harmless.verdict.restarts
    (down,) = [f for f in harmless.findings if f.rule_id.startswith("UPGRADE-")]
    assert down.rule_id == "UPGRADE-DOWNGRADE" and "it ignores state/<op>/_metadata/metadata" in down.message

    blocked = audit(str(v2), "3.5")
    assert blocked.verdict.blocking_rule == "LOG-VERSION-TOO-NEW" and blocked.verdict.message
    down2 = next(f for f in blocked.findings if f.rule_id == "UPGRADE-DOWNGRADE")
    assert "it cannot read offsets/1 (v2): see LOG-VERSION-TOO-NEW" in down2.message

    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "SPARK_"))}
    proc = subprocess.run(
        [str(py35), str(SCRIPT), str(v1.parent), str(v2.parent)], capture_output=True, text=True, timeout=600, env=env
    )
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
    assert line is not None, (proc.returncode, proc.stderr[-3000:], sys.executable)
    res = json.loads(line[len("RESULT ") :])
    r1, r2 = res[str(v1.parent)], res[str(v2.parent)]
    assert r1["spark"].startswith("3.5.")
    assert r1["ok"], r1["text"]
    assert r1["rows"] == [{"key": "k9", "count": 1}]
    assert not r2["ok"] and blocked.verdict.message in r2["text"], r2["text"]
    # 3.5 wrote the next offset file with its own 10 keys: the checkpoint now reads as last written by 3.5
    after = V.infer(Checkpoint.open(str(v1)))
    assert after.latest is not None and after.latest.high == "3.5"


pytestmark = pytest.mark.spark  # starts Spark (checked by tests/spark/plugin.py)
