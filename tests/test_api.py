"""The Python API returns what the CLI renders, on checkpoints real Spark wrote.

* ``ckptfix.audit``: the same verdict and findings as ``ckptfix audit -f json`` (samples/async-sparse,
  written by PySpark with async progress tracking);
* ``ckptfix.plan_repair(...).apply()``: the plan ``ckptfix repair`` shows, applied with a backup; the copy
  then audits as restartable and ``ckptfix undo`` restores every byte;
* ``ckptfix.read_state``: a pyarrow Table whose rows are the state Spark 3.5.9's own output implies
  (tests/fixtures/state35, the oracle of tests/state/test_state35.py), and the same rows as dicts without Arrow.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import ckptfix
from ckptfix.cli.main import app
from ckptfix.errors import CkptfixError, FormatError, NotACheckpoint, UsageError
from tests.state.test_state35 import assert_same, extract, got_rows, load, want_rows
from tests.support.cli import run_cli

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "samples" / "async-sparse"


def tree(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in root.rglob("*") if p.is_file()
    }


def cli_json(*args: str) -> dict:
    result = CliRunner().invoke(app, [*args, "--format", "json"])
    return json.loads(result.stdout)


def test_audit_is_the_cli_report() -> None:
    report = ckptfix.audit(str(SAMPLE))
    doc = cli_json("audit", str(SAMPLE), "--quiet")
    assert report.verdict.restarts is False and doc["verdict"]["restarts"] is False
    assert report.verdict.headline == doc["verdict"]["headline"]
    assert [f.rule_id for f in report.findings] == [f["rule_id"] for f in doc["findings"]]
    assert ckptfix.audit(ckptfix.open_checkpoint(str(SAMPLE)), "3.5").target == "3.5"


def test_audit_progress_to_a_plain_callable_names_its_stages() -> None:
    """``progress=print`` shows something (new-user trial: it printed nothing; the audit reports stages only)."""
    lines: list[str] = []
    ckptfix.audit(str(SAMPLE), progress=lines.append)
    assert lines and lines[0] == "listing", lines


def test_a_plan_repr_is_one_line_without_storage_options(tmp_path: Path) -> None:
    """The dataclass repr held every byte the plan would write, and the storage options (secrets on S3)."""
    plan = ckptfix.plan_repair(str(SAMPLE), storage_options={"key": "SECRET"})
    assert repr(plan) == f"<RepairPlan {str(SAMPLE)!r} fix=LOG-ASYNC-GAP 1 write unfixed=0>"
    # the plans that subclass StatePlan had the dataclass repr (storage options included): @dataclass writes a new
    # __repr__ in each subclass unless told repr=False
    sample = str(ROOT / "samples" / "rocksdb-changelog")
    for made in (
        ckptfix.plan_rollback(sample, 10, storage_options={"key": "SECRET"}, idle_seconds=0),
        ckptfix.plan_provider(sample, "hdfs", storage_options={"key": "SECRET"}),
    ):
        assert repr(made).startswith(f"<{type(made).__name__} {sample!r} fix=") and "SECRET" not in repr(made)


class _NoStorage:
    def __getattr__(self, name: str) -> None:
        raise AssertionError(f"repr used the store ({name})")


def test_a_checkpoint_repr_says_what_its_listing_holds(tmp_path: Path) -> None:
    """The url, the last batch and commit, the stateful operators: from the listing, no file read."""
    ckpt = ckptfix.open_checkpoint(str(ROOT / "samples" / "rocksdb-changelog"))  # offsets, commits 0..11; state/0
    ckpt.location.fs = _NoStorage()
    want = f"<Checkpoint '{ROOT}/samples/rocksdb-changelog' last_batch=11 last_commit=11 stateful_operators=1>"
    assert repr(ckpt) == want
    shutil.copytree(SAMPLE, tmp_path / "ckpt", ignore=shutil.ignore_patterns("commits"))  # offsets up to 31
    bare = ckptfix.open_checkpoint(str(tmp_path / "ckpt"))
    assert repr(bare) == f"<Checkpoint '{tmp_path}/ckpt' last_batch=31 last_commit=None stateful_operators=0>"


def test_plan_repair_applies_and_undo_restores(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    shutil.copytree(SAMPLE, ckpt)
    before = tree(ckpt)
    plan = ckptfix.plan_repair(str(ckpt))
    assert not plan.empty and plan.unfixed == []
    assert "LOG-ASYNC-GAP" in plan.describe()
    ours, cli = plan.to_json()["plan"], cli_json("repair", str(ckpt))["plan"]
    # the same plan, made a moment apart (the clock may tick between the two on a loaded machine)
    assert ours.pop("created_at") <= cli.pop("created_at")
    assert ours == cli
    assert tree(ckpt) == before  # planning writes nothing
    run_id = plan.apply(backup_url=str(tmp_path / "backup"), force=True)
    assert plan.audit_after().verdict.restarts is True
    assert tree(ckpt) != before
    undone = CliRunner().invoke(app, ["undo", str(ckpt), run_id, "--backup-dir", str(tmp_path / "backup"), "--force"])
    assert undone.exit_code == 0, undone.output
    assert tree(ckpt) == before


@pytest.mark.parametrize("batch", [0, 2, 4])
def test_read_state_is_what_spark_wrote(tmp_path: Path, batch: int) -> None:
    exp = load("agg_hdfs")
    ckpt = extract("agg_hdfs", tmp_path)
    table = ckptfix.read_state(str(ckpt), operator=0, batch=batch)
    assert table.column_names == ["key", "value", "partition_id"]
    state = exp["state"][str(batch)]
    assert_same(got_rows("agg_hdfs", exp, table.to_pylist()), want_rows("agg_hdfs", state), f"batch {batch}")
    plain = list(ckptfix.read_state(str(ckpt), batch=batch, as_arrow=False))
    assert_same(got_rows("agg_hdfs", exp, plain), want_rows("agg_hdfs", state), f"batch {batch} as dicts")


def test_not_a_checkpoint_is_the_library_error(tmp_path: Path) -> None:
    with pytest.raises(NotACheckpoint):
        ckptfix.open_checkpoint(str(tmp_path))


def test_read_state_refuses_wrong_keywords_naming_them() -> None:
    stateful = str(ROOT / "samples" / "rocksdb-changelog")
    for kwargs, said in (
        ({"operator": "0"}, "read_state: operator: expected an int, found '0'"),
        ({"batch": True}, "read_state: batch: expected an int, found True"),
        ({"bogus": 1}, "found 'bogus'"),
    ):
        with pytest.raises(UsageError, match=re.escape(said)):
            ckptfix.read_state(stateful, **kwargs)


def test_a_missing_path_is_python_s_file_not_found(tmp_path: Path) -> None:
    """As documented in docs/api.md: storage errors are OSErrors, as from open()."""
    with pytest.raises(FileNotFoundError):
        ckptfix.open_checkpoint(str(tmp_path / "nope"))


def test_python_dash_m() -> None:
    proc = subprocess.run([sys.executable, "-m", "ckptfix", "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "audit" in proc.stdout


def test_progress_is_one_protocol(tmp_path: Path) -> None:
    """Issue 12: one progress protocol (ckptfix.progress.Progress) for every long call: the audit's counted
    stages and the engine's steps reach the same object; a plain callable gets the steps' messages."""
    from ckptfix.progress import NullProgress, Progress

    class Record(NullProgress):
        def __init__(self) -> None:
            self.stages: list[str] = []
            self.steps: list[str] = []

        def stage(self, name: str, total: int | None = None) -> None:
            self.stages.append(name)

        def step(self, message: str, **data: object) -> None:
            self.steps.append(message)

    seen = Record()
    assert isinstance(seen, Progress)
    ckptfix.audit(str(SAMPLE), progress=seen)
    assert seen.stages and seen.stages[0] == "listing"
    ckpt = tmp_path / "ckpt"
    shutil.copytree(SAMPLE, ckpt)
    plan = ckptfix.plan_repair(str(ckpt))
    plan.apply(backup_url=str(tmp_path / "backup"), force=True, progress=seen)
    lines: list[str] = []
    (gap,) = [a for a in plan.plan.actions if a.rule == "LOG-ASYNC-GAP"]
    assert any(gap.path in s for s in seen.steps)
    again = ckptfix.plan_repair(str(shutil.copytree(SAMPLE, tmp_path / "again")))
    again.apply(backup_url=str(tmp_path / "backup2"), force=True, progress=lines.append)
    assert lines == seen.steps


def test_plan_repartition_moves_the_state_and_keeps_every_row(tmp_path: Path) -> None:
    """The API's repartition is the CLI's: the same rows after the move (Spark 4.2.1's aggregation), each key now
    in one of the 5 new partitions."""
    import tarfile

    with tarfile.open(ROOT / "tests" / "fixtures" / "spark-4.2.1" / "agg_hdfs.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    url = str(tmp_path / "ckpt")
    before = sorted((r["key"]["key"], r["value"]["count"]) for r in ckptfix.read_state(url, as_arrow=False))
    plan = ckptfix.plan_repartition(url, 5)
    assert plan.sink_plan is None and "STATE-REPARTITION" in plan.describe()
    run_id = plan.apply(backup_url=str(tmp_path / "backup"), force=True)
    assert run_id and plan.sink_run is None
    after = list(ckptfix.read_state(url, as_arrow=False))
    assert sorted((r["key"]["key"], r["value"]["count"]) for r in after) == before
    assert {r["partition_id"] for r in after} <= set(range(5))


def test_plan_repair_takes_the_query_id_the_cli_takes(tmp_path: Path) -> None:
    """A truncated ``metadata``: without the id the plan leaves it unfixed and says what to pass; with
    ``query_id`` (``repair --query-id``) it restores the file with that id, as the CLI's plan does."""
    ckpt = tmp_path / "ckpt"
    shutil.copytree(ROOT / "samples" / "rocksdb-changelog", ckpt)
    (ckpt / "metadata").write_text('{"id":"')
    blind = ckptfix.plan_repair(str(ckpt))
    assert not blind.plan.actions and [(u.rule_id, u.path) for u in blind.unfixed] == [
        ("META-UNREADABLE", f"{ckpt}/metadata")
    ]
    assert "--query-id" in blind.unfixed[0].reason
    assert blind.to_json()["unfixed"] == cli_json("repair", str(ckpt))["unfixed"]
    qid = "0b7a8c1e-2f3d-4e5f-8a9b-0c1d2e3f4a5b"
    plan = ckptfix.plan_repair(str(ckpt), query_id=qid)
    assert [a.path for a in plan.plan.actions if a.path == "metadata"] == ["metadata"]
    cli = CliRunner().invoke(app, ["repair", str(ckpt), "--query-id", qid, "--format", "json"])
    assert cli.exit_code == 0, cli.output
    assert [a["path"] for a in json.loads(cli.output)["plan"]["actions"]] == [a.path for a in plan.plan.actions]
    plan.apply(idle_seconds=0)
    assert json.loads((ckpt / "metadata").read_text().splitlines()[0])["id"] == qid


def test_a_plan_that_leaves_errors_unfixed_is_not_applied_unless_partial(tmp_path: Path) -> None:
    """As `repair --apply` without --partial (repair hunt 10: a partial apply deleted state a committed batch
    wrote, while the blocker stayed): the sample told stateful, its state gone, keeps STATE errors unfixed."""
    ckpt = tmp_path / "ckpt"
    shutil.copytree(SAMPLE, ckpt)
    plan = ckptfix.plan_repair(str(ckpt), stateful=True)
    assert plan.unfixed and plan.plan.actions, plan
    with pytest.raises(UsageError, match="not applied: .* stay unfixed"):
        plan.apply(force=True)
    assert not (ckpt / "_ckptfix").exists()
    assert plan.apply(force=True, partial=True)


def test_a_query_id_that_is_no_uuid_is_a_usage_error() -> None:
    with pytest.raises(UsageError) as refused:
        ckptfix.plan_repair(str(SAMPLE), query_id="my-query")
    assert str(refused.value) == (
        "query_id: expected a UUID like Spark's metadata id (6f1c2a4e-0b9d-4c3e-8f7a-1d2e3f405162), found 'my-query'"
    )


@pytest.mark.parametrize("target", [4.3, 35, b"4.3"])
def test_a_target_that_is_not_a_string_is_a_usage_error(target: object) -> None:
    with pytest.raises(UsageError, match="target_spark: expected a version string such as"):
        ckptfix.audit(str(ROOT / "samples" / "rocksdb-changelog"), target_spark=target)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("spark.sql.shuffle.partitions", "abc", "a positive integer"),
        ("spark.sql.shuffle.partitions", "0", "a positive integer"),
        ("spark.sql.shuffle.partitions", "2.5", "a positive integer"),
        ("spark.sql.shuffle.partitions", "99999999999", "a positive integer"),
        ("spark.sql.streaming.stateStore.checkpointFormatVersion", "3", "1 or 2"),
        ("spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled", "yes", "true or false"),
        ("spark.sql.streaming.stateStore.autoSnapshotRepair.enabled", "1", "true or false"),
    ],
)
def test_a_conf_value_spark_refuses_is_a_usage_error(key: str, value: str, expected: str) -> None:
    """Only for the confs ckptfix interprets; the CLI's --conf and the API's session_conf say the same."""
    rocks = str(ROOT / "samples" / "rocksdb-changelog")
    with pytest.raises(UsageError) as refused:
        ckptfix.audit(rocks, session_conf={key: value})
    assert str(refused.value) == (
        f"session_conf {key}: expected {expected} (Spark refuses another value), found {value!r}"
    )
    cli = CliRunner().invoke(app, ["audit", rocks, "--conf", f"{key}={value}", "-q"])
    assert cli.exit_code == 2 and cli.stdout == ""
    assert (
        cli.stderr
        == f"ckptfix: error: --conf {key}: expected {expected} (Spark refuses another value), found {value!r}\n"
    )


