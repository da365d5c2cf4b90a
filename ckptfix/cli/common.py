"""What every command shares: output format, storage options, error handling, progress."""

from __future__ import annotations

import contextlib
import os
import re
import stat
import sys
from collections.abc import Callable
from enum import Enum
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import typer
from typer.core import TyperGroup

from ckptfix.audit.targets import NEWEST, SUPPORTED
from ckptfix.errors import CkptfixError, UsageError, error_line
from ckptfix.render import jsonout
from ckptfix.storage import parse_storage_options

if TYPE_CHECKING:  # rich loads when a command first prints through it (40 ms of every start otherwise)
    from rich.console import Console
    from rich.progress import Progress


class Format(str, Enum):
    text = "text"
    json = "json"


FormatOption = typer.Option(Format.text, "--format", "-f", help="Output format: text (rich) or json.")
StorageOption = typer.Option(
    [],
    "--storage-option",
    "-o",
    metavar="KEY=VALUE",
    help="fsspec storage option (repeat; dotted keys nest, values parse as JSON). Also $CKPTFIX_STORAGE_OPTIONS.",
)
EndpointOption = typer.Option(
    None, "--endpoint-url", help="S3-compatible endpoint URL (sets client_kwargs.endpoint_url)."
)


def choices(values: tuple[str, ...] | list[str]) -> str:
    """How --help shows an option that takes one of a few values (typer would show ``<str>``)."""
    return "<" + "|".join(values) + ">"


def _complete_target(incomplete: str) -> list[str]:
    return [v for v in SUPPORTED if v.startswith(incomplete)]


TargetSparkOption = typer.Option(
    NEWEST,
    "--target-spark",
    metavar=choices(SUPPORTED),
    autocompletion=_complete_target,
    help="The Spark release that will restart the query (default: the newest supported).",
)
QuietOption = typer.Option(
    False, "--quiet", "-q", help="Only the result on stdout: no progress, summary or hint on stderr (errors still)."
)


# -- options more than one command takes: declared here once (a command may word its help for its own case) ----
def apply_option(help: str = "Carry the plan out (default: show it, change nothing).") -> Any:
    return typer.Option(False, "--apply", help=help)


def force_option(help: str = "Touch a checkpoint that looks alive (recent writes, new batch).") -> Any:
    return typer.Option(False, "--force", help=help)


def idle_option(help: str = "A write this recent means the query may be running.") -> Any:
    return typer.Option(120.0, "--idle-seconds", min=0.0, help=help)


def backup_option(help: str = "Where backups and the journal go (default <CKPT>/_ckptfix).") -> Any:
    return typer.Option(None, "--backup-dir", help=help)


def master_option(help: str = "Spark master for a new session (default local[*]).") -> Any:
    return typer.Option(None, "--master", help=help)


def conf_option(help: str = "Spark conf (repeat).") -> Any:
    return typer.Option([], "--conf", metavar="KEY=VALUE", help=help)


ApplyOption = apply_option()
ForceOption = force_option()
IdleOption = idle_option()
BackupOption = backup_option()
SinkOption = typer.Option(
    None, "--sink", help="The sink's path: a file sink's output (_spark_metadata) or a Delta table (_delta_log)."
)
StatefulOption = typer.Option(
    None,
    "--stateful/--stateless",
    help="Say whether the query has stateful operators (default: infer from the files).",
)
PlanOutOption = typer.Option(None, "--plan-out", help="Save the plan as JSON for `ckptfix apply`.")
OperatorOption = typer.Option(0, "--operator", help="Stateful operator id (state/<id>).")
KeySchemaOption = typer.Option(
    None,
    "--key-schema",
    help="Key schema in Spark DDL, when none is stored. One that disagrees with a stored schema (field count or "
    "types by position, as Spark's own schema check) is refused unless --force-schema; names may differ.",
)
ValueSchemaOption = typer.Option(
    None, "--value-schema", help="Value schema in Spark DDL, when none is stored (checked like --key-schema)."
)
ForceSchemaOption = typer.Option(
    False,
    "--force-schema",
    help="Use --key-schema/--value-schema even where they disagree with the stored one.",
)


