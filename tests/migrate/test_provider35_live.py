"""``migrate provider --target-spark 3.5`` proven with real Spark 3.5.9 (run as subprocesses).

Spark 3.5.9 writes the base checkpoints (the query of test_provider_live.py: ``dropDuplicates("id")`` then
``groupBy(key).agg(count, sum)``, complete mode, 2 partitions, 3 input files) with the HDFS provider and with
RocksDB; ckptfix (this venv) converts copies (HDFS -> RocksDB 3.5-shaped zips, RocksDB -> HDFS); Spark 3.5.9
restarts the converted and the unconverted copies with the same 2 new files: the sink outputs must be equal
(complete mode: every aggregate, so the whole state of operator 1 shows) and match the data. Spark 3.5 has no
``statestore`` reader, so that comparison is the proof. The Spark 3.5.9 interpreter comes from
tests/support/spark35.py (installed by the suite itself).
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from ckptfix.migrate.provider import CLASSES, PROVIDER_CONF, plan_provider
from ckptfix.repair import engine
from ckptfix.storage import Location
from tests.migrate.test_provider_live import BASE_FILES, MORE_FILES, expected_agg, state_files, write_inputs

pytestmark = pytest.mark.spark

# run by Spark 3.5.9: python - '<JSON list of [ckpt, input dir, provider class, out.json]>' (one JVM, one query
# after the other; the session's providerClass is set per query, the offset log of an existing checkpoint wins)
SCRIPT = r"""
import json, sys
from pyspark.sql import SparkSession, functions as F
spark = (SparkSession.builder.master("local[2]").appName("ckptfix-provider35")
         .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
         .config("spark.sql.streaming.stateStore.minDeltasForSnapshot", "100").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
for ckpt, inputs, provider, out in json.loads(sys.argv[1]):
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", provider)
    res = {}
    def sink(df, batch_id, res=res):
        res[str(batch_id)] = {r["key"]: [r["cnt"], r["total"]] for r in df.collect()}
    q = (spark.readStream.format("json").schema("id LONG, key STRING, value LONG").option("maxFilesPerTrigger", 1)
         .load(inputs).dropDuplicates(["id"]).groupBy("key")
         .agg(F.count("*").alias("cnt"), F.sum("value").alias("total"))
         .writeStream.outputMode("complete").foreachBatch(sink).option("checkpointLocation", ckpt)
         .trigger(availableNow=True).start())
    try:
        q.awaitTermination(300)
        err = q.exception()
        res["error"] = None if err is None else str(err)[:3000]
    except Exception as exc:
        res["error"] = str(exc)[:3000]
    json.dump({"spark": spark.version, **res}, open(out, "w"))
spark.stop()
"""


def run35(py35: Path, jobs: list[tuple[Path, Path, str, Path]]) -> list[dict[str, object]]:
    """Run the query with Spark 3.5.9 on each (checkpoint, input dir, provider, result file), in one JVM."""
    arg = json.dumps([[str(c), str(i), CLASSES[p], str(o)] for c, i, p, o in jobs])
    proc = subprocess.run([str(py35), "-", arg], input=SCRIPT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = []
    for *_, out in jobs:
        result: dict[str, object] = json.loads(out.read_text())
        assert str(result["spark"]).startswith("3.5"), result["spark"]
        results.append(result)
    return results


CASES = [("hdfs", "rocksdb"), ("rocksdb", "hdfs")]


def test_spark35_restarts_on_the_new_provider(py35: Path, tmp_path: Path) -> None:
    """Both directions, in two JVM launches: one builds both bases, one runs all four restarts."""
    inputs = {s: tmp_path / s / "input" for s, _ in CASES}
    for d in inputs.values():
        write_inputs(d, 0, BASE_FILES)
    bases = {s: tmp_path / s / "base" for s, _ in CASES}
    built = run35(py35, [(bases[s], inputs[s], s, tmp_path / s / "base.json") for s, _ in CASES])
    for b in built:
        assert b["error"] is None, b["error"]
        assert b[str(BASE_FILES - 1)] == {k: list(v) for k, v in expected_agg(BASE_FILES).items()}

    jobs = []
    version = BASE_FILES
    for source, to in CASES:
        ckpt, plain = tmp_path / source / "converted", tmp_path / source / "unconverted"
        shutil.copytree(bases[source], ckpt)
        shutil.copytree(bases[source], plain)
        result = plan_provider(str(ckpt), to, target_spark="3.5")
        engine.apply(result.plan, Location(str(ckpt)), Location(str(ckpt / "_ckptfix")), idle_seconds=0)
        for store, files in state_files(ckpt).items():
            main = [f for f in files if not f.startswith("SSTs/")]
            assert main == [f"{version}.{'zip' if to == 'rocksdb' else 'snapshot'}"], store
        if to == "rocksdb":  # 3.5-shaped metadata: no 4.x column-family fields
            with zipfile.ZipFile(io.BytesIO((ckpt / "state" / "1" / "0" / f"{version}.zip").read_bytes())) as z:
                assert "columnFamilyMapping" not in z.read("metadata").decode()
        write_inputs(inputs[source], BASE_FILES, MORE_FILES)
        # the session asks for the OLD provider: the offset log must win
        jobs += [
            (ckpt, inputs[source], source, ckpt.with_suffix(".json")),
            (plain, inputs[source], source, plain.with_suffix(".json")),
        ]

    results = run35(py35, jobs)
    batches = [str(b) for b in range(BASE_FILES, BASE_FILES + MORE_FILES)]
    for i, (source, to) in enumerate(CASES):
        got, want = results[2 * i], results[2 * i + 1]
        assert got["error"] is None, f"Spark 3.5 rejected the {source} -> {to} checkpoint: {got['error']}"
        assert want["error"] is None, want["error"]
        assert sorted(k for k in got if k.isdigit()) == batches, "no batch may be re-run"
        assert {b: got[b] for b in batches} == {b: want[b] for b in batches}, f"{source} -> {to}"
        assert got[batches[-1]] == {k: list(v) for k, v in expected_agg(BASE_FILES + MORE_FILES).items()}
        ckpt = tmp_path / source / "converted"
        newest = max(int(p.name) for p in (ckpt / "offsets").iterdir() if p.name.isdigit())
        meta = json.loads((ckpt / "offsets" / str(newest)).read_text().splitlines()[1])
        assert meta["conf"][PROVIDER_CONF] == CLASSES[to]
