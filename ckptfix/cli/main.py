"""Entry point: ``ckptfix <command>``."""

from __future__ import annotations

import sys

import click
import typer

from ckptfix import __version__
from ckptfix.cli import audit_cmd, inspect_cmd
from ckptfix.render import jsonout

app = typer.Typer(
    name="ckptfix",
    help="Read, audit and repair Spark Structured Streaming checkpoints without a JVM.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    add_completion=False,
)
app.command("inspect")(inspect_cmd.inspect)
app.command("audit")(audit_cmd.audit)
app.command("rules")(audit_cmd.rules)


@app.callback(invoke_without_command=True)
def _root(version: bool = typer.Option(False, "--version", help="Print the version and exit.")) -> None:
    if version:
        print(f"ckptfix {__version__}")
        raise typer.Exit(0)


def _json_requested(argv: list[str]) -> bool:
    for i, a in enumerate(argv):
        if a in ("--format=json", "-fjson") or (a in ("--format", "-f") and argv[i + 1 : i + 2] == ["json"]):
            return True
    return False


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    try:
        code = app(args=args, standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:  # usage errors: one line, exit 2
        if _json_requested(args):
            print(jsonout.error(exc.format_message(), "UsageError"))
        else:
            print(f"ckptfix: error: {exc.format_message()}", file=sys.stderr)
        sys.exit(2)
    except click.exceptions.Abort:
        print("ckptfix: error: aborted", file=sys.stderr)
        sys.exit(2)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
