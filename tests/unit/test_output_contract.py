"""The output contract of docs/output.md, checked on real checkpoints written by Spark.

Every command's JSON document (results and errors) validates against its schema in docs/schemas/; with
-q, stderr stays empty when the command succeeds; a closed stdout ends quietly with the command's own
exit code; a command that fails half-way through an --out file leaves no file behind."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from ckptfix.cli.main import command_names as registered
from tests.repair.test_fixes_logs import extract
from tests.support.cli import run_cli
from tests.unit.realckpt import ROOT, sample_checkpoint
from tests.unit.test_cli_every_command import ARGS

SCHEMAS = ROOT / "docs" / "schemas"

#: command -> the schema of its JSON result (docs/schemas/<kind>.schema.json)
KIND = {
    "inspect": "inspect",
    "audit": "audit-report",
    "scan": "scan",
    "rules": "rules",
    "repair": "plan",
    "apply": "plan",
    "undo": "undo",
    "history": "history",
    "rollback": "plan",
    "offsets export": "offsets-export",
    "state ls": "state-ls",
    "state read": "state-rows",
    "state changes": "state-rows",
    "state rebuild": "plan",
    "state delete": "plan",
    "state put": "plan",
    "state repartition": "plan",
    "migrate relocate": "relocation",
    "migrate provider": "plan",
    "advise": "advise",
    "async-off": "async-off",
}


def schema(kind: str) -> dict[str, Any]:
    return json.loads((SCHEMAS / f"{kind}.schema.json").read_text())


def validate(doc: Any, kind: str) -> None:
    jsonschema.Draft202012Validator(schema(kind)).validate(doc)


def cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, stdin=stdin, env={**os.environ, "COLUMNS": "120"})


@pytest.fixture(scope="module")
def agg(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Spark 3.5.9 HDFS aggregation (3 partitions), never written to by these tests."""
    ckpt, _ = extract("agg_hdfs", tmp_path_factory.mktemp("agg"))
    return Path(ckpt)


def test_every_schema_is_a_valid_json_schema_with_schema_version() -> None:
    files = sorted(SCHEMAS.glob("*.schema.json"))
    assert {f.name.removesuffix(".schema.json") for f in files} == set(KIND.values()) | {"error"}
    for f in files:
        s = json.loads(f.read_text())
        jsonschema.Draft202012Validator.check_schema(s)
        assert "schema_version" in s["required"], f.name


def test_every_command_has_a_document_kind() -> None:
    assert not set(registered()) - set(KIND), "add the new command's document kind (and schema) here"


@pytest.mark.parametrize("command", [c for c in ARGS if c not in ("apply", "undo", "async-off")])
def test_json_result_validates_and_quiet_means_no_stderr(command: str, agg: Path, tmp_path: Path) -> None:
    values = {"sample": str(sample_checkpoint()), "agg": str(agg), "tmp": str(tmp_path)}
    args = [*command.split(), *(a.format(**values) for a in ARGS[command])]
    proc = cli(*args, "--format", "json", "-q")
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    validate(json.loads(proc.stdout), KIND[command])
    assert proc.stderr == "", f"{command} -q wrote to stderr: {proc.stderr}"
    if KIND[command] == "state-rows":
        assert json.loads(proc.stdout)["rows"], "the agg fixture has state rows"


#: the commands that plan (dry run unless --apply), each with a plan that changes something here
PLANNING = ["repair", "rollback", "state rebuild", "state delete", "state put", "state repartition"]
PLANNING += ["migrate relocate", "migrate provider"]


@pytest.mark.parametrize("command", PLANNING)
def test_the_dry_run_hint_is_a_message_quiet_removes(command: str, agg: Path, tmp_path: Path) -> None:
    """docs/output.md: hints go to stderr and -q removes them; the report (stdout) never carries one."""
    values = {"sample": str(sample_checkpoint()), "agg": str(agg), "tmp": str(tmp_path)}
    args = [*command.split(), *(a.format(**values) for a in ARGS[command])]
    shown = cli(*args)
    assert shown.returncode in (0, 1), shown.stderr
    assert "--apply" not in shown.stdout and "dry run" not in shown.stdout, shown.stdout
    assert "dry run: nothing written; add --apply to " in shown.stderr, shown.stderr
    quiet = cli(*args, "-q")
    assert quiet.returncode == shown.returncode and quiet.stderr == "", quiet.stderr
    assert quiet.stdout.startswith("Plan for ") or command == "migrate relocate", quiet.stdout
    assert "--apply" not in quiet.stdout and "dry run" not in quiet.stdout, quiet.stdout


