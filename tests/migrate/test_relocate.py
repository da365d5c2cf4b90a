"""``ckptfix migrate relocate`` on a real Spark 4.2.1 checkpoint (RocksDB + changelog aggregation over a file
source; tests/fixtures/spark-4.2.1/agg_rocksdb_cl.tar.gz, written by tests/fixtures/generate_spark35.py's 4.x
sibling run): local, S3 (moto) both ways, refusals, crash + resume. The live proof that Spark restarts a
relocated checkpoint is in test_relocate_live.py.

The fixture's file-source log names its input as it was when Spark wrote it
(``file:///tmp/ckptfix-spark-4.2.1-gen/base/agg_rocksdb_cl/input/part-000N.json``), so ``--input-from`` that
directory is a real "the input moved" case.
"""

from __future__ import annotations

import hashlib
import json
import os
import tarfile
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ckptfix.audit import audit
from ckptfix.cli.main import app
from ckptfix.formats import compactlog, hadoopcrc
from ckptfix.migrate.relocate import MARKER, RelocateRefused, apply_relocation, plan_relocation

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "spark-4.2.1" / "agg_rocksdb_cl.tar.gz"
OLD_INPUT = "/tmp/ckptfix-spark-4.2.1-gen/base/agg_rocksdb_cl/input"


@pytest.fixture
def src(tmp_path: Path) -> Path:
    with tarfile.open(FIXTURE) as tar:
        tar.extractall(tmp_path / "fixture", filter="data")
    ckpt = tmp_path / "fixture" / "ckpt"
    old = 1_700_000_000  # extracted files keep the tar's mtimes (old): the query looks idle
    for p in ckpt.rglob("*"):
        os.utime(p, (old, old))
    return ckpt


def tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def digest(root: Path) -> dict[str, tuple[str, float]]:
    return {
        p.relative_to(root).as_posix(): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime)
        for p in root.rglob("*")
        if p.is_file()
    }


def cli(*args: str) -> Any:
    return CliRunner().invoke(app, ["migrate", "relocate", *args])


def source_log_paths(files: dict[str, bytes]) -> list[str]:
    return [
        e["path"]
        for rel, data in sorted(files.items())
        if rel.startswith("sources/0/") and not rel.split("/")[-1].startswith(".")
        for e in compactlog.parse(data).entries
    ]


