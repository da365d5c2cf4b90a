from __future__ import annotations

import typer

from ckptfix.checkpoint import Checkpoint
from ckptfix.cli.common import (
    EndpointOption,
    Format,
    FormatOption,
    QuietOption,
    StorageOption,
    emit,
    out,
    storage_options,
)
from ckptfix.inspect import inspect_checkpoint
from ckptfix.render import jsonout, text


def inspect(
    checkpoint: str = typer.Argument(..., help="Checkpoint location: a path, file://, s3://bucket/prefix, memory://"),
    batches: bool = typer.Option(
        False,
        "--batches",
        help="Also every batch of the offset log: when it was planned, its watermark, whether it committed, "
        "each source's offset (reads every offset file).",
    ),
    fmt: Format = FormatOption,
    storage_option: list[str] = StorageOption,
    endpoint_url: str | None = EndpointOption,
    quiet: bool = QuietOption,
) -> None:
    """Show what a checkpoint holds: query id, recorded conf, batches, sources, state.

    Exit 0: shown; 2: bad input (not a checkpoint, unreadable file, bad option)."""
    opts = storage_options(fmt, storage_option, endpoint_url)
    result = inspect_checkpoint(Checkpoint.open(checkpoint, opts), batches=batches)
    if fmt is Format.json:
        emit(jsonout.inspection(result))
    else:
        text.inspection(result, out())
