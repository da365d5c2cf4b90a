"""Help and guidance: --help shows the choices of enum-like options, shell completion works, and every
`ckptfix ...` command an audit rule's fix text names exists with the flags it names; a fix text that
names `ckptfix repair` for its own finding is one that repair has a planner for."""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
import re
import shlex
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

import ckptfix.repair
from ckptfix.audit import RULES
from ckptfix.audit.targets import SUPPORTED
from ckptfix.cli.main import command_names as registered
from ckptfix.repair.fixes import PLANNERS, STRATEGIES
from tests.support.cli import run_cli
from tests.unit.realckpt import sample_checkpoint


def cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, env={**os.environ, "COLUMNS": "250", **env})


@cache
def help_text(command: str) -> str:
    proc = cli(*command.split(), "--help")
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.parametrize(
    ("command", "shown"),
    [
        ("audit", "<" + "|".join(SUPPORTED) + ">"),
        ("audit", "<error|warning|info|never>"),
        ("repair", "<" + "|".join(SUPPORTED) + ">"),
        ("repair", "<" + "|".join(STRATEGIES) + ">"),
        ("rollback", "<" + "|".join(SUPPORTED) + ">"),
        ("state rebuild", "<" + "|".join(SUPPORTED) + ">"),
        ("migrate provider", "<rocksdb|hdfs>"),
        ("state read", "<jsonl|csv|parquet|json>"),
        ("state read", "<local|spark>"),
        ("state read", "<left|right>"),
        ("inspect", "<text|json>"),
    ],
)
def test_help_shows_the_choices(command: str, shown: str) -> None:
    assert shown in help_text(command)


@pytest.mark.parametrize("command", ["", *registered(), "state", "offsets", "migrate"])
def test_help_shows_no_type_for_a_flag(command: str) -> None:
    """An on/off flag takes no value; typer >= 0.20 would show ``<bool>`` beside it, ``--help`` included."""
    text = help_text(command)
    assert "--help" in text
    assert "<bool>" not in text


def test_shell_completion() -> None:
    """Through the installed `ckptfix` script, as a shell calls it."""
    exe = str(Path(sys.executable).with_name("ckptfix"))
    # --show-completion detects the shell from the process tree: run it from bash (`; true` keeps bash alive as
    # the parent), as a user does, so the test does not depend on what started pytest
    script = f"{shlex.quote(exe)} --show-completion; true"
    show = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)
    assert show.returncode == 0 and "_ckptfix_completion" in show.stdout, show.stdout + show.stderr
    assert "--install-completion" in help_text("")
    env = {
        **os.environ,
        "_CKPTFIX_COMPLETE": "complete_bash",
        "COMP_WORDS": "ckptfix audit x --fail-on ",
        "COMP_CWORD": "4",
    }
    complete = subprocess.run([exe], capture_output=True, text=True, timeout=60, env=env)
    assert complete.stdout.split() == ["error", "warning", "info", "never"]
    env = {**env, "COMP_WORDS": "ckptfix repair x --target-spark 4", "COMP_CWORD": "4"}
    complete = subprocess.run([exe], capture_output=True, text=True, timeout=60, env=env)
    assert complete.stdout.split() == [v for v in SUPPORTED if v.startswith("4")]


#: a backquoted ckptfix command in a fix text
COMMAND = re.compile(r"`(ckptfix [^`]*)`")


def named_commands() -> list[tuple[str, str]]:
    return [(r.id, m.group(1)) for r in RULES.values() for m in COMMAND.finditer(r.fix)]


def test_fix_texts_name_commands() -> None:
    assert len(named_commands()) > 20  # the parser finds them


@pytest.mark.parametrize(("rule", "text"), named_commands(), ids=[f"{r}: {t}" for r, t in named_commands()])
def test_each_named_command_exists_with_its_flags(rule: str, text: str) -> None:
    words = text.split()[1:]
    commands = set(registered())
    name = " ".join(words[:2]) if " ".join(words[:2]) in commands else words[0]
    assert name in commands, f"{rule} names `{text}`: no command `ckptfix {name}`"
    shown = help_text(name)
    for flag in (w.split("=")[0] for w in words if w.startswith("--")):
        assert re.search(rf"{re.escape(flag)}\b", shown), f"{rule} names `{text}`: `ckptfix {name}` has no {flag}"


