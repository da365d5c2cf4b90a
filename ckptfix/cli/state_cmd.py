"""state ls / read / changes / rebuild: offline state, without a JVM."""

from __future__ import annotations

import os
import re
import shlex
import sys
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import IO, Any, NoReturn, TypeVar

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
    arrow_without_pandas,
    choices,
    emit,
    err,
    fail,
    note,
    out,
    schema_options,
    stdout_gone,
    storage_options,
    write_local,
)
from ckptfix.errors import CkptfixError, FormatError, UsageError, error_line
from ckptfix.render import jsonout, text
from ckptfix.storage import parse_storage_options

T = TypeVar("T")

app = typer.Typer(help="Read, export and rebuild state offline (no JVM).", no_args_is_help=True)


class DataFormat(str, Enum):
    jsonl = "jsonl"
    csv = "csv"
    parquet = "parquet"
    json = "json"


PartitionOption = typer.Option(None, "--partition", help="Only this partition.")
StoreOption = typer.Option(None, "--store", help="Store name (joins: e.g. left-keyToNumValues).")
StateVarOption = typer.Option(None, "--state-var", help="transformWithState: the state variable to read.")
DataFormatOption = typer.Option(
    None,
    "--format",
    "-f",
    show_default=False,
    help="Row format: jsonl, csv, parquet, or json (one document: the selection and its rows; errors as JSON). "
    "Default: from --out's extension (.parquet, .csv, .jsonl/.ndjson/.json: jsonl), else jsonl.",
)
EngineOption = typer.Option(
    "local",
    "--engine",
    metavar=choices(["local", "spark"]),
    help="local, or spark: one PySpark task per partition (SparkSession from $SPARK_MASTER).",
)
OutOption = typer.Option(None, "--out", help="Write rows to this local file (default: stdout; parquet needs it).")

#: the row formats a file name's extension stands for; the first is the one --out implies without --format
#: (.json: JSON lines, as Spark's own JSON files; the one-document format fits the name too)
EXTENSIONS = {
    ".parquet": (DataFormat.parquet,),
    ".csv": (DataFormat.csv,),
    ".jsonl": (DataFormat.jsonl,),
    ".ndjson": (DataFormat.jsonl,),
    ".json": (DataFormat.jsonl, DataFormat.json),
}


def _row_format(fmt: DataFormat | None, out_path: str | None) -> DataFormat:
    """--format, else the one --out's extension names, else jsonl. A --format that contradicts a known extension
    (``-f csv --out s.parquet``) is refused: the file would not hold what its name says."""
    fits = EXTENSIONS.get(os.path.splitext(out_path)[1].lower(), ()) if out_path else ()
    if fmt is None:
        return fits[0] if fits else DataFormat.jsonl
    if fits and fmt not in fits:
        _fail_rows(
            fmt,
            f"--format {fmt.value}: expected {' or '.join(f.value for f in fits)} for --out {out_path}, "
            f"found {fmt.value} (change --format or the file name)",
            "UsageError",
        )
    return fmt


def _fail_rows(fmt: DataFormat, message: str, kind: str) -> NoReturn:
    """Errors of row-producing commands: -f json prints the error document on stdout, as every command;
    in the row formats stdout carries rows only, so the error is one line on stderr."""
    fail(Format.json if fmt is DataFormat.json else Format.text, message, kind)


def _guard_rows(fmt: DataFormat, fn: Callable[[], T], hint: Callable[[CkptfixError], str | None] | None = None) -> T:
    """``fn()``, its errors as one line (``hint(exc)``: the next step, after the error, when there is one)."""
    try:
        return fn()
    except BrokenPipeError:
        # the reader went away (``| head``): stop reading, quietly, as other Unix tools do
        stdout_gone()
        raise typer.Exit(0) from None
    except CkptfixError as exc:
        then = hint(exc) if hint is not None else None
        _fail_rows(fmt, f"{exc}; {then}" if then else str(exc), type(exc).__name__)
    except OSError as exc:
        _fail_rows(fmt, error_line(exc), type(exc).__name__)
    except KeyboardInterrupt:
        _fail_rows(fmt, "interrupted", "Interrupted")


JobsOption = typer.Option(
    None, "--jobs", "-j", min=1, help="Worker processes (default: one per core for a local checkpoint)."
)


