"""Reproduce recipe 08: the aggregation runs 4 batches with ``spark.sql.shuffle.partitions=4``.

``python reproduce.py WORKDIR`` (PySpark installed) leaves ``WORKDIR/ckpt``, ``WORKDIR/input`` and
``WORKDIR/out``; the test calls ``reproduce(spark, workdir)`` with its own session. The session's
``spark.sql.shuffle.partitions`` is set to 4 for the run and put back afterwards.
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

PARTITIONS = 4  # what the checkpoint is started with
FILES = 4  # batches 0-3


def reproduce(spark: Any, workdir: str | Path) -> dict[str, Path]:
    workdir = Path(workdir)
    paths = {"CKPT": workdir / "ckpt", "INPUT": workdir / "input", "OUT": workdir / "out"}
    write_input(paths["INPUT"], 0, FILES)
    old = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", str(PARTITIONS))
    try:
        run_available_now(query(spark, str(paths["INPUT"]), str(paths["OUT"])), paths["CKPT"])
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", old)
    return paths


if __name__ == "__main__":
    from pyspark.sql import SparkSession

    session = SparkSession.builder.master("local[2]").getOrCreate()
    print(reproduce(session, sys.argv[1]))
