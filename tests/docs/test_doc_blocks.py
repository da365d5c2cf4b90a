"""Every shell and Python block of README.md and docs/*.md runs, and every command in it exits as the doc says.

What counts as a block: a fenced ```bash, ```sh or ```console block. In bash/sh blocks every line is a command
(a line ending in a backslash continues on the next); in console blocks only the lines starting with "$ " are
commands, the others are output. Blank lines and comment lines are skipped; compound commands (if, for,
heredocs) are not supported, so the docs do not use them.

A fenced ```python block (docs/api.md, docs/output.md) is one script, run with the venv's Python; it must exit 0.

Expected exit code: 0, unless the command's trailing comment says `# exits N` (or `# exit N`, as recipes/ do).

How a block runs: one bash process per block (so `T=$(mktemp -d)` carries to the next line), with `set -o
pipefail`, in a fresh temporary directory that holds a copy of the repo's samples/ (so `samples/async-sparse`
resolves and nothing in the repo changes) and of docs/schemas/, with the venv's `ckptfix` first on PATH and a
timeout. The copy's files are as new as a fresh clone's (written just now), so a block that applies a plan to
a sample's copy must say `--idle-seconds 0` (or `idle_seconds=0`), as a reader on a fresh clone must.
Afterwards the copied samples/ must be byte for byte what the repo ships: a block that changes a sample in
place (instead of copying it first) fails.

Not run:
- README's opening block (the two install commands): CI itself runs them (.ci/run; tests/docs/test_docs.py checks
  they are the ones CI runs).
- A block preceded by the line `<!-- doc-test: skip REASON -->`: it needs something the suite cannot give a doc
  block (a real S3 bucket with credentials, a query module of yours). Every such block names its reason and
  they are counted below, so that they stay few.
A block preceded by `<!-- doc-test: spark -->` needs a JVM: it carries the `spark` marker.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(bash|sh|console|python)[ \t]*\n(.*?)^```[ \t]*$", re.M | re.S)
DIRECTIVE = re.compile(r"<!--\s*doc-test:\s*(skip|spark)\b\s*(.*?)\s*-->\s*\n\s*$")
EXIT = re.compile(r"#.*\bexits?\s+(\d+)\b")
TIMEOUT = 180
MAX_SKIPPED = 3


@dataclass
class Command:
    line: int  # 1-based line in the doc
    text: str
    exit_code: int


@dataclass
class Block:
    doc: Path
    line: int
    lang: str
    body: str
    directive: tuple[str, str] | None = None
    commands: list[Command] = field(default_factory=list)

    @property
    def id(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}"


def parse_commands(block: Block) -> list[Command]:
    if block.lang == "python":  # one script
        return [Command(block.line + 1, block.body, 0)] if block.body.strip() else []
    commands: list[Command] = []
    pending: list[str] = []
    start = 0
    for offset, raw in enumerate(block.body.splitlines()):
        line_no = block.line + 1 + offset
        line = raw.rstrip()
        if block.lang == "console" and not pending:
            if not line.startswith("$ "):
                continue
            line = line[2:]
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if not pending:
            start = line_no
        if line.endswith("\\"):
            pending.append(line[:-1])
            continue
        text = " ".join([*pending, line]).strip()
        pending = []
        match = EXIT.search(text)
        commands.append(Command(start, text, int(match.group(1)) if match else 0))
    assert not pending, f"{block.id}: a command ends with a backslash"
    return commands


def blocks_of(doc: Path, text: str) -> list[Block]:
    blocks: list[Block] = []
    for match in FENCE.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        directive = DIRECTIVE.search(text[: match.start()][-300:])
        block = Block(doc, line, match.group(1), match.group(2))
        if directive:
            block.directive = (directive.group(1), directive.group(2))
        block.commands = parse_commands(block)
        blocks.append(block)
    return blocks


def collect() -> list[Block]:
    return [block for doc in DOCS for block in blocks_of(doc, doc.read_text())]


BLOCKS = collect()
OPENING = next(b for b in BLOCKS if b.doc.name == "README.md")  # the two install commands: CI runs them
RUNNABLE = [b for b in BLOCKS if b is not OPENING and not (b.directive and b.directive[0] == "skip")]


def digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def script(commands: list[Command]) -> str:
    lines = ["set -o pipefail"]
    for cmd in commands:
        lines.append(cmd.text)
        lines.append(
            f'__rc=$?; if [ "$__rc" -ne {cmd.exit_code} ]; then '
            f'echo "doc-test: line {cmd.line} exited $__rc, expected {cmd.exit_code}" >&2; exit 97; fi'
        )
    return "\n".join(lines) + "\n"


def test_blocks_are_found_and_skips_are_few_and_explained() -> None:
    assert len(RUNNABLE) >= 4, [b.id for b in RUNNABLE]
    assert "pip install" in OPENING.body and "pytest" in OPENING.body
    skipped = [b for b in BLOCKS if b.directive and b.directive[0] == "skip"]
    assert len(skipped) <= MAX_SKIPPED, [b.id for b in skipped]
    for block in skipped:
        assert block.directive and len(block.directive[1]) > 10, f"{block.id}: say why it is not run"
    for block in RUNNABLE:
        assert block.commands, f"{block.id}: a block without a command"


def test_exit_markers_are_understood() -> None:
    block = Block(ROOT / "README.md", 10, "bash", "ckptfix audit x  # exits 1\nckptfix a \\\n  b\n# comment\n")
    assert [(c.line, c.text, c.exit_code) for c in parse_commands(block)] == [
        (11, "ckptfix audit x  # exits 1", 1),
        (12, "ckptfix a    b", 0),
    ]
    console = Block(ROOT / "README.md", 1, "console", "$ ckptfix rules  # exit 2\noutput\n")
    assert [(c.text, c.exit_code) for c in parse_commands(console)] == [("ckptfix rules  # exit 2", 2)]


def test_directives_are_understood() -> None:
    text = (
        "# t\n\n<!-- doc-test: skip needs a bucket -->\n```bash\nckptfix audit s3://b/c\n```\n\n"
        "<!-- doc-test: spark -->\n```sh\nckptfix audit x --against q.py:build\n```\n\n"
        "```console\n$ ckptfix rules\n```\n"
    )
    skip, spark, plain = blocks_of(ROOT / "README.md", text)
    assert skip.directive == ("skip", "needs a bucket") and skip.line == 4
    assert spark.directive == ("spark", "") and spark.lang == "sh"
    assert plain.directive is None and [c.text for c in plain.commands] == ["ckptfix rules"]


@pytest.mark.parametrize(
    "block",
    [
        pytest.param(b, id=b.id, marks=[pytest.mark.spark] if b.directive and b.directive[0] == "spark" else [])
        for b in RUNNABLE
    ],
)
def test_doc_block_runs(block: Block, tmp_path: Path) -> None:
    assert not any(re.search(r"\bpip\b", c.text) for c in block.commands), f"{block.id}: would change the venv"
    work = tmp_path / "work"
    work.mkdir()
    # copied as a fresh clone has them: every file written just now (shutil.copy, not copy2, which keeps mtimes)
    shutil.copytree(
        ROOT / "samples", work / "samples", ignore=shutil.ignore_patterns("__pycache__"), copy_function=shutil.copy
    )
    shutil.copytree(ROOT / "docs" / "schemas", work / "docs" / "schemas")  # docs/output.md validates against them
    before = digest(work / "samples")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CKPTFIX_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYSPARK_PYTHON"] = sys.executable
    env["TMPDIR"] = str(tmp_path)
    if block.lang == "python":
        (tmp_path / "block.py").write_text("\n" * block.line + block.body)  # tracebacks name the doc's lines
        argv = [sys.executable, str(tmp_path / "block.py")]
    else:
        argv = ["bash", "-c", script(block.commands)]
    try:
        proc = subprocess.run(
            argv,
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{block.id}: did not finish within {TIMEOUT} s")
    by_line = {c.line: c.text for c in block.commands}
    failed = re.search(r"doc-test: line (\d+)", proc.stderr)
    where = f" ({block.doc.name} line {failed.group(1)}: {by_line[int(failed.group(1))]})" if failed else ""
    assert proc.returncode == 0, f"{block.id}{where}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
    assert digest(work / "samples") == before, f"{block.id} changed files under samples/: copy a sample first"
