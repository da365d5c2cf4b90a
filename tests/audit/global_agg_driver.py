"""A streaming aggregation without grouping keys (``groupBy().count()``), 4 shuffle partitions: built over three
input files, then restarted after a fourth. Run as a script by any PySpark (``python global_agg_driver.py WORKDIR
build|restart``: one JSON line on stdout), or imported with a live session (:func:`run`).

No pytest import: the Spark 3.5 interpreter runs this file too."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROWS_PER_FILE = 5
PARTITIONS = "spark.sql.shuffle.partitions"


def write_input(workdir: Path, index: int) -> None:
    d = workdir / "input"
    d.mkdir(parents=True, exist_ok=True)
    (d / f"part-{index}.json").write_text("".join(json.dumps({"v": i}) + "\n" for i in range(ROWS_PER_FILE)))


def run(spark: Any, workdir: Path) -> dict[str, Any]:
    """One availableNow run over what is in ``workdir/input``: the counts each batch emitted, or the error."""
    out: list[tuple[int, list[int]]] = []
    before = spark.conf.get(PARTITIONS, None)  # the session is shared with other tests: restored below
    spark.conf.set(PARTITIONS, "4")
    try:
        df = spark.readStream.schema("v LONG").option("maxFilesPerTrigger", 1).json(str(workdir / "input"))
        query = (
            df.groupBy()
            .count()
            .writeStream.foreachBatch(lambda d, b: out.append((b, [r[0] for r in d.collect()])))
            .outputMode("update")
            .option("checkpointLocation", str(workdir / "ckpt"))
            .trigger(availableNow=True)
            .start()
        )
        try:
            query.awaitTermination(300)
            exc = query.exception()
        finally:
            query.stop()
    finally:
        if before is None:
            spark.conf.unset(PARTITIONS)
        else:
            spark.conf.set(PARTITIONS, before)
    return {"error": None if exc is None else str(exc)[:2000], "batches": sorted(out)}


def main() -> None:
    from pyspark.sql import SparkSession

    workdir, phase = Path(sys.argv[1]), sys.argv[2]
    spark = SparkSession.builder.master("local[2]").getOrCreate()
    if phase == "build":
        for i in range(3):
            write_input(workdir, i)
    else:
        write_input(workdir, 3)
    print(json.dumps(run(spark, workdir)))


if __name__ == "__main__":
    main()
