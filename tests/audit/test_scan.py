"""``ckptfix scan``: every checkpoint below a prefix, audited, each against what real Spark did with it.

The trees are built from checkpoints real Spark wrote: the version matrix (tests/fixtures/matrix, each tarball
restarted by Spark 4.3.0 when recorded) and the samples. No Spark needed."""

from __future__ import annotations

import json
import os
import shutil
import tarfile
from pathlib import Path
from typing import Any

import pytest

import ckptfix
from ckptfix import layout
from ckptfix.checkpoint import Checkpoint
from tests.audit.test_version_matrix import MATRIX_DIR, OUTCOMES, _work_root
from tests.spark.matrix_queries import MATRIX
from tests.support.agreement import assert_verdict_agrees
from tests.support.cli import run_cli
from tests.unit.realckpt import ROOT

SAMPLES = ROOT / "samples"
RESTARTER = "4.3.0"


def _matrix_tree(root: Path) -> dict[str, tuple[str, str, dict[str, Any]]]:
    """Every checkpoint of the matrix that Spark 4.3.0 restarted (or failed to) when recorded, except file-sink
    ones (their audit wants --sink), each at ``root/<writer>/<scenario>/ckpt`` beside its input and output
    directories, as record.py left them: ckpt url -> (writer, scenario, Spark's outcome)."""
    out = {}
    for writer, scenarios in OUTCOMES.items():
        for scenario, restarts in scenarios.items():
            rec = restarts.get(RESTARTER)
            if rec is None or "skipped" in rec or MATRIX[scenario].sink == "file":
                continue
            where = root / writer / scenario
            with tarfile.open(MATRIX_DIR / writer / f"{scenario}.tar.gz") as tar:
                tar.extractall(where, filter="data")
            out[str(where / "ckpt")] = (writer, scenario, rec)
    return out


def test_scan_finds_every_checkpoint_and_agrees_with_spark_on_each(tmp_path: Path) -> None:
    expected = _matrix_tree(tmp_path)
    assert len(expected) >= 40
    assert {r["ok"] for _, _, r in expected.values()} == {True, False}
    result = ckptfix.scan(tmp_path, target_spark="4.3")
    assert [c.url for c in result.checkpoints] == sorted(expected), "found other directories than the checkpoints"
    for c in result.checkpoints:
        writer, scenario, rec = expected[c.url]
        assert c.report is not None, c.error
        text = rec["text"].replace("<work>", _work_root(Path(c.url), writer, scenario))
        said = "restarted" if rec["ok"] else "FAILED"
        context = f"\n{scenario} written by Spark {writer}, restarted by Spark {RESTARTER}: {said}"
        assert_verdict_agrees(c.report, rec["ok"], text, rec.get("rows_ok"), context)
        assert c.status == ("restarts" if rec["ok"] else "fails")
    failing = sum(not r["ok"] for _, _, r in expected.values())
    assert result.counts() == {
        "restarts": len(expected) - failing,
        "wrong": 0,
        "fails": failing,
        "unknown": 0,
        "unreadable": 0,
    }
    assert result.fails("error")


def _two_teams(root: Path) -> tuple[Path, Path]:
    """The async sample (Spark 4.3 fails: batch 30 doesn't exist) and the RocksDB changelog sample (restarts), at
    different depths, beside directories that are not checkpoints."""
    broken = root / "team-a" / "orders"
    healthy = root / "team-b" / "_checkpoints" / "clicks"
    shutil.copytree(SAMPLES / "async-sparse", broken)
    shutil.copytree(SAMPLES / "rocksdb-changelog", healthy)
    # a table partitioned by a column named state: one mark among other names, not a checkpoint
    (root / "lake" / "events" / "state").mkdir(parents=True)
    (root / "lake" / "events" / "part-0.parquet").write_bytes(b"PAR1")
    (root / "empty").mkdir()
    return broken, healthy


