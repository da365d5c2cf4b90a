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