def conf_pairs(pairs: list[str]) -> dict[str, str]:
    """``--conf KEY=VALUE`` (repeated) as a dict; a malformed pair, or a value Spark refuses for a conf ckptfix
    interprets (``spark.sql.shuffle.partitions=abc``), is a usage error."""
    from ckptfix.api import check_session_conf
    from ckptfix.errors import UsageError

    confs: dict[str, str] = {}
    for item in pairs:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--conf {item!r}: expected KEY=VALUE")
        confs[key.strip()] = value
    return check_session_conf(confs, "--conf")


def schema_options(key_ddl: str | None, value_ddl: str | None, force: bool = False) -> dict[str, Any]:
    """``--key-schema``/``--value-schema``/``--force-schema`` as the library's keyword arguments."""
    if not key_ddl and not value_ddl:
        return {}
    from ckptfix.formats import ddl

    return {
        "key_schema": ddl.parse_ddl(key_ddl, "--key-schema") if key_ddl else None,
        "value_schema": ddl.parse_ddl(value_ddl, "--value-schema") if value_ddl else None,
        **({"force_schema": True} if force else {}),
    }


def stdout_gone(stream: Any = None) -> None:
    """The reader of stdout (or of ``stream``: stderr) went away (``ckptfix ... | head``): everything still to
    print there goes to /dev/null, so the command ends quietly, with the exit code of its result, as other Unix
    tools do."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    with contextlib.suppress(OSError, ValueError):  # a stream without a file descriptor (a capture): nothing to do
        os.dup2(devnull, (stream or sys.stdout).fileno())
    os.close(devnull)


@cache
def _console() -> type[Console]:
    from rich.console import Console

    class _Quiet(Console):
        def on_broken_pipe(self) -> None:  # rich's default exits 1, the exit code of "findings"
            self.quiet = True
            stdout_gone(self.file)

        def print(self, *objects: Any, **kwargs: Any) -> None:
            # bytes quoted from a damaged file (a NUL, an escape) must not reach the terminal raw
            super().print(*(_printable(o) if isinstance(o, str) else o for o in objects), **kwargs)

    return _Quiet


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def _printable(text: str) -> str:
    """``text`` with control characters other than newline and tab written as ``\\xNN``, as JSON output escapes
    them."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


#: the width of a console that writes to a pipe or a file: wide enough that no table row folds
PIPE_WIDTH = 100_000


def console(file: Any) -> Console:
    """The one place a CLI console is made. A line of text is never broken at the width: it stays one line for
    grep and for the reader's own terminal to wrap. Tables fit the terminal's width; on a pipe or in a file
    (where rich would take 80 columns, or the width of whichever other stream is a terminal) they take their
    natural width, so ``ckptfix state ls CKPT | cat`` folds no cell. ``COLUMNS`` sets the width everywhere."""
    c = _console()(file=file, soft_wrap=True, markup=False, emoji=False, highlight=False)
    if not c.is_terminal and not os.environ.get("COLUMNS", "").isdigit():
        c.width = PIPE_WIDTH
    return c


def out() -> Console:
    """Where results go (stdout); see :func:`console`."""
    return console(sys.stdout)


def err() -> Console:
    """Where messages go (stderr): progress, summaries, hints and errors; see :func:`console`. A closed
    stderr ends them quietly, as a closed stdout ends the results."""
    return console(sys.stderr)


