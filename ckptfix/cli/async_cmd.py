"""async-off: turn asynchronous progress tracking off the documented way (runs the user's query)."""

from __future__ import annotations

import time
from typing import Any

import typer

from ckptfix.cli.common import (
    EndpointOption,
    Format,
    FormatOption,
    IdleOption,
    QuietOption,
    StorageOption,
    apply_option,
    backup_option,
    conf_option,
    conf_pairs,
    emit,
    err,
    force_option,
    master_option,
    out,
    storage_options,
)
from ckptfix.render import jsonout, text


def async_off(
    checkpoint: str = typer.Argument(..., help="Checkpoint location (as the query's Spark sees it)."),
    query: str = typer.Option(
        ...,
        "--query",
        metavar="MODULE:FUNCTION",
        help="FUNCTION(spark) returns the query's UNSTARTED DataStreamWriter; MODULE is importable or a .py path.",
    ),
    do_apply: bool = apply_option("Run the query (sink side effects!). Default: preflight only, show the steps."),
    verify: bool = typer.Option(False, "--verify", help="Finally restart with tracking off until one batch commits."),
    min_batches: int = typer.Option(2, "--min-batches", help="New committed batches to wait for with tracking on."),
    timeout: float = typer.Option(300.0, "--timeout", help="Seconds to wait for those batches (and for --verify)."),
    resume: bool = typer.Option(False, "--resume", help="Continue the interrupted run on this checkpoint."),
    query_id: str | None = typer.Option(None, "--query-id", help="Refuse unless the checkpoint's metadata id is this."),
    master: str | None = master_option(),
    conf: list[str] = conf_option(),
    backup_dir: str | None = backup_option("Where the run journal goes (default <CKPT>/_ckptfix, as for repair)."),
    force: bool = force_option("Run on a checkpoint that looks alive or has other blockers."),
    idle_seconds: float = IdleOption,
    fmt: Format = FormatOption,
    quiet: bool = QuietOption,
    storage_option: list[str] = StorageOption,
    endpoint_url: str | None = EndpointOption,
) -> None:
    """Drive the documented sequence for turning asynchronous progress tracking off.

    1 preflight (audit, Spark's refusals, another query's checkpoint, idle check); 2 run with
    asyncProgressTrackingEnabled=true and asyncProgressTrackingCheckpointIntervalMs=0 until --min-batches new
    batches commit, stop; 3 audit again; 4 (--verify) restart with tracking off. Nothing runs without --apply.

    Exit 0: done (or the dry run would proceed); 1: not finished (no new data, check or verify failed);
    2: bad input or refused; 3: a bug.
    """
    from ckptfix.progress import NullProgress
    from ckptfix.spark.async_off import Options
    from ckptfix.spark.async_off import async_off as run

    opts = storage_options(fmt, storage_option, endpoint_url)
    confs = conf_pairs(conf)
    console = err()
    started = time.monotonic()

    class Steps(NullProgress):
        """Each step of the sequence as one line on stderr, as it happens."""

        def step(self, message: str, **data: Any) -> None:
            if quiet:
                return
            mark = {"fail": "FAIL ", "warn": "WARN ", "done": "ok   "}.get(str(data.get("kind")), "")
            console.print(
                f"[{time.monotonic() - started:6.1f}s] {data.get('step', ''):9} {mark}{message}",
                highlight=False,
                markup=False,
                soft_wrap=True,
            )

    options = Options(
        apply=do_apply,
        verify=verify,
        min_batches=min_batches,
        timeout=timeout,
        resume=resume,
        query_id=query_id,
        master=master,
        confs=confs,
        backup_dir=backup_dir,
        force=force,
        idle_seconds=idle_seconds,
        storage_options=opts,
    )
    outcome = run(checkpoint, query, options, Steps())
    if fmt is Format.json:
        emit(jsonout.document(async_off=outcome.to_json()))
    else:
        text.async_off(outcome, out())
    if not outcome.ok:
        raise typer.Exit(1)
