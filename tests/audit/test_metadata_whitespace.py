"""LOG-CRC-MISMATCH on `metadata` edited after Spark wrote it (Spark 3.5.9's checkpoint, tests/fixtures/state35): a
newline an editor added around the JSON leaves the same query id (json4s reads it as before), so it is info; another
id is an error (a new query id: exactly-once sinks keyed on it write duplicates). A new user's trial found the
harmless edit reported as "will restart, but silently"."""

from __future__ import annotations

from pathlib import Path

from ckptfix.audit import audit
from tests.state.test_state35 import extract


def _finding(ckpt: Path):  # type: ignore[no-untyped-def]
    return next(f for f in audit(str(ckpt), "4.3").findings if f.rule_id == "LOG-CRC-MISMATCH")


def test_whitespace_around_the_json_is_info(tmp_path: Path) -> None:
    ckpt = extract("agg_hdfs", tmp_path)
    path = ckpt / "metadata"
    path.write_bytes(path.read_bytes() + b"\n")
    f = _finding(ckpt)
    assert f.severity == "info" and "same query id" in f.message
    assert audit(str(ckpt), "4.3").verdict.hazards == ()


def test_another_id_is_a_silent_error(tmp_path: Path) -> None:
    ckpt = extract("agg_hdfs", tmp_path)
    path = ckpt / "metadata"
    text = path.read_text()
    qid = text.split('"id":"')[1].split('"')[0]
    path.write_text(text.replace(qid, qid[::-1].replace("-", "0")[:8] + qid[8:]))
    f = _finding(ckpt)
    assert f.severity == "error" and f.silent
