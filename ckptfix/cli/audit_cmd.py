from __future__ import annotations

from enum import Enum
from typing import Any

import typer

from ckptfix.audit import audit as run_audit
from ckptfix.audit.registry import RULES, lookup
from ckptfix.cli.common import (
    EndpointOption,
    Format,
    FormatOption,
    QuietOption,
    RichProgress,
    SinkOption,
    StatefulOption,
    StorageOption,
    TargetSparkOption,
    conf_option,
    conf_pairs,
    emit,
    master_option,
    note,
    out,
    storage_options,
)
from ckptfix.render import jsonout, text

IgnoreOption: Any = typer.Option(
    [],
    "--ignore",
    metavar="RULE",
    help="A rule whose findings do not count for --fail-on (repeat): still shown, and never change the verdict.",
)


class FailOn(str, Enum):
    error = "error"
    warning = "warning"
    info = "info"
    never = "never"


def audit(
    checkpoint: str = typer.Argument(..., help="Checkpoint location: a path, file://, s3://bucket/prefix, memory://"),
    target_spark: str = TargetSparkOption,
    deep: bool = typer.Option(False, "--deep", help="Read every log and state file, not just what a restart reads."),
    sink: str | None = SinkOption,
    stateful: bool | None = StatefulOption,
    fail_on: FailOn = typer.Option(FailOn.error, "--fail-on", help="Exit 1 when a finding reaches this severity."),
    against: str | None = typer.Option(
        None,
        "--against",
        metavar="MODULE:FUNCTION",
        help="Check a changed query against the checkpoint: FUNCTION(spark) returns an unstarted "
        "DataStreamWriter (MODULE may be a .py path). Plans it with PySpark, never starts it.",
    ),
    master: str | None = master_option("Spark master for --against (default local[*])."),
    conf: list[str] = conf_option(
        "A conf of the Spark session that will restart the query (repeat): the restart prediction uses it "
        "where the offset log records no value (e.g. spark.sql.shuffle.partitions of old checkpoints), and "
        "--against plans with it.",
    ),
    ignore: list[str] = IgnoreOption,
    fmt: Format = FormatOption,
    storage_option: list[str] = StorageOption,
    endpoint_url: str | None = EndpointOption,
    quiet: bool = QuietOption,
) -> None:
    """Find inconsistencies and predict whether Spark will restart the checkpoint.

    With --against, also apply Spark's rules for query changes (QUERY-* findings: allowed, not allowed or
    ill-defined, and why). Nothing in the checkpoint is written.

    Exit 0: no finding at or above --fail-on; 1: findings; 2: the checkpoint cannot be audited; 3: a bug.
    """
    opts = storage_options(fmt, storage_option, endpoint_url)
    session_conf = conf_pairs(conf)
    ignore = [r.id for r in lookup(ignore, "--ignore")]
    with RichProgress(not quiet) as observer:
        ckpt, query = _against(checkpoint, opts, against, master, session_conf)
        report = run_audit(
            checkpoint,
            target_spark,
            storage_options=opts,
            deep=deep,
            sink_path=sink,
            stateful=stateful,
            progress=observer,
            checkpoint=ckpt,
            query=query,
            session_conf=session_conf,
        )
    from ckptfix.repair.engine import interrupted_run
    from ckptfix.storage import Location

    stopped = interrupted_run(Location(report.checkpoint, opts))
    if stopped is not None:
        report.facts["interrupted_run"] = stopped
    if query is not None:
        report.facts["against"] = {
            "query": query.spec,
            "spark": query.spark_version,
            "sources": [s.description or s.kind for s in query.sources],
            "sink": query.sink.kind,
            "stateful_operators": [f"{o.operator_id}:{o.name}" for o in query.operators],
        }
    if fmt is Format.json:
        emit(jsonout.report(report, ignore))
    else:
        text.report(report, out())
        if stopped is not None:
            from ckptfix.render.text import styled

            styled(out(), "bold yellow", "\nINTERRUPTED RUN", f": {stopped}")
    counts = {s: sum(1 for f in report.findings if f.severity == s) for s in ("error", "warning", "info")}
    ignored = report.ignored(ignore)
    note(
        quiet,
        f"{_plural(counts['error'], 'error')}, {_plural(counts['warning'], 'warning')}, {counts['info']} info"
        + (f" ({len(ignored)} ignored: {', '.join(dict.fromkeys(f.rule_id for f in ignored))})" if ignored else "")
        + (
            f", {_plural(len(report.skipped), 'check')} skipped"
            + (" (see above)" if fmt is not Format.json else ' (see "skipped")')
            if report.skipped
            else ""
        )
        + f"; read {report.stats.files_read} of the {report.stats.entries_listed} files and directories listed"
        + ("" if deep else " (what a restart reads; --deep reads every file)"),
    )
    if fail_on is not FailOn.never and report.fails(fail_on.value, ignore):
        raise typer.Exit(1)


