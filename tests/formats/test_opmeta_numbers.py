"""Operator metadata with numbers no Spark writes (found by the battery, bench/battery: 77 of 102,337 mutations
ended in ``OverflowError: cannot convert float infinity to integer`` in opmeta.parse, i.e. exit 3 in every
command). The file is Spark 4.3.0's own (tests/fixtures/matrix/4.3.0/agg_hdfs.tar.gz); the values are what
json4s extracts into OperatorInfoV1.operatorId (Long) and StateStoreMetadataV1.numPartitions /
numColsPrefixKey (Int): Double.longValue / intValue saturate and truncate, BigInt.longValue / intValue keep the
low bits, a string or boolean is no usable value."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from ckptfix.errors import FormatError
from ckptfix.formats import opmeta

TARBALL = Path(__file__).resolve().parents[1] / "fixtures" / "matrix" / "4.3.0" / "agg_hdfs.tar.gz"


@pytest.fixture(scope="module")
def real() -> bytes:
    with tarfile.open(TARBALL) as tar:
        member = tar.extractfile("ckpt/state/0/_metadata/metadata")
        assert member is not None
        data = member.read()
    assert b'"numPartitions":2' in data and b'"operatorId":0' in data
    return data


ACCEPTED = [  # (field text in the file, new text, attribute, value json4s gives)
    ('"numPartitions":2', '"numPartitions":1e999', "num_partitions", 2**31 - 1),
    ('"numPartitions":2', '"numPartitions":-1e999', "num_partitions", -(2**31)),
    ('"numPartitions":2', '"numPartitions":2.9', "num_partitions", 2),
    ('"numPartitions":2', f'"numPartitions":{2**32 + 2}', "num_partitions", 2),
    ('"numColsPrefixKey":0', '"numColsPrefixKey":1e999', "num_cols_prefix_key", 2**31 - 1),
    ('"operatorId":0', '"operatorId":1e999', "operator_id", 2**63 - 1),
    ('"operatorId":0', f'"operatorId":{2**64 + 7}', "operator_id", 7),
]


@pytest.mark.parametrize(("old", "new", "attr", "want"), ACCEPTED)
def test_numbers_read_as_json4s_reads_them(real: bytes, old: str, new: str, attr: str, want: int) -> None:
    meta = opmeta.parse(real.replace(old.encode(), new.encode(), 1), "state/0/_metadata/metadata")
    got = meta.operator_id if attr == "operator_id" else getattr(meta.stores[0], attr)
    assert got == want


@pytest.mark.parametrize(
    "new",
    ['"numPartitions":"2"', '"numPartitions":true', '"numPartitions":null', '"numPartitions":[2]'],
)
def test_no_usable_value_is_a_format_error(real: bytes, new: str) -> None:
    with pytest.raises(FormatError, match="state/0/_metadata/metadata: at byte 3: expected operatorInfo"):
        opmeta.parse(real.replace(b'"numPartitions":2', new.encode(), 1), "state/0/_metadata/metadata")
