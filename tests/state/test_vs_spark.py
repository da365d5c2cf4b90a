"""ckptfix's state reader against Spark's own ``statestore`` data source, on checkpoints written by real
Spark queries (tests/state/scenarios.py): every operator x provider, first/middle/last/latest batch, every
store / join side / state variable, partition filters, snapshot replay and change feeds.

Each case runs twice over:

* ``recorded`` (no Spark): every scenario's checkpoint as real PySpark 4.3.0 wrote it and Spark's answers on it,
  recorded in tests/fixtures/state_vs_spark/ (``<scenario>.tar.gz`` and ``<scenario>.json``, written by the
  ``generate.py`` there; tests/state/golden.py lists the reads). The tarball is extracted once per session and
  ckptfix's answers are compared with the recorded ones.
* ``live`` (``spark`` marker), for a fixed sample of scenarios (:func:`live_sample`: one per operator, the providers
  taken in turn; every scenario with ``CKPTFIX_LIVE_ALL=1``): the checkpoint is built by the session's PySpark and
  ckptfix is compared with live Spark on it. And ``test_recording_matches_live_spark`` reads each sampled
  scenario's RECORDED checkpoint with live Spark and requires the recorded answers, so a stale recording fails.

Rows are compared as multisets of canonical values (tests/state/normalize.py); Spark's schema is the reference.
(``CKPTFIX_STATE_CKPTS``, which reused prebuilt checkpoints instead of running Spark, is gone: the recordings do
that job.)
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.state import golden as G
from tests.state import normalize as N
from tests.state import scenarios as S

LIVE_ALL = "CKPTFIX_LIVE_ALL"
RECORDED_PYSPARK = "4.3.0"

# Spark statestore option -> read_state keyword
KWARGS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "storeName": ("store_name", str),
    "joinSide": ("join_side", str),
    "stateVarName": ("state_var", str),
    "readRegisteredTimers": ("timers", lambda v: v == "true"),
    "flattenCollectionTypes": ("flatten", lambda v: v == "true"),
}


def live_sample() -> list[str]:
    """One scenario per operator, its providers taken in turn (operator i gets ``providers[i % n]``), so every
    provider is sampled; with ``CKPTFIX_LIVE_ALL=1`` every scenario."""
    if os.environ.get(LIVE_ALL) == "1":
        return list(S.SCENARIO_IDS)
    ops = [op for op in S.OPERATORS.values() if op.name != "tws_ttl"]
    return [f"{op.name}-{op.providers[i % len(op.providers)]}" for i, op in enumerate(ops)]


# ------------------------------------------------------------------------------------------ Spark's answers


@dataclass
class Subject:
    """A checkpoint Spark wrote, and Spark's answers about it: recorded ones, or live ones (asked on demand)."""

    built: S.Built
    answers: dict[str, tuple[Any, list[Any]] | str] = field(default_factory=dict)  # options key -> answer / error
    ask: Callable[[dict[str, str]], tuple[Any, list[Any]] | str] | None = None

    def _get(self, options: dict[str, str]) -> tuple[Any, list[Any]] | str:
        k = G.key(options)
        if k not in self.answers:
            if self.ask is None:
                pytest.fail(
                    f"{self.built.scenario_id}: no recorded answer for {k}; "
                    "re-record with tests/fixtures/state_vs_spark/generate.py"
                )
            self.answers[k] = self.ask(options)
        return self.answers[k]

    def answer(self, options: dict[str, str]) -> tuple[Any, list[Any]]:
        """(schema, canonical rows) of Spark's statestore source with ``options``."""
        got = self._get(options)
        if isinstance(got, str):
            pytest.fail(f"{self.built.scenario_id} {options}: Spark refused the read: {got}")
        return got

    def refusal(self, options: dict[str, str]) -> str:
        got = self._get(options)
        if not isinstance(got, str):
            pytest.fail(f"{self.built.scenario_id} {options}: Spark answered ({len(got[1])} rows), expected a refusal")
        return got


def _built(scenario_id: str, ckpt: Path) -> S.Built:
    operator, provider = S.split_id(scenario_id)
    return S.Built(scenario_id, operator, provider, ckpt, S.committed_batches(ckpt))


def recorded_answers(scenario_id: str) -> dict[str, tuple[Any, list[Any]] | str]:
    from pyspark.sql.types import StructType

    out: dict[str, tuple[Any, list[Any]] | str] = {}
    for read in G.load_answers(scenario_id)["reads"]:
        if "error" in read:
            out[G.key(read["options"])] = read["error"]
        else:
            schema = StructType.fromJson(read["schema"])
            out[G.key(read["options"])] = (schema, [G.decode_row(r) for r in read["rows"]])
    return out


