"""state delete / state put: edit the state the restart loads (dry run unless --apply; `ckptfix undo` reverts)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from ckptfix.cli.common import (
    ApplyOption,
    BackupOption,
    EndpointOption,
    ForceOption,
    ForceSchemaOption,
    Format,
    FormatOption,
    IdleOption,
    KeySchemaOption,
    OperatorOption,
    PlanOutOption,
    QuietOption,
    StorageOption,
    TargetSparkOption,
    ValueSchemaOption,
    schema_options,
    storage_options,
)


def _carry_out(fmt: Format, result: Any, checkpoint: str, opts: dict[str, Any], target: str, **run: Any) -> None:
    from ckptfix.audit import audit as run_audit
    from ckptfix.cli.repair_cmd import carry_out

    carry_out(
        fmt,
        result.plan,
        checkpoint,
        opts,
        [],
        audit_after=lambda: run_audit(checkpoint, target, storage_options=opts),
        aims_at_restart=False,
        **run,
    )


def delete(
    checkpoint: str = typer.Argument(..., help="Checkpoint location."),
    operator: int = OperatorOption,
    keys: str | None = typer.Option(
        None,
        "--keys",
        help="JSON lines or Parquet file of keys: rows as `state read` prints them, or bare key objects.",
    ),
    where: str | None = typer.Option(
        None,
        "--where",
        help="Keys to delete, over key columns: col = 'x', col != 1, col IN ('a', 'b'), col IS [NOT] NULL, "
        "joined with AND; dots reach into struct columns (window.start). No code is evaluated.",
    ),
    key_schema: str | None = KeySchemaOption,
    value_schema: str | None = ValueSchemaOption,
    force_schema: bool = ForceSchemaOption,
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
    """Delete keys from the state the restart loads (version = last committed batch + 1): writes that version's
    snapshot (HDFS N.snapshot; RocksDB N.zip + SSTs) for the partitions holding them. Dry run unless --apply;
    undo with `ckptfix undo`. Exit 2: refused or bad input (nothing written)."""
    from ckptfix.repair.surgery import plan_state_delete

    opts = storage_options(fmt, storage_option, endpoint_url)
    result = plan_state_delete(
        checkpoint,
        operator=operator,
        keys_file=keys,
        where=where,
        force_schema=force_schema,
        target_spark=target_spark,
        storage_options=opts,
        **schema_options(key_schema, value_schema),
    )
    _carry_out(
        fmt,
        result,
        checkpoint,
        opts,
        target_spark,
        plan_out=plan_out,
        do_apply=do_apply,
        backup_dir=backup_dir,
        force=force,
        idle_seconds=idle_seconds,
        quiet=quiet,
    )


def put(
    checkpoint: str = typer.Argument(..., help="Checkpoint location."),
    operator: int = OperatorOption,
    rows: str = typer.Option(
        ..., "--rows", help="JSON lines or Parquet file of rows {key: {...}, value: {...}}, as `state read` prints."
    ),
    key_schema: str | None = KeySchemaOption,
    value_schema: str | None = ValueSchemaOption,
    force_schema: bool = ForceSchemaOption,
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
    """Put rows (key and value, checked against the stored schemas) into the state the restart loads: a stored
    key gets the new value, a new key goes to the partition Spark's hash partitioning gives it. Dry run unless
    --apply; undo with `ckptfix undo`. Exit 2: refused or bad input (nothing written)."""
    from ckptfix.repair.surgery import plan_state_put

    opts = storage_options(fmt, storage_option, endpoint_url)
    result = plan_state_put(
        checkpoint,
        operator=operator,
        rows_file=rows,
        force_schema=force_schema,
        target_spark=target_spark,
        storage_options=opts,
        **schema_options(key_schema, value_schema),
    )
    _carry_out(
        fmt,
        result,
        checkpoint,
        opts,
        target_spark,
        plan_out=plan_out,
        do_apply=do_apply,
        backup_dir=backup_dir,
        force=force,
        idle_seconds=idle_seconds,
        quiet=quiet,
    )
