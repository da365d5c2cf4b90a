"""A RocksDB zip with a member RocksDB does not read is never decompressed (issue 16 #6): a 256 MiB unlisted
member added to a zip Spark 3.5.9 wrote (tests/fixtures/state35/agg_rocksdb) leaves `state read` and
`state ls --verify` correct with a bounded peak memory; an oversized member RocksDB would read is one clear line."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

from tests.state.test_state35 import extract

BIG = 256 << 20


def add_member(zip_path: Path, name: str, size: int) -> None:
    with zipfile.ZipFile(zip_path, "a", compression=zipfile.ZIP_DEFLATED) as zf, zf.open(name, "w") as out:
        chunk = b"\0" * (1 << 20)
        for _ in range(size // len(chunk)):
            out.write(chunk)
    for sidecar in (zip_path.parent / f".{zip_path.name}.crc", zip_path.parent / f"{zip_path.name}.crc"):
        sidecar.unlink(missing_ok=True)


PEAK = r"""
import resource, sys
from ckptfix.cli.main import main
try:
    main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
print("PEAK_KB", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "CODE", code, file=sys.stderr)
"""


def run(*args: str) -> tuple[int, str, str, int]:
    proc = subprocess.run([sys.executable, "-c", PEAK, *args], capture_output=True, text=True, timeout=600)
    tail = proc.stderr.strip().splitlines()[-1].split()
    return int(tail[3]), proc.stdout, proc.stderr, int(tail[1])


def test_unlisted_member_is_not_decompressed(tmp_path: Path) -> None:
    ckpt = extract("agg_rocksdb", tmp_path)
    code, before, _, base_kb = run("state", "read", str(ckpt), "--jobs", "1")
    assert code == 0
    add_member(ckpt / "state/0/0/5.zip", "junk.bin", BIG)
    code, after, err, peak_kb = run("state", "read", str(ckpt), "--jobs", "1")
    assert code == 0, err
    assert sorted(after.splitlines()) == sorted(before.splitlines())
    # the same read without the member is the baseline; decompressing it would add 256 MiB
    assert (peak_kb - base_kb) * 1024 < BIG // 4, f"peak {peak_kb} KB against {base_kb} KB without the member"
    code, out, err, _ = run("state", "ls", str(ckpt), "--verify", "--format", "json")
    assert code == 0 and json.loads(out)["ok"], err


def test_oversized_rocksdb_member_is_one_line(tmp_path: Path) -> None:
    ckpt = extract("agg_rocksdb", tmp_path)
    add_member(ckpt / "state/0/0/5.zip", "000099.log", 80 << 20)
    code, out, err, _ = run("state", "read", str(ckpt), "--jobs", "1")
    assert code == 2 and out == ""
    assert "5.zip!/000099.log" in err and "at most 64 MiB" in err
