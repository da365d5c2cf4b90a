"""What the codec readers share: a binary source read in pieces."""

from __future__ import annotations

from typing import Protocol


class Readable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


def read_exactly(src: Readable, n: int) -> bytes:
    """Up to ``n`` bytes: fewer only at the end of the source."""
    chunks: list[bytes] = []
    left = n
    while left > 0:
        chunk = src.read(left)
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)
