"""``state repartition`` proven with real Spark 3.5.9 (the suite's own 3.5.9, run as subprocesses).

Spark 3.5.9 writes the base checkpoints of ``test_provider35_live`` (``dropDuplicates("id")`` then
``groupBy(key).agg(count, sum)``, complete mode: two stateful operators, 2 partitions, 3 input files), HDFS and
RocksDB. On copies ckptfix moves the state to 5 and to 1 partitions (repartition batch 3); Spark 3.5.9 restarts
them with 2 more input files. Spark 3.5 has no ``statestore`` reader, so the query's output is the proof: batches
4 and 5 (batch 3 reads nothing) must hold exactly the counts and sums of the distinct ids of every file read so
far, computed from the input rows, and the offset log must carry the new partition count.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ckptfix.repair import engine
from ckptfix.repair.repartition import plan_repartition
from ckptfix.storage import Location
from tests.migrate.test_provider35_live import run35
from tests.migrate.test_provider_live import BASE_FILES, MORE_FILES, expected_agg, write_inputs

pytestmark = pytest.mark.spark

PROVIDERS = ["hdfs", "rocksdb"]
TARGETS = [5, 1]


def test_spark35_restarts_on_the_repartitioned_state(py35: Path, tmp_path: Path) -> None:
    inputs = {p: tmp_path / p / "input" for p in PROVIDERS}
    for d in inputs.values():
        write_inputs(d, 0, BASE_FILES)
    bases = {p: tmp_path / p / "base" for p in PROVIDERS}
    built = run35(py35, [(bases[p], inputs[p], p, tmp_path / p / "base.json") for p in PROVIDERS])
    for b in built:
        assert b["error"] is None, b["error"]
        assert b[str(BASE_FILES - 1)] == {k: list(v) for k, v in expected_agg(BASE_FILES).items()}

    jobs, cases = [], []
    for p in PROVIDERS:
        write_inputs(inputs[p], BASE_FILES, MORE_FILES)
        for m in TARGETS:
            ckpt = tmp_path / p / f"to{m}"
            shutil.copytree(bases[p], ckpt)
            result = plan_repartition(str(ckpt), m, target_spark="3.5")
            assert (result.before, result.after, result.batch) == (2, m, BASE_FILES)
            assert {s.operator for s in result.stores} == {0, 1}
            engine.apply(result.plan, Location(str(ckpt)), Location(str(ckpt / "_ckptfix")), idle_seconds=0)
            jobs.append((ckpt, inputs[p], p, tmp_path / p / f"to{m}.json"))
            cases.append((p, m, ckpt))

    results = run35(py35, jobs)
    batches = [str(b) for b in range(BASE_FILES + 1, BASE_FILES + 1 + MORE_FILES)]
    for (p, m, ckpt), got in zip(cases, results, strict=True):
        assert got["error"] is None, f"Spark 3.5 rejected the {p} checkpoint repartitioned to {m}: {got['error']}"
        assert sorted(k for k in got if k.isdigit()) == batches, f"{p} -> {m}: batch 3 must not run again"
        for b in batches:
            want = {k: list(v) for k, v in expected_agg(int(b)).items()}
            assert got[b] == want, f"{p} -> {m}, batch {b}"
        last = json.loads((ckpt / "offsets" / batches[-1]).read_text().splitlines()[1])
        assert last["conf"]["spark.sql.shuffle.partitions"] == str(m)