def test_the_cli_prints_a_line_per_checkpoint_and_exits_by_the_worst(tmp_path: Path) -> None:
    broken, healthy = _two_teams(tmp_path)
    proc = run_cli("scan", str(tmp_path), "--target-spark", "4.3", env={**os.environ, "COLUMNS": "200"})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == f"Spark 4.3: 2 checkpoints under {tmp_path}: 1 will fail, 0 cannot tell, 1 will restart"
    said = "IllegalStateException: batch 30 doesn't exist (LOG-ASYNC-GAP); 1 error"
    assert lines[1].split() == ["FAILS", str(broken), *said.split(" ")]
    assert lines[2].split() == ["OK", str(healthy)]
    assert lines[3] == f"the findings of one, in full: ckptfix audit {broken} --target-spark 4.3"
    # the healthy one alone passes; --ignore accepts a known finding, which stays on its line
    assert run_cli("scan", str(healthy.parent)).returncode == 0
    ignored = run_cli("scan", str(tmp_path), "--ignore", "log-async-gap", env={**os.environ, "COLUMNS": "200"})
    assert ignored.returncode == 0, ignored.stdout + ignored.stderr
    assert "batch 30 doesn't exist (LOG-ASYNC-GAP); 1 ignored" in ignored.stdout


def test_json_holds_each_checkpoint_s_full_report(tmp_path: Path) -> None:
    broken, healthy = _two_teams(tmp_path)
    proc = run_cli("scan", str(tmp_path / "team-a"), str(tmp_path), "--format", "json", "--target-spark", "3.5")
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["roots"] == [str(tmp_path / "team-a"), str(tmp_path)]
    assert [c["checkpoint"] for c in doc["checkpoints"]] == [str(broken), str(healthy)], "overlapping roots: once"
    first = doc["checkpoints"][0]
    assert (first["status"], first["restarts"], first["blocking_rule"]) == ("fails", False, "LOG-ASYNC-GAP")
    single = json.loads(run_cli("audit", str(broken), "--format", "json", "--target-spark", "3.5").stdout)
    assert first["report"]["findings"] == single["findings"]
    assert first["report"]["verdict"] == single["verdict"]


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("empty", "expected one or more Structured Streaming checkpoints at or below it"),
        ("lake", "expected one or more Structured Streaming checkpoints at or below it"),
        ("nope", "no such file or directory"),
    ],
)
def test_a_location_without_checkpoints_is_one_line_and_exit_2(tmp_path: Path, where: str, message: str) -> None:
    _two_teams(tmp_path)
    proc = run_cli("scan", str(tmp_path / where))
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.startswith(f"ckptfix: error: {tmp_path / where}"), proc.stderr
    assert message in proc.stderr and len(proc.stderr.splitlines()) == 1, proc.stderr


def test_an_unknown_rule_to_ignore_is_refused(tmp_path: Path) -> None:
    _two_teams(tmp_path)
    proc = run_cli("scan", str(tmp_path), "--ignore", "LOG-NOPE")
    assert proc.returncode == 2
    assert proc.stderr.startswith("ckptfix: error: no audit rule LOG-NOPE (--ignore); rules starting the same way")


