"""state ls / read / changes from the command line: every output format, and bad input as
one line naming the file and the byte offset, exit 2, never a row from a damaged file."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ckptfix.cli.main import app
from ckptfix.formats import codec, statefile
from ckptfix.formats.statefile import Record
from tests.state.test_read_fixtures import FIXTURES

HDFS = str(FIXTURES / "hdfs")
runner = CliRunner()


def run(*args: str):  # type: ignore[no-untyped-def]
    return runner.invoke(app, list(args))


def test_ls_text_and_json() -> None:
    text = run("state", "ls", HDFS, "--verify")
    assert text.exit_code == 0, text.output
    assert "partition 0: loadable 1-4; version 4: 4.snapshot" in text.stdout
    assert "by name" not in text.stdout
    doc = json.loads(run("state", "ls", HDFS, "-f", "json").stdout)
    part = doc["operators"][0]["partitions"][0]
    assert (part["loadable"], part["ok"], doc["verified"]) == ("1-4", True, False)


def test_ls_without_verify_says_it_judged_by_names(tmp_path: Path) -> None:
    """A new user truncated a zip and `state ls` still called its version loadable: without --verify it looks at
    names only, and says so; --verify reads the file and unloads the version."""
    ckpt = tmp_path / "ck"
    shutil.copytree(FIXTURES / "hdfs", ckpt)
    snap = ckpt / "state/0/0/4.snapshot"
    snap.write_bytes(snap.read_bytes()[:20])
    quick = run("state", "ls", str(ckpt))
    assert "loadable 1-4" in quick.stdout and "(by name); --verify reads and checks them" in quick.stdout
    checked = run("state", "ls", str(ckpt), "--verify")
    assert "CANNOT LOAD" in checked.stdout and "by name" not in checked.stdout


def test_read_jsonl_csv_parquet(tmp_path: Path) -> None:
    jsonl = run("state", "read", HDFS, "--version", "3")
    assert jsonl.exit_code == 0
    rows = [json.loads(line) for line in jsonl.stdout.splitlines()]
    assert sorted((r["key"]["k"], r["value"]["count"]) for r in rows) == [("k1", 2), ("k2", 1), ("k7", 5)]
    assert "version 3 (state after batch 2)" in jsonl.stderr
    csv = run("state", "read", HDFS, "--batch", "2", "-f", "csv")
    assert csv.stdout.splitlines()[0] == "key.k,value.count,partition_id"
    assert sorted(csv.stdout.splitlines()[1:]) == ["k1,2,0", "k2,1,0", "k7,5,0"]
    out = tmp_path / "s.parquet"
    pq = run("state", "read", HDFS, "--version", "3", "-f", "parquet", "--out", str(out))
    assert pq.exit_code == 0, pq.output
    import pyarrow.parquet as parquet

    table = parquet.read_table(out).to_pylist()
    assert sorted((r["key"]["k"], r["value"]["count"]) for r in table) == [("k1", 2), ("k2", 1), ("k7", 5)]


@pytest.mark.parametrize("command", [["read", "--version", "3"], ["changes", "--from", "3", "--to", "3"]])
def test_out_without_format_takes_the_extensions_format(command: list[str], tmp_path: Path) -> None:
    import pyarrow.parquet as parquet

    res = run("state", command[0], HDFS, *command[1:], "--out", str(tmp_path / "s.parquet"))
    assert res.exit_code == 0, res.output
    assert (tmp_path / "s.parquet").read_bytes()[:4] == b"PAR1"
    assert parquet.read_table(tmp_path / "s.parquet").num_rows > 0
    res = run("state", command[0], HDFS, *command[1:], "--out", str(tmp_path / "s.CSV"))
    assert res.exit_code == 0, res.output
    assert "key.k," in (tmp_path / "s.CSV").read_text().splitlines()[0]
    for name in ("s.jsonl", "s.json", "s.txt"):  # JSON lines: named so, Spark's .json, and the default
        res = run("state", command[0], HDFS, *command[1:], "--out", str(tmp_path / name))
        assert res.exit_code == 0, res.output
        lines = (tmp_path / name).read_text().splitlines()
        assert lines and all(isinstance(json.loads(line), dict) for line in lines)


@pytest.mark.parametrize("command", [["read", "--version", "3"], ["changes", "--from", "3", "--to", "3"]])
def test_a_format_that_contradicts_the_out_extension_is_refused(command: list[str], tmp_path: Path) -> None:
    out = tmp_path / "s.parquet"
    res = run("state", command[0], HDFS, *command[1:], "-f", "csv", "--out", str(out))
    assert res.exit_code == 2
    assert res.stderr.strip() == (
        f"ckptfix: error: --format csv: expected parquet for --out {out}, found csv (change --format or the file name)"
    )
    assert not out.exists() and list(tmp_path.iterdir()) == []
    res = run("state", command[0], HDFS, *command[1:], "-f", "parquet", "--out", str(tmp_path / "s.json"))
    assert res.exit_code == 2 and "expected jsonl or json for --out" in res.stderr
    res = run("state", command[0], HDFS, *command[1:], "-f", "json", "--out", str(tmp_path / "s.csv"))
    assert res.exit_code == 2 and json.loads(res.stdout)["error"]["kind"] == "UsageError"
    res = run("state", command[0], HDFS, *command[1:], "-f", "json", "--out", str(tmp_path / "s.json"))
    assert res.exit_code == 0 and "columns" in json.loads((tmp_path / "s.json").read_text())


def test_changes() -> None:
    res = run("state", "changes", HDFS, "--from", "3", "--to", "3")
    assert [json.loads(x)["key"]["k"] for x in res.stdout.splitlines()] == ["k3", "k7"]


def test_ddl_schemas_for_a_store_without_schema_file() -> None:
    res = run(
        "state",
        "read",
        str(FIXTURES / "rocksdb"),
        "--version",
        "2",
        "--key-schema",
        "k STRING",
        "--value-schema",
        "count BIGINT",
    )
    assert res.exit_code == 0, res.output
    assert len(res.stdout.splitlines()) == 3
    missing = run("state", "read", str(FIXTURES / "rocksdb"), "--version", "2")
    assert missing.exit_code == 2 and "_metadata/schema" in missing.stderr and "--key-schema" in missing.stderr


def damaged(tmp_path: Path, name: str, content: bytes) -> str:
    ckpt = tmp_path / "c"
    shutil.copytree(FIXTURES / "hdfs", ckpt)
    (ckpt / "state/0/0" / name).write_bytes(content)
    return str(ckpt)


def one_line_error(res, *needles: str) -> str:  # type: ignore[no-untyped-def]
    """Row formats: stdout carries rows only, the error is one line on stderr (docs/output.md)."""
    assert res.exit_code == 2, res.output
    assert res.stdout == "", "no row may come out of a damaged file (files are checked before any row)"
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ckptfix: error: "), res.stderr
    for needle in needles:
        assert needle in lines[0]
    return str(lines[0])


def test_bad_lz4_checksum(tmp_path: Path) -> None:
    data = bytearray((FIXTURES / "hdfs/state/0/0/3.delta").read_bytes())
    data[30] ^= 0xFF
    ckpt = damaged(tmp_path, "3.delta", bytes(data))
    line = one_line_error(run("state", "read", ckpt, "--version", "3"), "3.delta", "at byte 17")
    assert "state rebuild" not in line  # rebuild refuses a damaged delta: no hint that sends the user there


def flipped_snapshot(tmp_path: Path) -> str:
    """The hdfs fixture (1..4.delta, 2.snapshot, 4.snapshot) with 4.snapshot's LZ4 block checksum broken."""
    data = bytearray((FIXTURES / "hdfs/state/0/0/4.snapshot").read_bytes())
    data[40] ^= 0xFF
    return damaged(tmp_path, "4.snapshot", bytes(data))


