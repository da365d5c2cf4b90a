"""Spark 4.x visible checksum sidecars ``<file>.crc`` (checkpoint format v2 zips/changelogs).

One JSON object, no newline::

    {"algorithm":"CRC32C","value":<CRC32C of the whole file as a signed int32>,
     "mainFileSize":<bytes>,"timestampMs":<ms>,"creator":{"executorId":..,"taskInfo":..}}

Not to be confused with Hadoop's hidden ``.<file>.crc`` (see ``hadoopcrc``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import crc32c as _crc32c

from ckptfix.errors import FormatError
from ckptfix.formats.text import Line, dumps, parse_json_object, preview

ALGORITHM = "CRC32C"
_KNOWN = ("algorithm", "value", "mainFileSize", "timestampMs", "creator")


@dataclass(frozen=True)
class FileChecksum:
    value: int  # signed 32-bit
    main_file_size: int
    algorithm: str = ALGORITHM
    timestamp_ms: int | None = None
    creator: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # unknown keys, kept for rewrites


def compute(data: bytes) -> int:
    """CRC32C of ``data`` as Java's signed int."""
    value: int = _crc32c.crc32c(data)
    return value - (1 << 32) if value >= 1 << 31 else value


#: who wrote a sidecar; Spark's reader requires ``timestampMs`` and ``creator`` (json4s
#: "No usable value for timestampMs" otherwise), so ckptfix writes them as the driver would
CREATOR = {"executorId": "driver", "taskInfo": ""}


def make(data: bytes, timestamp_ms: int | None = None, creator: dict[str, Any] | None = None) -> FileChecksum:
    """The sidecar Spark would write for ``data`` (timestamp: now, unless given)."""
    if timestamp_ms is None:
        timestamp_ms = int(time.time() * 1000)
    return FileChecksum(compute(data), len(data), ALGORITHM, timestamp_ms, dict(creator or CREATOR))


def parse(data: bytes, path: str = "<checksum>") -> FileChecksum:
    if not data.strip():
        raise FormatError(path, 0, "a checksum JSON object", "an empty file", kind="empty")
    obj = parse_json_object(path, Line(0, data), "a file checksum")
    algorithm = obj.get("algorithm")
    if not isinstance(algorithm, str):
        raise FormatError(path, 0, "a string 'algorithm'", preview(dumps(algorithm)), kind="invalid-checksum")
    value, size = obj.get("value"), obj.get("mainFileSize")
    if not isinstance(value, int) or isinstance(value, bool) or not -(1 << 31) <= value < 1 << 31:
        raise FormatError(path, 0, "a signed 32-bit 'value'", preview(dumps(value)), kind="invalid-checksum")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise FormatError(path, 0, "a non-negative 'mainFileSize'", preview(dumps(size)), kind="invalid-checksum")
    ts, creator = obj.get("timestampMs"), obj.get("creator")
    if ts is not None and (not isinstance(ts, int) or isinstance(ts, bool)):
        raise FormatError(path, 0, "an integer 'timestampMs'", preview(dumps(ts)), kind="invalid-checksum")
    if creator is not None and not isinstance(creator, dict):
        raise FormatError(path, 0, "an object 'creator'", preview(dumps(creator)), kind="invalid-checksum")
    extra = {k: v for k, v in obj.items() if k not in _KNOWN}
    return FileChecksum(value, size, algorithm, ts, creator, extra)


def dump(sidecar: FileChecksum) -> bytes:
    obj: dict[str, Any] = {
        "algorithm": sidecar.algorithm,
        "value": sidecar.value,
        "mainFileSize": sidecar.main_file_size,
    }
    if sidecar.timestamp_ms is not None:
        obj["timestampMs"] = sidecar.timestamp_ms
    if sidecar.creator is not None:
        obj["creator"] = sidecar.creator
    obj.update(sidecar.extra)
    return dumps(obj).encode("utf-8")


def mismatch(sidecar: FileChecksum, data: bytes) -> str | None:
    """None when ``data`` matches the sidecar, else a sentence in Spark's terms."""
    if sidecar.algorithm.upper() != ALGORITHM:
        return f"unsupported checksum algorithm {sidecar.algorithm!r} (expected {ALGORITHM})"
    computed = compute(data)
    if sidecar.main_file_size == len(data) and sidecar.value == computed:
        return None
    return (
        f"checksum mismatch: expected (file size: {sidecar.main_file_size}, checksum: {sidecar.value}), "
        f"computed (file size: {len(data)}, checksum: {computed})"
    )
