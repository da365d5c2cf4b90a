"""Scenarios of the cross-version matrix (tests/fixtures/matrix/record.py, tests/audit/test_version_matrix.py).

The ones tests/spark/queries.py has are reused (with fewer batches; its builders of stream-stream joins and
applyInPandasWithState too); the others (RocksDB without changelog, dropDuplicates, transformWithStateInPandas)
are defined here.
Everything must run under PySpark 3.3 to 4.3 where the feature exists (``MIN_SPARK``) and must not import
pytest. Functions that run in Python workers are defined inside the builders, so they are pickled by value.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path
from typing import Any

from tests.spark.queries import (
    ROCKSDB_PROVIDER,
    SCENARIOS,
    Scenario,
    _build_join,
    _build_join_nonnull,
    _build_pandas_state,
    _build_tws_pandas,
    _foreach_batch_writer,
    _verify_join,
    _with_ts,
)

BATCHES = 3  # input files (= batches) of a base run
ROCKSDB = {"spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER}


# ------------------------------------------------------------------------------------------- dedup


def _build_dedup(spark: Any, input_dir: Path, output_dir: Path) -> Any:
    df = _with_ts(spark, input_dir).withWatermark("ts", "1 hour").dropDuplicates(["key"])
    return _foreach_batch_writer(df.select("key", "id"), output_dir)


def _verify_dedup(inputs: list[dict[str, Any]], out: list[tuple[int, dict[str, Any]]]) -> tuple[bool, str]:
    got = Counter(r["key"] for _, r in out)
    want = {r["key"] for r in inputs}
    ok = set(got) == want and all(n == 1 for n in got.values())
    return ok, "each key once" if ok else f"keys emitted (want each of {sorted(want)} once): {dict(got)}"


# ------------------------------------------------------------------------------------------- the matrix


def _few(base: str, **changes: Any) -> Scenario:
    return dataclasses.replace(SCENARIOS[base], base_files=BATCHES, **changes)


MATRIX: dict[str, Scenario] = {
    s.name: s
    for s in [
        _few("agg_hdfs"),
        _few("agg_rocksdb_cl"),
        _few("agg_hdfs", name="agg_rocksdb", confs=ROCKSDB),
        Scenario("dedup", _build_dedup, stateful=True, base_files=BATCHES, verify=_verify_dedup),
        Scenario("join", _build_join, stateful=True, base_files=BATCHES, verify=_verify_join),
        Scenario("join_nonnull", _build_join_nonnull, stateful=True, base_files=BATCHES, verify=_verify_join),
        Scenario("pandas_state", _build_pandas_state, stateful=True, base_files=BATCHES),
        Scenario("tws_pandas", _build_tws_pandas, confs=ROCKSDB, stateful=True, base_files=BATCHES),
        SCENARIOS["async"],
        _few("filesink"),
    ]
}

# (major, minor) of the first Spark release that has the scenario's API
MIN_SPARK: dict[str, tuple[int, int]] = {
    "agg_rocksdb_cl": (3, 4),
    "pandas_state": (3, 4),
    "async": (3, 4),
    "tws_pandas": (4, 0),
}


def available(scenario: str, version: str) -> str | None:
    """None if ``scenario`` runs on Spark ``version`` ("4.0.5" or "4.0"), else the reason it cannot."""
    need = MIN_SPARK.get(scenario)
    have = tuple(int(x) for x in version.split(".")[:2])
    if need is not None and have < need:
        return f"{scenario} needs Spark {need[0]}.{need[1]}+ (not in {version})"
    return None
