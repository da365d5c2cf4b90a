"""``ckptfix advise PROGRESS...``: state commit cost and recommendations from StreamingQueryProgress events."""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path

import typer

from ckptfix.advise.analyze import LEVELS, Advice
from ckptfix.cli.common import (
    EndpointOption,
    Format,
    FormatOption,
    QuietOption,
    StorageOption,
    emit,
    err,
    note,
    out,
    storage_options,
    write_out,
)
from ckptfix.errors import UsageError


class FailOn(str, Enum):
    never = "never"
    info = "info"
    warning = "warning"
    high = "high"


def advise(
    progress: list[str] = typer.Argument(
        ...,
        metavar="PROGRESS...",
        help="Progress events: JSON document/array, JSON lines or a driver log "
        "(local path, fsspec URL, or - for stdin).",
    ),
    query: str | None = typer.Option(None, "--query", help="Only the query with this name, id or runId."),
    concurrency: int | None = typer.Option(
        None,
        "--concurrency",
        min=1,
        help="Task slots running the stateful stage (executors x cores / spark.task.cpus). "
        "Default: one slot per partition (waves = 1, the lower bound).",
    ),
    chart: Path | None = typer.Option(None, "--chart", help="Write an HTML page (inline SVG) of batch vs commit time."),
    strict: bool = typer.Option(False, "--strict", help="Treat any skipped input line as an error (exit 2)."),
    fail_on: FailOn = typer.Option(FailOn.never, "--fail-on", help="Exit 1 when a recommendation reaches this level."),
    fmt: Format = FormatOption,
    storage_option: list[str] = StorageOption,
    endpoint_url: str | None = EndpointOption,
    quiet: bool = QuietOption,
) -> None:
    """Per query: batch duration, state commit time per task and its share of the batch, RocksDB commit phases,
    and recommendations with the numbers and thresholds behind them.

    Exit 0: analysed; 1: a recommendation at or above --fail-on; 2: unreadable input or bad usage; 3: a bug.
    """
    from ckptfix.advise import advise_data, read_one
    from ckptfix.render import advice as render

    opts = storage_options(fmt, storage_option, endpoint_url)

    def run() -> Advice:
        items = []
        for p in progress:
            if p == "-":
                items.append(("<stdin>", sys.stdin.buffer.read()))
            else:
                items.append((p, read_one(p, opts)))
        a = advise_data(items, concurrency=concurrency, query=query)
        if strict and a.skipped:
            raise UsageError(f"--strict: {len(a.skipped)} input lines skipped; first: {a.skipped[0]}")
        if chart is not None:
            from ckptfix.advise.chart import html

            write_out("--chart", chart, html(a).encode("utf-8"))
        return a

    a = run()
    if fmt is Format.json:
        emit(render.to_json(a))
    else:
        if not quiet:
            render.summary(a, err())
        render.text(a, out())
        if chart is not None:
            note(quiet, f"chart written to {chart}")
    worst = a.worst_level()
    if fail_on is not FailOn.never and worst is not None and LEVELS.index(worst) >= LEVELS.index(fail_on.value):
        raise typer.Exit(1)
