"""One answer to "which provider" (ckptfix.stores.provider) for audit, state and migrate (issue 15): Spark's
two classes by full or simple name, the session default when the offset log records none (the files' layout
then), and any other class marked custom, which the audit reports as undecided instead of checking the files
as if Spark's HDFS provider had written them."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

from ckptfix.audit import audit
from ckptfix.checkpoint import Checkpoint
from ckptfix.migrate.provider import provider_of
from ckptfix.state.read import read_state
from ckptfix.stores import provider as providers

MATRIX = Path(__file__).resolve().parents[1] / "fixtures" / "matrix"
HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
ROCKS = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


def unpack(scenario: str, dest: Path) -> Path:
    with tarfile.open(MATRIX / "4.3.0" / f"{scenario}.tar.gz") as tar:
        tar.extractall(dest, filter="data")
    return dest / "ckpt"


def test_spark_classes_by_full_and_simple_name(tmp_path: Path) -> None:
    op = Checkpoint.open(str(unpack("agg_rocksdb", tmp_path))).state.operators[0]
    assert providers.of({providers.PROVIDER_CONF: ROCKS}, op) == providers.Provider("rocksdb", ROCKS)
    assert providers.of({providers.PROVIDER_CONF: "RocksDBStateStoreProvider"}).kind == "rocksdb"
    assert providers.of({providers.PROVIDER_CONF: HDFS}).kind == "hdfs"
    # not recorded: Spark uses the session's value; the files say which one wrote them
    unrecorded = providers.of({}, op)
    assert (unrecorded.kind, unrecorded.recorded, unrecorded.custom) == ("rocksdb", False, False)
    assert providers.of({}).kind == "hdfs"  # nothing to go by: Spark's default


def test_custom_class_is_custom_everywhere(tmp_path: Path) -> None:
    ckpt = unpack("agg_hdfs", tmp_path)
    custom = "com.example.state.MyProvider"
    for f in sorted((ckpt / "offsets").iterdir()):
        if f.name.startswith("."):
            f.unlink()  # the Hadoop sidecar of an edited file
            continue
        lines = f.read_text().split("\n")
        meta = json.loads(lines[1])
        meta["conf"][providers.PROVIDER_CONF] = custom
        lines[1] = json.dumps(meta)
        f.write_text("\n".join(lines))
    op = Checkpoint.open(str(ckpt)).state.operators[0]
    found = providers.of({providers.PROVIDER_CONF: custom}, op)
    assert (found.kind, found.custom) == ("hdfs", True)  # the layout its files show
    assert provider_of({providers.PROVIDER_CONF: custom}) is None  # migrate refuses to convert it
    report = audit(str(ckpt), "4.3")
    rules = {f.rule_id: f for f in report.findings}
    assert "STATE-PROVIDER-CUSTOM" in rules and custom in rules["STATE-PROVIDER-CUSTOM"].message
    assert report.verdict.restarts is None  # ckptfix cannot vouch for a class it does not know
    assert list(read_state(str(ckpt)))  # the rows are still readable in the layout the files show
