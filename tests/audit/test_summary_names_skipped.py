"""The audit's summary line counts the checks it could not run, as the report lists them (a clean summary must
not hide that something was not checked)."""

from __future__ import annotations

import json
import subprocess
import tarfile
from pathlib import Path

from tests.support.cli import run_cli

ROOT = Path(__file__).resolve().parents[2]


def test_the_summary_counts_skipped_checks(tmp_path: Path) -> None:
    with tarfile.open(ROOT / "tests/fixtures/matrix/4.3.0/filesink.tar.gz") as tar:  # stateless: no state checked
        tar.extractall(tmp_path, filter="data")
    proc = run_cli("audit", str(tmp_path / "ckpt"))
    assert proc.returncode == 0, proc.stderr
    skipped = [line for line in proc.stdout.splitlines() if line.startswith("skipped ")]
    assert len(skipped) == 1 and skipped[0].startswith("skipped STATE-DIR-MISSING: state/ is empty or absent")
    assert proc.stderr.strip().startswith("0 errors, 0 warnings, 0 info, 1 check skipped (see above); read ")


def test_a_summary_without_skipped_checks_says_nothing_of_them() -> None:
    proc = run_cli("audit", str(ROOT / "samples" / "rocksdb-changelog"))
    assert proc.returncode == 0 and "skipped" not in proc.stdout + proc.stderr
    assert proc.stderr.strip().startswith("0 errors, 0 warnings, 0 info; read ")


def test_rules_shows_the_rules_named() -> None:
    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return run_cli("rules", *args)

    one = cli("log-async-gap", "STATE-CHAIN-INCOMPLETE", "--format", "json")
    assert one.returncode == 0
    assert [r["id"] for r in json.loads(one.stdout)["rules"]] == ["LOG-ASYNC-GAP", "STATE-CHAIN-INCOMPLETE"]
    text = cli("LOG-ASYNC-GAP").stdout
    assert text.startswith("LOG-ASYNC-GAP (error) ") and "\nSTATE-" not in text
    bad = cli("LOG-NOPE")
    assert bad.returncode == 2
    assert bad.stderr.startswith("ckptfix: error: no audit rule LOG-NOPE; rules starting the same way: LOG-ASYNC-GAP")


def test_in_json_the_summary_points_at_the_skipped_list(tmp_path: Path) -> None:
    """New-user trial: with JSON on stdout (in a file), "(see above)" pointed at nothing."""
    with tarfile.open(ROOT / "tests/fixtures/matrix/4.3.0/filesink.tar.gz") as tar:  # stateless: no state checked
        tar.extractall(tmp_path, filter="data")
    proc = run_cli("audit", str(tmp_path / "ckpt"), "-f", "json")
    assert '1 check skipped (see "skipped")' in proc.stderr, proc.stderr


def test_the_summary_says_what_the_read_count_counts() -> None:
    """New-user trial 2: "read 30 of 125 entries" was unexplained. The sample's listing holds 134 state files, the
    logs and their directories; a restart reads a few of them, --deep reads every file."""
    sample = str(ROOT / "samples" / "rocksdb-changelog")
    plain = run_cli("audit", sample).stderr.strip()
    assert plain.endswith("files and directories listed (what a restart reads; --deep reads every file)"), plain
    deep = run_cli("audit", sample, "--deep").stderr.strip()
    read = [int(s.split(" of the ")[0].rsplit(" ", 1)[-1]) for s in (plain, deep)]
    assert deep.endswith("files and directories listed") and read[0] < read[1], (plain, deep)