def test_a_corrupt_snapshot_names_the_rebuild_that_reads_past_it(tmp_path: Path) -> None:
    ckpt = flipped_snapshot(tmp_path)
    command = f"ckptfix state rebuild {ckpt} --version 4 --operator 0 --partition 0"
    line = one_line_error(run("state", "read", ckpt, "--version", "4"), "4.snapshot: at byte 21: expected an LZ4")
    assert f"; `{command}` writes a new snapshot of version 4 from 2.snapshot + deltas 3..4; " in line, line
    assert line.endswith(" --from-snapshot 1` reads the version from there without writing anything"), line
    rebuilt = run(*command.split()[1:], "--apply", "--idle-seconds", "0")
    assert rebuilt.exit_code == 0, rebuilt.output
    rows = [json.loads(x) for x in run("state", "read", ckpt, "--version", "4").stdout.splitlines()]
    assert sorted((r["key"]["k"], r["value"]["count"]) for r in rows) == [("k1", 2), ("k2", 1), ("k3", 1), ("k7", 6)]


def test_no_rebuild_hint_where_rebuild_cannot_help(tmp_path: Path) -> None:
    ckpt = flipped_snapshot(tmp_path)
    # the snapshot asked for by name: the error is about the user's choice
    asked = one_line_error(run("state", "read", ckpt, "--version", "4", "--from-snapshot", "3"), "4.snapshot")
    assert "state rebuild" not in asked
    # no other way to version 4: 2.snapshot + deltas 3..4 lacks 3.delta
    (Path(ckpt) / "state/0/0/3.delta").unlink()
    alone = one_line_error(run("state", "read", ckpt, "--version", "4"), "4.snapshot")
    assert "state rebuild" not in alone


