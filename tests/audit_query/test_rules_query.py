"""QUERY-* rules on real checkpoints (fixtures written by real Spark) against hand-built QueryShape values.

No PySpark: the new query is described by hand, so the rules are tested alone. The checkpoints are the
committed fixtures: tests/fixtures/spark-4.2.1/agg_hdfs (groupBy(key) count, sum; file source; 3 shuffle
partitions), .../filesink (stateless, parquet file sink) and tests/fixtures/state35/join_hdfs (a 3.5
stream-stream join). Expected values come from those files (read by eye: state/0/0/_metadata/schema,
offsets/7), never from the code under test.
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest

from ckptfix.audit import audit
from ckptfix.audit.queryshape import (
    OperatorShape,
    QueryShape,
    SinkShape,
    SourceShape,
    StoreShape,
    compatible,
)
from ckptfix.audit.registry import RULES
from ckptfix.formats.unsaferow import ArrayType, LongType, StringType, StructField, StructType

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
STRING, LONG = StringType(), LongType()


def struct(*fields: tuple[str, object, bool]) -> StructType:
    return StructType(tuple(StructField(n, t, nullable) for n, t, nullable in fields))  # type: ignore[arg-type]


# what tests/fixtures/spark-4.2.1/agg_hdfs.tar.gz stores for operator 0
KEY = struct(("key", STRING, True))
VALUE = struct(("count", LONG, False), ("sum", LONG, True))


def _extract(tarball: Path, dest: Path) -> Path:
    with tarfile.open(tarball) as tar:
        try:
            tar.extractall(dest, filter="data")
        except TypeError:
            tar.extractall(dest)  # noqa: S202 - our own fixture
    return dest


@pytest.fixture(scope="module")
def agg(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _extract(FIXTURES / "spark-4.2.1" / "agg_hdfs.tar.gz", tmp_path_factory.mktemp("agg")) / "ckpt"


@pytest.fixture(scope="module")
def filesink(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _extract(FIXTURES / "spark-4.2.1" / "filesink.tar.gz", tmp_path_factory.mktemp("fs"))


def shape(
    *,
    sources: tuple[SourceShape, ...] | None = None,
    sink: SinkShape | None = None,
    operators: tuple[OperatorShape, ...] | None = None,
    conf: dict[str, str] | None = None,
) -> QueryShape:
    if operators is None:
        operators = (
            OperatorShape(0, "stateStoreSave", "StateStoreSaveExec", (StoreShape("default", KEY, VALUE),), 2, 3),
        )
    return QueryShape(
        spec="tests:hand_built",
        spark_version="4.3.0",
        sources=sources if sources is not None else (SourceShape("file", {"format": "json"}, "FileSource[x]"),),
        sink=sink or SinkShape("foreachBatch", output_mode="update"),
        operators=operators,
        conf=conf if conf is not None else {"spark.sql.shuffle.partitions": "3"},
    )


def query_findings(ckpt: Path, q: QueryShape, target: str = "4.3", **kw: object):  # type: ignore[no-untyped-def]
    report = audit(str(ckpt), target, query=q, **kw)  # type: ignore[arg-type]
    return report, [f for f in report.findings if f.rule_id.startswith("QUERY-")]


def test_rules_are_documented() -> None:
    ids = [r for r in RULES if r.startswith("QUERY-")]
    assert len(ids) >= 8
    for rid in ids:
        rule = RULES[rid]
        assert rule.title and rule.docs and rule.fix and rule.severity in ("info", "warning", "error")


def test_without_against_no_query_findings(agg: Path) -> None:
    report = audit(str(agg), "4.3")
    assert not [f for f in report.findings if f.rule_id.startswith("QUERY-")]


def test_unchanged_query_has_no_findings(agg: Path) -> None:
    report, found = query_findings(agg, shape())
    assert found == []
    assert report.verdict.restarts


def test_new_schema_less_nullable_is_compatible(agg: Path) -> None:
    # stored sum is nullable; a non-nullable sum is what Spark's check accepts
    value = struct(("count", LONG, False), ("sum", LONG, False))
    ops = (OperatorShape(0, "stateStoreSave", stores=(StoreShape("default", KEY, value),)),)
    assert query_findings(agg, shape(operators=ops))[1] == []


def test_added_grouping_key_is_not_allowed_with_spark_error(agg: Path) -> None:
    key = struct(("key", STRING, True), ("parity", LONG, True))
    ops = (OperatorShape(0, "stateStoreSave", stores=(StoreShape("default", key, VALUE),)),)
    report, found = query_findings(agg, shape(operators=ops))
    assert [f.rule_id for f in found] == ["QUERY-STATE-KEY-SCHEMA"]
    assert found[0].message.startswith("not allowed")
    assert "parity" in found[0].message
    assert not report.verdict.restarts
    assert report.verdict.error_class == "STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE"
    assert report.verdict.blocking_rule == "QUERY-STATE-KEY-SCHEMA"


def test_key_change_on_35_names_the_35_exception(agg: Path) -> None:
    key = struct(("key", LONG, True))
    ops = (OperatorShape(0, "stateStoreSave", stores=(StoreShape("default", key, VALUE),)),)
    report, _ = query_findings(agg, shape(operators=ops), target="3.5")
    assert report.verdict.exception == "org.apache.spark.sql.execution.streaming.state.StateSchemaNotCompatible"


def test_added_aggregate_is_not_allowed(agg: Path) -> None:
    value = struct(("count", LONG, False), ("sum", LONG, True), ("max", LONG, True))
    ops = (OperatorShape(0, "stateStoreSave", stores=(StoreShape("default", KEY, value),)),)
    report, found = query_findings(agg, shape(operators=ops))
    assert [f.rule_id for f in found] == ["QUERY-STATE-VALUE-SCHEMA"]
    assert report.verdict.error_class == "STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE"


def test_nullable_where_stored_is_not_is_incompatible(agg: Path) -> None:
    # stored count is NOT NULL: a nullable count fails Spark's check
    value = struct(("count", LONG, True), ("sum", LONG, True))
    ops = (OperatorShape(0, "stateStoreSave", stores=(StoreShape("default", KEY, value),)),)
    assert [f.rule_id for f in query_findings(agg, shape(operators=ops))[1]] == ["QUERY-STATE-VALUE-SCHEMA"]


def test_other_buffer_names_of_an_aggregation_are_other_functions(agg: Path) -> None:
    """An aggregation's buffers are named by its functions (an alias never reaches them): (n, s) for the stored
    (count, sum) is other functions reading the stored values (damage hunt 9, D15: count(*) -> sum(id), silently
    wrong on 4.3.0; until 2026-11-28 this was "renamed only, allowed")."""
    value = struct(("n", LONG, False), ("s", LONG, True))
    ops = (OperatorShape(0, "stateStoreSave", stores=(StoreShape("default", KEY, value),)),)
    report, found = query_findings(agg, shape(operators=ops))
    assert [(f.rule_id, f.severity, f.silent) for f in found] == [("QUERY-STATE-MEANING", "error", True)]
    assert report.verdict.restarts and report.verdict.hazards


def test_a_renamed_key_is_a_warning_with_both_readings(agg: Path) -> None:
    key = struct(("k2", STRING, True))
    ops = (OperatorShape(0, "stateStoreSave", stores=(StoreShape("default", key, VALUE),)),)
    report, found = query_findings(agg, shape(operators=ops))
    assert [(f.rule_id, f.severity) for f in found] == [("QUERY-STATE-MEANING", "warning")]
    assert "only renamed the column, the state continues" in found[0].message
    assert report.verdict.restarts


def test_reordered_fields_are_a_silent_hazard(agg: Path) -> None:
    # same types by position (stored count is NOT NULL, so the new first field must be too)
    value = struct(("sum", LONG, False), ("count", LONG, False))
    ops = (OperatorShape(0, "stateStoreSave", stores=(StoreShape("default", KEY, value),)),)
    report, found = query_findings(agg, shape(operators=ops))
    assert [f.rule_id for f in found] == ["QUERY-STATE-REORDERED"]
    assert found[0].silent and "sum -> count" in found[0].message
    assert report.verdict.restarts and report.verdict.hazards


def test_different_number_of_sources(agg: Path) -> None:
    two = (SourceShape("file", {}, "FileSource[a]"), SourceShape("file", {}, "FileSource[b]"))
    report, found = query_findings(agg, shape(sources=two))
    assert [f.rule_id for f in found] == ["QUERY-SOURCES"]
    assert report.verdict.exception == "java.lang.AssertionError"
    assert report.verdict.message == (
        "assertion failed: There are [1] sources in the checkpoint offsets and now there are [2] sources "
        "requested by the query. Cannot continue."
    )


def test_different_kind_of_source(agg: Path) -> None:
    rate = (SourceShape("rate", {}, "RateStreamV2"),)
    found = query_findings(agg, shape(sources=rate))[1]
    assert [f.rule_id for f in found] == ["QUERY-SOURCES"]
    assert "was a file source" in found[0].message


def test_file_source_reading_another_directory(agg: Path) -> None:
    moved = (SourceShape("file", {"path": "file:///somewhere/else", "format": "json"}, "FileSource[x]"),)
    report, found = query_findings(agg, shape(sources=moved))
    assert [f.rule_id for f in found] == ["QUERY-SOURCE-PARAMS"]
    assert found[0].message.startswith("not allowed")
    assert report.verdict.exception == "java.lang.IllegalArgumentException"


def test_file_source_in_another_directory_is_fine_after_a_no_data_batch(agg: Path, tmp_path: Path) -> None:
    """Spark rebuilds the latest batch's file list with the new path as basePath only when that batch read files: a
    no-data batch (offsets/N with the logOffset of offsets/N-1, as Spark writes the batch an AvailableNow run of a
    watermarked query ends with) restarted on 4.3.0 (damage hunt 9, D12/D13)."""
    import shutil

    ckpt = tmp_path / "ckpt"
    shutil.copytree(agg, ckpt)
    lines = (ckpt / "offsets" / "7").read_text().split("\n")
    assert lines[-1] == '{"logOffset":7}'
    lines[-1] = '{"logOffset":6}'
    (ckpt / "offsets" / "7").write_text("\n".join(lines))
    (ckpt / "offsets" / ".7.crc").unlink(missing_ok=True)
    shutil.rmtree(ckpt / "sources" / "0")  # the file source log as before batch 7 read anything: entries 0..6
    shutil.copytree(agg / "sources" / "0", ckpt / "sources" / "0", ignore=shutil.ignore_patterns("7", ".7.crc"))
    moved = (SourceShape("file", {"path": "file:///somewhere/else", "format": "json"}, "FileSource[x]"),)
    report, found = query_findings(ckpt, shape(sources=moved))
    # the restart works; what it reads is another matter: files are remembered by full path (hunt 9, D12: a new
    # path holding the old files too doubled the counts on 4.3.0), a warning without Spark error
    assert [(f.rule_id, f.severity) for f in found] == [("QUERY-SOURCE-PARAMS", "warning")]
    assert "remembers files by their full path" in found[0].message and report.verdict.restarts


def test_file_source_same_directory_is_fine(agg: Path) -> None:
    # the fixture's source log records file:///tmp/ckptfix-spark-4.2.1-gen/base/agg_hdfs/input/... paths
    entries = (agg / "sources" / "0" / "7").read_text().splitlines()[1:]
    first = json.loads(entries[0])["path"]
    same = (SourceShape("file", {"path": first.rsplit("/", 1)[0], "format": "json"}, "FileSource[x]"),)
    assert query_findings(agg, shape(sources=same))[1] == []


def test_added_and_removed_operators(agg: Path) -> None:
    both = (
        OperatorShape(0, "stateStoreSave", stores=(StoreShape("default", KEY, VALUE),)),
        OperatorShape(1, "dedupe", stores=(StoreShape("default", KEY, None, ignore_value=True),)),
    )
    report, found = query_findings(agg, shape(operators=both))
    assert [f.rule_id for f in found] == ["QUERY-STATEFUL-OPERATORS"]
    assert "(OperatorId: 1 -> OperatorName: dedupe)" in found[0].message
    assert report.verdict.error_class == "STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA"
    report, found = query_findings(agg, shape(operators=()))
    assert [f.rule_id for f in found] == ["QUERY-STATEFUL-OPERATORS"]
    assert report.verdict.error_class == "STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA"


def test_removed_operator_on_35_is_silent(agg: Path) -> None:
    # 3.5 has no operator check at restart: the state is left unused
    report, found = query_findings(agg, shape(operators=()), target="3.5")
    assert [f.rule_id for f in found] == ["QUERY-STATEFUL-OPERATORS"]
    assert found[0].silent and report.verdict.restarts and report.verdict.hazards


def test_other_operator_at_the_same_id(agg: Path) -> None:
    # 4.2.1 operator metadata names operator 0 stateStoreSave
    ops = (OperatorShape(0, "dedupe", stores=(StoreShape("default", KEY, None, ignore_value=True),)),)
    report, found = query_findings(agg, shape(operators=ops))
    assert [f.rule_id for f in found] == ["QUERY-STATEFUL-OPERATORS"]
    assert "(OperatorId: 0 -> OperatorName: stateStoreSave)" in found[0].message
    assert "(OperatorId: 0 -> OperatorName: dedupe)" in found[0].message
    assert not report.verdict.restarts


def test_operator_without_derived_schemas_is_unchecked(agg: Path) -> None:
    ops = (OperatorShape(0, "stateStoreSave", "StateStoreSaveExec", stores=()),)
    report, found = query_findings(agg, shape(operators=ops))
    assert [(f.rule_id, f.severity, f.undecided) for f in found] == [("QUERY-UNCHECKED", "warning", True)]
    assert report.verdict.restarts is None  # not compared: unknown, not "restarts" (damage hunt 9, D6-D10)


def test_session_confs_are_ignored_in_favour_of_the_recorded_ones(agg: Path) -> None:
    conf = {
        "spark.sql.shuffle.partitions": "7",
        "spark.sql.streaming.stateStore.providerClass": "org.apache.spark.sql.execution.streaming.state."
        "RocksDBStateStoreProvider",
        "spark.sql.streaming.multipleWatermarkPolicy": "max",
    }
    report, found = query_findings(agg, shape(conf=conf))
    assert {f.rule_id for f in found} == {"QUERY-CONF-IGNORED"}
    text = " ".join(f.message for f in found)
    assert "spark.sql.shuffle.partitions=7" in text and "records 3" in text
    assert "records org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider" in text
    assert "records min" in text and "fewer than two watermarks" in text
    assert all(f.message.startswith("allowed, ignored") for f in found)
    assert report.verdict.restarts


def test_memory_sink_is_ill_defined(agg: Path) -> None:
    found = query_findings(agg, shape(sink=SinkShape("memory", output_mode="update")))[1]
    assert [(f.rule_id, f.severity) for f in found] == [("QUERY-SINK", "info")]
    assert found[0].message.startswith("ill-defined")


def test_file_sink_path_change_is_not_allowed(filesink: Path, tmp_path: Path) -> None:
    other = tmp_path / "new-output"
    q = shape(sink=SinkShape("parquet", {"path": other.as_uri()}), operators=())
    found = query_findings(filesink / "ckpt", q, sink_path=str(filesink / "output"))[1]
    assert [f.rule_id for f in found] == ["QUERY-SINK"]
    assert found[0].message.startswith("not allowed") and "output directory of a file sink" in found[0].message


def test_file_sink_same_path_is_fine(filesink: Path) -> None:
    q = shape(sink=SinkShape("parquet", {"path": (filesink / "output").as_uri()}), operators=())
    report, found = query_findings(filesink / "ckpt", q)  # the sink path comes from the query itself
    assert found == []
    assert not [f for f in report.findings if f.rule_id.startswith("SINK-")]


def test_file_sink_to_kafka_is_allowed(filesink: Path) -> None:
    q = shape(sink=SinkShape("kafka", {"topic": "t"}), operators=())
    found = query_findings(filesink / "ckpt", q, sink_path=str(filesink / "output"))[1]
    assert [(f.rule_id, f.severity) for f in found] == [("QUERY-SINK", "info")]
    assert found[0].message.startswith("allowed")


def test_file_sink_to_foreach_batch_is_ill_defined(filesink: Path) -> None:
    q = shape(sink=SinkShape("foreachBatch"), operators=())
    found = query_findings(filesink / "ckpt", q, sink_path=str(filesink / "output"))[1]
    assert [f.rule_id for f in found] == ["QUERY-SINK"]
    assert found[0].message.startswith("ill-defined")


def test_join_stores_on_a_35_checkpoint(tmp_path: Path) -> None:
    ckpt = _extract(FIXTURES / "state35" / "join_hdfs.tar.gz", tmp_path) / "ckpt"
    # a join planned with other stores than the checkpoint has (e.g. a different state format)
    ops = (OperatorShape(0, "symmetricHashJoin", stores=(StoreShape("left-keyToNumValues", KEY, VALUE),)),)
    two = (SourceShape("file", {}, "FileSource[left]"), SourceShape("file", {}, "FileSource[right]"))
    found = query_findings(ckpt, shape(sources=two, operators=ops, conf={}), target="3.5")[1]
    assert [f.rule_id for f in found] == ["QUERY-STATEFUL-OPERATORS"]
    assert "right-keyWithIndexToValue" in found[0].message


@pytest.mark.parametrize(
    ("new", "stored", "ok"),
    [
        (struct(("a", LONG, False)), struct(("b", LONG, True)), True),  # names ignored, less nullable
        (struct(("a", LONG, True)), struct(("a", LONG, False)), False),  # more nullable
        (struct(("a", LONG, True)), struct(("a", STRING, True)), False),
        (struct(("a", LONG, True)), struct(("a", LONG, True), ("b", LONG, True)), False),
        (
            struct(("a", ArrayType(LONG, False), True)),
            struct(("a", ArrayType(LONG, True), True)),
            True,
        ),
        (
            struct(("a", ArrayType(LONG, True), True)),
            struct(("a", ArrayType(LONG, False), True)),
            False,
        ),
    ],
)
def test_compatible_is_sparks_rule(new: StructType, stored: StructType, ok: bool) -> None:
    assert compatible(new, stored) is ok


def test_a_file_sink_in_update_mode_is_refused_at_start(filesink: Path) -> None:
    """A file sink takes append mode only: Spark 4.3.0 refused update mode into a parquet sink at start() with
    "[STREAMING_OUTPUT_MODE.UNSUPPORTED_DATASOURCE] Invalid streaming output mode: update. This output mode is not
    supported in Data Source parquet." (damage hunt 9, D26; the audit said "restarts")."""
    sink = SinkShape("parquet", {"path": str(filesink / "output")}, output_mode="update")
    report, found = query_findings(filesink / "ckpt", shape(sink=sink, operators=()))
    assert "QUERY-UNSUPPORTED" in [f.rule_id for f in found]
    err = report.verdict.error
    assert err.error_class == "STREAMING_OUTPUT_MODE.UNSUPPORTED_DATASOURCE"
    assert (
        err.message == "Invalid streaming output mode: update. This output mode is not supported in Data Source parquet"
    )


