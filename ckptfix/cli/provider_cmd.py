"""``ckptfix migrate provider``: convert the state store provider (HDFS <-> RocksDB) in place."""

from __future__ import annotations

from enum import Enum
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
    arrow_without_pandas,
    note,
    storage_options,
)


class Target(str, Enum):
    rocksdb = "rocksdb"
    hdfs = "hdfs"


class Switch(str, Enum):
    on = "on"
    off = "off"


def provider(
    checkpoint: str = typer.Argument(..., help="Checkpoint location."),
    to: Target = typer.Option(..., "--to", help="The provider to convert to: rocksdb or hdfs."),
    changelog: Switch | None = typer.Option(
        None, "--changelog", help="--to rocksdb: changelog checkpointing on or off in the restarting session."
    ),
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
    """Convert the state of the last committed version to another state store provider
    (HDFS -> RocksDB N.zip + SSTs, or RocksDB -> HDFS N.snapshot), delete the old provider's
    files and record the new provider in the offset log. Dry run unless --apply; undo with
    `ckptfix undo`. Exit 2: refused or bad input."""
    from ckptfix.audit import audit as run_audit
    from ckptfix.cli.repair_cmd import carry_out
    from ckptfix.migrate.provider import plan_provider

    arrow_without_pandas()  # the conversion works in Arrow arrays
    opts = storage_options(fmt, storage_option, endpoint_url)
    result = plan_provider(
        checkpoint,
        to.value,
        changelog=None if changelog is None else changelog is Switch.on,
        target_spark=target_spark,
        storage_options=opts,
    )
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
        quiet=quiet,
    )
    if fmt is Format.text:
        for key, value in result.session_confs.items():
            note(quiet, f"restart the query with {key}={value} (Spark does not keep it in the offset log)")
