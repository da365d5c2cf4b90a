"""``ckptfix audit CKPT --against MODULE:FUNCTION`` on live Spark: real checkpoints, real changed queries, and
for every "not allowed" prediction a real restart of a copy with the changed query that fails (or silently
misbehaves) the way the finding says.

One base checkpoint (tests/spark/queries.py ``agg_hdfs``: groupBy(key) count, sum over a JSON file source,
foreachBatch, 3 shuffle partitions, 8 batches), built once per session by the ``spark_bases`` fixture; the
changed queries are in tests/audit_query/queries/agg.py. Restarts run on copies.
"""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ckptfix.cli.main import app
from tests.spark.harness import error_text
from tests.spark.queries import SCENARIOS, write_input_files

MODULE = "tests.audit_query.queries.agg"
BASE_FILES = SCENARIOS["agg_hdfs"].base_files  # batches 0..7 read files 0..7; a restart reads file 8


def snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    return {str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime_ns) for p in root.rglob("*") if p.is_file()}


@pytest.fixture
def base(spark: Any, spark_bases: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    ckpt, input_dir, _ = spark_bases("agg_hdfs")
    second = tmp_path / "input2"
    write_input_files(second, 0, 1)
    monkeypatch.setenv("CKPTFIX_AQ_INPUT", str(input_dir))
    monkeypatch.setenv("CKPTFIX_AQ_INPUT2", str(second))
    monkeypatch.setenv("CKPTFIX_AQ_OUTPUT", str(tmp_path / "out"))
    spark.conf.set("spark.sql.shuffle.partitions", "3")
    yield ckpt
    spark.conf.set("spark.sql.shuffle.partitions", "3")


def run_audit(ckpt: Path, fn: str, *extra: str, module: str = MODULE) -> tuple[int, dict[str, Any]]:
    before = snapshot(ckpt)
    res = CliRunner().invoke(app, ["audit", str(ckpt), "--against", f"{module}:{fn}", "-f", "json", "-q", *extra])
    assert snapshot(ckpt) == before, "audit --against changed the checkpoint"
    return res.exit_code, json.loads(res.stdout)


def query_findings(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for f in doc["findings"] if f["rule_id"].startswith("QUERY-")]


def restart_copy(
    spark: Any, ckpt: Path, fn: str, dest: Path, module: str = MODULE, new_input: tuple[str, int] | None = None
) -> tuple[Path, str | None]:
    """Run the changed query once (availableNow) on a copy of ``ckpt`` after one new input file; returns
    (the copy, the error text or None)."""
    from ckptfix.spark.usercode import load_writer

    copy = dest / "ckpt"
    shutil.copytree(ckpt, copy)
    env, index = new_input or ("CKPTFIX_AQ_INPUT", BASE_FILES)
    write_input_files(Path(os.environ[env]), index, 1)
    writer = load_writer(f"{module}:{fn}", spark)
    try:
        query = writer.option("checkpointLocation", str(copy)).trigger(availableNow=True).start()
    except Exception as exc:
        return copy, error_text(exc)
    try:
        assert query.awaitTermination(180), "restart did not finish"
    except Exception as exc:
        return copy, error_text(exc)
    jexc = query._jsq.exception()
    return copy, (error_text(None, jexc.get()) if jexc.isDefined() else None)


def true_counts(input_dir: Path, files: int) -> Counter[str]:
    counts: Counter[str] = Counter()
    for i in range(files):
        for line in (input_dir / f"part-{i:04d}.json").read_text().splitlines():
            counts[json.loads(line)["key"]] += 1
    return counts


def batch_rows(out: Path, batch: int) -> list[dict[str, Any]]:
    rows = []
    for part in (out / f"batch_id={batch:05d}").glob("part-*"):
        rows += [json.loads(line) for line in part.read_text().splitlines() if line.strip()]
    return rows


def test_unchanged_query_has_no_query_findings(base: Path) -> None:
    code, doc = run_audit(base, "same")
    assert code == 0
    assert query_findings(doc) == []
    assert doc["facts"]["against"]["stateful_operators"] == ["0:stateStoreSave"]


def test_filter_and_derived_column_are_allowed(base: Path) -> None:
    code, doc = run_audit(base, "projection")
    assert code == 0
    assert query_findings(doc) == []


def test_added_grouping_key_fails_like_predicted(spark: Any, base: Path, tmp_path: Path) -> None:
    code, doc = run_audit(base, "more_keys")
    assert code == 1
    assert [f["rule_id"] for f in query_findings(doc)] == ["QUERY-STATE-KEY-SCHEMA"]
    assert doc["verdict"]["error"]["error_class"] == "STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE"
    _, err = restart_copy(spark, base, "more_keys", tmp_path)
    assert err is not None and "[STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE]" in err
    assert doc["verdict"]["error"]["message"] in err


def test_added_aggregate_fails_like_predicted(spark: Any, base: Path, tmp_path: Path) -> None:
    code, doc = run_audit(base, "more_aggs")
    assert code == 1
    assert [f["rule_id"] for f in query_findings(doc)] == ["QUERY-STATE-VALUE-SCHEMA"]
    _, err = restart_copy(spark, base, "more_aggs", tmp_path)
    assert err is not None and "[STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE]" in err
    assert doc["verdict"]["error"]["message"] in err


def test_second_source_fails_like_predicted(spark: Any, base: Path, tmp_path: Path) -> None:
    code, doc = run_audit(base, "two_sources")
    assert code == 1
    assert [f["rule_id"] for f in query_findings(doc)] == ["QUERY-SOURCES"]
    _, err = restart_copy(spark, base, "two_sources", tmp_path)
    assert err is not None
    assert doc["verdict"]["error"]["message"] in err  # "There are [1] sources ... now there are [2] ..."
    assert "java.lang.AssertionError" in err


def test_reordered_aggregates_restart_silently_wrong(spark: Any, base: Path, tmp_path: Path) -> None:
    """Only a projection after the aggregation -- the optimizer reorders the aggregation buffers, Spark's
    name-blind schema check passes, and the restart reads the stored sum as the count."""
    code, doc = run_audit(base, "reordered")
    assert code == 1
    found = query_findings(doc)
    assert [f["rule_id"] for f in found] == ["QUERY-STATE-REORDERED"]
    assert doc["verdict"]["restarts"] and doc["verdict"]["hazards"]
    _, err = restart_copy(spark, base, "reordered", tmp_path)
    assert err is None  # Spark restarts ...
    want = true_counts(Path(os.environ["CKPTFIX_AQ_INPUT"]), BASE_FILES + 1)
    rows = batch_rows(tmp_path / "out", BASE_FILES)
    assert rows
    assert all(r["cnt"] != want[r["key"]] for r in rows), rows  # ... with wrong counts


def test_shuffle_partitions_change_is_ignored(spark: Any, base: Path, tmp_path: Path) -> None:
    code, doc = run_audit(base, "partitions")
    assert code == 0
    found = query_findings(doc)
    assert [f["rule_id"] for f in found] == ["QUERY-CONF-IGNORED"]
    assert "spark.sql.shuffle.partitions=7" in found[0]["message"] and "records 3" in found[0]["message"]
    copy, err = restart_copy(spark, base, "partitions", tmp_path)  # the session asks for 7 partitions
    assert err is None
    assert sorted(p.name for p in (copy / "state" / "0").iterdir() if p.name.isdigit()) == ["0", "1", "2"]
    new_offset = (copy / "offsets" / str(BASE_FILES)).read_text().splitlines()[1]
    assert json.loads(new_offset)["conf"]["spark.sql.shuffle.partitions"] == "3"
    # and the counts are right (control for the reordered case)
    want = true_counts(Path(os.environ["CKPTFIX_AQ_INPUT"]), BASE_FILES + 1)
    rows = batch_rows(tmp_path / "out", BASE_FILES)
    assert rows and all(r["cnt"] == want[r["key"]] for r in rows)


def test_moved_input_fails_like_predicted(
    spark: Any, base: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    moved = tmp_path / "moved-input"
    shutil.copytree(os.environ["CKPTFIX_AQ_INPUT"], moved)
    monkeypatch.setenv("CKPTFIX_AQ_INPUT_MOVED", str(moved))
    code, doc = run_audit(base, "moved_input")
    assert code == 1
    assert [f["rule_id"] for f in query_findings(doc)] == ["QUERY-SOURCE-PARAMS"]
    assert doc["verdict"]["error"]["exception"] == "java.lang.IllegalArgumentException"
    _, err = restart_copy(spark, base, "moved_input", tmp_path, new_input=("CKPTFIX_AQ_INPUT_MOVED", BASE_FILES))
    assert err is not None and f"java.lang.IllegalArgumentException: Wrong basePath {moved}" in err


def test_memory_sink_is_ill_defined(base: Path) -> None:
    code, doc = run_audit(base, "memory_sink")
    assert code == 0
    found = query_findings(doc)
    assert [(f["rule_id"], f["severity"]) for f in found] == [("QUERY-SINK", "info")]
    assert found[0]["message"].startswith("ill-defined")


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ("tests.audit_query.queries.broken:build", "failed: ModuleNotFoundError"),
        (f"{MODULE}:returns_dataframe", "not the DataFrame"),
        (f"{MODULE}:returns_none", "expected an unstarted DataStreamWriter, found builtins.NoneType"),
        (f"{MODULE}:raises", "raised RuntimeError: the job's config is missing"),
        (f"{MODULE}:NOT_CALLABLE", "expected NOT_CALLABLE to be callable, found int"),
        (f"{MODULE}:no_such_function", "expected a function no_such_function"),
    ],
)
def test_bad_query_modules(base: Path, spec: str, needle: str) -> None:
    before = snapshot(base)
    runner = CliRunner()
    res = runner.invoke(app, ["audit", str(base), "--against", spec, "-q"])
    assert res.exit_code == 2
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("ckptfix: error: ") and needle in lines[0], res.stderr
    assert "Traceback" not in res.output
    res = runner.invoke(app, ["audit", str(base), "--against", spec, "-q", "-f", "json"])
    assert res.exit_code == 2
    doc = json.loads(res.stdout)
    assert needle in json.dumps(doc)
    assert snapshot(base) == before


