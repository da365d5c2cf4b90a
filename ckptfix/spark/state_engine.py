"""``--engine spark``: read state with one PySpark task per partition.

The driver resolves and checks the selection exactly as the local engine does (so errors
are the same one line), then each task runs the local reader on its partition -- on an
executor that has ckptfix installed and can reach the checkpoint -- and the rows stream
back to the driver in partition order. The rows are the local engine's, by construction:
the same code decodes them, Spark only distributes the work.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from ckptfix.state.read import StateRead, read_changes, read_state, select


def _partition_rows(url: str, kwargs: Mapping[str, Any], changes: bool) -> Any:
    def run(parts: Iterator[int]) -> Iterator[dict[str, Any]]:
        for p in parts:
            reader = read_changes if changes else read_state
            yield from reader(url, partition=p, **kwargs)

    return run


def read_state_spark(spark: Any, url: str, *, changes: bool = False, **kwargs: Any) -> StateRead:
    """Like :func:`read_state` (or :func:`read_changes` with ``changes=True``), the work done
    by Spark tasks. ``kwargs`` must not hold ``partition`` other than None."""
    partition = kwargs.pop("partition", None)
    local = (read_changes if changes else read_state)(url, partition=partition, **kwargs)  # validates, on the driver
    parts = local.selection.partitions
    rdd = spark.sparkContext.parallelize(parts, max(len(parts), 1))
    rows = rdd.mapPartitions(_partition_rows(url, kwargs, changes)).toLocalIterator(prefetchPartitions=True)
    local.rows = iter(rows)
    return local


__all__ = ["read_state_spark", "select"]
