"""State schema files v1-v3 and Java modified UTF-8."""

from __future__ import annotations

import contextlib
import json
import struct
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ckptfix.errors import FormatError, UnsupportedVersion
from ckptfix.formats import javaio, schema
from ckptfix.formats.schema import ColumnFamilySchema, SchemaV1, SchemaV2, SchemaV3

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "formats"
V2_FILE = FIX / "hdfs/state/0/0/_metadata/schema"


def struct_of(**fields: str) -> dict[str, Any]:
    return {
        "type": "struct",
        "fields": [{"name": n, "type": t, "nullable": True, "metadata": {}} for n, t in fields.items()],
    }


NO_PREFIX = {"keyStateEncoderType": "NoPrefixKeyStateEncoderSpec"}


def test_real_v2_from_groupby_count() -> None:
    data = V2_FILE.read_bytes()
    model = schema.parse(data, str(V2_FILE))
    assert model == SchemaV2(struct_of(k="string"), struct_of(count="long"))
    assert schema.dump(model) == data


def test_real_v3_from_transform_with_state() -> None:
    (path,) = (FIX / "tws/state/0/_stateSchema/default").iterdir()
    data = path.read_bytes()
    model = schema.parse(data, str(path))
    key = struct_of(k="string")
    assert model == SchemaV3(
        (
            ColumnFamilySchema("$rowCounter_lst", 0, key, 0, struct_of(count="long"), NO_PREFIX, None),
            ColumnFamilySchema("cnt", 0, key, 0, struct_of(c="long"), NO_PREFIX, None),
            ColumnFamilySchema("lst", 0, key, 0, struct_of(v="string"), NO_PREFIX, None),
        )
    )
    assert schema.dump(model) == data


def test_v1_layout() -> None:
    model = SchemaV1(struct_of(a="int"), struct_of(b="long"))
    data = schema.dump(model)
    assert data.startswith(b"\x00\x02v1\x00")
    assert schema.parse(data) == model


# ------------------------------------------------------------------ modified UTF-8


def test_nul_and_supplementary_encoding() -> None:
    assert javaio.encode_modified_utf8("a\x00b") == b"a\xc0\x80b"
    assert javaio.encode_modified_utf8("\U0001f600") == bytes.fromhex("eda0bdedb880")  # CESU-8 surrogates
    assert javaio.encode_modified_utf8("é€") == "é€".encode()  # BMP: same as UTF-8
    assert javaio.decode_modified_utf8(b"a\xc0\x80b") == "a\x00b"
    assert javaio.decode_modified_utf8(bytes.fromhex("eda0bdedb880")) == "\U0001f600"


def test_four_byte_utf8_is_rejected() -> None:
    with pytest.raises(FormatError) as info:
        javaio.decode_modified_utf8(b"ab" + "\U0001f600".encode(), "x", 10)
    assert (info.value.kind, info.value.offset) == ("invalid-utf", 12)


def test_lone_surrogate_is_rejected() -> None:
    with pytest.raises(FormatError) as info:
        javaio.decode_modified_utf8(bytes.fromhex("eda0bd"), "x", 0)
    assert info.value.kind == "invalid-utf"


def test_bad_continuation_byte() -> None:
    with pytest.raises(FormatError) as info:
        javaio.decode_modified_utf8(b"ok\xc3(", "x", 100)
    assert (info.value.kind, info.value.offset) == ("invalid-utf", 102)


@given(st.text(max_size=200))
def test_modified_utf8_roundtrip(text: str) -> None:
    assert javaio.decode_modified_utf8(javaio.encode_modified_utf8(text)) == text
    encoded = javaio.encode_modified_utf8(text)
    assert b"\x00" not in encoded
    assert not any(b >= 0xF0 for b in encoded)


def test_chunks_split_long_strings_and_surrogate_pairs() -> None:
    text = "x" * 65534 + "\U0001f600" + "é" * 40000  # the pair straddles the 65535-char limit
    pieces = schema.split_chunks(text)
    assert len(pieces) >= 2
    assert all(len(javaio.encode_modified_utf8(p)) <= 65535 for p in pieces)
    data = schema.write_chunks(text)
    assert struct.unpack_from(">i", data)[0] == len(pieces)
    assert schema.read_chunks(data, 0, "x", "t") == (text, len(data))


# ------------------------------------------------------------------ round trips

json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**53), 2**53), st.text(max_size=20))
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)),
    max_leaves=10,
)
json_objects = st.dictionaries(st.text(max_size=10), json_values, max_size=4)
cfs = st.builds(
    ColumnFamilySchema,
    st.text(max_size=20),
    st.integers(-(2**15), 2**15 - 1),
    json_objects,
    st.integers(-(2**15), 2**15 - 1),
    json_objects,
    json_objects,
    st.one_of(st.none(), json_objects.filter(lambda d: json.dumps(d, separators=(",", ":")) != "{    }")),
)


@given(st.one_of(st.builds(SchemaV1, json_objects, json_objects), st.builds(SchemaV2, json_objects, json_objects)))
def test_roundtrip_v1_v2(model: SchemaV1 | SchemaV2) -> None:
    assert schema.parse(schema.dump(model)) == model


@given(st.lists(cfs, max_size=4).map(tuple))
def test_roundtrip_v3(families: tuple[ColumnFamilySchema, ...]) -> None:
    model = SchemaV3(families)
    assert schema.parse(schema.dump(model)) == model


# ------------------------------------------------------------------ damage


def test_truncated_schema() -> None:
    data = V2_FILE.read_bytes()
    with pytest.raises(FormatError) as info:
        schema.parse(data[:-10], "x")
    # the value schema's only chunk starts at 4 + 4 + 2 + 87 + 4 = 101
    assert (info.value.kind, info.value.offset) == ("truncated", 101)


def test_trailing_bytes() -> None:
    data = V2_FILE.read_bytes()
    with pytest.raises(FormatError) as info:
        schema.parse(data + b"\x00", "x")
    assert (info.value.kind, info.value.offset) == ("trailing-bytes", len(data))


def test_unknown_version_and_empty() -> None:
    with pytest.raises(UnsupportedVersion) as info:
        schema.parse(b"\x00\x02v9", "x")
    assert info.value.version == 9
    with pytest.raises(FormatError) as err:
        schema.parse(b"", "x")
    assert err.value.kind == "empty"


def test_invalid_json_names_the_chunk() -> None:
    data = javaio.write_utf("v2") + schema.write_chunks("{not json") + schema.write_chunks("{}")
    with pytest.raises(FormatError) as info:
        schema.parse(data, "x")
    assert (info.value.kind, info.value.offset) == ("invalid-json", 4)


@given(st.binary(max_size=300), st.integers(0, 300))
def test_damage_only_raises_format_error(noise: bytes, at: int) -> None:
    real = V2_FILE.read_bytes()
    with contextlib.suppress(FormatError):
        schema.parse(real[:at] + noise)
