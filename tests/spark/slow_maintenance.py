"""Restart a (damaged) copy of a base in a Spark session of its own whose state store maintenance runs every 60 s (the
tests' sessions run it every 200 ms): a short run then ends before maintenance uploads the snapshots it created.

The maintenance interval is read once, when the maintenance task starts, so it needs a new JVM: run as
``python -m tests.spark.slow_maintenance SCENARIO CKPT INPUT OUTPUT RESTARTS`` from the repository root (with
``PYSPARK_PYTHON`` set); prints the outcome (``Outcome.to_json``) as the last line of stdout.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

MAINTENANCE_INTERVAL = "60s"


def main(argv: list[str]) -> int:
    from pyspark.sql import SparkSession

    from tests.spark.harness import restart_times
    from tests.spark.queries import SCENARIOS, SESSION_CONFS

    scenario, ckpt, input_dir, output_dir, times = argv
    builder = SparkSession.builder.master("local[2]").appName("ckptfix-slow-maintenance")
    confs = {**SESSION_CONFS, "spark.sql.streaming.stateStore.maintenanceInterval": MAINTENANCE_INTERVAL}
    for key, value in confs.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    try:
        outcome = restart_times(spark, SCENARIOS[scenario], Path(ckpt), Path(input_dir), Path(output_dir), int(times))
    finally:
        spark.stop()
    print(json.dumps(outcome.to_json()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
