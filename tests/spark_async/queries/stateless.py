"""Query builders for the async-off tests (the documented contract: ``build(spark)`` returns the UNSTARTED
DataStreamWriter of the query as it ran, without checkpointLocation).

The directories come from the environment, so that one module serves every test copy:
``CKPTFIX_TEST_ASYNC_INPUT`` (input JSON files), ``CKPTFIX_TEST_ASYNC_OUTPUT`` (foreachBatch output).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tests.spark.queries import _build_agg, _build_filesink, _build_stateless, _source

PROCESSING_TIME = "400 milliseconds"
OVERRIDE = "_asyncProgressTrackingOverrideSinkSupportCheck"  # Spark's testing-only sink-check switch


def _dirs() -> tuple[Path, Path]:
    return Path(os.environ["CKPTFIX_TEST_ASYNC_INPUT"]), Path(os.environ["CKPTFIX_TEST_ASYNC_OUTPUT"])


def build(spark: Any) -> Any:
    """The async scenario's query: file source (maxFilesPerTrigger=1) -> foreachBatch. Spark refuses async
    tracking for foreachBatch unless its testing option overrides the sink check, which the original async run
    set too (tests/spark/queries.py SCENARIOS["async"])."""
    input_dir, output_dir = _dirs()
    writer = _build_stateless(spark, input_dir, output_dir)
    return writer.option(OVERRIDE, "true").trigger(processingTime=PROCESSING_TIME)


def available_now(spark: Any) -> Any:
    return build(spark).trigger(availableNow=True)


def once(spark: Any) -> Any:
    return build(spark).trigger(once=True)


def file_sink(spark: Any) -> Any:
    input_dir, output_dir = _dirs()
    return _build_filesink(spark, input_dir, output_dir.with_name("filesink_out")).trigger(
        processingTime=PROCESSING_TIME
    )


def stateful(spark: Any) -> Any:
    input_dir, output_dir = _dirs()
    writer = _build_agg(spark, input_dir, output_dir)
    return writer.option(OVERRIDE, "true").trigger(processingTime=PROCESSING_TIME)


def foreach_batch_no_override(spark: Any) -> Any:
    input_dir, output_dir = _dirs()
    return _build_stateless(spark, input_dir, output_dir).trigger(processingTime=PROCESSING_TIME)


def other_input(spark: Any) -> Any:
    """Same shape, another input directory: the checkpoint's file source log names files elsewhere."""
    _, output_dir = _dirs()
    other = Path(os.environ["CKPTFIX_TEST_ASYNC_OTHER_INPUT"])
    writer = _build_stateless(spark, other, output_dir)
    return writer.option(OVERRIDE, "true").trigger(processingTime=PROCESSING_TIME)


def own_checkpoint(spark: Any) -> Any:
    return build(spark).option("checkpointLocation", os.environ["CKPTFIX_TEST_ASYNC_OTHER_INPUT"])


def not_writer(spark: Any) -> Any:
    input_dir, _ = _dirs()
    return _source(spark, input_dir)


def raises(spark: Any) -> Any:
    raise RuntimeError("the builder failed on purpose")


NOT_CALLABLE = 42