def test_truncated_record(tmp_path: Path) -> None:
    raw = codec.decompress("lz4", (FIXTURES / "hdfs/state/0/0/3.delta").read_bytes())
    ckpt = damaged(tmp_path, "3.delta", codec.compress("lz4", raw[:-9]))
    one_line_error(run("state", "read", ckpt, "--version", "3"), "3.delta", "expected")


def test_unsafe_row_offset_out_of_bounds(tmp_path: Path) -> None:
    # a key row whose string slot points past the row (offset 64, size 8 in a 24-byte row)
    key = bytes(8) + struct.pack("<q", (64 << 32) | 8) + b"k9\x00\x00\x00\x00\x00\x00"
    value = bytes(8) + struct.pack("<q", 1)
    ckpt = damaged(tmp_path, "3.delta", codec.compress("lz4", statefile.dump_delta([Record(key, value)])))
    # the delta's record starts at byte 0: its key at 4, the string slot at 4 + 8
    one_line_error(run("state", "read", ckpt, "--version", "3"), "3.delta", "at byte 12")
    as_json = run("state", "read", ckpt, "--version", "3", "-f", "json")  # -f json: the error document on stdout
    assert as_json.exit_code == 2 and json.loads(as_json.stdout)["error"]["kind"] == "FormatError"
    assert "at byte 12" in json.loads(as_json.stdout)["error"]["message"]
    # rows are decoded as they stream: --out writes all or nothing
    out = tmp_path / "rows.jsonl"
    res = run("state", "read", ckpt, "--version", "2", "--out", str(out))  # version 2 does not need 3.delta
    assert res.exit_code == 0 and len(out.read_text().splitlines()) == 3
    res = run("state", "read", ckpt, "--version", "3", "--out", str(out))
    assert res.exit_code == 2 and out.read_text().count("\n") == 3  # the old file, untouched


def test_wrong_path_and_bad_options(tmp_path: Path) -> None:
    res = run("state", "read", str(tmp_path / "nope"))
    assert res.exit_code == 2 and "nope" in res.stderr
    both = run("state", "read", HDFS, "--batch", "1", "--version", "2")
    assert both.exit_code == 2 and "not both" in both.stderr


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_errors_in_other_formats_are_plain_lines(tmp_path: Path, fmt: str) -> None:
    out = tmp_path / "x"
    res = run("state", "read", str(tmp_path / "nope"), "-f", fmt, "--out", str(out))
    assert res.exit_code == 2 and res.stderr.startswith("ckptfix: error: ")
    assert not out.exists() and not Path(f"{out}.partial").exists()


