"""Operator metadata (Spark 4.x): ``state/<op>/_metadata/metadata`` (v1) and
``state/<op>/_metadata/v2/<batch>`` (v2, transformWithState). ``v<N>\\n`` + one JSON object."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ckptfix.errors import FormatError
from ckptfix.formats.text import dumps, java_int, java_long, parse_json_object, parse_version, split_lines

MAX_KNOWN_VERSION = 2


@dataclass(frozen=True)
class StoreInfo:
    store_name: str
    num_cols_prefix_key: int
    num_partitions: int
    raw: dict[str, Any]


@dataclass(frozen=True)
class OperatorMetadata:
    version: int
    operator_id: int
    operator_name: str
    stores: tuple[StoreInfo, ...]
    raw: dict[str, Any]  # the whole JSON object, unknown keys included


def parse(data: bytes, path: str = "<operator metadata>") -> OperatorMetadata:
    lines = split_lines(data)
    if not lines:
        raise FormatError(path, 0, "operator metadata", "an empty file", kind="empty")
    version = parse_version(path, lines[0], MAX_KNOWN_VERSION)
    if len(lines) < 2:
        raise FormatError(path, len(data), "a JSON line after the version", "the end of the file", kind="header-only")
    obj = parse_json_object(path, lines[1], "operator metadata JSON")

    def number(value: Any, convert: Any, name: str) -> int:  # json4s: Long/Int fields, saturating or wrapping
        out = convert(value)
        if out is None:
            raise ValueError(f"{name}: {value!r}"[:80])
        return int(out)

    try:
        info = obj["operatorInfo"]
        stores = tuple(
            StoreInfo(
                str(s["storeName"]),
                number(s.get("numColsPrefixKey", 0), java_int, "numColsPrefixKey"),
                number(s["numPartitions"], java_int, "numPartitions"),
                s,
            )
            for s in obj.get("stateStoreInfo", [])
        )
        operator_id = number(info["operatorId"], java_long, "operatorId")
        return OperatorMetadata(version, operator_id, str(info["operatorName"]), stores, obj)
    except (KeyError, TypeError, ValueError) as exc:
        raise FormatError(
            path,
            lines[1].offset,
            "operatorInfo and stateStoreInfo fields",
            f"missing or bad {exc}",
            kind="invalid-json",
        ) from None


def dump(meta: OperatorMetadata) -> bytes:
    return f"v{meta.version}\n{dumps(meta.raw)}".encode()
