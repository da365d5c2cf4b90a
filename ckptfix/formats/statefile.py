"""Record streams inside (decompressed) state files: HDFS ``N.delta`` / ``N.snapshot`` and
RocksDB ``N.changelog`` / ``N_<uuid>.changelog`` V1-V4.

All framing ints are Java ``DataOutputStream`` big-endian. V1 records (HDFS files and
changelog V1/V3)::

    repeat: int32 keyLen, key, int32 valueLen (-1 = removal; never in snapshots), value
    int32 -1                                      end marker in the keyLen position

V2 records (changelog V2/V4)::

    repeat: byte type (0x01 put, 0x11 merge: keyLen key valueLen value;
                       0x10 delete: keyLen key int32 -1)
    byte 0x00                                     end record

Changelog headers: V1 none; V2 ``UTF "v2"``; V3 ``UTF "v3"`` + ``UTF lineageJson`` then V1
records; V4 ``UTF "v4"`` + ``UTF lineageJson`` then V2 records. As in Spark's reader, a
file whose first UTF string is not ``v<short>`` is V1 from byte 0.

Spark stops at the end marker; bytes after it are reported here (kind ``trailing-bytes``). Spark's HDFS
provider reads a delta or snapshot through the codec's input stream up to the end marker and closes it: a
compressed chunk after the one that holds the marker is never decompressed (lz4-java's ``LZ4BlockInputStream``
reads the next block only when a read needs more bytes, and its ``close()`` is ``FilterInputStream``'s, which
checks nothing; javap of lz4-java 1.8.0 and 1.11.0). :func:`decompress_as_read` models that read.
"""

from __future__ import annotations

import enum
import json
import re
import struct
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from typing import Literal

from ckptfix.errors import FormatError, UnsupportedVersion
from ckptfix.formats import codec
from ckptfix.formats.javaio import U16, decode_modified_utf8, read_utf, write_utf
from ckptfix.formats.text import json_expected, loads, preview

INT = struct.Struct(">i")  # Java DataOutputStream: big-endian
BYTE = struct.Struct(">B")
END = -1  # keyLen of the V1 end marker, valueLen of a removal
END_RECORD = 0x00

FileKind = Literal["delta", "snapshot", "changelog"]
KINDS: tuple[FileKind, ...] = ("delta", "snapshot", "changelog")


class Op(str, enum.Enum):
    PUT = "put"
    DELETE = "delete"
    MERGE = "merge"


RECORD_TYPE = {0x01: Op.PUT, 0x10: Op.DELETE, 0x11: Op.MERGE}
TYPE_BYTE = {op: b for b, op in RECORD_TYPE.items()}
TYPED_VERSIONS = (2, 4)  # changelog versions with V2 (typed) records
LINEAGE_VERSIONS = (3, 4)


@dataclass(frozen=True)
class Record:
    key: bytes
    value: bytes | None  # None for DELETE
    op: Op = Op.PUT
    #: byte offset of the record in the decompressed stream (-1 when built in memory)
    offset: int = field(default=-1, compare=False)


@dataclass(frozen=True)
class LineageEntry:
    version: int
    checkpoint_unique_id: str


@dataclass(frozen=True)
class ChangelogHeader:
    version: int  # 1..4
    lineage: tuple[LineageEntry, ...] | None  # V3/V4 only
    size: int = field(default=0, compare=False)  # bytes before the first record


@dataclass(frozen=True)
class StateFile:
    kind: FileKind
    records: tuple[Record, ...]
    header: ChangelogHeader | None = None  # changelogs only


_SHORT = re.compile(r"[+-]?[0-9]+\Z")


