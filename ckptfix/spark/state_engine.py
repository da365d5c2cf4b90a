"""``--engine spark``: read state with one PySpark task per partition.

The driver resolves and checks the selection exactly as the local engine does (so errors
are the same one line), then each task runs the local reader on its partition -- on an
executor that has ckptfix installed and can reach the checkpoint -- and the rows stream
back to the driver in partition order. The rows are the local engine's, by construction:
the same code decodes them, Spark only distributes the work.

Writers that take Arrow (JSON lines, Parquet: ``batches()``) get what the local reader's
``batches()`` gives, shipped as Arrow IPC streams: a partition decoded in bulk crosses as
columns, not one pickled dict per row. Iterating gives row dicts, as the local engine does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ckptfix.state.read import StateRead, read_changes, read_state, row_chunks, select

_ROWS, _ARROW = "rows", "arrow"


def _partition_rows(url: str, kwargs: Mapping[str, Any], changes: bool) -> Callable[[Iterator[int]], Iterator[Any]]:
    def run(parts: Iterator[int]) -> Iterator[dict[str, Any]]:
        for p in parts:
            reader = read_changes if changes else read_state
            yield from reader(url, partition=p, **kwargs)

    return run


def _partition_batches(
    url: str, kwargs: Mapping[str, Any], changes: bool
) -> Callable[[Iterator[int]], Iterator[tuple[str, Any]]]:
    def run(parts: Iterator[int]) -> Iterator[tuple[str, Any]]:
        for p in parts:
            reader = read_changes if changes else read_state
            rows = reader(url, partition=p, **kwargs).rows
            for item in rows.batches():  # type: ignore[attr-defined]
                if isinstance(item, list):  # rows decoded one by one (also all there is without pyarrow)
                    yield _ROWS, item
                    continue
                import pyarrow as pa

                sink = pa.BufferOutputStream()
                with pa.ipc.new_stream(sink, item.schema) as writer:
                    writer.write_batch(item)
                yield _ARROW, sink.getvalue().to_pybytes()

    return run


class SparkRows(Iterator[dict[str, Any]]):
    """The rows of a read done by Spark tasks: row dicts when iterated, the local reader's
    ``batches()`` (Arrow record batches or lists of row dicts) when a writer asks for them."""

    def __init__(self, spark: Any, parts: list[int], url: str, kwargs: Mapping[str, Any], changes: bool) -> None:
        self.spark, self.parts, self.url, self.kwargs, self.changes = spark, parts, url, kwargs, changes
        self._rows: Iterator[dict[str, Any]] | None = None

    def _collect(self, fn: Callable[[Iterator[int]], Iterator[Any]]) -> Iterator[Any]:
        rdd = self.spark.sparkContext.parallelize(self.parts, max(len(self.parts), 1))
        return iter(rdd.mapPartitions(fn).toLocalIterator(prefetchPartitions=True))

    def __iter__(self) -> SparkRows:
        return self

    def __next__(self) -> dict[str, Any]:
        if self._rows is None:
            self._rows = self._collect(_partition_rows(self.url, self.kwargs, self.changes))
        return next(self._rows)

    def batches(self) -> Iterator[Any]:
        """As :meth:`ckptfix.state.read.Rows.batches`, partition by partition in order. A driver without pyarrow
        gets lists of row dicts (the tasks send rows, as iterating does)."""
        try:
            import pyarrow as pa
        except ImportError:
            yield from row_chunks(self)
            return
        for kind, payload in self._collect(_partition_batches(self.url, self.kwargs, self.changes)):
            if kind == _ROWS:
                yield payload
            else:
                yield pa.ipc.open_stream(payload).read_next_batch()


def read_state_spark(spark: Any, url: str, *, changes: bool = False, **kwargs: Any) -> StateRead:
    """Like :func:`read_state` (or :func:`read_changes` with ``changes=True``), the work done
    by Spark tasks. ``kwargs`` must not hold ``partition`` other than None."""
    partition = kwargs.pop("partition", None)
    local = (read_changes if changes else read_state)(url, partition=partition, **kwargs)  # validates, on the driver
    local.rows = SparkRows(spark, local.selection.partitions, url, kwargs, changes)
    return local


__all__ = ["SparkRows", "read_state_spark", "select"]
