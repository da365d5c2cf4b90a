"""What ``ckptfix advise`` reads: StreamingQueryProgress events, as frozen values.

Field names follow Spark's ``StreamingQueryProgress.jsonValue`` / ``StateOperatorProgress.jsonValue``
(sql/api/.../streaming/progress.scala in 4.x, sql/core/.../streaming/progress.scala in 3.5):
``id``, ``runId``, ``name``, ``timestamp``, ``batchId``, ``batchDuration``, ``durationMs`` {addBatch,
commitOffsets, getBatch, latestOffset, queryPlanning, triggerExecution, walCommit, ...},
``stateOperators[]`` {operatorName, numRowsTotal, numRowsUpdated, allUpdatesTimeMs, numRowsRemoved,
allRemovalsTimeMs, commitTimeMs, memoryUsedBytes, numRowsDroppedByWatermark, numShufflePartitions,
numStateStoreInstances, customMetrics {...}}, ``sources[]``, ``sink``.

``commitTimeMs``, the other ``*TimeMs`` fields and the timing/size/sum custom metrics are SQLMetrics
summed over all tasks of the batch (``StateStoreWriter.getProgress`` reads ``longMetric(...).value``),
so ``commitTimeMs`` is the total commit time of all partitions, not the wall-clock time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Origin:
    """Where an event was read: a file and the 1-based line it starts on (or the element of a JSON array)."""

    path: str
    line: int | None = None
    element: int | None = None

    def where(self) -> str:
        if self.line is not None:
            return f"{self.path}:{self.line}"
        if self.element is not None:
            return f"{self.path}[{self.element}]"
        return self.path


@dataclass(frozen=True)
class StateOp:
    """One entry of ``stateOperators``."""

    name: str
    commit_ms: int | None
    partitions: int | None  # numShufflePartitions = tasks of the stateful stage
    instances: int | None  # numStateStoreInstances (4 per partition for a stream-stream join)
    rows_total: int | None
    rows_updated: int | None
    memory_bytes: int | None
    update_ms: int | None
    removal_ms: int | None
    custom: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class ProgressEvent:
    query_id: str
    run_id: str
    name: str | None
    timestamp: str
    batch_id: int
    batch_duration: int | None  # ``batchDuration`` (absent before Spark 3.2)
    duration_ms: dict[str, int]
    state_ops: tuple[StateOp, ...]
    num_input_rows: int | None
    origin: Origin

    @property
    def batch_ms(self) -> int | None:
        """Wall time of the trigger: ``durationMs.triggerExecution``, else ``batchDuration``."""
        t = self.duration_ms.get("triggerExecution")
        return t if t is not None else self.batch_duration

    @property
    def executed(self) -> bool:
        """A trigger that ran a micro-batch (has ``addBatch``); idle triggers only look for new data."""
        return "addBatch" in self.duration_ms

    def key(self) -> tuple[str, str, int, str]:
        return (self.query_id, self.run_id, self.batch_id, self.timestamp)


@dataclass(frozen=True)
class Skipped:
    """Input that was not a progress event, reported with where it is, what was expected and what was found."""

    path: str
    where: str  # "line 12", "element 3", ...
    expected: str
    found: str

    def __str__(self) -> str:
        return f"{self.path}: {self.where}: expected {self.expected}, found {self.found}"


@dataclass(frozen=True)
class InputSummary:
    path: str
    kind: str  # "json-document", "json-array", "json-lines", "driver-log"
    events: int
    skipped: int
    other_lines: int  # log lines that are not progress events (driver-log / event-log input)


@dataclass(frozen=True)
class Parsed:
    events: list[ProgressEvent]
    skipped: list[Skipped]
    summary: InputSummary


def _int(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return None
