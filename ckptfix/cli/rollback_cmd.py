"""rollback: make batch N the last committed batch (dry run unless --apply)."""

from __future__ import annotations

from pathlib import Path

import typer

from ckptfix.audit import audit as run_audit
from ckptfix.cli.common import (
    EndpointOption,
    Format,
    FormatOption,
    QuietOption,
    StorageOption,
    TargetSparkOption,
    note,
    storage_options,
)
from ckptfix.cli.repair_cmd import ApplyOption, BackupOption, ForceOption, IdleOption, PlanOutOption, carry_out
from ckptfix.repair.rollback import plan_rollback


def rollback(
    checkpoint: str = typer.Argument(..., help="Checkpoint location."),
    to_batch: int = typer.Option(..., "--to-batch", help="The batch that becomes the last committed one."),
    into: str | None = typer.Option(
        None, "--into", help="Copy the checkpoint here first (new or empty) and roll the copy back."
    ),
    target_spark: str = TargetSparkOption,
    sink: str | None = typer.Option(
        None,
        "--sink",
        help="The sink's path: a file sink's output (_spark_metadata) or a Delta table (_delta_log).",
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
    """Roll back to batch N: delete later offsets, commits and state versions (> N+1).

    Refuses when batch N is not committed, the query looks alive, a file sink (--sink) holds later
    batches, or state version N+1 cannot be loaded from what remains. Exit 0: planned/applied;
    2: refused or bad input.
    """
    opts = storage_options(fmt, storage_option, endpoint_url)
    result = plan_rollback(
        checkpoint,
        to_batch,
        target_spark,
        storage_options=opts,
        sink_path=sink,
        into=into,
        copy=do_apply,
        force=force,
        idle_seconds=idle_seconds,
    )
    plan, where = result.plan, result.checkpoint
    if result.into is not None:
        note(
            quiet,
            f"dry run: --apply copies {where} to {result.into} first and rolls the copy back with this plan; "
            "nothing was written",
        )
    if result.copied_from is not None:
        note(quiet, f"copied {result.copied_files} files of {result.copied_from} to {where}; the original is untouched")
    # a fresh copy is all new files: its liveness was checked on the original before copying
    carry_out(
        fmt,
        plan,
        where,
        opts,
        [],
        plan_out=plan_out,
        do_apply=do_apply,
        backup_dir=backup_dir,
        force=force or result.copied_from is not None,
        idle_seconds=idle_seconds,
        audit_after=lambda: run_audit(where, target_spark, storage_options=opts, sink_path=sink),
    )
