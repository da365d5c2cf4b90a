"""`ckptfix offsets export` keeps its promise with real Spark: a new query on a new checkpoint,
set up as the export says, processes exactly what the old one had not (no reprocessing, no loss)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest

from ckptfix.offsets_export import export_offsets
from tests.spark.harness import restart
from tests.spark.queries import write_input_files


def _ids(output_dir: Path) -> list[int]:
    return sorted(
        json.loads(line)["id"]
        for part in output_dir.glob("batch_id=*/part-*")
        for line in part.read_text().splitlines()
        if line.strip()
    )


def _file_ids(paths: list[Path]) -> list[int]:
    return sorted(json.loads(line)["id"] for p in paths for line in p.read_text().splitlines() if line.strip())


@pytest.mark.spark
def test_a_new_checkpoint_started_from_the_export_reprocesses_and_loses_nothing(
    spark: Any, spark_bases: Any, tmp_path: Path
) -> None:
    ckpt, input_dir, _output = spark_bases("stateless")
    exported = export_offsets(str(ckpt))
    (source,) = exported.sources
    assert source.kind == "file" and source.processed_files
    processed = {Path(urlparse(p).path).name for p in source.processed_files}

    # the user's input directory, with what arrived since the old query stopped
    new_input = tmp_path / "input"
    shutil.copytree(input_dir, new_input)
    write_input_files(new_input, len(list(input_dir.glob("part-*.json"))), 2)
    done = tmp_path / "already-processed"
    done.mkdir()
    for name in processed:  # what the export says to do: move the processed files out of the input path
        shutil.move(str(new_input / name), done / name)
    expected = _file_ids(sorted(new_input.glob("part-*.json")))
    assert expected, "the new query must have something to do"

    outcome = restart(spark, "stateless", tmp_path / "new-ckpt", new_input, tmp_path / "new-output", new_files=0)
    assert outcome.ok, outcome.text
    assert _ids(tmp_path / "new-output") == expected  # every unprocessed row once, no processed row again
