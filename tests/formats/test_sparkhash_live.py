"""ckptfix's Murmur3 (``ckptfix.formats.sparkhash``) against Spark's own ``hash()`` and ``pmod(hash(...), n)`` on
generated values of every type a state key can hold: the partition ``state put`` gives a new key is the one
Spark's HashPartitioning gives it."""

from __future__ import annotations

import datetime as dt
import decimal
import math
import random
from typing import Any

import pytest

from ckptfix.formats import sparkhash
from ckptfix.formats.ddl import parse_ddl
from ckptfix.formats.unsaferow import StructType
from ckptfix.state.export import arrow_column

pytestmark = pytest.mark.spark

DDL = (
    "b BOOLEAN, y TINYINT, s SMALLINT, i INT, l BIGINT, f FLOAT, d DOUBLE, t STRING, bin BINARY, "
    "dec DECIMAL(10,2), big DECIMAL(30,5), day DATE, ts TIMESTAMP, ntz TIMESTAMP_NTZ, "
    "st STRUCT<start: TIMESTAMP, n: INT>, arr ARRAY<STRING>"
    #: no map column: Spark refuses hash() over maps (DATATYPE_MISMATCH.HASH_MAP_TYPE) and maps cannot be grouping keys
)
PARTITIONS = (1, 2, 7, 200)
#: columns the bulk hash leaves to the row-by-row one (decimals over 18 digits, arrays)
NOT_IN_BULK = {"big", "arr"}


def generated(n: int) -> list[tuple[Any, ...]]:
    rnd = random.Random(20261126)
    texts = ["", "a", "ab", "abc", "abcd", "abcde", "k0", "é", "日本語", "\U0001f600x", "a" * 37]
    floats = [0.0, -0.0, 1.5, -2.25, math.nan, math.inf, -math.inf, 3.4e38, 1e-45]
    rows = []
    for i in range(n):

        def maybe(v: Any) -> Any:
            return None if rnd.random() < 0.1 else v

        ts = dt.datetime(
            1960 + rnd.randrange(120), 1 + rnd.randrange(12), 1 + rnd.randrange(28), tzinfo=dt.timezone.utc
        )
        ts = ts + dt.timedelta(microseconds=rnd.randrange(10**12))
        rows.append(
            (
                maybe(rnd.random() < 0.5),
                maybe(rnd.randrange(-128, 128)),
                maybe(rnd.randrange(-(2**15), 2**15)),
                maybe(rnd.randrange(-(2**31), 2**31)),
                maybe(rnd.randrange(-(2**63), 2**63)),
                maybe(rnd.choice(floats) if i % 3 else rnd.uniform(-1e6, 1e6)),
                maybe(rnd.choice(floats) if i % 3 else rnd.uniform(-1e12, 1e12)),
                maybe(rnd.choice(texts) + str(rnd.randrange(10 ** rnd.randrange(1, 12)))),
                maybe(bytes(rnd.randrange(256) for _ in range(rnd.randrange(0, 11)))),
                maybe(decimal.Decimal(rnd.randrange(-(10**10) + 1, 10**10)).scaleb(-2)),
                maybe(decimal.Decimal(rnd.randrange(-(10**30) + 1, 10**30)).scaleb(-5)),
                maybe(dt.date(1900, 1, 1) + dt.timedelta(days=rnd.randrange(80_000))),
                maybe(ts),
                maybe(ts.replace(tzinfo=None)),
                maybe({"start": ts, "n": maybe(rnd.randrange(100))}),
                maybe([rnd.choice(texts) for _ in range(rnd.randrange(4))]),
            )
        )
    return rows


def test_hash_and_partition_agree_with_spark(spark: Any) -> None:
    from pyspark.sql import functions as F

    schema = parse_ddl(DDL, "DDL")
    rows = generated(400)
    df = spark.createDataFrame([(i, *r) for i, r in enumerate(rows)], f"idx INT, {DDL}")
    names = list(schema.names)
    exprs = [F.col("idx"), F.hash(*[F.col(c) for c in names]).alias("all")]
    exprs += [F.hash(F.col(c)).alias(f"h_{c}") for c in names]
    exprs += [F.expr(f"pmod(hash({', '.join(names)}), {n})").alias(f"p{n}") for n in PARTITIONS]
    got = df.select(*exprs).collect()
    assert len(got) == len(rows)
    mismatches = []
    for r in got:
        values = rows[r["idx"]]
        for i, f in enumerate(schema.fields):
            mine = sparkhash.hash_value(values[i], f.data_type, sparkhash.SEED)
            if mine != r[f"h_{f.name}"]:
                mismatches.append((f.name, values[i], mine, r[f"h_{f.name}"]))
        assert sparkhash.hash_row(values, schema) == r["all"], values
        for n in PARTITIONS:
            assert sparkhash.partition_of(values, schema, n) == r[f"p{n}"]
    assert not mismatches, mismatches[:5]
    # the bulk hash (numpy, what `state repartition` places keys with) against Spark's, per column
    by_idx = {r["idx"]: r for r in got}
    for i, f in enumerate(schema.fields):
        bulk = sparkhash.hash_columns([arrow_column(f.data_type, [r[i] for r in rows])], StructType([f]))
        if f.name in NOT_IN_BULK:
            assert bulk is None, f.name
            continue
        assert bulk is not None, f.name
        assert [int(h) for h in bulk] == [by_idx[j][f"h_{f.name}"] for j in range(len(rows))], f.name