def _reader(engine: str, changes: bool) -> Callable[..., Any]:
    from ckptfix.state.read import read_changes, read_state

    if engine == "local":
        arrow_without_pandas()
        return read_changes if changes else read_state
    if engine != "spark":
        raise UsageError(f"--engine: expected one of local, spark, found {engine!r}")
    from ckptfix import spark as spark_support
    from ckptfix.spark.state_engine import read_state_spark

    def run(url: str, **kwargs: Any) -> Any:
        return read_state_spark(spark_support.session(), url, changes=changes, **kwargs)

    return run


def _parallel(read: Any, fmt: DataFormat, jobs: int | None, engine: str, quiet: bool = False) -> int:
    """How many worker processes to read with: --jobs, else one per core for a local
    checkpoint (remote stores keep one process: their clients do not survive a fork)."""
    from ckptfix.state import parallel

    parts = len(read.selection.partitions)
    if engine != "local" or parts < 2 or not parallel.available():
        return 1
    local = (
        read.selection.ckpt.location.url.startswith(("file://", "/")) or "://" not in read.selection.ckpt.location.url
    )
    if not local:  # new-user trial 3: --jobs 2 on S3 forked, and the fork's S3 client failed ("not fork-safe")
        if jobs is not None and jobs > 1:
            note(quiet, f"--jobs {jobs}: reading in one process (the client of a remote store does not survive a fork)")
        return 1
    if jobs is not None:
        return max(1, min(jobs, parts))
    return parallel.default_jobs(parts)


def _write(read: Any, fmt: DataFormat, out_path: str | None, jobs: int = 1) -> int:
    from ckptfix.state import export

    if fmt is DataFormat.json:  # one document, printed or written once every row has been read
        doc = jsonout.rows_document(
            _selection_json(read), export.json_line_maker(read.columns, read.schemas), read.rows
        )
        if out_path is None:
            emit(doc.text)
            return doc.rows
        return _to_file(out_path, "w", lambda f: (f.write(doc.text + "\n"), doc.rows)[1])
    if jobs > 1:
        return _write_parallel(read, fmt, out_path, jobs)
    if fmt is DataFormat.parquet:
        if out_path is None:
            raise UsageError("--format parquet needs --out FILE")
        return _to_file(out_path, "wb", lambda f: export.write_parquet(read.rows, f, read.columns, read.schemas))
    if out_path is None:
        stream: IO[str] = sys.stdout
        n = _rows_to(stream, read, fmt)
        stream.flush()
        return n
    return _to_file(out_path, "w", lambda f: _rows_to(f, read, fmt))


def _selection_json(read: Any) -> dict[str, Any]:
    sel = read.selection
    side = sel.join_side
    return {
        "checkpoint": sel.ckpt.location.url,
        "operator": sel.op.operator,
        # a join side is read from two stores (new-user trial 3: it said "default", a store joins do not have)
        "store": f"{side}-keyToNumValues, {side}-keyWithIndexToValue" if side else sel.store_name,
        "join_side": side,
        "state_variable": sel.state_var,  # timers: the timer column family
        "version": sel.version,
        "batch": sel.batch,
        "partitions": list(sel.partitions),
        "columns": list(read.columns),
    }


def _write_parallel(read: Any, fmt: DataFormat, out_path: str | None, jobs: int) -> int:
    from ckptfix.state import export, parallel

    if fmt is DataFormat.parquet:
        if out_path is None:
            raise UsageError("--format parquet needs --out FILE")
        cols, types = read.columns, read.schemas
        blobs = parallel.parallel_chunks(
            read.selection.partitions, read.partition_rows, lambda rows: export.arrow_chunk(rows, cols, types), jobs
        )
        return _to_file(out_path, "wb", lambda f: export.write_parquet_chunks(blobs, f, cols, types))

    if fmt is DataFormat.csv:
        header, to_text = (
            export.csv_header(read.columns, read.schemas),
            export.csv_line_maker(read.columns, read.schemas),
        )
    else:
        header, to_text = "", export.json_line_maker(read.columns, read.schemas)
    chunks = parallel.parallel_text(read.selection.partitions, read.partition_rows, to_text, jobs)

    def emit(stream: IO[str]) -> int:
        n = 0
        stream.write(header)
        for chunk, rows in chunks:
            stream.write(chunk)
            n += rows
        return n

    if out_path is None:
        n = emit(sys.stdout)
        sys.stdout.flush()
        return n
    return _to_file(out_path, "w", emit)


def _rows_to(stream: IO[str], read: Any, fmt: DataFormat) -> int:
    from ckptfix.state import export

    if fmt is DataFormat.csv:
        return export.write_csv(read.rows, stream, read.columns, read.schemas)
    return export.write_jsonl(read.rows, stream, read.columns, read.schemas)


