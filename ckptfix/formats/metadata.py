"""The checkpoint's ``metadata`` file: ``{"id":"<query uuid>"}``, no version line, no newline."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from ckptfix.errors import FormatError, UsageError
from ckptfix.formats.text import dumps, json_expected, json_failure, loads, preview


@dataclass(frozen=True)
class StreamMetadata:
    id: str
    extra: dict[str, Any] = field(default_factory=dict)


def parse(data: bytes, path: str = "<metadata>") -> StreamMetadata:
    text = data.decode("utf-8", errors="replace")
    if not text.strip():
        raise FormatError(path, 0, 'a JSON object {"id": ...}', "an empty file", kind="empty")
    try:
        obj = loads(text)
    except json.JSONDecodeError as exc:
        kind, pos, found = json_failure(exc, text)
        raise FormatError(
            path, len(text[:pos].encode()), f"a JSON object ({json_expected(exc)})", found, kind=kind
        ) from None
    if not isinstance(obj, dict):
        raise FormatError(path, 0, "a JSON object", preview(text), kind="invalid-json")
    qid = obj.get("id")
    if not isinstance(qid, str):
        raise FormatError(path, 0, 'a string field "id"', preview(text), kind="no-id")
    return StreamMetadata(qid, {k: v for k, v in obj.items() if k != "id"})


_HEX = frozenset("0123456789abcdefABCDEF")


def java_uuid_error(name: str) -> tuple[str, str] | None:
    """What ``java.util.UUID.fromString(name)`` throws (Java 17; Spark's StreamExecution parses the id with it
    when the query starts), as (exception class, message), or None when it accepts ``name``: the 8-4-4-4-12 hex
    form in either case, or the lenient form of five dash-separated hex numbers (at most 36 characters, each
    number parsed as a signed hex long). Recorded on 3.5.9-4.3: "Invalid UUID string: not-a-uuid", 'Error at
    index 0 in: "zzzzzzzz"'."""
    iae, nfe = "java.lang.IllegalArgumentException", "java.lang.NumberFormatException"
    dashes = (8, 13, 18, 23)
    canonical = len(name) == 36 and all(name[i] == "-" for i in dashes)
    if canonical and all(c in _HEX for i, c in enumerate(name) if i not in dashes):
        return None
    if len(name) > 36:
        return iae, "UUID string too large"
    parts = name.split("-")
    if len(parts) != 5:
        return iae, f"Invalid UUID string: {name}"
    for part in parts:  # Long.parseLong(name, begin, end, 16)
        if not part:
            return nfe, "NumberFormatException"
        digits = part[1:] if part[0] in "+-" else part
        if not digits:
            return nfe, f'Error at index {len(part)} in: "{part}"'
        bad = next((i for i, c in enumerate(digits) if c not in _HEX), None)
        if bad is not None:
            return nfe, f'Error at index {bad + len(part) - len(digits)} in: "{part}"'
        if int(part, 16) > 2**63 - 1 or int(part, 16) < -(2**63):
            return nfe, f'in: "{part}"'
    return None


def dump(meta: StreamMetadata) -> bytes:
    obj: dict[str, Any] = {"id": meta.id}
    obj.update(meta.extra)
    return dumps(obj).encode()


def parse_query_id(given: object, option: str = "--query-id") -> str:
    """A query id the user gave, as Spark writes it in ``metadata`` (a UUID in lower-case 8-4-4-4-12 form); a
    value that is no UUID is a :class:`UsageError` naming ``option``."""
    try:
        return str(uuid.UUID(str(given)))
    except ValueError:
        raise UsageError(
            f"{option}: expected a UUID like Spark's metadata id (6f1c2a4e-0b9d-4c3e-8f7a-1d2e3f405162), "
            f"found {given!r}"
        ) from None