def test_a_conf_value_is_read_as_spark_reads_it() -> None:
    """Trimmed, booleans in any case (Spark's ConfigHelpers); keys ckptfix does not interpret pass untouched."""
    rocks = str(ROOT / "samples" / "rocksdb-changelog")
    told = {
        "spark.sql.shuffle.partitions": " 2 ",
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "TRUE",
        "spark.some.other.key": "whatever",
    }
    assert ckptfix.audit(rocks, session_conf=told).verdict.restarts is True
    cli = CliRunner().invoke(app, ["audit", rocks, *(f"--conf={k}={v}" for k, v in told.items()), "-q"])
    assert cli.exit_code == 0, cli.output


def test_paths_are_taken_as_pathlib_paths(tmp_path: Path) -> None:
    """A new user's first call was ``open_checkpoint(Path(...))``: AttributeError. Every entry point takes a
    ``pathlib.Path`` wherever it takes a location."""
    assert ckptfix.open_checkpoint(SAMPLE).last_batch == ckptfix.open_checkpoint(str(SAMPLE)).last_batch
    assert ckptfix.audit(SAMPLE).verdict.headline == ckptfix.audit(str(SAMPLE)).verdict.headline
    copy = tmp_path / "ckpt"
    shutil.copytree(SAMPLE, copy)
    plan = ckptfix.plan_repair(copy)
    assert plan.url == str(copy) and not plan.empty
    plan.apply(backup_url=tmp_path / "backup", idle_seconds=0)
    assert ckptfix.audit(copy).verdict.restarts is True
    rows = list(ckptfix.read_state(ROOT / "samples" / "rocksdb-changelog", operator=0, as_arrow=False))
    assert rows == list(ckptfix.read_state(str(ROOT / "samples" / "rocksdb-changelog"), operator=0, as_arrow=False))