def check_hadoop_sidecars(files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        d, name = os.path.split(rel)
        if name.startswith(".") and name.endswith(".crc"):
            covered = os.path.join(d, name[1:-4])
            assert hadoopcrc.first_mismatch(hadoopcrc.parse(data), files[covered]) is None, rel


def test_dry_run_shows_the_plan_and_writes_nothing(src: Path, tmp_path: Path) -> None:
    dest = tmp_path / "dest"
    result = cli(str(src), str(dest), "--input-from", OLD_INPUT, "--input-to", str(tmp_path / "in"))
    assert result.exit_code == 0, result.output
    assert "rewrite sources/0/0: file-source log of source 0: input moved" in result.output
    assert f"file:///{str(tmp_path / 'in').lstrip('/')}/part-0000.json" in result.output
    assert not dest.exists()
    doc = json.loads(cli(str(src), str(dest), "-f", "json").stdout)["relocation"]
    assert doc["applied"] is False and doc["plan"]["files"] == len(tree(src))
    assert doc["plan"]["rewrites"] == []  # no transformWithState, no --input-from: a plain copy
    assert not dest.exists()


def test_local_relocation_with_input_rewrite(src: Path, tmp_path: Path) -> None:
    before = digest(src)
    dest, new_in = tmp_path / "dest" / "ckpt", tmp_path / "moved-input"
    result = cli(str(src), str(dest), "--apply", "--input-from", OLD_INPUT, "--input-to", str(new_in), "-f", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)["relocation"]
    old_files, new_files = tree(src), tree(dest)
    assert digest(src) == before  # the source is only read
    assert set(new_files) == set(old_files)
    logs = {f"sources/0/{i}" for i in range(8)}
    sidecars = {f"sources/0/.{i}.crc" for i in range(8)}
    assert {r["path"] for r in doc["plan"]["rewrites"]} == logs | sidecars
    assert doc["files_rewritten"] == 16 and doc["files_copied"] == len(old_files) - 16
    for rel in set(old_files) - logs - sidecars:
        assert new_files[rel] == old_files[rel], rel  # byte for byte
    want = [f"file://{new_in}/part-{i:04d}.json" for i in range(8)]
    assert source_log_paths(new_files) == want
    assert source_log_paths(old_files) == [f"file://{OLD_INPUT}/part-{i:04d}.json" for i in range(8)]
    for rel in logs:  # only the path changed: timestamps and batch ids stay
        old_e, new_e = compactlog.parse(old_files[rel]).entries, compactlog.parse(new_files[rel]).entries
        assert [{**e, "path": None} for e in old_e] == [{**e, "path": None} for e in new_e]
    check_hadoop_sidecars(new_files)
    assert not (dest / MARKER).exists()
    report = audit(str(dest))
    assert report.verdict.restarts, report.verdict.headline
    assert sorted(f.rule_id for f in report.findings) == sorted(f.rule_id for f in audit(str(src)).findings)


@pytest.mark.s3
def test_s3_round_trip(src: Path, tmp_path: Path, s3_bucket: Any) -> None:
    opts = s3_bucket.storage_options
    there = f"{s3_bucket.url}/moved/ckpt"
    plan = plan_relocation(str(src), there, dest_options=opts, input_from=OLD_INPUT, input_to="s3a://data/in")
    result = apply_relocation(plan, dest_options=opts, chunk_size=1000)  # small chunks: multi-piece uploads
    assert result.files_copied + result.files_rewritten == len(tree(src))
    report = audit(there, storage_options=opts)
    assert report.verdict.restarts, report.verdict.headline
    back = tmp_path / "back"
    plan2 = plan_relocation(there, str(back), source_options=opts, dest_options={}, force=True)
    assert plan2.rewrites == {}  # nothing in the S3 copy names its own location
    apply_relocation(plan2, source_options=opts, dest_options={}, chunk_size=1000)
    old_files, new_files = tree(src), tree(back)
    assert set(new_files) == set(old_files)
    changed = {rel for rel in old_files if old_files[rel] != new_files[rel]}
    assert changed == {f"sources/0/{i}" for i in range(8)} | {f"sources/0/.{i}.crc" for i in range(8)}
    assert source_log_paths(new_files) == [f"s3a://data/in/part-{i:04d}.json" for i in range(8)]
    check_hadoop_sidecars(new_files)


@pytest.mark.s3
def test_s3_to_s3_is_refused_when_dest_inside_source(src: Path, s3_bucket: Any) -> None:
    there = s3_bucket.upload_tree(src, "a/ckpt")
    with pytest.raises(RelocateRefused, match="expected a destination outside the source .*, found it inside"):
        plan_relocation(there, there.replace("s3://", "s3a://") + "/sub", source_options=s3_bucket.storage_options)


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_refusals_say_why_exit_2_and_write_nothing(src: Path, tmp_path: Path, fmt: str) -> None:
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "x").write_text("x")
    empty = tmp_path / "empty"
    empty.mkdir()
    cases = {
        "non-empty dest": ([str(src), str(busy)], "expected a new or empty directory, found 1 files"),
        "missing source": ([str(tmp_path / "nope"), str(tmp_path / "d1")], "no such file or directory"),
        "not a checkpoint": ([str(empty), str(tmp_path / "d2")], "expected a Structured Streaming checkpoint"),
        "dest inside source": ([str(src), str(src / "sub")], "found it inside"),
        "half an input move": ([str(src), str(tmp_path / "d3"), "--input-from", "/x"], "expected both or neither"),
        "input not in the log": (
            [str(src), str(tmp_path / "d4"), "--input-from", "/elsewhere", "--input-to", "/y"],
            f"found e.g. file://{OLD_INPUT}/part-0000.json",
        ),
    }
    for name, (args, text) in cases.items():
        result = cli(*args, "--apply", "-f", fmt)
        assert result.exit_code == 2, (name, result.output)
        if fmt == "json":
            error = json.loads(result.stdout)["error"]
            assert text in error["message"], (name, error)
        else:
            lines = [ln for ln in result.output.splitlines() if ln.strip()]
            assert len(lines) == 1 and lines[0].startswith("ckptfix: error: ") and text in lines[0], (name, lines)
    assert not any((tmp_path / d).exists() for d in ("d1", "d2", "d3", "d4"))
    assert list(busy.iterdir()) == [busy / "x"] and not (src / "sub").exists()


def test_live_query_is_refused_unless_forced(src: Path, tmp_path: Path) -> None:
    (src / "commits" / "7").touch()  # a write just now: the query may be running
    result = cli(str(src), str(tmp_path / "d"), "--apply")
    assert result.exit_code == 2
    assert "commits/7: expected no write in the last 120 s" in result.output and "query running" in result.output
    assert not (tmp_path / "d").exists()
    assert cli(str(src), str(tmp_path / "d"), "--apply", "--force").exit_code == 0
    assert tree(tmp_path / "d") == tree(src)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads everything: no permission error to provoke")
def test_unreadable_source_is_refused(src: Path, tmp_path: Path) -> None:
    (src / "state").chmod(0)
    try:
        result = cli(str(src), str(tmp_path / "d"), "--apply")
    finally:
        (src / "state").chmod(0o755)
    assert result.exit_code == 2 and "permission denied" in result.output
    assert not (tmp_path / "d").exists()


