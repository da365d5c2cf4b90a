"""Run scenarios on real Spark: build base checkpoints and restart (possibly damaged) checkpoints.

Works under PySpark 3.5 and 4.x; no pytest import (used by tests/fixtures/generate_spark35.py too).
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.spark.queries import (
    FOREACH_BATCH_ERRORS,
    SCENARIO_CONF_KEYS,
    SCENARIOS,
    Scenario,
    append_dir,
    apply_confs,
    count_input_files,
    write_input_files,
)

MAX_CAUSES = 25


@dataclass
class Outcome:
    ok: bool
    text: str = ""
    query_id: str | None = None
    rows: int | None = None
    batches: list[int] = field(default_factory=list)
    # After a successful restart: does the sink hold exactly the right data? (None = not checked)
    correct: bool | None = None
    detail: str = ""
    # restart_times: the outcomes of the restarts before this one, oldest first
    earlier: list[Outcome] = field(default_factory=list)

    def to_json(self, limit: int = 3000) -> dict[str, Any]:
        rec: dict[str, Any] = {"ok": self.ok, "text": trim_text(self.text, limit)}
        if self.ok:
            rec.update(correct=self.correct, detail=self.detail, rows=self.rows, batches=self.batches)
        if self.earlier:
            rec["earlier_restarts"] = [o.to_json(limit) for o in self.earlier]
        return rec


def trim_text(text: str, limit: int = 3000) -> str:
    """Trim error text to about ``limit`` chars, keeping the Java class/message lines first.

    ``text`` is built by :func:`restart` as the Java cause chain first, then the Python exception text, so
    keeping the head keeps the class names and messages.
    """
    if len(text) <= limit:
        return text
    return text[:limit] + " …[trimmed]"


def scrub_machine_paths(text: str) -> str:
    """Recorded Spark texts name no machine path: Spark's local dirs (``/tmp/spark-<uuid>``) and any virtualenv's
    ``.../lib/pythonX.Y/site-packages`` (Python tracebacks through py4j) become placeholders. The callers replace
    their own scratch dir and the checkout first."""
    text = re.sub(r"/tmp/spark-[0-9a-f-]+", "<spark-local-dir>", text)
    text = re.sub(r"(?:<repo>)?/[^\s\"'<>]*/lib/python3\.[0-9]+/site-packages", "<site-packages>", text)
    # an absolute path that :func:`trim_text` cut before its end (at the end of the text or of one of its sections),
    # so the patterns above could not see it whole
    return re.sub(r"(?<![\w<>])/[^\s\"'<>]* …\[trimmed\]", "<path> …[trimmed]", text)


# --------------------------------------------------------------------------------------------- errors


def java_chain(jthrowable: Any) -> list[str]:
    """``<class>: <message>`` for a py4j Java throwable and all its causes (plus the error class if any)."""
    lines: list[str] = []
    seen: set[int] = set()
    t = jthrowable
    while t is not None and len(lines) < MAX_CAUSES:
        try:
            ident = t.hashCode()
        except Exception:
            ident = id(t)
        if ident in seen:
            break
        seen.add(ident)
        try:
            name = t.getClass().getName()
            msg = t.getMessage()
        except Exception as exc:  # not a throwable after all
            lines.append(f"<unreadable java object: {exc}>")
            break
        cond = None
        for getter in ("getCondition", "getErrorClass"):
            try:
                cond = getattr(t, getter)()
                break
            except Exception:
                continue
        prefix = f"[{cond}] " if cond and f"[{cond}]" not in (msg or "") else ""
        lines.append(f"{name}: {prefix}{strip_query_block(msg)}")
        try:
            t = t.getCause()
        except Exception:
            break
    return lines


def strip_query_block(msg: str | None) -> str | None:
    """Drop the ``=== Streaming Query ===`` description (plan, offsets) that Spark appends to
    StreamingQueryException messages; it is long and says nothing about the damage."""
    if msg and "\n=== Streaming Query ===" in msg:
        return msg.split("\n=== Streaming Query ===", 1)[0]
    return msg


def _java_of(exc: BaseException) -> Any:
    for attr in ("_origin", "java_exception"):
        j = getattr(exc, attr, None)
        if j is not None:
            return j
    return None


_EXC_LINE = re.compile(r"(?:Caused by: |: )?((?:[a-z][\w$]*\.)+[A-Z][\w$]*(?:Exception|Error|Throwable)\b[^\n]*)")


def summary_lines(chains: list[list[str]], limit: int = 600) -> list[str]:
    """One line per distinct Java exception seen: ``class: first line of message`` (also harvested from
    stack-trace text embedded in messages, e.g. "Job aborted ... Lost task ...: <exception>" and the Python
    proxy's traceback). Innermost-looking causes come first."""
    found: list[str] = []
    for chain in chains:
        for entry in reversed(chain):
            for line in entry.split("\n"):
                m = _EXC_LINE.search(line)
                if m:
                    found.append(m.group(1).strip()[:limit])
            found.append(entry.split("\n", 1)[0][:limit])
    out: list[str] = []
    for line in found:
        if line not in out:
            out.append(line)
    return out


def error_text(exc: BaseException | None, jthrowable: Any = None, extra: list[list[str]] | None = None) -> str:
    """Error text: a compact summary of every Java exception class + message first, then the full Java cause
    chains (foreachBatch-internal errors first) and the Python exception."""
    if jthrowable is None and exc is not None:
        jthrowable = _java_of(exc)
    chains: list[list[str]] = list(extra or [])
    if jthrowable is not None:
        chains.append(java_chain(jthrowable))
    parts: list[str] = []
    if chains:
        parts.append("== Java exceptions (summary) ==")
        parts.extend(summary_lines(chains))
    for i, chain in enumerate(chains):
        inner = i < len(chains) - 1 or jthrowable is None
        parts.append("== Java cause chain (raised inside foreachBatch) ==" if inner else "== Java cause chain ==")
        parts.extend(chain)
    if exc is not None:
        parts.append("== Python exception ==")
        parts.append(f"{type(exc).__module__}.{type(exc).__name__}: {strip_query_block(str(exc))}")
    return "\n".join(parts)


def await_available_now(query: Any, timeout: float) -> None:
    """Wait for a started availableNow query and stop it; raise RuntimeError with Spark's error text (Java cause
    chain included) when it failed, or when it did not finish within ``timeout`` seconds."""
    try:
        finished = query.awaitTermination(timeout)
        error = query.exception()
    except Exception as exc:  # StreamingQueryException
        raise RuntimeError(error_text(exc)) from exc
    finally:
        with contextlib.suppress(Exception):
            query.stop()
    if error is not None:
        raise RuntimeError(error_text(error))
    if not finished:
        raise RuntimeError(f"query did not finish in {timeout}s")


def foreach_batch_errors() -> list[list[str]]:
    chains: list[list[str]] = []
    for exc in FOREACH_BATCH_ERRORS:
        j = _java_of(exc)
        chains.append(java_chain(j) if j is not None else [f"{type(exc).__name__}: {exc}"])
    return chains


# --------------------------------------------------------------------------------------------- running


def _start(spark: Any, scenario: Scenario, ckpt: Path, input_dir: Path, output_dir: Path, *, base: bool) -> Any:
    apply_confs(spark, scenario)
    writer = scenario.build(spark, input_dir, output_dir)
    writer = writer.option("checkpointLocation", str(ckpt)).queryName(f"ckptfix_{scenario.name}")
    if base and scenario.is_async:
        for key, value in scenario.async_options.items():
            writer = writer.option(key, value)
        writer = writer.trigger(processingTime=scenario.processing_time)
    else:
        writer = writer.trigger(availableNow=True)
    return writer.start()


def _stop_quietly(query: Any) -> None:
    with contextlib.suppress(Exception):
        query.stop()


def read_query_id(ckpt: Path) -> str | None:
    try:
        return json.loads((ckpt / "metadata").read_text()).get("id")
    except Exception:
        return None


def count_sink_rows(spark: Any, scenario: Scenario, output_dir: Path) -> int | None:
    """Rows in the idempotent sink (foreachBatch: JSON lines under batch_id=*; file sink: via Spark)."""
    try:
        if scenario.sink == "file":
            return len(_file_sink_ids(output_dir))
        total = 0
        for part in output_dir.glob("batch_id=*/part-*"):
            total += sum(1 for line in part.read_text().splitlines() if line.strip())
        return total
    except Exception:
        return None


def _input_rows(input_dir: Path) -> list[dict[str, Any]]:
    rows = []
    for path in sorted(input_dir.glob("part-*.json")):
        rows.extend(json.loads(line) for line in path.read_text().splitlines() if line.strip())
    return rows


def _batch_rows(output_dir: Path, upto: int | None = None) -> list[tuple[int, dict[str, Any]]]:
    """(batch id, row) of every foreachBatch output dir, oldest batch first; ``upto``: only batches up to that id
    (a checkpoint rolled back by hand leaves the output of its dropped batches behind, above the commits)."""
    out = []
    for d in output_dir.glob("batch_id=*"):
        bid = int(d.name.split("=", 1)[1])
        if upto is not None and bid > upto:
            continue
        for part in d.glob("part-*"):
            out.extend((bid, json.loads(line)) for line in part.read_text().splitlines() if line.strip())
    return sorted(out, key=lambda r: r[0])


def _file_sink_ids(output_dir: Path) -> list[int]:
    """ids in the files the file sink has committed (``_spark_metadata``), read with pyarrow."""
    import pyarrow.parquet as pq

    files: set[str] = set()
    for log in (output_dir / "_spark_metadata").iterdir():
        if log.name.startswith("."):
            continue
        for line in log.read_text().splitlines()[1:]:
            entry = json.loads(line)
            path = entry["path"].removeprefix("file://")
            if not Path(path).exists():  # a copy of the sink elsewhere: the log names the original's files
                path = str(output_dir / Path(path).name)
            (files.add if entry.get("action", "add") == "add" else files.discard)(path)
    ids: list[int] = []
    for path in sorted(files):
        ids.extend(int(x) for x in pq.read_table(path, columns=["id"]).column("id").to_pylist())
    return ids


def verify_output(
    spark: Any, scenario: Scenario, input_dir: Path, output_dir: Path, upto: int | None = None
) -> tuple[bool | None, str]:
    """Compare the idempotent sink with what the input files say it must hold (exactly once). ``upto``: the
    latest committed batch (foreachBatch output of later batch ids is left over from a rolled-back run)."""
    try:
        inputs = _input_rows(input_dir)
        if scenario.verify is not None:
            return scenario.verify(inputs, _batch_rows(output_dir, upto))
        if scenario.stateful and scenario.sink != "file":  # the file sink scenarios write the input rows
            want: dict[str, tuple[int, int]] = {}
            for r in inputs:
                c, t = want.get(r["key"], (0, 0))
                want[r["key"]] = (c + 1, t + r["value"])
            got: dict[str, tuple[int, int]] = {}
            for _, r in _batch_rows(output_dir, upto):  # update mode: the newest batch has the current value
                got[r["key"]] = (r.get("cnt"), r.get("total"))
            bad = {k: (got.get(k), v) for k, v in want.items() if got.get(k) != v}
            return (not bad, "aggregates correct" if not bad else f"wrong aggregates (got, want): {bad}")
        if scenario.sink == "file":
            ids = _file_sink_ids(output_dir)
        else:
            ids = [int(r["id"]) for _, r in _batch_rows(output_dir, upto)]
        want_ids = sorted(r["id"] for r in inputs)
        missing = sorted(set(want_ids) - set(ids))
        dups = len(ids) - len(set(ids))
        ok = not missing and not dups and len(set(ids)) == len(want_ids)
        return ok, ("exactly once" if ok else f"missing ids {missing[:20]} ({len(missing)}), {dups} duplicates")
    except Exception as exc:  # verification is best effort
        return None, f"not verified: {type(exc).__name__}: {exc}"


def restart(
    spark: Any,
    scenario: Scenario | str,
    ckpt: Path,
    input_dir: Path,
    output_dir: Path,
    new_files: int = 1,
    timeout: float = 120,
) -> Outcome:
    """Add ``new_files`` input files and run the scenario once with ``availableNow`` on ``ckpt``.

    The async scenario restarts WITHOUT async progress tracking (the documented failure mode). Returns
    ``Outcome(ok, text)``; ``text`` holds the Java cause chain (class names + messages), Java errors raised
    inside foreachBatch, and the Python exception text.
    """
    if isinstance(scenario, str):
        scenario = SCENARIOS[scenario]
    with kept_confs(spark):
        return _restart(spark, scenario, ckpt, input_dir, output_dir, new_files, timeout)


@contextlib.contextmanager
def kept_confs(spark: Any) -> Iterator[None]:
    """The scenario confs (:data:`SCENARIO_CONF_KEYS`) as they were before, once the run is over: a run leaves the
    shared session as it found it (CI of 2026-11-28: a format-v2 scenario's checkpointFormatVersion=2 stayed set,
    and a later test's HDFS query in the same session failed with STATE_STORE_CHECKPOINT_IDS_NOT_SUPPORTED)."""
    from tests.state.scenarios import session_confs

    with session_confs(spark, {}, list(SCENARIO_CONF_KEYS)):  # the run's apply_confs sets its own
        yield


def _restart(
    spark: Any, scenario: Scenario, ckpt: Path, input_dir: Path, output_dir: Path, new_files: int, timeout: float
) -> Outcome:
    ckpt, input_dir, output_dir = Path(ckpt), Path(input_dir), Path(output_dir)
    if new_files:
        # Files are numbered after the base run, so restarts of copies of one base all see the same new files.
        write_input_files(input_dir, scenario.base_files, new_files)
    FOREACH_BATCH_ERRORS.clear()
    try:
        query = _start(spark, scenario, ckpt, input_dir, output_dir, base=False)
    except Exception as exc:  # start() itself failed (e.g. metadata problems)
        return Outcome(False, error_text(exc), read_query_id(ckpt))
    exc: BaseException | None = None
    try:
        finished = query.awaitTermination(timeout)
    except Exception as e:
        exc = e
        finished = True
    if not finished:
        _stop_quietly(query)
        return Outcome(False, f"timeout: query did not terminate within {timeout}s", read_query_id(ckpt))
    jexc = None
    try:
        opt = query._jsq.exception()
        if opt.isDefined():
            jexc = opt.get()
    except Exception:
        pass
    batches = []
    with contextlib.suppress(Exception):
        batches = [int(p["batchId"]) for p in query.recentProgress]
    if exc is None and jexc is None:
        committed = offsets_ids(ckpt, "commits")
        correct, detail = verify_output(spark, scenario, input_dir, output_dir, committed[-1] if committed else None)
        rows = count_sink_rows(spark, scenario, output_dir)
        return Outcome(True, "", read_query_id(ckpt), rows, batches, correct, detail)
    text = error_text(exc, jexc, foreach_batch_errors())
    return Outcome(False, text, read_query_id(ckpt), None, batches)


def restart_times(
    spark: Any,
    scenario: Scenario | str,
    ckpt: Path,
    input_dir: Path,
    output_dir: Path,
    times: int = 1,
    timeout: float = 120,
) -> Outcome:
    """Restart ``times`` times (:func:`restart`), each with one new input file (``base_files``, then
    ``base_files + 1``, ...); stop at the first failure. Returns the last outcome, the earlier ones in
    ``Outcome.earlier``. The new files after the first are deleted afterwards: the input dir is shared by every copy
    of the base, and the other cases must still see exactly one new file."""
    if isinstance(scenario, str):
        scenario = SCENARIOS[scenario]
    input_dir = Path(input_dir)
    extra = [input_dir / f"part-{i:04d}.json" for i in range(scenario.base_files + 1, scenario.base_files + times)]
    ours = [p for p in extra if not p.exists()]
    earlier: list[Outcome] = []
    try:
        for i in range(times):
            outcome = restart(spark, scenario, ckpt, input_dir, output_dir, new_files=i + 1, timeout=timeout)
            if not outcome.ok or i == times - 1:
                outcome.earlier = earlier
                return outcome
            earlier.append(outcome)
    finally:
        for path in ours:
            path.unlink(missing_ok=True)
    raise ValueError(f"times must be >= 1, found {times}")


def offsets_ids(ckpt: Path, log: str = "offsets") -> list[int]:
    d = ckpt / log
    if not d.is_dir():
        return []
    return sorted(int(p.name) for p in d.iterdir() if p.name.isdigit() and str(int(p.name)) == p.name)


def build_base(
    spark: Any, scenario: Scenario | str, workdir: Path, timeout: float = 300, sparse_async: bool = True
) -> tuple[Path, Path, Path]:
    """Write a fresh base checkpoint for ``scenario`` under ``workdir``; returns (ckpt, input_dir, output_dir).

    Runs the scenario over ``scenario.base_files`` input files (one batch per file) with availableNow, or, for
    the async scenario, with a processingTime trigger and async progress tracking until all input is
    processed, then stops. The async base is retried until its offset log is sparse at the top
    (latest L with L-1 missing), which is what the async damage cases need (``sparse_async=False``: one run,
    whatever its offset log).
    """
    if isinstance(scenario, str):
        scenario = SCENARIOS[scenario]
    workdir = Path(workdir)
    attempts = 4 if scenario.is_async and sparse_async else 1
    for attempt in range(attempts):
        if workdir.exists():
            shutil.rmtree(workdir)
        ckpt, input_dir, output_dir = workdir / "ckpt", workdir / "input", workdir / "output"
        write_input_files(input_dir, 0, scenario.base_files)
        FOREACH_BATCH_ERRORS.clear()
        with kept_confs(spark):
            query = _start(spark, scenario, ckpt, input_dir, output_dir, base=True)
            try:
                if scenario.is_async:
                    query.processAllAvailable()
                    _stop_quietly(query)
                else:
                    if not query.awaitTermination(timeout):
                        _stop_quietly(query)
                        raise RuntimeError(f"base run of {scenario.name} did not finish in {timeout}s")
            except Exception as exc:
                _stop_quietly(query)
                raise RuntimeError(f"base run of {scenario.name} failed:\n{error_text(exc)}") from exc
        if scenario.stateful:
            time.sleep(1.0)  # let the maintenance thread finish snapshot uploads of the last versions
        if not scenario.is_async or not sparse_async:
            break
        offs = offsets_ids(ckpt)
        if offs and offs[-1] > 0 and offs[-1] - 1 not in offs:
            break
        if attempt == attempts - 1:
            raise RuntimeError(f"async base run never produced a sparse top of the offset log: {offs}")
    return ckpt, input_dir, output_dir


def moved_schema_paths(ckpt: Path, old: str, new: str) -> Iterator[tuple[Path, str]]:
    """transformWithState's operator metadata v2 names its schema files by absolute path, and a restart reads them
    there: each metadata file of ``ckpt`` that names ``old``, with its text naming ``new`` instead."""
    for path in ckpt.glob("state/*/_metadata/v2/*"):
        if path.name.startswith("."):
            continue
        text = path.read_text()
        moved = text.replace(old, new)
        if moved != text:
            yield path, moved


def rewrite_schema_paths(ckpt: Path, old: str, new: str) -> None:
    """:func:`moved_schema_paths` written back, with their Hadoop .crc sidecars."""
    from tests.support.trees import hadoop_crc

    for path, moved in list(moved_schema_paths(ckpt, old, new)):
        path.write_text(moved)
        sidecar = path.with_name(f".{path.name}.crc")
        if sidecar.exists():
            sidecar.write_bytes(hadoop_crc(moved.encode()))


def copy_base(base: tuple[Path, Path, Path], dest: Path) -> tuple[Path, Path, Path]:
    """Copy a base's checkpoint and sink output to ``dest``, its transformWithState schema paths moved with it. The
    input dir is shared (it is never damaged, and the file source log records absolute input paths, so it must
    stay where it is)."""
    ckpt, input_dir, output_dir = base
    dest.mkdir(parents=True, exist_ok=True)
    new_ckpt = dest / "ckpt"
    new_out = dest / output_dir.name
    shutil.copytree(ckpt, new_ckpt)
    # a copy whose metadata still named the base's schema files would restart on the base's (undamaged) ones, so
    # a damaged schema file in the copy went unseen (until 2026-11-28: schema_v3_type_name_flipped restarted
    # everywhere); the copy names its own files, as after `ckptfix migrate relocate`
    rewrite_schema_paths(new_ckpt, f"file:{ckpt}/", f"file:{new_ckpt}/")
    if output_dir.exists():
        shutil.copytree(output_dir, new_out)
    app = append_dir(output_dir)
    if app.exists():
        shutil.copytree(app, append_dir(new_out))
    return new_ckpt, input_dir, new_out


__all__ = [
    "Outcome",
    "build_base",
    "copy_base",
    "count_input_files",
    "error_text",
    "java_chain",
    "offsets_ids",
    "restart",
    "restart_times",
]
