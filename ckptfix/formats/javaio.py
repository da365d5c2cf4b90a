"""Java ``DataOutputStream.writeUTF`` strings: a uint16 big-endian byte length, then modified
UTF-8 (NUL is ``C0 80``; characters above U+FFFF are two 3-byte surrogates, as in CESU-8;
4-byte sequences do not exist). Used by state schema files and RocksDB changelog headers.
"""

from __future__ import annotations

import struct

from ckptfix.errors import FormatError

U16 = struct.Struct(">H")  # Java DataOutputStream: big-endian
MAX_UTF_BYTES = 0xFFFF


def _malformed(path: str, offset: int, found: bytes) -> FormatError:
    return FormatError(path, offset, "Java modified UTF-8", f"bytes {found.hex(' ')}", kind="invalid-utf")


def decode_modified_utf8(data: bytes, path: str = "<utf>", offset: int = 0, *, pair: bool = True) -> str:
    """Decode like ``DataInputStream.readUTF`` (byte ``offset`` is only for errors).

    With ``pair`` (the default) surrogate pairs become one character and a lone surrogate is
    an error; without it surrogates stay as Python surrogate code points so chunks that split
    a pair can be joined first (see :func:`join_surrogates`).
    """
    if data.isascii():
        return data.decode("ascii")
    units: list[int] = []
    i, n = 0, len(data)
    while i < n:
        c = data[i]
        if c < 0x80:
            units.append(c)
            i += 1
        elif c >> 5 == 0b110:
            if i + 1 >= n or data[i + 1] >> 6 != 0b10:
                raise _malformed(path, offset + i, data[i : i + 2])
            units.append(((c & 0x1F) << 6) | (data[i + 1] & 0x3F))
            i += 2
        elif c >> 4 == 0b1110:
            if i + 2 >= n or data[i + 1] >> 6 != 0b10 or data[i + 2] >> 6 != 0b10:
                raise _malformed(path, offset + i, data[i : i + 3])
            units.append(((c & 0x0F) << 12) | ((data[i + 1] & 0x3F) << 6) | (data[i + 2] & 0x3F))
            i += 3
        else:  # 10xxxxxx continuation or 1111xxxx: Java throws UTFDataFormatException
            raise _malformed(path, offset + i, data[i : i + 1])
    text = "".join(map(chr, units))
    return join_surrogates(text, path, offset) if pair else text


def join_surrogates(text: str, path: str = "<utf>", offset: int = 0) -> str:
    """Turn UTF-16 surrogate pairs into single characters; a lone surrogate is an error."""
    try:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le")
    except UnicodeDecodeError:
        raise FormatError(path, offset, "paired UTF-16 surrogates", "a lone surrogate", kind="invalid-utf") from None


def encode_modified_utf8(text: str) -> bytes:
    """Encode like ``DataOutputStream.writeUTF`` without the length prefix."""
    if text.isascii() and "\x00" not in text:
        return text.encode("ascii")
    out = bytearray()
    raw = text.encode("utf-16-le", "surrogatepass")
    for (unit,) in struct.iter_unpack("<H", raw):
        if 0 < unit < 0x80:
            out.append(unit)
        elif unit < 0x800:
            out += bytes((0xC0 | unit >> 6, 0x80 | unit & 0x3F))
        else:
            out += bytes((0xE0 | unit >> 12, 0x80 | (unit >> 6) & 0x3F, 0x80 | unit & 0x3F))
    return bytes(out)


def read_utf(data: bytes, offset: int, path: str, what: str, *, pair: bool = True) -> tuple[str, int]:
    """One ``writeUTF`` string at ``offset``; returns it and the offset after it."""
    if offset + U16.size > len(data):
        raise FormatError(path, offset, f"{what} (a 2-byte UTF length)", "the end of the data", kind="truncated")
    (length,) = U16.unpack_from(data, offset)
    start = offset + U16.size
    if start + length > len(data):
        raise FormatError(
            path, offset, f"{what} ({length} UTF bytes)", f"{len(data) - start} bytes left", kind="truncated"
        )
    return decode_modified_utf8(data[start : start + length], path, start, pair=pair), start + length


def write_utf(text: str) -> bytes:
    encoded = encode_modified_utf8(text)
    if len(encoded) > MAX_UTF_BYTES:
        raise ValueError(f"writeUTF holds at most {MAX_UTF_BYTES} bytes, got {len(encoded)}")
    return U16.pack(len(encoded)) + encoded