class _NoPandasYet:
    """A finder that makes ``import pandas`` fail (see :func:`arrow_without_pandas`)."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name == "pandas":
            raise ImportError("pandas is not loaded for pyarrow's first conversion")


def arrow_without_pandas() -> None:
    """pyarrow imports pandas (0.15 s and 300 modules) the first time it converts a Python value, only to check
    whether the value is a pandas object. A command that reads state hands pyarrow none, so before it converts
    anything, pyarrow's check runs once with pandas out of reach, and pyarrow takes pandas as absent for those
    checks. pyarrow still imports pandas when a pandas object or a DataFrame is asked of it (``from_pandas``,
    ``to_pandas``, a Series with ``__arrow_array__``): nothing it can do is lost. Nothing happens when pandas is
    already loaded or pyarrow is not installed."""
    if "pandas" in sys.modules:
        return
    try:
        import pyarrow
    except ImportError:
        return
    finder = _NoPandasYet()
    sys.meta_path.insert(0, finder)
    try:
        pyarrow.array([0])
    finally:
        sys.meta_path.remove(finder)


def note(quiet: bool, message: str) -> None:
    """A message that is not the result (a summary, a dry-run hint): stderr, unless --quiet."""
    if not quiet:
        err().print(message, highlight=False, markup=False, soft_wrap=True)


def dry_run_hint(quiet: bool, then: str = "carry the plan out") -> None:
    """The one dry-run hint of every command that plans (repair, rollback, state rebuild/delete/put/repartition,
    migrate provider/relocate): a message, so stderr, and none with --quiet (docs/output.md)."""
    note(quiet, f"dry run: nothing written; add --apply to {then}")


def emit(document: str) -> None:
    """Print one rendered document on stdout; a closed pipe ends quietly (see :func:`stdout_gone`)."""
    try:
        sys.stdout.write(document + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        stdout_gone()


def write_local(option: str, path: str | Path, mode: str, fn: Callable[[Any], int]) -> int:
    """Write a local file an option names (``--out``, ``--plan-out``, ``--chart``) through ``fn(file)``; returns
    what ``fn`` returns. A regular file (or a new name) is written as ``<name>.partial`` and renamed over it at the
    end, so a failed read never leaves half a file; a symbolic link is followed, so the link stays and its target
    gets the content. Anything else that exists (a FIFO, a terminal, ``/dev/stdout``) is written in place: a
    rename would replace it with a regular file."""
    encoding = {} if "b" in mode else {"encoding": "utf-8", "newline": ""}
    try:
        try:
            kind = os.stat(path).st_mode  # through links: /dev/stdout is the pipe or terminal it stands for
        except FileNotFoundError:
            kind = None
        if kind is not None and stat.S_ISDIR(kind):
            raise UsageError(f"{option} {path}: expected a file name, found a directory")
        if kind is not None and not stat.S_ISREG(kind):
            with open(path, mode, **encoding) as f:  # type: ignore[call-overload]
                return int(fn(f))
        if re.match(r"[a-z][a-z0-9+.-]*://", str(path)):  # new-user trial 3: s3://... became ./s3:/... in the message
            raise UsageError(
                f"{option} {path}: expected a local file name, found a URL (ckptfix writes its output locally: "
                "write it here and copy it, e.g. with `aws s3 cp`)"
            )
        real = os.path.realpath(path)
        parent = os.path.dirname(real)
        if not os.path.isdir(parent):
            raise UsageError(f"{option} {path}: expected an existing directory to write into, found no {parent}")
        partial = f"{real}.partial"
        try:
            with open(partial, mode, **encoding) as f:  # type: ignore[call-overload]
                n = fn(f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(partial, real)
            return int(n)
        except BaseException:
            with contextlib.suppress(OSError):
                os.remove(partial)
            raise
    except OSError as exc:
        if exc.filename is not None or exc.errno is None:
            raise
        # a failed write or close names no file (ENOSPC, EPIPE): name the option's
        raise OSError(exc.errno, exc.strerror, f"{option} {path}") from None


def write_out(option: str, path: Path, data: bytes) -> None:
    """A local file an option names (--plan-out, --chart), all at once: :func:`write_local`."""
    write_local(option, path, "wb", lambda f: f.write(data))


def fail(fmt: Format, message: str, kind: str) -> NoReturn:
    """One line (or one JSON document) and exit 2."""
    if fmt is Format.json:
        emit(jsonout.error(message, kind))
    else:
        err().print(f"ckptfix: error: {message}", highlight=False, markup=False, soft_wrap=True)
    raise typer.Exit(2)


def json_requested(argv: list[str]) -> bool:
    """Whether the command line asks for ``--format json`` (errors then come as one JSON document)."""
    for i, a in enumerate(argv):
        if a in ("--format=json", "-fjson") or (a in ("--format", "-f") and argv[i + 1 : i + 2] == ["json"]):
            return True
    return False


def _bare_flags(command: Any, ctx: Any) -> None:
    """An on/off flag takes no value: --help shows no type for it (typer >= 0.20 would show ``<bool>``); an
    argument is named in capitals in the usage line (``CHECKPOINT``, not typer's ``{checkpoint}``)."""
    for param in [*command.params, command.get_help_option(ctx)]:
        flag = param is not None and getattr(param, "is_flag", False) and not getattr(param, "count", False)
        if flag and param.metavar is None:
            param.metavar = ""
        if param is not None and getattr(param, "param_type_name", "") == "argument" and param.metavar is None:
            param.metavar = str(param.name).upper()
    for sub in getattr(command, "commands", {}).values():
        _bare_flags(sub, ctx)


class GuardedGroup(TyperGroup):
    """The one error guard of the CLI: every command runs inside it, so a library call that fails as expected
    (content, usage, storage: :class:`CkptfixError`, :class:`OSError`) ends in one clear line, or one JSON
    document with ``--format json``, and exit 2, whichever command raised it."""

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = super().get_command(ctx, cmd_name)
        if command is not None:
            _bare_flags(command, ctx)
        return command

    def get_params(self, ctx: Any) -> Any:
        _bare_flags(self, ctx)
        return super().get_params(ctx)

    def parse_args(self, ctx: Any, args: list[str]) -> Any:  # ``ckptfix --help`` is printed while parsing
        try:
            return super().parse_args(ctx, args)
        except BrokenPipeError:
            stdout_gone()
            raise typer.Exit(0) from None

    def invoke(self, ctx: Any) -> Any:  # a click Context (typer vendors click from 0.20 on)
        argv = [*getattr(ctx, "_protected_args", []), *ctx.args]
        fmt = Format.json if json_requested(argv) else Format.text
        try:
            return super().invoke(ctx)
        except CkptfixError as exc:
            fail(fmt, str(exc), type(exc).__name__)
        except BrokenPipeError:  # the reader of stdout (``| head``) left: end quietly, as the results do
            stdout_gone()
            raise typer.Exit(0) from None
        except OSError as exc:  # storage: FileNotFoundError, PermissionError, unreachable store
            fail(fmt, error_line(exc), type(exc).__name__)
        except KeyboardInterrupt:
            fail(fmt, "interrupted", "Interrupted")


def storage_options(fmt: Format, pairs: list[str], endpoint: str | None) -> dict[str, Any]:
    return parse_storage_options(pairs, endpoint)


class RichProgress:
    """A :class:`ckptfix.progress.Progress` on stderr: a bar for counted stages, a line per step; silent when
    stderr is not a terminal."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled and sys.stderr.isatty()
        self.progress: Progress | None = None
        self.task: Any = None

    def __enter__(self) -> RichProgress:
        if self.enabled:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                SpinnerColumn,
                TextColumn,
                TimeElapsedColumn,
            )

            self.progress = Progress(
                SpinnerColumn(),
                TextColumn("{task.description}", markup=False),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=err(),
                transient=True,
            )
            self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.stop()

    def stage(self, name: str, total: int | None = None) -> None:
        if self.progress is None:
            return
        if self.task is not None:
            self.progress.remove_task(self.task)
        self.task = self.progress.add_task(name, total=total)

    def advance(self, n: int = 1) -> None:
        if self.progress is not None and self.task is not None:
            self.progress.advance(self.task, n)

    def step(self, message: str, **data: Any) -> None:
        if self.progress is not None:
            self.progress.console.print(message, highlight=False, markup=False, soft_wrap=True)
