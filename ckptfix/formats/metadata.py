"""The checkpoint's ``metadata`` file: ``{"id":"<query uuid>"}``, no version line, no newline."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ckptfix.errors import FormatError
from ckptfix.formats.text import dumps, json_failure, loads, preview


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
        raise FormatError(path, len(text[:pos].encode()), f"a JSON object ({exc.msg})", found, kind=kind) from None
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