def live_answer(spark: Any, built: S.Built, options: dict[str, str]) -> tuple[Any, list[Any]] | str:
    """Spark's statestore source on ``built`` (reading confs set and restored): (schema, canonical rows), or the
    text of its error when it refuses."""
    with S.session_confs(spark, built.reading_confs):
        try:
            df = spark.read.format("statestore").options(**options).load(str(built.ckpt))
            schema, collected = df.schema, df.collect()
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"[:4000] or type(exc).__name__
    return schema, [N.spark_row(r, schema) for r in collected]


@pytest.fixture(scope="session")
def recorded_subjects(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Subject]:
    """``get(scenario_id)``: the recorded checkpoint (extracted once per session) and Spark's recorded answers."""
    root = tmp_path_factory.mktemp("state-vs-spark-recorded")
    cache: dict[str, Subject] = {}

    def get(scenario_id: str) -> Subject:
        if scenario_id not in cache:
            ckpt = G.extract(scenario_id, root / scenario_id)
            cache[scenario_id] = Subject(_built(scenario_id, ckpt), recorded_answers(scenario_id))
        return cache[scenario_id]

    return get


@pytest.fixture(scope="session")
def live_subjects(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Subject]:
    """``get(scenario_id)``: the scenario's checkpoint built by the live Spark (once per session, on first use),
    with live Spark's answers asked on demand."""
    root = tmp_path_factory.mktemp("state-vs-spark-live")
    cache: dict[str, Subject] = {}
    failed: dict[str, str] = {}

    def get(scenario_id: str) -> Subject:
        if scenario_id in failed:
            pytest.fail(f"scenario {scenario_id} could not be built: {failed[scenario_id]}")
        if scenario_id not in cache:
            try:
                built = S.build(spark, scenario_id, root / scenario_id)
            except Exception as exc:
                failed[scenario_id] = str(exc)[:2000]
                raise
            cache[scenario_id] = Subject(built, ask=lambda options: live_answer(spark, built, options))
        return cache[scenario_id]

    return get


def subject(request: pytest.FixtureRequest, source: str, scenario_id: str) -> Subject:
    """The recorded or live subject (the live fixture, and so Spark, only for the live cases: marked ``spark``)."""
    getter: Callable[[str], Subject] = request.getfixturevalue(
        "recorded_subjects" if source == "recorded" else "live_subjects"
    )
    return getter(scenario_id)


# ------------------------------------------------------------------------------------------ helpers


def _opt_id(options: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in options.items()) or "default"


def with_sources(cases: Iterable[Any]) -> list[Any]:
    """Every case on its recording, then the live sample's cases live (``spark`` marker)."""
    cases = list(cases)
    live = set(live_sample())
    out = [pytest.param("recorded", *c.values, id=f"recorded-{c.id}") for c in cases]
    out += [
        pytest.param("live", *c.values, id=f"live-{c.id}", marks=pytest.mark.spark)
        for c in cases
        if c.values[0] in live
    ]
    return out


def _cases(with_batches: bool = True) -> Iterator[Any]:
    for sid in S.SCENARIO_IDS:
        op, _ = S.split_id(sid)
        for options in op.read_options:
            if not with_batches:
                yield pytest.param(sid, options, id=f"{sid}-{_opt_id(options)}")
                continue
            for b in G.BATCH_IDS:
                yield pytest.param(sid, options, b, id=f"{sid}-{_opt_id(options)}-b{'latest' if b is None else b}")


def _kwargs(options: dict[str, str]) -> dict[str, Any]:
    out = {}
    for key, value in options.items():
        name, convert = KWARGS[key]
        out[name] = convert(value)
    return out


def compare(ours: Any, schema: Any, theirs: list[Any], what: str) -> None:
    """ckptfix rows (dicts) == Spark's canonical rows as multisets, ckptfix's walked along Spark's schema."""
    assert_same(N.rows(ours, schema), theirs, what)


def assert_same(ours: list[Any], theirs: list[Any], what: str, names: tuple[str, str] = ("ckptfix", "Spark")) -> None:
    a, b = Counter(ours), Counter(theirs)
    if a == b:
        return
    only_ours, only_spark = a - b, b - a
    lines = [f"{what}: {names[0]} {len(ours)} rows, {names[1]} {len(theirs)} rows"]
    lines += [f"  only {names[0]} (x{n}): {r!r}"[:1500] for r, n in list(only_ours.items())[:5]]
    lines += [f"  only {names[1]} (x{n}): {r!r}"[:1500] for r, n in list(only_spark.items())[:5]]
    pytest.fail("\n".join(lines))