@pytest.mark.parametrize("compacts_first", [False, True])
def test_a_file_sink_into_a_path_without_a_log(filesink: Path, tmp_path: Path, compacts_first: bool) -> None:
    """The file sink moved to a path without _spark_metadata while batches are committed: the log starts at the
    restart's batch. Spark 4.3.0 restarted (damage hunt 9, D23) and reading the output failed; the log's compaction
    fails the query, at the restart's first batch when that one compacts."""
    new_path = tmp_path / "new-output"
    sink = SinkShape("parquet", {"path": str(new_path)}, output_mode="append")
    first = max(int(p.name) for p in (filesink / "ckpt" / "commits").iterdir() if p.name.isdigit()) + 1
    conf = {"spark.sql.streaming.fileSink.log.compactInterval": str(first + 1 if compacts_first else 1000)}
    report, found = query_findings(filesink / "ckpt", shape(sink=sink, operators=()), session_conf=conf)
    (moved,) = [f for f in found if f.rule_id == "QUERY-SINK"]
    assert moved.severity == "error" and f"_spark_metadata/{first} as the log's first entry" in moved.message
    if compacts_first:
        assert report.verdict.restarts is False
        assert report.verdict.error.error_class == "BATCH_METADATA_NOT_FOUND"
    else:
        assert moved.silent and report.verdict.restarts


