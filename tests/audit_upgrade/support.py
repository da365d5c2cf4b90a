"""Unpack the committed fixture tarballs (real checkpoints written by the Spark release named in their path)."""

from __future__ import annotations

import tarfile
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
#: tests/fixtures/spark-<version>/<scenario>.tar.gz, written by generate_spark35.py with that PySpark release
RECORDED = {"3.5.9": "3.5", "4.0.5": "4.0", "4.1.4": "4.1", "4.2.1": "4.2"}
SCENARIOS = ("stateless", "agg_hdfs", "agg_rocksdb_cl", "filesink", "async")
#: tests/fixtures/state35/<scenario>.tar.gz, written by state35/generate.py with PySpark 3.5.9
STATE35 = ("agg_hdfs", "agg_rocksdb", "dedup_hdfs", "dedup_wm_hdfs", "session_hdfs", "join_hdfs", "fmgws_hdfs")


def unpack(tarball: Path, dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(tarball) as tar:
        tar.extractall(dest, filter="data")
    return dest


def recorded(version: str, scenario: str, dest: Path) -> Path:
    return unpack(FIXTURES / f"spark-{version}" / f"{scenario}.tar.gz", dest) / "ckpt"


def state35(scenario: str, dest: Path) -> Path:
    return unpack(FIXTURES / "state35" / f"{scenario}.tar.gz", dest) / "ckpt"