def test_audit_ignore_counts_apart_but_never_changes_the_verdict(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    shutil.copytree(SAMPLES / "async-sparse", ckpt)
    plain = run_cli("audit", str(ckpt), "--format", "json")
    ignored = run_cli("audit", str(ckpt), "--format", "json", "--ignore", "LOG-ASYNC-GAP")
    assert (plain.returncode, ignored.returncode) == (1, 0)
    a, b = json.loads(plain.stdout), json.loads(ignored.stdout)
    assert a["verdict"] == b["verdict"] and a["findings"] == b["findings"]
    assert (a["ignored_rules"], b["ignored_rules"]) == ([], ["LOG-ASYNC-GAP"])
    assert a["ckptfix_version"] == ckptfix.__version__
    text = run_cli("audit", str(ckpt), "--ignore", "LOG-ASYNC-GAP")
    assert text.returncode == 0 and "Spark 4.3 will fail" in text.stdout
    assert "info (1 ignored: LOG-ASYNC-GAP); read " in text.stderr, text.stderr


def test_the_rule_for_what_is_a_checkpoint() -> None:
    assert layout.looks_like_checkpoint({"metadata", "offsets", "commits", "state", "sources"})
    assert layout.looks_like_checkpoint({"metadata", "offsets", ".metadata.crc", "_ckptfix"})
    assert layout.looks_like_checkpoint({"metadata"}), "a query stopped before its first batch keeps only this"
    assert layout.looks_like_checkpoint({"metadata", ".metadata.crc"})
    assert not layout.looks_like_checkpoint({"state", "part-0.parquet"}), "a table partitioned by `state`"
    assert not layout.looks_like_checkpoint({"metadata", "data", "README"})
    assert not layout.looks_like_checkpoint({"input", "output"})


def test_nothing_below_a_checkpoint_is_searched(tmp_path: Path) -> None:
    ckpt = tmp_path / "q"
    shutil.copytree(SAMPLES / "rocksdb-changelog", ckpt)
    # a checkpoint-looking directory inside the checkpoint (a backup someone left) is part of it
    shutil.copytree(SAMPLES / "async-sparse", ckpt / "old-copy")
    assert [url for url, _ in Checkpoint.find(str(tmp_path))] == [str(ckpt)]
    assert [url for url, _ in Checkpoint.find(str(ckpt))] == [str(ckpt)]


@pytest.mark.s3
def test_scan_on_s3_agrees_with_the_local_scan(tmp_path: Path, s3_bucket: Any) -> None:
    broken, healthy = _two_teams(tmp_path)
    url = s3_bucket.upload_tree(tmp_path, "ckpts")
    remote = ckptfix.scan(url, storage_options=s3_bucket.storage_options, target_spark="4.3")
    local = ckptfix.scan(tmp_path, target_spark="4.3")
    assert [c.url for c in remote.checkpoints] == [f"{url}/team-a/orders", f"{url}/team-b/_checkpoints/clicks"]
    assert [c.status for c in remote.checkpoints] == [c.status for c in local.checkpoints] == ["fails", "restarts"]
    for r, l_ in zip(remote.checkpoints, local.checkpoints, strict=True):
        assert r.report is not None and l_.report is not None
        assert [f.rule_id for f in r.report.findings] == [f.rule_id for f in l_.report.findings]
        assert r.report.verdict.headline == l_.report.verdict.headline


def test_wrong_results_assumptions_and_odd_entries(tmp_path: Path) -> None:
    """New-user trial 4: a checkpoint Spark restarts with silently wrong results was "OK"; a stateful one whose
    state/ is gone was "OK" without the audit's "assuming stateless"; a FIFO or a link loop anywhere under the prefix
    stopped the whole scan (exit 2, no line for any checkpoint)."""
    import tarfile

    from tests.spark.damage import CASES

    fixture = ROOT / "tests" / "fixtures" / "spark-4.3.0" / "agg_hdfs.tar.gz"
    for name in ("edited", "no-state"):
        with tarfile.open(fixture) as tar:
            tar.extractall(tmp_path / name, filter="data")
    # recorded on 3.5.9-4.3.0: Spark restarts and counts wrong
    CASES["offset_latest_shuffle_partitions_edited_down"].apply(tmp_path / "edited" / "ckpt")
    shutil.rmtree(tmp_path / "no-state" / "ckpt" / "state")
    os.mkfifo(tmp_path / "a-fifo")
    (tmp_path / "a-loop").symlink_to("a-loop")
    (tmp_path / "up").symlink_to("..")
    proc = run_cli("scan", str(tmp_path), "--format", "json")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)
    got = {c["checkpoint"]: c for c in doc["checkpoints"]}
    assert set(got) == {str(tmp_path / n / "ckpt") for n in ("edited", "no-state")}
    edited, gone = got[str(tmp_path / "edited" / "ckpt")], got[str(tmp_path / "no-state" / "ckpt")]
    assert (edited["status"], edited["restarts"]) == ("wrong", True)
    assert gone["status"] == "restarts" and gone["report"]["verdict"]["assumptions"]
    assert doc["counts"]["wrong"] == 1
    text = run_cli("scan", str(tmp_path), env={**os.environ, "COLUMNS": "300"}).stdout
    assert "1 will restart with silently wrong results" in text.splitlines()[0], text
    line = next(x for x in text.splitlines() if x.startswith("WRONG"))
    assert "restarts, silently wrong (CONF-SHUFFLE-PARTITIONS-EDITED)" in line, line
    line = next(x for x in text.splitlines() if x.startswith("OK"))
    assert "assuming its query is stateless" in line, line
