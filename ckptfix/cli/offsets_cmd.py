"""offsets export: the committed offsets of each source, as a new query's starting point."""

from __future__ import annotations

import json

import typer

from ckptfix.cli.common import EndpointOption, Format, FormatOption, StorageOption, guarded, out, storage_options
from ckptfix.offsets_export import export_offsets
from ckptfix.render import jsonout

app = typer.Typer(help="Work with a checkpoint's offsets.", no_args_is_help=True)


@app.command("export")
def export(
    checkpoint: str = typer.Argument(..., help="Checkpoint location."),
    batch: int | None = typer.Option(None, "--batch", help="A committed batch (default: the last committed one)."),
    fmt: Format = FormatOption,
    storage_option: list[str] = StorageOption,
    endpoint_url: str | None = EndpointOption,
) -> None:
    """Print each source's committed offsets at a batch as what a new query needs
    (Kafka: startingOffsets; file source: the files already processed). Exit 2: bad input."""
    opts = storage_options(fmt, storage_option, endpoint_url)
    result = guarded(fmt, lambda: export_offsets(checkpoint, batch, storage_options=opts))
    if fmt is Format.json:
        print(json.dumps({"schema_version": jsonout.SCHEMA_VERSION, **result.to_json()}, indent=2))
        return
    console = out()
    console.print(f"Offsets of committed batch {result.batch} in {result.checkpoint}", highlight=False, soft_wrap=True)
    for s in result.sources:
        raw = json.dumps(s.offset, separators=(",", ":"))
        console.print(f"source {s.source}: {s.kind}", highlight=False, markup=False, soft_wrap=True)
        if s.kind == "none":
            console.print(f"  {s.note}", highlight=False, markup=False, soft_wrap=True)
            continue
        for key, value in s.options.items():
            console.print(f"  option {key} = {value}", highlight=False, markup=False, soft_wrap=True)
        if s.processed_files is not None:
            console.print(
                f"  offset {raw}: {len(s.processed_files)} files already processed "
                f"(newest timestamp {s.newest_processed_timestamp_ms} ms):",
                highlight=False,
                markup=False,
                soft_wrap=True,
            )
            for path in s.processed_files:
                console.print(f"    {path}", highlight=False, markup=False, soft_wrap=True)
        elif not s.options:
            console.print(
                f"  offset {json.dumps(s.offset, separators=(',', ':'))}", highlight=False, markup=False, soft_wrap=True
            )
        console.print(f"  note: {s.note}", highlight=False, markup=False, soft_wrap=True)
