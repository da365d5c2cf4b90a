"""A file sink's latest log entry deleted, the checkpoint intact (damage hunt 7, F5): Spark restarts (the sink
writes the next entries), and from then on reading the output fails: Spark's file index over _spark_metadata reads
every entry since the last compaction up to the newest. The audit named only the compaction that fails later; the
finding now says when readers fail, with the text Spark's error gives, and here Spark fails with that very text."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from ckptfix.audit import audit
from tests.spark.harness import build_base, restart

pytestmark = pytest.mark.spark


def test_a_missing_sink_entry_fails_readers_after_the_restart_and_the_audit_says_so(spark: Any, tmp_path: Path) -> None:
    ckpt, input_dir, out = build_base(spark, "filesink", tmp_path / "base")
    log = out / "_spark_metadata"
    latest = max(int(p.name) for p in log.iterdir() if p.name.isdigit())
    (log / str(latest)).unlink()
    (log / f".{latest}.crc").unlink(missing_ok=True)

    report = audit(str(ckpt), "4.3", sink_path=str(out))
    (finding,) = [f for f in report.findings if f.rule_id == "SINK-LOG-COMPACT"]
    assert "fails on it as soon as the restart writes an entry after it" in finding.message, finding.message
    assert "doesn't exist (latestId: <the newest entry then>, compactInterval: 10)" in finding.message

    assert restart(spark, "filesink", ckpt, input_dir, out).ok  # as predicted: the restart runs
    newest = max(int(p.name) for p in log.iterdir() if p.name.isdigit())
    with pytest.raises(Exception) as failed:
        spark.read.parquet(str(out)).count()
    said = re.escape(f"_spark_metadata/{latest} doesn't exist (latestId: {newest}, compactInterval: 10)")
    assert re.search(said, str(failed.value)), str(failed.value)[:2000]
    # and the audit of the restarted checkpoint says readers fail already
    again = [f for f in audit(str(ckpt), "4.3", sink_path=str(out)).findings if f.rule_id == "SINK-LOG-COMPACT"]
    assert (
        again
        and f"fails on it already: FileNotFoundException: ... doesn't exist (latestId: {newest}" in again[0].message
    )
