"""Everything that needs PySpark (the ``[spark]`` extra), imported only where it is used."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ckptfix.errors import MissingExtra, UsageError


def session(master: str | None = None, app: str = "ckptfix", confs: Mapping[str, str] | None = None) -> Any:
    """The active SparkSession, or a new one (``local[*]`` unless ``master`` or ``$SPARK_MASTER`` says otherwise).

    ``confs`` (``--conf``) go into the builder of a new session, so static confs take effect too; on the active
    session they are set at runtime, and one it refuses is a usage error naming it."""
    import os
    import sys

    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise MissingExtra("pyspark", "spark") from None
    confs = dict(confs or {})
    active = SparkSession.getActiveSession()
    if active is not None:
        for key, value in confs.items():
            try:
                active.conf.set(key, value)
            except Exception as exc:
                from ckptfix.spark.usercode import first_line

                raise UsageError(f"--conf {key}={value}: the running session refuses it: {first_line(exc)}") from None
        return active
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app).master(master or os.environ.get("SPARK_MASTER", "local[*]"))
    builder = builder.config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
    for key, value in confs.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
