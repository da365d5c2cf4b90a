"""``audit --against`` input errors that need no Spark: one line, exit 2, JSON in JSON mode, nothing written."""

from __future__ import annotations

import json
import sys
import tarfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ckptfix.cli.main import app

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "spark-4.2.1" / "agg_hdfs.tar.gz"


@pytest.fixture
def ckpt(tmp_path: Path) -> Path:
    with tarfile.open(FIXTURE) as tar:
        try:
            tar.extractall(tmp_path, filter="data")
        except TypeError:
            tar.extractall(tmp_path)  # noqa: S202 - our own fixture
    return tmp_path / "ckpt"


def snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    return {str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime_ns) for p in root.rglob("*") if p.is_file()}


def one_error(args: list[str]) -> tuple[str, dict]:  # type: ignore[type-arg]
    runner = CliRunner()
    res = runner.invoke(app, args)
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("ckptfix: error: "), res.stderr
    res_json = runner.invoke(app, [*args, "-f", "json"])
    assert res_json.exit_code == 2
    return lines[0], json.loads(res_json.stdout)


@pytest.mark.parametrize("spec", ["no_colon", "mod:", ":fn", "mod:not-an-identifier"])
def test_malformed_spec(ckpt: Path, spec: str) -> None:
    before = snapshot(ckpt)
    line, doc = one_error(["audit", str(ckpt), "--against", spec, "-q"])
    assert "expected MODULE:FUNCTION" in line
    assert doc["error"]["kind"] == "QueryModuleError"
    assert snapshot(ckpt) == before


def test_bad_conf_pair(ckpt: Path) -> None:
    line, _ = one_error(["audit", str(ckpt), "--against", "m:f", "--conf", "novalue", "-q"])
    assert "--conf 'novalue': expected KEY=VALUE" in line


def test_missing_module_file(ckpt: Path, tmp_path: Path) -> None:
    line, _ = one_error(["audit", str(ckpt), "--against", f"{tmp_path}/nope.py:build", "-q"])
    assert "nope.py, found none" in line


def test_without_pyspark_says_which_extra(ckpt: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = snapshot(ckpt)
    for name in [m for m in sys.modules if m == "pyspark" or m.startswith("pyspark.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "pyspark", None)  # import pyspark -> ImportError
    line, doc = one_error(["audit", str(ckpt), "--against", "tests.audit_query.queries.agg:same", "-q"])
    assert "pip install -e '" in line and line.endswith("[spark]'")
    assert doc["error"]["kind"] == "MissingExtra"
    assert snapshot(ckpt) == before


def test_the_against_query_is_planned_with_the_confs_a_restart_plans_with(ckpt: Path) -> None:
    """Hunt 12, F1: a restart plans with the offset log's confs and, for a key Spark restores that the log lacks,
    Spark's legacy default (it wins over the session's). The 4.2.1 checkpoint records no
    statefulOperator.alwaysNullableOutput.enabled (4.3's): it plans with false, as Spark 4.3 restarts it."""
    from ckptfix.checkpoint import Checkpoint

    opened = Checkpoint.open(str(ckpt))
    recorded, restored = opened.recorded_conf(), opened.restored_conf()
    key = "spark.sql.streaming.statefulOperator.alwaysNullableOutput.enabled"
    assert key not in recorded and restored[key] == "false"
    assert {k: restored[k] for k in recorded} == recorded  # what the log records wins
    assert Checkpoint.open(str(ckpt)).restored_conf() == restored
