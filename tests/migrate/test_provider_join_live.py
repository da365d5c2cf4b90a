"""``migrate provider`` on a stream-stream join (4 stores per partition, in store sub-directories), proven on real
Spark 4.x: an inner join of two file sources on ``id`` runs 3 micro-batches, is converted, and

(a) Spark's ``statestore`` reader returns the same rows for both join sides before and after;
(b) the converted and the unconverted copy restart on the same new files with the same join output, and all
    output (before and after) is exactly the join computed from the input files;
(c) every one of the 4 stores of every partition holds only the target provider's files of the last version.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from ckptfix.migrate.provider import CHANGELOG_CONF, CLASSES, PROVIDER_CONF, plan_provider
from ckptfix.repair import engine
from ckptfix.storage import Location
from tests.spark.harness import await_available_now
from tests.state.scenarios import session_confs

pytestmark = pytest.mark.spark

COMMON = {"spark.sql.shuffle.partitions": "2", "spark.sql.streaming.stateStore.minDeltasForSnapshot": "100"}
SOURCES = {
    "hdfs": {PROVIDER_CONF: CLASSES["hdfs"]},
    "rocksdb": {PROVIDER_CONF: CLASSES["rocksdb"], CHANGELOG_CONF: "false"},
}
CONF_KEYS = sorted({k for c in SOURCES.values() for k in c} | set(COMMON))
STORES = ["left-keyToNumValues", "left-keyWithIndexToValue", "right-keyToNumValues", "right-keyWithIndexToValue"]
BASE_FILES, MORE_FILES = 3, 2
TIMEOUT = 240


def side_rows(side: str, i: int) -> list[dict[str, Any]]:
    """File i of a side: left ids 3i..3i+2, right ids 3i+1..3i+3 (so matches span batches); id 3i+1 twice on the
    left, so a key has two values (keyWithIndexToValue index 1)."""
    if side == "left":
        ids = [3 * i, 3 * i + 1, 3 * i + 1, 3 * i + 2]
        return [{"id": x, "lv": f"l{i}-{n}"} for n, x in enumerate(ids)]
    return [{"id": x, "rv": f"r{i}-{x}"} for x in (3 * i + 1, 3 * i + 2, 3 * i + 3)]


def write_inputs(root: Path, start: int, count: int) -> None:
    for side in ("left", "right"):
        d = root / side
        d.mkdir(parents=True, exist_ok=True)
        for i in range(start, start + count):
            path = d / f"part-{i:04d}.json"
            if not path.exists():
                tmp = d / f".part-{i:04d}.json.tmp"
                tmp.write_text("".join(json.dumps(r) + "\n" for r in side_rows(side, i)))
                os.utime(tmp, (1_700_000_000 + 60 * i, 1_700_000_000 + 60 * i))
                tmp.rename(path)


def expected_join(files: int) -> Counter[tuple[int, str, str]]:
    left = [r for i in range(files) for r in side_rows("left", i)]
    right = [r for i in range(files) for r in side_rows("right", i)]
    return Counter((a["id"], a["lv"], b["rv"]) for a in left for b in right if a["id"] == b["id"])


def run_query(spark: Any, confs: dict[str, str], ckpt: Path, inputs: Path) -> dict[int, Counter[tuple[int, str, str]]]:
    out: dict[int, Counter[tuple[int, str, str]]] = {}

    def sink(df: Any, batch_id: int) -> None:
        out[batch_id] = Counter((r["id"], r["lv"], r["rv"]) for r in df.collect())

    with session_confs(spark, {**COMMON, **confs}, CONF_KEYS):

        def read(side: str, schema: str) -> Any:
            return (
                spark.readStream.format("json").schema(schema).option("maxFilesPerTrigger", 1).load(str(inputs / side))
            )

        joined = read("left", "id LONG, lv STRING").join(read("right", "id LONG, rv STRING"), "id")
        query = (
            joined.writeStream.foreachBatch(sink)
            .option("checkpointLocation", str(ckpt))
            .trigger(availableNow=True)
            .start()
        )
        await_available_now(query, TIMEOUT)
    time.sleep(1.0)  # let the maintenance thread finish with this run's stores
    return out


def side_state(spark: Any, ckpt: Path, side: str) -> Counter[str]:
    rows = spark.read.format("statestore").option("joinSide", side).load(str(ckpt)).collect()
    return Counter(json.dumps(r.asDict(recursive=True), sort_keys=True, default=str) for r in rows)


@pytest.mark.parametrize(("source", "to"), [("hdfs", "rocksdb"), ("rocksdb", "hdfs")])
def test_converted_join_restarts_with_the_same_output(spark: Any, tmp_path: Path, source: str, to: str) -> None:
    work = tmp_path / "base"
    write_inputs(work / "input", 0, BASE_FILES)
    first = run_query(spark, SOURCES[source], work / "ckpt", work / "input")
    ckpt, plain = tmp_path / "converted", tmp_path / "unconverted"
    shutil.copytree(work / "ckpt", ckpt)
    shutil.copytree(work / "ckpt", plain)
    version = BASE_FILES  # last committed batch + 1

    result = plan_provider(str(ckpt), to, changelog=False if to == "rocksdb" else None)
    engine.apply(result.plan, Location(str(ckpt)), Location(str(ckpt / "_ckptfix")), idle_seconds=0)

    # (c) 2 partitions x 4 stores, each only the target provider's version-N files
    for part in ("0", "1"):
        for store in STORES:
            d = ckpt / "state" / "0" / part / store
            names = sorted(p.name for p in d.iterdir() if p.is_file() and not p.name.startswith("."))
            assert names == ([f"{version}.snapshot"] if to == "hdfs" else [f"{version}.zip"]), d

    # (a) the statestore reader: the same rows for both sides
    for side in ("left", "right"):
        before, after = side_state(spark, plain, side), side_state(spark, ckpt, side)
        assert before, f"{side}: no state rows before the conversion"
        assert after == before, side

    # (b) both restart on the same new files with the same output; all output is the join of all input
    write_inputs(work / "input", BASE_FILES, MORE_FILES)
    restart = {PROVIDER_CONF: CLASSES[to], **({CHANGELOG_CONF: "false"} if to == "rocksdb" else {})}
    try:
        got = run_query(spark, restart, ckpt, work / "input")
    except RuntimeError as exc:
        pytest.fail(f"Spark rejected the converted checkpoint:\n{str(exc)[:4000]}")
    want = run_query(spark, SOURCES[source], plain, work / "input")
    assert sorted(got) == list(range(BASE_FILES, BASE_FILES + MORE_FILES)), "no batch may be re-run"
    assert got == want
    total: Counter[tuple[int, str, str]] = Counter()
    for batch in [*first.values(), *got.values()]:
        total.update(batch)
    assert total == expected_join(BASE_FILES + MORE_FILES)
