"""Audit every checkpoint below a prefix (``ckptfix scan``): the platform team's question before an upgrade, "which
of our queries will not restart on Spark X?", in one run instead of a shell loop over ``ckptfix audit``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ckptfix.audit.engine import audit
from ckptfix.audit.model import Report
from ckptfix.audit.targets import parse_target
from ckptfix.checkpoint import Checkpoint
from ckptfix.errors import CkptfixError, UsageError, error_line
from ckptfix.progress import ProgressLike, progress_of


@dataclass
class Scanned:
    """One checkpoint found: its audit, or why it could not be audited (one line, as ``ckptfix audit`` would
    print it with exit 2)."""

    url: str
    report: Report | None = None
    error: str | None = None
    error_kind: str | None = None

    def fails(self, fail_on: str, ignore: Iterable[str] = ()) -> bool:
        """Not auditable, an unknown verdict, or a finding at or above ``fail_on`` of a rule not in ``ignore``."""
        if self.report is None:
            return True
        return self.report.fails(fail_on, ignore)

    @property
    def status(self) -> str:
        """``restarts``, ``wrong`` (restarts, but with silently wrong results: the verdict's hazards), ``fails``,
        ``unknown`` (ckptfix cannot tell) or ``unreadable`` (not audited)."""
        if self.report is None:
            return "unreadable"
        v = self.report.verdict
        if v.restarts and v.hazards:
            return "wrong"  # new-user trial 4: such a checkpoint was "OK" in the scan
        return {True: "restarts", False: "fails", None: "unknown"}[v.restarts]


@dataclass
class ScanReport:
    roots: list[str]
    target: str
    checkpoints: list[Scanned] = field(default_factory=list)

    def fails(self, fail_on: str, ignore: Iterable[str] = ()) -> bool:
        ignore = tuple(ignore)
        return any(c.fails(fail_on, ignore) for c in self.checkpoints)

    def counts(self) -> dict[str, int]:
        out = {"restarts": 0, "wrong": 0, "fails": 0, "unknown": 0, "unreadable": 0}
        for c in self.checkpoints:
            out[c.status] += 1
        return out

    def __repr__(self) -> str:
        counts = ", ".join(f"{k}={v}" for k, v in self.counts().items() if v)
        return f"<ScanReport {', '.join(map(repr, self.roots))} target={self.target} {counts or 'no checkpoints'}>"


def scan(
    roots: Iterable[str],
    target_spark: str | None = None,
    *,
    storage_options: Mapping[str, Any] | None = None,
    deep: bool = False,
    session_conf: Mapping[str, str] | None = None,
    progress: ProgressLike = None,
) -> ScanReport:
    """Find every checkpoint at or below each root (:meth:`Checkpoint.find`) and audit it as ``ckptfix audit``
    does. A root that cannot be listed, or holds no checkpoint, raises (the input is wrong); a checkpoint that
    cannot be audited is kept with its error, and the others are still audited."""
    target = parse_target(target_spark)
    roots = list(roots)
    if not roots:
        raise UsageError("expected at least one location to scan")
    obs = progress_of(progress)
    report = ScanReport(roots, target.label)
    seen: set[str] = set()
    for root in roots:
        obs.stage(f"listing {root}")
        found = Checkpoint.find(root, storage_options)
        if not found:
            raise CkptfixError(
                f"{root}: expected one or more Structured Streaming checkpoints at or below it (a directory "
                "holding two of metadata, offsets/, commits/, sources/, state/, or only such entries), found none"
            )
        for url, ckpt in found:
            if url in seen:  # roots that overlap
                continue
            seen.add(url)
            if not isinstance(ckpt, Checkpoint):
                report.checkpoints.append(Scanned(url, error=error_line(ckpt), error_kind=type(ckpt).__name__))
                continue
            obs.stage(f"auditing {url}")
            try:
                one = audit(
                    url,
                    target.label,
                    storage_options=storage_options,
                    deep=deep,
                    checkpoint=ckpt,
                    session_conf=session_conf,
                )
            except (CkptfixError, OSError) as exc:
                report.checkpoints.append(Scanned(url, error=error_line(exc), error_kind=type(exc).__name__))
                continue
            report.checkpoints.append(Scanned(url, one))
    return report
