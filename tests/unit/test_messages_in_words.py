"""Messages say what was expected and found in words, not the parser's own text (a new user's trial found
"expected commit metadata JSON (Unterminated string starting at)" and "found Bad CRC-32 for file ..."), and a
read stopped by a damaged snapshot names both ways past it. On copies of the RocksDB sample Spark 4.3 wrote."""

from __future__ import annotations

import shutil
from pathlib import Path

from typer.testing import CliRunner

from ckptfix.audit import audit
from ckptfix.cli.main import app

SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "rocksdb-changelog"


def _copy(tmp_path: Path) -> Path:
    ckpt = tmp_path / "ckpt"
    shutil.copytree(SAMPLE, ckpt)
    return ckpt


def test_a_cut_commit_names_what_json_lacks(tmp_path: Path) -> None:
    ckpt = _copy(tmp_path)
    data = (ckpt / "commits" / "11").read_bytes()
    (ckpt / "commits" / "11").write_bytes(data[:20])  # 'v1\n{"nextBatchWaterm'
    [f] = [f for f in audit(str(ckpt)).findings if f.rule_id == "LOG-UNREADABLE"]
    assert "expected commit metadata JSON (every string closed), found the end of the input" in f.message
    assert "Unterminated" not in f.message


def test_a_damaged_zip_and_the_ways_past_it(tmp_path: Path) -> None:
    ckpt = _copy(tmp_path)
    zip_path = ckpt / "state" / "0" / "0" / "12.zip"
    data = bytearray(zip_path.read_bytes())
    data[200] ^= 0xFF  # inside the first member, whose header starts at byte 0
    zip_path.write_bytes(bytes(data))
    result = CliRunner().invoke(app, ["state", "read", str(ckpt), "--format", "jsonl"])
    assert result.exit_code == 2
    assert "found content with another CRC-32 (its bytes were changed)" in result.output, result.output
    assert "Bad CRC-32" not in result.output
    # 9.zip + changelogs 10..12 reach version 12: rebuild writes it, --from-snapshot 8 reads it
    assert "ckptfix state rebuild" in result.output and "--from-snapshot 8" in result.output, result.output
    past = CliRunner().invoke(app, ["state", "read", str(ckpt), "--from-snapshot", "8", "--format", "jsonl"])
    whole = CliRunner().invoke(app, ["state", "read", str(SAMPLE), "--format", "jsonl"])  # the undamaged sample
    assert past.exit_code == 0 and whole.exit_code == 0
    rows = [line for line in past.output.splitlines() if line.startswith("{")]
    assert rows and sorted(rows) == sorted(line for line in whole.output.splitlines() if line.startswith("{"))
