"""A missing delta or changelog in the chain of the restart's state version: the finding's fix names what can be
done for this store (the changes the file held are in no other file, so no rebuild brings the version back) and
the batch to roll back to, the newest one whose state version still loads; that rollback is then allowed and
leaves a checkpoint that audits as restartable. On Spark's own files: the shipped RocksDB sample (PySpark 4.3) and
the version matrix's HDFS aggregation (tests/fixtures/matrix/record.py)."""

from __future__ import annotations

import re
import shutil
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ckptfix.audit import audit
from ckptfix.cli.main import app

ROOT = Path(__file__).resolve().parents[2]


def _rocksdb(tmp_path: Path) -> tuple[Path, str, int]:
    ckpt = tmp_path / "ckpt"
    shutil.copytree(ROOT / "samples" / "rocksdb-changelog", ckpt)
    (ckpt / "state/0/1/12.zip").unlink()  # version 12 = 9.zip + changelogs 10..12
    (ckpt / "state/0/1/11.changelog").unlink()
    return ckpt, "state/0/1/11.changelog", 9  # versions 1..10 still load: batch 9


def _hdfs(tmp_path: Path) -> tuple[Path, str, int]:
    with tarfile.open(ROOT / "tests/fixtures/matrix/4.3.0/agg_hdfs.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    ckpt = tmp_path / "ckpt"
    (ckpt / "state/0/0/3.snapshot").unlink()  # version 3 = deltas 1..3
    (ckpt / "state/0/0/2.delta").unlink()
    return ckpt, "state/0/0/2.delta", 0  # only version 1 loads: batch 0


@pytest.mark.parametrize("make", [_rocksdb, _hdfs], ids=["rocksdb", "hdfs"])
def test_the_fix_names_the_batch_that_still_loads_and_that_rollback_restarts(
    make: Callable[[Path], tuple[Path, str, int]], tmp_path: Path
) -> None:
    ckpt, missing, batch = make(tmp_path)
    report = audit(str(ckpt))
    assert report.verdict.restarts is False
    finding = next(f for f in report.findings if f.rule_id == "STATE-CHAIN-INCOMPLETE")
    assert finding.fix.startswith(f"Restore {missing} from a backup")
    assert "rebuild" in finding.fix and "no rebuild brings back" in finding.fix
    command = f"ckptfix rollback {ckpt} --to-batch {batch}"
    assert f"`{command}`" in finding.fix
    assert re.search(rf"Spark then runs batches {batch + 1}\.\. again from the source", finding.fix)
    result = CliRunner().invoke(app, [*command.split()[1:], "--apply", "--idle-seconds", "0"])
    assert result.exit_code == 0, result.output
    assert audit(str(ckpt)).verdict.restarts is True


def test_nothing_older_loads(tmp_path: Path) -> None:
    ckpt, _, _ = _hdfs(tmp_path)
    (ckpt / "state/0/0/1.delta").unlink()
    finding = next(f for f in audit(str(ckpt)).findings if f.rule_id == "STATE-CHAIN-INCOMPLETE")
    assert "roll back" not in finding.fix and finding.fix.endswith("only a new checkpoint.")
