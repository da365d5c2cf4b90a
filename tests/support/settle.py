"""Wait until Spark has stopped writing into a checkpoint after its query stopped.

A stopped query's state stores stay loaded in the JVM, and Spark's maintenance thread keeps writing into the
checkpoint: HDFS snapshots, RocksDB snapshot uploads with changelog checkpointing (``N.zip``, ``N_<id>.zip``) and
cleanup deletions, a few hundred milliseconds later. A test that repairs or copies the checkpoint right away races
that thread (ckptfix's engine then rightly refuses: "written by something else during run"). A fixed sleep only
makes the race rarer on a loaded machine; this stops the JVM's state store module (Spark starts it again with the
next query) and then waits for the directory tree to stop changing.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any


def _tree(root: Path) -> frozenset[tuple[str, int, int]]:
    out = set()
    for p in root.rglob("*"):
        with contextlib.suppress(FileNotFoundError):
            if p.is_file():
                st = p.stat()
                out.add((str(p.relative_to(root)), st.st_size, st.st_mtime_ns))
    return frozenset(out)


def settle(spark: Any, *roots: Path, quiet_s: float = 0.6, timeout_s: float = 30.0) -> None:
    """Stop Spark's state store maintenance and wait until every ``root`` is unchanged for ``quiet_s``."""
    with contextlib.suppress(Exception):  # py4j may be gone in a failing test; the wait below still holds
        spark._jvm.org.apache.spark.sql.execution.streaming.state.StateStore.stop()
    deadline = time.monotonic() + timeout_s
    last = tuple(_tree(r) for r in roots if r.exists())
    quiet_since = time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.1)
        now = tuple(_tree(r) for r in roots if r.exists())
        if now != last:
            last, quiet_since = now, time.monotonic()
        elif time.monotonic() - quiet_since >= quiet_s:
            return
    raise AssertionError(f"{', '.join(map(str, roots))} still changing after {timeout_s}s")