def test_ls_names_the_missing_file_of_each_unloadable_range(tmp_path: Path) -> None:
    ckpt = tmp_path / "c"
    shutil.copytree(FIXTURES / "hdfs", ckpt)
    (ckpt / "state/0/0/1.delta").unlink()
    (ckpt / "state/0/0/3.delta").unlink()
    res = run("state", "ls", str(ckpt))
    assert res.exit_code == 0, res.output  # the latest version still loads (4.snapshot)
    assert "loadable 2,4;" in res.stdout
    # version 1 has no file left, as after Spark's retention cleanup: listed apart, not as damage
    older = "version 1: no files (cleaned up by Spark's retention or a ckptfix migration, or the partition is newer)"
    assert older in res.stdout
    assert "version 3 cannot load: state/0/0/3.delta is missing" in res.stdout
    doc = json.loads(run("state", "ls", str(ckpt), "-f", "json").stdout)
    part = doc["operators"][0]["partitions"][0]
    assert (part["unloadable"], part["older"]) == ({"3": "state/0/0/3.delta"}, "1")


def test_a_missing_file_is_named_by_its_path_without_a_byte_offset(tmp_path: Path) -> None:
    ckpt = tmp_path / "c"
    shutil.copytree(FIXTURES / "hdfs", ckpt)
    (ckpt / "state/0/0/3.delta").unlink()
    res = run("state", "read", str(ckpt), "--version", "3")
    assert res.exit_code == 2
    assert res.stderr == (
        f"ckptfix: error: {ckpt}/state/0/0/3.delta: expected a file (version 3 = 2.snapshot + deltas 3..3), "
        "found none\n"
    )
    res = run("state", "changes", str(ckpt), "--from", "2", "--to", "2")
    assert res.exit_code == 2
    assert (
        res.stderr
        == f"ckptfix: error: {ckpt}/state/0/0/3.delta: expected a file (the change feed of batch 2), found none\n"
    )


def test_no_commits_names_the_directory_and_the_way_round_it(tmp_path: Path) -> None:
    """No committed batch: the commit log is named without a byte offset (it is a directory; new-user trial: "at
    byte 0"), with --version as the way to read the state files all the same."""
    ckpt = tmp_path / "c"
    shutil.copytree(FIXTURES / "hdfs", ckpt)
    shutil.rmtree(ckpt / "commits", ignore_errors=True)  # the fixture may hold state files only
    res = run("state", "read", str(ckpt))
    assert res.exit_code == 2
    assert res.stderr == (
        f"ckptfix: error: {ckpt}/commits: expected a committed batch to read the state of, found none (--version N "
        "reads a version the state files hold all the same)\n"
    )
    assert run("state", "read", str(ckpt), "--version", "2").exit_code == 0


