"""Run the real CLI entry point in-process (so the live Spark session of the fixture is the active one)."""

from __future__ import annotations

from typing import Any

from ckptfix.cli.main import main


def cli(capsys: Any, *args: str) -> tuple[int, str, str]:
    """``ckptfix <args>`` through ``main`` (its error handling included): (exit code, stdout, stderr)."""
    capsys.readouterr()
    try:
        main(list(args))
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 0
    else:  # pragma: no cover - main always exits
        code = 0
    out, err = capsys.readouterr()
    return code, out, err
