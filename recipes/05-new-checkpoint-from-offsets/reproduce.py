"""Reproduce recipe 05: release 1 (stateless) processes 4 files; release 2 adds dropDuplicates.

``python reproduce.py WORKDIR`` leaves ``WORKDIR/ckpt``, ``WORKDIR/input``, ``WORKDIR/out``; the test calls
``reproduce(spark, workdir)``. Starting release 2 (``query(..., dedup=True)``) on ``WORKDIR/ckpt`` then fails.
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


def reproduce(spark: Any, workdir: str | Path) -> dict[str, Path]:
    workdir = Path(workdir)
    paths = {
        "WORK": workdir,
        "CKPT": workdir / "ckpt",
        "INPUT": workdir / "input",
        "OUT": workdir / "out",
        "NEW_CKPT": workdir / "ckpt2",
        "NEW_OUT": workdir / "out2",
    }
    write_input(paths["INPUT"], 0, 4)
    run_available_now(query(spark, str(paths["INPUT"]), str(paths["OUT"]), dedup=False), paths["CKPT"])
    return paths


if __name__ == "__main__":
    from pyspark.sql import SparkSession

    session = SparkSession.builder.master("local[2]").getOrCreate()
    print(reproduce(session, sys.argv[1]))