def test_a_missing_zip_of_a_store_without_changelogs_is_the_zip(tmp_path: Path) -> None:
    """RocksDB without changelog checkpointing: version 3 existed only as 3.zip, never as 3.changelog."""
    import tarfile

    with tarfile.open(FIXTURES.parents[0] / "matrix" / "4.3.0" / "agg_rocksdb.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    ckpt = tmp_path / "ckpt"
    assert not list((ckpt / "state").rglob("*.changelog"))
    (ckpt / "state/0/1/3.zip").unlink()
    res = run("state", "read", str(ckpt))
    assert res.exit_code == 2
    assert res.stderr.startswith(
        f"ckptfix: error: {ckpt}/state/0/1/3.zip: expected a file (version 3: without changelog checkpointing only "
        "3.zip holds it; the newest zip before it is 2.zip), found none; the other partitions (0) can be read"
    ), res.stderr
    doc = json.loads(run("state", "ls", str(ckpt), "-f", "json").stdout)
    part = doc["operators"][0]["partitions"][1]
    assert part["ok"] is False and part["problem"].startswith(f"{ckpt}/state/0/1/3.zip: expected a file")


def test_a_bug_is_one_line_not_a_traceback(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The crash handler of the entry point: a stand-in bug (the only patched function in this
    suite; it tests what main() does with an exception nobody expected)."""
    import ckptfix.state.inventory as inventory
    from ckptfix.cli.main import main

    def bug(*args: object, **kwargs: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(inventory, "list_state", bug)
    monkeypatch.delenv("CKPTFIX_DEBUG", raising=False)
    with pytest.raises(SystemExit) as exit_info:
        main(["state", "ls", HDFS])
    assert exit_info.value.code == 3
    err = capsys.readouterr().err
    assert (
        err.strip()
        == "ckptfix: internal error (RuntimeError: boom); please report it, CKPTFIX_DEBUG=1 shows the traceback"
    )
    with pytest.raises(SystemExit):
        main(["state", "ls", HDFS, "-f", "json"])
    assert json.loads(capsys.readouterr().out)["error"]["kind"] == "InternalError"


def test_out_that_cannot_be_written_is_one_line_naming_out(tmp_path: Path) -> None:
    for out, said in (
        (tmp_path / "no" / "such" / "x.csv", "expected an existing directory to write into"),
        (tmp_path, "expected a file name, found a directory"),
    ):
        res = run("state", "read", HDFS, "--version", "4", "-f", "csv", "--out", str(out))
        assert res.exit_code == 2, res.output
        assert res.stderr == f"ckptfix: error: --out {out}: {said}" + res.stderr.split(said, 1)[1], res.stderr
        assert res.stderr.count("\n") == 1 and ".partial" not in res.stderr


def test_a_missing_plan_file_is_named_first() -> None:
    res = run("apply", "/nonexistent/plan.json")
    assert res.exit_code == 2 and res.stderr == (
        "ckptfix: error: /nonexistent/plan.json: expected a plan file (written by `ckptfix repair --plan-out`), "
        "found no such file\n"
    )


def test_a_missing_sst_names_the_audit_that_decides_the_repair(tmp_path: Path) -> None:
    """samples/rocksdb-changelog with the SST of partition 0's 12.zip deleted: the read stopped at it with nothing
    after (a new user's trial); the audit says whether `repair` writes the version again (here it can: 9.zip and
    the changelogs after it are there)."""
    ckpt = tmp_path / "ckpt"
    shutil.copytree(Path(__file__).resolve().parents[2] / "samples" / "rocksdb-changelog", ckpt)
    sst = "000012-13ff46f1-a2d6-457b-85f4-0b6ba223f1e6.sst"
    (ckpt / "state/0/0/SSTs" / sst).unlink()
    line = one_line_error(run("state", "read", str(ckpt)), sst)
    assert f"`ckptfix audit {ckpt}` says whether `ckptfix repair` can write version 12 again" in line, line


def test_a_missing_from_snapshot_names_the_ones_there() -> None:
    """New-user trial: `--from-snapshot 4` answered only "5.zip: expected a file"; the batch ids that have a
    snapshot after them (samples/rocksdb-changelog: zips 3, 6, 9, 12) are named."""
    sample = Path(__file__).resolve().parents[2] / "samples" / "rocksdb-changelog"
    res = run("state", "read", str(sample), "--from-snapshot", "4")
    assert res.exit_code == 2
    said = "has snapshots of versions 3, 6, 9, 12 (of batches 2, 5, 8, 11, the values --from-snapshot takes)"
    assert said in res.stderr, res.stderr


def test_out_through_a_symlink_writes_its_target_and_keeps_the_link(tmp_path: Path) -> None:
    """--out renames a finished temp file over a regular file; a symbolic link is followed first, so the link stays a
    link (a new user's --out into a linked folder replaced the link with a regular file)."""
    target = tmp_path / "target.jsonl"
    target.write_text("old\n")
    link = tmp_path / "link.jsonl"
    link.symlink_to(target)
    res = run("state", "read", HDFS, "--version", "2", "--out", str(link))
    assert res.exit_code == 0, res.stderr
    assert link.is_symlink() and link.resolve() == target
    rows = [json.loads(line) for line in target.read_text().splitlines()]
    assert rows and "old" not in target.read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.jsonl", "target.jsonl"]


def test_out_to_a_fifo_streams_into_it(tmp_path: Path) -> None:
    """A FIFO (or /dev/stdout) is written in place: renaming over it would replace it with a regular file and the
    reader at its other end would get nothing."""
    import os
    import threading

    fifo = tmp_path / "rows.fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    res = run("state", "read", HDFS, "--version", "2", "--out", str(fifo))
    reader.join(30)
    assert res.exit_code == 0, res.stderr
    assert fifo.is_fifo()
    lines = got[0].decode().splitlines()
    assert lines and all(json.loads(line) for line in lines)
    assert len(lines) == len(run("state", "read", HDFS, "--version", "2").stdout.splitlines())


def test_out_to_a_full_device_is_one_error_line() -> None:
    """/dev/full refuses every write (ENOSPC): exit 2, and the device node is still a device."""
    import os
    import stat

    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    from tests.support.cli import run_cli

    res = run_cli("state", "read", HDFS, "--version", "2", "--out", "/dev/full")
    assert res.returncode == 2, res.stderr
    assert res.stderr.count("\n") == 1 and "/dev/full" in res.stderr, res.stderr
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_a_damaged_operator_metadata_file_does_not_block_the_state(tmp_path: Path) -> None:
    """New-user trial of 2026-11-28: a garbage state/0/_metadata/metadata made `state ls`, `read`, `changes` and
    `rebuild` exit 2, while the audit (rightly: Spark rewrites the file and restarts) calls it a warning. The state
    commands pass over it as over an absent one (a 3.5 checkpoint has none): the same rows as with it intact."""
    sample = Path(__file__).resolve().parents[2] / "samples" / "rocksdb-changelog"
    ckpt = tmp_path / "c"
    shutil.copytree(sample, ckpt)
    (ckpt / "state/0/_metadata/metadata").write_text("garbage\n")
    (ckpt / "state/0/_metadata/.metadata.crc").unlink(missing_ok=True)
    for args in (["state", "read"], ["state", "changes", "--from", "5"]):
        damaged, intact = run(*args, str(ckpt)), run(*args, str(sample))
        assert damaged.exit_code == 0, damaged.stderr
        assert sorted(damaged.stdout.splitlines()) == sorted(intact.stdout.splitlines()) != []
    listing = run("state", "ls", str(ckpt))
    assert listing.exit_code == 0 and "loadable" in listing.stdout, listing.stderr
    assert run("state", "rebuild", str(ckpt)).exit_code == 0


def test_a_file_where_a_partition_directory_belongs_is_listed_as_such(tmp_path: Path) -> None:
    """New-user trial of 2026-11-28: with state/0/1 a file, `state ls --verify` said "2 partitions", listed partition
    0 only and exited 0."""
    ckpt = tmp_path / "c"
    shutil.copytree(Path(__file__).resolve().parents[2] / "samples" / "rocksdb-changelog", ckpt)
    shutil.rmtree(ckpt / "state/0/1")
    (ckpt / "state/0/1").write_text("x\\n")
    res = run("state", "ls", str(ckpt), "--verify")
    assert res.exit_code == 1, res.output
    assert "partition 1: loadable none; CANNOT LOAD:" in res.stdout and "0/1 is a file, not a directory" in res.stdout


def test_out_to_dev_stdout_writes_the_pipe() -> None:
    """/dev/stdout is a link to a pipe here: the rows go down the pipe, and the link stays (a rename over its real
    path, /proc/<pid>/fd/pipe:[N], cannot even be made)."""
    import os

    if not os.path.islink("/dev/stdout"):
        pytest.skip("no /dev/stdout link here")
    from tests.support.cli import run_cli

    res = run_cli("state", "read", HDFS, "--version", "2", "--out", "/dev/stdout")
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == run("state", "read", HDFS, "--version", "2").stdout.splitlines() != []
    assert os.path.islink("/dev/stdout")


def test_read_where_in_every_format(tmp_path: Path) -> None:
    """The RocksDB changelog sample groups by ``value % 5`` (keys 0-4, samples/generate_rocksdb_changelog.py):
    --where keeps the keys named, in JSON lines, CSV and Parquet alike."""
    import pyarrow.parquet as pq

    sample = str(Path(__file__).resolve().parents[2] / "samples" / "rocksdb-changelog")
    lines = run("state", "read", sample, "--where", "key IN (1, 3)", "-q")
    assert lines.exit_code == 0, lines.output
    assert sorted(json.loads(x)["key"]["key"] for x in lines.stdout.splitlines()) == [1, 3]
    csv = run("state", "read", sample, "--where", "key = 4", "-f", "csv", "-q")
    assert csv.exit_code == 0 and len(csv.stdout.splitlines()) == 2, csv.output
    out = tmp_path / "rows.parquet"
    assert run("state", "read", sample, "--where", "key != 0", "--out", str(out), "-q").exit_code == 0
    assert sorted(r["key"]["key"] for r in pq.read_table(out).to_pylist()) == [1, 2, 3, 4]
    bad = run("state", "read", sample, "--where", "key > 1")
    assert bad.exit_code == 2 and "(no ranges: list the keys with IN)" in bad.output, bad.output


def test_ls_shows_the_stored_schema_or_why_there_is_none(tmp_path: Path) -> None:
    ckpt = tmp_path / "ck"
    shutil.copytree(Path(__file__).resolve().parents[2] / "samples" / "rocksdb-changelog", ckpt)
    shown = run("state", "ls", str(ckpt))
    assert shown.exit_code == 0, shown.output
    where = ckpt / "state" / "0" / "0" / "_metadata" / "schema"
    assert f"  schema default: key struct<key:bigint>, value struct<count:bigint,sum:bigint> (from {where})" in (
        shown.stdout.splitlines()
    )
    where.unlink()
    (where.parent / ".schema.crc").unlink()
    gone = run("state", "ls", str(ckpt), "-f", "json")
    (view,) = json.loads(gone.stdout)["operators"][0]["schemas"]
    assert (view["key"], view["source"]) == (None, None)
    assert view["problem"] == f"{where}: expected a stored schema file (or --key-schema in Spark DDL), found none"


def test_json_names_the_stores_a_join_side_is_read_from(tmp_path: Path) -> None:
    """new-user trial 3: `--join-side left -f json` said store "default", a store a join does not have."""
    import tarfile

    with tarfile.open(Path(__file__).resolve().parents[1] / "fixtures" / "spark-4.3.0" / "join.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    doc = json.loads(run("state", "read", str(tmp_path / "ckpt"), "--join-side", "right", "-f", "json").stdout)
    assert (doc["store"], doc["join_side"], doc["state_variable"]) == (
        "right-keyToNumValues, right-keyWithIndexToValue",
        "right",
        None,
    )
    assert doc["rows"]
    one = json.loads(
        run("state", "read", str(tmp_path / "ckpt"), "--store", "left-keyToNumValues", "-f", "json").stdout
    )
    assert (one["store"], one["join_side"]) == ("left-keyToNumValues", None)


def test_a_damaged_partition_names_the_partitions_that_can_still_be_read(tmp_path: Path) -> None:
    """New-user trial 4: `state read --where` for one key failed on another partition's damaged file, and nothing
    said how to read the rest. The error names the other partitions and --partition; reading one of them works."""
    ckpt = tmp_path / "ck"
    shutil.copytree(Path(__file__).resolve().parents[2] / "samples" / "rocksdb-changelog", ckpt)
    (ckpt / "state/0/1/12.changelog").write_bytes(b"")
    (ckpt / "state/0/1/12.zip").unlink(missing_ok=True)
    line = one_line_error(run("state", "read", str(ckpt), "--where", "key = 3"), "state/0/1/12.changelog")
    assert "the other partitions (0) can be read one at a time with --partition N" in line, line
    assert f"`ckptfix state ls {ckpt} --verify`" in line
    ok = run("state", "read", str(ckpt), "--where", "key = 3", "--partition", "0")
    assert ok.exit_code == 0, ok.output
    # one partition asked for: nothing else to name
    alone = one_line_error(run("state", "read", str(ckpt), "--partition", "1"), "12.changelog")
    assert "other partitions" not in alone
