"""The bulk Murmur3 (``sparkhash.hash_columns``, numpy, what ``state repartition`` places keys with) against the
row-by-row one (``sparkhash.hash_row``, proven against Spark's own ``hash()`` in test_sparkhash_live.py, which
also checks the bulk hash against Spark), on the same generated values of every key type: one column at a time,
all together (each column's hash the seed of the next), on sliced arrays, and with a column type it leaves to
the row-by-row hash."""

from __future__ import annotations

import pytest

from ckptfix.formats import sparkhash
from ckptfix.formats.ddl import parse_ddl
from ckptfix.formats.unsaferow import StructType
from tests.formats.test_sparkhash_live import DDL, NOT_IN_BULK, generated

pytest.importorskip("pyarrow")
np = pytest.importorskip("numpy")
from ckptfix.state.export import arrow_column  # noqa: E402

SCHEMA = parse_ddl(DDL, "DDL")
ROWS = generated(3000)
BULK = [j for j, f in enumerate(SCHEMA.fields) if f.name not in NOT_IN_BULK]


@pytest.mark.parametrize("j", range(len(SCHEMA.fields)), ids=[f.name for f in SCHEMA.fields])
def test_each_column_hashes_as_the_row_hash(j: int) -> None:
    f = SCHEMA.fields[j]
    one = StructType([f])
    got = sparkhash.hash_columns([arrow_column(f.data_type, [r[j] for r in ROWS])], one)
    if f.name in NOT_IN_BULK:
        assert got is None
        return
    assert got is not None and got.dtype == np.int32
    assert [int(h) for h in got] == [sparkhash.hash_row([r[j]], one) for r in ROWS]


def test_all_columns_together_and_sliced() -> None:
    schema = StructType([SCHEMA.fields[j] for j in BULK])
    columns = [arrow_column(SCHEMA.fields[j].data_type, [r[j] for r in ROWS]) for j in BULK]
    want = [sparkhash.hash_row([r[j] for j in BULK], schema) for r in ROWS]
    got = sparkhash.hash_columns(columns, schema)
    assert got is not None and [int(h) for h in got] == want
    sliced = sparkhash.hash_columns([c.slice(101, 777) for c in columns], schema)
    assert sliced is not None and [int(h) for h in sliced] == want[101:878]
    for n in (1, 7, 200):
        assert [int(p) for p in np.mod(got.astype(np.int64), n)] == [
            sparkhash.partition_of([r[j] for j in BULK], schema, n) for r in ROWS
        ]


def test_a_column_it_does_not_hash_leaves_the_whole_row_to_the_row_hash() -> None:
    fields = [SCHEMA.fields[j] for j, f in enumerate(SCHEMA.fields) if f.name in ("i", "arr")]
    columns = [arrow_column(f.data_type, [r[SCHEMA.fields.index(f)] for r in ROWS]) for f in fields]
    assert sparkhash.hash_columns(columns, StructType(fields)) is None


def test_strings_of_every_length_around_the_word_size() -> None:
    schema = parse_ddl("t STRING", "DDL")
    values = ["x" * n for n in range(0, 41)] + ["é" * n for n in range(0, 13)] + [None, ""]
    got = sparkhash.hash_columns([arrow_column(schema.fields[0].data_type, values)], schema)
    assert got is not None and [int(h) for h in got] == [sparkhash.hash_row([v], schema) for v in values]
