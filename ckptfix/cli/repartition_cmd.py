"""``ckptfix state repartition``: move the state into a new number of partitions, offline."""

from __future__ import annotations

from pathlib import Path

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


def repartition(
    checkpoint: str = typer.Argument(..., help="Checkpoint location."),
    partitions: int = typer.Option(..., "--partitions", "-n", help="The new number of partitions (>= 1)."),
    target_spark: str = TargetSparkOption,
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
    Dry run unless --apply; undo with `ckptfix undo`. Exit 2: refused or bad input."""
    from ckptfix.audit import audit as run_audit
    from ckptfix.cli.repair_cmd import carry_out
    from ckptfix.repair.repartition import plan_repartition

    opts = storage_options(fmt, storage_option, endpoint_url)
    result = plan_repartition(checkpoint, partitions, target_spark=target_spark, storage_options=opts)
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
    )
    if fmt is Format.text:
        note(
            quiet,
            f"{result.before} -> {result.after} partitions as batch {result.batch}; restart the query as it is "
            "(the offset log carries the new spark.sql.shuffle.partitions)",
        )
