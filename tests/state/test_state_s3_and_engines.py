"""The state reader through moto's S3 server (s3fs), and the Spark engine against the local one."""

from __future__ import annotations

from typing import Any

import pytest

from ckptfix.repair import engine
from ckptfix.repair.rebuild import plan_rebuild
from ckptfix.state.read import read_changes, read_state
from ckptfix.storage import Location
from tests.state.test_read_fixtures import COUNTS, FIXTURES, GIVEN, LISTS, counts


def canon(rows: Any) -> list[str]:
    from ckptfix.state.export import to_json_line

    return sorted(to_json_line(r) for r in rows)


@pytest.mark.s3
def test_read_changes_and_rebuild_on_s3(s3_bucket: Any) -> None:
    opts = s3_bucket.storage_options
    hdfs = s3_bucket.upload_tree(FIXTURES / "hdfs", "hdfs")
    rocks = s3_bucket.upload_tree(FIXTURES / "rocksdb", "rocksdb")
    tws = s3_bucket.upload_tree(FIXTURES / "tws", "tws")
    for v in (1, 3, 4):
        assert counts(list(read_state(hdfs, version=v, storage_options=opts))) == COUNTS[v]
        assert counts(list(read_state(rocks, version=v, storage_options=opts, **GIVEN))) == COUNTS[v]
    lst = read_state(tws, version=4, state_var="lst", flatten=False, storage_options=opts)
    assert {r["key"]["k"]: len(r["list_value"]) for r in lst} == LISTS[4]
    local = read_changes(str(FIXTURES / "hdfs"), from_batch=0, to_batch=3)
    assert canon(read_changes(hdfs, from_batch=0, to_batch=3, storage_options=opts)) == canon(local)
    result = plan_rebuild(rocks, version=3, storage_options=opts)
    engine.apply(result.plan, Location(rocks, opts), Location(rocks + "/_ckptfix", opts), idle_seconds=0)
    read = read_state(rocks, version=3, storage_options=opts, **GIVEN)
    assert counts(list(read)) == COUNTS[3] and read.chains[0] == "3.zip"


@pytest.mark.spark
def test_spark_engine_gives_the_local_rows(spark: Any) -> None:
    from ckptfix.spark.state_engine import read_state_spark

    for path, kwargs in [
        (FIXTURES / "hdfs", {"version": 3}),
        (FIXTURES / "rocksdb", {"version": 4, **GIVEN}),
        (FIXTURES / "tws", {"version": 4, "state_var": "lst"}),
    ]:
        local = canon(read_state(str(path), **kwargs))
        assert local and canon(read_state_spark(spark, str(path), **kwargs)) == local
        # the writers' path: the tasks' batches (Arrow IPC where decoded in bulk) give the local JSON lines
        assert _lines(read_state_spark(spark, str(path), **kwargs)) == _lines(read_state(str(path), **kwargs))
    changes = read_state_spark(spark, str(FIXTURES / "hdfs"), changes=True, from_batch=0, to_batch=3)
    assert canon(changes) == canon(read_changes(str(FIXTURES / "hdfs"), from_batch=0, to_batch=3))
    changes = read_state_spark(spark, str(FIXTURES / "hdfs"), changes=True, from_batch=0, to_batch=3)
    assert _lines(changes) == _lines(read_changes(str(FIXTURES / "hdfs"), from_batch=0, to_batch=3))


@pytest.mark.spark
def test_spark_engine_without_pyarrow_on_the_driver_sends_rows(spark: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--engine spark -f jsonl` on a driver without the [arrow] extra: the writers' ``batches()`` gives lists of
    row dicts (no ImportError), the same rows as the local engine."""
    import sys

    from ckptfix.spark.state_engine import read_state_spark

    path, kwargs = FIXTURES / "hdfs", {"version": 3}
    read = read_state_spark(spark, str(path), **kwargs)
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # `import pyarrow` raises ImportError on the driver
    items = list(read.rows.batches())
    assert items and all(isinstance(i, list) for i in items)
    assert canon([r for i in items for r in i]) == canon(read_state(str(path), **kwargs))


def _lines(read: Any) -> str:
    """JSON lines as `state read -f jsonl` writes them (through ``batches()``), with the number of Arrow batches."""
    import io

    import pyarrow as pa

    from ckptfix.state.export import write_jsonl

    items = list(read.rows.batches())
    text = io.StringIO()
    write_jsonl(_Given(items), text, read.columns, read.schemas)
    return f"{sum(isinstance(i, pa.RecordBatch) for i in items)} arrow batches\n{text.getvalue()}"


class _Given(list):  # type: ignore[type-arg]
    def batches(self) -> Any:
        return iter(self)


@pytest.mark.s3
def test_jobs_on_s3_read_in_one_process_and_say_so(s3_bucket: Any) -> None:
    """New-user trial 3: `state read --jobs 2` on S3 forked two readers, whose S3 client is not fork-safe: exit 2,
    "storage error: This class is not fork-safe", blamed on a log file. A remote store is read in one process, the
    rows are the local read's, and a note says why --jobs was not followed."""
    import json
    import os

    from tests.support.cli import run_cli

    two = FIXTURES.parent / "state_rowchecksum" / "hdfs"  # real 4.3 checkpoint, 2 partitions
    hdfs = s3_bucket.upload_tree(two, "hdfs-jobs")
    env_opts = json.dumps(s3_bucket.storage_options)
    done = run_cli("state", "read", hdfs, "--jobs", "2", env={**os.environ, "CKPTFIX_STORAGE_OPTIONS": env_opts})
    assert done.returncode == 0, done.stderr
    local = run_cli("state", "read", str(two))
    assert sorted(done.stdout.splitlines()) == sorted(local.stdout.splitlines()) and done.stdout
    assert "--jobs 2: reading in one process (the client of a remote store does not survive a fork)" in done.stderr
