"""Mutations of a real file's bytes: deterministic from (file bytes, seed, index), so a failure is reproduced
by its number alone (``python -m bench.battery --only parsers --replay FILE:INDEX``).

Families (each says what it did, for the report):
truncate  every prefix length (sampled evenly above ``TRUNCATE_ALL`` bytes)
flip      one random bit flipped (a few bits for larger files)
insert    1-8 random bytes inserted at a random offset
version   the first ``v<digits>`` line (or a binary version field) replaced by another version
number    a JSON number replaced by 1e999, -1e999, Infinity, NaN, a 5000-digit integer, 2**63, 1.5 ...
type      a JSON value replaced by a value of another JSON type ("x", true, null, [], {})
utf8      invalid UTF-8, an overlong sequence, CESU surrogate bytes or a JSON "\\ud800" escape inserted
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator

FAMILIES = ("truncate", "flip", "insert", "version", "number", "type", "utf8")
TRUNCATE_ALL = 4096  # files up to this size are cut at every length

HUGE_INT = "9" * 5000
NUMBERS = (
    "1e999",
    "-1e999",
    "Infinity",
    "-Infinity",
    "NaN",
    HUGE_INT,
    "-" + HUGE_INT,
    str(2**63),
    str(-(2**63) - 1),
    str(2**64 + 5),
    "1.5",
    "-0",
    "0e0",
    "1" + "0" * 1001,
    "00012",
)
VALUES = ('"x"', '"123"', "true", "false", "null", "[]", "{}", '[1,"a"]', '{"a":{"b":[]}}', '""')
VERSIONS = ("v0", "v-1", "v2", "v99", "v2147483647", "v2147483648", "v" + HUGE_INT, "v", "V1", "v1.0", "v१")
UTF8_BAD = (
    b"\xff",
    b"\xfe\xff",
    b"\xc0\x80",
    b"\xed\xa0\x80",  # CESU-8 / modified UTF-8 lone high surrogate
    b"\xed\xb0\x80",
    b"\xf4\x90\x80\x80",  # beyond U+10FFFF
    b"\\ud800",  # a JSON escape of a lone surrogate
    b"\\udc00x",
    b"\\u0000",
    b"\xe2\x82",  # cut multi-byte sequence
)
_NUMBER = re.compile(rb"(?<![\w.\"])-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?(?![\w\"])")
_JSON_VALUE = re.compile(rb':\s*("(?:[^"\\]|\\.)*"|-?\d[\d.eE+-]*|true|false|null|\{\}|\[\])')
_VERSION = re.compile(rb"^v\d+", re.M)


def count(data: bytes, per_family: int) -> int:
    """How many mutations :func:`mutations` yields for ``data``."""
    return sum(1 for _ in plan(data, per_family))


def plan(data: bytes, per_family: int) -> Iterator[tuple[str, int]]:
    """(family, k) for every mutation of this file: all truncations, ``per_family`` of each other family."""
    n = len(data)
    cuts = range(n) if n <= TRUNCATE_ALL else (i * n // TRUNCATE_ALL for i in range(TRUNCATE_ALL))
    for k in cuts:
        yield "truncate", k
    for family in FAMILIES[1:]:
        for k in range(per_family):
            yield family, k


def apply(data: bytes, family: str, k: int, seed: int) -> tuple[bytes, str]:
    """The mutated bytes and a one-line description."""
    rnd = random.Random(f"{seed}:{family}:{k}:{len(data)}")
    n = len(data)
    if family == "truncate":
        return data[:k], f"truncated to {k} of {n} bytes"
    if family == "flip":
        if not n:
            return b"\x01", "flip on an empty file: one byte 0x01"
        out = bytearray(data)
        flips = 1 if k % 3 else rnd.randint(2, 8)
        where = []
        for _ in range(flips):
            i = rnd.randrange(n)
            bit = rnd.randrange(8)
            out[i] ^= 1 << bit
            where.append(f"{i}.{bit}")
        return bytes(out), f"bit flips at byte.bit {','.join(where)}"
    if family == "insert":
        i = rnd.randint(0, n)
        ins = bytes(rnd.randrange(256) for _ in range(rnd.randint(1, 8)))
        return data[:i] + ins + data[i:], f"inserted {ins.hex()} at byte {i}"
    if family == "version":
        new = VERSIONS[k % len(VERSIONS)].encode()
        m = _VERSION.search(data)
        if m:
            return data[: m.start()] + new + data[m.end() :], f"version line {m.group().decode()} -> {new[:20]!r}"
        if n >= 4:  # binary formats: a version field in the first bytes
            i = rnd.randrange(min(n, 16) - 3)
            val = rnd.choice((0, 1, 2, 3, 4, 5, 99, 2**31 - 1, 2**32 - 1, 2**31))
            return data[:i] + val.to_bytes(4, "big") + data[i + 4 :], f"int32 {val} written at byte {i}"
        return data + b"v2", "appended v2"
    if family == "number":
        spans = [m.span() for m in _NUMBER.finditer(data)]
        new = NUMBERS[k % len(NUMBERS)].encode()
        if spans:
            a, b = spans[rnd.randrange(len(spans))]
            return data[:a] + new + data[b:], f"number {data[a:b][:20]!r} at byte {a} -> {new[:20]!r}"
        i = rnd.randint(0, n)
        return data[:i] + new + data[i:], f"inserted {new[:20]!r} at byte {i}"
    if family == "type":
        spans = [m.span(1) for m in _JSON_VALUE.finditer(data)]
        new = VALUES[k % len(VALUES)].encode()
        if spans:
            a, b = spans[rnd.randrange(len(spans))]
            return data[:a] + new + data[b:], f"JSON value {data[a:b][:20]!r} at byte {a} -> {new!r}"
        i = rnd.randint(0, n)
        return data[:i] + new + data[i:], f"inserted {new!r} at byte {i}"
    if family == "utf8":
        bad = UTF8_BAD[k % len(UTF8_BAD)]
        quotes = [m.start() + 1 for m in re.finditer(rb'"', data)]
        i = rnd.choice(quotes) if quotes and k % 2 else rnd.randint(0, n)
        return data[:i] + bad + data[i:], f"inserted {bad!r} at byte {i}"
    raise ValueError(family)
