"""Writing-release inference on real checkpoints of every recorded Spark release.

The expected release of each fixture is the PySpark release that generated it (tests/fixtures/spark-<version>/ by
generate_spark35.py, tests/fixtures/state35/ by state35/generate.py with 3.5.9), not anything ckptfix computes.
Where the files cannot tell two releases apart the inference must say so with a range that still contains the
generating release: 4.0 and 4.1 record the same conf keys, and only 4.1's default JSON checksum sidecars of
state files tell 4.1 (4.1.4 wrote them in its stateful fixtures).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ckptfix.audit import versions as V
from ckptfix.checkpoint import Checkpoint
from tests.audit_upgrade.support import RECORDED, SCENARIOS, STATE35, recorded, state35

STATEFUL = {"agg_hdfs", "agg_rocksdb_cl"}


def expected_range(version: str, scenario: str) -> tuple[str | None, str | None]:
    label = RECORDED[version]
    if label == "3.5":
        return None, "3.5"  # nothing in a 3.5 file bounds it from below
    if label == "4.0" or (label == "4.1" and scenario not in STATEFUL):
        return "4.0", "4.1"
    return label, label


@pytest.mark.parametrize("version", sorted(RECORDED))
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_recorded_fixture_writer(version: str, scenario: str, tmp_path: Path) -> None:
    info = V.infer(Checkpoint.open(str(recorded(version, scenario, tmp_path))))
    label = RECORDED[version]
    assert info.latest is not None and info.first is not None
    assert info.latest.contains(label) and info.first.contains(label), info.text
    assert (info.latest.low, info.latest.high) == expected_range(version, scenario), info.latest
    assert not info.latest.older_than(label) and not info.latest.newer_than(label)


@pytest.mark.parametrize("scenario", STATE35)
def test_state35_fixture_writer(scenario: str, tmp_path: Path) -> None:
    info = V.infer(Checkpoint.open(str(state35(scenario, tmp_path))))
    assert info.latest is not None and (info.latest.low, info.latest.high) == (None, "3.5")
    assert info.text == "written by Spark <= 3.5"
    assert info.features == ()  # 3.5 writes no operator metadata, no checksum sidecars, no v2 logs


def test_4x_only_files_are_named(tmp_path: Path) -> None:
    info = V.infer(Checkpoint.open(str(recorded("4.1.4", "agg_rocksdb_cl", tmp_path))))
    keys = {f.key: f for f in info.features}
    assert set(keys) == {"opmeta-v1", "checksum-json"}
    assert keys["opmeta-v1"].path.endswith("state/0/_metadata/metadata")
    assert keys["checksum-json"].path.endswith(".crc") and keys["checksum-json"].since == "4.1"
    assert info.text == "written by Spark 4.1 (its oldest offset file, batch 0, by Spark >= 4.0, <= 4.1)"


KEYS_40 = V.KEYS_35 | {"spark.sql.streaming.stateStore.encodingFormat"}
KEYS_42 = KEYS_40 | {k for k, v in V.CONF_ADDED.items() if v == "4.2"}
KEYS_43 = KEYS_42 | {k for k, v in V.CONF_ADDED.items() if v == "4.3"}


@pytest.mark.parametrize(
    ("keys", "low", "high", "text"),
    [
        (V.KEYS_35, None, "3.5", "Spark <= 3.5"),
        (KEYS_40, "4.0", "4.1", "Spark >= 4.0, <= 4.1"),
        (KEYS_42, "4.2", "4.2", "Spark 4.2"),
        (KEYS_43, "4.3", None, "Spark >= 4.3"),
        (KEYS_43 | {"spark.sql.streaming.someFutureConf"}, "4.3", None, "Spark >= 4.3"),
    ],
)
def test_range_from_conf(keys: frozenset[str], low: str | None, high: str | None, text: str) -> None:
    r = V.range_from_conf(dict.fromkeys(keys, "x"))
    assert (r.low, r.high, r.text) == (low, high, text)


@pytest.mark.parametrize(
    ("version", "keys"), [("3.5.9", V.KEYS_35), ("4.0.5", KEYS_40), ("4.1.4", KEYS_40), ("4.2.1", KEYS_42)]
)
def test_key_sets_are_the_real_files(version: str, keys: frozenset[str], tmp_path: Path) -> None:
    """The key sets the inference relies on are exactly what each release wrote (4.3.0: the live test)."""
    ck = Checkpoint.open(str(recorded(version, "agg_hdfs", tmp_path)))
    for b in sorted(ck.offsets.files):
        meta = ck.offset(b).metadata
        assert meta is not None and set(meta.conf) == keys, (version, b)
