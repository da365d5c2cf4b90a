"""Every registered command, in every format, prints something: a report, a plan, or one error document.

The table below must name every command the CLI registers (a new command without a row fails the first test);
each runs in a subprocess on real checkpoints written by Spark (mutating commands as dry runs)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ckptfix.cli.main import command_names
from tests.repair.test_fixes_logs import extract
from tests.support.cli import run_cli
from tests.unit.realckpt import sample_checkpoint

PROGRESS = Path(__file__).resolve().parents[1] / "fixtures" / "progress" / "spark-4.3.0" / "agg_hdfs" / "progress.json"
STATE_ROWS = Path(__file__).resolve().parents[1] / "fixtures" / "state_edit" / "put_rows.jsonl"

#: command -> arguments after it; {sample} is a stateless async checkpoint, {agg} a Spark 3.5.9 HDFS aggregation
ARGS: dict[str, list[str]] = {
    "inspect": ["{sample}"],
    "audit": ["{agg}", "--target-spark", "3.5"],
    "scan": ["{agg}", "--target-spark", "3.5"],
    "rules": [],
    "repair": ["{sample}"],
    "apply": ["--resume", "{agg}"],  # nothing to resume: one error document, exit 2
    "undo": ["{agg}"],  # no run to undo: one error document, exit 2
    "history": ["{agg}"],
    "rollback": ["{agg}", "--to-batch", "2", "--force"],
    "offsets export": ["{agg}"],
    "state ls": ["{agg}"],
    "state read": ["{agg}"],
    "state changes": ["{agg}", "--from", "1"],
    "state rebuild": ["{agg}", "--force"],
    "state delete": ["{agg}", "--where", "key = 'k1'"],
    "state put": ["{agg}", "--rows", str(STATE_ROWS)],
    "state repartition": ["{agg}", "--partitions", "5"],
    "migrate relocate": ["{agg}", "{tmp}/moved", "--force"],
    "migrate provider": ["{agg}", "--to", "rocksdb", "--force"],
    "advise": [str(PROGRESS)],
    # needs a JVM and the user's query module: in every format in tests/spark_async/
    "async-off": [],
}
LIVE_ONLY = {"async-off"}
#: commands expected to refuse here (exit 2), with one error line / document; every other one must succeed (0/1)
REFUSED = {"apply", "undo"}
#: data commands print rows in their own formats; the rest print a report in text or JSON
FORMATS = {"state read": ("jsonl", "csv", "json"), "state changes": ("jsonl", "csv", "json")}
CASES = [(c, f) for c in ARGS if c not in LIVE_ONLY for f in FORMATS.get(c, ("text", "json"))]


def test_every_registered_command_has_a_row() -> None:
    assert sorted(command_names()) == sorted(ARGS)


@pytest.mark.parametrize(("command", "fmt"), CASES, ids=[f"{c}-{f}" for c, f in CASES])
def test_command_prints_in_every_format(command: str, fmt: str, tmp_path: Path) -> None:
    agg, _ = extract("agg_hdfs", tmp_path / "x")
    values = {"sample": str(sample_checkpoint()), "agg": str(agg), "tmp": str(tmp_path)}
    args = [*command.split(), *(a.format(**values) for a in ARGS[command]), "--format", fmt]
    proc = run_cli(*args, env={**os.environ, "COLUMNS": "120"})
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode in ((2,) if command in REFUSED else (0, 1)), proc.stderr
    if fmt == "jsonl":
        assert [json.loads(line) for line in proc.stdout.splitlines()], f"{args} printed no rows"
    elif fmt == "csv":
        assert len(proc.stdout.splitlines()) > 1, f"{args} printed no rows"
    elif fmt == "json":
        doc = json.loads(proc.stdout)  # one document, errors included
        assert doc
        assert (proc.returncode == 2) == ("error" in doc and isinstance(doc, dict)), doc
    else:
        assert (proc.stdout + proc.stderr).strip(), f"{args} printed nothing"
        if proc.returncode == 2:
            assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
