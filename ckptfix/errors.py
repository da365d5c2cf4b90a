"""Every exception ckptfix raises on purpose, in one flat module.

Storage problems stay Python's own ``FileNotFoundError`` / ``PermissionError`` (as s3fs
does); everything here is about *content* or about how ckptfix was called.
"""

from __future__ import annotations


class CkptfixError(Exception):
    """Base class: an error ckptfix can explain in one line."""


#: FormatError kinds about a file that is not there: no byte of it to point at, so the message names no offset
NO_BYTES = frozenset({"missing-file", "missing-schema", "sst-missing", "no-commits"})


class FormatError(CkptfixError):
    """A file's bytes are not what the format requires.

    ``offset`` is the byte offset in the file where the problem applies (the message leaves it out for a file
    that is not there: kinds :data:`NO_BYTES`).
    """

    def __init__(self, path: str, offset: int, expected: str, found: str, kind: str = "format") -> None:
        self.path = path
        self.offset = offset
        self.expected = expected
        self.found = found
        #: a stable machine-readable tag ("empty", "truncated-json", ...) the audit maps
        #: to the error Spark raises for the same bytes
        self.kind = kind
        at = "" if kind in NO_BYTES else f" at byte {offset}:"
        super().__init__(f"{path}:{at} expected {expected}, found {found}")


class UnsupportedVersion(FormatError):
    """A version header that this format (or the chosen Spark version) does not know."""

    def __init__(self, path: str, offset: int, expected: str, version: int) -> None:
        self.version = version
        super().__init__(path, offset, expected, f"v{version}", kind="unsupported-version")


class NotACheckpoint(CkptfixError):
    """The path exists but holds nothing that looks like a streaming checkpoint."""

    def __init__(self, path: str, found: str) -> None:
        self.path = path
        super().__init__(
            f"{path}: expected a Structured Streaming checkpoint "
            f"(metadata, offsets/, commits/ or state/), found {found}"
        )


class UsageError(CkptfixError):
    """The command line or an API call asked for something impossible."""


def install_command(extra: str) -> str:
    """The pip command that adds ``extra`` to this ckptfix, run by the Python this ckptfix runs in (``<python> -m
    pip``: a bare ``pip`` on PATH may belong to another environment; new-user trial 3). ckptfix is not on PyPI: it
    is installed from a checkout (README's first command, ``pip install .``), so the command names that checkout,
    the way README's commands do from inside it: ``... -m pip install -e '/src/ckptfix[rocksdb]'`` when this ckptfix
    runs from a checkout (an editable install; ``-e`` keeps it one), ``... -m pip install '/src/ckptfix[rocksdb]'``
    when pip recorded the checkout it installed from, ``... -m pip install '<checkout>[rocksdb]'`` otherwise."""
    import json
    import shlex
    import sys
    from importlib import metadata
    from pathlib import Path
    from urllib.parse import unquote, urlparse

    pip = f"{shlex.quote(sys.executable or 'python3')} -m pip install"
    root = Path(__file__).resolve().parent.parent
    if (root / "pyproject.toml").is_file() and (root / "ckptfix" / "errors.py").is_file():
        return f"{pip} -e {shlex.quote(f'{root}[{extra}]')}"
    for dist in metadata.distributions(name="ckptfix"):
        try:
            url = urlparse(json.loads(dist.read_text("direct_url.json") or "{}").get("url", ""))
        except (ValueError, AttributeError):
            continue
        if url.scheme == "file" and url.path:
            return f"{pip} {shlex.quote(f'{unquote(url.path)}[{extra}]')}"
    return f"{pip} '<checkout>[{extra}]'  (<checkout>: your clone of ckptfix)"


class MissingExtra(CkptfixError):
    """An optional dependency is needed for this path (s3fs, pyspark, ...)."""

    def __init__(self, module: str, extra: str) -> None:
        self.module = module
        self.extra = extra
        super().__init__(f"this needs the '{module}' package: {install_command(extra)}")

    @property
    def missing(self) -> str:
        """What was found instead of the package, for an "expected ..., found ..." line."""
        return f"no '{self.module}' package ({install_command(self.extra)})"


# -- repairs: plans, runs and their refusals


class PlanError(CkptfixError):
    """A plan file that cannot be used (malformed, other checkpoint, stale)."""


