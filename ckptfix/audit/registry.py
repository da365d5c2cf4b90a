"""Rules are small registered units: id, default severity, title, docs, check."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ckptfix.audit.model import SEVERITIES, Evidence, Finding, Skipped, SparkError

if TYPE_CHECKING:
    from ckptfix.audit.context import AuditContext

Check = Callable[["AuditContext"], Iterable[Finding | Skipped]]


@dataclass(frozen=True)
class Rule:
    id: str
    severity: str
    title: str
    docs: str
    fix: str

    def finding(
        self,
        message: str,
        evidence: Iterable[Evidence] = (),
        *,
        severity: str | None = None,
        fix: str | None = None,
        spark_error: SparkError | None = None,
        stage: int | None = None,
        silent: bool = False,
        undecided: bool = False,
    ) -> Finding:
        return Finding(
            rule_id=self.id,
            severity=severity or self.severity,
            title=self.title,
            message=message,
            evidence=tuple(evidence),
            fix=self.fix if fix is None else fix,
            spark_error=spark_error,
            stage=stage,
            silent=silent,
            undecided=undecided,
        )


RULES: dict[str, Rule] = {}
CHECKS: list[Check] = []


def define(rule_id: str, severity: str, title: str, docs: str, fix: str) -> Rule:
    """Register a rule id once; checks may emit findings of several rules."""
    if rule_id in RULES:
        raise ValueError(f"duplicate rule id {rule_id}")
    if severity not in SEVERITIES:
        raise ValueError(f"{rule_id}: unknown severity {severity}")
    rule = Rule(rule_id, severity, title, docs, fix)
    RULES[rule_id] = rule
    return rule


def check(fn: Check) -> Check:
    CHECKS.append(fn)
    return fn


def lookup(ids: Iterable[str], option: str | None = None) -> list[Rule]:
    """The rules with these ids (any case, each once, in the order given); an unknown id is a usage error that
    names rules starting the same way. The rule modules must be loaded (:mod:`ckptfix.audit.engine`)."""
    from ckptfix.errors import UsageError

    wanted = [i.upper() for i in ids]
    unknown = [i for i in wanted if i not in RULES]
    if unknown:
        near = sorted({r for u in unknown for r in RULES if u.split("-")[0] == r.split("-")[0]})[:6]
        hint = f"; rules starting the same way: {', '.join(near)}" if near else "; `ckptfix rules` lists them"
        raise UsageError(f"no audit rule {', '.join(unknown)}{f' ({option})' if option else ''}{hint}")
    return [RULES[i] for i in dict.fromkeys(wanted)]