def test_rollback_history_and_undo(tmp_path: Path) -> None:
    """``plan_rollback`` is ``ckptfix rollback``, ``history`` and ``undo`` are the commands of the same names: on a
    copy of the RocksDB sample (offsets and commits 0..11, state up to version 12), roll back to batch 8; the
    later logs and state versions go, the run is listed, and undo restores every byte."""
    copy = tmp_path / "ckpt"
    shutil.copytree(ROOT / "samples" / "rocksdb-changelog", copy)
    before = tree(copy)
    plan = ckptfix.plan_rollback(copy, 8, idle_seconds=0)
    doc = cli_json("rollback", str(copy), "--to-batch", "8", "--idle-seconds", "0")
    assert [a.path for a in plan.plan.actions] == [a["path"] for a in doc["plan"]["actions"]]
    run_id = plan.apply(idle_seconds=0)
    after = ckptfix.open_checkpoint(copy)
    assert after.last_batch == 8 and after.last_commit == 8
    assert not (copy / "offsets" / "9").exists() and not (copy / "state" / "0" / "0" / "12.zip").exists()
    runs = ckptfix.history(copy)
    assert [(r.run_id, r.status) for r in runs] == [(run_id, "complete")]
    assert ckptfix.undo(copy, idle_seconds=0) == run_id
    assert {k: v for k, v in tree(copy).items() if not k.startswith("_ckptfix/")} == before
    assert [r.status for r in ckptfix.history(copy)] == ["undone"]
    with pytest.raises(ckptfix.errors.NotACheckpoint):
        ckptfix.history(tmp_path)