def scan(
    roots: list[str] = typer.Argument(
        ..., metavar="LOCATION...", help="Where to look: paths or URLs (s3://bucket/prefix ...), searched below."
    ),
    target_spark: str = TargetSparkOption,
    deep: bool = typer.Option(False, "--deep", help="Read every log and state file of each checkpoint."),
    fail_on: FailOn = typer.Option(
        FailOn.error, "--fail-on", help="Exit 1 when a finding of any checkpoint reaches this severity."
    ),
    conf: list[str] = conf_option(
        "A conf of the Spark session that will restart the queries (repeat), as for `ckptfix audit --conf`."
    ),
    ignore: list[str] = IgnoreOption,
    fmt: Format = FormatOption,
    storage_option: list[str] = StorageOption,
    endpoint_url: str | None = EndpointOption,
    quiet: bool = QuietOption,
) -> None:
    """Audit every checkpoint at or below each LOCATION: one line each, whether Spark restarts it and why not.

    A directory is taken as a checkpoint when it holds two of metadata, offsets/, commits/, sources/, state/ (or
    only those); nothing below a checkpoint is searched. Nothing is written. `ckptfix audit CHECKPOINT` shows one
    in full; --format json gives each one's full audit report.

    Exit 0: every checkpoint audited, none with a finding at or above --fail-on; 1: one has (or cannot be audited,
    or its verdict cannot be decided); 2: a LOCATION cannot be listed or holds no checkpoint; 3: a bug.
    """
    from ckptfix.audit.scan import scan as run_scan

    opts = storage_options(fmt, storage_option, endpoint_url)
    session_conf = conf_pairs(conf)
    ignore = [r.id for r in lookup(ignore, "--ignore")]
    with RichProgress(not quiet) as observer:
        result = run_scan(
            roots, target_spark, storage_options=opts, deep=deep, session_conf=session_conf, progress=observer
        )
    if fmt is Format.json:
        emit(jsonout.scan(result, ignore))
    else:
        from ckptfix.storage import command_flags

        text.scan(result, out(), ignore, command_flags(opts))
    if fail_on is not FailOn.never and result.fails(fail_on.value, ignore):
        raise typer.Exit(1)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _against(
    checkpoint: str, opts: dict[str, Any], against: str | None, master: str | None, confs: dict[str, str]
) -> tuple[Any, Any]:
    """Open the checkpoint and describe the --against query (planned with the recorded confs)."""
    if against is None:
        return None, None
    from ckptfix.checkpoint import Checkpoint
    from ckptfix.errors import MissingExtra
    from ckptfix.spark import session
    from ckptfix.spark.queryshape import describe
    from ckptfix.spark.usercode import load_function, split_spec

    split_spec(against)
    try:
        import pyspark  # noqa: F401
    except ImportError:
        raise MissingExtra("pyspark", "spark") from None
    ckpt = Checkpoint.open(checkpoint, opts)
    load_function(against)  # import errors before a JVM is started
    spark = session(master, confs=confs)
    return ckpt, describe(against, spark, ckpt.restored_conf())


def rules(
    ids: list[str] | None = typer.Argument(None, help="Rule ids to show (default: every rule); case does not matter."),
    fmt: Format = FormatOption,
    quiet: bool = QuietOption,
) -> None:
    """List every audit rule (or the ones named): id, default severity, title, what it means and the fix.

    Exit 0: listed; 2: an unknown rule id."""
    chosen = lookup(ids) if ids else list(RULES.values())
    if fmt is Format.json:
        emit(jsonout.rules(chosen))
        return
    text.rules(chosen, out())
