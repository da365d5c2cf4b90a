"""Every exception ckptfix raises on purpose, in one flat module.

Storage problems stay Python's own ``FileNotFoundError`` / ``PermissionError`` (as s3fs
does); everything here is about *content* or about how ckptfix was called.
"""

from __future__ import annotations


class CkptfixError(Exception):
    """Base class: an error ckptfix can explain in one line."""


class FormatError(CkptfixError):
    """A file's bytes are not what the format requires.

    ``offset`` is the byte offset in the file where the problem applies.
    """

    def __init__(self, path: str, offset: int, expected: str, found: str, kind: str = "format") -> None:
        self.path = path
        self.offset = offset
        self.expected = expected
        self.found = found
        #: a stable machine-readable tag ("empty", "truncated-json", ...) the audit maps
        #: to the error Spark raises for the same bytes
        self.kind = kind
        super().__init__(f"{path}: at byte {offset}: expected {expected}, found {found}")


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


class MissingExtra(CkptfixError):
    """An optional dependency is needed for this path (s3fs, pyspark, ...)."""

    def __init__(self, module: str, extra: str) -> None:
        self.module = module
        self.extra = extra
        super().__init__(f"this needs the '{module}' package: pip install 'ckptfix[{extra}]'")
