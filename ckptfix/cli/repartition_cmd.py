"""``ckptfix state repartition``: move the state into a new number of partitions, offline."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from ckptfix.cli.common import (
    ApplyOption,
    BackupOption,
    EndpointOption,
    ForceOption,
    Format,
    FormatOption,
    IdleOption,
    PlanOutOption,
    QuietOption,
    StorageOption,
    TargetSparkOption,
    note,
    storage_options,
)
from ckptfix.render import text
from ckptfix.storage import command_flags


def repartition(
    checkpoint: str = typer.Argument(..., help="Checkpoint location."),
    partitions: int = typer.Option(..., "--partitions", "-n", help="The new number of partitions (>= 1)."),
    target_spark: str = TargetSparkOption,
    sink: str | None = typer.Option(
        None,
        "--sink",
        help="The query's file sink (its output path): it gets a log entry for the repartition batch, without "
        "which Spark fails at the sink log's next compaction. A Delta table needs none.",
    ),
    sink_compact_interval: int = typer.Option(
        10,
        "--sink-compact-interval",
        help="The query's spark.sql.streaming.fileSink.log.compactInterval (used while its log has no compact file).",
    ),
    sink_backup_dir: str | None = typer.Option(
        None, "--sink-backup-dir", help="With --sink: where the sink's backups and journal go (default <OUT>/_ckptfix)."
    ),
    do_apply: bool = ApplyOption,
    plan_out: Path | None = PlanOutOption,
    backup_dir: str | None = BackupOption,
    force: bool = ForceOption,
    idle_seconds: float = IdleOption,
    fmt: Format = FormatOption,
    storage_option: list[str] = StorageOption,
    endpoint_url: str | None = EndpointOption,
    quiet: bool = QuietOption,
) -> None:
    """Move the state of the last committed batch into --partitions partitions (a new
    spark.sql.shuffle.partitions), as Spark's offline repartition runner does: a repartition
    batch N+1 in the offset and commit logs and a snapshot of every store in each new
    partition, each key where Spark's hash partitioning places it. HDFS and RocksDB.
    With --sink, the file sink's entry for that batch is written after (a second run, on OUT).
    Dry run unless --apply; undo with `ckptfix undo`. Exit 2: refused or bad input."""
    from ckptfix.audit import audit as run_audit
    from ckptfix.cli.repair_cmd import carry_out, run_sink_plan
    from ckptfix.errors import CkptfixError, RepartitionInterrupted
    from ckptfix.repair.repartition import plan_repartition

    opts = storage_options(fmt, storage_option, endpoint_url)
    result = plan_repartition(
        checkpoint,
        partitions,
        target_spark=target_spark,
        storage_options=opts,
        sink_path=sink,
        sink_compact_interval=sink_compact_interval,
    )

    def sink_step(run_id: str | None) -> dict[str, Any]:
        # after the checkpoint's run: a crash between them leaves the sink without the entry (Spark fails at its
        # next compaction, loses nothing), and the same command writes it; the other order could make the sink skip
        # a batch the checkpoint still has to run
        if result.sink_plan is None or result.sink is None:
            return {}
        try:
            sink_run = run_sink_plan(
                result.sink_plan, result.sink, opts, fmt, do_apply, sink_backup_dir, force, idle_seconds
            )
        except CkptfixError as exc:
            undo = text.undo_command(checkpoint, run_id or "", None, command_flags(opts))
            done = f" (run {run_id}; `{undo}` restores it)" if run_id else ""
            raise RepartitionInterrupted(
                f"{exc} -- the checkpoint was repartitioned{done} but the file sink has no entry for batch "
                f"{result.batch} yet: run the same command again to write it"
            ) from None
        return {"sink_plan": result.sink_plan.to_json(), "sink_applied_run": sink_run}

    carry_out(
        fmt,
        result.plan,
        checkpoint,
        opts,
        [],
        plan_out=plan_out,
        do_apply=do_apply,
        backup_dir=backup_dir,
        force=force,
        idle_seconds=idle_seconds,
        audit_after=lambda: run_audit(checkpoint, target_spark, storage_options=opts),
        aims_at_restart=False,
        then=sink_step,
        quiet=quiet,
    )
    if fmt is Format.text:
        note(
            quiet,
            f"{result.before} -> {result.after} partitions as batch {result.batch}; restart the query as it is "
            "(the offset log carries the new spark.sql.shuffle.partitions)",
        )
