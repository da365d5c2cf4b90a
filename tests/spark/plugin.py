"""pytest fixtures for live-Spark tests: one SparkSession per test process and base checkpoints per scenario.

Register with ``pytest_plugins = ["tests.spark.plugin"]`` in tests/conftest.py (or ``pytest -p tests.spark.plugin``).
Tests must copy a base (``copy_base``) before damaging it; the bases are built once into a session tmp dir.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.spark.harness import build_base
from tests.spark.queries import SCENARIOS, SESSION_CONFS


def _pyspark_or_skip() -> Any:
    """Skip on a developer machine without PySpark or Java; in CI (CI=true) the proof must run."""
    missing = None
    try:
        import pyspark
    except ImportError:
        missing = "pyspark is not installed"
    if missing is None and shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        missing = "no Java runtime (java not on PATH and JAVA_HOME unset)"
    if missing is not None:
        if os.environ.get("CI"):
            pytest.fail(f"live Spark tests cannot run in CI: {missing}")
        pytest.skip(missing)
    return pyspark


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """A PySpark local[2] session (UI off, 3 shuffle partitions, small driver memory, log level WARN)."""
    _pyspark_or_skip()
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master("local[2]").appName("ckptfix-tests")
    for key, value in SESSION_CONFS.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def spark_version(spark: Any) -> str:
    """``major.minor`` of the live Spark, e.g. ``"4.3"``."""
    return ".".join(spark.version.split(".")[:2])


@pytest.fixture(scope="session")
def spark_bases(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], tuple[Path, Path, Path]]:
    """``get(scenario) -> (ckpt, input_dir, output_dir)``: the scenario's base checkpoint, built once per session
    on first use. Never damage it: copy it with ``tests.spark.harness.copy_base`` first."""
    root = tmp_path_factory.mktemp("spark-bases")
    cache: dict[str, tuple[Path, Path, Path]] = {}
    failed: dict[str, str] = {}

    def get(name: str) -> tuple[Path, Path, Path]:
        if name in failed:
            pytest.fail(f"base checkpoint for {name} could not be built: {failed[name]}")
        if name not in cache:
            try:
                cache[name] = build_base(spark, SCENARIOS[name], root / name)
            except Exception as exc:
                failed[name] = str(exc)
                raise
        return cache[name]

    return get


#: fixtures that start a JVM (the live session, or a Spark 3.5 interpreter run as a subprocess)
SPARK_FIXTURES = frozenset({"spark", "spark_bases", "spark_version", "py35"})
#: fixtures that start moto's S3 server (tests/support/s3.py)
S3_FIXTURES = frozenset({"moto_server", "s3_bucket"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test that starts Spark carries the ``spark`` marker, so ``-m "not spark"`` is really JVM-free; every
    test that starts moto's S3 server the ``s3`` marker."""
    for fixtures, marker, what in ((SPARK_FIXTURES, "spark", "Spark"), (S3_FIXTURES, "s3", "moto's S3 server")):
        unmarked = [
            item.nodeid
            for item in items
            if fixtures & set(getattr(item, "fixturenames", ())) and item.get_closest_marker(marker) is None
        ]
        if unmarked:
            raise pytest.UsageError(f"tests that start {what} without @pytest.mark.{marker}: " + ", ".join(unmarked))
    # pytest-xdist (``-n 2 --dist loadgroup``): tests go to the workers by module (a module's fixtures are built
    # once), the live-Spark ones too: each worker starts its own SparkSession at its first such test (one per
    # worker process, never one per test). Pinning them all to one worker made that worker the suite's critical
    # path (about 2,000 s of tests on CI's 2 cores, while the other worker ran out of work)
    for item in items:
        item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))
