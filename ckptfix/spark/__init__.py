"""Everything that needs PySpark (the ``[spark]`` extra), imported only where it is used."""

from __future__ import annotations

from typing import Any

from ckptfix.errors import MissingExtra


def session(master: str | None = None, app: str = "ckptfix") -> Any:
    """The active SparkSession, or a new one (``local[*]`` unless ``master`` or
    ``$SPARK_MASTER`` says otherwise)."""
    import os
    import sys

    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise MissingExtra("pyspark", "spark") from None
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app).master(master or os.environ.get("SPARK_MASTER", "local[*]"))
    builder = builder.config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
    return builder.getOrCreate()
