"""Reproduce recipe 09: the aggregation runs 3 good batches, then one whose input has a huge ``value`` for k3.

``python reproduce.py WORKDIR`` (PySpark installed) leaves ``WORKDIR/ckpt``, ``WORKDIR/input`` and
``WORKDIR/out``; the test calls ``reproduce(spark, workdir)`` with its own session. The poison file is
``input/part-0003.json``: two rows of key ``k3`` with ``value`` 10^12 (a unit bug upstream), with the
modification time the next regular input file would have had, so it is batch 3.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE.parent) not in sys.path:
    sys.path.insert(0, str(HERE.parent))

from _shared import MTIME_BASE, load_module, run_available_now, write_input  # noqa: E402

query = load_module(HERE / "query.py").query

GOOD_FILES = 3  # batches 0-2
POISON_FILE = 3  # batch 3
POISON_KEY = "k3"
POISON_ROWS = [{"id": 10_000 + r, "key": POISON_KEY, "value": 10**12} for r in range(2)]


def write_poison(input_dir: Path) -> Path:
    path = input_dir / f"part-{POISON_FILE:04d}.json"
    tmp = path.with_name("." + path.name + ".tmp")  # hidden: the file source ignores it
    tmp.write_text("".join(json.dumps(row) + "\n" for row in POISON_ROWS))
    os.utime(tmp, (MTIME_BASE + 60 * POISON_FILE, MTIME_BASE + 60 * POISON_FILE))
    tmp.rename(path)
    return path


def reproduce(spark: Any, workdir: str | Path) -> dict[str, Path]:
    workdir = Path(workdir)
    paths = {"WORK": workdir, "CKPT": workdir / "ckpt", "INPUT": workdir / "input", "OUT": workdir / "out"}
    write_input(paths["INPUT"], 0, GOOD_FILES)
    write_poison(paths["INPUT"])
    run_available_now(query(spark, str(paths["INPUT"]), str(paths["OUT"])), paths["CKPT"])
    return paths


if __name__ == "__main__":
    from pyspark.sql import SparkSession

    session = SparkSession.builder.master("local[2]").getOrCreate()
    print(reproduce(session, sys.argv[1]))
