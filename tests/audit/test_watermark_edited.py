"""LOG-WATERMARK-EDITED on a checkpoint Spark 3.5.9 wrote (tests/fixtures/state35/dedup_wm_hdfs: offsets and commits
0..3; offsets/3 records batchWatermarkMs 1700000021000, as commits/2's nextBatchWatermarkMs, and commits/3 records
1700000040000). Spark writes offsets/L with the watermark commits/L-1 recorded and restores max(offsets/L's,
commits/L's) on restart; the values below are read off the fixture by hand."""

from __future__ import annotations

from pathlib import Path

from ckptfix.audit import audit
from tests.state.test_state35 import extract

WROTE = "1700000021000"


def _edit(ckpt: Path, value: str) -> None:
    path = ckpt / "offsets" / "3"
    text = path.read_text()
    assert f'"batchWatermarkMs":{WROTE}' in text
    path.write_text(text.replace(f'"batchWatermarkMs":{WROTE}', f'"batchWatermarkMs":{value}'))
    (ckpt / "offsets" / ".3.crc").unlink()


def _finding(ckpt: Path):  # type: ignore[no-untyped-def]
    found = [f for f in audit(str(ckpt), "4.3").findings if f.rule_id == "LOG-WATERMARK-EDITED"]
    return found[0] if found else None


def test_as_spark_wrote_it_nothing(tmp_path: Path) -> None:
    assert _finding(extract("dedup_wm_hdfs", tmp_path)) is None


def test_raised_above_what_spark_restores_is_a_silent_error_under_stateful_operators(tmp_path: Path) -> None:
    """dropDuplicates with a watermark: rows in between count as late, state is evicted early (a damage hunt on
    4.3 saw wrong output in every stateful shape it raised the watermark of)."""
    ckpt = extract("dedup_wm_hdfs", tmp_path)
    _edit(ckpt, "1700000090000")  # above commits/3's 1700000040000: the restart takes it
    f = _finding(ckpt)
    assert f is not None and f.severity == "error" and f.silent
    assert "1700000090000 ms instead of 1700000040000" in f.message, f.message
    report = audit(str(ckpt), "4.3")
    assert report.verdict.restarts and report.verdict.hazards


def test_raised_in_a_stateless_query_is_a_warning(tmp_path: Path) -> None:
    """The same edit where no operator keeps state (state/ removed, audited as stateless): a watermark there only
    matters to what a future stateful change would do, so a warning."""
    import shutil

    ckpt = extract("dedup_wm_hdfs", tmp_path)
    _edit(ckpt, "1700000090000")
    shutil.rmtree(ckpt / "state")
    found = [f for f in audit(str(ckpt), "4.3", stateful=False).findings if f.rule_id == "LOG-WATERMARK-EDITED"]
    assert found and found[0].severity == "warning"


def test_below_the_committed_watermark_has_no_effect(tmp_path: Path) -> None:
    ckpt = extract("dedup_wm_hdfs", tmp_path)
    _edit(ckpt, "1700000030000")  # raised, but below commits/3's: max() restores the same watermark
    f = _finding(ckpt)
    assert f is not None and f.severity == "info" and "no effect" in f.message


def test_uncommitted_batch_runs_again_with_the_edited_value(tmp_path: Path) -> None:
    ckpt = extract("dedup_wm_hdfs", tmp_path)
    _edit(ckpt, "0")
    for name in ("3", ".3.crc"):
        (ckpt / "commits" / name).unlink(missing_ok=True)
    f = _finding(ckpt)
    assert f is not None and f.severity == "warning"
    assert f"runs batch 3 again with 0 ms instead of {WROTE}" in f.message, f.message
