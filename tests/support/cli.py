"""Run the ``ckptfix`` CLI in a child process (a real exit code and streams; a crash point kills it for real).

The crash tests run the CLI hundreds of times; a new interpreter with its imports costs about half a second each.
So where the platform can fork, the child comes from a fork server: a process forked from the test process at the
start of the session, before any test has run (so before RocksDB or Spark started threads in it), with ckptfix's
CLI imported. For each run it forks a child that takes the caller's environment, working directory and arguments,
writes to its own stdout and stderr files and runs ``ckptfix.cli.main.main``: the process boundary of
``python -m ckptfix.cli.main`` (a SIGKILL at a crash point kills that child alone, its exit code and streams are
its own). ``fresh=True``, or no fork server, starts a new interpreter instead (what an import-time behaviour needs).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any

from ckptfix.repair import engine

TIMEOUT = 120.0
_server: socket.socket | None = None


def run_cli(
    *args: str,
    crash_after: int | None = None,
    fresh: bool = False,
    env: dict[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    stdin: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """``ckptfix ARGS`` in a child process, as ``subprocess.run([python, "-m", "ckptfix.cli.main", *ARGS],
    capture_output=True, text=True, env=env, cwd=cwd, input=stdin)`` gives it (stdin empty when not given);
    ``crash_after``: the engine kills itself after that many durable writes
    (:data:`ckptfix.repair.engine.CRASH_ENV`)."""
    env = {k: v for k, v in (os.environ if env is None else env).items() if k != engine.CRASH_ENV}
    if crash_after is not None:
        env[engine.CRASH_ENV] = str(crash_after)
    where = os.fspath(cwd) if cwd is not None else os.getcwd()
    if fresh or _server is None:
        return subprocess.run(
            [sys.executable, "-m", "ckptfix.cli.main", *args],
            capture_output=True,
            text=True,
            env=env,
            cwd=where,
            input=stdin if stdin is not None else "",
            timeout=TIMEOUT,
        )
    temp = tempfile.NamedTemporaryFile
    with temp() as out, temp() as err, temp() as inp:
        inp.write((stdin or "").encode())
        inp.flush()
        request = {"args": list(args), "env": env, "cwd": where, "in": inp.name, "out": out.name, "err": err.name}
        _send(_server, request)
        _server.settimeout(TIMEOUT)
        pid = _receive(_server)["pid"]
        try:
            status = _receive(_server)["status"]
        except TimeoutError:
            os.kill(pid, signal.SIGKILL)
            _receive(_server)
            raise subprocess.TimeoutExpired(["ckptfix", *args], TIMEOUT) from None
        texts = [Path(f.name).read_text(encoding="utf-8", errors="replace") for f in (out, err)]
        return subprocess.CompletedProcess(["ckptfix", *args], status, texts[0], texts[1])


def start_server() -> None:
    """Fork the fork server (once per test process; call it before any test runs). Without ``fork``, nothing."""
    global _server
    if _server is not None or not hasattr(os, "fork"):
        return
    _warm()
    ours, theirs = socket.socketpair()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            ours.close()
            _serve(theirs)
        except BaseException:  # noqa: BLE001 - the server's own failure: the test process sees EOF
            code = 70
        finally:
            os._exit(code)
    theirs.close()
    _server = ours


def _warm() -> None:
    """Import what the commands import when they run (every ckptfix module, numpy and pyarrow; not RocksDB or
        Spark, which would start threads), and run the CLI twice (what its first run imports), so that a child starts
    where a run begins."""
    import importlib
    import pkgutil

    import ckptfix

    for info in pkgutil.walk_packages(ckptfix.__path__, "ckptfix."):
        if not info.name.startswith(("ckptfix.spark", "ckptfix.__main__")):
            with contextlib.suppress(ImportError):
                importlib.import_module(info.name)
    for name in ("numpy", "pyarrow", "pyarrow.compute", "pyarrow.parquet", "fsspec.implementations.local"):
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    import io

    from ckptfix.cli.main import main

    sink = io.StringIO()
    for args in (["--version"], ["inspect", os.path.join(os.sep, "nonexistent", "ckptfix-warm-up")]):
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink), contextlib.suppress(SystemExit):
            main(args)


def _serve(conn: socket.socket) -> None:
    """The fork server's loop: a child per request; the child's pid, then its wait status, go back."""
    while True:
        try:
            request = _receive(conn)
        except (EOFError, OSError):
            return
        pid = os.fork()
        if pid == 0:
            conn.close()
            _child(request)
        _send(conn, {"pid": pid})
        _, status = os.waitpid(pid, 0)
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        _send(conn, {"status": code})


def _child(request: dict[str, Any]) -> None:
    code = 70
    try:
        write = os.O_WRONLY | os.O_TRUNC
        for fd, path, mode in ((0, request["in"], os.O_RDONLY), (1, request["out"], write), (2, request["err"], write)):
            f = os.open(path, mode)
            os.dup2(f, fd)
            os.close(f)
        sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115 - ended by os._exit
        sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
        sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        engine._Crash._process = None  # the crash count is read from this child's environment
        from ckptfix.cli.main import main

        try:
            main(request["args"])
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: BLE001 - on the child's stderr, as a new interpreter would show it
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):  # a closed stream: nothing more to flush
                stream.flush()
        os._exit(code)


def _send(conn: socket.socket, message: dict[str, Any]) -> None:
    data = json.dumps(message).encode()
    conn.sendall(struct.pack(">I", len(data)) + data)


def _receive(conn: socket.socket) -> dict[str, Any]:
    head = _exactly(conn, 4)
    return json.loads(_exactly(conn, struct.unpack(">I", head)[0]))


def _exactly(conn: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = conn.recv(n - len(buf))
        if not chunk:
            raise EOFError("the fork server ended")
        buf += chunk
    return buf