def _to_file(path: str, mode: str, fn: Callable[[Any], int]) -> int:
    return write_local("--out", path, mode, fn)


def _summary(read: Any, n: int, what: str, quiet: bool) -> None:
    if quiet:
        return
    sel = read.selection
    chains = "; ".join(f"partition {p}: {c}" for p, c in sorted(read.chains.items()))
    err().print(
        f"{n} {what} of operator {sel.op.operator} at version {sel.version} (state after batch {sel.batch})"
        + (f" -- {chains}" if chains else ""),
        highlight=False,
        markup=False,
        soft_wrap=True,
    )


@app.command("ls")
def ls(
    checkpoint: str = typer.Argument(..., help="Checkpoint location."),
    verify: bool = typer.Option(False, "--verify", help="Read and check every file of the last version's chain."),
    fmt: Format = FormatOption,
    storage_option: list[str] = StorageOption,
    endpoint_url: str | None = EndpointOption,
    quiet: bool = QuietOption,
) -> None:
    """Operators, stores and partitions, and which versions each can load. Exit 1: the last
    committed version cannot be loaded somewhere; 2: bad input."""
    from ckptfix.state.inventory import list_state

    opts = storage_options(fmt, storage_option, endpoint_url)
    listing = list_state(checkpoint, verify=verify, storage_options=opts)
    if fmt is Format.json:
        emit(jsonout.document(**listing.to_json()))
    else:
        text.state_listing(listing, out())
    if not listing.ok:
        raise typer.Exit(1)


@app.command("read")
def read(
    checkpoint: str = typer.Argument(..., help="Checkpoint location."),
    operator: int = OperatorOption,
    batch: int | None = typer.Option(
        None, "--batch", help="Read the state after this batch (default: last committed)."
    ),
    version: int | None = typer.Option(None, "--version", help="Read this state version (= batch + 1)."),
    partition: int | None = PartitionOption,
    store: str | None = StoreOption,
    join_side: str | None = typer.Option(
        None, "--join-side", metavar=choices(["left", "right"]), help="Stream-stream join: left or right."
    ),
    state_var: str | None = StateVarOption,
    timers: bool = typer.Option(False, "--timers", help="transformWithState: the registered timers."),
    from_snapshot: int | None = typer.Option(
        None, "--from-snapshot", help="Start from the snapshot after this batch, ignoring newer ones."
    ),
    flatten: bool = typer.Option(True, "--flatten/--no-flatten", help="List/map state: one row per element."),
    where: str | None = typer.Option(
        None,
        "--where",
        help="Only the rows whose key matches, over key columns: col = 'x', col != 1, col IN ('a', 'b'), "
        "col IS [NOT] NULL, joined with AND; dots reach into struct columns (window.start). No code is evaluated.",
    ),
    key_schema: str | None = KeySchemaOption,
    value_schema: str | None = ValueSchemaOption,
    force_schema: bool = ForceSchemaOption,
    fmt: DataFormat | None = DataFormatOption,
    out_path: str | None = OutOption,
    engine: str = EngineOption,
    jobs: int | None = JobsOption,
    storage_option: list[str] = StorageOption,
    endpoint_url: str | None = EndpointOption,
    quiet: bool = QuietOption,
) -> None:
    """Stream the state rows (key, value, partition_id) of a committed version, decoded as
    Spark's statestore reader shows them. Exit 2: bad input."""
    fmt = _row_format(fmt, out_path)
    opts = _guard_rows(fmt, lambda: parse_storage_options(storage_option, endpoint_url))
    reads: list[Any] = []

    def run() -> tuple[Any, int]:
        result = _reader(engine, False)(
            checkpoint,
            operator=operator,
            batch=batch,
            version=version,
            partition=partition,
            store_name=store,
            join_side=join_side,
            state_var=state_var,
            timers=timers,
            from_snapshot=from_snapshot,
            flatten=flatten,
            storage_options=opts,
            where=where,
            **schema_options(key_schema, value_schema, force_schema),
        )
        reads.append(result)
        return result, _write(result, fmt, out_path, _parallel(result, fmt, jobs, engine, quiet))

    def rebuild(exc: CkptfixError) -> str | None:
        from ckptfix.repair.rebuild import rebuild_hint

        if not reads or not isinstance(exc, FormatError) or engine != "local":
            return None
        try:
            then = rebuild_hint(reads[0].selection, exc, checkpoint)
        except (CkptfixError, OSError):  # the store cannot tell: the error alone, as without a hint
            then = None
        others = _other_partitions(reads[0].selection, exc, checkpoint) if partition is None else None
        return "; ".join(h for h in (then, others) if h) or None

    result, n = _guard_rows(fmt, run, rebuild)
    _summary(result, n, "rows", quiet)


