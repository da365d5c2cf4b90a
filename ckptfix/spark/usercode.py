"""Load a user's query as ``MODULE:FUNCTION``, call it with a SparkSession, check what it returns.

The contract shared by every command that needs "the new query" without starting it
(``ckptfix audit --against``, ``ckptfix async-off --query``): FUNCTION takes one argument, a
SparkSession, and returns an unstarted ``pyspark.sql.streaming.DataStreamWriter``
(``df.writeStream...``, with format/options/trigger set, without ``.start()``).
MODULE is an importable module name (``pkg.mod``) or a path to a ``.py`` file.
Every failure is a :class:`QueryModuleError` with one line naming the command's option (``option``:
``--against``, ``--query``); nothing is started, nothing is written.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Callable
from typing import Any

from ckptfix.errors import (
    MissingExtra,
    QueryModuleError,
)

#: the option of ``ckptfix audit`` that names the query module (the default of every function here)
AGAINST = "--against"


def split_spec(spec: str, option: str = AGAINST) -> tuple[str, str]:
    """``"pkg.mod:build"`` or ``"path/to/file.py:build"`` -> (module, function)."""
    module, sep, func = spec.rpartition(":")
    if not sep or not module or not func or not func.isidentifier():
        raise QueryModuleError(f"{option}: expected MODULE:FUNCTION or path/to/file.py:FUNCTION, found {spec!r}")
    return module, func


def load_function(spec: str, option: str = AGAINST) -> Callable[[Any], Any]:
    """Import MODULE and return its attribute FUNCTION (must be callable)."""
    module_name, func = split_spec(spec, option)
    where = f"{option} {spec}"
    try:
        if module_name.endswith(".py") or os.sep in module_name or "/" in module_name:
            path = os.path.abspath(module_name)
            if not os.path.isfile(path):
                raise QueryModuleError(f"{where}: expected a Python file at {path}, found none")
            name = "_ckptfix_user_" + os.path.splitext(os.path.basename(path))[0]
            loaded = importlib.util.spec_from_file_location(name, path)
            if loaded is None or loaded.loader is None:
                raise QueryModuleError(f"{where}: {path} cannot be loaded as a Python module")
            module = importlib.util.module_from_spec(loaded)
            sys.modules[name] = module
            loaded.loader.exec_module(module)
        else:
            if os.getcwd() not in sys.path and "" not in sys.path:
                sys.path.insert(0, os.getcwd())
            module = importlib.import_module(module_name)
    except QueryModuleError:
        raise
    except BaseException as exc:  # noqa: BLE001 - user code: any failure becomes one line
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise QueryModuleError(f"{where}: importing {module_name} failed: {one_line(exc)}") from None
    fn = getattr(module, func, None)
    if fn is None:
        raise QueryModuleError(f"{where}: expected a function {func} in {module_name}, found none")
    if not callable(fn):
        raise QueryModuleError(f"{where}: expected {func} to be callable, found {type(fn).__name__}")
    return fn


def build_writer(fn: Callable[[Any], Any], spark: Any, spec: str, option: str = AGAINST) -> Any:
    """Call the loaded FUNCTION(spark) and return the unstarted DataStreamWriter it builds."""
    try:
        from pyspark.sql.streaming import DataStreamWriter
    except ImportError:
        raise MissingExtra("pyspark", "spark") from None
    try:
        result = fn(spark)
    except BaseException as exc:  # noqa: BLE001 - user code
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise QueryModuleError(f"{option} {spec}: the function raised {one_line(exc)}") from None
    if not isinstance(result, DataStreamWriter):
        hint = ""
        if type(result).__name__ == "StreamingQuery":
            hint = " (a started StreamingQuery: return df.writeStream... without .start())"
        elif type(result).__name__ == "DataFrame":
            hint = " (return df.writeStream..., not the DataFrame)"
        raise QueryModuleError(
            f"{option} {spec}: expected an unstarted DataStreamWriter, "
            f"found {type(result).__module__}.{type(result).__name__}{hint}"
        )
    return result


def load_writer(spec: str, spark: Any, option: str = AGAINST) -> Any:
    """Load MODULE:FUNCTION, call it with ``spark``, return the unstarted DataStreamWriter."""
    return build_writer(load_function(spec, option), spark, spec, option)


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (a StreamingQueryException's plan dump left out), or its type."""
    return _message(exc) or type(exc).__name__


def one_line(exc: BaseException) -> str:
    """``Type: first line of the message`` (``Type`` alone without a message)."""
    message = _message(exc)
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def _message(exc: BaseException) -> str:
    text = str(exc).split("\n=== Streaming Query ===", 1)[0].strip()
    return text.splitlines()[0] if text else ""
