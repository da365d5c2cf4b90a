"""One result per section: how many cases were tried, how many came out clean, the failures (each with what
was tried and what happened), figures, notes; and the table the run prints."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Section:
    name: str
    tried: int = 0
    clean: int = 0
    failures: list[dict[str, Any]] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def failed(self) -> int:
        return self.tried - self.clean

    def add_failures(self, tried: int, failures: list[dict[str, Any]]) -> None:
        self.tried += tried
        self.failures += failures

    def case(self, ok: bool, failure: dict[str, Any] | None = None) -> None:
        self.tried += 1
        if ok:
            self.clean += 1
        elif failure is not None:
            self.failures.append(failure)

    def as_json(self) -> dict[str, Any]:
        return {
            "section": self.name,
            "tried": self.tried,
            "clean": self.clean,
            "failed": self.failed,
            "failures": self.failures,
            "figures": self.figures,
            "notes": self.notes,
        }


def table(sections: list[Section]) -> str:
    rows = [("section", "tried", "clean", "failed")] + [
        (s.name, f"{s.tried:,}", f"{s.clean:,}", f"{s.failed:,}") for s in sections
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = []
    for n, r in enumerate(rows):
        lines.append("  ".join([r[0].ljust(widths[0]), *(c.rjust(w) for c, w in zip(r[1:], widths[1:], strict=True))]))
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)
