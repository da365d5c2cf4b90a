"""A stream-stream join over two JSON file sources, for UPGRADE-JOIN-FORMAT-1 (no pytest import: Spark 3.5.9
runs this file as a script, the live test imports it).

    python join_format1_query.py BASE CKPT FILES [JOIN_FORMAT]

writes input file number FILES-1 on both sides under BASE (and the ones before it), runs the join once with
availableNow on CKPT (the session's join state format set to JOIN_FORMAT when given: it is recorded in the offset
log) and prints ``RESULT {"ok": ..., "rows": ..., "error": ...}``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any


def write_inputs(base: Path, files: int) -> None:
    for side in ("left", "right"):
        (base / side).mkdir(parents=True, exist_ok=True)
        for i in range(files):
            rows = [{"k": f"k{k}", "ts": f"2023-11-14T22:1{i}:0{k}Z", "v": i * 10 + k} for k in range(3)]
            (base / side / f"f{i}.json").write_text("".join(json.dumps(r) + "\n" for r in rows))


def run(spark: Any, base: Path, ckpt: Path) -> dict[str, Any]:
    from pyspark.sql import functions as F

    def side(name: str) -> Any:
        return (
            spark.readStream.schema("k STRING, ts TIMESTAMP, v LONG")
            .option("maxFilesPerTrigger", 1)
            .json(str(base / name))
            .withWatermark("ts", "1 hour")
            .alias(name)
        )

    joined = side("left").join(
        side("right"),
        F.expr("left.k = right.k AND left.ts BETWEEN right.ts - interval 1 hour AND right.ts + interval 1 hour"),
    )
    rows: list[Any] = []
    query = (
        joined.writeStream.foreachBatch(lambda df, _: rows.extend(df.collect()))
        .option("checkpointLocation", str(ckpt))
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination(300)
        err = query.exception()
        return {"ok": err is None, "rows": len(rows), "error": None if err is None else str(err)[:3000]}
    except Exception as exc:  # the failure surfaces from awaitTermination
        return {"ok": False, "rows": len(rows), "error": str(exc)[:3000]}


if __name__ == "__main__":
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    base, ckpt, files = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
    session = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    if len(sys.argv) > 4:
        session.conf.set("spark.sql.streaming.join.stateFormatVersion", sys.argv[4])
    write_inputs(base, files)
    print("RESULT " + json.dumps({"spark": session.version, **run(session, base, ckpt)}))
    session.stop()
