"""rollback: make batch N the last committed batch (dry run unless --apply)."""

from __future__ import annotations

from pathlib import Path

import typer

from ckptfix.audit import audit as run_audit
from ckptfix.audit.targets import NEWEST, SUPPORTED
from ckptfix.cli.common import EndpointOption, Format, FormatOption, StorageOption, err, guarded, out, storage_options
from ckptfix.cli.repair_cmd import BackupOption, ForceOption, IdleOption
from ckptfix.render import jsonout, text
from ckptfix.repair import engine
from ckptfix.repair.rollback import plan_rollback
from ckptfix.storage import Location


def rollback(
    checkpoint: str = typer.Argument(..., help="Checkpoint location."),
    to_batch: int = typer.Option(..., "--to-batch", help="The batch that becomes the last committed one."),
    into: str | None = typer.Option(
        None, "--into", help="Copy the checkpoint here first (new or empty) and roll the copy back."
    ),
    target_spark: str = typer.Option(NEWEST, "--target-spark", help=f"Spark that restarts it: {', '.join(SUPPORTED)}."),
    sink: str | None = typer.Option(None, "--sink", help="A file sink's output path (its _spark_metadata)."),
    do_apply: bool = typer.Option(False, "--apply", help="Carry the plan out (default: show it, change nothing)."),
    plan_out: Path | None = typer.Option(None, "--plan-out", help="Save the plan as JSON for `ckptfix apply`."),
    backup_dir: str | None = BackupOption,
    force: bool = ForceOption,
    idle_seconds: float = IdleOption,
    fmt: Format = FormatOption,
    storage_option: list[str] = StorageOption,
    endpoint_url: str | None = EndpointOption,
) -> None:
    """Roll back to batch N: delete later offsets, commits and state versions (> N+1).

    Refuses when batch N is not committed, the query looks alive, a file sink (--sink) holds later
    batches, or state version N+1 cannot be loaded from what remains. Exit 0: planned/applied;
    2: refused or bad input.
    """
    opts = storage_options(fmt, storage_option, endpoint_url)
    result = guarded(
        fmt,
        lambda: plan_rollback(
            checkpoint,
            to_batch,
            target_spark,
            storage_options=opts,
            sink_path=sink,
            into=into,
            force=force,
            idle_seconds=idle_seconds,
        ),
    )
    plan, where = result.plan, result.checkpoint
    if result.copied_from is not None:
        err().print(
            f"copied {result.copied_files} files of {result.copied_from} to {where}; the original is untouched",
            highlight=False,
            soft_wrap=True,
        )
    if plan_out is not None:
        guarded(fmt, lambda: plan_out.write_text(plan.dumps()))
    run_id = None
    verdict = None
    if do_apply and not plan.empty:
        ckpt = Location(where, opts)
        # a fresh copy is all new files: its liveness was checked on the original before copying
        run_id = guarded(
            fmt,
            lambda: engine.apply(
                plan,
                ckpt,
                Location(backup_dir or engine.default_backup_url(where), opts),
                force=force or result.copied_from is not None,
                idle_seconds=idle_seconds,
            ),
        )
        verdict = guarded(fmt, lambda: run_audit(where, target_spark, storage_options=opts, sink_path=sink).verdict)
    if fmt is Format.json:
        print(jsonout.plan(plan, [], run_id, verdict))
    else:
        console = out()
        text.plan(plan, [], console, run_id)
        for note in plan.notes:
            console.print(f"  note: {note}", highlight=False, soft_wrap=True)
        if verdict is not None:
            console.print(f"now: {verdict.headline}", highlight=False, soft_wrap=True)