def test_usage_errors_name_the_python_parameter_not_the_cli_option() -> None:
    """New-user trial: ``ckptfix.audit(..., target_spark="4.x")`` answered with ``--target-spark: ...``, an option
    the Python caller never wrote. The CLI keeps its option names."""
    with pytest.raises(UsageError) as refused:
        ckptfix.audit(str(ROOT / "samples" / "rocksdb-changelog"), target_spark="4.x")
    assert str(refused.value) == "target_spark: expected one of 3.5, 4.0, 4.1, 4.2, 4.3, found '4.x'"
    proc = run_cli("audit", str(ROOT / "samples" / "rocksdb-changelog"), "--target-spark", "4.x")
    assert (proc.returncode, proc.stderr) == (
        2,
        "ckptfix: error: --target-spark: expected one of 3.5, 4.0, 4.1, 4.2, 4.3, found '4.x'\n",
    )


@pytest.mark.parametrize(
    ("options", "said"),
    [
        ({"version": 0}, "version: expected at least 1"),
        ({"batch": 3, "version": 4}, "give batch or version, not both"),
        ({"partition": 5}, "partition 5: no such partition"),
        ({"store_name": "bogus"}, "store_name bogus: no such store"),  # the CLI's --store
        ({"from_snapshot": 3}, "(of batches 2, 5, 8, 11, the values from_snapshot takes)"),  # a FormatError
    ],
)
def test_read_state_options_are_named_as_keywords(options: dict[str, int], said: str) -> None:
    """New-user trial: ``read_state(version=0)`` said ``--version: ...``; its ``**options`` are keywords too."""
    with pytest.raises(CkptfixError) as refused:
        ckptfix.read_state(ROOT / "samples" / "rocksdb-changelog", **options)
    assert said in str(refused.value) and "--" not in str(refused.value), refused.value
    assert isinstance(refused.value, FormatError if "from_snapshot" in options else UsageError)


