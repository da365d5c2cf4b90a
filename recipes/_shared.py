"""Helpers the recipes' ``reproduce.py`` scripts share: deterministic input files, the sink, one run.

Not part of ckptfix. A recipe's ``query.py`` does not need this module; only the scripts that build a broken
checkpoint to show the symptom do. Works with PySpark 3.5 and 4.x.

Input: JSON-lines files ``part-NNNN.json`` of 5 rows ``{"id", "key", "value"}`` with globally unique ids and
fixed, increasing modification times (the file source orders files by modification time, so with
``maxFilesPerTrigger=1`` batch n reads file n).
Sink: ``foreachBatch`` writing each batch to ``<output>/batch_id=<NNNNN>/`` with mode ``overwrite``, so a batch
that runs again replaces its own output (idempotent by batch id).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
from pathlib import Path
from typing import Any

ROWS_PER_FILE = 5
KEYS = ["k0", "k1", "k2", "k3", "k4", "k5"]
INPUT_SCHEMA = "id LONG, key STRING, value LONG"
MTIME_BASE = 1_700_000_000


def load_module(path: str | Path) -> Any:
    """Import a recipe file (``query.py``) by path, under a name unique to its recipe directory."""
    path = Path(path).resolve()
    name = "recipe_" + path.parent.name.replace("-", "_") + "_" + path.stem
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_input(input_dir: str | Path, start: int, count: int) -> list[Path]:
    """Write ``part-<start>`` .. ``part-<start+count-1>`` (existing files are kept: the content is fixed)."""
    input_dir = Path(input_dir)
    input_dir.mkdir(parents=True, exist_ok=True)
    out = []
    for i in range(start, start + count):
        path = input_dir / f"part-{i:04d}.json"
        if not path.exists():
            rows = [
                {"id": i * ROWS_PER_FILE + r, "key": KEYS[(i + r) % len(KEYS)], "value": i * 10 + r}
                for r in range(ROWS_PER_FILE)
            ]
            tmp = path.with_name("." + path.name + ".tmp")  # hidden: the file source ignores it
            tmp.write_text("".join(json.dumps(row) + "\n" for row in rows))
            os.utime(tmp, (MTIME_BASE + 60 * i, MTIME_BASE + 60 * i))
            tmp.rename(path)
        out.append(path)
    return out


def read_rows(directory: str | Path, pattern: str = "part-*.json") -> list[dict[str, Any]]:
    """Every JSON line of the files matching ``pattern`` under ``directory`` (recursively)."""
    rows: list[dict[str, Any]] = []
    for path in sorted(Path(directory).rglob(pattern)):
        rows.extend(json.loads(line) for line in path.read_text().splitlines() if line.strip())
    return rows


def sink_batches(output_dir: str | Path) -> dict[int, list[dict[str, Any]]]:
    """The rows of each batch the foreachBatch sink holds, by batch id."""
    out: dict[int, list[dict[str, Any]]] = {}
    for d in sorted(Path(output_dir).glob("batch_id=*")):
        out[int(d.name.split("=", 1)[1])] = read_rows(d, "part-*")
    return out


def batch_sink(output_dir: str) -> Any:
    """A foreachBatch function writing batch ``b`` to ``<output_dir>/batch_id=<b>`` (overwrite: idempotent)."""

    def write(batch_df: Any, batch_id: int) -> None:
        batch_df.write.mode("overwrite").json(f"{output_dir}/batch_id={batch_id:05d}")

    return write


def run_available_now(writer: Any, checkpoint: str | Path, timeout: float = 300) -> None:
    """Start ``writer`` on ``checkpoint`` with ``trigger(availableNow=True)``, wait, raise what the query raised."""
    query = writer.option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start()
    try:
        if not query.awaitTermination(timeout):
            raise TimeoutError(f"the query did not finish within {timeout}s")
    finally:
        with contextlib.suppress(Exception):
            query.stop()


ASYNC_OPTIONS = {
    "asyncProgressTrackingEnabled": "true",
    "asyncProgressTrackingCheckpointIntervalMs": "2000",
    # Spark allows async progress tracking only with Kafka, console, memory and noop sinks; this testing-only
    # switch lets the reproduction use a foreachBatch sink whose output can be checked afterwards.
    "_asyncProgressTrackingOverrideSinkSupportCheck": "true",
}


def offset_ids(checkpoint: str | Path) -> list[int]:
    d = Path(checkpoint) / "offsets"
    return sorted(int(p.name) for p in d.iterdir() if p.name.isdigit()) if d.is_dir() else []


def run_async_until_sparse(
    make_writer: Any, checkpoint: str | Path, input_dir: str | Path, files: int = 10, attempts: int = 4
) -> None:
    """Run ``make_writer()`` with asynchronous progress tracking (processingTime 400 ms) over ``files`` input files
    until every file is processed, then stop; repeat on a fresh checkpoint until the offset log is sparse at the top
    (latest batch L without ``offsets/L-1``), which is what async tracking leaves when it commits every 2 s."""
    import shutil

    checkpoint = Path(checkpoint)
    write_input(input_dir, 0, files)
    for _ in range(attempts):
        if checkpoint.exists():
            shutil.rmtree(checkpoint)
        writer = make_writer()
        for key, value in ASYNC_OPTIONS.items():
            writer = writer.option(key, value)
        query = writer.option("checkpointLocation", str(checkpoint)).trigger(processingTime="400 milliseconds").start()
        try:
            query.processAllAvailable()
        finally:
            query.stop()
        ids = offset_ids(checkpoint)
        if ids and ids[-1] > 0 and ids[-1] - 1 not in ids:
            return
    raise RuntimeError(f"async progress tracking never left a sparse offset log: {offset_ids(checkpoint)}")
