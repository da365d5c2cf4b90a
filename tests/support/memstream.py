"""Spark's ``MemoryStream`` (the source of Spark's own streaming test suites, Scala-only) driven from PySpark through
py4j, to restart the checkpoints Spark ships as test resources with the queries their suites use.

Works with PySpark 3.5 (``org.apache.spark.sql.execution.streaming.MemoryStream``) and 4.x (moved to
``...streaming.runtime``). Also the ``--against`` builders for those checkpoints (``MODULE:FUNCTION`` gets a
SparkSession and returns an unstarted writer).
"""

from __future__ import annotations

from typing import Any


def memory_stream(spark: Any) -> Any:
    """A new ``MemoryStream[Int]`` of ``spark`` (its column is ``value``)."""
    jvm = spark._jvm
    encoder, ctx = jvm.org.apache.spark.sql.Encoders.scalaInt(), spark._jsparkSession.sqlContext()
    try:
        return jvm.org.apache.spark.sql.execution.streaming.runtime.MemoryStream.apply(encoder, ctx)
    except Exception:  # noqa: BLE001 - py4j: "JavaPackage is not callable" where the class is not there (3.5)
        return jvm.org.apache.spark.sql.execution.streaming.MemoryStream.apply(encoder, ctx)


def add(spark: Any, stream: Any, *values: int) -> None:
    """``stream.addData(values: _*)``: one offset more."""
    jvm = spark._jvm
    items = jvm.java.util.ArrayList()
    for v in values:
        items.add(v)
    try:
        seq = jvm.scala.jdk.javaapi.CollectionConverters.asScala(items).toSeq()  # Scala 2.13
    except Exception:  # noqa: BLE001
        seq = jvm.scala.collection.JavaConverters.asScalaBufferConverter(items).asScala().toSeq()
    stream.addData(seq)


def frame(spark: Any, stream: Any) -> Any:
    """``stream.toDF()`` as a PySpark DataFrame."""
    try:
        from pyspark.sql.classic.dataframe import DataFrame  # PySpark 4.x
    except ImportError:
        from pyspark.sql import DataFrame
    return DataFrame(stream.toDF(), spark)


def async_gap_query(spark: Any) -> Any:
    """AsyncProgressTrackingMicroBatchExecutionSuite "test gaps in offset log": ``select value`` with async progress
    tracking on (interval 0); a noop sink (Spark's test sink, MemorySink, cannot recover from a checkpoint when
    started from PySpark)."""
    stream = memory_stream(spark)
    for i in range(5):
        add(spark, stream, i)
    return (
        frame(spark, stream)
        .select("value")
        .writeStream.format("noop")
        .option("asyncProgressTrackingEnabled", "true")
        .option("asyncProgressTrackingCheckpointIntervalMs", "0")
    )


def sync_gap_query(spark: Any) -> Any:
    """The same query with async progress tracking off (the documented turn-off done wrong)."""
    stream = memory_stream(spark)
    for i in range(5):
        add(spark, stream, i)
    return frame(spark, stream).select("value").writeStream.format("noop")
