"""RocksDB state store snapshot ``N.zip`` / ``N_<uuid>.zip``.

A plain ZIP (Java ``ZipOutputStream``, deflated entries, no directories) holding the
non-SST files of a RocksDB checkpoint (``CURRENT``, ``MANIFEST-*``, ``OPTIONS-*``, 4.x also
the live ``*.log``) and Spark's ``metadata`` member: ``v1\\n`` then one JSON object::

    {"sstFiles":[{"localFileName","dfsSstFileName","sizeBytes"}], "logFiles":[...], "numKeys",
     4.x: "numInternalKeys", "columnFamilyMapping", "columnFamilyTypeMap", "maxColumnFamilyId"}

SST files live in ``SSTs/`` next to the zip and are only listed here. Errors in the
metadata member name the path ``<zip>!/metadata`` with offsets inside that member.
"""

from __future__ import annotations

import io
import re
import struct
import zipfile
import zlib
from dataclasses import dataclass, field
from typing import Any

from ckptfix.errors import FormatError
from ckptfix.formats.text import dumps, parse_json_object, parse_version, preview, split_lines

METADATA = "metadata"
METADATA_VERSION = 1
#: the header Spark 4.0.x writes: ``v<spark.sql.streaming.stateStore.checkpointFormatVersion>`` (its
#: ``RocksDBCheckpointMetadata.VERSION`` is read from the conf; 4.1+ fix it at 1), so a format-v2 zip of 4.0 says v2
MAX_METADATA_VERSION = 2
ZIP_MAGIC = b"PK\x03\x04"
EOCD_MAGIC = b"PK\x05\x06"
EOCD_SIZE = 22  # end-of-central-directory record without its comment
EOCD_DIR_OFFSET = struct.Struct("<I")  # zip structures are little-endian; central directory start at EOCD+16
_DRIVE = re.compile(r"^[A-Za-z]:")


@dataclass(frozen=True)
class SstFile:
    local_file_name: str
    dfs_sst_file_name: str
    size_bytes: int
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class LogFile:
    local_file_name: str
    dfs_log_file_name: str
    size_bytes: int
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RocksDBMetadata:
    sst_files: tuple[SstFile, ...]
    log_files: tuple[LogFile, ...] | None = None  # None: absent (Spark omits an empty list)
    num_keys: int | None = None
    num_internal_keys: int | None = None  # 4.x fields: None when absent (3.5 shape)
    column_family_mapping: dict[str, int] | None = None
    column_family_type_map: dict[str, bool] | None = None
    max_column_family_id: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # unknown keys, kept for rewrites
    version: int = METADATA_VERSION  # the ``v<N>`` header (2 only from Spark 4.0 with checkpoint format v2)


@dataclass(frozen=True)
class ZipMember:
    name: str
    size: int
    compressed_size: int
    crc: int
    compress_type: int
    header_offset: int  # offset of the member's local file header in the zip


@dataclass(frozen=True)
class RocksDBZip:
    members: tuple[ZipMember, ...]
    metadata: RocksDBMetadata

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(m.name for m in self.members)


# ---------------------------------------------------------------- metadata member

_KNOWN = (
    "sstFiles",
    "logFiles",
    "numKeys",
    "numInternalKeys",
    "columnFamilyMapping",
    "columnFamilyTypeMap",
    "maxColumnFamilyId",
)


def _file_entry(path: str, offset: int, item: Any, dfs_key: str) -> tuple[str, str, int, dict[str, Any]]:
    ok = (
        isinstance(item, dict)
        and isinstance(item.get("localFileName"), str)
        and isinstance(item.get(dfs_key), str)
        and isinstance(item.get("sizeBytes"), int)
    )
    if not ok:
        raise FormatError(
            path,
            offset,
            f"a file entry {{localFileName, {dfs_key}, sizeBytes}}",
            preview(dumps(item)),
            kind="invalid-metadata",
        )
    extra = {k: v for k, v in item.items() if k not in ("localFileName", dfs_key, "sizeBytes")}
    return item["localFileName"], item[dfs_key], item["sizeBytes"], extra