def test_apply_undo_and_history_documents(tmp_path: Path) -> None:
    """A real repair of the async sample, applied from a saved plan, listed, and undone."""
    ckpt = tmp_path / "ckpt"
    shutil.copytree(sample_checkpoint(), ckpt)
    plan = tmp_path / "plan.json"
    dry = cli("repair", str(ckpt), "--plan-out", str(plan), "-f", "json", "-q")
    assert dry.returncode == 0, dry.stdout
    assert json.loads(plan.read_text())["actions"], "the sample needs offsets/30"
    applied = cli("apply", str(plan), "--force", "-f", "json", "-q")
    assert applied.returncode == 0, applied.stdout
    doc = json.loads(applied.stdout)
    validate(doc, "plan")
    assert doc["applied_run"]
    assert doc["verdict_after"]["restarts"] is True, doc  # the after-audit `repair --apply` also prints
    hist = json.loads(cli("history", str(ckpt), "-f", "json").stdout)
    validate(hist, "history")
    assert [r["run_id"] for r in hist["runs"]] == [doc["applied_run"]]
    undone = cli("undo", str(ckpt), "--force", "-f", "json", "-q")
    assert undone.returncode == 0, undone.stdout
    validate(json.loads(undone.stdout), "undo")
    assert json.loads(undone.stdout)["undone_run"] == doc["applied_run"]


PROVIDER = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"  # 75 characters


def piped(*args: str, **env: str) -> str:
    """stdout of a command none of whose streams is a terminal (rich's own choice there: 80 columns)."""
    environ = {k: v for k, v in os.environ.items() if k != "COLUMNS"} | env
    return run_cli(*args, env=environ).stdout


def test_a_pipe_gets_whole_table_rows_and_columns_is_honoured() -> None:
    """`inspect CKPT | cat`: the provider's class name stays in one cell line, where 80 columns fold it; with
    COLUMNS set the table fits that width."""
    rows = [line for line in piped("inspect", str(sample_checkpoint())).splitlines() if "state_store_provider" in line]
    assert len(rows) == 1 and PROVIDER in rows[0], rows
    narrow = piped("inspect", str(sample_checkpoint()), COLUMNS="80").splitlines()
    assert PROVIDER not in "\n".join(narrow)


#: one bad invocation per command: each must give exit 2 and one error document on stdout
BAD = {
    "inspect": ["{missing}"],
    "audit": ["{missing}"],
    "rules": ["--no-such-option"],
    "repair": ["{missing}"],
    "apply": ["{missing}"],
    "undo": ["{agg}"],
    "history": ["{agg}", "--backup-dir", "{file}"],
    "rollback": ["{agg}", "--to-batch", "99"],
    "offsets export": ["{agg}", "--batch", "99"],
    "state ls": ["{missing}"],
    "state read": ["{agg}", "--operator", "7"],
    "state changes": ["{missing}", "--from", "1"],
    "state rebuild": ["{missing}"],
    "migrate relocate": ["{missing}", "{tmp}/moved"],
    "migrate provider": ["{agg}", "--to", "nothing"],
    "advise": ["{missing}"],
    "async-off": ["{agg}", "--query", "no_colon_here"],
}


