"""Every recipe under recipes/ run end to end with real Spark, with the commands its README shows.

A recipe's README is the script: the test reads its ``console`` blocks and runs exactly their ``$ ...`` lines
(``ckptfix`` lines in-process through ``ckptfix.cli.main.main``, others with bash), with the variables the recipe
names (``$CKPT``, ``$OUT``, ...) pointing at a temporary directory. Conventions in those blocks:

- ``$ command`` runs; a trailing ``# exit N`` says the exit code it must have (default 0);
- the lines after a command are excerpts its output must contain (whitespace-insensitive; ``<...>`` matches
  anything), so text quoted in a README cannot drift from what ckptfix prints;
- the ``text`` block under "## Error" holds the lines the restart's error must contain, matched the same way.

Before the fix the query is restarted and must fail with the README's error; after it, the query is restarted
and the sink must hold exactly what the input files say (computed here from the input, never by ckptfix).
Checkpoint files (and a file sink's output the fix rolls back) are aged by an hour before the fix (the query
stopped a while ago), so that the repair engine's liveness check (``--idle-seconds``) sees a stopped query, as it
would in real use.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ckptfix.cli.main import main as ckptfix_main
from tests.spark.harness import error_text

ROOT = Path(__file__).resolve().parents[2]
RECIPES = ROOT / "recipes"
SECTIONS = ("Symptom", "Error", "What ckptfix audit says", "Fix", "Check")

if str(RECIPES) not in sys.path:
    sys.path.insert(0, str(RECIPES))


# ------------------------------------------------------------------------------------------ README parsing


@dataclass
class Step:
    command: str
    exit_code: int = 0
    excerpts: list[str] = field(default_factory=list)


def recipe_dirs() -> list[Path]:
    return sorted(p for p in RECIPES.iterdir() if p.is_dir() and re.fullmatch(r"[0-9]{2}-[a-z0-9-]+", p.name))


def sections(readme: Path) -> dict[str, str]:
    """``## Title`` -> the text under it (up to the next ``## ``)."""
    out: dict[str, str] = {}
    title = None
    for line in readme.read_text().splitlines(keepends=True):
        if line.startswith("## "):
            title = line[3:].strip()
            out[title] = ""
        elif title is not None:
            out[title] += line
    return out


def blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", text, flags=re.S | re.M)


def steps(text: str) -> list[Step]:
    """The ``$ ...`` commands of every console block in ``text``, with their expected exit code and excerpts."""
    out: list[Step] = []
    for block in blocks(text, "console"):
        for line in block.splitlines():
            if line.startswith("$ "):
                cmd = line[2:].strip()
                m = re.search(r"\s+# exit ([0-9]+)$", cmd)
                code = 0
                if m:
                    code, cmd = int(m.group(1)), cmd[: m.start()]
                out.append(Step(cmd, code))
            elif line.strip() and out:
                out[-1].excerpts.append(line.strip())
    return out


def excerpt_regex(excerpt: str) -> re.Pattern[str]:
    parts = re.split(r"(<[^<>]*>)", excerpt)
    rx = ""
    for part in parts:
        if re.fullmatch(r"<[^<>]*>", part):
            rx += r".+?"
        else:
            rx += r"\s+".join(re.escape(w) for w in part.split()) if part.strip() else (r"\s+" if part else "")
    return re.compile(rx)


def assert_excerpts(excerpts: list[str], output: str, what: str) -> None:
    flat = " ".join(output.split())
    for excerpt in excerpts:
        assert excerpt_regex(excerpt).search(flat), f"{what}: expected {excerpt!r} in:\n{output}"


# ------------------------------------------------------------------------------------------ running steps


