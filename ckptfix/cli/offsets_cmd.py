"""offsets export: the committed offsets of each source, as a new query's starting point."""

from __future__ import annotations

import typer

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
from ckptfix.offsets_export import export_offsets
from ckptfix.render import jsonout, text

app = typer.Typer(help="Work with a checkpoint's offsets.", no_args_is_help=True)


@app.command("export")
def export(
    checkpoint: str = typer.Argument(..., help="Checkpoint location."),
    batch: int | None = typer.Option(None, "--batch", help="A committed batch (default: the last committed one)."),
    fmt: Format = FormatOption,
    storage_option: list[str] = StorageOption,
    endpoint_url: str | None = EndpointOption,
    quiet: bool = QuietOption,
) -> None:
    """Print each source's committed offsets at a batch as what a new query needs
    (Kafka: startingOffsets; file source: the files already processed). Exit 2: bad input."""
    opts = storage_options(fmt, storage_option, endpoint_url)
    result = export_offsets(checkpoint, batch, storage_options=opts)
    if fmt is Format.json:
        emit(jsonout.document(**result.to_json()))
    else:
        text.offsets_export(result, out())
