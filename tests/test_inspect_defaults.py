"""`ckptfix inspect` shows the value Spark uses, never "-" for a conf an old offset log does not record, and
never cuts ids or class names (issue 15 #5). The old log is Spark's own: checkpoint-version-2.1.0's text files
(tests/fixtures/spark-resources-text, copied from Apache Spark's test resources), whose offset files record no
conf at all."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.support.cli import run_cli

ROOT = Path(__file__).resolve().parents[1]
OLD = ROOT / "tests" / "fixtures" / "spark-resources-text" / "checkpoint-version-2.1.0"


def inspect(path: Path, *args: str, columns: int = 200) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": str(columns)}
    return run_cli("inspect", str(path), *args, env=env)


def test_legacy_defaults_and_session_values() -> None:
    doc = json.loads(inspect(OLD, "--format", "json").stdout)
    s = doc["settings"]
    # OffsetSeqMetadata.relevantSQLConfDefaultValues (4.3.0): what Spark sets for a key the log lacks
    assert s["state_codec"].startswith("lz4 (not recorded")
    assert s["watermark_policy"].startswith("min (not recorded")
    # no legacy default: the session's value prevails (Spark's StreamSuite sets shuffle partitions to 10)
    assert s["shuffle_partitions"].startswith("not recorded: the restarting session's value (200")
    assert "-" not in s.values() and None not in (s["state_codec"], s["shuffle_partitions"])


def test_nothing_is_cut() -> None:
    out = inspect(ROOT / "samples" / "async-sparse", columns=60).stdout
    assert "…" not in out
    cells = "".join(line.split("│")[2].strip() for line in out.splitlines() if line.count("│") >= 3)
    assert "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider" in cells
