"""Record how each real Spark release restarts the 3.5.9 join fixture, before and after the ckptfix repair.

Run once per installed PySpark release (the dev venv's ckptfix does the repair, as a subprocess)::

    .cache/spark-3.5.9/bin/python tests/audit_upgrade/record_join35.py  # and spark-4.0.5, -4.1.4, -4.2.1, .venv

It unpacks tests/fixtures/state35/join_hdfs.tar.gz twice, recreates the inputs at the recorded absolute path
(/tmp/ckptfix-state35-gen/join_hdfs/, plus one file per side, the same as test_live_join_upgrade.NEW), restarts
copy A as is, and copy B after ``ckptfix repair B --target-spark 4.3 --apply``, with the join query and a
foreachBatch sink. The outcome goes into join35_outcomes.json under the release's version:
``{"before": {"ok", "text"}, "after_repair": {"ok", "text", "pairs"}}``; test_upgrade_rules.py compares the audit
with it. The repair plan is the same for every 4.x target, so the 3.5 entry says whether going back to 3.5 after
the repair works.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
TARBALL = REPO / "tests" / "fixtures" / "state35" / "join_hdfs.tar.gz"
RECORDED_DIR = Path("/tmp/ckptfix-state35-gen/join_hdfs")
CKPTFIX = os.environ.get("CKPTFIX_BIN", str(REPO / ".venv" / "bin" / "ckptfix"))
OUT = HERE / "join35_outcomes.json"
T0 = 1700000000
NEW = {
    "left": {"lid": 8, "lk": "a", "lts": "2023-11-14T22:14:10Z"},
    "right": {"rid": 107, "rk": "a", "rts": "2023-11-14T22:14:12Z"},
}


def place_inputs(unpacked: Path) -> None:
    """Recreate the fixture's inputs at the absolute path its file-source log records, plus one new file per side."""
    for side in ("left", "right"):
        target = RECORDED_DIR / f"input_{side}"
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(unpacked / f"input_{side}", target)  # copy2 keeps the recorded mtimes
        new = target / "part-0005.json"
        new.write_text(json.dumps(NEW[side]) + "\n")
        os.utime(new, (T0 + 300, T0 + 300))


def unpack(dest: Path) -> Path:
    with tarfile.open(TARBALL) as tar:
        tar.extractall(dest, filter="data")
    place_inputs(dest)
    return dest / "ckpt"


def join(spark: Any) -> Any:
    """The fixture's query: inner join lk = rk within 5 s, both sides watermarked 10 s, over the recorded inputs."""
    from pyspark.sql import functions as F

    def side(name: str, schema: str, ts: str) -> Any:
        src = spark.readStream.format("json").schema(schema).option("maxFilesPerTrigger", 1)
        return src.load(str(RECORDED_DIR / f"input_{name}")).withWatermark(ts, "10 seconds")

    left = side("left", "lid LONG, lk STRING, lts TIMESTAMP", "lts")
    right = side("right", "rid LONG, rk STRING, rts TIMESTAMP", "rts")
    cond = (
        (F.col("lk") == F.col("rk"))
        & (F.col("rts") >= F.col("lts") - F.expr("INTERVAL 5 SECONDS"))
        & (F.col("rts") <= F.col("lts") + F.expr("INTERVAL 5 SECONDS"))
    )
    return left.join(right, cond, "inner")


def restart(spark: Any, ckpt: Path) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []

    def collect(df: Any, batch_id: int) -> None:
        rows.extend(json.loads(r) for r in df.toJSON().collect())

    text = ""
    try:
        q = (
            join(spark)
            .writeStream.foreachBatch(collect)
            .outputMode("append")
            .option("checkpointLocation", str(ckpt))
            .trigger(availableNow=True)
            .start()
        )
        q.awaitTermination(300)
        exc = q.exception()
        text = "" if exc is None else str(exc)
    except Exception as e:  # noqa: BLE001 - the failure text is the result
        text = f"{type(e).__name__}: {e}"
    return {"ok": not text, "text": text[:3000], "pairs": sorted([r["lid"], r["rid"]] for r in rows)}


def main() -> None:
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.adaptive.enabled", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    with tempfile.TemporaryDirectory() as tmp:
        before = restart(spark, unpack(Path(tmp) / "a"))
        b = unpack(Path(tmp) / "b")
        rep = subprocess.run(
            [CKPTFIX, "repair", str(b), "--target-spark", "4.3", "--apply", "--idle-seconds", "0"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert rep.returncode == 0, rep.stderr
        after = restart(spark, b)
    before.pop("pairs")
    data = json.loads(OUT.read_text()) if OUT.exists() else {}
    data[spark.version] = {"before": before, "after_repair": after}
    OUT.write_text(json.dumps(dict(sorted(data.items())), indent=1) + "\n")
    spark.stop()
    print(spark.version, "before ok" if before["ok"] else "before fails", "| after:", after["ok"], after["pairs"])


if __name__ == "__main__":
    main()
