"""``audit --against`` with a changed time window, on live Spark 4.x (damage hunt 9, D21/D22): a windowed
aggregation's key schema is the same for any window, so Spark restarts; the stored windows then never fit the new
ones. Each prediction is checked by restarting a copy with the changed query and comparing what it emits with a
fresh run of the changed query over the same input; the unchanged query is the control (same rows both ways).

Input (written by hand, UTC): file 0: 00:01 a, 00:03 b, 00:07 a; file 1: 00:12 a, 00:14 b, 00:18 b; file 2:
00:21 a, 00:26 b; file 3: 00:33 a, 00:34 b; the restart's files 4 and 5: 01:40 z, 01:41 y. One file per batch,
watermark 5 s, and a batch evicts with the watermark the batch before computed (availableNow runs no batch
without data at the end): the bases emitted the windows ending by 00:21 and hold later ones; the restart's second
batch emits every window ending by 01:35.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.audit_query.test_against_live import run_audit

pytestmark = pytest.mark.spark  # starts Spark (checked by tests/spark/plugin.py)

MODULE = "tests.audit_query.queries.windows"
FILES = [
    [("00:00:01", "a"), ("00:00:03", "b"), ("00:00:07", "a")],
    [("00:00:12", "a"), ("00:00:14", "b"), ("00:00:18", "b")],
    [("00:00:21", "a"), ("00:00:26", "b")],
    [("00:00:33", "a"), ("00:00:34", "b")],
    [("00:01:40", "z")],
    [("00:01:41", "y")],
]
BASE_FILES = 4
#: the watermark the base's last batch ran with (files 0..2: 00:26 minus 5 s): the base emitted the windows ending
#: by then, the restart emits the others
BASE_EMITTED = "2024-01-01 00:00:21"


def write_files(input_dir: Path, upto: int) -> None:
    input_dir.mkdir(parents=True, exist_ok=True)
    for i, rows in enumerate(FILES[:upto]):
        path = input_dir / f"part-{i:03d}.json"
        if path.exists():
            continue
        path.write_text("".join(json.dumps({"ts": f"2024-01-01T{t}Z", "k": k}) + "\n" for t, k in rows))
        os.utime(path, (1_700_000_000 + 60 * i, 1_700_000_000 + 60 * i))  # the file source reads by mtime


def run(spark: Any, fn: str, ckpt: Path, out: Path, input_dir: Path) -> None:
    from ckptfix.spark.usercode import load_writer

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CKPTFIX_AQ_INPUT", str(input_dir))
        mp.setenv("CKPTFIX_AQ_OUTPUT", str(out))
        query = load_writer(f"{MODULE}:{fn}", spark).option("checkpointLocation", str(ckpt))
        query = query.trigger(availableNow=True).start()
        assert query.awaitTermination(300), f"{fn} did not finish"
        assert query.exception() is None, query.exception()


def rows(spark: Any, out: Path) -> set[tuple[str, str, str, int]]:
    got = spark.read.schema("start TIMESTAMP, end TIMESTAMP, k STRING, count BIGINT").parquet(str(out))
    got = got.selectExpr("CAST(start AS STRING)", "CAST(end AS STRING)", "k", "count")
    return {(r[0], r[1], r[2], int(r[3])) for r in got.collect()}


@pytest.fixture(scope="module")
def bases(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    root = tmp_path_factory.mktemp("window-bases")
    write_files(root / "input", BASE_FILES)
    for fn in ("tumbling", "sliding"):
        run(spark, fn, root / fn / "ckpt", root / fn / "out", root / "input")
    return {fn: root / fn for fn in ("tumbling", "sliding")}


def window_findings(base: Path, fn: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CKPTFIX_AQ_INPUT", str(base.parent / "input"))
        mp.setenv("CKPTFIX_AQ_OUTPUT", str(base / "out"))
        _, doc = run_audit(base / "ckpt", fn, module=MODULE)
    return doc, [f for f in doc["findings"] if f["rule_id"] == "QUERY-WINDOW"]


def restart_and_fresh(
    spark: Any, base: Path, fn: str, tmp_path: Path
) -> tuple[set[tuple[str, str, str, int]], set[tuple[str, str, str, int]]]:
    """(what the restart of a copy with ``fn`` emits after the base, what a fresh run of ``fn`` over the same input
    emits for the windows the base did not emit). The copy reads the base's input directory (the file
    source remembers its files by path), where file 4 is added once: the bases are built before."""
    copy = tmp_path / "copy"
    shutil.copytree(base, copy)
    input_dir = base.parent / "input"
    write_files(input_dir, len(FILES))
    before = rows(spark, copy / "out")
    run(spark, fn, copy / "ckpt", copy / "out", input_dir)
    restarted = rows(spark, copy / "out") - before
    run(spark, fn, tmp_path / "fresh" / "ckpt", tmp_path / "fresh" / "out", input_dir)
    fresh = {r for r in rows(spark, tmp_path / "fresh" / "out") if r[1] > BASE_EMITTED}
    return restarted, fresh


@pytest.mark.parametrize("fn", ["tumbling", "sliding"])
def test_the_unchanged_window_has_no_finding_and_restarts_right(
    spark: Any, bases: dict[str, Path], tmp_path: Path, fn: str
) -> None:
    doc, found = window_findings(bases[fn], fn)
    assert found == [] and doc["verdict"]["restarts"] is True
    restarted, fresh = restart_and_fresh(spark, bases[fn], fn, tmp_path)
    assert restarted == fresh and restarted  # the control: the comparison sees equal output as equal


@pytest.mark.parametrize(
    ("base", "fn", "needle"),
    [
        ("tumbling", "longer", "the stored windows last 10 s"),  # D21
        ("tumbling", "sql_longer", "the stored windows last 10 s"),
        ("tumbling", "sliding", "and no other window of it"),  # D22
        ("sliding", "tumbling", "start at times the new windows never start at"),
        ("tumbling", "shifted", "start at times the new windows never start at"),
    ],
)
def test_a_changed_window_is_predicted_silently_wrong(
    spark: Any, bases: dict[str, Path], tmp_path: Path, base: str, fn: str, needle: str
) -> None:
    doc, found = window_findings(bases[base], fn)
    assert len(found) == 1, doc["findings"]
    assert found[0]["severity"] == "error" and needle in found[0]["message"]
    assert doc["verdict"]["restarts"] is True  # Spark restarts: the harm is in the rows
    restarted, fresh = restart_and_fresh(spark, bases[base], fn, tmp_path)
    assert restarted != fresh, "the restart emitted what a fresh run does: the finding would be wrong"
