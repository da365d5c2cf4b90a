"""Load a user's query as ``MODULE:FUNCTION``, call it with a SparkSession, check what it returns.

The contract shared by every command that needs "the new query" without starting it
(``ckptfix audit --against``, ``ckptfix async-off``): FUNCTION takes one argument, a
SparkSession, and returns an unstarted ``pyspark.sql.streaming.DataStreamWriter``
(``df.writeStream...``, with format/options/trigger set, without ``.start()``).
MODULE is an importable module name (``pkg.mod``) or a path to a ``.py`` file.
Every failure is a :class:`UsageError` with one line; nothing is started, nothing is written.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from typing import Any

from ckptfix.errors import MissingExtra, UsageError


def split_spec(spec: str) -> tuple[str, str]:
    """``"pkg.mod:build"`` or ``"path/to/file.py:build"`` -> (module, function)."""
    module, sep, func = spec.rpartition(":")
    if not sep or not module or not func or not func.isidentifier():
        raise UsageError(f"--against {spec!r}: expected MODULE:FUNCTION (e.g. myjobs.orders:build)")
    return module, func


def load_function(spec: str) -> Any:
    """Import MODULE and return its attribute FUNCTION (must be callable)."""
    module_name, func = split_spec(spec)
    try:
        if module_name.endswith(".py") or os.sep in module_name or "/" in module_name:
            path = os.path.abspath(module_name)
            if not os.path.isfile(path):
                raise UsageError(f"{spec}: module file {path} does not exist")
            name = "_ckptfix_user_" + os.path.splitext(os.path.basename(path))[0]
            loaded = importlib.util.spec_from_file_location(name, path)
            if loaded is None or loaded.loader is None:
                raise UsageError(f"{spec}: cannot load {path} as a Python module")
            module = importlib.util.module_from_spec(loaded)
            sys.modules[name] = module
            loaded.loader.exec_module(module)
        else:
            if os.getcwd() not in sys.path and "" not in sys.path:
                sys.path.insert(0, os.getcwd())
            module = importlib.import_module(module_name)
    except UsageError:
        raise
    except BaseException as exc:  # noqa: BLE001 - user code: any failure becomes one line
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise UsageError(f"{spec}: module {module_name!r} does not import: {_one_line(exc)}") from None
    fn = getattr(module, func, None)
    if fn is None:
        raise UsageError(f"{spec}: module {module_name!r} has no attribute {func!r}")
    if not callable(fn):
        raise UsageError(f"{spec}: {module_name}.{func} is a {type(fn).__name__}, expected a function")
    return fn


def load_writer(spec: str, spark: Any) -> Any:
    """Call FUNCTION(spark) and return the unstarted DataStreamWriter it builds."""
    try:
        from pyspark.sql.streaming import DataStreamWriter
    except ImportError:
        raise MissingExtra("pyspark", "spark") from None
    fn = load_function(spec)
    try:
        result = fn(spark)
    except BaseException as exc:  # noqa: BLE001 - user code
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise UsageError(f"{spec}: calling it with a SparkSession raised {_one_line(exc)}") from None
    if not isinstance(result, DataStreamWriter):
        hint = ""
        if type(result).__name__ == "StreamingQuery":
            hint = " (it started the query: return df.writeStream... without .start())"
        elif type(result).__name__ == "DataFrame":
            hint = " (return df.writeStream..., not the DataFrame)"
        raise UsageError(
            f"{spec}: returned {type(result).__module__}.{type(result).__name__}, "
            f"expected an unstarted pyspark.sql.streaming.DataStreamWriter{hint}"
        )
    return result


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__
