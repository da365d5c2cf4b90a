"""Shared rules of Spark's text logs (offsets, commits, source/sink logs, operator metadata).

Spark reads them with Scala ``Source.getLines``: lines end at ``\\n``, ``\\r\\n`` or ``\\r``,
and a trailing terminator does not create an empty last line. The first line is a version
header ``v<positive int>`` (``MetadataVersionUtil``).
"""

from __future__ import annotations

import json
import math
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


def strict_utf8(data: bytes, path: str) -> None:
    """HDFSMetadataLog's logs (offsets, commits, file-source and file-sink logs) are read through
    ``scala.io.Source.fromInputStream(in, "UTF-8")``, whose decoder reports malformed input: one byte that is not
    UTF-8 fails the read (``java.nio.charset.MalformedInputException: Input length = 1``; damage hunt of
    2026-11-27, 4.3), whatever JSON it sits in."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        found = f"the byte 0x{data[exc.start]:02x}, which is not UTF-8"
        raise FormatError(path, exc.start, "UTF-8 text", found, kind="malformed-utf8") from None


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


#: Jackson's StreamReadConstraints.maxNumberLength: a longer number token fails to parse in Spark (4.3:
#: StreamConstraintsException "Number value length (5000) exceeds the maximum allowed (1000, ...)")
MAX_NUMBER_LENGTH = 1000
INT_MAX = 2**31 - 1  # log versions are Java ints
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1


class JsonTokenError(json.JSONDecodeError):
    """A JSON token Jackson refuses although Python's json accepts it; ``kind`` names it for the audit."""

    def __init__(self, kind: str, msg: str, doc: str, pos: int, token: str) -> None:
        super().__init__(msg, doc, pos)
        self.kind, self.token = kind, token


def loads(text: str) -> Any:
    """``json.loads`` as Jackson parses Spark's logs (seen with PySpark 4.3.0): the NaN/Infinity literals are
    refused ("Non-standard token"), and so is a number token longer than :data:`MAX_NUMBER_LENGTH`; a number
    that overflows a double (``1e999``) is read as infinity; anything after the first complete value is ignored.
    Failures are ``json.JSONDecodeError``s at the token, so callers handle one exception type."""

    def fail(kind: str, msg: str, token: str) -> Any:
        raise JsonTokenError(kind, msg, text, max(text.find(token), 0), token)

    def number(token: str, convert: Any) -> Any:
        if len(token) > MAX_NUMBER_LENGTH:
            fail("number-too-long", f"Number value length ({len(token)}) exceeds the maximum allowed", token)
        return convert(token)

    decoder = json.JSONDecoder(
        parse_int=lambda t: number(t, int),
        parse_float=lambda t: number(t, float),
        parse_constant=lambda t: fail("non-numeric-literal", f"Non-standard token '{t}'", t),
    )
    # Jackson reads one value and ignores what follows it (json4s's parse leaves FAIL_ON_TRAILING_TOKENS off:
    # Spark 4.3 restarted with `garbage` appended to a commit file's JSON line), after skipping leading whitespace
    start = len(text) - len(text.lstrip(" \t\r\n"))
    return decoder.raw_decode(text, start)[0]


def java_long(value: Any) -> int | None:
    """A JSON value read into a Scala ``Long`` field the way json4s extracts it (PySpark 4.3.0: a fraction is
    truncated, a double beyond the range saturates, an integer beyond 64 bits wraps, a string or boolean is
    "No usable value for <field>"); None where json4s gives up."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float):
        if math.isnan(value):
            return 0
        if math.isinf(value):
            return LONG_MAX if value > 0 else LONG_MIN
        value = int(value)  # toward zero, as Double.toLong
        return max(LONG_MIN, min(LONG_MAX, value))
    return (value - LONG_MIN) % 2**64 + LONG_MIN  # BigInt.longValue: the low 64 bits


def java_int(value: Any) -> int | None:
    """A JSON value read into a Scala ``Int`` field as json4s extracts it: ``Double.intValue`` (toward zero,
    saturating, NaN 0) and ``BigInt.intValue`` (the low 32 bits); None for a string, boolean or null."""
    as_long = java_long(value)
    if as_long is None:
        return None
    if isinstance(value, float):
        return max(-(2**31), min(2**31 - 1, int(value) if math.isfinite(value) else as_long))
    return (as_long + 2**31) % 2**32 - 2**31


def long_field(path: str, line: Line, obj: dict[str, Any], name: str) -> int:
    """A ``Long`` field of a log's JSON line (absent: 0, the case classes' default), as Spark reads it."""
    if name not in obj:
        return 0
    value = java_long(obj[name])
    if value is None:
        raise FormatError(
            path, line.offset, f"a number for {name}", preview(json.dumps(obj[name])), kind="no-usable-value"
        )
    return value


def parse_version(path: str, line: Line | None, max_known: int) -> int:
    """Parse the ``v<N>`` header. Raises FormatError(kind='malformed-version') or
    UnsupportedVersion when N is above what this format knows."""
    if line is None:
        raise FormatError(path, 0, "a version line 'v<N>'", "an empty file", kind="empty")
    text = line.data.strip()
    digits = text[1:]
    # Spark reads the number as a Java int: more digits than an int holds is a malformed line there too
    ok = text.startswith(b"v") and digits.isdigit() and len(digits) <= 10 and 0 < int(digits) <= INT_MAX
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
        value = loads(text)
    except json.JSONDecodeError as exc:
        kind, pos, found = json_failure(exc, text)
        raise FormatError(
            path, line.offset + len(text[:pos].encode()), f"{what} ({json_expected(exc)})", found, kind=kind
        ) from None
    if not isinstance(value, dict):
        raise FormatError(path, line.offset, f"{what} as a JSON object", preview(text), kind="invalid-json")
    return value


#: what Python's JSON parser wanted, in words (its messages name no token: "Expecting value")
_JSON_WANTED = (
    ("Unterminated string", "every string closed"),
    ("Expecting value", "a value"),
    ("Expecting property name", "a field name in double quotes"),
    ("Expecting ':'", "':' after a field name"),
    ("Expecting ','", "',' or the closing bracket"),
    ("Extra data", "nothing after the JSON value"),
    ("Invalid control character", "no raw control character inside a string"),
    ("Invalid \\escape", "a valid escape sequence"),
)


def json_expected(exc: json.JSONDecodeError) -> str:
    return next((words for prefix, words in _JSON_WANTED if exc.msg.startswith(prefix)), exc.msg)


def json_failure(exc: json.JSONDecodeError, text: str) -> tuple[str, int, str]:
    """(kind, character position, what was found) for a JSON error. Input that ends before
    the value is complete is "truncated-json" (Jackson's JsonEOFException), anything else
    "invalid-json"."""
    end = len(text.rstrip())
    if isinstance(exc, JsonTokenError):
        return exc.kind, exc.pos, exc.token[:_PREVIEW] + ("..." if len(exc.token) > _PREVIEW else "")
    if exc.pos >= end or exc.msg.startswith("Unterminated string"):
        return "truncated-json", end, "the end of the input"
    return "invalid-json", exc.pos, preview(text[exc.pos : exc.pos + _PREVIEW])


def dumps(obj: Any) -> str:
    """Compact JSON the way json4s/Jackson write it (no spaces)."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