def parse_changelog_header(raw: bytes, path: str = "<changelog>") -> ChangelogHeader:
    """Detect the changelog version the way Spark's reader factory does."""
    version = _sniff_version(raw)
    if version is None or version == 1:
        return ChangelogHeader(1, None, 0)
    if version not in (2, 3, 4):
        raise UnsupportedVersion(path, 0, "changelog v1 to v4", version)
    pos = U16.size + U16.unpack_from(raw, 0)[0]
    if version in TYPED_VERSIONS and version not in LINEAGE_VERSIONS:
        return ChangelogHeader(version, None, pos)
    text, end = read_utf(raw, pos, path, "the lineage JSON")
    try:
        items = loads(text)
    except json.JSONDecodeError as exc:
        raise FormatError(
            path, pos, f"lineage JSON ({json_expected(exc)})", preview(text), kind="invalid-json"
        ) from None
    lineage: list[LineageEntry] = []
    ok = isinstance(items, list)
    for item in items if ok else ():
        if not (
            isinstance(item, dict)
            and isinstance(item.get("version"), int)
            and isinstance(item.get("checkpointUniqueId"), str)
        ):
            ok = False
            break
        lineage.append(LineageEntry(item["version"], item["checkpointUniqueId"]))
    if not ok:
        raise FormatError(
            path, pos, "a lineage array of {version, checkpointUniqueId}", preview(text), kind="invalid-json"
        )
    return ChangelogHeader(version, tuple(lineage), end)


def changelog_version_read(raw: bytes) -> bool:
    """Whether ``raw`` holds the whole first UTF string (the version Spark's reader reads first)."""
    return len(raw) >= U16.size and U16.size + U16.unpack_from(raw, 0)[0] <= len(raw)


def changelog_header_end(raw: bytes) -> int | None:
    """Where a changelog's header ends (0 for V1: none), or None when ``raw`` (the bytes decompressed so far)
    ends inside it: the version string, or a V3/V4 lineage string."""
    if not changelog_version_read(raw):
        return None
    version = _sniff_version(raw)
    if version is None or version == 1 or version not in LINEAGE_VERSIONS:
        return 0 if version in (None, 1) else U16.size + U16.unpack_from(raw, 0)[0]
    pos = U16.size + U16.unpack_from(raw, 0)[0]
    if len(raw) < pos + U16.size or pos + U16.size + U16.unpack_from(raw, pos)[0] > len(raw):
        return None
    return pos + U16.size + U16.unpack_from(raw, pos)[0]


def _sniff_version(raw: bytes) -> int | None:
    if len(raw) < U16.size:
        return None
    (n,) = U16.unpack_from(raw, 0)
    if U16.size + n > len(raw):
        return None  # EOFException in Spark -> V1
    try:
        text = decode_modified_utf8(raw[U16.size : U16.size + n])
    except FormatError:
        return None  # UTFDataFormatException -> V1
    if not text.startswith("v") or not _SHORT.match(text[1:]):
        return None
    value = int(text[1:])
    return value if -(2**15) <= value < 2**15 else None


