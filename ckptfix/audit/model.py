"""Audit results as values: findings, skipped checks, the restart verdict, the report."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

SEVERITIES = ("info", "warning", "error")


def severity_rank(severity: str) -> int:
    return SEVERITIES.index(severity)


@dataclass(frozen=True)
class SparkError:
    """What Spark raises: Java class, error class (4.x) and a verbatim fragment of the text."""

    exception: str | None
    error_class: str | None
    message: str
    batch: int | None = None

    @property
    def headline(self) -> str:
        name = (self.exception or "").rsplit(".", 1)[-1]
        cls = f"[{self.error_class}] " if self.error_class else ""
        # an exception without a message (EOFException) is matched in Spark's text by its own name: said once
        message = "" if name and self.message in (name, self.exception) else self.message
        sep = ": " if name and (cls or message) else ""
        return f"{name}{sep}{cls}{message}"


@dataclass(frozen=True)
class Evidence:
    path: str
    offset: int | None = None
    expected: str | None = None
    found: str | None = None
    note: str | None = None


@dataclass(frozen=True)
class Finding:
    rule_id: str
    severity: str
    title: str
    message: str
    evidence: tuple[Evidence, ...] = ()
    fix: str = ""
    #: set when this finding stops the restart: what Spark raises and when (lower = sooner)
    spark_error: SparkError | None = None
    stage: int | None = None
    #: Spark restarts, but the result is silently wrong (worse than a crash)
    silent: bool = False
    #: Spark may fail here and the files cannot tell whether it will (the message says why): the verdict is unknown
    undecided: bool = False


@dataclass(frozen=True)
class Skipped:
    rule_id: str
    reason: str
    #: what the verdict then takes for granted (the headline says it): "its query is stateless ..."
    assumption: str | None = None


@dataclass(frozen=True)
class Verdict:
    target: str
    #: None: ckptfix cannot tell (``unknowns`` says why); never True while something undecided may stop it
    restarts: bool | None
    error: SparkError | None = None
    blocking_rule: str | None = None
    hazards: tuple[str, ...] = ()
    unknowns: tuple[str, ...] = ()
    #: what a "will restart" takes for granted that the files cannot show (a check skipped on that assumption)
    assumptions: tuple[str, ...] = ()

    @property
    def exception(self) -> str | None:
        return self.error.exception if self.error else None

    @property
    def error_class(self) -> str | None:
        return self.error.error_class if self.error else None

    @property
    def message(self) -> str | None:
        return self.error.message if self.error else None

    @property
    def batch(self) -> int | None:
        return self.error.batch if self.error else None

    @property
    def headline(self) -> str:
        if self.restarts is None:
            return f"ckptfix cannot tell whether Spark {self.target} restarts this checkpoint: " + "; ".join(
                self.unknowns
            )
        if not self.restarts:
            assert self.error is not None
            return f"Spark {self.target} will fail with {self.error.headline}"
        assuming = f" (assuming {'; '.join(self.assumptions)})" if self.assumptions else ""
        if self.hazards:
            return f"Spark {self.target} will restart this checkpoint{assuming}, but silently: " + "; ".join(
                self.hazards
            )
        return f"Spark {self.target} will restart this checkpoint{assuming}"


@dataclass
class Report:
    checkpoint: str
    target: str
    verdict: Verdict
    findings: list[Finding]
    skipped: list[Skipped] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)
    stats: Any = None

    def __repr__(self) -> str:
        """One line: the dataclass repr held every finding with its evidence (new-user trial 3: 5-10 KB)."""
        counts = ", ".join(
            f"{n} {s}" for s in ("error", "warning", "info") if (n := sum(f.severity == s for f in self.findings))
        )
        blocking = f" blocking={self.verdict.blocking_rule}" if self.verdict.blocking_rule else ""
        return (
            f"<Report {self.checkpoint!r} spark={self.target} restarts={self.verdict.restarts}{blocking} "
            f"findings=[{counts or 'none'}]>"
        )

    def fails(self, fail_on: str, ignore: Iterable[str] = ()) -> bool:
        """Findings at or above ``fail_on``; an unknown verdict is never a pass. Findings of the rules in ``ignore``
        (``--ignore``: accepted by the user) do not count, nor an unknown verdict that only they leave open."""
        ignored = {i.upper() for i in ignore}
        kept = [f for f in self.findings if f.rule_id not in ignored]
        if self.verdict.restarts is None and (not ignored or any(f.undecided for f in kept)):
            return True
        return any(severity_rank(f.severity) >= severity_rank(fail_on) for f in kept)

    def ignored(self, ignore: Iterable[str]) -> list[Finding]:
        """The findings of the rules in ``ignore``."""
        ignored = {i.upper() for i in ignore}
        return [f for f in self.findings if f.rule_id in ignored]
