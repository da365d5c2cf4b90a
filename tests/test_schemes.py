"""Every URL scheme a user may type gets a working file system or one line saying what to do, exit 2
(issue 12 #1): a missing extra names its pip command, dbfs:/ and hdfs:// without a Hadoop client say how to get
at the files, an unknown scheme says what is expected. Run in a child process with a clean environment so the
test sees what a user sees (no internal error, no dlopen noise on stderr)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest

CASES = [
    ("dbfs:/checkpoints/q1", "dbfs:/ is Databricks' file system"),
    ("hdfs://namenode:8020/checkpoints/q1", "hdfs:// needs a Hadoop client here"),
    ("foo://bucket/q1", "unknown scheme 'foo'"),
]
if importlib.util.find_spec("gcsfs") is None:
    CASES.append(("gs://bucket/q1", "pip install 'ckptfix[gcs]'"))
if importlib.util.find_spec("adlfs") is None:
    CASES.append(("abfss://c@account.dfs.core.windows.net/q1", "pip install 'ckptfix[azure]'"))


@pytest.mark.parametrize(("url", "says"), CASES)
def test_one_line_exit_2(url: str, says: str) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("HADOOP_HOME", "ARROW_LIBHDFS_DIR", "CLASSPATH")}
    proc = subprocess.run(
        [sys.executable, "-m", "ckptfix", "audit", url, "--quiet"], capture_output=True, text=True, timeout=120, env=env
    )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], proc.stderr
    assert "internal error" not in proc.stderr and proc.stdout == ""
