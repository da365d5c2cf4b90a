"""Entry point: ``ckptfix <command>``."""

from __future__ import annotations

import difflib
import importlib
import logging
import os
import sys
from typing import Any

import typer

from ckptfix import __version__
from ckptfix.cli.common import GuardedGroup, json_requested
from ckptfix.render import jsonout

#: a command's function (module:attribute under ckptfix.cli) or a group's typer app
_HOMES = {
    "inspect": "inspect_cmd:inspect",
    "audit": "audit_cmd:audit",
    "scan": "audit_cmd:scan",
    "rules": "audit_cmd:rules",
    "repair": "repair_cmd:repair",
    "apply": "repair_cmd:apply",
    "undo": "repair_cmd:undo",
    "history": "repair_cmd:history",
    "rollback": "rollback_cmd:rollback",
    "async-off": "async_cmd:async_off",
    "advise": "advise_cmd:advise",
    "offsets": "offsets_cmd:app",
    "state": "state_cmd:app",
    "migrate": "migrate_cmd:app",
}


def _register(app: typer.Typer, name: str) -> None:
    """Add one top-level command (or group) to ``app``. Its module is imported here, when the command runs or a
    help text lists it, so that a command does not pay for loading every other one (the audit engine, the
    repair engine, the advisor ...)."""
    module, attribute = _HOMES[name].split(":")
    target = getattr(importlib.import_module(f"ckptfix.cli.{module}"), attribute)
    if not isinstance(target, typer.Typer):
        app.command(name)(target)
        return
    if name == "state" and "delete" not in {c.name for c in target.registered_commands}:
        from ckptfix.cli import repartition_cmd, state_edit_cmd

        target.command("delete")(state_edit_cmd.delete)
        target.command("put")(state_edit_cmd.put)
        target.command("repartition")(repartition_cmd.repartition)
    app.add_typer(target, name=name)


#: the top-level commands in the order ``ckptfix --help`` lists them
COMMANDS = (
    "inspect",
    "audit",
    "scan",
    "rules",
    "repair",
    "apply",
    "undo",
    "history",
    "rollback",
    "async-off",
    "advise",
    "offsets",
    "state",
    "migrate",
)


class LazyGroup(GuardedGroup):
    """The root group: lists every command of :data:`COMMANDS` and builds one (with typer, as ``app.command``
    would have) only when it is asked for."""

    def list_commands(self, ctx: Any) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name in COMMANDS and cmd_name not in self.commands:
            shell = typer.Typer(rich_markup_mode=None, add_completion=False)
            shell.callback()(lambda: None)
            _register(shell, cmd_name)
            self.add_command(typer.main.get_command(shell).commands[cmd_name], cmd_name)  # type: ignore[attr-defined]
        return super().get_command(ctx, cmd_name)

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        """typer suggests the nearest command for a typo out of the commands built so far, which here are none:
        the suggestion comes from every command's name instead (``ckptfix audti`` -> "Did you mean 'audit'?"),
        as for a subcommand (``ckptfix state reed``)."""
        try:
            return super().resolve_command(ctx, args)
        except _usage_error() as exc:
            matches = difflib.get_close_matches(args[0], self.list_commands(ctx)) if args else []
            message = str(getattr(exc, "message", ""))
            if matches and message and "Did you mean" not in message:
                exc.message = f"{message.rstrip('.')}. Did you mean {', '.join(repr(m) for m in matches)}?"  # type: ignore[attr-defined]
            raise


def _usage_error() -> type[Exception]:
    """click's UsageError: typer >= 0.20 vendors click, older typers use click."""
    try:
        from typer import _click

        return _click.exceptions.UsageError
    except ImportError:
        import click

        return click.exceptions.UsageError


app = typer.Typer(
    name="ckptfix",
    cls=LazyGroup,  # the one error guard: every command's expected failures end in one line, exit 2
    help="Read, audit and repair Spark Structured Streaming checkpoints without a JVM. Start with `ckptfix audit "
    "CKPT`: it says whether Spark will restart the checkpoint, and the fix for each finding (`ckptfix repair CKPT` "
    "plans them).",
    epilog="Exit codes: each command's help gives 0, 1 and 2; every command exits 3 on an internal error (a bug in "
    "ckptfix: one line, CKPTFIX_DEBUG=1 shows the traceback).",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    add_completion=True,
    rich_markup_mode=None,
)


def command_names() -> list[str]:
    """Every command as a user types it (``audit``, ``state read``), each loaded: for the tests and the docs'
    check that every command is documented."""
    root = typer.main.get_command(app)
    ctx = typer.Context(root)
    names: list[str] = []
    for name in root.list_commands(ctx):  # type: ignore[attr-defined]
        command = root.get_command(ctx, name)  # type: ignore[attr-defined]
        subs = command.list_commands(ctx) if hasattr(command, "list_commands") else []
        names += [f"{name} {sub}" for sub in subs] or [name]
    return names