@pytest.mark.parametrize("to_batch", ["5", 5.0, True, None])
def test_an_int_argument_of_another_type_is_refused_by_name(to_batch: object) -> None:
    """New-user trial: ``plan_rollback(ckpt, "5")`` raised ``TypeError: '<' not supported ...`` and ``5.0`` looked
    for ``offsets/5.0``. None: neither a batch nor a time (``to_time``) is given."""
    with pytest.raises(UsageError) as refused:
        ckptfix.plan_rollback(ROOT / "samples" / "rocksdb-changelog", to_batch)  # type: ignore[arg-type]
    said = (
        "give to_batch or to_time (one of them)"
        if to_batch is None
        else f"to_batch: expected an int, found {to_batch!r}"
    )
    assert str(refused.value) == f"plan_rollback: {said}"


def test_one_exception_to_catch_and_the_api_in_dir() -> None:
    assert ckptfix.CkptfixError is ckptfix.errors.CkptfixError
    assert issubclass(ckptfix.errors.NotACheckpoint, ckptfix.CkptfixError)
    assert {"audit", "read_state", "plan_repair", "CkptfixError"} <= set(dir(ckptfix))


def test_a_handle_read_after_its_checkpoint_changed_says_so(tmp_path: Path) -> None:
    """New-user trial: auditing the handle opened before ``plan.apply()`` raised a bare ``FileNotFoundError:
    .../offsets/11``. The error now says the file was listed and the checkpoint changed since."""
    copy = tmp_path / "ck"
    shutil.copytree(ROOT / "samples" / "rocksdb-changelog", copy)
    handle = ckptfix.open_checkpoint(copy)
    (copy / "commits" / "11").unlink()
    with pytest.raises(FileNotFoundError, match=r"the checkpoint changed since; open it again"):
        ckptfix.audit(handle)


@pytest.mark.parametrize("fixture", ["rocksdb", "hdfs"])
def test_a_handle_given_again_after_apply_or_undo_sees_the_change(tmp_path: Path, fixture: str) -> None:
    """New-user trial of 2026-11-28: ``plan_state_delete(ck, ...).apply()`` then ``read_state(ck)`` read the listing
    made before the apply: on RocksDB the rewritten zip's SSTs "did not exist" (FormatError), on HDFS the deleted key
    came back, silently. A handle re-lists itself once ckptfix changed its checkpoint (apply, undo)."""
    import tarfile

    copy = tmp_path / "ck"
    if fixture == "rocksdb":
        shutil.copytree(ROOT / "samples" / "rocksdb-changelog", copy)
        where, gone = "key = 2", {"key": 2}
    else:  # written by Spark 4.3.0: keys k0..k5, one (string) key column
        with tarfile.open(ROOT / "tests" / "fixtures" / "spark-4.3.0" / "agg_hdfs.tar.gz") as tar:
            tar.extractall(tmp_path, filter="data")
        (tmp_path / "ckpt").rename(copy)
        where, gone = "key = 'k4'", {"key": "k4"}
    ck = ckptfix.open_checkpoint(copy)
    before = ckptfix.read_state(ck).to_pylist()
    assert any(r["key"] == gone for r in before)
    run = ckptfix.plan_state_delete(ck, where=where).apply(idle_seconds=0)
    after = ckptfix.read_state(ck).to_pylist()
    assert sorted(map(repr, after)) == sorted(repr(r) for r in before if r["key"] != gone)
    assert after == ckptfix.read_state(copy).to_pylist()  # what a new handle reads
    ckptfix.undo(ck, run)
    assert sorted(map(repr, ckptfix.read_state(ck).to_pylist())) == sorted(map(repr, before))