def _in_partition(rows: list[Any], partition: int) -> list[Any]:
    return [r for r in rows if dict(r)["partition_id"] == partition]


def _partitions(built: S.Built) -> list[int]:
    d = built.ckpt / "state" / "0"
    return sorted(int(p.name) for p in d.iterdir() if p.name.isdigit())


# ------------------------------------------------------------------------------------------ state at a batch


@pytest.mark.parametrize(("source", "scenario_id", "options", "batch"), with_sources(_cases()))
def test_state_matches_spark(
    request: pytest.FixtureRequest, source: str, scenario_id: str, options: dict[str, str], batch: int | None
) -> None:
    from ckptfix.state.read import read_state

    subj = subject(request, source, scenario_id)
    built = subj.built
    schema, theirs = subj.answer(G.state_options(options, batch))

    result = read_state(str(built.ckpt), operator=0, batch=batch, **_kwargs(options))
    want_batch = built.batches[-1] if batch is None else batch
    assert result.batch == want_batch
    assert result.version == want_batch + 1
    assert list(result.columns) == schema.names
    compare(result, schema, theirs, f"{scenario_id} {options} batch {batch}")
    if batch is not None:  # the same state addressed by version (= batch + 1)
        by_version = read_state(str(built.ckpt), operator=0, version=batch + 1, **_kwargs(options))
        compare(by_version, schema, theirs, f"{scenario_id} {options} version {batch + 1}")


@pytest.mark.parametrize(("source", "scenario_id", "options"), with_sources(_cases(with_batches=False)))
def test_partition_filter_matches_spark(
    request: pytest.FixtureRequest, source: str, scenario_id: str, options: dict[str, str]
) -> None:
    """read_state(partition=p) == Spark's rows with partition_id == p (Spark has no plain partition option)."""
    from ckptfix.state.read import read_state

    subj = subject(request, source, scenario_id)
    built = subj.built
    batch = G.PARTITION_BATCH
    schema, rows = subj.answer(G.state_options(options, batch))

    for partition in _partitions(built):
        ours = [dict(r) for r in read_state(str(built.ckpt), batch=batch, partition=partition, **_kwargs(options))]
        assert {r.get("partition_id") for r in ours} <= {partition}
        compare(ours, schema, _in_partition(rows, partition), f"{scenario_id} {options} batch {batch} p{partition}")


@pytest.mark.parametrize(("source", "scenario_id", "options"), with_sources(_cases(with_batches=False)))
def test_from_snapshot_matches_spark(
    request: pytest.FixtureRequest, source: str, scenario_id: str, options: dict[str, str]
) -> None:
    """Snapshot replay (snapshotStartBatchId + snapshotPartitionId): load the snapshot of version sb+1,
    replay to the last batch, ignoring newer snapshots. RocksDB without changelog can only read the
    snapshot's own batch (Spark: CANNOT_READ_STREAMING_STATE_FILE for the missing changelog otherwise)."""
    from ckptfix.state.read import read_state

    subj = subject(request, source, scenario_id)
    built = subj.built
    plan = G.snapshot_plan(built)
    if plan is None:
        pytest.skip(f"Spark's maintenance wrote no snapshot in partition {G.SNAPSHOT_PARTITION} of {built.ckpt}")
    start, batch = plan
    schema, theirs = subj.answer(G.snapshot_options(options, start, batch))

    result = read_state(
        str(built.ckpt), batch=batch, partition=G.SNAPSHOT_PARTITION, from_snapshot=start, **_kwargs(options)
    )
    assert list(result.columns) == schema.names
    compare(result, schema, theirs, f"{scenario_id} {options} snapshot {start} -> batch {batch}")


# ------------------------------------------------------------------------------------------ change feeds


def _change_cases() -> Iterator[Any]:
    for sid in S.SCENARIO_IDS:
        for opts, start, end in G.change_cases(sid):
            rid = f"{start}-{'last' if end is None else end}"
            yield pytest.param(sid, opts, start, end, id=f"{sid}-{_opt_id(opts)}-{rid}")


def _change_kwargs(options: dict[str, str]) -> dict[str, Any]:
    return {KWARGS[k][0]: v for k, v in options.items()}


