"""Spark 4.x visible checksum sidecars (<file>.crc JSON) against real files."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ckptfix.errors import FormatError
from ckptfix.formats import filechecksum
from ckptfix.formats.filechecksum import FileChecksum

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "formats"


def sidecars() -> list[Path]:
    return sorted(FIX.rglob("*.crc"))


def test_real_sidecars_match_their_files() -> None:
    found = sidecars()
    assert len(found) == 9  # 4 + 4 changelogs and one zip
    for crc in found:
        main = crc.with_name(crc.name.removesuffix(".crc")).read_bytes()
        model = filechecksum.parse(crc.read_bytes(), str(crc))
        assert model.algorithm == "CRC32C"
        assert model.main_file_size == len(main)
        assert filechecksum.mismatch(model, main) is None
        assert filechecksum.dump(model) == crc.read_bytes()  # byte-exact rewrite
        assert model.creator is not None and model.creator["executorId"] == "driver"


def test_compute_known_vector() -> None:
    # CRC-32C check value of "123456789" is 0xE3069283, i.e. -486108541 as a Java int
    assert filechecksum.compute(b"123456789") == -486108541
    assert filechecksum.compute(b"") == 0


def test_mismatch_reports_size_and_checksum() -> None:
    crc = sidecars()[0]
    main = bytearray(crc.with_name(crc.name.removesuffix(".crc")).read_bytes())
    model = filechecksum.parse(crc.read_bytes())
    main[-1] ^= 1
    msg = filechecksum.mismatch(model, bytes(main))
    assert msg is not None and str(model.value) in msg and str(filechecksum.compute(bytes(main))) in msg
    assert filechecksum.mismatch(model, bytes(main) + b"x") is not None


def test_make_and_unknown_keys() -> None:
    model = filechecksum.make(b"123456789", 5, {"executorId": "0"})
    assert model == FileChecksum(-486108541, 9, "CRC32C", 5, {"executorId": "0"})
    text = b'{"algorithm":"CRC32C","value":1,"mainFileSize":2,"future":[1]}'
    parsed = filechecksum.parse(text)
    assert parsed.extra == {"future": [1]}
    assert filechecksum.dump(parsed) == text


@given(
    st.integers(-(2**31), 2**31 - 1),
    st.integers(0, 2**40),
    st.one_of(st.none(), st.integers(0, 2**45)),
    st.one_of(st.none(), st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=2)),
)
def test_roundtrip(value: int, size: int, ts: int | None, creator: dict[str, str] | None) -> None:
    model = FileChecksum(value, size, "CRC32C", ts, creator)
    assert filechecksum.parse(filechecksum.dump(model)) == model


@pytest.mark.parametrize(
    "text,kind",
    [
        (b"", "empty"),
        (b'{"algorithm":"CRC32C","value":1,"mainFileSize"', "truncated-json"),
        (b'{"algorithm":"CRC32C","value":"1","mainFileSize":2}', "invalid-checksum"),
        (b'{"algorithm":"CRC32C","value":4294967295,"mainFileSize":2}', "invalid-checksum"),
        (b'{"algorithm":"CRC32C","value":1,"mainFileSize":-2}', "invalid-checksum"),
        (b"[1]", "invalid-json"),
    ],
)
def test_damaged_sidecars(text: bytes, kind: str) -> None:
    with pytest.raises(FormatError) as info:
        filechecksum.parse(text, "x.crc")
    assert info.value.kind == kind
