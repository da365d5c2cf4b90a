"""``migrate provider`` proven on real Spark 4.x.

A query with two stateful operators -- ``dropDuplicates("id")`` then ``groupBy(key).agg(count, sum)`` (complete
mode, foreachBatch sink kept in memory), 2 shuffle partitions, so 2 operators x 2 partitions = 4 stores -- runs 3
micro-batches (one JSON file each; ids repeat across files so the dedup state matters) per source provider
(HDFS; RocksDB; RocksDB + changelog checkpointing). For each conversion, on copies of the base checkpoint:

(a) Spark's ``statestore`` reader returns the same rows (multisets) from the converted checkpoint as from the
    unconverted copy, for both operators;
(b) both copies restart with the same 2 new input files: the sink of the converted one holds exactly what the
    unconverted one produces (and what the data says);
(c) the converted store directories hold only the target provider's files of the last version;
(d) ``ckptfix undo`` restores every file byte for byte.
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
from tests.support.trees import tree

pytestmark = pytest.mark.spark

SOURCES: dict[str, dict[str, str]] = {
    "hdfs": {PROVIDER_CONF: CLASSES["hdfs"]},
    "rocksdb": {PROVIDER_CONF: CLASSES["rocksdb"], CHANGELOG_CONF: "false"},
    "rocksdb_cl": {PROVIDER_CONF: CLASSES["rocksdb"], CHANGELOG_CONF: "true"},
}
COMMON = {"spark.sql.shuffle.partitions": "2", "spark.sql.streaming.stateStore.minDeltasForSnapshot": "100"}
CONF_KEYS = sorted({k for c in SOURCES.values() for k in c} | set(COMMON))
# (source base, --to, --changelog) -> the restart session's changelog conf
CASES = [
    ("hdfs", "rocksdb", False),
    ("hdfs", "rocksdb", True),
    ("rocksdb", "hdfs", None),
    ("rocksdb_cl", "hdfs", None),
]
BASE_FILES, MORE_FILES = 3, 2
KEYS = ["a", "b", "c", "d"]
SCHEMA = "id LONG, key STRING, value LONG"
MTIME_BASE = 1_700_000_000
TIMEOUT = 240


def file_rows(i: int) -> list[dict[str, Any]]:
    """File i: 5 rows; ids 3i..3i+4, so two ids of each file were seen in the file before (dropped by dedup)."""
    keys = KEYS if i < BASE_FILES else [*KEYS, "e"]
    return [{"id": 3 * i + r, "key": keys[(3 * i + r) % len(keys)], "value": 10 * (3 * i + r) + 1} for r in range(5)]


def write_inputs(input_dir: Path, start: int, count: int) -> None:
    input_dir.mkdir(parents=True, exist_ok=True)
    for i in range(start, start + count):
        path = input_dir / f"part-{i:04d}.json"
        if path.exists():  # deterministic content: already there
            continue
        tmp = input_dir / f".part-{i:04d}.json.tmp"
        tmp.write_text("".join(json.dumps(row) + "\n" for row in file_rows(i)))
        os.utime(tmp, (MTIME_BASE + 60 * i, MTIME_BASE + 60 * i))
        tmp.rename(path)


def expected_agg(files: int) -> dict[str, tuple[int, int]]:
    """key -> (count, sum) over the distinct ids of files 0..files-1: computed from the data."""
    seen: dict[int, dict[str, Any]] = {}
    for i in range(files):
        for row in file_rows(i):
            seen.setdefault(row["id"], row)
    out: dict[str, tuple[int, int]] = {}
    for row in seen.values():
        n, s = out.get(row["key"], (0, 0))
        out[row["key"]] = (n + 1, s + row["value"])
    return out


def run_query(spark: Any, confs: dict[str, str], ckpt: Path, input_dir: Path) -> dict[int, dict[str, tuple[int, int]]]:
    from pyspark.sql import functions as F

    out: dict[int, dict[str, tuple[int, int]]] = {}

    def sink(df: Any, batch_id: int) -> None:
        out[batch_id] = {r["key"]: (r["cnt"], r["total"]) for r in df.collect()}

    with session_confs(spark, {**COMMON, **confs}, CONF_KEYS):
        agg = (
            spark.readStream.format("json")
            .schema(SCHEMA)
            .option("maxFilesPerTrigger", 1)
            .load(str(input_dir))
            .dropDuplicates(["id"])
            .groupBy("key")
            .agg(F.count("*").alias("cnt"), F.sum("value").alias("total"))
        )
        query = (
            agg.writeStream.outputMode("complete")
            .foreachBatch(sink)
            .option("checkpointLocation", str(ckpt))
            .trigger(availableNow=True)
            .start()
        )
        await_available_now(query, TIMEOUT)
    time.sleep(1.0)  # let the maintenance thread finish with this run's stores
    return out


def statestore_rows(spark: Any, ckpt: Path, operator: int, provider: str) -> Counter[str]:
    """Multiset of the rows Spark's statestore reader returns for the last committed batch."""
    with session_confs(spark, {PROVIDER_CONF: CLASSES[provider]}, CONF_KEYS):
        rows = spark.read.format("statestore").option("operatorId", operator).load(str(ckpt)).collect()
    return Counter(json.dumps(r.asDict(recursive=True), sort_keys=True, default=str) for r in rows)


