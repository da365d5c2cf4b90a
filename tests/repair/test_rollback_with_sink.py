"""``ckptfix rollback --to-batch N --sink OUT --with-sink``: the file sink rolled back with the checkpoint.

The sinks are written by live PySpark (``FileStreamSink``, JSON, one input file per batch) or are the committed
Spark 3.5.9 fixture; the files a plan must delete are read here from the sink's own log (``_spark_metadata/<b>``:
``v1`` then one JSON object per line whose ``path`` is the data file's URL), never from ckptfix.
"""

from __future__ import annotations

import json
import os
import shutil
import tarfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pytest
from typer.testing import CliRunner

from ckptfix.audit import audit
from ckptfix.cli.main import app
from ckptfix.repair import engine
from ckptfix.repair.rollback import plan_rollback
from ckptfix.storage import Location
from tests.support.cli import run_cli
from tests.support.trees import tree

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
BATCHES = 6


def _age(root: Path, seconds: float = 3600) -> None:
    when = time.time() - seconds
    for p in [root, *root.rglob("*")]:
        os.utime(p, (when, when))


def _write_sink(spark: Any, root: Path, batches: int = BATCHES) -> tuple[Path, Path]:
    """(checkpoint, output): ``batches`` batches of one JSON input file each, through Spark's file sink."""
    ckpt, input_dir, output = root / "ckpt", root / "input", root / "out"
    input_dir.mkdir(parents=True)
    for i in range(batches):
        rows = [{"id": i * 10 + j, "value": j} for j in range(3)]
        (input_dir / f"f{i:02d}.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    query = (
        spark.readStream.schema("id LONG, value LONG")
        .option("maxFilesPerTrigger", 1)
        .json(str(input_dir))
        .writeStream.format("json")
        .option("path", str(output))
        .option("checkpointLocation", str(ckpt))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(180)
    assert query.exception() is None, query.exception()
    return ckpt, output


def _sink_log(output: Path) -> dict[str, list[str]]:
    """``_spark_metadata/<name>`` -> the local paths (relative to ``output``) of the files it adds."""
    out = {}
    for p in sorted((output / "_spark_metadata").iterdir()):
        if p.name.startswith("."):
            continue
        lines = p.read_text().splitlines()
        assert lines[0] == "v1"
        out[p.name] = [
            Path(unquote(urlparse(json.loads(ln)["path"]).path)).relative_to(output).as_posix() for ln in lines[1:]
        ]
    return out


def _with_sidecars(output: Path, rels: list[str]) -> list[str]:
    out = []
    for rel in rels:
        d, _, name = rel.rpartition("/")
        crc = f"{d}/.{name}.crc" if d else f".{name}.crc"
        out += [rel] + ([crc] if (output / crc).exists() else [])
    return out


def _invoke(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


@pytest.mark.spark
def test_dry_run_apply_and_undo_of_a_file_sink(spark: Any, tmp_path: Path) -> None:
    ckpt, output = _write_sink(spark, tmp_path)
    log = _sink_log(output)
    assert sorted(log, key=int) == [str(b) for b in range(BATCHES)]
    N = 2
    doomed_logs = _with_sidecars(output, [f"_spark_metadata/{b}" for b in range(N + 1, BATCHES)])
    doomed_data = _with_sidecars(output, [f for b in range(N + 1, BATCHES) for f in log[str(b)]])
    assert len(doomed_data) >= BATCHES - N - 1  # every batch wrote a file

    # Spark wrote both a moment ago: the checkpoint's liveness check refuses, and once it is aged, the sink's
    _age(ckpt)
    live = _invoke("rollback", str(ckpt), "--to-batch", str(N), "--sink", str(output), "--with-sink", "--apply")
    assert live.exit_code == 2, live.output
    assert "is the query running?" in live.stderr and str(output) in live.stderr
    _age(output)

    before_ckpt, before_out = tree(ckpt), tree(output)
    dry = _invoke("rollback", str(ckpt), "--to-batch", str(N), "--sink", str(output), "--with-sink")
    assert dry.exit_code == 0, dry.output
    assert tree(ckpt) == before_ckpt and tree(output) == before_out
    assert not (output / "_ckptfix").exists() and not (ckpt / "_ckptfix").exists()
    assert f"Plan for {output}" in dry.stdout and f"Plan for {ckpt}" in dry.stdout
    for rel in doomed_logs + doomed_data:  # each file on its line, or in its directory's group of deletions
        if rel.rsplit("/", 1)[-1].startswith("."):
            continue  # a Hadoop sidecar joins its file's line ("and its .crc")
        folder = rel.rsplit("/", 1)[0] if "/" in rel else "."
        assert f"delete {rel} " in dry.stdout or f" files in {folder}/" in dry.stdout, rel

    result = plan_rollback(str(ckpt), N, "4.3", sink_path=str(output), with_sink=True)
    assert result.sink_plan is not None and result.sink == str(output)
    assert [a.path for a in result.sink_plan.actions] == doomed_logs + doomed_data  # the log entries first
    assert all(a.op == "delete" for a in result.sink_plan.actions)

    applied = _invoke(
        "rollback", str(ckpt), "--to-batch", str(N), "--sink", str(output), "--with-sink", "--apply", "-f", "json"
    )
    assert applied.exit_code == 0, applied.output
    doc = json.loads(applied.stdout)
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((Path(__file__).parents[2] / "docs/schemas/plan.schema.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(doc)
    assert [a["path"] for a in doc["sink_plan"]["actions"]] == doomed_logs + doomed_data
    sink_run, ckpt_run = doc["sink_applied_run"], doc["applied_run"]
    assert sink_run and ckpt_run and doc["verdict_after"]["restarts"] is True
    after = tree(output)
    assert set(before_out) - set(after) == set(doomed_logs + doomed_data)
    assert all(after[p] == before_out[p] for p in after)
    assert (output / "_ckptfix" / "runs" / sink_run / "journal.jsonl").is_file()
    assert sorted(_sink_log(output), key=int) == [str(b) for b in range(N + 1)]
    assert sorted(int(p.name) for p in (ckpt / "offsets").iterdir() if p.name.isdigit()) == list(range(N + 1))
    assert [f.rule_id for f in audit(str(ckpt), "4.3", sink_path=str(output)).findings if "SINK" in f.rule_id] == []
    # Spark's reader lists what the log names: the rows of batches 0..N only (the backups in _ckptfix/ are skipped)
    want = sorted(i * 10 + j for i in range(N + 1) for j in range(3))
    assert sorted(r.id for r in spark.read.json(str(output)).collect()) == want

    # undo: the checkpoint first, then the sink; every byte of both comes back
    for where, run in ((ckpt, ckpt_run), (output, sink_run)):
        undone = _invoke("undo", str(where), run)
        assert undone.exit_code == 0, undone.output
    assert tree(output) == before_out and tree(ckpt) == before_ckpt


@pytest.mark.spark
def test_text_output_names_both_runs_and_the_crash_window_state(spark: Any, tmp_path: Path) -> None:
    ckpt, output = _write_sink(spark, tmp_path, batches=4)
    _age(ckpt)
    _age(output)
    # the first half alone (what a crash between the two runs leaves): the sink's run, applied by the engine
    result = plan_rollback(str(ckpt), 1, "4.3", sink_path=str(output), with_sink=True)
    assert result.sink_plan is not None
    engine.apply(result.sink_plan, Location(str(output)), Location(str(output / "_ckptfix")))
    found = {f.rule_id: f for f in audit(str(ckpt), "4.3", sink_path=str(output)).findings}
    assert "SINK-BEHIND" in found and "SINK-AHEAD" not in found  # behind, never ahead: nothing is skipped
    assert "--with-sink" in found["SINK-BEHIND"].fix
    # the same command finishes the job: the sink's plan is empty, the checkpoint's is applied
    done = _invoke("rollback", str(ckpt), "--to-batch", "1", "--sink", str(output), "--with-sink", "--apply")
    assert done.exit_code == 0, done.output
    assert f"The file sink {output} holds no batch to roll back." in done.stdout
    assert "now: Spark" in done.stdout and "will restart this checkpoint" in done.stdout
    assert [f.rule_id for f in audit(str(ckpt), "4.3", sink_path=str(output)).findings if "SINK" in f.rule_id] == []

    # and a run of both at once names both runs and how to undo each
    ckpt2, output2 = _write_sink(spark, tmp_path / "two", batches=4)
    _age(ckpt2)
    _age(output2)
    both = _invoke("rollback", str(ckpt2), "--to-batch", "1", "--sink", str(output2), "--with-sink", "--apply")
    assert both.exit_code == 0, both.output
    lines = [ln for ln in both.stdout.splitlines() if "rolled back as run" in ln]
    assert len(lines) == 2 and f"`ckptfix undo {output2} " in lines[0] and f"`ckptfix undo {ckpt2} " in lines[1]


@pytest.mark.spark
def test_a_compacted_entry_above_the_batch(spark: Any, tmp_path: Path) -> None:
    """Hunt 11, F2: a compaction above N lists the files of batches <= N too; with the entries the shortened log
    needs still there, the rollback deletes it with the rest and keeps the files it still lists, and the restarted
    query ends with every input row exactly once. Where those entries are gone, the compaction would have to be
    rewritten: refused, nothing changed."""
    spark.conf.set("spark.sql.streaming.fileSink.log.compactInterval", "3")
    try:
        ckpt, output = _write_sink(spark, tmp_path / "kept")
        ckpt2, output2 = _write_sink(spark, tmp_path / "cleaned")
    finally:
        spark.conf.unset("spark.sql.streaming.fileSink.log.compactInterval")
    names = set(_sink_log(output))
    assert {"2.compact", "3", "4", "5.compact"} <= names, names  # Spark compacts batches 2 and 5 at interval 3
    for where in (ckpt, output, ckpt2, output2):
        _age(where)
    log = _sink_log(output)
    kept = set(log["2.compact"]) | set(log["3"])
    doomed = _with_sidecars(output, ["_spark_metadata/4", "_spark_metadata/5.compact"])
    doomed += _with_sidecars(output, sorted(set(log["4"]) | (set(log["5.compact"]) - kept)))
    result = plan_rollback(str(ckpt), 3, "4.3", sink_path=str(output), with_sink=True)
    assert result.sink_plan is not None
    assert sorted(a.path for a in result.sink_plan.actions) == sorted(doomed)
    applied = _invoke("rollback", str(ckpt), "--to-batch", "3", "--sink", str(output), "--with-sink", "--apply")
    assert applied.exit_code == 0, applied.output
    (tmp_path / "kept" / "input" / "f99.json").write_text(json.dumps({"id": 990, "value": 0}) + "\n")
    assert _run_again(spark, tmp_path / "kept") is None
    want = sorted([i * 10 + j for i in range(BATCHES) for j in range(3)] + [990])
    assert sorted(r.id for r in spark.read.json(str(output)).collect()) == want

    # Spark's file sink log deletes the entries a compaction covers once they are older than
    # spark.sql.streaming.fileSink.log.cleanupDelay (10 minutes; not triggered within a test run): entry 3 removed as
    # that cleanup does, a log ending at batch 3 has only 5.compact left to list batch 3's files
    (output2 / "_spark_metadata" / "3").unlink()
    (output2 / "_spark_metadata" / ".3.crc").unlink(missing_ok=True)
    before_ckpt, before_out = tree(ckpt2), tree(output2)
    refused = _invoke("rollback", str(ckpt2), "--to-batch", "3", "--sink", str(output2), "--with-sink", "--apply")
    assert refused.exit_code == 2, refused.output
    (line,) = refused.stderr.strip().splitlines()
    assert line.startswith("ckptfix: error: cannot roll the file sink back to batch 3: ")
    assert f"{output2}/_spark_metadata/5.compact is a compacted entry above batch 3" in line and "is gone" in line
    assert tree(ckpt2) == before_ckpt and tree(output2) == before_out
    # a compacted entry at N stays: rolling back to batch 5 leaves the sink as it is
    ok = _invoke("rollback", str(ckpt2), "--to-batch", "5", "--sink", str(output2), "--with-sink")
    assert ok.exit_code == 0, ok.output
    assert "holds no batch to roll back" in ok.stdout


def test_refuses_data_files_outside_the_output_path(tmp_path: Path) -> None:
    """The committed Spark 3.5.9 file sink, extracted elsewhere: its log names the files where Spark wrote them
    (the generator's own work directory), as a sink copied or moved to a new path does."""
    with tarfile.open(FIXTURES / "spark-3.5.9" / "filesink.tar.gz") as tar:
        tar.extractall(tmp_path, filter="tar")
    ckpt, output = tmp_path / "ckpt", tmp_path / "output"
    first = json.loads((output / "_spark_metadata" / "4").read_text().splitlines()[1])["path"]
    assert not first.startswith(f"file://{output}/")
    before_ckpt, before_out = tree(ckpt), tree(output)
    refused = _invoke(
        "rollback", str(ckpt), "--to-batch", "3", "--target-spark", "3.5", "--sink", str(output), "--with-sink"
    )
    assert refused.exit_code == 2, refused.output
    (line,) = refused.stderr.strip().splitlines()
    assert f"_spark_metadata/4 adds {first}, outside the output path {output}" in line
    assert tree(ckpt) == before_ckpt and tree(output) == before_out


def test_with_sink_needs_a_sink_and_no_into(tmp_path: Path) -> None:
    with tarfile.open(FIXTURES / "spark-3.5.9" / "filesink.tar.gz") as tar:
        tar.extractall(tmp_path, filter="tar")
    ckpt = tmp_path / "ckpt"
    no_sink = _invoke("rollback", str(ckpt), "--to-batch", "3", "--with-sink")
    assert no_sink.exit_code == 2 and "--with-sink: expected --sink OUT" in no_sink.stderr
    into = _invoke(
        "rollback", str(ckpt), "--to-batch", "3", "--sink", str(tmp_path / "output"), "--with-sink", "--into", "x"
    )
    assert into.exit_code == 2 and "--with-sink cannot go with --into" in into.stderr


def test_the_refusal_without_with_sink_advises_by_sink_kind(tmp_path: Path) -> None:
    with tarfile.open(FIXTURES / "spark-3.5.9" / "filesink.tar.gz") as tar:
        tar.extractall(tmp_path, filter="tar")
    ckpt, output = tmp_path / "ckpt", tmp_path / "output"
    refused = _invoke("rollback", str(ckpt), "--to-batch", "3", "--target-spark", "3.5", "--sink", str(output))
    assert refused.exit_code == 2
    line = refused.stderr.strip()
    assert (
        f"--to-batch 3 --sink {output} --with-sink" in line and "a new checkpoint that writes to a new output" in line
    )
    # a new checkpoint into the same file sink is skipped just the same; this checkpoint into a new path leaves a log
    # that starts past batch 0 (damage hunt 9, D23: reading the output fails on 4.3.0)
    assert "not a new checkpoint into the same path" in line and "nor this checkpoint into a new path" in line


def _own_temps(root: Path) -> list[str]:
    from ckptfix.storage import OWN_TEMP

    return [str(p.relative_to(root)) for p in root.rglob("*") if OWN_TEMP.match(p.name)]


def _spark_tree(root: Path) -> dict[str, str]:
    return {p: h for p, h in tree(root).items() if not p.startswith("_ckptfix/")}


def _recover(ckpt: Path, output: Path, rollback: list[str]) -> None:
    """The documented recovery of a killed ``rollback --with-sink --apply`` (docs/repair.md): finish an
    interrupted run of the sink, then of the checkpoint, then run the same command again."""
    for where in (output, ckpt):
        runs = engine.Runs(Location(str(where / "_ckptfix")))
        if any(runs.info(r).status == "incomplete" for r in runs.run_ids()):
            resumed = _invoke("apply", "--resume", str(where), "--force")
            assert resumed.exit_code == 0, resumed.output
    again = _invoke(*rollback)
    assert again.exit_code == 0, again.output


@pytest.mark.spark
def test_a_kill_at_any_write_of_either_run_is_recovered(spark: Any, tmp_path: Path) -> None:
    """Issue 16: SIGKILL after the n-th durable write of ``rollback --with-sink --apply`` (the crash hook counts
    the writes of both runs, the sink's then the checkpoint's, in one process), for every n (every
    CKPTFIX_CRASH_STEP-th in the suite, default 4; 1 in the battery). After the documented recovery both trees are
    sha256-identical to an uninterrupted rollback's, with no stray ckptfix temp file."""
    import shutil
    import signal

    ckpt, out = _write_sink(spark, tmp_path / "work")  # the sink's log names absolute paths: restored in place
    _age(ckpt)
    _age(out)
    shutil.copytree(ckpt, tmp_path / "snap" / "ckpt")
    shutil.copytree(out, tmp_path / "snap" / "out")
    N = 2
    cmd = ["rollback", str(ckpt), "--to-batch", str(N), "--sink", str(out), "--with-sink"]

    def fresh(name: str) -> tuple[Path, Path, list[str]]:
        for where in (ckpt, out):
            shutil.rmtree(where)
            shutil.copytree(tmp_path / "snap" / where.name, where)
        return ckpt, out, cmd

    ckpt, out, cmd = fresh("reference")
    done = _invoke(*cmd, "--apply", "--force")
    assert done.exit_code == 0, done.output
    want_ckpt, want_out = _spark_tree(ckpt), _spark_tree(out)
    step = int(os.environ.get("CKPTFIX_CRASH_STEP", "4"))
    n, killed = 1, 0
    while True:
        ckpt, out, cmd = fresh(f"kill-{n}")
        child = run_cli(*cmd, "--apply", "--force", crash_after=n)
        if child.returncode == 0:
            break  # n is past the last write
        assert child.returncode == -signal.SIGKILL, child.stderr[-1500:]
        killed += 1
        _recover(ckpt, out, [*cmd, "--apply", "--force"])
        assert (_spark_tree(ckpt), _spark_tree(out)) == (want_ckpt, want_out), f"killed after write {n}"
        assert _own_temps(ckpt) == [] and _own_temps(out) == [], f"killed after write {n}"
        n += step
    assert killed >= 5  # both runs were cut: the sink's deletes, then the checkpoint's


def _run_again(spark: Any, root: Path) -> BaseException | None:
    """The query of :func:`_write_sink` restarted on its checkpoint (availableNow): the error it stops with."""
    query = (
        spark.readStream.schema("id LONG, value LONG")
        .option("maxFilesPerTrigger", 1)
        .json(str(root / "input"))
        .writeStream.format("json")
        .option("path", str(root / "out"))
        .option("checkpointLocation", str(root / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination(180)
    except Exception as exc:  # the StreamingQueryException Spark raises: its text is the evidence
        return exc
    return query.exception()


@pytest.mark.spark
def test_truncated_newest_source_entry_is_rewritten_by_spark(spark: Any, tmp_path: Path) -> None:
    """Repair hunt 10, W15: the file source's newest log entry cut in half. Spark fails at the restart; the audit's
    advice, a rollback to the batch before the one that read it (with the sink), deletes that entry with the rest,
    and the restarted query writes it again and ends with every input row exactly once."""
    ckpt, output = _write_sink(spark, tmp_path)
    entry = ckpt / "sources" / "0" / str(BATCHES - 1)
    data = entry.read_bytes()
    entry.write_bytes(data[: len(data) - 20])
    (entry.parent / f".{entry.name}.crc").unlink(missing_ok=True)
    damaged = tmp_path / "damaged"
    shutil.copytree(tmp_path, damaged, ignore=shutil.ignore_patterns("damaged"))
    error = _run_again(spark, damaged)
    assert error is not None and "end-of-input" in str(error), error

    _age(ckpt)
    _age(output)
    report = audit(str(ckpt), "4.3", sink_path=str(output))
    (finding,) = [f for f in report.findings if f.rule_id == "SRC-LOG-UNREADABLE"]
    N = BATCHES - 2
    assert f"--to-batch {N} --sink {output} --with-sink" in finding.fix, finding.fix
    result = plan_rollback(str(ckpt), N, "4.3", sink_path=str(output), with_sink=True)
    assert f"sources/0/{BATCHES - 1}" in [a.path for a in result.plan.actions if a.op == "delete"]
    applied = _invoke("rollback", str(ckpt), "--to-batch", str(N), "--sink", str(output), "--with-sink", "--apply")
    assert applied.exit_code == 0, applied.output

    (tmp_path / "input" / "f99.json").write_text(json.dumps({"id": 990, "value": 0}) + "\n")
    assert _run_again(spark, tmp_path) is None
    want = sorted([i * 10 + j for i in range(BATCHES) for j in range(3)] + [990])
    assert sorted(r.id for r in spark.read.json(str(output)).collect()) == want
