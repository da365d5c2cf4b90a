"""applyInPandasWithState, as tests/spark/queries.py ``pandas_state`` writes it, and a changed version of it.

Paths from the environment: CKPTFIX_AQ_INPUT (the base's input dir), CKPTFIX_AQ_OUTPUT (a sink dir).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tests.spark.queries import pandas_state_query


def _query(spark: Any, state_type: str) -> Any:
    return pandas_state_query(
        spark, Path(os.environ["CKPTFIX_AQ_INPUT"]), Path(os.environ["CKPTFIX_AQ_OUTPUT"]), state_type
    )


def same(spark: Any) -> Any:
    return _query(spark, "cnt LONG, total LONG")


def int_count(spark: Any) -> Any:
    """The state's count an INT instead of a LONG: its value schema changes (damage hunt 9, D3)."""
    return _query(spark, "cnt INT, total LONG")
