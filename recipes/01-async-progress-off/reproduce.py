"""Reproduce recipe 01: run the query with asynchronous progress tracking until its offset log is sparse.

``python reproduce.py WORKDIR`` leaves ``WORKDIR/ckpt``, ``WORKDIR/input`` and ``WORKDIR/out`` (the same
reproduction as recipe 02; the test shares one such checkpoint between both recipes).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE.parent) not in sys.path:
    sys.path.insert(0, str(HERE.parent))

from _shared import load_module, run_async_until_sparse  # noqa: E402

query = load_module(HERE / "query.py").query


def reproduce(spark: Any, workdir: str | Path) -> dict[str, Path]:
    workdir = Path(workdir)
    paths = {"CKPT": workdir / "ckpt", "INPUT": workdir / "input", "OUT": workdir / "out"}
    run_async_until_sparse(lambda: query(spark, str(paths["INPUT"]), str(paths["OUT"])), paths["CKPT"], paths["INPUT"])
    return paths


if __name__ == "__main__":
    from pyspark.sql import SparkSession

    session = SparkSession.builder.master("local[2]").getOrCreate()
    print(reproduce(session, sys.argv[1]))
