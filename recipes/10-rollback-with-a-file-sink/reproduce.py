"""Reproduce recipe 10: batches 0-2 run with the good release, batches 3-5 with the buggy one, into a file sink.

``python reproduce.py WORKDIR`` (PySpark installed) leaves ``WORKDIR/ckpt``, ``WORKDIR/input`` and
``WORKDIR/out`` (with ``out/_spark_metadata/0..5``); the test calls ``reproduce(spark, workdir)`` with its own
session.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE.parent) not in sys.path:
    sys.path.insert(0, str(HERE.parent))

from _shared import load_module, run_available_now, write_input  # noqa: E402

query = load_module(HERE / "query.py").query

GOOD_FILES = 3  # batches 0, 1, 2: good release
BAD_FILES = 3  # batches 3, 4, 5: buggy release


def reproduce(spark: Any, workdir: str | Path) -> dict[str, Path]:
    workdir = Path(workdir)
    paths = {"WORK": workdir, "CKPT": workdir / "ckpt", "INPUT": workdir / "input", "OUT": workdir / "out"}
    write_input(paths["INPUT"], 0, GOOD_FILES)
    run_available_now(query(spark, str(paths["INPUT"]), str(paths["OUT"]), buggy=False), paths["CKPT"])
    write_input(paths["INPUT"], GOOD_FILES, BAD_FILES)
    run_available_now(query(spark, str(paths["INPUT"]), str(paths["OUT"]), buggy=True), paths["CKPT"])
    return paths


if __name__ == "__main__":
    from pyspark.sql import SparkSession

    session = SparkSession.builder.master("local[2]").getOrCreate()
    print(reproduce(session, sys.argv[1]))
