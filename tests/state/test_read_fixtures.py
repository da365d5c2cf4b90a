"""Reading the committed real-Spark 4.3 state fixtures (tests/fixtures/formats, see generate.py
there): every provider and checkpoint format at every version, against the counts the
generator's input implies (written down here, not computed by ckptfix)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ckptfix.errors import FormatError, UsageError
from ckptfix.formats.unsaferow import StructType, parse_schema
from ckptfix.state.read import read_changes, read_state

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "formats"

# groupBy(k).count() over batches [k1 k7 k7] [k7 k2] [k7 k1 k7] [k3 k7]
COUNTS = {
    1: {"k1": 1, "k7": 2},
    2: {"k1": 1, "k7": 3, "k2": 1},
    3: {"k1": 2, "k7": 5, "k2": 1},
    4: {"k1": 2, "k7": 6, "k2": 1, "k3": 1},
}
# the ListState "lst": one element per row, k1's list cleared in batch 2
LISTS = {
    3: {"k7": 5, "k2": 1},
    4: {"k7": 6, "k2": 1, "k3": 1},
}


def _struct(name: str, type_: str) -> StructType:
    return parse_schema({"type": "struct", "fields": [{"name": name, "type": type_, "nullable": True, "metadata": {}}]})


# the RocksDB fixtures carry no schema file: the schemas are given, as --key-schema does
GIVEN = {"key_schema": _struct("k", "string"), "value_schema": _struct("count", "long")}


def counts(rows: list[dict]) -> dict[str, int]:
    out = {r["key"]["k"]: next(iter(r["value"].values())) for r in rows}
    assert len(out) == len(rows), "a key appears twice"
    return out


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_hdfs_every_version(version: int) -> None:
    read = read_state(str(FIXTURES / "hdfs"), version=version)
    assert counts(list(read)) == COUNTS[version]
    assert read.batch == version - 1
    # 2.snapshot and 4.snapshot exist: versions 2 and 4 read them alone
    assert (
        read.chains[0]
        == {1: "the empty state + 1.delta", 2: "2.snapshot", 3: "2.snapshot + 3.delta", 4: "4.snapshot"}[version]
    )


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_rocksdb_changelog_every_version(version: int) -> None:
    read = read_state(str(FIXTURES / "rocksdb"), version=version, **GIVEN)
    assert counts(list(read)) == COUNTS[version]
    assert read.chains[0] == (
        "4.zip"
        if version == 4
        else f"the empty state + changelogs 1..{version}"
        if version > 1
        else "the empty state + 1.changelog"
    )


def test_from_snapshot_ignores_newer_snapshots() -> None:
    read = read_state(str(FIXTURES / "hdfs"), version=4, from_snapshot=1)  # snapshot of version 2
    assert counts(list(read)) == COUNTS[4]
    assert read.chains[0] == "2.snapshot + deltas 3..4"


def test_from_snapshot_that_does_not_exist() -> None:
    with pytest.raises(FormatError) as info:
        list(read_state(str(FIXTURES / "hdfs"), version=4, from_snapshot=0))
    assert info.value.path.endswith("state/0/0/1.snapshot") and info.value.kind == "missing-file"


def test_checkpoint_v2_follows_the_files_present() -> None:
    # no commit log in this fixture: the unique ids come from the files themselves
    read = read_state(str(FIXTURES / "rocksdb_v2"), version=2, **GIVEN)
    assert counts(list(read)) == COUNTS[2]


@pytest.mark.parametrize("version", [3, 4])
def test_transform_with_state_value_and_list(version: int) -> None:
    cnt = read_state(str(FIXTURES / "tws"), version=version, state_var="cnt")
    assert counts(list(cnt)) == COUNTS[version]
    lst = list(read_state(str(FIXTURES / "tws"), version=version, state_var="lst"))
    sizes: dict[str, int] = {}
    for row in lst:
        assert row["list_element"] == {"v": row["key"]["k"]}
        sizes[row["key"]["k"]] = sizes.get(row["key"]["k"], 0) + 1
    assert sizes == LISTS[version]
    nested = list(read_state(str(FIXTURES / "tws"), version=version, state_var="lst", flatten=False))
    assert {r["key"]["k"]: len(r["list_value"]) for r in nested} == LISTS[version]


def test_transform_with_state_needs_a_state_variable() -> None:
    with pytest.raises(UsageError, match="cnt, lst"):
        read_state(str(FIXTURES / "tws"), version=4)


def test_change_feed_hdfs() -> None:
    changes = list(read_changes(str(FIXTURES / "hdfs"), from_batch=2, to_batch=3))
    got = sorted((c["batch_id"], c["change_type"], c["key"]["k"], c["value"]["count"]) for c in changes)
    assert got == [(2, "update", "k1", 2), (2, "update", "k7", 5), (3, "update", "k3", 1), (3, "update", "k7", 6)]


def test_format_v2_with_the_lineages_zip_gone_reads_as_spark_loads_it(tmp_path: Path) -> None:
    """The catalogue's ``v2_newest_zip_deleted`` (checkpoint format v2, partition 0's newest zip deleted): Spark
    4.2 and 4.3 restart it, reaching an older zip through the lineages of older changelogs (recorded in
    tests/fixtures/spark-4.3.0/outcomes.json), and the audit says so; `state read` refused it (new-user trial). It
    now reads the rows the undamaged checkpoint holds."""
    import json
    import tarfile

    from tests.spark.damage import CASES

    root = Path(__file__).resolve().parents[1] / "fixtures" / "spark-4.3.0"
    assert json.loads((root / "outcomes.json").read_text())["v2_newest_zip_deleted"]["ok"] is True
    rows = {}
    for name in ("intact", "damaged"):
        with tarfile.open(root / "agg_v2.tar.gz") as tar:
            tar.extractall(tmp_path / name, filter="data")
        if name == "damaged":
            CASES["v2_newest_zip_deleted"].apply(tmp_path / name / "ckpt")
        read = read_state(str(tmp_path / name / "ckpt"))
        rows[name] = sorted(str(r) for r in read.rows)
    assert rows["damaged"] == rows["intact"] and rows["intact"]