def parse_metadata(data: bytes, path: str = "<metadata>") -> RocksDBMetadata:
    """Parse the ``metadata`` member (``v1`` line, then JSON)."""
    lines = split_lines(data)
    version = parse_version(path, lines[0] if lines else None, MAX_METADATA_VERSION)
    if len(lines) < 2:
        raise FormatError(path, len(data), "a JSON line after the version", "the end of the file", kind="truncated")
    body = lines[1]
    if len(lines) > 2:
        body = type(body)(body.offset, data[body.offset :])  # Spark reads the rest as one JSON text
    obj = parse_json_object(path, body, "RocksDB checkpoint metadata")
    at = body.offset

    def typed(key: str, kind: type | tuple[type, ...]) -> Any:
        value = obj.get(key)
        if value is not None and (not isinstance(value, kind) or isinstance(value, bool) and kind is int):
            raise FormatError(path, at, f"'{key}' of type {kind}", preview(dumps(value)), kind="invalid-metadata")
        return value

    ssts = typed("sstFiles", list)
    if ssts is None:
        raise FormatError(path, at, "the key 'sstFiles'", preview(body.data), kind="invalid-metadata")
    logs = typed("logFiles", list)
    return RocksDBMetadata(
        sst_files=tuple(SstFile(*_file_entry(path, at, s, "dfsSstFileName")) for s in ssts),
        log_files=None if logs is None else tuple(LogFile(*_file_entry(path, at, s, "dfsLogFileName")) for s in logs),
        num_keys=typed("numKeys", int),
        num_internal_keys=typed("numInternalKeys", int),
        column_family_mapping=typed("columnFamilyMapping", dict),
        column_family_type_map=typed("columnFamilyTypeMap", dict),
        max_column_family_id=typed("maxColumnFamilyId", int),
        extra={k: v for k, v in obj.items() if k not in _KNOWN},
        version=version,
    )


def dump_metadata(meta: RocksDBMetadata) -> bytes:
    """``v1\\n`` + compact JSON in Spark's key order; absent fields stay absent."""
    obj: dict[str, Any] = {
        "sstFiles": [
            {
                "localFileName": s.local_file_name,
                "dfsSstFileName": s.dfs_sst_file_name,
                "sizeBytes": s.size_bytes,
                **s.extra,
            }
            for s in meta.sst_files
        ]
    }
    if meta.log_files is not None:
        obj["logFiles"] = [
            {
                "localFileName": s.local_file_name,
                "dfsLogFileName": s.dfs_log_file_name,
                "sizeBytes": s.size_bytes,
                **s.extra,
            }
            for s in meta.log_files
        ]
    optional = {
        "numKeys": meta.num_keys,
        "numInternalKeys": meta.num_internal_keys,
        "columnFamilyMapping": meta.column_family_mapping,
        "columnFamilyTypeMap": meta.column_family_type_map,
        "maxColumnFamilyId": meta.max_column_family_id,
    }
    obj.update({k: v for k, v in optional.items() if v is not None})
    obj.update(meta.extra)
    return f"v{meta.version}\n".encode() + dumps(obj).encode("utf-8")


# ---------------------------------------------------------------- the zip


def is_unsafe_name(name: str) -> bool:
    """Absolute paths, drive letters and any ``..`` component (zip-slip)."""
    if name.startswith(("/", "\\")) or _DRIVE.match(name):
        return True
    return ".." in re.split(r"[/\\]", name)


def _central_directory_offset(data: bytes) -> int:
    """Where the central directory starts per the end record, or len(data) without one."""
    at = data.rfind(EOCD_MAGIC)
    if at < 0 or at + 20 > len(data):
        return len(data)
    (offset,) = EOCD_DIR_OFFSET.unpack_from(data, at + 16)
    return min(offset, len(data))