def _other_partitions(sel: Any, exc: FormatError, checkpoint: str) -> str | None:
    """How to read the rest when one partition's file fails (new-user trial 4: `state read --where` for one key
    failed on another partition's damaged file, with no way forward named): the partitions that load, one
    ``--partition`` at a time. None when the file is no partition's, or the read has one partition only."""
    m = re.search(rf"/state/{sel.op.operator}/(\d+)/", exc.path)
    if m is None or len(sel.partitions) < 2:
        return None
    bad = int(m.group(1))
    rest = [p for p in sel.partitions if p != bad]
    shown = ", ".join(map(str, rest[:5])) + (", ..." if len(rest) > 5 else "")
    return (
        f"the other partitions ({shown}) can be read one at a time with --partition N (a key is in one partition "
        f"only; `ckptfix state ls {shlex.quote(checkpoint)} --verify` shows which partitions load)"
    )


@app.command("changes")
def changes(
    checkpoint: str = typer.Argument(..., help="Checkpoint location."),
    from_batch: int = typer.Option(..., "--from", help="First batch id (changeStartBatchId)."),
    to_batch: int | None = typer.Option(None, "--to", help="Last batch id (default: last committed)."),
    operator: int = OperatorOption,
    partition: int | None = PartitionOption,
    store: str | None = StoreOption,
    state_var: str | None = StateVarOption,
    key_schema: str | None = KeySchemaOption,
    value_schema: str | None = ValueSchemaOption,
    force_schema: bool = ForceSchemaOption,
    fmt: DataFormat | None = DataFormatOption,
    out_path: str | None = OutOption,
    engine: str = EngineOption,
    jobs: int | None = JobsOption,
    storage_option: list[str] = StorageOption,
    endpoint_url: str | None = EndpointOption,
    quiet: bool = QuietOption,
) -> None:
    """The change feed (batch_id, change_type, key, value, partition_id) between two batches,
    as Spark's readChangeFeed. Exit 2: bad input."""
    fmt = _row_format(fmt, out_path)
    opts = _guard_rows(fmt, lambda: parse_storage_options(storage_option, endpoint_url))

    def run() -> tuple[Any, int]:
        result = _reader(engine, True)(
            checkpoint,
            from_batch=from_batch,
            to_batch=to_batch,
            operator=operator,
            partition=partition,
            store_name=store,
            state_var=state_var,
            storage_options=opts,
            **schema_options(key_schema, value_schema, force_schema),
        )
        return result, _write(result, fmt, out_path, _parallel(result, fmt, jobs, engine, quiet))

    result, n = _guard_rows(fmt, run)
    sel = result.selection
    note(quiet, f"{n} changes of operator {sel.op.operator} in batches {from_batch}..{sel.batch}")


@app.command("rebuild")
def rebuild(
    checkpoint: str = typer.Argument(..., help="Checkpoint location."),
    version: int | None = typer.Option(None, "--version", help="State version to snapshot (default: last committed)."),
    batch: int | None = typer.Option(None, "--batch", help="Snapshot the state after this batch (= version - 1)."),
    operator: int | None = typer.Option(None, "--operator", help="Only this operator (default: all)."),
    partition: int | None = PartitionOption,
    prune: bool = typer.Option(False, "--prune", help="Then delete what Spark's cleanup would (backed up first)."),
    retain: int | None = typer.Option(
        None, "--retain", help="Versions Spark retains (minBatchesToRetain, default 100)."
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
    """Write a snapshot of a state version from the newest good snapshot before it plus the
    deltas/changelogs (HDFS: N.snapshot; RocksDB: N.zip + SSTs), skipping a corrupt snapshot.
    Dry run unless --apply; undo with `ckptfix undo`. Exit 2: refused or bad input."""
    from ckptfix.audit import audit as run_audit
    from ckptfix.cli.repair_cmd import carry_out
    from ckptfix.repair.rebuild import plan_rebuild

    opts = storage_options(fmt, storage_option, endpoint_url)
    result = plan_rebuild(
        checkpoint,
        version=version,
        batch=batch,
        operator=operator,
        partition=partition,
        prune=prune,
        retain=retain,
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
