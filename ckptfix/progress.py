"""How long-running library calls report progress: one protocol, :class:`Progress`. The library never prints;
the CLI (or a notebook) renders.

A call reports what fits its work: a scan whose size is known opens counted stages (``stage("listing", total)``
then ``advance()``: audit, relocation); a run of few, named steps reports each (``step("wrote offsets/7")``: the
repair engine's apply/undo/resume, provider migration, repartitioning, async-off, whose steps also carry data
such as ``step="run", kind="batch", batch=7``). An implementation may ignore what it does not show.

Every call that reports progress takes ``progress=``: a :class:`Progress`, ``None`` (nothing is reported), or,
for convenience, a plain callable that receives each step's message and each stage's name (``print``,
``list.append``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class Progress(Protocol):
    """Where a library call reports how far it is."""

    def stage(self, name: str, total: int | None = None) -> None:
        """A counted stage begins (``total`` items, or unknown)."""

    def advance(self, n: int = 1) -> None:
        """``n`` more items of the current stage are done."""

    def step(self, message: str, **data: Any) -> None:
        """One named step of a run is done or under way; ``data`` holds its details for machines."""


class NullProgress:
    """Reports nothing (the default); a base class for a Progress that shows only some of it."""

    def stage(self, name: str, total: int | None = None) -> None:
        pass

    def advance(self, n: int = 1) -> None:
        pass

    def step(self, message: str, **data: Any) -> None:
        pass


class Lines(NullProgress):
    """Each step's message handed to a callable, and each stage's name as it begins (with its count when known:
    ``copying (120)``); the items of a stage are not shown one by one."""

    def __init__(self, fn: Callable[[str], Any]) -> None:
        self.fn = fn

    def stage(self, name: str, total: int | None = None) -> None:
        self.fn(name if total is None else f"{name} ({total})")

    def step(self, message: str, **data: Any) -> None:
        self.fn(message)


#: what ``progress=`` accepts
ProgressLike = Progress | Callable[[str], Any] | None


def progress_of(progress: ProgressLike) -> Progress:
    """``progress=`` as a :class:`Progress`."""
    if progress is None:
        return NullProgress()
    if isinstance(progress, Progress):
        return progress
    if callable(progress):
        return Lines(progress)
    raise TypeError(f"progress: expected a Progress, a callable or None, found {type(progress).__name__}")


__all__ = ["Lines", "NullProgress", "Progress", "ProgressLike", "progress_of"]
