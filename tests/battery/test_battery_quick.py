"""A fast sample of the fuzz and fault battery (bench/battery; the full run is `python -m bench.battery`): 2,000
mutations of real Spark-written files through ckptfix's format functions, one kill -9 of an apply recovered by
`apply --resume` and by `undo`, and one plan applied through the faulty S3 proxy. Every case must be clean."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.battery import crash, faults, parsers
from bench.battery.crash import Target
from bench.battery.report import Section
from bench.battery.s3 import Moto


def _failures(section: Section) -> str:
    return "\n".join(str(f) for f in section.failures[:10])


def test_parser_mutations() -> None:
    section = parsers.run_formats(limit=2000, per_family=100, jobs=1)
    assert section.tried == 2000
    assert section.failed == 0, _failures(section)
    formats = section.figures["formats"]
    # every format of the corpus is mutated, and most mutations are refused with a FormatError
    assert {"offsets", "commits", "metadata", "operator-metadata", "delta", "changelog", "rocksdb-zip"} <= set(formats)
    assert section.figures["outcomes"]["FormatError"] > 1000


def test_one_crash_point_recovered_by_resume_and_by_undo(tmp_path: Path) -> None:
    section = Section("crash")
    crash.crash_plan(section, "async_gap", Target(), tmp_path, step=1, max_points=1)
    assert section.tried == 2  # resume, and undo of the same crashed state
    assert section.failed == 0, _failures(section)


@pytest.mark.s3
def test_faulty_s3_proxy(s3_bucket: Any, tmp_path: Path) -> None:
    moto = Moto(s3_bucket.server.endpoint_url, s3_bucket.name)
    section = faults.run(moto, runs=1, share=0.3, tmp=tmp_path)
    assert section.figures["injected_total"] > 0
    assert section.failed == 0, _failures(section)
    assert section.figures["lost_objects"] == 0 and section.figures["half_written_objects"] == 0