@pytest.mark.parametrize("command", sorted(BAD))
def test_errors_are_one_json_document_on_stdout(command: str, agg: Path, tmp_path: Path) -> None:
    (tmp_path / "f").write_text("not a directory")
    values = {"missing": str(tmp_path / "nope"), "agg": str(agg), "tmp": str(tmp_path), "file": str(tmp_path / "f")}
    args = [*command.split(), *(a.format(**values) for a in BAD[command])]
    proc = cli(*args, "--format", "json")
    assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
    doc = json.loads(proc.stdout)
    validate(doc, "error")
    assert "Traceback" not in proc.stderr and "error" not in proc.stderr, "the error is the document on stdout"
    text = cli(*args, "-q")  # the same error in text: one line on stderr (-q: no progress before it), no stdout
    assert text.returncode == 2 and text.stdout == ""
    assert text.stderr.startswith("ckptfix: error: ") and len(text.stderr.strip().splitlines()) == 1, text.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["audit", "{sample}"],
        ["audit", "{sample}", "-f", "json"],
        ["inspect", "{agg}"],
        ["rules"],
        ["state", "read", "{agg}"],
    ],
    ids=" ".join,
)
def test_a_closed_pipe_ends_quietly_with_the_commands_exit_code(args: list[str], agg: Path) -> None:
    argv = [a.format(sample=sample_checkpoint(), agg=agg) for a in args]
    full = cli(*argv)
    proc = subprocess.Popen(
        [sys.executable, "-m", "ckptfix.cli.main", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert len(proc.stdout.read(10)) == 10
    proc.stdout.close()  # `| head -c 10`
    err = proc.stderr.read().decode()
    code = proc.wait(timeout=180)
    assert code == full.returncode, err
    # no message of its own: the usual summary, or nothing where the rows stopped (state read)
    assert err in (full.stderr, ""), err


@pytest.mark.parametrize(
    "args",
    [["audit", "{sample}"], ["audit", "{healthy}"], ["inspect", "{agg}"], ["state", "read", "{agg}"]],
    ids=" ".join,
)
@pytest.mark.parametrize("how", ["closed", "broken-pipe"])
def test_a_closed_stderr_keeps_the_commands_exit_code(args: list[str], how: str, agg: Path) -> None:
    """``2>&-`` (no stderr at all) and a reader of stderr that went away (``2>&1 | head -1``): the messages are
    lost, the result and its exit code are not (rich's default for a broken pipe is exit 1, "findings")."""
    healthy = sample_checkpoint().parent / "rocksdb-changelog"
    argv = [a.format(sample=sample_checkpoint(), agg=agg, healthy=healthy) for a in args]
    full = cli(*argv)
    read_end, write_end = os.pipe()
    os.close(read_end)
    stderr: Any = write_end
    command = [sys.executable, "-m", "ckptfix.cli.main", *argv]
    if how == "closed":  # the shell's `2>&-`: the child starts without file descriptor 2
        command = ["sh", "-c", '"$@" 2>&-', "sh", *command]
    proc = subprocess.run(
        command, stdout=subprocess.PIPE, stderr=stderr, timeout=180, env={**os.environ, "COLUMNS": "120"}
    )
    os.close(write_end)
    assert proc.returncode == full.returncode
    # the same result (a parallel read interleaves its partitions' rows in any order)
    assert sorted(proc.stdout.decode().splitlines()) == sorted(full.stdout.splitlines())


@pytest.fixture
def damaged(agg: Path, tmp_path: Path) -> Path:
    """Partition 2's newest delta is garbage: partitions 0 and 1 stream their rows before the read fails."""
    ckpt = tmp_path / "dmg"
    shutil.copytree(agg, ckpt)
    (ckpt / "state/0/2/8.delta").write_bytes(b"garbage")
    return ckpt


def test_the_damaged_read_fails_half_way(damaged: Path) -> None:
    proc = cli("state", "read", str(damaged), "--jobs", "1")
    assert proc.returncode == 2 and "8.delta" in proc.stderr
    assert proc.stdout.count("\n") > 0, "rows of the good partitions came out before the error"


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet", "json"])
@pytest.mark.parametrize("jobs", ["1", "3"])
def test_out_file_is_all_or_nothing(damaged: Path, tmp_path: Path, fmt: str, jobs: str) -> None:
    out = tmp_path / f"rows.{fmt}"
    proc = cli("state", "read", str(damaged), "-f", fmt, "--out", str(out), "--jobs", jobs)
    assert proc.returncode == 2
    assert not out.exists() and not list(tmp_path.glob("rows.*")), "no file, no partial file"
    if fmt == "json":
        doc = json.loads(proc.stdout)
        validate(doc, "error")
        assert "8.delta" in doc["error"]["message"]
    else:
        assert proc.stdout == "" and "8.delta" in proc.stderr


def test_plan_out_is_written_whole_or_not_at_all(tmp_path: Path) -> None:
    """--plan-out goes through the atomic writer: a refused target leaves neither the file nor a temp file."""
    target = tmp_path / "sub"
    target.write_text("a file where --plan-out needs a directory")
    proc = cli("repair", str(sample_checkpoint()), "--plan-out", str(target / "plan.json"), "-f", "json")
    assert proc.returncode == 2
    validate(json.loads(proc.stdout), "error")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sub"]


def test_out_to_a_url_says_output_is_local(tmp_path: Path) -> None:
    """New-user trial 3: `--out s3://prod/exports/x.parquet` said "expected an existing directory to write into,
    found no <cwd>/s3:/prod/exports"."""
    done = cli(
        "state",
        "read",
        str(Path(__file__).resolve().parents[2] / "samples" / "rocksdb-changelog"),
        "--out",
        "s3://prod/x.jsonl",
    )
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "ckptfix: error: --out s3://prod/x.jsonl: expected a local file name, found a URL (ckptfix writes its output "
        "locally: write it here and copy it, e.g. with `aws s3 cp`)"
    ), done.stderr
