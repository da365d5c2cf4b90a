"""``commits/<batch>``: the commit log (``CommitLog``).

``v1\\n{"nextBatchWatermarkMs":N}``; v2 (4.x state checkpoint format v2) adds
``stateUniqueIds`` (operatorId -> per partition -> per store name -> unique id); v3 (4.2+
sink evolution) adds ``sinkMetadataMap``. The JSON line is optional (read as ``{}``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ckptfix.errors import FormatError
from ckptfix.formats.text import dumps, long_field, parse_json_object, parse_version, split_lines, strict_utf8

MAX_KNOWN_VERSION = 3
_KNOWN = ("nextBatchWatermarkMs", "stateUniqueIds")


@dataclass(frozen=True)
class CommitFile:
    version: int
    next_batch_watermark_ms: int = 0
    #: operatorId -> [partition][store] -> unique id (checkpoint format v2), else None
    state_unique_ids: dict[str, list[list[str]]] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    has_json: bool = True


def parse(data: bytes, path: str = "<commits>") -> CommitFile:
    strict_utf8(data, path)
    lines = split_lines(data)
    if not lines:
        raise FormatError(path, 0, "a commit log entry", "an empty file", kind="empty")
    version = parse_version(path, lines[0], MAX_KNOWN_VERSION)
    if len(lines) < 2 or not lines[1].data.strip():
        return CommitFile(version, has_json=False)
    obj = parse_json_object(path, lines[1], "commit metadata JSON")
    wm = long_field(path, lines[1], obj, "nextBatchWatermarkMs")
    ids = obj.get("stateUniqueIds")
    if ids is not None and not isinstance(ids, dict):
        raise FormatError(
            path, lines[1].offset, "stateUniqueIds as a JSON object", type(ids).__name__, kind="invalid-json"
        )
    extra = {k: v for k, v in obj.items() if k not in _KNOWN}
    return CommitFile(version, wm, ids, extra)


def dump(entry: CommitFile) -> bytes:
    if not entry.has_json:
        return f"v{entry.version}".encode()
    obj: dict[str, Any] = {"nextBatchWatermarkMs": entry.next_batch_watermark_ms}
    if entry.state_unique_ids is not None:
        obj["stateUniqueIds"] = entry.state_unique_ids
    obj.update(entry.extra)
    return f"v{entry.version}\n{dumps(obj)}".encode()