@app.callback(invoke_without_command=True)
def _root(version: bool = typer.Option(False, "--version", help="Print the version and exit.")) -> None:
    if version:
        print(f"ckptfix {__version__}")
        raise typer.Exit(0)


def _cli_exceptions() -> tuple[tuple[type[BaseException], ...], tuple[type[BaseException], ...]]:
    """(exit, usage) exception classes: typer >= 0.20 vendors click, older typers use click."""
    exits: list[type[BaseException]] = [typer.Exit]
    usage: list[type[BaseException]] = [getattr(typer, "TyperException", typer.Abort), typer.Abort]
    try:
        import click

        exits.append(click.exceptions.Exit)
        usage += [click.ClickException, click.exceptions.Abort]
    except ImportError:
        pass
    return tuple(exits), tuple(usage)


#: what a value of each type the command line could not convert should have been (pydantic's error types)
_EXPECTED = {
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "float_parsing": "a number",
    "bool_parsing": "true or false",
}


def usage_message(exc: BaseException) -> str:
    """A usage error as the rest of ckptfix words errors: ``--partition: expected an integer, found 'abc'``, not
    typer's ``Invalid value for '--partition': Input should be a valid integer, unable to parse string as an
    integer`` or ``Value error, 'x' is not one of ...``. Messages without a converted value stay as click made
    them."""
    message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
    param = getattr(exc, "param", None)
    errors = getattr(exc.__cause__, "errors", None)
    if param is None or not callable(errors):
        return message
    try:
        first = errors()[0]
        found = first["input"]
        kind = str(first.get("type", ""))
    except (IndexError, KeyError, TypeError, ValueError):
        return message
    name = max(getattr(param, "opts", None) or [str(getattr(param, "name", "?"))], key=len)
    choices = getattr(getattr(param, "type", None), "choices", None)
    if choices:
        expected = "one of " + ", ".join(str(getattr(c, "value", c)) for c in choices)
    elif kind == "value_error" and " is not one of " in str(first.get("msg", "")):  # an Enum option
        listed = str(first["msg"]).split(" is not one of ", 1)[1].rstrip(".")
        expected = "one of " + ", ".join(v.strip().strip("'") for v in listed.split(","))
    elif kind in _EXPECTED:
        expected = _EXPECTED[kind]
    elif kind == "greater_than_equal" and "ge" in (first.get("ctx") or {}):
        expected = f"at least {first['ctx']['ge']}"
    else:
        return message
    return f"{name}: expected {expected}, found {found!r}"


def _safe_streams() -> None:
    """Text a checkpoint holds (a lone surrogate in JSON, undecodable bytes) is printed escaped, never cut. A
    stream closed before the start (``2>&-``: Python then has no ``sys.stderr``) writes to /dev/null, so the
    command ends with the exit code of its result."""
    if sys.stdout is None:
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - for the life of the process
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - for the life of the process
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")


def _quiet_libraries() -> None:
    """Storage libraries log their retries with tracebacks (gcsfs: "_request out of retries ...", 50 lines on a
    DNS failure) through Python's last-resort handler; the user gets ckptfix's one line instead
    (CKPTFIX_DEBUG=1 keeps them)."""
    if not os.environ.get("CKPTFIX_DEBUG"):
        logging.getLogger().addHandler(logging.NullHandler())


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    _safe_streams()
    _quiet_libraries()
    exits, usage = _cli_exceptions()
    try:
        code = app(args=args, standalone_mode=False)
    except exits as exc:
        sys.exit(getattr(exc, "exit_code", 0))
    except usage as exc:  # usage errors: one line, exit 2
        message = usage_message(exc)
        if type(exc).__name__ == "NoArgsIsHelpError":  # `ckptfix` or `ckptfix state` alone: the help, not an error
            print(message.rstrip())
        elif json_requested(args):
            print(jsonout.error(message, "UsageError"))
        elif message.strip():  # older click printed the no-args help itself
            print(f"ckptfix: error: {message}", file=sys.stderr)
        sys.exit(2)
    except Exception as exc:  # a bug in ckptfix: one line, not a traceback (CKPTFIX_DEBUG=1 shows it)
        if os.environ.get("CKPTFIX_DEBUG"):
            raise
        message = f"internal error ({type(exc).__name__}: {exc}); please report it, CKPTFIX_DEBUG=1 shows the traceback"
        if json_requested(args):
            print(jsonout.error(message, "InternalError"))
        else:
            print(f"ckptfix: {message}", file=sys.stderr)
        sys.exit(3)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