def test_a_fix_that_names_repair_for_its_own_finding_has_a_planner() -> None:
    for m in pkgutil.iter_modules(ckptfix.repair.__path__):
        importlib.import_module(f"ckptfix.repair.{m.name}")
    # UPGRADE-JOIN-FORMAT-1 names repair for the nullability finding that follows the 3.5 run, not for itself
    promised = {r.id for r in RULES.values() if "`ckptfix repair" in r.fix} - {"UPGRADE-JOIN-FORMAT-1"}
    assert not promised - set(PLANNERS), sorted(promised - set(PLANNERS))


def test_async_gap_fix_text_says_what_repair_plans() -> None:
    """The sample's latest batch (31) is committed: the audit's fix says offsets/L-1 becomes a copy of offsets/L,
    and repair plans exactly that file from exactly that source."""
    fix = RULES["LOG-ASYNC-GAP"].fix
    assert "a copy of offsets/L when batch L is committed" in fix
    doc = json.loads(cli("repair", str(sample_checkpoint()), "-f", "json").stdout)["plan"]
    assert doc["latest_offset"] == doc["latest_commit"] == 31
    (action,) = doc["actions"]
    assert action["path"] == "offsets/30" and "copy of offsets/31" in action["reason"], action


@pytest.mark.parametrize("command", ["", *registered(), "state", "offsets", "migrate"])
def test_help_never_cuts_a_word_on_a_narrow_terminal(command: str) -> None:
    """Issue 12: help on an 80-column terminal wraps; it never ends a word in "…" (rich's panels cut
    ``left-keyToNumValu…`` and ``$CKPTFIX_STORAGE_…``)."""
    proc = cli(*command.split(), "--help", COLUMNS="80")
    assert proc.returncode == 0, proc.stderr
    assert "…" not in proc.stdout
    if "--storage-option" in proc.stdout:
        assert "$CKPTFIX_STORAGE_OPTIONS" in proc.stdout


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["audit", "{s}", "--fail-on", "bad"], "--fail-on: expected one of error, warning, info, never, found 'bad'"),
        (["state", "read", "{s}", "-f", "xml"], "--format: expected one of jsonl, csv, parquet, json, found 'xml'"),
        (["state", "read", "{s}", "--partition", "abc"], "--partition: expected an integer, found 'abc'"),
        (["state", "read", "{s}", "--partition", "1.5"], "--partition: expected an integer, found '1.5'"),
        (["repair", "{s}", "--idle-seconds", "zz"], "--idle-seconds: expected a number, found 'zz'"),
        (["repair", "{s}", "--idle-seconds", "-5"], "--idle-seconds: expected at least 0.0, found '-5'"),
        (["state", "read", "{s}", "--engine", "jvm"], "--engine: expected one of local, spark, found 'jvm'"),
    ],
)
def test_a_value_the_command_line_cannot_convert_is_one_ckptfix_line(args: list[str], line: str) -> None:
    """Not typer's ``Invalid value for '--fail-on': Value error, 'bogus' is not one of ...``."""
    proc = cli(*[a.format(s=sample_checkpoint()) for a in args])
    assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", f"ckptfix: error: {line}\n")


@pytest.mark.parametrize("command", ["", "state read", "audit"])
def test_help_into_a_closed_pipe_ends_quietly(command: str) -> None:
    """``ckptfix state read --help | head -3``: the reader is gone before help is written; exit 0, no message
    (it printed ``ckptfix: error: [Errno 32] Broken pipe``)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "ckptfix.cli.main", *command.split(), "--help"],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    finally:
        os.close(write_end)
    assert (proc.returncode, proc.stderr) == (0, "")


@pytest.mark.parametrize("command", ["", "state"])
def test_a_command_alone_prints_its_help_not_an_error(command: str) -> None:
    """`ckptfix` alone printed its whole help after ``ckptfix: error:`` on stderr (a new user's first command)."""
    proc = cli(*command.split())
    assert proc.returncode == 2 and proc.stderr == ""
    assert proc.stdout.startswith("Usage: ") and f"{command} [OPTIONS] COMMAND [ARGS]..." in proc.stdout
