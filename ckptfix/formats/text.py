"""Shared rules of Spark's text logs (offsets, commits, source/sink logs, operator metadata).

Spark reads them with Scala ``Source.getLines``: lines end at ``\\n``, ``\\r\\n`` or ``\\r``,
and a trailing terminator does not create an empty last line. The first line is a version
header ``v<positive int>`` (``MetadataVersionUtil``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ckptfix.errors import FormatError, UnsupportedVersion

_LINE_END = re.compile(rb"\r\n|\r|\n")
_PREVIEW = 40


@dataclass(frozen=True)
class Line:
    offset: int  # byte offset of the line's first byte in the file
    data: bytes

    @property
    def text(self) -> str:
        return self.data.decode("utf-8", errors="replace")


def split_lines(data: bytes) -> list[Line]:
    """Split like Scala's getLines, remembering where each line starts."""
    lines: list[Line] = []
    start = 0
    for m in _LINE_END.finditer(data):
        lines.append(Line(start, data[start : m.start()]))
        start = m.end()
    if start < len(data):
        lines.append(Line(start, data[start:]))
    return lines


def preview(data: bytes | str) -> str:
    """A short, printable rendering of what was found, for error messages."""
    text = data.decode("utf-8", errors="backslashreplace") if isinstance(data, bytes) else data
    if not text:
        return "nothing"
    shown = text[:_PREVIEW] + ("..." if len(text) > _PREVIEW else "")
    shown = shown.replace("\n", "\\n").replace("\r", "\\r")
    return f"'{shown}'"


def parse_version(path: str, line: Line | None, max_known: int) -> int:
    """Parse the ``v<N>`` header. Raises FormatError(kind='malformed-version') or
    UnsupportedVersion when N is above what this format knows."""
    if line is None:
        raise FormatError(path, 0, "a version line 'v<N>'", "an empty file", kind="empty")
    text = line.data.strip()
    ok = text.startswith(b"v") and text[1:].isdigit() and int(text[1:]) > 0
    if not ok:
        raise FormatError(path, line.offset, "a version line 'v<N>'", preview(line.data), kind="malformed-version")
    version = int(text[1:])
    if version > max_known:
        raise UnsupportedVersion(path, line.offset, f"a log version up to v{max_known}", version)
    return version


def parse_json_object(path: str, line: Line, what: str) -> dict[str, Any]:
    """Parse one line as a JSON object; failures name the byte where JSON broke."""
    text = line.data.decode("utf-8", errors="replace")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        kind, pos, found = json_failure(exc, text)
        raise FormatError(
            path, line.offset + len(text[:pos].encode()), f"{what} ({exc.msg})", found, kind=kind
        ) from None
    if not isinstance(value, dict):
        raise FormatError(path, line.offset, f"{what} as a JSON object", preview(text), kind="invalid-json")
    return value


def json_failure(exc: json.JSONDecodeError, text: str) -> tuple[str, int, str]:
    """(kind, character position, what was found) for a JSON error. Input that ends before
    the value is complete is "truncated-json" (Jackson's JsonEOFException), anything else
    "invalid-json"."""
    end = len(text.rstrip())
    if exc.pos >= end or exc.msg.startswith("Unterminated string"):
        return "truncated-json", end, "the end of the input"
    return "invalid-json", exc.pos, preview(text[exc.pos : exc.pos + _PREVIEW])


def dumps(obj: Any) -> str:
    """Compact JSON the way json4s/Jackson write it (no spaces)."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
