"""Restart checkpoints with an OLDER Spark (run by test_live_downgrade.py in a Spark 3.5 venv, as a subprocess).

Usage: ``<venv35>/bin/python tests/audit_upgrade/restart35.py DIR...``; each DIR holds ``ckpt/`` and ``input/``
(JSON lines ``key STRING, value LONG``) of a ``groupBy("key").count()`` update-mode query written by a newer
Spark. One more input file (key k9) is added, the query runs once with availableNow and a foreachBatch sink,
and one line ``RESULT {dir: {"ok": bool, "spark": version, "text": error text, "rows": [...]}}`` is printed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def main(dirs: list[str]) -> dict[str, Any]:
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    out: dict[str, Any] = {}
    for d in dirs:
        root = Path(d)
        inp = root / "input"
        (inp / "part-9999.json").write_text(json.dumps({"key": "k9", "value": 9}) + "\n")
        rows: list[dict[str, Any]] = []

        def collect(df: Any, batch_id: int, rows: list[dict[str, Any]] = rows) -> None:
            rows.extend(r.asDict() for r in df.collect())

        src = spark.readStream.format("json").schema("key STRING, value LONG").option("maxFilesPerTrigger", 1)
        try:
            query = (
                src.load(str(inp))
                .groupBy("key")
                .count()
                .writeStream.foreachBatch(collect)
                .outputMode("update")
                .option("checkpointLocation", str(root / "ckpt"))
                .trigger(availableNow=True)
                .start()
            )
            query.awaitTermination(240)
            exc = query.exception()
            text = "" if exc is None else str(exc)
        except Exception as e:  # noqa: BLE001 - the failure text is the result
            text = f"{type(e).__name__}: {e}"
        out[d] = {"ok": not text, "spark": spark.version, "text": text[:4000], "rows": rows}
    spark.stop()
    return out


if __name__ == "__main__":
    print("RESULT " + json.dumps(main(sys.argv[1:])))