@pytest.mark.parametrize(
    ("call", "said"),
    [
        (lambda s: ckptfix.read_state(s, partition="1"), "read_state: partition: expected int, found '1'"),
        (lambda s: ckptfix.read_state(s, version="5"), "read_state: version: expected int, found '5'"),
        (lambda s: ckptfix.read_state(s, from_snapshot=True), "read_state: from_snapshot: expected int, found True"),
        (lambda s: ckptfix.read_state(s, key_schema=3), "read_state: key_schema: expected DDL text or a StructType"),
        (lambda s: ckptfix.read_state(s, flatten="no"), "read_state: flatten: expected bool, found 'no'"),
        (lambda s: ckptfix.audit(s, session_conf=["a=b"]), "session_conf: expected a mapping"),
        (lambda s: ckptfix.audit(s, storage_options="anon"), "storage_options: expected a mapping"),
        (lambda s: ckptfix.audit(str(s).encode()), "expected a checkpoint URL, a path or a Checkpoint"),
        (lambda s: ckptfix.plan_state_delete(s, where="key = 2").apply(idle_seconds="0"), "idle_seconds: expected"),
        (lambda s: ckptfix.plan_state_delete(s, where="key = 2").apply(idle_seconds=-5), "idle_seconds: expected"),
    ],
)
def test_an_argument_of_the_wrong_type_is_a_usage_error_naming_it(tmp_path: Path, call: Any, said: str) -> None:
    """New-user trial of 2026-11-28: these raised TypeError/AttributeError/ValueError from deep inside, or (partition
    "1") "no such partition 1 (has 0..1)"; an apply with idle_seconds=-5 ran, where the CLI refuses -5."""
    copy = tmp_path / "ck"
    shutil.copytree(ROOT / "samples" / "rocksdb-changelog", copy)
    with pytest.raises(UsageError) as exc:
        call(copy)
    assert said in str(exc.value)
    assert not (copy / "_ckptfix").exists()  # nothing applied


def test_a_schema_option_may_be_ddl_text_and_is_checked_against_the_stored_one() -> None:
    """key_schema="key INT" raised AttributeError ('str' object has no attribute 'json_value'): DDL text is parsed as
    on the command line, and a schema that disagrees with the stored one is refused, as `--key-schema` is."""
    sample = ROOT / "samples" / "rocksdb-changelog"
    assert ckptfix.read_state(sample, key_schema="key BIGINT").num_rows == ckptfix.read_state(sample).num_rows
    with pytest.raises(UsageError, match=r"does not match the schema stored in .*struct<key:bigint>"):
        ckptfix.read_state(sample, key_schema="key INT")


def test_an_interrupted_run_is_named_by_the_error_and_resumed_from_python(tmp_path: Path) -> None:
    """New-user trial of 2026-11-28: RunInterrupted carried its run id in its message only, and the API had no form
    of `apply --resume`. A rollback killed after its third durable write; the next plan's apply names the run
    (``run_id``, ``checkpoint``), ``ckptfix.resume`` finishes it, ``ckptfix.undo`` restores every byte."""
    from ckptfix.errors import RunInterrupted

    copy = tmp_path / "ck"
    shutil.copytree(ROOT / "samples" / "rocksdb-changelog", copy)
    before = _tree(copy)
    killed = run_cli("rollback", str(copy), "--to-batch", "8", "--apply", "--force", crash_after=3)
    assert killed.returncode != 0
    with pytest.raises(RunInterrupted) as stopped:
        ckptfix.plan_rollback(copy, 5).apply(force=True)
    run_id = stopped.value.run_id
    assert (
        run_id
        and run_id in str(stopped.value)
        and stopped.value.checkpoint == ckptfix.open_checkpoint(copy).location.url
    )
    assert ckptfix.resume(copy, run_id) == run_id
    assert ckptfix.open_checkpoint(copy).last_batch == 8
    ckptfix.undo(copy, run_id, force=True)
    assert _tree(copy) == before


def _tree(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in root.rglob("*")
        if p.is_file() and "_ckptfix" not in p.parts
    }


def test_a_live_looking_checkpoint_is_refused_in_the_apis_words(tmp_path: Path) -> None:
    """New-user trial: `RepairPlan.apply()` on a fresh copy said "pass --force (or --idle-seconds N)"; from Python the
    refusal names the method's own arguments. `dir(ckptfix)` lists the API, not the names the package imports."""
    from ckptfix.errors import LiveQuery

    ckpt = tmp_path / "ckpt"
    shutil.copytree(SAMPLE, ckpt, copy_function=shutil.copy)  # written just now: looks alive
    plan = ckptfix.plan_repair(ckpt)
    assert not plan.empty
    with pytest.raises(LiveQuery) as caught:
        plan.apply()
    assert "pass force (or idle_seconds N)" in str(caught.value) and "--" not in str(caught.value), caught.value
    assert "Any" not in dir(ckptfix) and "TYPE_CHECKING" not in dir(ckptfix) and "plan_repair" in dir(ckptfix)
    assert (ROOT / "ckptfix" / "py.typed").is_file()  # PEP 561: the annotations reach the user's type checker


