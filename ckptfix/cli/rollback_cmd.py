"""rollback: make batch N the last committed batch (dry run unless --apply)."""

from __future__ import annotations

from pathlib import Path

import typer

from ckptfix.audit import audit as run_audit
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
    SinkOption,
    StorageOption,
    TargetSparkOption,
    conf_option,
    conf_pairs,
    note,
    out,
    storage_options,
)
from ckptfix.cli.repair_cmd import carry_out, run_sink_plan
from ckptfix.errors import CkptfixError, RollbackInterrupted, UsageError
from ckptfix.render import text
from ckptfix.repair.rollback import plan_rollback
from ckptfix.storage import command_flags


def rollback(
    checkpoint: str = typer.Argument(..., help="Checkpoint location."),
    to_batch: int | None = typer.Option(None, "--to-batch", help="The batch that becomes the last committed one."),
    to_time: str | None = typer.Option(
        None,
        "--to-time",
        metavar="TIME",
        help="Instead of --to-batch: the newest committed batch planned at or before TIME (ISO 8601 with its zone, "
        "2026-11-27T10:00:00Z, or epoch milliseconds), from the offset files' batchTimestampMs.",
    ),
    into: str | None = typer.Option(
        None, "--into", help="Copy the checkpoint here first (new or empty) and roll the copy back."
    ),
    target_spark: str = TargetSparkOption,
    sink: str | None = SinkOption,
    with_sink: bool = typer.Option(
        False,
        "--with-sink",
        help="Roll the file sink (--sink) back to batch N too: its log entries > N and the files they add.",
    ),
    do_apply: bool = ApplyOption,
    plan_out: Path | None = PlanOutOption,
    backup_dir: str | None = BackupOption,
    sink_backup_dir: str | None = typer.Option(
        None,
        "--sink-backup-dir",
        help="With --with-sink: where the sink's backups and journal go (default <OUT>/_ckptfix).",
    ),
    force: bool = ForceOption,
    idle_seconds: float = IdleOption,
    conf: list[str] = conf_option(
        "A conf of the session that will restart the query, as for `ckptfix audit --conf` (repeat)."
    ),
    accept_edits: bool = typer.Option(
        False,
        "--accept-edits",
        help="Keep log files edited after Spark wrote them (offsets/N, commits/N): regenerate their .crc sidecars.",
    ),
    fmt: Format = FormatOption,
    storage_option: list[str] = StorageOption,
    endpoint_url: str | None = EndpointOption,
    quiet: bool = QuietOption,
) -> None:
    """Roll back to batch N (--to-batch, or --to-time: the newest committed batch planned by then): delete later
    offsets, commits and state versions (> N+1).

    Refuses when batch N is not committed, the query looks alive, the sink (--sink) holds later
    batches, or state version N+1 cannot be loaded from what remains. With --with-sink, a file sink
    is rolled back too (its run first, then the checkpoint's; each undone with `ckptfix undo`).
    Exit 0: planned/applied; 2: refused or bad input; 3: a bug.
    """
    opts = storage_options(fmt, storage_option, endpoint_url)
    if (to_batch is None) == (to_time is None):
        raise UsageError("give --to-batch N or --to-time TIME (one of them)")
    if to_time is not None:
        from ckptfix.checkpoint import Checkpoint
        from ckptfix.inspect import batch_at, committed_after, parse_time

        ckpt = Checkpoint.open(checkpoint, opts)
        when = parse_time(to_time)
        chosen = batch_at(ckpt, when)
        to_batch = chosen.batch
        note(
            quiet,
            f"--to-time {to_time}: batch {to_batch}, planned at {chosen.started} (the newest committed batch "
            "planned by then, all before it too)",
        )
        late = committed_after(ckpt, to_batch, when)
        if late is not None:
            note(
                quiet,
                f"note: commits/{to_batch} was written at {late}, after {to_time} (its file's time): if a deploy "
                f"came in between, the new code may have run batch {to_batch}; --to-batch {to_batch - 1} drops it",
            )
    assert to_batch is not None
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
        with_sink=with_sink,
        session_conf=conf_pairs(conf),
        accept_edits=accept_edits,
    )
    plan, where = result.plan, result.checkpoint
    sink_run, extra = None, None
    if result.sink_plan is not None and result.sink is not None:
        # the sink first: a crash before the checkpoint's run leaves a sink behind the checkpoint (SINK-BEHIND:
        # nothing re-planned is skipped, and the same command finishes the job), never one ahead (SINK-AHEAD)
        sink_run = run_sink_plan(
            result.sink_plan,
            result.sink,
            opts,
            fmt,
            do_apply,
            sink_backup_dir,
            force,
            idle_seconds,
            "The file sink {sink} holds no batch to roll back.",
        )
        extra = {"sink_plan": result.sink_plan.to_json(), "sink_applied_run": sink_run}
    if result.copied_from is not None:
        note(quiet, f"copied {result.copied_files} files of {result.copied_from} to {where}; the original is untouched")
    # a fresh copy is all new files: its liveness was checked on the original before copying
    try:
        run_id = carry_out(
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
            audit_after=lambda: run_audit(
                where, target_spark, storage_options=opts, sink_path=sink, session_conf=conf_pairs(conf)
            ),
            extra_json=extra,
            quiet=quiet,
            apply_does="carry the plan out"
            if result.into is None
            else f"copy {where} to {result.into} first and roll the copy back with this plan",
        )
    except CkptfixError as exc:
        if sink_run is None:
            raise
        raise RollbackInterrupted(
            f"{exc} -- the file sink was rolled back (run {sink_run}) but the checkpoint was not: run the same "
            "command again to roll the checkpoint back (the sink's plan is then empty), or "
            f"`{text.undo_command(str(result.sink), sink_run, None, command_flags(opts))}` restores the sink"
        ) from None
    if sink_run is not None and run_id is not None and fmt is not Format.json:
        console = out()
        flags = command_flags(opts)
        undo_sink = text.undo_command(str(result.sink), sink_run, None, flags)
        console.print(
            f"sink rolled back as run {sink_run}: `{undo_sink}` restores it",
            highlight=False,
        )
        console.print(
            f"checkpoint rolled back as run {run_id}: `{text.undo_command(where, run_id, None, flags)}` restores it "
            "(undo the checkpoint first, then the sink)",
            highlight=False,
        )