def _open(data: bytes, path: str) -> zipfile.ZipFile:
    if not data:
        raise FormatError(path, 0, "a zip file", "an empty file", kind="empty")
    try:
        return zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile as exc:
        if not data.startswith(ZIP_MAGIC):
            raise FormatError(
                path, 0, "a zip local header 'PK\\x03\\x04'", preview(data[:4]), kind="not-a-zip"
            ) from None
        eocd = data.rfind(EOCD_MAGIC)
        if eocd < 0 or eocd + EOCD_SIZE > len(data):
            # the end-of-central-directory record sits at the end: a cut file loses it first
            raise FormatError(
                path, len(data), "the zip end-of-central-directory record", str(exc), kind="truncated"
            ) from None
        raise FormatError(
            path, _central_directory_offset(data), "a valid zip central directory", str(exc), kind="corrupt-zip"
        ) from None
    except (UnicodeDecodeError, ValueError, struct.error, EOFError, OverflowError, NotImplementedError) as exc:
        raise FormatError(
            path,
            _central_directory_offset(data),
            "a valid zip central directory",
            f"{type(exc).__name__}: {exc}",
            kind="corrupt-zip",
        ) from None


def _check_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, path: str) -> None:
    """Read one member to its end (what ``ZipFile.testzip`` does), with offsets on failure."""
    try:
        with zf.open(info) as f:
            while f.read(1 << 16):
                pass
    except zipfile.BadZipFile as exc:
        crc = "CRC" in str(exc)
        raise FormatError(
            path,
            info.header_offset,
            f"member {info.filename!r} with CRC-32 0x{info.CRC:08x}" if crc else f"a valid member {info.filename!r}",
            "content with another CRC-32 (its bytes were changed)" if crc else f"a damaged member ({exc})",
            kind="bad-crc" if crc else "corrupt-zip",
        ) from None
    except (zlib.error, EOFError, ValueError, NotImplementedError, UnicodeDecodeError, struct.error) as exc:
        raise FormatError(
            path,
            info.header_offset,
            f"readable member {info.filename!r}",
            f"data that does not decompress ({type(exc).__name__}: {exc})",
            kind="corrupt-zip",
        ) from None


def parse(data: bytes, path: str = "<zip>", *, check_crc: bool = True) -> RocksDBZip:
    """Members (names checked for zip-slip), CRC of every member, and the metadata."""
    zf = _open(data, path)
    with zf:
        infos = zf.infolist()
        for info in infos:
            if is_unsafe_name(info.filename):
                raise FormatError(
                    path,
                    info.header_offset,
                    "a relative member name without '..'",
                    repr(info.filename),
                    kind="unsafe-member",
                )
        if check_crc:
            for info in infos:
                _check_member(zf, info, path)
        members = tuple(
            ZipMember(i.filename, i.file_size, i.compress_size, i.CRC, i.compress_type, i.header_offset) for i in infos
        )
        meta_info = next((i for i in infos if i.filename == METADATA), None)
        if meta_info is None:
            raise FormatError(
                path,
                getattr(zf, "start_dir", len(data)),
                "a 'metadata' member",
                f"members {[i.filename for i in infos]}",
                kind="missing-metadata",
            )
        if not check_crc:
            _check_member(zf, meta_info, path)
        metadata = parse_metadata(zf.read(meta_info), f"{path}!/{METADATA}")
    return RocksDBZip(members, metadata)


def build(files: dict[str, bytes], metadata: RocksDBMetadata) -> bytes:
    """A zip Spark accepts: ``files`` (CURRENT, MANIFEST-*, OPTIONS-*, ...) then ``metadata``,
    all deflated. For tests and for writers that built a RocksDB checkpoint elsewhere."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, content in files.items():
            if is_unsafe_name(name) or name == METADATA:
                raise ValueError(f"bad member name {name!r}")
            zf.writestr(name, content)
        zf.writestr(METADATA, dump_metadata(metadata))
    return buf.getvalue()