STATEFUL = ROOT / "samples" / "rocksdb-changelog"


def _sample_state(after_batch: int) -> dict[int, tuple[int, int]]:
    """The sample's state after a batch, from its generator's definition (samples/README.md): batch b reads values
    10b .. 10b+9 of rate-micro-batch, grouped by value % 5 into count and sum."""
    values = range(10 * (after_batch + 1))
    return {k: (sum(1 for v in values if v % 5 == k), sum(v for v in values if v % 5 == k)) for k in range(5)}


def test_every_reading_command_has_its_function_returning_what_the_cli_shows() -> None:
    """New-user trial 2: ``inspect``, ``state ls``, ``state changes`` and ``offsets export`` had no API form. Each
    is a function now, returning the model whose JSON the command prints."""
    url = str(STATEFUL)
    inspection = ckptfix.inspect_checkpoint(STATEFUL)
    assert inspection.query_id == json.loads((STATEFUL / "metadata").read_text())["id"]
    assert inspection.last_committed_batch == 11 and [op.provider for op in inspection.operators] == ["rocksdb"]
    from ckptfix.render import jsonout

    assert json.loads(jsonout.inspection(inspection)) == cli_json("inspect", url)

    listing = ckptfix.list_state(url)
    assert listing.ok and listing.to_json() == {
        k: v for k, v in cli_json("state", "ls", url).items() if k != "schema_version"
    }

    changes = ckptfix.read_changes(url, 10, 11, as_arrow=False)
    got = sorted(
        (r["batch_id"], r["change_type"], r["key"]["key"], r["value"]["count"], r["value"]["sum"]) for r in changes
    )
    want = sorted((b, "update", k, *_sample_state(b)[k]) for b in (10, 11) for k in range(5))
    assert got == want
    table = ckptfix.read_changes(ckptfix.open_checkpoint(url), 11)  # to the last committed batch, as a Table
    assert table.column_names == ["batch_id", "change_type", "key", "value", "partition_id"] and table.num_rows == 5

    exported = ckptfix.export_offsets(url)
    assert exported.to_json() == {k: v for k, v in cli_json("offsets", "export", url).items() if k != "schema_version"}
    assert [json.loads(s.offset) if isinstance(s.offset, str) else s.offset for s in exported.sources] == [
        {"offset": 120, "timestamp": 12000}  # offsets/11 as Spark wrote it
    ]


def test_read_changes_refuses_the_options_changes_has_not() -> None:
    with pytest.raises(UsageError, match=r"read_changes: expected keywords among .*found 'join_side'"):
        ckptfix.read_changes(str(STATEFUL), 10, join_side="left")
    with pytest.raises(UsageError, match=r"read_changes: from_batch: expected an int, found '10'"):
        ckptfix.read_changes(str(STATEFUL), "10")


def _state_of(url: str | Path) -> list[tuple[int, int, int]]:
    rows = ckptfix.read_state(url, as_arrow=False)
    return sorted((r["key"]["key"], r["value"]["count"], r["value"]["sum"]) for r in rows)


def test_rebuild_provider_and_relocation_plans_apply_and_undo(tmp_path: Path) -> None:
    """``state rebuild``, ``migrate provider`` and ``migrate relocate`` from Python: each plan applies, the state
    the restart loads stays the sample's (from its definition), and ``undo`` restores every byte."""
    want = sorted((k, *v) for k, v in _sample_state(11).items())
    ckpt = tmp_path / "ckpt"
    shutil.copytree(STATEFUL, ckpt)
    before = tree(ckpt)

    rebuild = ckptfix.plan_rebuild(ckpt, batch=10)
    assert "12" not in {a.path.rsplit("/", 1)[-1].split(".")[0] for a in rebuild.plan.actions}  # version 11 only
    run = rebuild.apply(backup_url=tmp_path / "b1", idle_seconds=0)
    assert _state_of(ckpt) == want and any(p.endswith("/11.zip") for p in tree(ckpt)) and tree(ckpt) != before
    ckptfix.undo(ckpt, run, backup_url=tmp_path / "b1", idle_seconds=0)
    assert tree(ckpt) == before

    provider = ckptfix.plan_provider(ckpt, "hdfs")
    assert repr(provider).startswith(f"<ProviderPlan {str(ckpt)!r} fix=")
    run = provider.apply(backup_url=tmp_path / "b2", idle_seconds=0)
    assert not any(p.endswith(".zip") for p in tree(ckpt)) and any(p.endswith("/12.snapshot") for p in tree(ckpt))
    assert _state_of(ckpt) == want
    ckptfix.undo(ckpt, run, backup_url=tmp_path / "b2", idle_seconds=0)
    assert tree(ckpt) == before

    dest = tmp_path / "moved"
    relocation = ckptfix.plan_relocation(ckpt, dest, idle_seconds=0)
    assert "copy 134 files" in relocation.describe() and not dest.exists()
    result = relocation.apply()
    assert result.files_copied == 134 and tree(dest) == before and _state_of(dest) == want


