"""``CompactibleFileStreamLog`` files: a file source's ``sources/<k>/<n>`` and a file sink's
``_spark_metadata/<b>`` (``<b>.compact`` for compaction batches).

``v1`` then one JSON object per line (``FileEntry`` for sources: path/timestamp/batchId;
``SinkFileStatus`` for sinks: path/size/isDir/modificationTime/.../action).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ckptfix.errors import FormatError
from ckptfix.formats.text import dumps, parse_json_object, parse_version, split_lines, strict_utf8

MAX_KNOWN_VERSION = 1
COMPACT_SUFFIX = ".compact"


@dataclass(frozen=True)
class CompactLogFile:
    version: int
    entries: tuple[dict[str, Any], ...]


def parse(data: bytes, path: str = "<log>") -> CompactLogFile:
    strict_utf8(data, path)
    lines = split_lines(data)
    if not lines:
        raise FormatError(path, 0, "a file log entry", "an empty file", kind="empty")
    version = parse_version(path, lines[0], MAX_KNOWN_VERSION)
    entries = tuple(parse_json_object(path, ln, "a file entry") for ln in lines[1:] if ln.data.strip())
    return CompactLogFile(version, entries)


def dump(log: CompactLogFile) -> bytes:
    return "\n".join([f"v{log.version}", *(dumps(e) for e in log.entries)]).encode()


def is_compaction_batch(batch_id: int, interval: int) -> bool:
    return (batch_id + 1) % interval == 0


def derive_compact_interval(compaction_ids: list[int], default: int = 10) -> int:
    """The interval Spark uses for an existing log (``CompactibleFileStreamLog.compactInterval``): the gap between
    the two newest compaction batches; with one compaction batch b, Spark's ``deriveCompactInterval``: b+1 when
    it is at most the default, else the first divisor of b+1 from the default up to (b+1)/2, else b+1 (so a
    log whose only compact file is ``19.compact`` continues with interval 20 under the default 10); with none,
    the default (``spark.sql.streaming.file{Source,Sink}.log.compactInterval``, 10)."""
    ids = sorted(compaction_ids)
    if len(ids) >= 2:
        return ids[-1] - ids[-2]
    if len(ids) == 1:
        n = ids[0] + 1
        if n <= default:
            return n
        if default < n // 2:
            return next(i for i in [*range(default, n // 2 + 1), n] if n % i == 0)
        return n
    return default
