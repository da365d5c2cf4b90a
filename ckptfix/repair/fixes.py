"""Planners: from an audit finding to plan actions, with what Spark will do afterwards.

A planner gets the audit context and a plan builder, adds actions, and returns the effects
(sentences for the user: which batches Spark re-runs, what a sink may see twice). It raises
:class:`CannotFix` with the reason when no safe change exists.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ckptfix.audit.context import AuditContext
from ckptfix.audit.model import Finding, Report
from ckptfix.checkpoint import Checkpoint
from ckptfix.errors import CkptfixError, FormatError
from ckptfix.repair.builder import PlanBuilder

STRATEGIES = ("least-reprocessing", "truncate")


class CannotFix(CkptfixError):
    """No safe change exists for a finding (the reason says why and what to do instead)."""


@dataclass
class FixContext:
    ckpt: Checkpoint
    report: Report
    audit: AuditContext
    builder: PlanBuilder
    strategy: str
    options: Mapping[str, Any]  # e.g. query_id given by the user


Planner = Callable[[FixContext, Finding], list[str]]
PLANNERS: dict[str, Planner] = {}


def fixes(*rule_ids: str) -> Callable[[Planner], Planner]:
    def register(fn: Planner) -> Planner:
        for rule_id in rule_ids:
            PLANNERS[rule_id] = fn
        return fn

    return register


# -- LOG-ASYNC-GAP ----------------------------------------------------------------------------
def _sink_latest(fc: FixContext) -> int | None:
    sink = fc.audit.sink
    return sink.log.latest if sink is not None else None


def _truncate_to_consecutive(fc: FixContext, rule: str) -> list[str]:
    """Conservative: drop offsets and commits after the newest batch b whose predecessor exists."""
    ck = fc.ckpt
    O = sorted(ck.offsets.files)
    b = next((x for x in reversed(O) if x == 0 or x - 1 in ck.offsets.files), None)
    if b is None:
        raise CannotFix("no offset file has its predecessor: nothing consecutive to truncate to")
    S = _sink_latest(fc)
    if S is not None and b < S:
        raise CannotFix(
            f"the file sink holds batches up to {S}; truncating to {b} makes Spark re-plan batches {b + 1}..{S} "
            "with new data and the sink would skip them (data loss)"
        )
    L = ck.offsets.latest
    for log in (ck.offsets, ck.commits):
        for x in sorted(log.files):
            if x > b:
                fc.builder.delete(log.files[x], f"truncate the logs to batch {b}", rule)
    K2 = max((c for c in ck.commits.files if c <= b), default=None)
    rerun = f"batch {b} is re-run from offsets/{b - 1}" if b != K2 else f"Spark resumes at batch {b + 1}"
    return [
        f"{rerun}; everything after it (batches {b + 1}..{L}) is processed again under new batch ids",
        "a sink idempotent by batch id (foreachBatch keyed on batchId) can receive the same data twice under "
        "different ids; an append sink sees it twice",
    ]


@fixes("LOG-ASYNC-GAP")
def async_gap(fc: FixContext, finding: Finding) -> list[str]:
    """Write offsets/L-1 so that a synchronous restart does what the async restart would
    (spark-logs-and-restart.md §7.5, verified on 3.5.9 and 4.3.0)."""
    ck, rule = fc.ckpt, finding.rule_id
    if ck.state.operators:
        raise CannotFix(
            "state/ has stateful operators, which asynchronous progress tracking never runs: this gap has another "
            "cause; restore offsets/L-1 from a backup or roll back (`ckptfix rollback`)"
        )
    if fc.strategy == "truncate":
        return _truncate_to_consecutive(fc, rule)
    L, K = ck.offsets.latest, ck.commits.latest
    assert L is not None and L > 0
    try:
        ck.offset(L)
    except FormatError as exc:
        raise CannotFix(f"offsets/{L} itself is unreadable ({exc.found}); fix it first") from None
    target = f"offsets/{L - 1}"
    if K is not None and K >= L:
        fc.builder.write(target, ck.read(ck.offsets.files[L]), f"copy of offsets/{L}: batch {L} is committed", rule)
        return [f"Spark resumes at batch {L + 1} from the offsets of batch {L}; no batch is re-run"]
    P = max((b for b in ck.offsets.files if b < L), default=None)
    if P is None:
        raise CannotFix(
            f"offsets/{L} is the only offset file: the async restart would replay from each source's initial offset; "
            "use --strategy truncate, or start a new checkpoint from exported offsets (`ckptfix offsets export`)"
        )
    try:
        ck.offset(P)
    except FormatError as exc:
        raise CannotFix(f"offsets/{P} is unreadable ({exc.found}); restore it first") from None
    S = _sink_latest(fc)
    if S is not None and S >= L:
        raise CannotFix(
            f"the file sink already holds batch {S} >= {L}: re-running batch {L} over a wider range would be skipped "
            "by the sink (data loss); use --strategy truncate only after moving the sink's output"
        )
    fc.builder.write(target, ck.read(ck.offsets.files[P]), f"copy of offsets/{P}, the newest earlier offset file", rule)
    return [
        f"Spark re-runs batch {L} over the range offsets/{P} -> offsets/{L}: the batches {P + 1}..{L} that "
        "asynchronous progress tracking had not persisted are processed again as one batch "
        "(at-least-once: an append sink may see them twice, as after an async restart)",
    ]
