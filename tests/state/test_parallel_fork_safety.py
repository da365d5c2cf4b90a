"""`state read` forks reader processes, but a process forked after RocksDB was used inherits RocksDB's locks
without its background threads: seen in a full CI run, two forked readers of `samples/rocksdb-changelog` waited
forever on a futex in ``RocksSnapshot.replay`` (py-spy) because earlier tests in the same process had used
RocksDB. Once RocksDB was used, reading stays in-process; before, it forks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("rocksdict")
ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "samples" / "rocksdb-changelog"

SCRIPT = """
import sys
from ckptfix.cli.main import main
from ckptfix.state import parallel
before = parallel.available()
if sys.argv[1] == "use-rocksdb-first":
    import ckptfix
    ckptfix.read_state(sys.argv[2])
print(json.dumps({"before": before, "after": parallel.available()}), file=sys.stderr)
sys.argv = ["ckptfix", "state", "read", sys.argv[2], "--jobs", "2", "--format", "jsonl", "-q"]
main()
"""


@pytest.mark.parametrize("first", ["use-rocksdb-first", "fresh"])
def test_readers_fork_only_before_rocksdb_is_used(first: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", "import json\n" + SCRIPT, first, str(SAMPLE)],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    decided = json.loads(proc.stderr.strip().splitlines()[0])
    assert decided == {"before": True, "after": first == "fresh"}
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    # the sample's query: 12 batches of 10 rows over value % 5 -> 5 keys, 24 rows each (samples/README.md)
    assert sorted(r["key"]["key"] for r in rows) == [0, 1, 2, 3, 4]
    assert {r["value"]["count"] for r in rows} == {24}
