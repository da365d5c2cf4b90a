"""``state rebuild`` proven on real Spark 4.x: a snapshot ckptfix writes is loaded by Spark and the query goes on
with exactly the right state.

Per provider (HDFS; RocksDB; RocksDB + changelog checkpointing with changelogs piled up; the same with checkpoint
format v2) a ``groupBy(key).agg(count, sum)`` query runs 5 micro-batches (one JSON file each, 2 shuffle
partitions, complete-mode foreachBatch sink kept in memory). Then, on copies of that checkpoint:

* the plan ``plan_rebuild(version=<last batch + 1>, prune=True, retain=2)`` writes the expected files and deletes
  exactly what Spark's own cleanup would delete with the new snapshot in place;
* where the new snapshot can be the only way to load the version (HDFS, RocksDB with changelogs), every older
  delta / changelog / zip is deleted after the rebuild -- the same damage without the rebuild makes the
  restart fail first;
* the query restarts with 2 more input files: the sink must hold the cumulative aggregates computed here from
  the input data, and Spark's ``statestore`` source must read exactly that state.

Plus: HDFS prune with other retentions against Spark's cleanup rule (plan only), and ``undo`` restores the
tree byte for byte.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ckptfix.repair import engine
from ckptfix.repair.rebuild import plan_rebuild
from ckptfix.storage import Location
from tests.spark.harness import await_available_now
from tests.state import scenarios

pytestmark = pytest.mark.spark

HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
PROVIDER = "spark.sql.streaming.stateStore.providerClass"
CHANGELOG = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"
FORMAT_VERSION = "spark.sql.streaming.stateStore.checkpointFormatVersion"
MIN_DELTAS = "spark.sql.streaming.stateStore.minDeltasForSnapshot"
SHUFFLE = "spark.sql.shuffle.partitions"

# minDeltasForSnapshot 100: Spark's maintenance writes no snapshot in 5 batches (deterministic file sets; for
# RocksDB with changelogs the changelogs pile up behind at most one zip)
PROVIDERS: dict[str, dict[str, str]] = {
    "hdfs": {PROVIDER: HDFS},
    "rocksdb": {PROVIDER: ROCKSDB, CHANGELOG: "false"},
    "rocksdb_cl": {PROVIDER: ROCKSDB, CHANGELOG: "true"},
    "rocksdb_cl_v2": {PROVIDER: ROCKSDB, CHANGELOG: "true", FORMAT_VERSION: "2"},
}
COMMON = {SHUFFLE: "2", MIN_DELTAS: "100"}
CONF_KEYS = sorted({k for confs in PROVIDERS.values() for k in confs} | set(COMMON))

BASE_FILES = 5  # batches 0..4 -> state version 5
MORE_FILES = 2  # batches 5..6 after the rebuild
VERSION = BASE_FILES  # last committed batch + 1
RETAIN = 2
KEYS = ["a", "b", "c", "d", "e"]
ROWS_PER_FILE = 4
SCHEMA = "id LONG, key STRING, value LONG"
MTIME_BASE = 1_700_000_000
TIMEOUT = 240


# ------------------------------------------------------------------------------------------ input and expectations


def file_rows(i: int) -> list[dict[str, Any]]:
    """File i: 4 rows; key "e" first appears in the files read after the rebuild."""
    keys = KEYS[:4] if i < BASE_FILES else KEYS
    return [
        {"id": i * ROWS_PER_FILE + r, "key": keys[(i + 2 * r) % len(keys)], "value": (i + 1) * 100 + r * 7 - 3}
        for r in range(ROWS_PER_FILE)
    ]


def write_inputs(input_dir: Path, start: int, count: int) -> None:
    input_dir.mkdir(parents=True, exist_ok=True)
    for i in range(start, start + count):
        path = input_dir / f"part-{i:04d}.json"
        if path.exists():  # deterministic content: already there
            continue
        tmp = input_dir / f".part-{i:04d}.json.tmp"  # hidden: the file source ignores it
        tmp.write_text("".join(json.dumps(row) + "\n" for row in file_rows(i)))
        mtime = MTIME_BASE + 60 * i  # the file source takes files in mtime order: batch i reads file i
        os.utime(tmp, (mtime, mtime))
        tmp.rename(path)


def expected_state(files: int) -> dict[str, tuple[int, int]]:
    """key -> (count, sum) over input files 0..files-1, computed from the data, not by ckptfix."""
    out: dict[str, tuple[int, int]] = {}
    for i in range(files):
        for row in file_rows(i):
            n, s = out.get(row["key"], (0, 0))
            out[row["key"]] = (n + 1, s + row["value"])
    return out


# ------------------------------------------------------------------------------------------ running Spark


def session_confs(spark: Any, confs: dict[str, str]) -> Any:
    """Set ``confs`` and unset every other key of CONF_KEYS; restore all of them afterwards."""
    return scenarios.session_confs(spark, confs, list(CONF_KEYS))


def run_query(spark: Any, provider: str, ckpt: Path, input_dir: Path) -> dict[int, dict[str, tuple[int, int]]]:
    """Run the aggregation (availableNow, one file per batch) to the end. Returns batch id -> complete output.
    Raises RuntimeError with Spark's error text when the query fails."""
    from pyspark.sql import functions as F

    out: dict[int, dict[str, tuple[int, int]]] = {}

    def sink(df: Any, batch_id: int) -> None:
        out[batch_id] = {r["key"]: (r["cnt"], r["total"]) for r in df.collect()}

    with session_confs(spark, {**COMMON, **PROVIDERS[provider]}):
        agg = (
            spark.readStream.format("json")
            .schema(SCHEMA)
            .option("maxFilesPerTrigger", 1)
            .load(str(input_dir))
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


def spark_state(spark: Any, provider: str, ckpt: Path) -> dict[str, tuple[int, int]]:
    """The latest state as Spark's ``statestore`` source reads it: key -> (count, sum)."""
    reading = {FORMAT_VERSION: "2"} if provider == "rocksdb_cl_v2" else {}
    with session_confs(spark, reading):
        rows = spark.read.format("statestore").load(str(ckpt)).collect()
    state: dict[str, tuple[int, int]] = {}
    for r in rows:
        key = r["key"][0]
        assert key not in state, f"key {key!r} in two partitions"
        state[key] = tuple(r["value"])  # type: ignore[assignment]
    return state


# ------------------------------------------------------------------------------------------ the base checkpoints


@dataclass(frozen=True)
class Base:
    provider: str
    root: Path  # ckpt/ and input/ (5 files)
    outputs: dict[int, dict[str, tuple[int, int]]]

    def copy(self, dest: Path) -> tuple[Path, Path]:
        """A copy of the checkpoint, and the input dir (shared: the file source log holds its absolute path)."""
        shutil.copytree(self.root / "ckpt", dest)
        return dest, self.root / "input"


@pytest.fixture(scope="module")
def bases(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("rebuild-live")
    cache: dict[str, Base] = {}

    def get(provider: str) -> Base:
        if provider not in cache:
            work = root / provider
            write_inputs(work / "input", 0, BASE_FILES)
            outputs = run_query(spark, provider, work / "ckpt", work / "input")
            assert sorted(outputs) == list(range(BASE_FILES))
            assert outputs[BASE_FILES - 1] == expected_state(BASE_FILES)
            cache[provider] = Base(provider, work, outputs)
        return cache[provider]

    return get


# ------------------------------------------------------------------------------------------ checkpoint files


def store_dirs(ckpt: Path) -> list[Path]:
    d = ckpt / "state" / "0"
    return sorted((p for p in d.iterdir() if p.name.isdigit()), key=lambda p: int(p.name))


def version_of(name: str) -> int:
    return int(name.split(".")[0].split("_")[0])


def state_files(store: Path, *suffixes: str) -> list[Path]:
    """Visible state files of a store dir (not .crc sidecars), oldest first."""
    files = [p for p in store.iterdir() if p.is_file() and not p.name.startswith(".") and p.suffix in suffixes]
    return sorted(files, key=lambda p: (version_of(p.name), p.name))


def tree(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "_ckptfix" not in p.parts
    }


def rel(ckpt: Path, path: Path) -> str:
    return str(path.relative_to(ckpt))


def unique_ids(ckpt: Path, batch: int) -> dict[int, str]:
    """Checkpoint format v2: partition -> the state unique id the commit log gives version ``batch + 1``."""
    lines = (ckpt / "commits" / str(batch)).read_text().splitlines()
    meta = json.loads(lines[1])
    ids = meta["stateUniqueIds"]["0"]
    return {p: (v[0] if isinstance(v, list) else v) for p, v in enumerate(ids)}


def zip_sst_names(data: bytes) -> set[str]:
    """DFS names of the SSTs a RocksDB checkpoint zip lists (its ``metadata`` entry)."""
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        text = z.read("metadata").decode()
    meta = json.loads(text.split("\n", 1)[1])
    return {f["dfsSstFileName"] for f in meta.get("sstFiles", [])}


def spark_cleanup(provider: str, store: Path, new_ssts: set[str], retain: int = RETAIN) -> set[Path]:
    """The files Spark's own maintenance cleanup would delete from ``store`` once the new snapshot of VERSION
    (listing the SSTs ``new_ssts``) is in place, with minBatchesToRetain = ``retain``. Mirrors
    HDFSBackedStateStoreProvider.cleanup (earliestVersionToRetain = latest - minVersionsToRetain, then the files
    older than that version's snapshot) and RocksDBFileManager.deleteOldVersions (minVersionToRetain = newest
    zip <= newest zip - numVersionsToRetain + 1; zips, changelogs older than it and SSTs no kept zip lists)."""
    if provider == "hdfs":
        files = state_files(store, ".delta", ".snapshot")
        earliest = max([version_of(p.name) for p in files] + [VERSION]) - retain  # earliestVersionToRetain
        if earliest <= 0:
            return set()
        snaps = [version_of(p.name) for p in files if p.suffix == ".snapshot"] + [VERSION]
        base = max((v for v in snaps if v <= earliest), default=1)  # filesForVersion(earliest).head
        return {p for p in files if version_of(p.name) < base}
    zips = state_files(store, ".zip")
    snaps = {version_of(p.name) for p in zips} | {VERSION}
    min_keep = max((v for v in snaps if v <= max(snaps) - retain + 1), default=0)  # minVersionToRetain
    if not any(v < min_keep for v in snaps):  # snapshotVersionsToDelete is empty: nothing goes
        return set()
    doomed = {p for p in state_files(store, ".zip", ".changelog") if version_of(p.name) < min_keep}
    kept = set(new_ssts)
    for z in zips:
        if version_of(z.name) >= min_keep:
            kept |= zip_sst_names(z.read_bytes())
    ssts = [p for p in (store / "SSTs").iterdir() if not p.name.startswith(".")] if (store / "SSTs").is_dir() else []
    return doomed | {p for p in ssts if p.name not in kept}


# ------------------------------------------------------------------------------------------ the tests


def rebuild(ckpt: Path) -> Any:
    result = plan_rebuild(str(ckpt), version=VERSION, prune=True, retain=RETAIN)
    assert result.version == VERSION
    return result


def expected_new_file(provider: str, ckpt: Path, store: Path) -> str:
    if provider == "hdfs":
        return rel(ckpt, store / f"{VERSION}.snapshot")
    if provider == "rocksdb_cl_v2":
        uid = unique_ids(ckpt, VERSION - 1)[int(store.name)]
        return rel(ckpt, store / f"{VERSION}_{uid}.zip")
    return rel(ckpt, store / f"{VERSION}.zip")


def older_than_version(provider: str, store: Path) -> list[Path]:
    """Every delta / changelog / zip a load of VERSION could use besides the new snapshot (plus .crc sidecars)."""
    suffixes = (".delta",) if provider == "hdfs" else (".changelog", ".zip")
    files = [p for p in state_files(store, *suffixes) if version_of(p.name) <= VERSION]
    if provider != "hdfs":
        files = [p for p in files if not (p.suffix == ".zip" and version_of(p.name) == VERSION)]
    sidecars = []
    for p in files:
        sidecars += [x for x in (p.with_name(f".{p.name}.crc"), p.with_name(f"{p.name}.crc")) if x.exists()]
    return files + sidecars


@pytest.mark.parametrize("provider", list(PROVIDERS))
def test_spark_continues_from_the_rebuilt_snapshot(spark: Any, bases: Any, provider: str, tmp_path: Path) -> None:
    base = bases(provider)
    ckpt, inputs = base.copy(tmp_path / "rebuilt")
    stores = store_dirs(ckpt)
    assert [s.name for s in stores] == ["0", "1"]
    listing = {s.name: sorted(str(p.relative_to(s)) for p in s.rglob("*") if p.is_file()) for s in stores}

    # -- the plan: one new snapshot per store (RocksDB without changelogs: version 5 has its zip already)
    result = rebuild(ckpt)
    writes = {a.path for a in result.plan.actions if a.op == "write"}
    deletes = {a.path for a in result.plan.actions if a.op == "delete"}
    snapshot_needed = provider != "rocksdb"
    expected_deletes: set[str] = set()
    for store in stores:
        new = expected_new_file(provider, ckpt, store)
        mine = {w for w in writes if w.startswith(rel(ckpt, store) + "/")}
        new_ssts: set[str] = set()
        if not snapshot_needed:
            assert (ckpt / new).exists() and not mine, f"{new} exists already, nothing to write: {sorted(mine)}"
        else:
            assert not (ckpt / new).exists(), f"{new} exists before the rebuild: {listing[store.name]}"
            assert new in mine, f"{new} not written: {sorted(mine)}"
            extra = {w for w in mine - {new} if not is_sidecar(w)}
            if provider != "hdfs":
                new_ssts = zip_sst_names(planned(result, new))
                assert new_ssts, f"{new} lists no SST"
                assert {Path(w).name for w in extra} == new_ssts
                assert all(w.startswith(rel(ckpt, store / "SSTs") + "/") for w in extra)
            else:
                assert not extra
        expected_deletes |= {rel(ckpt, p) for p in spark_cleanup(provider, store, new_ssts)}
    # prune deletes exactly what Spark's cleanup would (with RETAIN), plus the sidecars of those files
    assert {d for d in deletes if not is_sidecar(d)} == expected_deletes, listing
    if provider == "rocksdb":
        assert expected_deletes, "without changelogs every version has a zip: the ones older than 4 go"

    engine.apply(result.plan, Location(str(ckpt)), Location(str(ckpt / "_ckptfix")), idle_seconds=0)
    assert all((ckpt / w).exists() for w in writes)
    assert not any((ckpt / d).exists() for d in deletes)

    if snapshot_needed:
        # -- damage: delete every older delta / changelog / zip. Without the rebuild Spark cannot restart ...
        damaged, damaged_inputs = base.copy(tmp_path / "damaged")
        for store in store_dirs(damaged):
            for p in older_than_version(provider, store):
                p.unlink()
        write_inputs(damaged_inputs, BASE_FILES, MORE_FILES)
        with pytest.raises(RuntimeError) as failed:
            run_query(spark, provider, damaged, damaged_inputs)
        assert "CANNOT_LOAD_STATE_STORE" in str(failed.value), str(failed.value)[:3000]
        # ... with it, the new snapshot is all that is left of version VERSION and before
        for store in stores:
            for p in older_than_version(provider, store):
                p.unlink()
            left = [p.name for p in state_files(store, ".delta", ".snapshot", ".zip", ".changelog")]
            assert left == [Path(expected_new_file(provider, ckpt, store)).name]

    # -- restart with 2 more files: Spark loads version VERSION and goes on with the right state
    write_inputs(inputs, BASE_FILES, MORE_FILES)
    try:
        outputs = run_query(spark, provider, ckpt, inputs)
    except RuntimeError as exc:
        pytest.fail(f"[{provider}] Spark rejected the rebuilt checkpoint:\n{exc}")
    assert sorted(outputs) == list(range(BASE_FILES, BASE_FILES + MORE_FILES)), "no batch may be re-run"
    for batch, rows in outputs.items():
        assert rows == expected_state(batch + 1), f"batch {batch}"
    assert spark_state(spark, provider, ckpt) == expected_state(BASE_FILES + MORE_FILES)


def is_sidecar(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return name.endswith(".crc")


def planned(result: Any, path: str) -> bytes:
    for a in result.plan.actions:
        if a.path == path and a.op == "write":
            return a.content  # type: ignore[no-any-return]
    raise AssertionError(f"{path} is not written by the plan")


@pytest.mark.parametrize("retain", [1, 2, 3])
def test_hdfs_prune_keeps_what_spark_cleanup_keeps(bases: Any, retain: int, tmp_path: Path) -> None:
    """HDFS: Spark keeps versions latest - minBatchesToRetain .. latest loadable (one more than RocksDB does)."""
    ckpt, _ = bases("hdfs").copy(tmp_path / "prune")
    result = plan_rebuild(str(ckpt), version=VERSION, prune=True, retain=retain)
    deletes = {a.path for a in result.plan.actions if a.op == "delete" and not is_sidecar(a.path)}
    expected = {rel(ckpt, p) for store in store_dirs(ckpt) for p in spark_cleanup("hdfs", store, set(), retain)}
    assert deletes == expected


def test_undo_restores_the_tree(spark: Any, bases: Any, tmp_path: Path) -> None:
    ckpt, _ = bases("rocksdb_cl").copy(tmp_path / "undo")
    before = tree(ckpt)
    result = rebuild(ckpt)
    engine.apply(result.plan, Location(str(ckpt)), Location(str(ckpt / "_ckptfix")), idle_seconds=0)
    assert tree(ckpt) != before
    engine.undo(Location(str(ckpt)), Location(str(ckpt / "_ckptfix")), force=True)
    assert tree(ckpt) == before