@pytest.mark.parametrize(("source", "scenario_id", "options", "start", "end"), with_sources(_change_cases()))
def test_change_feed_matches_spark(
    request: pytest.FixtureRequest,
    source: str,
    scenario_id: str,
    options: dict[str, str],
    start: int,
    end: int | None,
) -> None:
    from ckptfix.state.read import read_changes

    subj = subject(request, source, scenario_id)
    schema, theirs = subj.answer(G.change_options(options, start, end))

    ours = read_changes(str(subj.built.ckpt), from_batch=start, to_batch=end, **_change_kwargs(options))
    compare(ours, schema, theirs, f"{scenario_id} {options} changes {start}..{end}")


@pytest.mark.parametrize(
    ("source", "scenario_id"),
    with_sources(pytest.param(sid, id=sid) for sid in S.SCENARIO_IDS if G.has_changelog(sid)),
)
def test_change_feed_partition_filter_matches_spark(
    request: pytest.FixtureRequest, source: str, scenario_id: str
) -> None:
    from ckptfix.state.read import read_changes

    subj = subject(request, source, scenario_id)
    built = subj.built
    options = G.first_change_options(scenario_id)
    schema, rows = subj.answer(G.change_options(options, 0))

    for partition in _partitions(built):
        ours = read_changes(str(built.ckpt), from_batch=0, partition=partition, **_change_kwargs(options))
        compare(ours, schema, _in_partition(rows, partition), f"{scenario_id} {options} changes partition {partition}")


@pytest.mark.parametrize(
    ("source", "scenario_id"),
    with_sources(pytest.param(sid, id=sid) for sid in S.SCENARIO_IDS if not G.has_changelog(sid)),
)
def test_change_feed_needs_changelog(request: pytest.FixtureRequest, source: str, scenario_id: str) -> None:
    """RocksDB without changelog checkpointing has no per-version changes: Spark refuses, so must we."""
    from ckptfix.state.read import read_changes

    subj = subject(request, source, scenario_id)
    options = G.first_change_options(scenario_id)
    subj.refusal(G.change_options(options, 0))

    with pytest.raises(Exception):  # noqa: B017 - the error class is the reader's choice
        list(read_changes(str(subj.built.ckpt), from_batch=0, **_change_kwargs(options)))


# ------------------------------------------------------------------------------------------ the recordings


@pytest.mark.parametrize("scenario_id", S.SCENARIO_IDS)
def test_recording_is_complete(recorded_subjects: Callable[[str], Subject], scenario_id: str) -> None:
    """Each recording was made by the recorded PySpark, holds a checkpoint with every batch committed, and answers
    exactly the reads the tests ask (a new case or option needs a new recording)."""
    recording = G.load_answers(scenario_id)
    assert recording["pyspark"] == RECORDED_PYSPARK
    assert recording["scenario"] == scenario_id
    subj = recorded_subjects(scenario_id)
    assert subj.built.batches == list(range(S.BATCHES))
    asked = [(G.key(o), refused) for o, refused in G.scenario_reads(subj.built)]
    recorded = [(G.key(r["options"]), "error" in r) for r in recording["reads"]]
    assert recorded == asked, "re-record with tests/fixtures/state_vs_spark/generate.py"


def test_recordings_are_all_there() -> None:
    names = {p.name for p in G.FIXTURES.iterdir() if p.name.endswith((".json", ".tar.gz"))}
    want = {f"{sid}{ext}" for sid in S.SCENARIO_IDS for ext in (".json", ".tar.gz")}
    assert names == want


@pytest.mark.spark
@pytest.mark.parametrize("scenario_id", live_sample())
def test_recording_matches_live_spark(
    spark: Any, recorded_subjects: Callable[[str], Subject], scenario_id: str
) -> None:
    """The live Spark, reading the RECORDED checkpoint, gives every recorded answer: same schema, same rows, and a
    refusal (with the recorded error class) where one was recorded. A recording made by an older scenario,
    reader or Spark fails here."""
    if spark.version != RECORDED_PYSPARK:
        pytest.skip(f"recorded with PySpark {RECORDED_PYSPARK}, the live one is {spark.version}")
    from pyspark.sql.types import StructType

    subj = recorded_subjects(scenario_id)
    hint = f"re-record: .venv/bin/python tests/fixtures/state_vs_spark/generate.py --scenarios {scenario_id}"
    for read in G.load_answers(scenario_id)["reads"]:
        options = read["options"]
        live = live_answer(spark, subj.built, options)
        what = f"{scenario_id} {options}"
        if "error" in read:
            assert isinstance(live, str), f"{what}: live Spark answered, the recording says it refused; {hint}"
            if read["condition"]:
                assert read["condition"] in live, f"{what}: live error lacks {read['condition']}; {hint}\n{live}"
            continue
        assert not isinstance(live, str), f"{what}: live Spark refused: {live}; {hint}"
        schema, rows = live
        assert schema == StructType.fromJson(read["schema"]), f"{what}: schema differs; {hint}"
        assert json.dumps(schema.jsonValue()) == json.dumps(read["schema"]), f"{what}: schema JSON differs; {hint}"
        recorded = [G.decode_row(r) for r in read["rows"]]
        assert_same(rows, recorded, f"{what}; {hint}", names=("live Spark", "recording"))


