"""``ckptfix migrate relocate SRC DEST``: copy a checkpoint elsewhere and rewrite its absolute paths."""

from __future__ import annotations

from typing import Any

import typer

from ckptfix.cli.common import (
    EndpointOption,
    Format,
    FormatOption,
    QuietOption,
    RichProgress,
    StorageOption,
    apply_option,
    dry_run_hint,
    emit,
    force_option,
    idle_option,
    out,
    storage_options,
)
from ckptfix.errors import UsageError
from ckptfix.render import jsonout, text

DestStorageOption = typer.Option(
    [],
    "--dest-storage-option",
    metavar="KEY=VALUE",
    help="fsspec storage option for DEST (repeat; default: the same options as SRC).",
)
DestEndpointOption = typer.Option(None, "--dest-endpoint-url", help="S3-compatible endpoint URL of DEST.")


def relocate(
    source: str = typer.Argument(..., help="The checkpoint to copy (only read)."),
    dest: str = typer.Argument(..., help="New or empty destination (local path, s3://, s3a://, gs://, abfs://)."),
    do_apply: bool = apply_option("Copy and rewrite (default: show the plan, change nothing)."),
    input_from: str | None = typer.Option(
        None, "--input-from", help="Old input directory of a file source (rewrite its log entries; needs --input-to)."
    ),
    input_to: str | None = typer.Option(None, "--input-to", help="New input directory of that file source."),
    force: bool = force_option("Copy a source that looks alive (recent writes)."),
    idle_seconds: float = idle_option("A write in SRC this recent means the query may be running."),
    fmt: Format = FormatOption,
    storage_option: list[str] = StorageOption,
    endpoint_url: str | None = EndpointOption,
    dest_storage_option: list[str] = DestStorageOption,
    dest_endpoint_url: str | None = DestEndpointOption,
    quiet: bool = QuietOption,
) -> None:
    """Copy a checkpoint to another path or store, rewriting what holds absolute paths.

    Rewrites 4.x transformWithState operator metadata (stateSchemaFilePaths) and, with --input-from/--input-to,
    file-source log entries; regenerates the checksum sidecars of rewritten files; copies every other file byte
    for byte. SRC is never changed. Refuses (exit 2) a non-empty DEST, DEST inside SRC, a SRC that is not a
    checkpoint or looks alive. An interrupted --apply leaves DEST without `metadata`: run the same command again.
    """
    from ckptfix.migrate.relocate import apply_relocation, plan_relocation

    if dest.startswith("memory://"):  # a copy there would vanish when this command exits, after "done"
        raise UsageError(
            f"DEST {dest}: expected a store that outlives this command, found memory:// (it lives as long as the "
            "process: use it from the Python API, ckptfix.migrate.relocate)"
        )

    src_opts = storage_options(fmt, storage_option, endpoint_url)
    dest_opts: dict[str, Any] = src_opts
    if dest_storage_option or dest_endpoint_url:
        dest_opts = storage_options(fmt, dest_storage_option, dest_endpoint_url)
    with RichProgress(not quiet) as observer:
        plan = plan_relocation(
            source,
            dest,
            source_options=src_opts,
            dest_options=dest_opts,
            input_from=input_from,
            input_to=input_to,
            force=force,
            idle_seconds=idle_seconds,
            progress=observer,
        )
        if do_apply:
            result = apply_relocation(plan, source_options=src_opts, dest_options=dest_opts, progress=observer)
            doc = result.to_json()
        else:
            doc = {"plan": plan.to_json(), "applied": False}
    if fmt is Format.json:
        emit(jsonout.document(relocation=doc))
        return
    _text(doc, do_apply, quiet)


def _text(doc: dict[str, Any], applied: bool, quiet: bool) -> None:
    text.relocation(doc, applied, out())
    if not applied:
        dry_run_hint(quiet, "relocate")
