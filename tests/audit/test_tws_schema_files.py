"""transformWithState reads its operator metadata (v2) and the schema files (v3) it names at the first batch of a
restart. Damage hunt of 2026-11-27 on PySpark 4.3 (transformWithStateInPandas, RocksDB): with
state/0/_metadata deleted Spark failed with ``[STDS_FAILED_TO_READ_OPERATOR_METADATA] Failed to read the operator
metadata``; with the schema file deleted, ``FileNotFoundException: File file:<path> does not exist``; cut short,
``java.io.EOFException`` (no message). Other operators rewrite a missing operator metadata file and restart.

On the version matrix's transformWithState checkpoint written by PySpark 4.3.0 (tests/fixtures/matrix/record.py),
moved with ``migrate relocate`` first so that its metadata names schema files inside the checkpoint.
"""

from __future__ import annotations

import shutil
import tarfile
from pathlib import Path

from typer.testing import CliRunner

from ckptfix.audit import audit
from ckptfix.cli.main import app

MATRIX = Path(__file__).resolve().parents[1] / "fixtures" / "matrix" / "4.3.0"


def relocated(tmp_path: Path, scenario: str = "tws_pandas") -> Path:
    with tarfile.open(MATRIX / f"{scenario}.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    moved = tmp_path / "moved"
    result = CliRunner().invoke(app, ["migrate", "relocate", str(tmp_path / "ckpt"), str(moved), "--apply", "-q"])
    assert result.exit_code == 0, result.output
    return moved


def schema_file(ckpt: Path) -> Path:
    files = [p for p in (ckpt / "state/0/_stateSchema").rglob("*") if p.is_file() and not p.name.startswith(".")]
    assert len(files) == 1, files
    return files[0]


def test_the_relocated_checkpoint_restarts(tmp_path: Path) -> None:
    assert audit(str(relocated(tmp_path))).verdict.restarts is True


def test_missing_operator_metadata_fails_for_transform_with_state(tmp_path: Path) -> None:
    ckpt = relocated(tmp_path)
    shutil.rmtree(ckpt / "state/0/_metadata")
    report = audit(str(ckpt))
    assert report.verdict.restarts is False
    assert report.verdict.blocking_rule == "STATE-TWS-METADATA-MISSING"
    assert report.verdict.error_class == "STDS_FAILED_TO_READ_OPERATOR_METADATA"


def test_missing_operator_metadata_of_an_aggregation_is_fine(tmp_path: Path) -> None:
    with tarfile.open(MATRIX / "agg_hdfs.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    ckpt = tmp_path / "ckpt"
    shutil.rmtree(ckpt / "state/0/_metadata")
    assert audit(str(ckpt)).verdict.restarts is True


def test_a_missing_schema_file_fails_naming_it(tmp_path: Path) -> None:
    ckpt = relocated(tmp_path)
    path = schema_file(ckpt)
    path.unlink()
    (path.parent / f".{path.name}.crc").unlink(missing_ok=True)
    report = audit(str(ckpt))
    assert report.verdict.restarts is False
    assert report.verdict.blocking_rule == "STATE-SCHEMA-FILE-UNREADABLE"
    assert report.verdict.exception == "java.io.FileNotFoundException"
    assert report.verdict.message == f"{path.relative_to(ckpt)} does not exist"


def test_a_truncated_schema_file_fails_with_eof(tmp_path: Path) -> None:
    ckpt = relocated(tmp_path)
    path = schema_file(ckpt)
    path.write_bytes(path.read_bytes()[:100])
    (path.parent / f".{path.name}.crc").unlink(missing_ok=True)
    report = audit(str(ckpt))
    assert report.verdict.restarts is False
    assert report.verdict.blocking_rule == "STATE-SCHEMA-FILE-UNREADABLE"
    assert report.verdict.exception == "java.io.EOFException"
    assert report.verdict.error is not None and report.verdict.error.headline == "EOFException"


def test_bytes_after_the_schemas_are_not_read(tmp_path: Path) -> None:
    """Spark's SchemaV3Reader reads the column families the file counts and stops (javap of 4.3.0), as its v1/v2
    readers do (damage case schema_garbage_appended, recorded): what follows is a warning, not a failure."""
    ckpt = relocated(tmp_path)
    path = schema_file(ckpt)
    path.write_bytes(path.read_bytes() + b"\x00\x07garbage")
    (path.parent / f".{path.name}.crc").unlink(missing_ok=True)
    report = audit(str(ckpt))
    assert report.verdict.restarts is True
    (finding,) = [f for f in report.findings if f.rule_id == "STATE-SCHEMA-FILE-UNREADABLE"]
    assert finding.severity == "warning" and "9 more bytes" in finding.message
