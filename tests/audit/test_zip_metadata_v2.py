"""RocksDB zips whose metadata says ``v2``: Spark 4.0 writes ``v<checkpointFormatVersion>`` (its
RocksDBCheckpointMetadata.VERSION comes from the session's conf) and reads only that; 4.1+ write and read only
``v1`` (``javap`` of 4.1.4-4.3.0). A checkpoint Spark 4.0.5 wrote with state checkpoint format v2
(spark-4.0.5/agg_v2.tar.gz) restarted by 4.0.5-4.3.0, recorded by tests/fixtures/record_zip_v2_cross.py in
spark-4.0.5/agg_v2.cross.json: 4.1.4 fails (CANNOT_READ_CHECKPOINT, Expected v1, but found v2), 4.2.1 and 4.3.0
load the state another way (auto snapshot repair) with the right aggregates, 4.0.5 reads it. ckptfix used to call
every such zip unreadable (a false "will fail" on 4.0, 4.2 and 4.3)."""

from __future__ import annotations

import json
import tarfile
import zipfile
from pathlib import Path

import pytest

from ckptfix.audit import audit
from ckptfix.formats import rocksdbzip
from tests.support.agreement import assert_verdict_agrees

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "spark-4.0.5"
RECORDED = json.loads((FIXTURE / "agg_v2.cross.json").read_text())


def extract(dest: Path) -> Path:
    with tarfile.open(FIXTURE / "agg_v2.tar.gz") as tar:
        tar.extractall(dest, filter="data")
    return dest / "ckpt"


def test_the_v2_header_parses_and_is_written_back(tmp_path: Path) -> None:
    ckpt = extract(tmp_path)
    zips = sorted(ckpt.glob("state/0/*/*_*.zip"))
    assert zips
    for z in zips:
        with zipfile.ZipFile(z) as zf:
            raw = zf.read("metadata")
        assert raw.startswith(b"v2\n")
        meta = rocksdbzip.parse_metadata(raw, str(z))
        assert meta.version == 2 and meta.sst_files
        assert rocksdbzip.dump_metadata(meta).startswith(b"v2\n")


def test_every_spark_version_was_recorded() -> None:
    assert {v.rsplit(".", 1)[0] for v in RECORDED} == {"4.0", "4.1", "4.2", "4.3"}, sorted(RECORDED)


@pytest.mark.parametrize("version", sorted(RECORDED))
def test_verdict_matches_the_recorded_restart(tmp_path: Path, version: str) -> None:
    rec = RECORDED[version]
    target = version.rsplit(".", 1)[0]
    report = audit(str(extract(tmp_path)), target)
    assert_verdict_agrees(report, rec["ok"], rec["text"], rec["correct"], f"\nSpark {version} on the 4.0.5 base")
    if rec["ok"] and target != "4.0":  # 4.2+ load around the zip: said, as a warning
        assert any("metadata is v2" in f.message and f.severity == "warning" for f in report.findings)
