"""``state delete`` + ``state put`` proven with real Spark 3.5.9 (run as subprocesses by the suite's own 3.5.9).

Spark 3.5.9 writes the base checkpoints of ``test_provider35_live`` (``dropDuplicates("id")`` then
``groupBy(key).agg(count, sum)``, complete mode, 2 partitions, 3 input files), HDFS and RocksDB. On copies,
ckptfix deletes key ``a`` from the aggregation (operator 0; the dedup is 1) and then, in a second plan over the
first, seeds key ``e`` (which only the later files hold). Spark 3.5.9 restarts them with 2 more files: the
outputs must show ``a`` counted from the new rows only and ``e`` going on from its seed, every other key as if
nothing happened (Spark 3.5 has no ``statestore`` reader: the query's output is the proof). Expected values
come from the input rows.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from ckptfix.repair import engine
from ckptfix.repair.surgery import plan_state_delete, plan_state_put
from ckptfix.storage import Location
from tests.migrate.test_provider35_live import run35
from tests.migrate.test_provider_live import BASE_FILES, MORE_FILES, expected_agg, file_rows, write_inputs

pytestmark = pytest.mark.spark

PROVIDERS = ["hdfs", "rocksdb"]
SEED = (100, 1000)


def new_rows(files: int) -> dict[str, tuple[int, int]]:
    """(count, sum) per key over the distinct ids first seen in files BASE_FILES..files-1 (dedup keeps its state)."""
    seen: set[int] = set()
    out: dict[str, tuple[int, int]] = {}
    for i in range(files):
        for row in file_rows(i):
            if row["id"] in seen:
                continue
            seen.add(row["id"])
            if i >= BASE_FILES:
                n, s = out.get(row["key"], (0, 0))
                out[row["key"]] = (n + 1, s + row["value"])
    return out


def expected(batch: int) -> dict[str, list[int]]:
    out = expected_agg(batch + 1)
    later = new_rows(batch + 1)
    out.pop("a", None)
    if "a" in later:
        out["a"] = later["a"]
    n, s = later.get("e", (0, 0))
    out["e"] = (SEED[0] + n, SEED[1] + s)
    return {k: list(v) for k, v in out.items()}


def apply(plan: Any, ckpt: Path) -> None:
    engine.apply(plan, Location(str(ckpt)), Location(str(ckpt / "_ckptfix")), idle_seconds=0)


def test_spark35_restarts_on_the_edited_state(py35: Path, tmp_path: Path) -> None:
    inputs = {p: tmp_path / p / "input" for p in PROVIDERS}
    for d in inputs.values():
        write_inputs(d, 0, BASE_FILES)
    bases = {p: tmp_path / p / "base" for p in PROVIDERS}
    built = run35(py35, [(bases[p], inputs[p], p, tmp_path / p / "base.json") for p in PROVIDERS])
    for b in built:
        assert b["error"] is None, b["error"]
        assert "a" in b[str(BASE_FILES - 1)] and "e" not in b[str(BASE_FILES - 1)]  # type: ignore[operator]

    jobs = []
    for p in PROVIDERS:
        ckpt = tmp_path / p / "edited"
        shutil.copytree(bases[p], ckpt)
        apply(plan_state_delete(str(ckpt), operator=0, where="key = 'a'").plan, ckpt)
        rows = tmp_path / p / "rows.jsonl"
        rows.write_text(json.dumps({"key": {"key": "e"}, "value": {"count": SEED[0], "sum": SEED[1]}}) + "\n")
        apply(plan_state_put(str(ckpt), operator=0, rows_file=str(rows)).plan, ckpt)
        write_inputs(inputs[p], BASE_FILES, MORE_FILES)
        jobs.append((ckpt, inputs[p], p, tmp_path / p / "edited.json"))

    results = run35(py35, jobs)
    batches = [str(b) for b in range(BASE_FILES, BASE_FILES + MORE_FILES)]
    for p, got in zip(PROVIDERS, results, strict=True):
        assert got["error"] is None, f"Spark 3.5 rejected the edited {p} checkpoint: {got['error']}"
        assert sorted(k for k in got if k.isdigit()) == batches, "no batch may be re-run"
        for b in batches:
            assert got[b] == expected(int(b)), f"{p} batch {b}"
