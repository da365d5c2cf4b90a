"""``ckptfix rollback`` on checkpoints written by real Spark 3.5.9 (the committed tarballs) and on a
hand-assembled checkpoint-format-v2 checkpoint: exactly which files go, the refusals, --into,
undo, and S3. The expected file lists are written out from the fixtures' listings (``tar tzf``)
and the zips' SST lists (``unzip -p <zip> metadata``), not computed by ckptfix."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tarfile
import time
import zlib
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ckptfix.audit import audit
from ckptfix.cli.main import app
from ckptfix.repair import engine
from ckptfix.repair.rollback import RollbackRefused, plan_rollback
from ckptfix.storage import Location
from tests.spark.harness import copy_base, restart
from tests.spark.queries import SCENARIOS, input_file
from tests.support.trees import tree

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SPARK35 = FIXTURES / "spark-3.5.9"


def extract(scenario: str, dest: Path) -> Path:
    """The tarball's ckpt/ (and output/) under dest; tar keeps the 2026 mtimes, so the
    checkpoint looks idle."""
    with tarfile.open(SPARK35 / f"{scenario}.tar.gz") as tar:
        tar.extractall(dest, filter="tar")
    return dest / "ckpt"


def with_crc(paths: list[str]) -> list[str]:
    """Each path plus its Hadoop sidecar ``.<name>.crc`` (every file of these fixtures has one)."""
    out = []
    for p in paths:
        d, _, name = p.rpartition("/")
        out += [p, f"{d}/.{name}.crc"]
    return out


# agg_hdfs, roll back to batch 3: offsets/commits 4..7 go; every store keeps versions <= 4
# (1..4.delta, 3.snapshot) and loses 5..8.delta and 6.snapshot
HDFS_TO_3 = with_crc(
    [f"offsets/{b}" for b in (4, 5, 6, 7)]
    + [f"commits/{b}" for b in (4, 5, 6, 7)]
    + [f"state/0/{p}/{f}" for p in (0, 1, 2) for f in ("5.delta", "6.delta", "6.snapshot", "7.delta", "8.delta")]
)
# agg_rocksdb_cl, roll back to batch 2: keep versions <= 3 (3.zip, 1..3.changelog); 6.zip goes, and
# with it the one SST only 6.zip lists (6.zip lists 000008-X and 000015-Y, 3.zip lists 000008-X)
ROCKS_TO_2 = with_crc(
    [f"offsets/{b}" for b in (3, 4, 5, 6, 7)]
    + [f"commits/{b}" for b in (3, 4, 5, 6, 7)]
    + [f"state/0/{p}/{v}.changelog" for p in (0, 1, 2) for v in (4, 5, 6, 7, 8)]
    + [f"state/0/{p}/6.zip" for p in (0, 1, 2)]
    + [
        "state/0/0/SSTs/000015-b4ea37d2-1e1b-485a-ad14-328ddf95a43b.sst",
        "state/0/1/SSTs/000015-f159d7f5-b399-40a0-9a8c-897f7a8dd871.sst",
        "state/0/2/SSTs/000015-28430478-0a85-4bbc-8f17-347e96aaccb3.sst",
    ]
)
# agg_rocksdb_cl, roll back to batch 5: version 6 (6.zip) stays, so every SST stays
ROCKS_TO_5 = with_crc(
    ["offsets/6", "offsets/7", "commits/6", "commits/7"]
    + [f"state/0/{p}/{v}.changelog" for p in (0, 1, 2) for v in (7, 8)]
)

CASES = [("agg_hdfs", 3, HDFS_TO_3), ("agg_rocksdb_cl", 2, ROCKS_TO_2), ("agg_rocksdb_cl", 5, ROCKS_TO_5)]


@pytest.mark.parametrize(("scenario", "batch", "expected"), CASES)
def test_plan_deletes_exactly_the_expected_files(
    scenario: str, batch: int, expected: list[str], tmp_path: Path
) -> None:
    ckpt = extract(scenario, tmp_path)
    before = tree(ckpt)
    plan = plan_rollback(str(ckpt), batch, "3.5").plan
    assert sorted(a.path for a in plan.actions) == sorted(expected)
    assert {a.op for a in plan.actions} == {"delete"}
    assert tree(ckpt) == before  # a dry run changes nothing


@pytest.mark.parametrize(("scenario", "batch", "expected"), CASES)
def test_apply_leaves_a_restartable_checkpoint_and_undo_restores_it(
    scenario: str, batch: int, expected: list[str], tmp_path: Path
) -> None:
    ckpt = extract(scenario, tmp_path)
    before = tree(ckpt)
    plan = plan_rollback(str(ckpt), batch, "3.5").plan
    run_id = engine.apply(plan, Location(str(ckpt)), Location(engine.default_backup_url(str(ckpt))))
    assert tree(ckpt) == {p: h for p, h in before.items() if p not in expected}
    report = audit(str(ckpt), "3.5")
    assert report.verdict.restarts
    assert (report.facts["next_batch"], report.facts["state_version"]) == (
        batch + 1,
        batch + 1,
    )  # batch N+1 loads version N+1
    engine.undo(Location(str(ckpt)), Location(engine.default_backup_url(str(ckpt))), run_id)
    assert tree(ckpt) == before


def test_cli_dry_run_apply_undo(tmp_path: Path) -> None:
    ckpt = extract("agg_hdfs", tmp_path)
    before = tree(ckpt)
    runner = CliRunner()
    dry = runner.invoke(app, ["rollback", str(ckpt), "--to-batch", "3", "--target-spark", "3.5", "-f", "json"])
    assert dry.exit_code == 0, dry.output
    doc = json.loads(dry.stdout)
    assert sorted(a["path"] for a in doc["plan"]["actions"]) == sorted(HDFS_TO_3)
    assert doc["applied_run"] is None and tree(ckpt) == before
    plan_file = tmp_path / "plan.json"
    done = runner.invoke(
        app,
        ["rollback", str(ckpt), "--to-batch", "3", "--target-spark", "3.5", "--apply", "--plan-out", str(plan_file)],
    )
    assert done.exit_code == 0, done.output
    assert "will restart" in done.stdout and plan_file.exists()
    assert not (ckpt / "offsets" / "4").exists() and (ckpt / "commits" / "3").exists()
    undone = runner.invoke(app, ["undo", str(ckpt)])
    assert undone.exit_code == 0, undone.output
    assert tree(ckpt) == before


# -- refusals ---------------------------------------------------------------------------------
def _refusal(ckpt: Path, batch: int, *extra: str) -> str:
    before = tree(ckpt)
    result = CliRunner().invoke(
        app, ["rollback", str(ckpt), "--to-batch", str(batch), "--target-spark", "3.5", "--apply", *extra]
    )
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"ckptfix: error: cannot roll back to batch {batch}: "), lines
    assert tree(ckpt) == before
    return lines[0]


def test_refuses_an_uncommitted_batch(tmp_path: Path) -> None:
    ckpt = extract("agg_hdfs", tmp_path)
    assert "batch 8 is not committed: offsets/8 and commits/8 missing (offsets 0..7, commits 0..7)" in _refusal(ckpt, 8)
    (ckpt / "commits" / "5").unlink()  # batch 5 planned but never committed
    assert "commits/5 missing (offsets 0..7, commits 0..4,6..7)" in _refusal(ckpt, 5)


def test_refuses_when_state_version_n_plus_1_cannot_be_loaded(tmp_path: Path) -> None:
    ckpt = extract("agg_hdfs", tmp_path)
    (ckpt / "state/0/1/4.delta").unlink()  # version 4 = 3.snapshot + 4.delta
    line = _refusal(ckpt, 3)
    assert "state/0/1/4.delta is missing" in line and "[STATE-CHAIN-INCOMPLETE]" in line


def test_refuses_a_file_sink_ahead_of_the_batch(tmp_path: Path) -> None:
    ckpt = extract("filesink", tmp_path)
    line = _refusal(ckpt, 3, "--sink", str(tmp_path / "output"))
    assert "already holds batches up to 6" in line and "silent data loss" in line
    # the sink's newest batch is the rollback point: nothing it holds is re-planned
    ok = CliRunner().invoke(
        app, ["rollback", str(ckpt), "--to-batch", "6", "--target-spark", "3.5", "--sink", str(tmp_path / "output")]
    )
    assert ok.exit_code == 0, ok.output


def test_refuses_a_running_query(tmp_path: Path) -> None:
    ckpt = extract("agg_hdfs", tmp_path)
    os.utime(ckpt / "offsets" / "7")  # just written, as by a running query
    assert "is the query running?" in _refusal(ckpt, 3)
    assert "is the query running?" in _refusal(ckpt, 3, "--into", str(tmp_path / "copy"))
    assert not (tmp_path / "copy").exists()
    with pytest.raises(RollbackRefused):
        plan_rollback(str(ckpt), 3, "3.5", idle_seconds=60, into=str(tmp_path / "copy"), copy=True)
    assert not plan_rollback(str(ckpt), 3, "3.5", force=True).plan.empty
    # a dry run writes nothing: it shows the plan of a freshly written checkpoint (the apply checks again)
    dry = CliRunner().invoke(app, ["rollback", str(ckpt), "--to-batch", "3", "--target-spark", "3.5"])
    assert dry.exit_code == 0 and "dry run: nothing written" in dry.stderr, dry.output
    assert not plan_rollback(str(ckpt), 3, "3.5", idle_seconds=60).plan.empty


# -- --into -----------------------------------------------------------------------------------
def test_into_copies_everything_and_leaves_the_original_untouched(tmp_path: Path) -> None:
    ckpt = extract("agg_rocksdb_cl", tmp_path / "src")
    before = tree(ckpt)
    dest = tmp_path / "copy"
    result = CliRunner().invoke(
        app, ["rollback", str(ckpt), "--to-batch", "2", "--target-spark", "3.5", "--into", str(dest), "--apply"]
    )
    assert result.exit_code == 0, result.output
    assert tree(ckpt) == before  # every sha256 of the original unchanged
    assert not (ckpt / "_ckptfix").exists()
    assert tree(dest) == {p: h for p, h in before.items() if p not in ROCKS_TO_2}
    assert audit(str(dest), "3.5").verdict.restarts
    # the copy's files are all fresh: undo's liveness check would take them for a running query
    engine.undo(Location(str(dest)), Location(engine.default_backup_url(str(dest))), force=True)
    assert tree(dest) == before


def test_into_without_apply_writes_nothing(tmp_path: Path) -> None:
    ckpt = extract("agg_rocksdb_cl", tmp_path / "src")
    before = tree(ckpt)
    dest = tmp_path / "copy"
    args = ["rollback", str(ckpt), "--to-batch", "2", "--target-spark", "3.5", "--into", str(dest)]
    dry = CliRunner().invoke(app, args)
    assert dry.exit_code == 0, dry.output
    assert not dest.exists() and tree(ckpt) == before
    assert "dry run: nothing written" in dry.stderr
    for folder in {rel.rsplit("/", 1)[0] for rel in ROCKS_TO_2}:  # the plan shown is the one --apply carries out
        assert f" {folder}/" in dry.stdout, folder
    applied = CliRunner().invoke(app, [*args, "--apply"])
    assert applied.exit_code == 0, applied.output
    assert tree(dest) == {p: h for p, h in before.items() if p not in ROCKS_TO_2}


def test_into_recognises_an_interrupted_copy(tmp_path: Path) -> None:
    ckpt = extract("agg_hdfs", tmp_path / "src")
    dest = tmp_path / "copy"
    dest.mkdir()
    (dest / ".ckptfix-rollback-copy").write_text("copy in progress\n")  # what a killed copy leaves
    (dest / "metadata").write_bytes((ckpt / "metadata").read_bytes())
    result = CliRunner().invoke(app, ["rollback", str(ckpt), "--to-batch", "3", "--into", str(dest), "--apply"])
    assert result.exit_code == 2
    assert "unfinished copy of an interrupted rollback" in result.stderr and str(dest) in result.stderr


def test_into_refuses_a_non_empty_destination(tmp_path: Path) -> None:
    ckpt = extract("agg_hdfs", tmp_path / "src")
    dest = tmp_path / "copy"
    dest.mkdir()
    (dest / "something").write_text("x")
    result = CliRunner().invoke(app, ["rollback", str(ckpt), "--to-batch", "3", "--into", str(dest)])
    assert result.exit_code == 2
    assert "expected a new or empty directory" in result.stderr
    assert sorted(p.name for p in dest.iterdir()) == ["something"]


def test_into_refuses_a_destination_inside_the_checkpoint(tmp_path: Path) -> None:
    """New-user trial of 2026-11-28: --into CKPT/inner copied the checkpoint into itself, failed ("changed while it
    was copied") and left 135 files behind, which made the next try fail too. Refused before anything is written."""
    ckpt = extract("agg_hdfs", tmp_path / "src")
    before = sorted(p.relative_to(ckpt).as_posix() for p in ckpt.rglob("*"))
    result = CliRunner().invoke(
        app, ["rollback", str(ckpt), "--to-batch", "3", "--into", str(ckpt / "inner"), "--apply", "--idle-seconds", "0"]
    )
    assert result.exit_code == 2, result.output
    assert "expected a destination outside the checkpoint" in result.stderr
    assert sorted(p.relative_to(ckpt).as_posix() for p in ckpt.rglob("*")) == before


# -- checkpoint format v2 (hand-assembled around the Spark 4.3 state files of formats/rocksdb_v2) --
V2_IDS = {  # version -> the unique id of its files in formats/rocksdb_v2/state/0/0
    1: "cf0f4d34-a0bd-4de6-bf4d-2e62756098f3",
    2: "1486179e-364b-43aa-bc30-dd64ab8616da",
    3: "90544653-842a-4d6a-9700-07f5123b6894",
    4: "3daf27e1-0d20-40d0-8d1a-7446a016d667",
}
ROCKS_CONF = (
    '{"spark.sql.streaming.stateStore.providerClass":'
    '"org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",'
    '"spark.sql.shuffle.partitions":"1","spark.sql.streaming.stateStore.compression.codec":"lz4"}'
)


def v2_checkpoint(root: Path) -> Path:
    """Batches 0..3 (commits/b names version b+1's id), state files as Spark 4.3 wrote them."""
    shutil.copytree(FIXTURES / "formats" / "rocksdb_v2", root)
    (root / "metadata").write_bytes(b'{"id":"5a0c0e3e-0000-4000-8000-000000000001"}')
    (root / "offsets").mkdir()
    (root / "commits").mkdir()
    for b in range(4):
        meta = f'{{"batchWatermarkMs":0,"batchTimestampMs":{1795348953438 + b},"conf":{ROCKS_CONF}}}'
        (root / "offsets" / str(b)).write_bytes(f"v1\n{meta}\n{b + 1}".encode())
        ids = json.dumps({"0": [[V2_IDS[b + 1]]]}, separators=(",", ":"))
        (root / "commits" / str(b)).write_bytes(f'v2\n{{"nextBatchWatermarkMs":0,"stateUniqueIds":{ids}}}'.encode())
    old = time.time() - 3600
    for dirpath, _dirs, files in os.walk(root):
        for f in files:
            os.utime(Path(dirpath, f), (old, old))
    return root


def test_checkpoint_format_v2_keeps_the_commit_pointer(tmp_path: Path) -> None:
    ckpt = v2_checkpoint(tmp_path / "ckpt")
    plan = plan_rollback(str(ckpt), 1, "4.3").plan
    store = "state/0/0"
    assert sorted(a.path for a in plan.actions) == sorted(
        ["offsets/2", "offsets/3", "commits/2", "commits/3"]
        + [f"{store}/3_{V2_IDS[3]}.changelog", f"{store}/3_{V2_IDS[3]}.changelog.crc"]
        + [f"{store}/4_{V2_IDS[4]}.changelog", f"{store}/4_{V2_IDS[4]}.changelog.crc"]
    )
    assert any("commits/1 stays as the pointer to state version 2" in n for n in plan.notes)
    # without 2_<id>.zip version 2 still loads: its changelog's lineage starts at version 1
    for f in (f"2_{V2_IDS[2]}.zip", f"2_{V2_IDS[2]}.zip.crc"):
        (ckpt / store / f).unlink()
    assert not plan_rollback(str(ckpt), 1, "4.3").plan.empty
    # without its changelog too, the id commits/1 names resolves to nothing
    for f in (f"2_{V2_IDS[2]}.changelog", f"2_{V2_IDS[2]}.changelog.crc"):
        (ckpt / store / f).unlink()
    with pytest.raises(RollbackRefused, match=r"commits name it as version 2 \[STATE-CHAIN-INCOMPLETE\]"):
        plan_rollback(str(ckpt), 1, "4.3")


# -- S3 -----------------------------------------------------------------------------------------
@pytest.mark.s3
def test_s3_rollback_undo_and_into(tmp_path: Path, s3_bucket: Any) -> None:
    local = extract("agg_hdfs", tmp_path)
    url = s3_bucket.upload_tree(local, "ckpt")
    opts = dict(s3_bucket.storage_options)
    fs = s3_bucket.filesystem()

    def s3_tree(prefix: str) -> dict[str, str]:
        base = f"{s3_bucket.name}/{prefix}/"
        return {
            p[len(base) :]: hashlib.sha256(fs.cat_file(p)).hexdigest()
            for p in fs.find(base)
            if not p[len(base) :].startswith("_ckptfix/")
        }

    before = s3_tree("ckpt")
    assert before == tree(local)
    # uploaded just now: every object is "recent", so liveness is overridden as a user would
    result = plan_rollback(url, 3, "3.5", storage_options=opts, force=True)
    assert sorted(a.path for a in result.plan.actions) == sorted(HDFS_TO_3)
    backup = Location(engine.default_backup_url(url), opts)
    run_id = engine.apply(result.plan, Location(url, opts), backup, force=True)
    assert s3_tree("ckpt") == {p: h for p, h in before.items() if p not in HDFS_TO_3}
    engine.undo(Location(url, opts), backup, run_id, force=True)
    assert s3_tree("ckpt") == before

    into = f"{s3_bucket.url}/copy"
    copied = plan_rollback(url, 3, "3.5", storage_options=opts, force=True, into=into, copy=True)
    assert copied.copied_files == len(before) and copied.checkpoint == into
    engine.apply(copied.plan, Location(into, opts), Location(engine.default_backup_url(into), opts), force=True)
    assert s3_tree("ckpt") == before
    assert s3_tree("copy") == {p: h for p, h in before.items() if p not in HDFS_TO_3}


# -- live: Spark 4.3 restarts the rolled-back checkpoint -----------------------------------------
LIVE_N = 3  # roll back to batch 3: batches 4..7 of the base (one input file each) are undone


def _file_rows(input_dir: Path, index: int) -> list[dict[str, Any]]:
    return [json.loads(line) for line in input_file(input_dir, index).read_text().splitlines() if line.strip()]


def _aggregate(input_dir: Path, files: range) -> dict[str, tuple[int, int]]:
    out: dict[str, tuple[int, int]] = {}
    for i in files:
        for r in _file_rows(input_dir, i):
            c, t = out.get(r["key"], (0, 0))
            out[r["key"]] = (c + 1, t + r["value"])
    return out


def _sink_batches(output: Path) -> dict[int, dict[str, tuple[int, int]]]:
    batches: dict[int, dict[str, tuple[int, int]]] = {}
    for d in output.glob("batch_id=*"):
        rows = batches.setdefault(int(d.name.split("=", 1)[1]), {})
        for part in d.glob("part-*"):
            for line in part.read_text().splitlines():
                if line.strip():
                    r = json.loads(line)
                    assert r["key"] not in rows, f"key {r['key']} twice in {d.name}"
                    rows[r["key"]] = (r["cnt"], r["total"])
    return batches


@pytest.mark.spark
@pytest.mark.parametrize("scenario", ["agg_hdfs", "agg_rocksdb_cl"])
def test_rollback_then_restart_recomputes_exactly(scenario: str, spark: Any, spark_bases: Any, tmp_path: Path) -> None:
    base_files = SCENARIOS[scenario].base_files  # 8: batches 0..7, file i in batch i
    ckpt, input_dir, output = copy_base(spark_bases(scenario), tmp_path / "run")
    result = plan_rollback(str(ckpt), LIVE_N, "4.3", force=True)  # the base was written seconds ago
    assert not result.plan.empty
    engine.apply(result.plan, Location(str(ckpt)), Location(str(tmp_path / "backup")), force=True)
    assert audit(str(ckpt), "4.3").verdict.restarts

    # what the plan's effects tell the operator: the idempotent sink still holds the old batches > N
    for d in output.glob("batch_id=*"):
        if int(d.name.split("=", 1)[1]) > LIVE_N:
            shutil.rmtree(d)

    outcome = restart(spark, scenario, ckpt, input_dir, output, new_files=1)  # adds file 8
    assert outcome.ok, outcome.text
    # the file source resumes from its newest log entry (7) plus the new file: one batch N+1
    # re-reads files N+1..7 (their log entries were kept) and file 8
    assert outcome.batches == [LIVE_N + 1], outcome.batches

    got = _sink_batches(output)
    assert sorted(got) == list(range(LIVE_N + 2))
    for b in range(LIVE_N + 1):  # the batches before the rollback point, untouched
        keys = {r["key"] for r in _file_rows(input_dir, b)}
        want = _aggregate(input_dir, range(b + 1))
        assert got[b] == {k: want[k] for k in keys}, f"batch {b}"
    # batch N+1: every key touched by files N+1..8, with totals over files 0..8 counted once each
    touched = {r["key"] for i in range(LIVE_N + 1, base_files + 1) for r in _file_rows(input_dir, i)}
    want = _aggregate(input_dir, range(base_files + 1))
    assert got[LIVE_N + 1] == {k: want[k] for k in touched}


def test_a_refusal_at_an_async_gap_names_the_way_out(tmp_path: Path) -> None:
    """The async sample (Spark wrote offsets 0..3,5,7,...,29,31 with async progress tracking; commits sparse): a
    rollback to batch 5 or 31 leaves offsets/N-1 missing. The refusal names the batches the logs allow (0 and 1,
    read off the sample's listing by hand) and, for the latest batch, the repair that writes the missing file; the
    first of those rollbacks then plans."""
    ckpt = tmp_path / "ckpt"
    shutil.copytree(Path(__file__).resolve().parents[2] / "samples" / "async-sparse", ckpt)
    for N in (5, 31):
        with pytest.raises(RollbackRefused) as refused:
            plan_rollback(str(ckpt), N, idle_seconds=0)
        assert "the logs allow a rollback to batches 0..1" in str(refused.value), refused.value
        assert ("`ckptfix repair" in str(refused.value)) is (N == 31), refused.value
    assert not plan_rollback(str(ckpt), 1, idle_seconds=0).plan.empty


# -- an edited log file that stays ------------------------------------------------------------
def _hadoop_crc(data: bytes, chunk: int = 512) -> bytes:
    """A Hadoop ``.crc`` sidecar written here from its format (``crc\\0``, bytes per checksum, CRC32 per chunk), not
    by ckptfix."""
    sums = b"".join(zlib.crc32(data[i : i + chunk]).to_bytes(4, "big") for i in range(0, len(data), chunk))
    return b"crc\0" + chunk.to_bytes(4, "big") + sums


def test_an_edited_kept_offset_file_is_refused_or_accepted_with_accept_edits(tmp_path: Path) -> None:
    ckpt = extract("agg_hdfs", tmp_path)
    off = ckpt / "offsets" / "3"
    edited = off.read_bytes().replace(b'"batchTimestampMs":1', b'"batchTimestampMs":2', 1)
    assert edited != off.read_bytes()
    off.write_bytes(edited)  # an edit by hand after Spark wrote it: offsets/.3.crc no longer matches
    line = _refusal(ckpt, 3, "--idle-seconds", "0")
    assert "[LOG-CRC-MISMATCH]" in line and "--accept-edits" in line
    before = tree(ckpt)
    done = CliRunner().invoke(
        app,
        ["rollback", str(ckpt), "--to-batch", "3", "--target-spark", "3.5", "--apply", "--accept-edits", "--force"],
    )
    assert done.exit_code == 0, done.output
    assert "--accept-edits: Spark uses the edited offsets/3" in done.stdout
    assert (ckpt / "offsets" / ".3.crc").read_bytes() == _hadoop_crc(edited)
    assert off.read_bytes() == edited and not (ckpt / "offsets" / "4").exists()
    report = audit(str(ckpt), "3.5")
    assert report.verdict.restarts and not [f.rule_id for f in report.findings if f.severity != "info"]
    assert CliRunner().invoke(app, ["undo", str(ckpt), "--force"]).exit_code == 0
    assert tree(ckpt) == before


def test_without_sink_the_plan_says_an_exactly_once_sink_is_not_checked(tmp_path: Path) -> None:
    """New-user trial: the rollback said a sink "overwrites" reused batch ids, where docs/repair.md says a file
    sink and a Delta table skip them. Without --sink that is not checked, and the plan says so."""
    ckpt = extract("filesink", tmp_path)
    plan = plan_rollback(str(ckpt), 4, "3.5", force=True).plan
    text = " | ".join(plan.effects)
    assert "NOT CHECKED without --sink: an exactly-once sink" in text and "batches 5..6 skips those ids" in text, text
    assert "are overwritten" not in text


def test_a_sidecar_left_by_a_log_file_deleted_by_hand_goes_too(tmp_path: Path) -> None:
    """New-user trial: offsets/7 deleted by hand, its .7.crc left; the STATE-AHEAD fix named `rollback --to-batch 6`,
    which refused for the orphan sidecar it kept (LOG-CRC-ORPHAN). The rollback deletes it with the batch's files."""
    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "spark-4.3.0" / "agg_hdfs.tar.gz"
    with tarfile.open(fixture) as tar:
        tar.extractall(tmp_path, filter="data")
    ckpt = tmp_path / "ckpt"
    (ckpt / "offsets" / "7").unlink()
    assert (ckpt / "offsets" / ".7.crc").exists()
    result = plan_rollback(str(ckpt), 6, "4.3")
    deleted = {a.path for a in result.plan.actions if a.op == "delete"}
    assert {"offsets/.7.crc", "commits/7", "commits/.7.crc"} <= deleted, deleted
    engine.apply(result.plan, Location(str(ckpt)), Location(str(tmp_path / "backup")), force=True)
    assert not [f for f in audit(str(ckpt)).findings if f.rule_id == "LOG-CRC-ORPHAN"]
