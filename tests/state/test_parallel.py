"""Forked state readers write in partition order, whichever worker finishes first."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from ckptfix.state import parallel

pytestmark = pytest.mark.skipif(not parallel.available(), reason="needs fork")


def slow_first(part: int) -> Iterator[tuple[int, int]]:
    """Partition 0 is the slowest, partition 1 has more rows than one chunk: the order the workers finish in is
    the reverse of the partitions'."""
    time.sleep(0.4 if part == 0 else 0.05 * (5 - part))
    rows = parallel.CHUNK_ROWS + 3 if part == 1 else 2
    for i in range(rows):
        yield (part, i)


def test_chunks_come_in_partition_order() -> None:
    chunks = list(parallel.parallel_chunks([0, 1, 2, 3, 4], slow_first, lambda rows: list(rows), 3, columnar=False))
    rows = [row for chunk, _ in chunks for row in chunk]
    expected = [(p, i) for p in range(5) for i in range(parallel.CHUNK_ROWS + 3 if p == 1 else 2)]
    assert rows == expected
    assert [n for _, n in chunks] == [2, parallel.CHUNK_ROWS, 3, 2, 2, 2]


def test_text_comes_in_partition_order() -> None:
    def text(row: tuple[int, int]) -> str:
        return f"{row[0]},{row[1]}\n"

    out = "".join(chunk for chunk, _ in parallel.parallel_text([4, 2, 0, 3, 1], slow_first, text, 4))
    parts = [int(line.split(",")[0]) for line in out.splitlines()]
    assert parts == sorted(parts, key=[4, 2, 0, 3, 1].index)  # the order asked for, as given
    assert parts[:2] == [4, 4] and parts[-1] == 1


def test_more_partitions_than_the_window_and_one_job() -> None:
    many = list(range(3 * parallel.WINDOW_PER_JOB + 1))
    chunks = list(parallel.parallel_chunks(many, lambda p: iter([(p, 0)]), lambda rows: list(rows), 1, columnar=False))
    assert [chunk[0][0] for chunk, _ in chunks] == many