def test_the_api_table_names_every_command_and_only_functions_that_exist() -> None:
    """docs/api.md's table maps each CLI command to its function; a command added without one must be named among
    those that have none, and every function the table names is exported."""
    import typer

    def commands(group: Any, prefix: str = "") -> set[str]:
        names: set[str] = set()
        ctx = group.make_context(group.name or "ckptfix", [], resilient_parsing=True)
        for name in group.list_commands(ctx):  # the root group builds a command when asked for it
            cmd = group.get_command(ctx, name)
            if hasattr(cmd, "list_commands"):
                names |= commands(cmd, f"{prefix}{name} ")
            else:
                names.add(prefix + name)
        return names

    doc = (ROOT / "docs" / "api.md").read_text()
    rows = [line.split("|")[1:3] for line in doc.splitlines() if line.startswith("| `")]
    named = {c for cell, _ in rows for c in re.findall(r"`([a-z -]+)`", cell)}
    functions = {f for _, cell in rows for f in re.findall(r"`([a-z_]+)`", cell)}
    sentence = doc.split("has no function")[0].rsplit(". ", 1)[-1]  # "`rules` has no function"
    without = set(re.findall(r"`([a-z-]+)`", sentence))
    cli = commands(typer.main.get_command(app))
    assert {"audit", "state read", "migrate provider"} <= cli
    assert cli - named - without - {"apply"} == set(), "commands neither in the table nor said to have no function"
    assert functions <= set(ckptfix.__all__)
    assert {"rules"} == without & cli


def test_advise_is_the_cli_analysis_and_stays_the_function_after_its_package_loads() -> None:
    """``ckptfix.advise`` is the API's function, as ``ckptfix.audit`` is, also once the subpackage of the same name
    has been imported; it returns the analysis ``ckptfix advise -f json`` prints (the sample's 12 progress events,
    samples/README.md)."""
    import ckptfix.advise.analyze  # noqa: F401  (what made ckptfix.advise the module)
    from ckptfix.render import advice as render

    events = ROOT / "samples" / "rocksdb-changelog-progress.jsonl"
    advice = ckptfix.advise(events)
    assert callable(ckptfix.advise) and ckptfix.advise.__module__ == "ckptfix.api"
    doc = cli_json("advise", str(events))
    ours = json.loads(render.to_json(advice))
    assert {k: v for k, v in ours.items() if k != "schema_version"} == {
        k: v for k, v in doc.items() if k != "schema_version"
    }
    assert sum(len(q.batches) for q in advice.queries) == 12
    with pytest.raises(UsageError, match=r"advise: concurrency: expected a positive int, found 0"):
        ckptfix.advise(events, concurrency=0)


def test_async_off_refuses_in_the_apis_words_before_anything_runs(tmp_path: Path) -> None:
    """``ckptfix.async_off`` is ``ckptfix async-off``: its checks name the function's parameters, and nothing is
    written (no Spark starts: the checks come first)."""
    copy = tmp_path / "ckpt"
    shutil.copytree(SAMPLE, copy)
    before = tree(copy)
    with pytest.raises(UsageError, match=r"^min_batches: expected at least 1, found 0$"):
        ckptfix.async_off(copy, "query.py:build", min_batches=0)
    with pytest.raises(UsageError, match=r"^timeout: expected a positive number of seconds, found -1"):
        ckptfix.async_off(copy, "query.py:build", timeout=-1)
    assert tree(copy) == before


def test_a_report_repr_is_one_line() -> None:
    """New-user trial 3: the dataclass repr of a report held every finding with its evidence (5-10 KB)."""
    report = ckptfix.audit(SAMPLE)
    assert repr(report) == (
        f"<Report {str(SAMPLE)!r} spark=4.3 restarts=False blocking=LOG-ASYNC-GAP findings=[1 error, 2 info]>"
    )