# ------------------------------------------------------------- a stream-stream join over a deduplication

JOIN = "tests.audit_query.queries.join"
JOIN_FILES = 2


@pytest.fixture(scope="module")
def join_dirs(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Base: join.same (operator 0 symmetricHashJoin, operator 1 dedupe) over 2 files per side."""
    from ckptfix.spark.usercode import load_writer

    root = tmp_path_factory.mktemp("join-base")
    dirs = {
        "CKPTFIX_AQ_LEFT": str(root / "left"),
        "CKPTFIX_AQ_RIGHT": str(root / "right"),
        "CKPTFIX_AQ_OUTPUT": str(root / "out"),
        "ckpt": str(root / "ckpt"),
    }
    write_input_files(root / "left", 0, JOIN_FILES)
    write_input_files(root / "right", 0, JOIN_FILES)
    with pytest.MonkeyPatch.context() as mp:
        for key, value in dirs.items():
            mp.setenv(key, value)
        query = load_writer(f"{JOIN}:same", spark).option("checkpointLocation", dirs["ckpt"])
        query = query.trigger(availableNow=True).start()
        assert query.awaitTermination(300), "join base did not finish"
        assert query.exception() is None
    return dirs


@pytest.fixture
def join_base(join_dirs: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for key in ("CKPTFIX_AQ_LEFT", "CKPTFIX_AQ_RIGHT"):
        monkeypatch.setenv(key, join_dirs[key])
    monkeypatch.setenv("CKPTFIX_AQ_OUTPUT", str(tmp_path / "out"))
    return Path(join_dirs["ckpt"])


def test_unchanged_join_matches_the_stored_schemas(join_base: Path) -> None:
    code, doc = run_audit(join_base, "same", module=JOIN)
    assert code == 0
    assert query_findings(doc) == []  # all 4 join stores and the dedup store compared, no difference
    assert doc["facts"]["against"]["stateful_operators"] == ["0:symmetricHashJoin", "1:dedupe"]
    assert len(doc["facts"]["against"]["sources"]) == 2


@pytest.mark.parametrize(
    ("fn", "rule", "error_class"),
    [
        ("dedup_keys", "QUERY-STATE-KEY-SCHEMA", "STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE"),
        ("join_keys", "QUERY-STATE-KEY-SCHEMA", "STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE"),
        ("no_dedup", "QUERY-STATEFUL-OPERATORS", "STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA"),
    ],
)
def test_join_changes_fail_like_predicted(
    spark: Any, join_base: Path, tmp_path: Path, fn: str, rule: str, error_class: str
) -> None:
    code, doc = run_audit(join_base, fn, module=JOIN)
    assert code == 1
    assert {f["rule_id"] for f in query_findings(doc)} == {rule}
    assert doc["verdict"]["error"]["error_class"] == error_class
    _, err = restart_copy(spark, join_base, fn, tmp_path, JOIN, ("CKPTFIX_AQ_LEFT", JOIN_FILES))
    assert err is not None and f"[{error_class}]" in err
    assert doc["verdict"]["error"]["message"] in err


pytestmark = pytest.mark.spark  # starts Spark (checked by tests/spark/plugin.py)


def test_a_new_output_path_is_no_error(base: Path, tmp_path: Path) -> None:
    """A query whose file sink writes to a path that does not exist yet (Spark creates it; ckptfix's own advice for
    a sink ahead of the checkpoint is a new output path): the audit has no sink log to compare, and says so by
    comparing none (damage hunt 8, H7: exit 2, "no such file or directory")."""
    assert not (tmp_path / "out").exists()
    code, doc = run_audit(base, "file_sink")
    assert code != 2 and "error" not in doc, doc
    assert doc["verdict"] is not None and not any(f["rule_id"].startswith("SINK-") for f in doc["findings"])


def true_sums(input_dir: Path, files: int, field: str) -> Counter[str]:
    sums: Counter[str] = Counter()
    for i in range(files):
        for line in (input_dir / f"part-{i:04d}.json").read_text().splitlines():
            row = json.loads(line)
            sums[row["key"]] += row[field]
    return sums


def test_a_changed_aggregate_function_restarts_silently_wrong(spark: Any, base: Path, tmp_path: Path) -> None:
    """count(*) changed to sum(id) under the same alias: the buffer types match, names do not. Spark restarts and
    the sum continues from the stored count (damage hunt 9, D15: the audit called it a rename, "Nothing to do")."""
    code, doc = run_audit(base, "count_to_sum")
    assert code == 1
    (found,) = query_findings(doc)
    assert (found["rule_id"], found["severity"], found["silent"]) == ("QUERY-STATE-MEANING", "error", True)
    assert "named by their aggregate functions" in found["message"]
    assert doc["verdict"]["restarts"] and doc["verdict"]["hazards"]
    _, err = restart_copy(spark, base, "count_to_sum", tmp_path)
    assert err is None  # Spark restarts ...
    want = true_sums(Path(os.environ["CKPTFIX_AQ_INPUT"]), BASE_FILES + 1, "id")
    rows = batch_rows(tmp_path / "out", BASE_FILES)
    assert rows and all(r["cnt"] != want[r["key"]] for r in rows), rows  # ... and its sums are not the sums


def test_grouping_by_another_expression_is_a_warning_and_restarts_unmatched(
    spark: Any, base: Path, tmp_path: Path
) -> None:
    """Grouped by concat('x', key): same key type, another name. The files cannot tell that from a renamed column,
    so a warning says both readings; Spark restarts and no stored key matches (counts start again: hunt 9, D17)."""
    code, doc = run_audit(base, "other_key")
    (found,) = query_findings(doc)
    assert (found["rule_id"], found["severity"]) == ("QUERY-STATE-MEANING", "warning")
    assert "only renamed the column" in found["message"] and code == 0
    _, err = restart_copy(spark, base, "other_key", tmp_path)
    assert err is None
    rows = batch_rows(tmp_path / "out", BASE_FILES)
    one_file = true_counts(Path(os.environ["CKPTFIX_AQ_INPUT"]), BASE_FILES + 1) - true_counts(
        Path(os.environ["CKPTFIX_AQ_INPUT"]), BASE_FILES
    )
    assert rows and all(r["cnt"] == one_file[r["key2"][1:]] for r in rows), rows  # the new file's rows only


def test_swapped_join_sides_are_a_silent_hazard(spark: Any, join_base: Path, tmp_path: Path) -> None:
    """right.join(left) instead of left.join(right): each side's store now gets the other side's rows; the schemas
    hold the same types in the same order per side only if the sides look alike, so the audit compares the sides'
    stored row schemas (damage hunt 9, D14: restarted on 4.3.0, silently wrong)."""
    code, doc = run_audit(join_base, "swapped", module=JOIN)
    found = [f for f in query_findings(doc) if f["rule_id"] == "QUERY-STATE-MEANING"]
    assert found and found[0]["severity"] == "error" and "the other way round" in found[0]["message"], doc
    assert code == 1


def test_a_file_sink_moved_to_a_new_path_restarts_into_an_unreadable_output(
    spark: Any, spark_bases: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stateless file-sink base restarted into a new output path: Spark restarts, but the new path's log starts
    at the restart's batch, and reading the output fails (damage hunt 9, D23 on 4.3.0); ckptfix's advice for a
    sink ahead of the checkpoint named this way out until 2026-11-28."""
    from tests.spark.harness import copy_base, restart

    ckpt, input_dir, _ = copy_base(spark_bases("filesink"), tmp_path / "copy")
    new_out = tmp_path / "out2"
    monkeypatch.setenv("CKPTFIX_AQ_INPUT", str(input_dir))
    monkeypatch.setenv("CKPTFIX_AQ_OUTPUT", str(new_out))
    code, doc = run_audit(ckpt, "file_sink")
    (found,) = [f for f in query_findings(doc) if f["rule_id"] == "QUERY-SINK"]
    assert (found["severity"], found["silent"]) == ("error", True) and "_spark_metadata/0 doesn't exist" in found[
        "message"
    ]
    assert doc["verdict"]["restarts"] and code == 1
    outcome = restart(spark, "filesink", ckpt, input_dir, new_out)
    assert outcome.ok, outcome.text
    with pytest.raises(Exception, match=r"_spark_metadata/0 doesn't exist"):
        spark.read.parquet(str(new_out)).collect()


def test_apply_in_pandas_with_state_is_compared(
    spark: Any, spark_bases: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """applyInPandasWithState's state schemas were "not compared" and the verdict "restarts" (damage hunt 9, D1-D5:
    a changed key or state type fails on 4.3.0 with STATE_STORE_KEY/VALUE_SCHEMA_NOT_COMPATIBLE). It shares
    flatMapGroupsWithState's state manager, and is compared the same way now."""
    from tests.spark.harness import copy_base

    module = "tests.audit_query.queries.pandas_state"
    ckpt, input_dir, _ = copy_base(spark_bases("pandas_state"), tmp_path / "copy")
    monkeypatch.setenv("CKPTFIX_AQ_INPUT", str(input_dir))
    monkeypatch.setenv("CKPTFIX_AQ_OUTPUT", str(tmp_path / "out"))
    code, doc = run_audit(ckpt, "same", module=module)
    assert (code, query_findings(doc)) == (0, []), doc
    code, doc = run_audit(ckpt, "int_count", module=module)
    assert code == 1 and [f["rule_id"] for f in query_findings(doc)] == ["QUERY-STATE-VALUE-SCHEMA"]
    assert doc["verdict"]["error"]["error_class"] == "STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE"
    _, err = restart_copy(spark, ckpt, "int_count", tmp_path / "restart", module, ("CKPTFIX_AQ_INPUT", 4))
    assert err is not None and "[STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE]" in err


def test_a_query_spark_refuses_to_start_is_predicted(spark: Any, base: Path, tmp_path: Path) -> None:
    """start() checks the plan against the output mode before it reads the checkpoint (UnsupportedOperationChecker);
    ckptfix said "restarts" for an aggregation without watermark in append mode (damage hunt 9, D25)."""
    code, doc = run_audit(base, "append_mode")
    assert code == 1 and "QUERY-UNSUPPORTED" in {f["rule_id"] for f in query_findings(doc)}
    error = doc["verdict"]["error"]
    assert error["error_class"] == "STREAMING_OUTPUT_MODE.UNSUPPORTED_OPERATION"
    _, err = restart_copy(spark, base, "append_mode", tmp_path)
    assert err is not None and "[STREAMING_OUTPUT_MODE.UNSUPPORTED_OPERATION]" in err and error["message"] in err