# ------------------------------------------------------------------------------------------ --where


def _key_fields(row: Any) -> dict[str, Any]:
    """A canonical Spark row's key struct as {field: canonical value}."""
    kind, fields = dict(row)["key"]
    assert kind == "struct"
    return dict(fields)


#: scenario -> (--where, the same condition over Spark's canonical key fields)
WHERE_CASES = {
    **{
        f"agg-{p}": ("key = 'beta' AND grp IN (1, 2)", lambda k: k["key"] == "beta" and k["grp"] in (1, 2))
        for p in ("hdfs", "rocksdb", "rocksdb_cl")
    },
    "join-hdfs": ("field0 = 'alpha'", lambda k: k["field0"] == "alpha"),
}


@pytest.mark.parametrize("scenario_id", sorted(WHERE_CASES))
def test_where_keeps_exactly_spark_s_rows_whose_key_matches(
    recorded_subjects: Callable[[str], Subject], scenario_id: str
) -> None:
    """``state read --where`` == Spark's rows of the latest batch filtered by the same condition (the bulk column
    path of HDFS and RocksDB changelog stores and the row path of RocksDB zips), and --where is applied in the
    workers of a parallel read too."""
    from ckptfix.state.read import read_state

    subj = recorded_subjects(scenario_id)
    where, matches = WHERE_CASES[scenario_id]
    options = {"operatorId": "0", **({"joinSide": "left"} if scenario_id.startswith("join") else {})}
    schema, theirs = subj.answer(options)
    wanted = [r for r in theirs if matches(_key_fields(r))]
    assert 0 < len(wanted) < len(theirs), "the condition must keep some rows and drop others"
    kwargs = _kwargs({k: v for k, v in options.items() if k != "operatorId"})
    read = read_state(str(subj.built.ckpt), where=where, **kwargs)
    compare(list(read), schema, wanted, f"{scenario_id} --where {where}")
    parts = [row for p in read.selection.partitions for row in read.partition_rows(p)]
    compare(parts, schema, wanted, f"{scenario_id} --where {where}, partition by partition")
    batched = [row for item in read_state(str(subj.built.ckpt), where=where, **kwargs).rows.batches() for row in item]
    compare(batched, schema, wanted, f"{scenario_id} --where {where}, batches()")


def test_where_on_an_unknown_column_is_refused(recorded_subjects: Callable[[str], Subject]) -> None:
    from ckptfix.errors import UsageError
    from ckptfix.state.read import read_state

    with pytest.raises(UsageError, match=r"--where: nope: expected a column of the key \(window, key, grp, d\)"):
        read_state(str(recorded_subjects("agg-hdfs").built.ckpt), where="nope = 1")


# ------------------------------------------------------------------------------------------ state ls schemas

SCHEMA_SCENARIOS = ["agg-hdfs", "agg-rocksdb_cl_v2", "dedup-rocksdb", "dedup_wm-hdfs", "session-hdfs", "apiws-rocksdb"]


@pytest.mark.parametrize("scenario_id", SCHEMA_SCENARIOS)
def test_state_ls_shows_the_schemas_spark_s_reader_shows(
    recorded_subjects: Callable[[str], Subject], scenario_id: str
) -> None:
    """The key and value schema `state ls` shows for the store are the ones Spark's statestore reader gives its
    key and value columns (Spark's simpleString)."""
    from ckptfix.state.inventory import list_state

    subj = recorded_subjects(scenario_id)
    schema, _ = subj.answer({"operatorId": "0"})
    (view,) = list_state(str(subj.built.ckpt)).operators[0].schemas
    doc = view.to_json()
    assert (view.store, view.problem) == ("default", None)
    assert doc["key"] == schema["key"].dataType.simpleString()
    assert doc["value"] == schema["value"].dataType.simpleString()
    assert view.source and ("_metadata/schema" in view.source or "_stateSchema" in view.source), view.source