S = 1_000_000  # a second in microseconds


@pytest.mark.parametrize(
    ("duration", "slide", "updated", "fits"),
    [
        (10, 10, {(0, 10)}, True),  # tumbling: a row is in one window
        (10, 5, {(0, 10)}, False),  # sliding every 5 s: every row of [0, 10) is in [-5, 5) or [5, 15) too
        (10, 5, {(0, 10), (5, 15)}, True),  # a row in [5, 10)
        (10, 5, {(-5, 5), (0, 10)}, True),  # a row in [0, 5)
        (10, 3, {(-6, 4), (-3, 7), (0, 10)}, True),  # a row in [1, 3) is in these three (starts -6, -3, 0)
        (10, 3, {(-3, 7), (0, 10)}, False),  # every time in [0, 10) is in a third window
        (20, 10, {(0, 10)}, True),  # another duration: left to the duration check
    ],
)
def test_a_batch_updates_every_window_its_rows_fall_in(
    duration: int, slide: int, updated: set[tuple[int, int]], fits: bool
) -> None:
    from ckptfix.audit.queryshape import WindowShape
    from ckptfix.audit.rules_query import _rows_fit

    window = WindowShape(0, duration * S, slide * S, 0)
    micros = {(a * S, b * S) for a, b in updated}
    assert all(_rows_fit(w, micros, window) for w in micros) is fits
