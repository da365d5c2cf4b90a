"""``ckptfix migrate provider`` offline, on checkpoints written by real Spark (tests/fixtures): what the plan
writes, and every refusal -- one line, exit 2, a JSON document in JSON mode, nothing changed."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ckptfix.cli.main import app
from ckptfix.errors import ProviderRefused
from ckptfix.migrate.provider import CLASSES, PROVIDER_CONF, plan_provider
from ckptfix.repair import engine
from ckptfix.storage import Location
from tests.support.trees import tree

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
runner = CliRunner()


def extract(tarball: str, dest: Path) -> Path:
    with tarfile.open(FIXTURES / tarball) as tar:
        tar.extractall(dest, filter="data")
    return dest / "ckpt"


def offsets_conf(ckpt: Path, batch: int) -> dict[str, str]:
    return json.loads((ckpt / "offsets" / str(batch)).read_text().splitlines()[1])["conf"]


def set_conf(ckpt: Path, key: str, value: str) -> None:
    """Edit the conf of every offset file (and drop its .crc: Spark then skips the check)."""
    for f in (ckpt / "offsets").iterdir():
        if f.name.isdigit():
            lines = f.read_text().split("\n")
            meta = json.loads(lines[1])
            meta["conf"][key] = value
            lines[1] = json.dumps(meta, separators=(",", ":"))
            f.write_text("\n".join(lines))
            (ckpt / "offsets" / f".{f.name}.crc").unlink(missing_ok=True)


def run(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, ["migrate", "provider", *args])
    return result.exit_code, result.output


# ------------------------------------------------------------------------------------------ the plan


def test_hdfs_to_rocksdb_plan_writes_zips_and_records_the_provider(tmp_path: Path) -> None:
    ckpt = extract("spark-4.2.1/agg_hdfs.tar.gz", tmp_path)
    last = max(int(p.name) for p in (ckpt / "commits").iterdir() if p.name.isdigit())
    result = plan_provider(str(ckpt), "rocksdb")
    assert (result.source, result.target, result.version) == ("hdfs", "rocksdb", last + 1)
    writes = {a.path: a.content for a in result.plan.actions if a.op == "write"}
    deletes = {a.path for a in result.plan.actions if a.op == "delete"}
    parts = sorted(p.name for p in (ckpt / "state" / "0").iterdir() if p.name.isdigit())
    for part in parts:
        zip_rel = f"state/0/{part}/{last + 1}.zip"
        assert zip_rel in writes
        with zipfile.ZipFile(__import__("io").BytesIO(writes[zip_rel])) as z:
            meta = json.loads(z.read("metadata").decode().split("\n", 1)[1])
        assert {f"state/0/{part}/SSTs/{s['dfsSstFileName']}" for s in meta["sstFiles"]} <= set(writes)
        # every HDFS file of the store (and its .crc) goes
        store = ckpt / "state" / "0" / part
        old = {f"state/0/{part}/{p.name}" for p in store.iterdir() if p.is_file()}
        assert old == deletes & {d for d in deletes if d.startswith(f"state/0/{part}/")}
    # the offset file of the last batch: only the provider changes, byte for byte elsewhere
    rel = f"offsets/{last}"
    before = (ckpt / rel).read_bytes()
    after = writes[rel]
    assert after == before.replace(CLASSES["hdfs"].encode(), CLASSES["rocksdb"].encode())
    assert f"offsets/.{last}.crc" in writes  # the Hadoop sidecar follows


def test_uncommitted_last_batch_rewrites_both_offset_files(tmp_path: Path) -> None:
    """One uncommitted batch that left no state (stopped before its state commit): the restart re-runs it on version
    last-commit + 1 with the confs of the LATEST offset file, so both offset files get the new provider. Where it
    left state (version last + 2), the conversion is refused (hunt 11, F1: a file sink that logged the batch makes
    Spark commit it without running it, and the deleted state is never written again)."""
    ckpt = extract("spark-4.2.1/agg_hdfs.tar.gz", tmp_path)
    last = max(int(p.name) for p in (ckpt / "commits").iterdir() if p.name.isdigit())
    (ckpt / "commits" / str(last)).unlink()
    (ckpt / "commits" / f".{last}.crc").unlink(missing_ok=True)
    with pytest.raises(ProviderRefused, match=f"batch {last} is planned but not committed .* --to-batch {last - 1}"):
        plan_provider(str(ckpt), "rocksdb")
    for left in (ckpt / "state").rglob(f"*{last + 1}.*"):
        left.unlink()
    result = plan_provider(str(ckpt), "rocksdb")
    assert result.version == last
    writes = {a.path for a in result.plan.actions if a.op == "write"}
    assert {f"offsets/{last - 1}", f"offsets/{last}"} <= writes


def test_apply_and_undo_byte_for_byte(tmp_path: Path) -> None:
    ckpt = extract("spark-4.2.1/agg_rocksdb_cl.tar.gz", tmp_path)
    original = tree(ckpt)
    code, out = run(str(ckpt), "--to", "hdfs", "--apply", "--idle-seconds", "0", "-f", "json")
    assert code == 0, out
    doc = json.loads(out)
    assert doc["applied_run"]
    assert (
        offsets_conf(ckpt, max(int(p.name) for p in (ckpt / "commits").iterdir() if p.name.isdigit()))[PROVIDER_CONF]
        == CLASSES["hdfs"]
    )
    assert not list((ckpt / "state").rglob("*.zip")) and not list((ckpt / "state").rglob("*.changelog"))
    assert tree(ckpt) != original
    undone = runner.invoke(app, ["undo", str(ckpt), "--idle-seconds", "0"])
    assert undone.exit_code == 0, undone.output
    assert tree(ckpt) == original


# ------------------------------------------------------------------------------------------ refusals


def _tws(tmp: Path) -> Path:
    """A real 4.2.1 RocksDB checkpoint whose state is replaced by real transformWithState state (formats/tws)."""
    ckpt = extract("spark-4.2.1/agg_rocksdb_cl.tar.gz", tmp)
    shutil.rmtree(ckpt / "state")
    shutil.copytree(FIXTURES / "formats" / "tws" / "state", ckpt / "state")
    return ckpt


def _v2(tmp: Path) -> Path:
    ckpt = extract("spark-4.2.1/agg_rocksdb_cl.tar.gz", tmp)
    shutil.rmtree(ckpt / "state")
    shutil.copytree(FIXTURES / "formats" / "rocksdb_v2" / "state", ckpt / "state")
    return ckpt


def _damaged(tmp: Path) -> Path:
    ckpt = extract("spark-4.2.1/agg_hdfs.tar.gz", tmp)
    last = max(int(p.name) for p in (ckpt / "commits").iterdir() if p.name.isdigit())
    delta = ckpt / "state" / "0" / "1" / f"{last + 1}.delta"
    # into its last data block: a cut inside the 21-byte LZ4 end block alone is never read by Spark (3.5.9-4.3 restart
    # it, damage case state_delta_cut_in_end_block_crc_kept), and ckptfix reads the rows Spark reads
    delta.write_bytes(delta.read_bytes()[:-30])
    return ckpt


def _two_uncommitted(tmp: Path) -> Path:
    ckpt = extract("spark-4.2.1/agg_hdfs.tar.gz", tmp)
    last = max(int(p.name) for p in (ckpt / "commits").iterdir() if p.name.isdigit())
    for b in (last, last - 1):
        (ckpt / "commits" / str(b)).unlink()
    return ckpt


def _no_commit(tmp: Path) -> Path:
    ckpt = extract("spark-4.2.1/agg_hdfs.tar.gz", tmp)
    shutil.rmtree(ckpt / "commits")
    (ckpt / "commits").mkdir()
    return ckpt


def _conf(tarball: str, key: str, value: str) -> object:
    def make(tmp: Path) -> Path:
        ckpt = extract(tarball, tmp)
        set_conf(ckpt, key, value)
        return ckpt

    return make


def _session_window(tmp: Path) -> Path:
    return extract("state35/session_hdfs.tar.gz", tmp)


REFUSALS = {
    # case: (make checkpoint, extra args, words the one-line reason must hold)
    "already_rocksdb": (lambda t: extract("spark-4.2.1/agg_rocksdb_cl.tar.gz", t), ["--to", "rocksdb"], "already"),
    "already_hdfs": (lambda t: extract("spark-4.2.1/agg_hdfs.tar.gz", t), ["--to", "hdfs"], "already"),
    "tws_to_hdfs": (_tws, ["--to", "hdfs"], "transformWithState"),
    "format_v2": (_v2, ["--to", "hdfs"], "format v2"),
    "damaged_delta": (_damaged, ["--to", "rocksdb"], ".delta"),
    "two_uncommitted": (_two_uncommitted, ["--to", "rocksdb"], "uncommitted"),
    "no_commit": (_no_commit, ["--to", "rocksdb"], "no committed batch"),
    "avro": (
        _conf("spark-4.2.1/agg_hdfs.tar.gz", "spark.sql.streaming.stateStore.encodingFormat", "avro"),
        ["--to", "rocksdb"],
        "avro",
    ),
    "row_checksum": (
        _conf("spark-4.2.1/agg_hdfs.tar.gz", "spark.sql.streaming.stateStore.rowChecksum.enabled", "true"),
        ["--to", "rocksdb"],
        "rowChecksum",
    ),
    "custom_provider": (
        _conf("spark-4.2.1/agg_hdfs.tar.gz", PROVIDER_CONF, "com.example.MyProvider"),
        ["--to", "rocksdb"],
        "com.example.MyProvider",
    ),
    "spark35_cannot_read_4x": (
        lambda t: extract("spark-4.2.1/agg_hdfs.tar.gz", t),
        ["--to", "rocksdb", "--target-spark", "3.5"],
        "3.5",
    ),
    "unknown_target_spark": (
        lambda t: extract("spark-4.2.1/agg_hdfs.tar.gz", t),
        ["--to", "rocksdb", "--target-spark", "9.9"],
        "9.9",
    ),
    "changelog_for_hdfs": (
        lambda t: extract("spark-4.2.1/agg_rocksdb_cl.tar.gz", t),
        ["--to", "hdfs", "--changelog", "on"],
        "--changelog",
    ),
    "session_window_prefix_keys": (_session_window, ["--to", "rocksdb", "--target-spark", "3.5"], "prefix"),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
@pytest.mark.parametrize("fmt", ["text", "json"])
def test_refusals(tmp_path: Path, case: str, fmt: str) -> None:
    make, args, words = REFUSALS[case]
    ckpt = make(tmp_path)  # type: ignore[operator]
    before = tree(ckpt)
    code, out = run(str(ckpt), *args, "--apply", "--idle-seconds", "0", "-f", fmt)
    assert code == 2, out
    if fmt == "json":
        doc = json.loads(out)
        message = doc["error"]["message"]
    else:
        assert len(out.strip().splitlines()) == 1 or out.startswith("ckptfix: error:"), out
        assert "Traceback" not in out
        message = " ".join(out.split())
    assert words.lower() in message.lower(), message
    assert tree(ckpt) == before
    assert not (ckpt / "_ckptfix").exists()


def test_running_query_is_refused(tmp_path: Path) -> None:
    """A write in the last --idle-seconds: the engine refuses to apply (the query may be running)."""
    ckpt = extract("spark-4.2.1/agg_hdfs.tar.gz", tmp_path)
    now = time.time()
    for p in ckpt.rglob("*"):
        os.utime(p, (now - 3600, now - 3600))
    latest = max(int(p.name) for p in (ckpt / "offsets").iterdir() if p.name.isdigit())
    os.utime(ckpt / "offsets" / str(latest), (now, now))
    before = tree(ckpt)
    code, out = run(str(ckpt), "--to", "rocksdb", "--apply", "-f", "json")
    assert code == 2, out
    assert "is the query running" in json.loads(out)["error"]["message"]
    assert tree(ckpt) == before


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_dry_run_changes_nothing(tmp_path: Path, fmt: str) -> None:
    ckpt = extract("spark-4.2.1/agg_hdfs.tar.gz", tmp_path)
    before = tree(ckpt)
    plan_file = tmp_path / "plan.json"
    code, out = run(str(ckpt), "--to", "rocksdb", "--changelog", "on", "--plan-out", str(plan_file), "-f", fmt)
    assert code == 0, out
    assert tree(ckpt) == before
    saved = json.loads(plan_file.read_text())
    assert saved["fixes"] == ["MIGRATE-PROVIDER"]
    assert any("changelogCheckpointing.enabled=true" in e for e in saved["effects"])
    if fmt == "json":
        assert json.loads(out)["plan"]["actions"] == saved["actions"]
    else:
        assert "MIGRATE-PROVIDER" in out and "changelogCheckpointing.enabled=true" in out


def test_join_stores_are_each_converted(tmp_path: Path) -> None:
    """A Spark 3.5.9 stream-stream join (4 stores per partition): every store gets its own zip in the 3.5 shape
    (no 4.x column-family fields) whose numKeys is the number of pairs read from its HDFS chain."""
    ckpt = extract("state35/join_hdfs.tar.gz", tmp_path)
    last = max(int(p.name) for p in (ckpt / "commits").iterdir() if p.name.isdigit())
    result = plan_provider(str(ckpt), "rocksdb", target_spark="3.5")
    writes = {a.path: a.content for a in result.plan.actions if a.op == "write"}
    stores = sorted(p.relative_to(ckpt).as_posix() for p in (ckpt / "state" / "0").glob("*/*") if p.is_dir())
    stores = [s for s in stores if not s.endswith("_metadata")]
    assert len(stores) == 8  # 2 partitions x 4 stores
    assert sorted(s.store for s in result.stores) == stores
    for store in stores:
        data = writes[f"{store}/{last + 1}.zip"]
        assert data is not None
        with zipfile.ZipFile(__import__("io").BytesIO(data)) as z:
            meta = json.loads(z.read("metadata").decode().split("\n", 1)[1])
        assert "columnFamilyMapping" not in meta
        mine = next(s for s in result.stores if s.store == store)
        assert meta["numKeys"] == mine.keys
    assert sum(s.keys for s in result.stores) > 0


@pytest.mark.s3
def test_convert_and_undo_on_s3(s3_bucket: Any, tmp_path: Path) -> None:
    """The same plan through s3fs (moto): HDFS -> RocksDB on S3 equals the plan made on the local copy (but for
    the SSTs' random uuids), and undo restores every object."""
    from tests.support.trees import s3_tree

    local = extract("spark-4.2.1/agg_hdfs.tar.gz", tmp_path)
    url = s3_bucket.upload_tree(local, "ckpt")
    opts = s3_bucket.storage_options
    fs = s3_bucket.filesystem()
    before = s3_tree(fs, url)
    result = plan_provider(url, "rocksdb", storage_options=opts)
    local_plan = plan_provider(str(local), "rocksdb").plan

    def shape(plan: Any) -> list[tuple[str, str]]:
        return sorted((a.op, a.path if "/SSTs/" not in a.path else a.path.rsplit("-", 5)[0]) for a in plan.actions)

    assert shape(result.plan) == shape(local_plan)
    engine.apply(result.plan, Location(url, opts), Location(url + "/_ckptfix", opts), idle_seconds=0)
    after = s3_tree(fs, url)
    assert not [k for k in after if k.endswith(".delta")]
    assert [k for k in after if k.endswith(".zip")]
    engine.undo(Location(url, opts), Location(url + "/_ckptfix", opts), idle_seconds=0)
    assert s3_tree(fs, url) == before


# ------------------------------------------------------------------------------- stores in parallel


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    """A fresh process: the stores are converted in forked workers there (a process that used RocksDB before,
    as this test process may have, converts them one by one)."""
    return subprocess.run(
        [sys.executable, "-m", "ckptfix", "migrate", "provider", *args], capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize("to", ["hdfs", "rocksdb"])
def test_workers_write_what_one_process_writes(tmp_path: Path, to: str) -> None:
    """The stores (3 partitions here) are converted in parallel where the checkpoint is local: the plan a fresh
    process prints is the one a process converting them one by one makes, file for file (the new SSTs' names end
    in a random uuid; their sizes and the rest of each zip's member list are compared)."""
    from ckptfix.state import parallel

    fixture = "spark-4.2.1/agg_hdfs.tar.gz" if to == "rocksdb" else "spark-4.2.1/agg_rocksdb.tar.gz"
    ckpt = extract(fixture, tmp_path)
    done = _cli(str(ckpt), "--to", to, "--format", "json")
    assert done.returncode == 0, done.stderr
    forked = json.loads(done.stdout)["plan"]["actions"]
    available = parallel.available
    parallel.available = lambda: False  # type: ignore[assignment]
    try:
        alone = plan_provider(str(ckpt), to).plan.to_json()["actions"]
    finally:
        parallel.available = available  # type: ignore[assignment]

    def shape(actions: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        out = []
        for a in actions:
            path = a["path"]
            if "/SSTs/" in path and a["op"] == "write":
                path = path.rsplit("-", 5)[0]  # 000008-<uuid>.sst
            out.append((a["op"], path, a.get("size"), a.get("reason")))
        return out

    assert shape(forked) == shape(alone)
    assert len({a["path"].split("/")[2] for a in forked if a["op"] == "write" and a["path"].startswith("state/")}) == 3


def test_a_damaged_store_in_a_worker_is_one_line_naming_its_file(tmp_path: Path) -> None:
    """A worker's error is the error one process gives: one line naming the file, exit 2, nothing written."""
    ckpt = extract("spark-4.2.1/agg_hdfs.tar.gz", tmp_path)
    delta = max((ckpt / "state/0/2").glob("*.delta"), key=lambda p: int(p.name.split(".")[0]))
    data = delta.read_bytes()
    delta.write_bytes(data[: len(data) // 2])  # cut inside its records (the last bytes follow the end marker)
    (delta.parent / f".{delta.name}.crc").unlink(missing_ok=True)
    before = tree(ckpt)
    done = _cli(str(ckpt), "--to", "rocksdb")
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and f"state/0/2/{delta.name}" in lines[0] and "Traceback" not in done.stderr, lines
    assert tree(ckpt) == before


def test_the_text_plan_groups_a_store_s_old_files(tmp_path: Path) -> None:
    """New-user trial 2: the plan of a toy conversion was 91 lines, one per file and one per .crc. A sidecar now
    joins its file's line, and the old files of a directory deleted for one reason are one line naming them by kind
    and version; every action keeps its number, and the JSON plan still lists each file. The sample's stores
    (samples/README.md) hold changelogs 1..12, zips 3, 6, 9, 12 and 4 SSTs each."""
    ckpt = tmp_path / "ckpt"
    shutil.copytree(Path(__file__).resolve().parents[2] / "samples" / "rocksdb-changelog", ckpt)
    code, out = run(str(ckpt), "--to", "hdfs")
    assert code == 0, out
    lines = [line.strip() for line in out.splitlines() if re.match(r"\s+\d+(-\d+)?\. ", line)]
    for p in (0, 1):
        assert any(
            line.startswith(f"delete 16 files in state/0/{p}/ and their .crc sidecars (changelog 1..12, zip 3,6,9,12;")
            for line in (x.split(". ", 1)[1] for x in lines)
        ), lines
        assert any(f"delete 4 files in state/0/{p}/SSTs/ and their .crc sidecars (4 .sst files;" in x for x in lines)
    numbers: list[int] = []
    for line in lines:
        first, _, last = line.split(".", 1)[0].partition("-")
        numbers += list(range(int(first), int(last or first) + 1)) if last else [int(first)]
    doc = json.loads(runner.invoke(app, ["migrate", "provider", str(ckpt), "--to", "hdfs", "-f", "json"]).stdout)
    actions = doc["plan"]["actions"]
    sidecars = [i for i, a in enumerate(actions, 1) if a["path"].rsplit("/", 1)[-1].startswith(".")]
    # a line per file, or per group: its number range covers the file and its sidecar
    assert sorted(set(numbers) | set(sidecars)) == list(range(1, len(actions) + 1)) and len(lines) == 7