def iter_records(raw: bytes, path: str = "<state>", kind: FileKind = "delta") -> Iterator[Record]:
    """Yield every record of a decompressed state file and check the framing to the end.

    Kinds: ``truncated`` (no end marker; offset where it was expected), ``bad-length``
    (negative length other than a removal's -1), ``out-of-bounds`` (length past the end),
    ``removal-in-snapshot``, ``bad-record-type``, ``trailing-bytes``.
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    typed = False
    pos = 0
    if kind == "changelog":
        header = parse_changelog_header(raw, path)
        typed = header.version in TYPED_VERSIONS
        pos = header.size
    if not typed:
        # the common case at full speed; anything irregular is left to the careful loop below,
        # which starts at that record and raises the exact error
        stopped = yield from _plain_records(raw, pos, kind == "snapshot")
        if stopped is None:
            return
        pos = stopped
    view = memoryview(raw)
    n = len(raw)

    def read_int(at: int, what: str) -> int:
        if at + INT.size > n:
            raise FormatError(path, at, what, f"{n - at} bytes before the end of the data", kind="truncated")
        value: int = INT.unpack_from(raw, at)[0]
        return value

    def read_bytes(at: int, length: int, length_at: int, what: str) -> bytes:
        if length > n - at:
            raise FormatError(
                path, length_at, f"a {what} length within the {n - at} bytes left", str(length), kind="out-of-bounds"
            )
        return bytes(view[at : at + length])

    while True:
        start = pos
        if typed:
            if pos >= n:
                raise FormatError(
                    path, pos, "a record type byte or the end record 0x00", "the end of the data", kind="truncated"
                )
            type_byte = raw[pos]
            if type_byte == END_RECORD:
                pos += BYTE.size
                break
            op = RECORD_TYPE.get(type_byte)
            if op is None:
                raise FormatError(
                    path, pos, "record type 0x00, 0x01, 0x10 or 0x11", f"0x{type_byte:02x}", kind="bad-record-type"
                )
            pos += BYTE.size
            key_len = read_int(pos, "a key length")
            if key_len < 0:
                raise FormatError(path, pos, "a key length >= 0", str(key_len), kind="bad-length")
        else:
            key_len = read_int(pos, "a key length or the end marker -1")
            if key_len == END:
                pos += INT.size
                break
            if key_len < 0:
                raise FormatError(path, pos, "a key length >= 0 or the end marker -1", str(key_len), kind="bad-length")
            op = Op.PUT
        key = read_bytes(pos + INT.size, key_len, pos, "key")
        pos += INT.size + key_len
        value_len = read_int(pos, "a value length")
        value: bytes | None
        if typed and op is Op.DELETE:
            if value_len != END:
                raise FormatError(path, pos, "value length -1 in a delete record", str(value_len), kind="bad-length")
            value = None
        elif value_len == END and not typed:
            if kind == "snapshot":
                raise FormatError(
                    path, pos, "a value length >= 0 (snapshots hold no removals)", "-1", kind="removal-in-snapshot"
                )
            op, value = Op.DELETE, None
        elif value_len < 0:
            expected = "a value length >= 0" + ("" if typed or kind == "snapshot" else " or -1 (removal)")
            raise FormatError(path, pos, expected, str(value_len), kind="bad-length")
        else:
            value = read_bytes(pos + INT.size, value_len, pos, "value")
            pos += value_len
        pos += INT.size
        yield Record(key, value, op, start)
    if pos != n:
        raise FormatError(
            path, pos, "the end of the data after the end marker", f"{n - pos} more bytes", kind="trailing-bytes"
        )


def _plain_records(raw: bytes, pos: int, snapshot: bool) -> Generator[Record, None, int | None]:
    """V1 records from ``pos``; returns None after a clean end marker at the very end of
    ``raw``, else the offset of the first record it does not judge."""
    unpack, n = INT.unpack_from, len(raw)
    put, delete = Op.PUT, Op.DELETE
    while pos + 4 <= n:
        (key_len,) = unpack(raw, pos)
        if key_len == END:
            return None if pos + 4 == n else pos
        at = pos + 4 + key_len
        if key_len < 0 or at + 4 > n:
            return pos
        (value_len,) = unpack(raw, at)
        if value_len >= 0:
            end = at + 4 + value_len
            if end > n:
                return pos
            yield Record(raw[pos + 4 : at], raw[at + 4 : end], put, pos)
        elif value_len == END and not snapshot:
            end = at + 4
            yield Record(raw[pos + 4 : at], None, delete, pos)
        else:
            return pos
        pos = end
    return pos


def _scan_plain(raw: bytes, pos: int, snapshot: bool) -> tuple[int, int | None]:
    """(records, None) after a clean walk of V1 records to the end marker at the very end;
    (records so far, offset) of the first record it does not judge."""
    unpack, n, count = INT.unpack_from, len(raw), 0
    while pos + 4 <= n:
        (key_len,) = unpack(raw, pos)
        if key_len == END:
            return count, (None if pos + 4 == n else pos)
        at = pos + 4 + key_len
        if key_len < 0 or at + 4 > n:
            return count, pos
        (value_len,) = unpack(raw, at)
        if value_len >= 0 and at + 4 + value_len <= n:
            pos = at + 4 + value_len
        elif value_len == END and not snapshot:
            pos = at + 4
        else:
            return count, pos
        count += 1
    return count, pos


def verify(raw: bytes, path: str = "<state>", kind: FileKind = "delta") -> int:
    """Walk the whole stream; return the record count or raise FormatError where it breaks."""
    if kind in ("delta", "snapshot"):
        count, stopped = _scan_plain(raw, 0, kind == "snapshot")
        if stopped is None:
            return count
    return sum(1 for _ in iter_records(raw, path, kind))


#: the file kinds whose reader stops at the end marker before the codec meets damage after it (HDFS provider's
#: ``updateFromDeltaFile`` / ``readSnapshotFile``, javap of 4.3.0; for a delta recorded on 3.5.9-4.2.1 and live on
#: 4.3, damage case state_delta_cut_in_end_block)
STOPS_AT_END_MARKER: tuple[FileKind, ...] = ("delta", "snapshot")


def end_of_records(raw: bytes, kind: FileKind) -> int | None:
    """The offset right after the end marker when ``raw`` holds whole records up to it (more bytes may follow),
    else None (a record or the marker is cut off, or a length is bad)."""
    try:
        verify(raw, "<state>", kind)
    except FormatError as exc:
        return exc.offset if exc.kind == "trailing-bytes" else None
    return len(raw)


def decompress_as_read(
    codec_name: str, data: bytes, path: str = "<state>", kind: FileKind = "delta"
) -> tuple[bytes, FormatError | None]:
    """The decompressed content of a state file as Spark's reader meets it, and the damage in the compressed
    stream that it never reads (None when the whole stream decompresses). For a delta or snapshot whose chunks
    (LZ4 blocks, ...) before a damaged one already hold every record and the end marker, that damage is returned,
    not raised: Spark stops reading at the marker (a cut inside the LZ4 end block: Spark 3.5.9-4.3 restart). Only
    for lz4, the default codec, whose reader was read and recorded; any other damage, and every other codec's,
    raises, as :func:`ckptfix.formats.codec.decompress` does."""
    chunks: list[bytes] = []
    try:
        for chunk in codec.iter_decompressed(codec_name, data, path):
            chunks.append(chunk)
    except FormatError as exc:
        stops = kind in STOPS_AT_END_MARKER and codec.normalize(codec_name) == codec.LZ4  # the codec seen
        if not stops or end_of_records(b"".join(chunks), kind) is None:
            raise
        return b"".join(chunks), exc
    return b"".join(chunks), None


def parse(raw: bytes, path: str = "<state>", kind: FileKind = "delta") -> StateFile:
    header = parse_changelog_header(raw, path) if kind == "changelog" else None
    return StateFile(kind, tuple(iter_records(raw, path, kind)), header)


def _v1_records(records: tuple[Record, ...] | list[Record], allow_delete: bool) -> bytes:
    out: list[bytes] = []
    for r in records:
        if r.op is Op.MERGE:
            raise ValueError("merge records need changelog v2 or v4")
        if r.op is Op.DELETE or r.value is None:
            if not allow_delete:
                raise ValueError("a snapshot cannot hold removals")
            out += [INT.pack(len(r.key)), r.key, INT.pack(END)]
        else:
            out += [INT.pack(len(r.key)), r.key, INT.pack(len(r.value)), r.value]
    out.append(INT.pack(END))
    return b"".join(out)


def _v2_records(records: tuple[Record, ...] | list[Record]) -> bytes:
    out: list[bytes] = []
    for r in records:
        if r.op is Op.DELETE or r.value is None:
            out += [bytes((TYPE_BYTE[Op.DELETE],)), INT.pack(len(r.key)), r.key, INT.pack(END)]
        else:
            out += [bytes((TYPE_BYTE[r.op],)), INT.pack(len(r.key)), r.key, INT.pack(len(r.value)), r.value]
    out.append(bytes((END_RECORD,)))
    return b"".join(out)


def dump_snapshot(records: tuple[Record, ...] | list[Record]) -> bytes:
    return _v1_records(records, allow_delete=False)


def dump_delta(records: tuple[Record, ...] | list[Record]) -> bytes:
    return _v1_records(records, allow_delete=True)


def dump_changelog(
    records: tuple[Record, ...] | list[Record],
    version: int = 1,
    lineage: tuple[LineageEntry, ...] | list[LineageEntry] | None = None,
) -> bytes:
    """Changelog bytes (before compression) of ``version`` 1-4; V3/V4 need ``lineage``."""
    if version == 1:
        return _v1_records(records, allow_delete=True)
    if version not in (2, 3, 4):
        raise ValueError(f"changelog version must be 1 to 4, got {version}")
    head = write_utf(f"v{version}")
    if version in LINEAGE_VERSIONS:
        items = [{"version": e.version, "checkpointUniqueId": e.checkpoint_unique_id} for e in lineage or ()]
        head += write_utf(json.dumps(items, separators=(",", ":")))
    body = _v2_records(records) if version in TYPED_VERSIONS else _v1_records(records, allow_delete=True)
    return head + body


def dump(model: StateFile) -> bytes:
    if model.kind == "snapshot":
        return dump_snapshot(model.records)
    if model.kind == "delta":
        return dump_delta(model.records)
    header = model.header or ChangelogHeader(1, None)
    return dump_changelog(model.records, header.version, header.lineage)