class PlanConflict(UsageError):
    """Two fixes want the same file: the later one is left out (the planner reports it unless the earlier
    fix already covers its finding)."""


class CannotFix(CkptfixError):
    """No safe change exists for a finding (the reason says why and what to do instead)."""


class PreconditionFailed(CkptfixError):
    """The checkpoint is not in the state the plan was made for."""


class LiveQuery(CkptfixError):
    """The checkpoint looks written to right now."""


class RunInterrupted(CkptfixError):
    """A run failed after it changed files: the checkpoint holds part of the plan; resume or undo it
    (``ckptfix.resume(checkpoint, run_id)`` / ``ckptfix.undo(checkpoint, run_id)``). ``run_id`` and ``checkpoint``
    (its URL) say which; None where the message is about a run other than the one asked for."""

    def __init__(self, message: str, run_id: str | None = None, checkpoint: str | None = None) -> None:
        super().__init__(message)
        self.run_id = run_id
        self.checkpoint = checkpoint


class BackupError(CkptfixError):
    """A backup object is missing or does not hold the bytes it is named after."""


class JournalError(CkptfixError):
    """A run's journal cannot be read."""


class Locked(CkptfixError):
    """Another ckptfix run holds the checkpoint's lock."""


class NoRun(CkptfixError):
    """No run in the backup location fits the request."""


class RollbackRefused(CkptfixError):
    """The rollback would not give a checkpoint Spark restarts correctly from batch N."""

    def __init__(self, batch: int, reason: str) -> None:
        self.batch = batch
        super().__init__(f"cannot roll back to batch {batch}: {reason}")


class RollbackInterrupted(CkptfixError):
    """``--with-sink``: the sink's run is done, the checkpoint's failed; the message says how to finish or undo."""


class SinkRollbackRefused(CkptfixError):
    """The file sink cannot be rolled back safely (the message says why)."""

    def __init__(self, batch: int, reason: str) -> None:
        self.batch = batch
        super().__init__(f"cannot roll the file sink back to batch {batch}: {reason}")


class SinkEntryRefused(CkptfixError):
    """The file sink cannot be given an entry for the batch (the message says why)."""

    def __init__(self, batch: int, reason: str) -> None:
        self.batch = batch
        super().__init__(f"cannot write the file sink's entry for batch {batch}: {reason}")


class RepartitionInterrupted(CkptfixError):
    """``state repartition --sink``: the checkpoint's run is done, the sink's failed; the message says how to
    finish or undo."""


class RepartitionRefused(CkptfixError):
    def __init__(self, reason: str) -> None:
        super().__init__(f"cannot repartition the state: {reason}")


class RebuildRefused(CkptfixError):
    def __init__(self, reason: str) -> None:
        super().__init__(f"cannot rebuild: {reason}")


class SurgeryRefused(CkptfixError):
    def __init__(self, reason: str) -> None:
        super().__init__(f"cannot edit the state: {reason}")


# -- migrations


class ProviderRefused(CkptfixError):
    def __init__(self, reason: str) -> None:
        super().__init__(f"cannot migrate the state store provider: {reason}")


class RelocateRefused(CkptfixError):
    """The relocation cannot be done safely; the message says why."""


# -- Spark actions (async-off, --against)


class QueryModuleError(UsageError):
    """The query module does not load, has no such function, raises, or returns the wrong thing."""


class AsyncRefused(CkptfixError):
    """Spark refuses asynchronous progress tracking for this query (its own reason)."""


class ForeignCheckpoint(CkptfixError):
    """The checkpoint was written by another query."""


class Interrupted(CkptfixError):
    """The run stopped between steps (test hook or Ctrl-C); ``--resume`` continues it."""


def error_line(exc: BaseException) -> str:
    """An error as the one line ckptfix prints for it. An OSError names the file first (``x.json: No such file or
    directory``), not Python's ``[Errno 2] No such file or directory: 'x.json'``; others (a store's own message, a
    :class:`CkptfixError`) as they are."""
    name = getattr(exc, "filename", None)
    if isinstance(exc, OSError) and name is not None and exc.strerror:
        other = getattr(exc, "filename2", None)
        return f"{name}{' -> ' + str(other) if other else ''}: {exc.strerror}"
    return str(exc) or type(exc).__name__
