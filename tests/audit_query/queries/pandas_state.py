"""applyInPandasWithState, as tests/spark/queries.py ``pandas_state`` writes it, and a changed version of it.

Paths from the environment: CKPTFIX_AQ_INPUT (the base's input dir), CKPTFIX_AQ_OUTPUT (a sink dir).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tests.spark.queries import _foreach_batch_writer, _source


def _query(spark: Any, state_type: str) -> Any:
    from pyspark.sql.streaming.state import GroupStateTimeout

    def count(key: Any, pdfs: Any, state: Any) -> Any:
        import pandas as pd

        cnt, total = state.get if state.exists else (0, 0)
        for pdf in pdfs:
            cnt += len(pdf)
            total += int(pdf["value"].sum())
        state.update((cnt, total))
        yield pd.DataFrame({"key": [key[0]], "cnt": [cnt], "total": [total]})

    df = _source(spark, Path(os.environ["CKPTFIX_AQ_INPUT"])).groupBy("key")
    agg = df.applyInPandasWithState(
        count, "key STRING, cnt LONG, total LONG", state_type, "update", GroupStateTimeout.NoTimeout
    )
    return _foreach_batch_writer(agg, Path(os.environ["CKPTFIX_AQ_OUTPUT"])).outputMode("update")


def same(spark: Any) -> Any:
    return _query(spark, "cnt LONG, total LONG")


def int_count(spark: Any) -> Any:
    """The state's count an INT instead of a LONG: its value schema changes (damage hunt 9, D3)."""
    return _query(spark, "cnt INT, total LONG")
