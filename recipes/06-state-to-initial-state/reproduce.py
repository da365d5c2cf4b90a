"""Reproduce recipe 06: release 1 (applyInPandasWithState) processes 4 files.

``python reproduce.py WORKDIR`` leaves ``WORKDIR/ckpt``, ``WORKDIR/input``, ``WORKDIR/out``; the test calls
``reproduce(spark, workdir)``. Needs pandas and pyarrow, and ``PYSPARK_PYTHON`` pointing at this Python.
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
        "STATE_PARQUET": workdir / "state.parquet",
        "NEW_CKPT": workdir / "ckpt2",
        "NEW_OUT": workdir / "out2",
    }
    write_input(paths["INPUT"], 0, 4)
    run_available_now(query(spark, str(paths["INPUT"]), str(paths["OUT"])), paths["CKPT"])
    return paths


if __name__ == "__main__":
    import os

    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    session = SparkSession.builder.master("local[2]").getOrCreate()
    print(reproduce(session, sys.argv[1]))
