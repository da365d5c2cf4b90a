"""`ckptfix async-off` on real Spark (the session fixture's 4.x): the documented sequence turns a real async
checkpoint that fails a synchronous restart into one that restarts, with exactly-once output.

One async base is built per module into its own directory (its input directory must not see files added by
other tests: a copy of the base has consumed input files 0..9, and the no-new-data case needs exactly those).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ckptfix.audit import audit
from ckptfix.repair import engine
from ckptfix.storage import Location
from tests.spark.harness import build_base, copy_base, restart
from tests.spark.queries import SCENARIOS, input_file, write_input_files
from tests.spark_async.helpers import cli

Q = "tests.spark_async.queries.stateless"
QFILE = str(Path(__file__).parent / "queries" / "stateless.py")
NEW_FILES = range(10, 40)  # pre-placed; maxFilesPerTrigger=1 -> one batch per file; enough that step 2 (which
# stops only once it has seen 2 commits) cannot use them all up and leave --verify without data


@pytest.fixture(scope="module")
def base(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    return build_base(spark, SCENARIOS["async"], tmp_path_factory.mktemp("async-off-base"))


@pytest.fixture
def copy(
    base: tuple[Path, Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Path, Path, Path]]:
    ckpt, input_dir, output_dir = copy_base(base, tmp_path / "copy")
    monkeypatch.setenv("CKPTFIX_TEST_ASYNC_INPUT", str(input_dir))
    monkeypatch.setenv("CKPTFIX_TEST_ASYNC_OUTPUT", str(output_dir))
    yield ckpt, input_dir, output_dir


def tree(ckpt: Path) -> dict[str, str]:
    """sha256 of every file Spark owns (ckptfix's own _ckptfix/ excluded)."""
    return {
        str(p.relative_to(ckpt)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(ckpt.rglob("*"))
        if p.is_file() and p.relative_to(ckpt).parts[0] != "_ckptfix"
    }


def gap_rules(ckpt: Path) -> list[str]:
    return [f.rule_id for f in audit(str(ckpt)).findings if f.rule_id == "LOG-ASYNC-GAP"]


def test_sequence_fixes_a_real_async_checkpoint_and_resumes(
    spark: Any,
    base: tuple[Path, Path, Path],
    copy: tuple[Path, Path, Path],
    tmp_path: Path,
    monkeypatch: Any,
    capsys: Any,
) -> None:
    ckpt, input_dir, output_dir = copy
    assert gap_rules(ckpt) == ["LOG-ASYNC-GAP"]
    # the failure this command exists for: a naive restart with tracking off
    naive_ckpt, _, naive_out = copy_base(base, tmp_path / "naive")
    naive = restart(spark, "async", naive_ckpt, input_dir, naive_out, new_files=0)
    assert not naive.ok and "doesn't exist" in naive.text, naive.text[:2000]

    write_input_files(input_dir, NEW_FILES.start, len(NEW_FILES))
    try:
        # step 2 done, then the run is interrupted (test hook) ...
        monkeypatch.setenv("CKPTFIX_TEST_ASYNC_OFF_STOP_AFTER", "run")
        began = time.time()
        code, out, err = cli(
            capsys,
            "async-off",
            str(ckpt),
            "--query",
            f"{Q}:build",
            "--apply",
            "--idle-seconds",
            "0",
            "--timeout",
            "180",
            "--format",
            "json",
        )
        assert code == 2, err
        assert "stopped after step run" in json.loads(out)["error"]["message"]
        runs = engine.Runs(Location(str(ckpt / "_ckptfix")))  # the repair engine's journal, as for repairs
        (run_id,) = runs.run_ids()
        info = runs.info(run_id)
        assert info.status == "incomplete" and runs.plan_of(run_id).driver == "async-off"
        (ran,) = [e for e in info.events if e["event"] == "step" and e["step"] == "run" and e["status"] == "done"]
        new = ran["new_batches"]
        assert len(new) >= 2 and min(new) == runs.plan_of(run_id).latest_commit + 1
        # a new --apply run refuses while an interrupted one exists
        monkeypatch.delenv("CKPTFIX_TEST_ASYNC_OFF_STOP_AFTER")
        code, _, err = cli(
            capsys, "async-off", str(ckpt), "--query", f"{Q}:build", "--apply", "-q", "--idle-seconds", "0"
        )
        assert code == 2 and "--resume" in err
        # ... and --resume continues at step 3 (the query is not run with tracking on again)
        code, out, err = cli(
            capsys,
            "async-off",
            str(ckpt),
            "--query",
            f"{Q}:build",
            "--resume",
            "--verify",
            "--idle-seconds",
            "0",
            "--timeout",
            "180",
            "--format",
            "json",
        )
        assert code == 0, err
        doc = json.loads(out)["async_off"]
        assert doc["status"] == "done" and doc["run_id"] == run_id
        assert runs.info(run_id).status == "complete"
        # what Spark wrote in the sequence is ckptfix's own doing for the idle guard of the next command
        loc, since = Location(str(ckpt)), time.time() - began  # writes since the first async-off call
        with pytest.raises(engine.LiveQuery):
            engine.check_recent_writes(loc, loc.list_tree(), since)
        engine.check_recent_writes(loc, loc.list_tree(), since, engine.own_writes(runs.loc))
        assert doc["steps"] == {"preflight": "done", "run": "done", "check": "done", "verify": "done"}
        assert doc["verified"] is True
        assert not [e for e in doc["events"] if e["step"] == "run" and e["kind"] == "start"]
        assert [e["step"] for e in doc["events"] if e["kind"] == "start"] == ["preflight", "check", "verify"]
        assert "check" in err and "verify" in err  # progress on stderr as it happened
        assert gap_rules(ckpt) == []
        # a plain restart with tracking off now works and the sink holds every input row exactly once
        after = restart(spark, "async", ckpt, input_dir, output_dir, new_files=0)
        assert after.ok, after.text[:2000]
        assert after.correct is True, after.detail
    finally:
        for i in NEW_FILES:
            input_file(input_dir, i).unlink(missing_ok=True)


def test_no_new_input_is_detected_and_the_offline_repair_offered(copy: tuple[Path, Path, Path], capsys: Any) -> None:
    ckpt, input_dir, _ = copy
    assert sorted(p.name for p in input_dir.glob("part-*.json"))[-1] == "part-0009.json"  # nothing new to read
    args = ["async-off", str(ckpt), "--query", f"{QFILE}:build", "--apply", "--idle-seconds", "0", "--timeout", "8"]
    numbered = [int(p.name) for p in (ckpt / "offsets").iterdir() if p.name.isdigit()]
    source_log = [p.name.removesuffix(".compact") for p in (ckpt / "sources" / "0").iterdir()]
    if max(int(n) for n in source_log if n.isdigit()) > max(numbered):
        # the async base never persisted the offsets of its last batch: any restart replays it (reference §4),
        # so the first run sees exactly one batch
        code, out, err = cli(capsys, *args)
        assert code == 1, err
        assert "only 1 new batch(es) ran in 8 s (wanted 2)" in err and f"ckptfix repair {ckpt}" in out
    before = tree(ckpt)
    code, out, err = cli(capsys, *args)
    assert code == 1, err
    assert "no new data arrived in 8 s; no batch ran" in err
    assert f"ckptfix repair {ckpt}" in out
    # Spark wrote nothing: no batch ran, and metadata/sources already existed
    assert tree(ckpt) == before
    runs = engine.Runs(Location(str(ckpt / "_ckptfix")))
    last = runs.info(runs.run_ids()[-1])
    assert last.status == "failed" and last.events[-1] == {**last.events[-1], "event": "complete", "outcome": "no-data"}


@pytest.mark.parametrize(
    ("func", "reason"),
    [
        ("available_now", "Async progress tracking cannot be used with AvailableNow trigger"),
        ("once", "Async progress tracking cannot be used with Once trigger"),
        ("file_sink", "Sink FileSink[file:"),
        ("foreach_batch_no_override", "Sink ForeachBatchSink does not support async progress tracking"),
        ("stateful", "Stateful streaming queries does not support async progress tracking at this moment."),
    ],
)
def test_refusals_quote_spark_before_anything_runs(
    spark: Any, copy: tuple[Path, Path, Path], func: str, reason: str, capsys: Any
) -> None:
    ckpt = copy[0]
    before = tree(ckpt)
    for fmt in ("text", "json"):
        code, out, err = cli(
            capsys,
            "async-off",
            str(ckpt),
            "--query",
            f"{Q}:{func}",
            "--apply",
            "-q",
            "--idle-seconds",
            "0",
            "--format",
            fmt,
        )
        assert code == 2
        message = json.loads(out)["error"]["message"] if fmt == "json" else err.strip()
        assert reason in message and "refuses asynchronous progress tracking" in message
        if fmt == "text":
            assert len(err.strip().splitlines()) == 1 and not out
    assert not spark.streams.active
    assert tree(ckpt) == before and not (ckpt / "_ckptfix").exists()


@pytest.mark.parametrize(
    ("spec", "expect"),
    [
        ("tests.spark_async.queries.no_such_module:build", "importing tests.spark_async.queries.no_such_module failed"),
        (str(Path(__file__).parent / "queries" / "broken.py") + ":build", "ModuleNotFoundError"),
        (f"{Q}:nope", "expected a function nope"),
        (f"{Q}:NOT_CALLABLE", "expected NOT_CALLABLE to be callable"),
        (f"{Q}:not_writer", "expected an unstarted DataStreamWriter, found pyspark.sql"),
        (f"{Q}:raises", "the function raised RuntimeError: the builder failed on purpose"),
        (f"{Q}:own_checkpoint", "the writer sets checkpointLocation"),
        ("no-colon", "expected MODULE:FUNCTION"),
    ],
)
def test_bad_query_modules_one_line_exit_2(
    spark: Any, copy: tuple[Path, Path, Path], spec: str, expect: str, tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    ckpt = copy[0]
    monkeypatch.setenv("CKPTFIX_TEST_ASYNC_OTHER_INPUT", str(tmp_path / "elsewhere"))
    before = tree(ckpt)
    code, out, err = cli(capsys, "async-off", str(ckpt), "--query", spec, "--apply", "-q", "--idle-seconds", "0")
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and expect in err and "Traceback" not in err
    code, out, _ = cli(capsys, "async-off", str(ckpt), "--query", spec, "--apply", "-q", "--format", "json")
    assert code == 2 and expect in json.loads(out)["error"]["message"]
    assert tree(ckpt) == before and not (ckpt / "_ckptfix").exists()


def test_another_querys_checkpoint_is_refused(
    spark: Any, copy: tuple[Path, Path, Path], tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    ckpt, input_dir, _ = copy
    before = tree(ckpt)
    other = tmp_path / "other-input"
    shutil.copytree(input_dir, other)
    monkeypatch.setenv("CKPTFIX_TEST_ASYNC_OTHER_INPUT", str(other))
    code, _, err = cli(
        capsys, "async-off", str(ckpt), "--query", f"{Q}:other_input", "--apply", "-q", "--idle-seconds", "0"
    )
    assert code == 2
    assert "belongs to another query" in err and f"expected input files under {other}" in err
    wrong_id = "00000000-0000-0000-0000-000000000000"
    code, _, err = cli(
        capsys,
        "async-off",
        str(ckpt),
        "--query",
        f"{Q}:build",
        "--query-id",
        wrong_id,
        "--apply",
        "-q",
        "--idle-seconds",
        "0",
    )
    assert code == 2 and f"expected query id {wrong_id} (--query-id), found " in err
    assert tree(ckpt) == before and not (ckpt / "_ckptfix").exists()


def test_dry_run_by_default_and_idle_check(spark: Any, copy: tuple[Path, Path, Path], capsys: Any) -> None:
    ckpt = copy[0]
    before = tree(ckpt)
    code, out, err = cli(capsys, "async-off", str(ckpt), "--query", f"{Q}:build", "--verify", "--idle-seconds", "0")
    assert code == 0, err
    assert "dry run: nothing was started" in out and "asyncProgressTrackingCheckpointIntervalMs=0" in out
    assert "offsets/" in err  # the audit's finding is reported in the preflight
    # the copy was written by Spark seconds ago: it looks alive under the default idle window
    code, _, err = cli(
        capsys, "async-off", str(ckpt), "--query", f"{Q}:build", "--apply", "-q", "--idle-seconds", "3600"
    )
    assert code == 2 and "is the query running?" in err
    assert not spark.streams.active
    assert tree(ckpt) == before and not (ckpt / "_ckptfix").exists()


@pytest.mark.parametrize("func", ["available_now", "once", "file_sink", "foreach_batch_no_override", "stateful"])
def test_predicted_reason_is_what_spark_raises(
    spark: Any, copy: tuple[Path, Path, Path], func: str, tmp_path: Path
) -> None:
    """The up-front reason equals the text Spark raises when the query is started with tracking on (trigger and
    sink: from start(); stateful: at the first batch, after Spark has already written offsets/0 -- which is why
    ckptfix refuses up front)."""
    from ckptfix.spark.async_off import ASYNC_ENABLED, ASYNC_INTERVAL, inspect_writer, refusals
    from tests.spark_async.queries import stateless

    writer = getattr(stateless, func)(spark)
    (predicted,) = refusals(inspect_writer(writer), spark.version)
    scratch = tmp_path / "scratch"
    writer = writer.option("checkpointLocation", str(scratch)).option(ASYNC_ENABLED, "true").option(ASYNC_INTERVAL, "0")
    raised = None
    try:
        query = writer.start()
    except Exception as exc:  # trigger and sink checks run in start()
        raised = str(exc)
    else:
        try:
            query.processAllAvailable()
        except Exception as exc:  # the stateful check runs at the first batch
            raised = str(exc)
        finally:
            query.stop()
    assert raised is not None
    assert predicted.split(" (operators:", 1)[0] in raised
    if func == "stateful":
        assert (scratch / "offsets" / "0").is_file()  # what running it would have written


pytestmark = pytest.mark.spark  # starts Spark (checked by tests/spark/plugin.py)