def run_ckptfix(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code: int | str | None = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            ckptfix_main(argv)
        except SystemExit as exc:
            code = exc.code
    return (code if isinstance(code, int) else (0 if code is None else 1)), out.getvalue(), err.getvalue()


@contextlib.contextmanager
def chdir(path: Path) -> Iterator[None]:
    """``contextlib.chdir`` (Python 3.11+) for 3.10: README commands use paths relative to the recipe."""
    old = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


@contextlib.contextmanager
def environ(values: dict[str, str]) -> Iterator[None]:
    """``os.environ`` with ``values`` for an in-process command (a query module reads its paths from it)."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, old in saved.items():
            if old is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old


def expand(command: str, env: dict[str, str]) -> str:
    def sub(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        if name not in env:
            raise AssertionError(f"README uses ${name}, which the test does not set")
        return env[name]

    return re.sub(r"\$\{([A-Z_][A-Z0-9_]*)\}|\$([A-Z_][A-Z0-9_]*)", sub, command)


def run_step(step: Step, env: dict[str, str], cwd: Path) -> str:
    """Run one README command; assert its exit code and excerpts; return its output (stdout + stderr)."""
    if step.command.startswith("ckptfix "):
        command, redirect = expand(step.command, env), None
        m = re.search(r"\s>\s*(\S+)$", command)
        if m:  # `ckptfix ... > FILE`: stdout to FILE, as the shell would
            command, redirect = command[: m.start()], m.group(1)
        with chdir(cwd), environ(env):
            code, out, err = run_ckptfix(shlex.split(command)[1:])
        if redirect is not None:
            Path(redirect).write_text(out)
            out = ""
    else:
        proc = subprocess.run(
            ["bash", "-c", step.command],
            cwd=cwd,
            env={**os.environ, **env, "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"},
            capture_output=True,
            text=True,
            timeout=300,
        )
        code, out, err = proc.returncode, proc.stdout, proc.stderr
    output = out + err
    if os.environ.get("CKPTFIX_RECIPES_VERBOSE"):
        print(f"$ {step.command}  -> exit {code}\n{output}")
    assert code == step.exit_code, f"`{step.command}` exited {code}, README says {step.exit_code}:\n{output}"
    assert_excerpts(step.excerpts, output, f"`{step.command}`")
    return output


def run_section(recipe: Path, title: str, env: dict[str, str]) -> list[str]:
    todo = steps(sections(recipe / "README.md")[title])
    assert todo, f"{recipe.name}: no commands in '## {title}'"
    return [run_step(s, env, recipe) for s in todo]


def error_lines(recipe: Path) -> list[str]:
    found = blocks(sections(recipe / "README.md")["Error"], "text")
    return [line.strip() for block in found for line in block.splitlines() if line.strip()]


# ------------------------------------------------------------------------------------------ Spark helpers


def age(path: Path, seconds: float = 3600) -> None:
    """Set every file's modification time ``seconds`` back: the query stopped that long ago."""
    when = time.time() - seconds
    for p in [path, *path.rglob("*")]:
        os.utime(p, (when, when))


@contextlib.contextmanager
def confs(spark: Any, values: dict[str, str]) -> Iterator[None]:
    """Set session confs for one recipe and unset them afterwards (the session is shared)."""
    for key, value in values.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key in values:
            spark.conf.unset(key)


def restart(writer: Any, ckpt: Path, timeout: float = 300) -> str | None:
    """Run ``writer`` on ``ckpt`` with availableNow; None when it finished, else the error text (Java chain)."""
    try:
        query = writer.option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start()
    except Exception as exc:
        return error_text(exc)
    try:
        if not query.awaitTermination(timeout):
            query.stop()
            return f"timeout after {timeout}s"
    except Exception as exc:
        return error_text(exc)
    return None


def load(recipe: Path, name: str) -> Any:
    from _shared import load_module

    return load_module(recipe / name)


def recipe(name: str) -> Path:
    found = [p for p in recipe_dirs() if p.name.endswith("-" + name)]
    assert len(found) == 1, f"recipe *-{name}: {found}"
    return found[0]


def env_of(paths: dict[str, Path]) -> dict[str, str]:
    return {k: str(v) for k, v in paths.items()}


def input_rows(input_dir: Path) -> list[dict[str, Any]]:
    from _shared import read_rows

    return list(read_rows(input_dir))


# ------------------------------------------------------------------------------------------ docs


def test_every_recipe_is_documented_and_listed() -> None:
    dirs = recipe_dirs()
    assert len(dirs) >= 7, dirs
    index = (RECIPES / "README.md").read_text()
    for d in dirs:
        assert f"({d.name}/)" in index, f"recipes/README.md does not link {d.name}/"
        readme = d / "README.md"
        assert readme.is_file(), f"{d.name}: no README.md"
        found = sections(readme)
        missing = [s for s in SECTIONS if s not in found]
        assert not missing, f"{d.name}/README.md lacks sections {missing}"
        assert (d / "query.py").is_file(), f"{d.name}: no query.py"
        assert steps(found["Fix"]), f"{d.name}: '## Fix' has no $ commands"
        assert steps(found["What ckptfix audit says"]), f"{d.name}: '## What ckptfix audit says' has no $ commands"


def test_readme_parser_reads_commands_exit_codes_and_excerpts() -> None:
    text = "```console\n$ ckptfix audit $CKPT  # exit 1\nERROR LOG-ASYNC-GAP\n$ rm -r $OUT/x\n```\n"
    got = steps(text)
    assert [(s.command, s.exit_code, s.excerpts) for s in got] == [
        ("ckptfix audit $CKPT", 1, ["ERROR LOG-ASYNC-GAP"]),
        ("rm -r $OUT/x", 0, []),
    ]
    assert excerpt_regex("batch <N> doesn't  exist").search("x batch 27 doesn't exist y")
    assert not excerpt_regex("batch <N> doesn't exist").search("batch 27 does exist")
    with pytest.raises(AssertionError):
        expand("ckptfix audit $NOPE", {})


# ------------------------------------------------------------------------------------------ live recipes


def test_04_rollback_to_batch(spark: Any, tmp_path: Path) -> None:
    rdir = recipe("rollback-to-batch")
    paths = load(rdir, "reproduce.py").reproduce(spark, tmp_path)
    env = env_of(paths)
    query: Callable[..., Any] = load(rdir, "query.py").query
    from _shared import sink_batches

    assert any(r["value_x2"] == r["value"] * 20 for r in sink_batches(paths["OUT"])[3]), "the bad release did not run"
    age(paths["CKPT"])
    run_section(rdir, "What ckptfix audit says", env)
    run_section(rdir, "Fix", env)
    run_section(rdir, "Check", env)
    assert restart(query(spark, str(paths["INPUT"]), str(paths["OUT"]), buggy=False), paths["CKPT"]) is None
    # the file source re-reads the three rolled-back files in ONE batch (batch 3), as the README says
    assert sorted(sink_batches(paths["OUT"])) == [0, 1, 2, 3]
    got = [r for rows in sink_batches(paths["OUT"]).values() for r in rows]
    want = input_rows(paths["INPUT"])
    assert sorted(r["id"] for r in got) == sorted(r["id"] for r in want)  # each row exactly once
    assert all(r["value_x2"] == r["value"] * 2 for r in got), [r for r in got if r["value_x2"] != r["value"] * 2]


def _unrecorded_rows(ckpt: Path, output_dir: Path) -> set[int]:
    """Ids the async run wrote to the sink in batches its offset log never recorded (batch id > latest offset)."""
    from _shared import offset_ids, sink_batches

    latest = offset_ids(ckpt)[-1]
    return {r["id"] for b, rows in sink_batches(output_dir).items() if b > latest for r in rows}


def _assert_at_least_once(input_dir: Path, output_dir: Path, unrecorded: set[int]) -> None:
    """Async progress tracking is at-least-once: input processed in batches the offset log never recorded is read
    again, in one batch with a lower id, so the sink (idempotent by batch id) keeps the old copy of those rows
    unless the new batch ids overwrite them. Nothing may be lost, and only those rows may appear twice."""
    from collections import Counter

    from _shared import sink_batches

    got = Counter(r["id"] for rows in sink_batches(output_dir).values() for r in rows)
    want = {r["id"] for r in input_rows(input_dir)}
    assert set(got) == want, f"missing {sorted(want - set(got))}, unexpected {sorted(set(got) - want)}"
    twice = {i for i, n in got.items() if n > 1}
    assert twice <= unrecorded, f"duplicated rows {sorted(twice - unrecorded)} were recorded before the fix"
    assert max(got.values()) <= 2


@pytest.fixture(scope="module")
def async_base(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One checkpoint left by async progress tracking (recipe 02's reproduce.py), shared by recipes 01 and 02."""
    return dict(load(recipe("batch-doesnt-exist"), "reproduce.py").reproduce(spark, tmp_path_factory.mktemp("async")))


def copy_async(base: dict[str, Path], dest: Path) -> dict[str, Path]:
    import shutil

    paths = {"CKPT": dest / "ckpt", "INPUT": base["INPUT"], "OUT": dest / "out"}  # input stays: sources/ logs it
    shutil.copytree(base["CKPT"], paths["CKPT"])
    shutil.copytree(base["OUT"], paths["OUT"])
    return paths


def test_02_batch_doesnt_exist(spark: Any, async_base: dict[str, Path], tmp_path: Path) -> None:
    from _shared import write_input

    rdir = recipe("batch-doesnt-exist")
    paths = copy_async(async_base, tmp_path)
    env = env_of(paths)
    query = load(rdir, "query.py").query
    unrecorded = _unrecorded_rows(paths["CKPT"], paths["OUT"])
    error = restart(query(spark, str(paths["INPUT"]), str(paths["OUT"])), paths["CKPT"])
    assert error is not None, "the query restarted without the fix"
    assert_excerpts(error_lines(rdir), error, "restart before the fix")
    age(paths["CKPT"])
    run_section(rdir, "What ckptfix audit says", env)
    run_section(rdir, "Fix", env)
    run_section(rdir, "Check", env)
    write_input(paths["INPUT"], 10, 2)
    assert restart(query(spark, str(paths["INPUT"]), str(paths["OUT"])), paths["CKPT"]) is None
    _assert_at_least_once(paths["INPUT"], paths["OUT"], unrecorded)


def _assert_aggregates(input_dir: Path, output_dir: Path) -> None:
    from _shared import sink_batches

    want: dict[str, tuple[int, int]] = {}
    for r in input_rows(input_dir):
        c, t = want.get(r["key"], (0, 0))
        want[r["key"]] = (c + 1, t + r["value"])
    got: dict[str, tuple[int, int]] = {}
    for _, rows in sorted(sink_batches(output_dir).items()):  # update mode: the newest batch has the value
        for r in rows:
            got[r["key"]] = (r["cnt"], r["total"])
    assert got == want


def recorded_error(case: str, version: str) -> str:
    import json

    outcome = json.loads((ROOT / "tests" / "fixtures" / f"spark-{version}" / "outcomes.json").read_text())[case]
    assert outcome["ok"] in (False, "False"), f"{case} restarted on {version}"
    return str(outcome["text"])


def test_03_corrupt_state_snapshot(spark: Any, tmp_path: Path) -> None:
    from _shared import write_input

    rdir = recipe("corrupt-state-snapshot")
    repro = load(rdir, "reproduce.py")
    # Spark 4.3 (the live one) falls back to an older snapshot by itself; the README's error is what real Spark
    # 3.5.9 and 4.0.5 raised on the same damage (recorded by tests/fixtures/generate_spark35.py).
    for version in ("3.5.9", "4.0.5"):
        assert_excerpts(error_lines(rdir), recorded_error("state_snapshot_corrupt", version), f"Spark {version}")
    with confs(spark, repro.CONFS):
        paths = repro.reproduce(spark, tmp_path)
        env = env_of(paths)
        age(paths["CKPT"])
        run_section(rdir, "What ckptfix audit says", env)
        run_section(rdir, "Fix", env)
        run_section(rdir, "Check", env)
        write_input(paths["INPUT"], 8, 2)
        assert (
            restart(load(rdir, "query.py").query(spark, str(paths["INPUT"]), str(paths["OUT"])), paths["CKPT"]) is None
        )
    _assert_aggregates(paths["INPUT"], paths["OUT"])


def test_05_new_checkpoint_from_offsets(spark: Any, tmp_path: Path) -> None:
    from _shared import sink_batches, write_input

    rdir = recipe("new-checkpoint-from-offsets")
    paths = load(rdir, "reproduce.py").reproduce(spark, tmp_path)
    env = env_of(paths)
    query = load(rdir, "query.py").query
    write_input(paths["INPUT"], 4, 2)  # new data for release 2
    every_input = input_rows(paths["INPUT"])
    error = restart(query(spark, str(paths["INPUT"]), str(paths["OUT"]), dedup=True), paths["CKPT"])
    assert error is not None, "release 2 started on the old checkpoint"
    assert_excerpts(error_lines(rdir), error, "release 2 on the old checkpoint")
    age(paths["CKPT"])
    run_section(rdir, "What ckptfix audit says", env)
    run_section(rdir, "Fix", env)
    assert restart(query(spark, str(paths["INPUT"]), str(paths["NEW_OUT"]), dedup=True), paths["NEW_CKPT"]) is None
    run_section(rdir, "Check", env)
    old = [r["id"] for rows in sink_batches(paths["OUT"]).values() for r in rows]
    new = [r["id"] for rows in sink_batches(paths["NEW_OUT"]).values() for r in rows]
    assert sorted(old + new) == sorted(r["id"] for r in every_input)


def test_06_state_to_initial_state(spark: Any, tmp_path: Path) -> None:
    import shutil

    from _shared import sink_batches, write_input

    rdir = recipe("state-to-initial-state")
    mod = load(rdir, "query.py")
    paths = load(rdir, "reproduce.py").reproduce(spark, tmp_path)
    env = env_of(paths)
    write_input(paths["INPUT"], 4, 2)  # new data after release 1 stopped
    every_input = input_rows(paths["INPUT"])
    ckpt_v1, out_v1 = tmp_path / "ckpt_release1", tmp_path / "out_release1"
    shutil.copytree(paths["CKPT"], ckpt_v1)  # release 1 carried on: what the seeded query must reproduce
    with confs(spark, {"spark.sql.streaming.stateStore.providerClass": mod.ROCKSDB_PROVIDER}):
        error = restart(mod.seeded_query(spark, str(paths["INPUT"]), str(paths["OUT"])), paths["CKPT"])
        assert error is not None, "release 2 started on release 1's checkpoint"
        assert_excerpts(error_lines(rdir), error, "release 2 on the old checkpoint")
        age(paths["CKPT"])
        run_section(rdir, "What ckptfix audit says", env)
        run_section(rdir, "Fix", env)
        run_section(rdir, "Check", env)
        seeded = mod.seeded_query(spark, str(paths["INPUT"]), str(paths["NEW_OUT"]), str(paths["STATE_PARQUET"]))
        assert restart(seeded, paths["NEW_CKPT"]) is None
    # release 1 on its own checkpoint copy (the processed files are moved away: its file source log knows them)
    assert restart(mod.query(spark, str(paths["INPUT"]), str(out_v1)), ckpt_v1) is None

    def per_batch(out: Path) -> list[dict[str, tuple[int, int]]]:
        return [{r["key"]: (r["cnt"], r["total"]) for r in rows} for _, rows in sorted(sink_batches(out).items())]

    seeded_out, release1_out = per_batch(paths["NEW_OUT"]), per_batch(out_v1)
    assert len(seeded_out) == 2, seeded_out  # the two new files, nothing of the four counted before
    assert seeded_out == release1_out
    want: dict[str, tuple[int, int]] = {}
    for r in every_input:
        c, t = want.get(r["key"], (0, 0))
        want[r["key"]] = (c + 1, t + r["value"])
    final = {k: v for batch in seeded_out for k, v in batch.items()}
    assert final == {k: want[k] for k in final}


def _unpack(tarball: Path, dest: Path) -> Path:
    import tarfile

    dest.mkdir(parents=True)
    with tarfile.open(tarball) as tf:
        try:  # keeps the recorded mtimes: the checkpoints look long stopped
            tf.extractall(dest, filter="data")
        except TypeError:  # Python without extraction filters
            tf.extractall(dest)  # noqa: S202 - our own fixture
    return dest / "ckpt"


def test_07_pre_upgrade_audit_ci(tmp_path: Path) -> None:
    import json

    rdir = recipe("pre-upgrade-audit-ci")
    fixtures = ROOT / "tests" / "fixtures"
    env = {
        "CKPT": str(_unpack(fixtures / "state35" / "join_hdfs.tar.gz", tmp_path / "join")),
        "GOOD_CKPT": str(_unpack(fixtures / "spark-4.2.1" / "stateless.tar.gz", tmp_path / "good")),
        "WORK": str(tmp_path),
    }
    text = (rdir / "README.md").read_text()
    # the CI snippet runs the command the test runs
    (yaml_run,) = re.findall(r"^\s*run: (ckptfix audit .*)$", text, flags=re.M)
    gate = steps(sections(rdir / "README.md")["Fix"])[0].command
    assert yaml_run.split(">")[0].split() == gate.split(">")[0].split()

    run_section(rdir, "What ckptfix audit says", env)
    fix = steps(sections(rdir / "README.md")["Fix"])
    for step in fix[:2]:  # the gate: the 3.5 join fails it (exit 1), a healthy checkpoint passes (exit 0)
        run_step(step, env, rdir)
    report = json.loads((tmp_path / "audit.json").read_text())
    assert report["schema_version"] == 1 and report["target_spark"] == "4.3"
    verdict = report["verdict"]
    assert verdict["restarts"] is False and verdict["blocking_rule"] == "UPGRADE-JOIN-NULLABILITY"
    assert {"exception", "error_class", "message", "batch"} <= set(verdict["error"])
    assert_excerpts(error_lines(rdir), f"[{verdict['error']['error_class']}] {verdict['error']['message']}", "verdict")
    assert any(f["rule_id"] == "UPGRADE-JOIN-NULLABILITY" and f["severity"] == "error" for f in report["findings"])
    assert all({"rule_id", "severity", "title", "message", "evidence", "fix"} <= set(f) for f in report["findings"])
    good = json.loads((tmp_path / "good.json").read_text())
    assert good["verdict"]["restarts"] is True and good["verdict"]["blocking_rule"] is None
    for step in fix[2:]:  # the repair the finding names
        run_step(step, env, rdir)
    run_section(rdir, "Check", env)
    after = json.loads((tmp_path / "audit.json").read_text())
    assert after["verdict"]["restarts"] is True
    # exit 2: a path that is not a checkpoint fails the gate too, with one JSON error document
    code, out, _ = run_ckptfix(["audit", str(tmp_path / "nope"), "--target-spark", "4.3", "--format", "json"])
    assert code == 2 and "error" in json.loads(out)


def test_01_async_progress_off(spark: Any, async_base: dict[str, Path], tmp_path: Path) -> None:
    from _shared import write_input

    rdir = recipe("async-progress-off")
    paths = copy_async(async_base, tmp_path)
    env = env_of(paths)
    query = load(rdir, "query.py").query
    unrecorded = _unrecorded_rows(paths["CKPT"], paths["OUT"])
    write_input(paths["INPUT"], 10, 3)  # new input for the batches async-off runs
    error = restart(query(spark, str(paths["INPUT"]), str(paths["OUT"])), paths["CKPT"])  # async options removed
    assert error is not None, "the query restarted without async tracking before the fix"
    assert_excerpts(error_lines(rdir), error, "restart before the fix")
    age(paths["CKPT"])
    run_section(rdir, "What ckptfix audit says", env)
    run_section(rdir, "Fix", env)
    run_section(rdir, "Check", env)
    write_input(paths["INPUT"], 13, 1)
    assert restart(query(spark, str(paths["INPUT"]), str(paths["OUT"])), paths["CKPT"]) is None
    _assert_at_least_once(paths["INPUT"], paths["OUT"], unrecorded)


def _recorded_partitions(ckpt: Path, batch: int) -> str:
    """``spark.sql.shuffle.partitions`` as ``offsets/<batch>`` records it (line 2: the batch metadata)."""
    import json

    return str(
        json.loads((ckpt / "offsets" / str(batch)).read_text().splitlines()[1])["conf"]["spark.sql.shuffle.partitions"]
    )


def _state_partitions(ckpt: Path) -> list[int]:
    return sorted(int(p.name) for p in (ckpt / "state" / "0").iterdir() if p.name.isdigit())


def test_08_repartition_state(spark: Any, tmp_path: Path) -> None:
    from _shared import offset_ids, write_input

    from tests.support.settle import settle

    rdir = recipe("repartition-state")
    paths = load(rdir, "reproduce.py").reproduce(spark, tmp_path)
    env = env_of(paths)
    query = load(rdir, "query.py").query
    ckpt = paths["CKPT"]
    assert _recorded_partitions(ckpt, offset_ids(ckpt)[-1]) == "4" and _state_partitions(ckpt) == [0, 1, 2, 3]
    # the symptom, live: the session asks for 8, Spark keeps the 4 the offset log records
    write_input(paths["INPUT"], 4, 1)
    before = offset_ids(ckpt)[-1]
    session_value = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "8")
    try:
        assert restart(query(spark, str(paths["INPUT"]), str(paths["OUT"])), ckpt) is None
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", session_value)
    assert offset_ids(ckpt)[-1] == before + 1, "the restart ran no batch"
    assert _recorded_partitions(ckpt, before + 1) == "4"
    assert _state_partitions(ckpt) == [0, 1, 2, 3]
    assert all((ckpt / "state" / "0" / str(p) / f"{before + 2}.delta").is_file() for p in range(4))
    settle(spark, ckpt)  # Spark's maintenance thread writes snapshots after the query stopped
    age(ckpt)
    run_section(rdir, "What ckptfix audit says", env)
    run_section(rdir, "Fix", env)
    run_section(rdir, "Check", env)
    repartition_batch = offset_ids(ckpt)[-1]
    write_input(paths["INPUT"], 5, 2)
    # the session says 3 (the test fixture's): the offset log's 8 wins now
    assert restart(query(spark, str(paths["INPUT"]), str(paths["OUT"])), ckpt) is None
    newest = offset_ids(ckpt)[-1]
    assert newest == repartition_batch + 2  # one batch per new file
    assert _recorded_partitions(ckpt, newest) == "8"
    assert _state_partitions(ckpt) == list(range(8))
    # Spark ran 8 state store tasks: each partition has the delta of the newest batch's version
    assert all((ckpt / "state" / "0" / str(p) / f"{newest + 1}.delta").is_file() for p in range(8))
    _assert_aggregates(paths["INPUT"], paths["OUT"])


def test_09_remove_a_poison_key(spark: Any, tmp_path: Path) -> None:
    from _shared import sink_batches, write_input

    from tests.support.settle import settle

    rdir = recipe("remove-a-poison-key")
    repro = load(rdir, "reproduce.py")
    paths = repro.reproduce(spark, tmp_path)
    env = env_of(paths)
    query = load(rdir, "query.py").query
    poison = repro.POISON_KEY
    old_ids = {r["id"] for r in input_rows(paths["INPUT"])}
    sink = [r for rows in sink_batches(paths["OUT"]).values() for r in rows]
    assert any(r["key"] == poison and r["total"] >= 10**12 for r in sink), "the poison did not reach the state"
    settle(spark, paths["CKPT"])
    age(paths["CKPT"])
    run_section(rdir, "What ckptfix audit says", env)
    run_section(rdir, "Fix", env)
    (state_rows, *_) = run_section(rdir, "Check", env)
    assert f'"{poison}"' not in state_rows, state_rows
    write_input(paths["INPUT"], 4, 2)
    assert restart(query(spark, str(paths["INPUT"]), str(paths["OUT"])), paths["CKPT"]) is None

    def aggregate(rows: list[dict[str, Any]]) -> dict[str, tuple[int, int]]:
        out: dict[str, tuple[int, int]] = {}
        for r in rows:
            c, t = out.get(r["key"], (0, 0))
            out[r["key"]] = (c + 1, t + r["value"])
        return out

    every = input_rows(paths["INPUT"])
    want = aggregate(every)
    new_only = aggregate([r for r in every if r["id"] not in old_ids])
    assert poison in new_only, "the new input has no row of the poison key"
    want[poison] = new_only[poison]  # the deleted key starts again from the new input
    got: dict[str, tuple[int, int]] = {}
    for _, rows in sorted(sink_batches(paths["OUT"]).items()):  # update mode: the newest batch has the value
        for r in rows:
            got[r["key"]] = (r["cnt"], r["total"])
    assert got == want


def _files_below(root: Path) -> set[str]:
    """Every file below ``root`` (relative, POSIX), ckptfix's own backups (``_ckptfix/``) excluded."""
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() and "_ckptfix" not in p.parts}


def _file_sink_log(output_dir: Path) -> list[int]:
    return sorted(int(p.name) for p in (output_dir / "_spark_metadata").iterdir() if p.name.isdigit())


def _file_sink_rows(spark: Any, output_dir: Path) -> list[dict[str, Any]]:
    """What a reader of the file sink sees: ``spark.read`` lists the files ``_spark_metadata`` names."""
    return [r.asDict() for r in spark.read.json(str(output_dir)).collect()]


def _assert_rows_lost(spark: Any, paths: dict[str, Path], fixed_ids: set[int], new_ids: set[int]) -> None:
    """The re-planned batch was skipped by the file sink: the new file's rows are missing and the re-run rows
    have only their bad copies (value * 20)."""
    assert _file_sink_log(paths["OUT"]) == [0, 1, 2, 3, 4, 5]  # no entry for the re-planned batch
    rows = _file_sink_rows(spark, paths["OUT"])
    ids = {r["id"] for r in rows}
    assert not new_ids & ids, "the new file's rows reached the sink"
    assert fixed_ids <= ids
    assert all(r["value_x2"] == r["value"] * 20 for r in rows if r["id"] in fixed_ids)


def test_10_rollback_with_a_file_sink(spark: Any, tmp_path: Path) -> None:
    import json
    from urllib.parse import unquote, urlparse

    from _shared import offset_ids, read_rows, write_input

    rdir = recipe("rollback-with-a-file-sink")
    repro = load(rdir, "reproduce.py")
    query = load(rdir, "query.py").query
    # three reproductions (a file sink's log holds absolute paths: a copy of it would name the original's files)
    paths = repro.reproduce(spark, tmp_path / "recipe")
    forced = repro.reproduce(spark, tmp_path / "forced")
    fresh = repro.reproduce(spark, tmp_path / "fresh")
    for p in (paths, forced, fresh):
        write_input(p["INPUT"], 6, 1)  # input that arrived after the bad release
    fixed_ids = {r["id"] for i in range(3, 6) for r in read_rows(paths["INPUT"], f"part-{i:04d}.json")}
    new_ids = {r["id"] for r in read_rows(paths["INPUT"], "part-0006.json")}
    assert _file_sink_log(paths["OUT"]) == [0, 1, 2, 3, 4, 5]

    # Why the refusal is right: the rollback forced without --sink, restarted by real Spark
    age(forced["CKPT"])
    code, out, err = run_ckptfix(["rollback", str(forced["CKPT"]), "--to-batch", "2", "--apply"])
    assert code == 0, out + err
    assert restart(query(spark, str(forced["INPUT"]), str(forced["OUT"]), buggy=False), forced["CKPT"]) is None
    assert offset_ids(forced["CKPT"])[-1] == 3  # batch 3 re-planned over files 3-6 and committed
    _assert_rows_lost(spark, forced, fixed_ids, new_ids)

    # A new checkpoint from batch 2's offsets into the same file sink (right for a Delta table, whose txn is per
    # query id) loses the same rows: the file sink's log is keyed by batch id alone. So the refusal must not offer it
    # for a file sink (the README says so), only the sink's rollback (--with-sink) or a new checkpoint into a new path
    code, out, err = run_ckptfix(
        ["rollback", str(fresh["CKPT"]), "--to-batch", "2", "--sink", str(fresh["OUT"]), "--force"]
    )
    assert code == 2 and "--with-sink" in err and "new checkpoint that writes to a new output path" in err, err
    assert "not a new checkpoint into the same path" in err, err
    code, out, err = run_ckptfix(["offsets", "export", str(fresh["CKPT"]), "--batch", "2", "--format", "json"])
    assert code == 0, out + err
    moved = tmp_path / "fresh" / "processed"
    moved.mkdir()
    for url in json.loads(out)["sources"][0]["processed_files"]:
        src = Path(url.removeprefix("file://"))
        src.rename(moved / src.name)
    new_ckpt = tmp_path / "fresh" / "ckpt2"
    assert restart(query(spark, str(fresh["INPUT"]), str(fresh["OUT"]), buggy=False), new_ckpt) is None
    assert offset_ids(new_ckpt)[-1] == 3  # batches 0-3 of the new query, all skipped by the sink
    _assert_rows_lost(spark, fresh, fixed_ids, new_ids)

    # The recipe: the sink and the checkpoint rolled back together, each through the repair engine
    env = env_of(paths)
    age(paths["CKPT"])
    age(paths["OUT"])  # the sink too: its run checks that nothing wrote to it recently
    before_out = _files_below(paths["OUT"])
    later = [f"_spark_metadata/{b}" for b in (3, 4, 5)]  # the entries the fix removes, and the files they add
    for entry in list(later):
        for line in (paths["OUT"] / entry).read_text().splitlines()[1:]:
            later.append(Path(unquote(urlparse(json.loads(line)["path"]).path)).relative_to(paths["OUT"]).as_posix())
    later += [f"{p.rpartition('/')[0]}/.{p.rpartition('/')[2]}.crc".lstrip("/") for p in later]  # Hadoop sidecars
    run_section(rdir, "What ckptfix audit says", env)
    run_section(rdir, "Fix", env)
    assert _file_sink_log(paths["OUT"]) == [0, 1, 2]
    assert before_out - _files_below(paths["OUT"]) == set(later) & before_out  # nothing else left the sink
    assert len(set(later) & before_out) >= 6  # three entries, at least three data files
    run_section(rdir, "Check", env)
    assert restart(query(spark, str(paths["INPUT"]), str(paths["OUT"]), buggy=False), paths["CKPT"]) is None
    assert _file_sink_log(paths["OUT"]) == [0, 1, 2, 3]
    got = _file_sink_rows(spark, paths["OUT"])
    want = input_rows(paths["INPUT"])
    assert sorted(r["id"] for r in got) == sorted(r["id"] for r in want)  # each row exactly once
    assert all(r["value_x2"] == r["value"] * 2 for r in got), [r for r in got if r["value_x2"] != r["value"] * 2]


pytestmark = pytest.mark.spark  # starts Spark (checked by tests/spark/plugin.py)