def test_interrupted_relocation_is_not_a_checkpoint_and_resumes(src: Path, tmp_path: Path) -> None:
    dest, clean = tmp_path / "dest", tmp_path / "clean"
    args = ("--input-from", OLD_INPUT, "--input-to", "/new/in")
    plan = plan_relocation(str(src), str(dest), input_from=OLD_INPUT, input_to="/new/in")
    with pytest.raises(OSError, match="injected failure after 40 files"):
        apply_relocation(plan, _fail_after=40)
    assert (dest / MARKER).exists() and not (dest / "metadata").exists()
    assert len(tree(dest)) == 41  # 40 files + the marker
    # another SRC may not be relocated into the partial DEST
    other = tmp_path / "other"
    other.mkdir()
    (other / "metadata").write_text('{"id":"x"}')
    assert cli(str(other), str(dest), "--apply").exit_code == 2
    shown = cli(str(src), str(dest), *args)
    assert shown.exit_code == 0 and "resuming an interrupted relocation" in shown.output
    done = cli(str(src), str(dest), "--apply", *args, "-f", "json")
    assert done.exit_code == 0, done.output
    doc = json.loads(done.stdout)["relocation"]
    assert doc["files_already_there"] == 40
    assert cli(str(src), str(clean), "--apply", *args).exit_code == 0
    assert tree(dest) == tree(clean)  # the resumed DEST is exactly a clean relocation
    assert not (dest / MARKER).exists()


def test_chunked_copy_helpers_of_storage(tmp_path: Path) -> None:
    from ckptfix.storage import Location

    data = bytes(range(256)) * 40  # 10,240 bytes
    loc = Location(str(tmp_path / "a"))
    loc.write_atomic("f", data)
    pieces = list(loc.iter_chunks("f", 3000))
    assert [len(p) for p in pieces] == [3000, 3000, 3000, 1240] and b"".join(pieces) == data
    for dest in (Location(str(tmp_path / "b")), Location("memory://ckptfix-relocate-test/b")):
        assert dest.create_exclusive_chunks("x/y", loc.iter_chunks("f", 3000)) == len(data)
        assert dest.read("x/y") == data
        assert dest.create_exclusive_chunks("one", iter([b"abc"])) == 3 and dest.read("one") == b"abc"
        with pytest.raises(FileExistsError, match="expected no file, found one"):
            dest.create_exclusive_chunks("x/y", loc.iter_chunks("f", 3000))
        assert dest.read("x/y") == data
        # an error of the source stays the source's error (and names the source), nothing is left behind
        with pytest.raises(FileNotFoundError, match=r"/a/missing: no such file"):
            dest.create_exclusive_chunks("z", loc.iter_chunks("missing", 3000))
        assert not dest.exists("z")
    assert [p.name for p in (tmp_path / "b" / "x").iterdir()] == ["y"]  # no temp files left


@pytest.mark.s3
def test_s3_bucket_to_bucket(src: Path, s3_bucket: Any) -> None:
    """One S3 store, two buckets: every object arrives byte for byte and the copy audits as restartable."""
    opts = s3_bucket.storage_options
    there = s3_bucket.upload_tree(src, "a/ckpt")
    other = f"{s3_bucket.name}-other"
    s3_bucket.filesystem().mkdir(other)  # force below: the objects were just uploaded, they look alive
    plan = plan_relocation(there, f"s3://{other}/q1", source_options=opts, dest_options=opts, force=True)
    assert plan.rewrites == {}  # an aggregation over a file source that did not move: nothing names a location
    apply_relocation(plan, source_options=opts, dest_options=opts)
    fs = s3_bucket.filesystem()
    copied = {k[len(f"{other}/q1/") :]: fs.cat_file(k) for k in fs.find(f"{other}/q1")}
    assert copied == tree(src)
    report = audit(f"s3://{other}/q1", storage_options=opts)
    assert report.verdict.restarts, report.verdict.headline


def test_the_cli_refuses_a_memory_destination() -> None:
    """New-user trial: `migrate relocate SRC memory://x/y --apply` printed "done ... restart the query with
    checkpointLocation=memory://x/y", and the copy vanished with the process."""
    sample = Path(__file__).resolve().parents[2] / "samples" / "rocksdb-changelog"
    result = CliRunner().invoke(app, ["migrate", "relocate", str(sample), "memory://x/y", "--apply"])
    assert result.exit_code == 2
    assert "DEST memory://x/y: expected a store that outlives this command, found memory://" in result.stderr


def test_a_relocation_to_s3_names_s3a_for_open_source_spark(tmp_path: Path) -> None:
    """New-user trial 3: after `migrate relocate ... s3://bucket/x --apply` the command said "restart the query with
    checkpointLocation=s3://bucket/x", a scheme open-source Spark has no file system for. A DEST given as s3://
    gets a note to give it as s3a:// (the rewritten paths name the scheme given)."""
    from io import StringIO

    from rich.console import Console

    from ckptfix.migrate.relocate import plan_relocation
    from ckptfix.render import text

    sample = Path(__file__).resolve().parents[2] / "samples" / "rocksdb-changelog"
    doc = {"plan": plan_relocation(str(sample), str(tmp_path / "dest"), idle_seconds=0).to_json()}

    def shown(dest_uri: str) -> str:
        buf = StringIO()
        text.relocation({"plan": {**doc["plan"], "dest_uri": dest_uri}}, False, Console(file=buf, width=200))
        return buf.getvalue()

    assert "open-source Spark reads S3 as s3a://" in shown("s3://bucket/x")
    assert "s3a://" not in shown("s3a://bucket/x").replace("s3a://bucket/x", "") and "note" not in shown("file:/x")