@pytest.fixture(scope="module")
def bases(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("provider-live")
    cache: dict[str, Path] = {}

    def get(source: str) -> Path:
        if source not in cache:
            work = root / source
            write_inputs(work / "input", 0, BASE_FILES)
            outputs = run_query(spark, SOURCES[source], work / "ckpt", work / "input")
            assert outputs[BASE_FILES - 1] == expected_agg(BASE_FILES)
            cache[source] = work
        return cache[source]

    return get


def copy_base(base: Path, dest: Path) -> tuple[Path, Path]:
    """A copy of the checkpoint, and the input dir (shared: the file source log holds its absolute path)."""
    shutil.copytree(base / "ckpt", dest)
    return dest, base / "input"


def state_files(ckpt: Path) -> dict[str, list[str]]:
    """store dir -> the names of its files (SSTs as SSTs/<name>), hidden sidecars and _metadata left out."""
    out: dict[str, list[str]] = {}
    for op in sorted((ckpt / "state").iterdir()):
        for part in sorted(p for p in op.iterdir() if p.name.isdigit()):
            files = [p.name for p in part.iterdir() if p.is_file() and not p.name.startswith(".")]
            if (part / "SSTs").is_dir():
                files += [f"SSTs/{p.name}" for p in (part / "SSTs").iterdir() if not p.name.startswith(".")]
            out[f"{op.name}/{part.name}"] = sorted(files)
    return out


@pytest.mark.parametrize(("source", "to", "changelog"), CASES, ids=[f"{s}-to-{t}-{c}" for s, t, c in CASES])
def test_spark_restarts_on_the_new_provider(
    spark: Any, bases: Any, tmp_path: Path, source: str, to: str, changelog: bool | None
) -> None:
    base = bases(source)
    ckpt, inputs = copy_base(base, tmp_path / "converted")
    plain, plain_inputs = copy_base(base, tmp_path / "unconverted")
    original = tree(ckpt)
    last = BASE_FILES - 1
    version = last + 1

    result = plan_provider(str(ckpt), to, changelog=changelog)
    assert (result.source, result.target, result.version) == (source.split("_")[0], to, version)
    engine.apply(result.plan, Location(str(ckpt)), Location(str(ckpt / "_ckptfix")), idle_seconds=0)

    # (c) only the target provider's files of version N, in every store of both operators
    stores = state_files(ckpt)
    assert sorted(stores) == ["0/0", "0/1", "1/0", "1/1"]
    for store, files in stores.items():
        if to == "hdfs":
            assert files == [f"{version}.snapshot"], store
        else:
            assert [f for f in files if not f.startswith("SSTs/")] == [f"{version}.zip"], store
            assert not [f for f in files if f.endswith((".delta", ".snapshot", ".changelog"))], store
    meta = json.loads((ckpt / "offsets" / str(last)).read_text().splitlines()[1])
    assert meta["conf"][PROVIDER_CONF] == CLASSES[to]

    # (a) Spark's statestore reader: the same rows before (unconverted copy) and after
    for operator in (0, 1):
        before = statestore_rows(spark, plain, operator, source.split("_")[0])
        # the reading session asks for the OLD provider: the reader takes the one in the offset log
        after = statestore_rows(spark, ckpt, operator, source.split("_")[0])
        assert before, f"operator {operator}: no state rows before the conversion"
        assert after == before, f"operator {operator}"

    # (b) restart both with 2 new files: the same sink output
    write_inputs(inputs, BASE_FILES, MORE_FILES)
    restart_confs = {PROVIDER_CONF: CLASSES[to]}
    if to == "rocksdb":
        restart_confs[CHANGELOG_CONF] = "true" if changelog else "false"
    try:
        got = run_query(spark, restart_confs, ckpt, inputs)
    except RuntimeError as exc:
        pytest.fail(f"Spark rejected the converted checkpoint:\n{str(exc)[:4000]}")
    want = run_query(spark, SOURCES[source], plain, plain_inputs)
    assert sorted(got) == list(range(BASE_FILES, BASE_FILES + MORE_FILES)), "no batch may be re-run"
    assert got == want
    assert got[BASE_FILES + MORE_FILES - 1] == expected_agg(BASE_FILES + MORE_FILES)
    # the restarted query stayed on the new provider
    newest = max(int(p.name) for p in (ckpt / "offsets").iterdir() if p.name.isdigit())
    meta = json.loads((ckpt / "offsets" / str(newest)).read_text().splitlines()[1])
    assert meta["conf"][PROVIDER_CONF] == CLASSES[to]

    # (d) undo (of the migration, on a fresh copy: the restarted one has moved on) restores every byte
    again, _ = copy_base(base, tmp_path / "undo")
    run = plan_provider(str(again), to, changelog=changelog)
    backup = Location(str(again / "_ckptfix"))
    engine.apply(run.plan, Location(str(again)), backup, idle_seconds=0)
    assert tree(again) != original
    engine.undo(Location(str(again)), backup, idle_seconds=0)
    assert tree(again) == original
