"""State schema files (strings inside are Java ``writeUTF``, see :mod:`ckptfix.formats.javaio`).

``<store>/_metadata/schema`` (``StateSchemaCompatibilityChecker``), big-endian framing::

    v1: UTF "v1", UTF keySchemaJson, UTF valueSchemaJson
    v2: UTF "v2", chunks(keySchemaJson), chunks(valueSchemaJson)

``state/<op>/_stateSchema/<storeName>/<batchId>_<uuid>`` (4.x transformWithState)::

    v3: UTF "v3", int32 numColumnFamilies, then per column family:
        UTF name, int16 keySchemaId, chunks(keySchemaJson), int16 valueSchemaId,
        chunks(valueSchemaJson), chunks(keyStateEncoderSpecJson),
        chunks(userKeyEncoderSchemaJson, or the literal "{    }" when there is none)

``chunks(s)`` = int32 count, then that many UTF strings whose concatenation is ``s``.
A UTF string is a uint16 byte length then modified UTF-8: NUL is ``C0 80`` and characters
above U+FFFF are two 3-byte surrogates (CESU-8); 4-byte sequences do not exist.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from typing import Any

from ckptfix.errors import FormatError, UnsupportedVersion
from ckptfix.formats.javaio import MAX_UTF_BYTES, join_surrogates, read_utf, write_utf
from ckptfix.formats.text import json_expected, loads, preview

I16 = struct.Struct(">h")
I32 = struct.Struct(">i")
NO_USER_KEY_SCHEMA = "{    }"  # what SchemaV3Writer writes when there is no user key schema


def _read_int(data: bytes, offset: int, fmt: struct.Struct, path: str, what: str) -> int:
    if offset + fmt.size > len(data):
        raise FormatError(path, offset, f"{what} ({fmt.size} bytes)", "the end of the data", kind="truncated")
    value: int = fmt.unpack_from(data, offset)[0]
    return value


def read_chunks(data: bytes, offset: int, path: str, what: str) -> tuple[str, int]:
    """``int32 count`` + count UTF chunks, concatenated (pairs may straddle chunks)."""
    count = _read_int(data, offset, I32, path, f"the chunk count of {what}")
    if count < 0:
        raise FormatError(path, offset, f"a chunk count >= 0 for {what}", str(count), kind="bad-length")
    pos = offset + I32.size
    parts: list[str] = []
    for i in range(count):
        part, pos = read_utf(data, pos, path, f"chunk {i} of {what}", pair=False)
        parts.append(part)
    return join_surrogates("".join(parts), path, offset), pos


def split_chunks(text: str) -> list[str]:
    """Split into pieces of at most 65535 chars that each fit one writeUTF."""
    pieces: list[str] = []
    units = text.encode("utf-16-le", "surrogatepass")
    current: list[str] = []
    size = 0
    for (unit,) in struct.iter_unpack("<H", units):
        width = 1 if 0 < unit < 0x80 else 2 if unit < 0x800 else 3
        if size + width > MAX_UTF_BYTES or len(current) >= MAX_UTF_BYTES:
            pieces.append("".join(current))
            current, size = [], 0
        current.append(chr(unit))
        size += width
    if current or not pieces:
        pieces.append("".join(current))
    return pieces


def write_chunks(text: str) -> bytes:
    pieces = split_chunks(text)
    return I32.pack(len(pieces)) + b"".join(write_utf(p) for p in pieces)


# ---------------------------------------------------------------- schema files


@dataclass(frozen=True)
class SchemaV1:
    key_schema: dict[str, Any]
    value_schema: dict[str, Any]


@dataclass(frozen=True)
class SchemaV2:
    key_schema: dict[str, Any]
    value_schema: dict[str, Any]


@dataclass(frozen=True)
class ColumnFamilySchema:
    name: str
    key_schema_id: int
    key_schema: dict[str, Any]
    value_schema_id: int
    value_schema: dict[str, Any]
    key_state_encoder_spec: dict[str, Any]
    user_key_encoder_schema: dict[str, Any] | None  # None when written as "{    }"


@dataclass(frozen=True)
class SchemaV3:
    column_families: tuple[ColumnFamilySchema, ...]


StateSchema = SchemaV1 | SchemaV2 | SchemaV3


def _json(text: str, path: str, offset: int, what: str) -> dict[str, Any]:
    try:
        value = loads(text)
    except json.JSONDecodeError as exc:
        raise FormatError(
            path, offset, f"{what} as JSON ({json_expected(exc)})", preview(text), kind="invalid-json"
        ) from None
    if not isinstance(value, dict):
        raise FormatError(path, offset, f"{what} as a JSON object", preview(text), kind="invalid-json")
    return value


def _dumps(obj: dict[str, Any]) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def parse(data: bytes, path: str = "<schema>") -> StateSchema:
    if not data:
        raise FormatError(path, 0, "a state schema file", "an empty file", kind="empty")
    header, pos = read_utf(data, 0, path, "the version header")
    if not (header.startswith("v") and header[1:].isdigit()):
        raise FormatError(path, 0, "a version header 'v<N>'", preview(header), kind="malformed-version")
    version = int(header[1:])
    if version == 1:
        key, pos2 = read_utf(data, pos, path, "the key schema")
        value, end = read_utf(data, pos2, path, "the value schema")
        model: StateSchema = SchemaV1(_json(key, path, pos, "key schema"), _json(value, path, pos2, "value schema"))
    elif version == 2:
        key, pos2 = read_chunks(data, pos, path, "the key schema")
        value, end = read_chunks(data, pos2, path, "the value schema")
        model = SchemaV2(_json(key, path, pos, "key schema"), _json(value, path, pos2, "value schema"))
    elif version == 3:
        model, end = _parse_v3(data, pos, path)
    else:
        raise UnsupportedVersion(path, 0, "state schema v1, v2 or v3", version)
    if end != len(data):
        raise FormatError(
            path, end, "the end of the schema file", f"{len(data) - end} more bytes", kind="trailing-bytes"
        )
    return model


def _parse_v3(data: bytes, pos: int, path: str) -> tuple[SchemaV3, int]:
    count = _read_int(data, pos, I32, path, "the column family count")
    if count < 0:
        raise FormatError(path, pos, "a column family count >= 0", str(count), kind="bad-length")
    pos += I32.size
    families: list[ColumnFamilySchema] = []
    for i in range(count):
        name, pos = read_utf(data, pos, path, f"the name of column family {i}")
        key_id = _read_int(data, pos, I16, path, f"the key schema id of {name!r}")
        pos += I16.size
        at = pos
        key, pos = read_chunks(data, pos, path, f"the key schema of {name!r}")
        key_schema = _json(key, path, at, f"key schema of {name!r}")
        value_id = _read_int(data, pos, I16, path, f"the value schema id of {name!r}")
        pos += I16.size
        at = pos
        value, pos = read_chunks(data, pos, path, f"the value schema of {name!r}")
        value_schema = _json(value, path, at, f"value schema of {name!r}")
        at = pos
        spec, pos = read_chunks(data, pos, path, f"the key encoder spec of {name!r}")
        spec_json = _json(spec, path, at, f"key encoder spec of {name!r}")
        at = pos
        user, pos = read_chunks(data, pos, path, f"the user key schema of {name!r}")
        user_json = None if user == NO_USER_KEY_SCHEMA else _json(user, path, at, f"user key schema of {name!r}")
        families.append(ColumnFamilySchema(name, key_id, key_schema, value_id, value_schema, spec_json, user_json))
    return SchemaV3(tuple(families)), pos


def dump(model: StateSchema) -> bytes:
    if isinstance(model, SchemaV1):
        return write_utf("v1") + write_utf(_dumps(model.key_schema)) + write_utf(_dumps(model.value_schema))
    if isinstance(model, SchemaV2):
        return write_utf("v2") + write_chunks(_dumps(model.key_schema)) + write_chunks(_dumps(model.value_schema))
    out = [write_utf("v3"), I32.pack(len(model.column_families))]
    for cf in model.column_families:
        user = NO_USER_KEY_SCHEMA if cf.user_key_encoder_schema is None else _dumps(cf.user_key_encoder_schema)
        out += [
            write_utf(cf.name),
            I16.pack(cf.key_schema_id),
            write_chunks(_dumps(cf.key_schema)),
            I16.pack(cf.value_schema_id),
            write_chunks(_dumps(cf.value_schema)),
            write_chunks(_dumps(cf.key_state_encoder_spec)),
            write_chunks(user),
        ]
    return b"".join(out)
