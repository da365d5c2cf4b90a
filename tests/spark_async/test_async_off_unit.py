"""Pieces of async-off that need no JVM: Spark's refusal rules as data, query-module loading, the journal, and
the "another query's checkpoint" checks against a checkpoint written by real Spark (samples/async-sparse: one
rate source)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ckptfix.checkpoint import Checkpoint
from ckptfix.errors import PlanError, QueryModuleError, UsageError
from ckptfix.repair import engine
from ckptfix.spark import async_off as ao
from ckptfix.spark.async_off import load_builder
from ckptfix.spark.async_rules import SourceInfo, WriterInfo, foreign_checkpoint, refusals, same_location
from ckptfix.storage import Location
from tests.unit.realckpt import sample_checkpoint


def info(**kw: object) -> WriterInfo:
    base: dict[str, object] = dict(
        trigger="ProcessingTimeTrigger",
        sink="kafka",
        checkpoint=None,
        sink_override=False,
        sink_path=None,
        sources=(SourceInfo("rate"),),
        stateful_operators=(),
    )
    base.update(kw)
    return WriterInfo(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize("sink", ["kafka", "memory", "console", "noop"])
def test_sinks_spark_accepts_in_both_versions(sink: str) -> None:
    assert refusals(info(sink=sink), "3.5.9") == []
    assert refusals(info(sink=sink), "4.3.0") == []


def test_foreach_sink_is_accepted_by_43_only() -> None:
    # 4.3.0 bytecode lists "ForeachSink"; 3.5.9's does not
    assert refusals(info(sink="foreach"), "4.3.0") == []
    (reason,) = refusals(info(sink="foreach"), "3.5.9")
    assert reason.startswith("Sink foreach does not support async progress tracking (predicted")


def test_file_sink_reason_as_each_version_prints_it() -> None:
    (r43,) = refusals(info(sink="parquet", sink_path="/data/out"), "4.3.0")
    assert r43 == "Sink FileSink[file:/data/out] does not support async progress tracking"
    (r35,) = refusals(info(sink="parquet", sink_path="/data/out"), "3.5.9")
    assert r35 == "Sink FileSink[/data/out] does not support async progress tracking"


def test_override_option_skips_only_the_sink_check() -> None:
    assert refusals(info(sink="foreachBatch", sink_override=True), "4.3.0") == []
    got = refusals(info(sink="foreachBatch", sink_override=True, trigger="AvailableNowTrigger"), "4.3.0")
    assert got == ["Async progress tracking cannot be used with AvailableNow trigger"]


def test_every_reason_is_listed() -> None:
    got = refusals(info(sink="foreachBatch", trigger="OneTimeTrigger", stateful_operators=("StateStoreSave",)), "4.3")
    assert got == [
        "Sink ForeachBatchSink does not support async progress tracking",
        "Async progress tracking cannot be used with Once trigger",
        "Stateful streaming queries does not support async progress tracking at this moment. "
        "(operators: StateStoreSave)",
    ]


def test_load_builder_from_a_file_and_a_module(tmp_path: Path) -> None:
    f = tmp_path / "job.py"
    f.write_text("def build(spark):\n    return ('built', spark)\n")
    assert load_builder(f"{f}:build")("s") == ("built", "s")
    assert load_builder("tests.spark_async.queries.stateless:build").__name__ == "build"


@pytest.mark.parametrize(
    ("spec", "expect"),
    [
        ("nocolon", "expected MODULE:FUNCTION"),
        ("mod:", "expected MODULE:FUNCTION"),
        ("/no/such/file.py:build", "expected a Python file at /no/such/file.py, found none"),
        ("tests.spark_async.queries.nope:build", "ModuleNotFoundError"),
        ("tests.spark_async.queries.stateless:missing", "expected a function missing"),
    ],
)
def test_load_builder_errors(spec: str, expect: str) -> None:
    with pytest.raises(QueryModuleError, match=None) as err:
        load_builder(spec)
    assert expect in str(err.value)


def test_same_location() -> None:
    assert same_location("file:/tmp/x", "/tmp/x/")
    assert same_location("file:///tmp/x", "/tmp/./x")
    assert same_location("s3a://b/ck", "s3://b/ck/")
    assert not same_location("/tmp/x", "/tmp/y")


def _ctx(tmp_path: Path) -> ao._Ctx:
    ckpt = tmp_path / "ck"
    ckpt.mkdir(exist_ok=True)
    loc = Location(str(ckpt))
    runs = engine.Runs(Location(str(ckpt / "_ckptfix")))
    return ao._Ctx(loc.url, "m:f", ao.Options(), loc, runs, ao.Outcome("planned", loc.url, "m:f"), None)


def test_the_run_is_journaled_by_the_repair_engine(tmp_path: Path) -> None:
    """Issue 12: async-off records its run in the engine's journal (no journal of its own): history lists it,
    an interrupted run is found and resumed from its steps, and the engine refuses to resume or undo it, naming
    what to do instead."""
    ctx = _ctx(tmp_path)
    ctx.outcome.baseline = {"latest_offset": 7, "latest_commit": 5}
    ctx.outcome.query_id = "q-1"
    assert ao._interrupted(ctx.runs) is None
    ao._open(ctx)
    ctx.step("preflight", "done")
    ctx.step("run", "done", new_batches=[6, 7])
    run_id = ctx.run_id
    assert run_id is not None and ao._interrupted(ctx.runs) == run_id
    (info,) = [ctx.runs.info(r) for r in ctx.runs.run_ids()]
    assert (info.run_id, info.status, info.actions) == (run_id, "incomplete", 0)
    assert info.fix.startswith("async-off --query m:f")
    assert ctx.runs.plan_of(run_id).driver == "async-off"
    ckpt = ctx.loc
    with pytest.raises(PlanError, match="--query m:f --resume"):
        engine.resume(ckpt, ctx.runs.loc)
    with pytest.raises(PlanError, match="nothing to restore; to go back to where it started, `ckptfix rollback .* 5`"):
        engine.undo(ckpt, ctx.runs.loc, run_id)
    again = _ctx(tmp_path)
    ao._reopen(again, run_id)
    assert again.done == {"preflight", "run"}
    assert again.outcome.new_batches == [6, 7] and again.outcome.baseline["latest_commit"] == 5
    assert again.outcome.query_id == "q-1"
    other = _ctx(tmp_path)
    other.spec = "other:f"
    with pytest.raises(UsageError, match="expected --query m:f as in run"):
        ao._reopen(other, run_id)
    again.finish("done")
    assert ao._interrupted(ctx.runs) is None and ctx.runs.info(run_id).status == "complete"
    failed = _ctx(tmp_path)
    ao._open(failed)
    failed.finish("no-data")
    assert failed.run_id is not None and ctx.runs.info(failed.run_id).status == "failed"


def test_the_idle_guard_knows_the_spark_runs_of_async_off(tmp_path: Path) -> None:
    """Files Spark wrote while async-off ran the query are ckptfix's doing; a write after the run's journaled stop
    is not."""
    ctx = _ctx(tmp_path)
    ao._open(ctx)
    ckpt = ctx.loc
    (tmp_path / "ck" / "commits").mkdir()
    with pytest.raises(engine.LiveQuery, match="commits/0"):
        (tmp_path / "ck" / "commits" / "0").write_text("v1\n{}")
        engine.check_recent_writes(ckpt, ckpt.list_tree(), 120)
    (tmp_path / "ck" / "commits" / "0").unlink()
    ctx.journal(engine.SPARK_START, step="run")
    (tmp_path / "ck" / "commits" / "0").write_text("v1\n{}")  # as Spark writes during the run
    ctx.journal(engine.SPARK_STOP, step="run")
    engine.check_recent_writes(ckpt, ckpt.list_tree(), 120, engine.own_writes(ctx.runs.loc))
    import os
    import time

    later = time.time() + 5
    (tmp_path / "ck" / "commits" / "1").write_text("v1\n{}")
    os.utime(tmp_path / "ck" / "commits" / "1", (later, later))  # after the run stopped: someone else's
    with pytest.raises(engine.LiveQuery, match="commits/1"):
        engine.check_recent_writes(ckpt, ckpt.list_tree(), 120, engine.own_writes(ctx.runs.loc))


def test_foreign_checkpoint_checks_on_a_real_checkpoint() -> None:
    ckpt = Checkpoint.open(str(sample_checkpoint()))
    assert foreign_checkpoint(ckpt, info(), None) == []
    assert foreign_checkpoint(ckpt, info(), ckpt.query_metadata().id) == []
    (why,) = foreign_checkpoint(ckpt, info(sources=(SourceInfo("rate"), SourceInfo("rate"))), None)
    assert "expected 2 source offset(s)" in why and "found 1" in why
    (why,) = foreign_checkpoint(ckpt, info(sources=(SourceInfo("json", "/in"),)), None)
    assert 'expected a file source offset {"logOffset":N}' in why
    (why,) = foreign_checkpoint(ckpt, info(), "not-this-id")
    assert "expected query id not-this-id (--query-id)" in why


@pytest.mark.parametrize(
    ("extra", "expect"),
    [
        (["--conf", "no-equals-sign"], "--conf 'no-equals-sign': expected KEY=VALUE"),
        (["--min-batches", "0"], "--min-batches: expected at least 1, found 0"),
        (["--timeout", "0"], "--timeout: expected a positive number of seconds, found 0.0"),
        (
            ["--query-id", "my-query"],
            "--query-id: expected a UUID like Spark's metadata id (6f1c2a4e-0b9d-4c3e-8f7a-1d2e3f405162), found "
            "'my-query'",
        ),
    ],
)
def test_bad_options_one_line_exit_2(extra: list[str], expect: str, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.spark_async.helpers import cli

    ckpt = str(sample_checkpoint())
    code, out, err = cli(capsys, "async-off", ckpt, "--query", "m:f", *extra)
    assert code == 2 and err.strip() == f"ckptfix: error: {expect}" and not out
    code, out, _ = cli(capsys, "async-off", ckpt, "--query", "m:f", "--format", "json", *extra)
    assert code == 2 and json.loads(out)["error"]["message"] == expect


def test_resume_without_an_interrupted_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.spark_async.helpers import cli

    code, _, err = cli(
        capsys, "async-off", str(sample_checkpoint()), "--query", "m:f", "--resume", "--backup-dir", str(tmp_path)
    )
    assert code == 2 and "expected an interrupted async-off run, found none" in err
