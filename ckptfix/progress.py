"""How long-running library calls report progress; the library never prints, the CLI renders.

Two shapes, one place:

* :class:`Observer`: counted stages (``stage("listing", total)`` then ``advance()``), for scans whose size is
  known (audit, relocation);
* :data:`Messages`: one line per step (``"wrote offsets/7"``), for runs whose steps are few and named (the repair
  engine's apply/undo/resume, provider migration, repartitioning).

async-off reports typed events (``ckptfix.spark.async_off.Event``) through a callback of the :data:`Messages`
shape but with an event instead of a string, because its steps carry data (batch ids, Spark's answers).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

#: one line per step of a run
Messages = Callable[[str], None]


class Observer(Protocol):
    """Counted progress of a scan."""

    def stage(self, name: str, total: int | None = None) -> None: ...

    def advance(self, n: int = 1) -> None: ...


class NullObserver:
    """An observer that ignores everything (the default)."""

    def stage(self, name: str, total: int | None = None) -> None:
        pass

    def advance(self, n: int = 1) -> None:
        pass


__all__ = ["Messages", "NullObserver", "Observer"]
