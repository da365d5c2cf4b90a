"""Reproduce recipe 03: run the aggregation over 8 files, then corrupt the newest snapshot of every partition.

The corruption is what a bad disk or a partial copy leaves: 8 bytes flipped inside the first LZ4 block of each
newest ``<v>.snapshot`` (the same damage ``tests/spark/damage.py`` calls ``state_snapshot_corrupt``, restarted
with real Spark 3.5.9, 4.0.5, 4.1.4 and 4.2.1 in ``tests/fixtures/spark-*/outcomes.json``).

``python reproduce.py WORKDIR`` leaves ``WORKDIR/ckpt``, ``WORKDIR/input``, ``WORKDIR/out``; the test calls
``reproduce(spark, workdir)``. Snapshots need ``spark.sql.streaming.stateStore.minDeltasForSnapshot`` below the
number of batches (set here to 2) and a maintenance run (``maintenanceInterval``, 200 ms in the test session).
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE.parent) not in sys.path:
    sys.path.insert(0, str(HERE.parent))

from _shared import load_module, run_available_now, write_input  # noqa: E402

query = load_module(HERE / "query.py").query

HDFS_PROVIDER = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
CONFS = {
    "spark.sql.streaming.stateStore.providerClass": HDFS_PROVIDER,
    "spark.sql.streaming.stateStore.minDeltasForSnapshot": "2",
}
LZ4_BLOCK_HEADER = 21  # "LZ4Block", token, int32 compressed length, int32 raw length, int32 checksum


def corrupt_newest_snapshots(ckpt: Path) -> list[Path]:
    done = []
    for part in sorted((ckpt / "state" / "0").iterdir()):
        if not part.name.isdigit():
            continue
        snaps = sorted(int(m.group(1)) for p in part.iterdir() if (m := re.fullmatch(r"([0-9]+)\.snapshot", p.name)))
        if not snaps:
            continue
        path = part / f"{snaps[-1]}.snapshot"
        data = bytearray(path.read_bytes())
        comp_len = int.from_bytes(data[9:13], "little")
        if data[:8] != b"LZ4Block" or comp_len == 0:
            continue
        start = LZ4_BLOCK_HEADER + comp_len // 3
        for i in range(start, min(start + 8, LZ4_BLOCK_HEADER + comp_len)):
            data[i] ^= 0xFF
        path.write_bytes(bytes(data))
        done.append(path)
    if not done:
        raise RuntimeError("no non-empty snapshot was written; raise the number of batches")
    return done


def reproduce(spark: Any, workdir: str | Path) -> dict[str, Path]:
    workdir = Path(workdir)
    paths = {"CKPT": workdir / "ckpt", "INPUT": workdir / "input", "OUT": workdir / "out"}
    write_input(paths["INPUT"], 0, 8)
    for key, value in CONFS.items():
        spark.conf.set(key, value)
    run_available_now(query(spark, str(paths["INPUT"]), str(paths["OUT"])), paths["CKPT"])
    time.sleep(1.5)  # let the maintenance thread finish writing snapshots
    corrupt_newest_snapshots(paths["CKPT"])
    return paths


if __name__ == "__main__":
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .config("spark.sql.streaming.stateStore.maintenanceInterval", "200ms")
        .getOrCreate()
    )
    print(reproduce(session, sys.argv[1]))
