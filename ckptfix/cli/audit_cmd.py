from __future__ import annotations

from enum import Enum

import typer

from ckptfix.audit import audit as run_audit
from ckptfix.audit.registry import RULES
from ckptfix.audit.targets import NEWEST, SUPPORTED
from ckptfix.cli.common import (
    EndpointOption,
    Format,
    FormatOption,
    QuietOption,
    RichObserver,
    StorageOption,
    err,
    guarded,
    out,
    storage_options,
)
from ckptfix.render import jsonout, text


class FailOn(str, Enum):
    error = "error"
    warning = "warning"
    info = "info"
    never = "never"


def audit(
    checkpoint: str = typer.Argument(..., help="Checkpoint location: a path, file://, s3://bucket/prefix, memory://"),
    target_spark: str = typer.Option(
        NEWEST, "--target-spark", help=f"Spark version to predict: {', '.join(SUPPORTED)}."
    ),
    deep: bool = typer.Option(False, "--deep", help="Read every log and state file, not just what a restart reads."),
    sink: str | None = typer.Option(None, "--sink", help="A file sink's output path, to check its _spark_metadata."),
    stateful: bool | None = typer.Option(
        None,
        "--stateful/--stateless",
        help="Say whether the query has stateful operators (default: infer from the files).",
    ),
    fail_on: FailOn = typer.Option(FailOn.error, "--fail-on", help="Exit 1 when a finding reaches this severity."),
    fmt: Format = FormatOption,
    storage_option: list[str] = StorageOption,
    endpoint_url: str | None = EndpointOption,
    quiet: bool = QuietOption,
) -> None:
    """Find inconsistencies and predict whether Spark will restart the checkpoint.

    Exit 0: no finding at or above --fail-on; 1: findings; 2: the checkpoint cannot be audited.
    """
    opts = storage_options(fmt, storage_option, endpoint_url)
    with RichObserver(not quiet) as observer:
        report = guarded(
            fmt,
            lambda: run_audit(
                checkpoint,
                target_spark,
                storage_options=opts,
                deep=deep,
                sink_path=sink,
                stateful=stateful,
                observer=observer,
            ),
        )
    if fmt is Format.json:
        print(jsonout.report(report))
    else:
        text.report(report, out())
    counts = {s: sum(1 for f in report.findings if f.severity == s) for s in ("error", "warning", "info")}
    if not quiet:
        err().print(
            f"{counts['error']} errors, {counts['warning']} warnings, {counts['info']} info; "
            f"read {report.stats.files_read} of {report.stats.entries_listed} entries",
            highlight=False,
        )
    if fail_on is not FailOn.never and report.fails(fail_on.value):
        raise typer.Exit(1)


def rules(fmt: Format = FormatOption) -> None:
    """List every audit rule: id, default severity, title, what it means and the fix."""
    if fmt is Format.json:
        import json

        print(
            json.dumps(
                [
                    {"id": r.id, "severity": r.severity, "title": r.title, "docs": r.docs, "fix": r.fix}
                    for r in RULES.values()
                ],
                indent=2,
            )
        )
        return
    console = out()
    for r in RULES.values():
        console.print(f"[bold]{r.id}[/] ({r.severity}) {r.title}", highlight=False)
        console.print(f"  {r.docs}", highlight=False, soft_wrap=True)
        console.print(f"  fix: {r.fix}", highlight=False, soft_wrap=True)
