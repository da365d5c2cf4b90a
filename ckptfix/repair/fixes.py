"""Planners: from an audit finding to plan actions, with what Spark will do afterwards.

A planner gets the audit context and a plan builder, adds actions, and returns the effects
(sentences for the user: which batches Spark re-runs, what a sink may see twice). It raises
:class:`CannotFix` with the reason when no safe change exists.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ckptfix.audit.context import AuditContext
from ckptfix.audit.model import Finding, Report
from ckptfix.checkpoint import Checkpoint
from ckptfix.repair.builder import PlanBuilder

STRATEGIES = ("least-reprocessing", "truncate")


@dataclass
class FixContext:
    ckpt: Checkpoint
    report: Report
    audit: AuditContext
    builder: PlanBuilder
    strategy: str
    options: Mapping[str, Any]  # e.g. query_id given by the user
    #: what planners have already fixed in this plan (e.g. the state stores rebuilt), for findings that share it
    covered: set[str] = field(default_factory=set)


Planner = Callable[[FixContext, Finding], list[str]]
PLANNERS: dict[str, Planner] = {}
#: rules whose every finding is planned, not only the first: each names its own file or store (hunt 13: of three
#: partitions with a corrupt snapshot only the first was rebuilt, and Spark failed on the next)
EACH_FINDING: set[str] = set()


def fixes(*rule_ids: str, each: bool = False) -> Callable[[Planner], Planner]:
    def register(fn: Planner) -> Planner:
        for rule_id in rule_ids:
            PLANNERS[rule_id] = fn
            if each:
                EACH_FINDING.add(rule_id)
        return fn

    return register
