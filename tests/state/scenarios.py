"""Real Spark 4.x streaming queries whose state ckptfix's state reader is compared against.

Each scenario = one stateful operator x one state store provider. It reads JSON files (one file per
micro-batch: ``maxFilesPerTrigger=1``, ``availableNow``) and writes to the ``noop`` sink, so the only
thing that matters is the checkpoint. Data is deterministic and event time advances 10 minutes per
batch with 10-minute watermarks, so operators with watermarks evict state (deletes in deltas and
changelogs) and some late rows are dropped.

No pytest import here: ``build`` also runs from a plain script (the facts dumper).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

BATCHES = 6  # micro-batches (= input files) per scenario: batch ids 0..5
ROWS_PER_BATCH = 8
BASE_TIME = datetime(2024, 1, 1, tzinfo=timezone.utc)
INPUT_MTIME_BASE = 1_700_000_000
KEYS = ["alpha", "beta", "gamma", "délta", "ε", "k 5"]  # non-ASCII and a space on purpose
RARE_KEY = "zeta"  # only in batches 0 and 1: its group state times out / its timers fire later

HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
CHANGELOG = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"
FORMAT_VERSION = "spark.sql.streaming.stateStore.checkpointFormatVersion"

# provider name -> session confs of the writing query (all keys are restored after the run)
PROVIDERS: dict[str, dict[str, str]] = {
    "hdfs": {"spark.sql.streaming.stateStore.providerClass": HDFS},
    "rocksdb": {"spark.sql.streaming.stateStore.providerClass": ROCKSDB, CHANGELOG: "false"},
    "rocksdb_cl": {"spark.sql.streaming.stateStore.providerClass": ROCKSDB, CHANGELOG: "true"},
    "rocksdb_cl_v2": {"spark.sql.streaming.stateStore.providerClass": ROCKSDB, CHANGELOG: "true", FORMAT_VERSION: "2"},
}
COMMON_CONFS = {
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.streaming.stateStore.minDeltasForSnapshot": "2",
    "spark.sql.streaming.stateStore.maintenanceInterval": "200ms",
}
CONF_KEYS = sorted({k for confs in PROVIDERS.values() for k in confs} | set(COMMON_CONFS))


def reading_confs(provider: str) -> dict[str, str]:
    """Session confs the READING session needs (reference §7.4: format v2 is not in the offset log)."""
    return {FORMAT_VERSION: "2"} if provider == "rocksdb_cl_v2" else {}


# ------------------------------------------------------------------------------------------ input data


def _iso(minutes: float) -> str:
    return (BASE_TIME + timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def rich_rows(batch: int) -> list[dict[str, Any]]:
    """One batch of the main input: every type the state operators get to store. Row 7 of batches >= 3 is
    40 minutes late (dropped by watermarked operators, kept by the others); row 6 of batches 0 and 1 has
    a key no other batch has (so applyInPandasWithState timeouts and transformWithState timers fire)."""
    rows = []
    for r in range(ROWS_PER_BATCH):
        i = batch * ROWS_PER_BATCH + r
        minute = batch * 10 + r + (0.5 if r == 3 else 0)
        if batch >= 3 and r == 7:
            minute -= 40
        rows.append(
            {
                "id": i,
                "key": RARE_KEY if r == 6 and batch < 2 else KEYS[(batch * 3 + r) % len(KEYS)],
                "grp": r % 3,
                "n": i * 10_000_000_000 - 5,  # beyond int32
                "amount": [1.5, -0.0, 2.25e10, -3.125, 0.1, 7.0, 1e-7, 42.0][r] * (batch + 1),
                "price": f"{(i * 37) % 10000 / 100:.2f}",
                "big": f"{'-' if r == 5 else ''}{i}{i:018d}.{(i * 7919) % 100000:05d}",  # > 18 digits
                "ts": _iso(minute),
                "d": f"2024-0{1 + r % 3}-{10 + batch:02d}",
                "tag": None if r % 4 == 0 else f"t{(r + batch) % 3}",
                "flag": r % 2 == 0,
                "b64": base64.b64encode(bytes([i % 256, 0, 255, r])).decode(),
            }
        )
    return rows


def left_rows(batch: int) -> list[dict[str, Any]]:
    return [
        {
            "lkey": KEYS[r],
            "lts": _iso(batch * 10 + r),
            "lval": r * 1.25 + batch,
            "lprice": f"{batch}.{r}5",
            "ltag": None if r == 2 else f"L{batch}{r}",
        }
        for r in range(6)
    ]


def right_rows(batch: int) -> list[dict[str, Any]]:
    return [
        {
            "rkey": KEYS[(r + batch) % 6],
            "rts": _iso(batch * 10 + r + 2 + (r % 3) * 3),  # 2, 5+1, 8+2 ... minutes after left rows
            "rval": batch * 100 + r,
            "rd": f"2024-02-{1 + r:02d}",
        }
        for r in range(6)
    ]


# ------------------------------------------------------------------------------------------ query builders


def _read(spark: Any, path: Path, ddl: str) -> Any:
    return spark.readStream.format("json").schema(ddl).option("maxFilesPerTrigger", 1).load(str(path))


def _rich(spark: Any, inputs: Path) -> Any:
    from pyspark.sql import functions as F

    ddl = (
        "id LONG, key STRING, grp INT, n LONG, amount DOUBLE, price STRING, big STRING, ts STRING, d STRING, "
        "tag STRING, flag BOOLEAN, b64 STRING"
    )
    return _read(spark, inputs / "main", ddl).select(
        "id",
        "key",
        "grp",
        "n",
        "amount",
        F.col("price").cast("decimal(10,2)").alias("price"),
        F.col("big").cast("decimal(25,5)").alias("big"),
        F.col("ts").cast("timestamp").alias("ts"),
        F.col("d").cast("date").alias("d"),
        "tag",
        "flag",
        F.unbase64("b64").alias("bin"),
    )


def _agg(spark: Any, inputs: Path) -> Any:
    from pyspark.sql import functions as F

    df = _rich(spark, inputs).withWatermark("ts", "10 minutes")
    out = df.groupBy(F.window("ts", "10 minutes"), "key", "grp", "d").agg(
        F.count("*").alias("cnt"),
        F.sum("n").alias("sum_n"),
        F.sum("amount").alias("sum_amount"),
        F.avg("amount").alias("avg_amount"),
        F.sum("price").alias("sum_price"),
        F.sum("big").alias("sum_big"),
        F.max("ts").alias("max_ts"),
        F.min("d").alias("min_d"),
        F.max("tag").alias("max_tag"),
        F.first("tag", ignorenulls=True).alias("first_tag"),
        F.collect_list("tag").alias("tags"),
        F.max(F.struct("price", "tag")).alias("max_struct"),
        F.max("flag").alias("any_flag"),
        F.max("bin").alias("max_bin"),
        F.first(F.array("grp", "id")).alias("first_arr"),
        F.first(F.create_map("key", "amount")).alias("first_map"),
        F.sum(F.when(F.col("flag"), F.col("n"))).alias("sum_n_flagged"),
    )
    return out.writeStream.format("noop").outputMode("update")


def _dedup(spark: Any, inputs: Path) -> Any:
    return _rich(spark, inputs).dropDuplicates(["key", "grp", "d", "price"]).writeStream.format("noop")


def _dedup_wm(spark: Any, inputs: Path) -> Any:
    df = _rich(spark, inputs).withWatermark("ts", "10 minutes")
    return df.dropDuplicates(["key", "ts"]).writeStream.format("noop")


def _dedup_within_wm(spark: Any, inputs: Path) -> Any:
    df = _rich(spark, inputs).withWatermark("ts", "10 minutes")
    return df.dropDuplicatesWithinWatermark(["key", "grp"]).writeStream.format("noop")


def _session(spark: Any, inputs: Path) -> Any:
    from pyspark.sql import functions as F

    df = _rich(spark, inputs).withWatermark("ts", "10 minutes")
    out = df.groupBy(F.session_window("ts", "5 minutes"), "key").agg(
        F.count("*").alias("cnt"), F.sum("amount").alias("sum_amount"), F.max("price").alias("max_price")
    )
    return out.writeStream.format("noop").outputMode("append")


def _join(spark: Any, inputs: Path) -> Any:
    from pyspark.sql import functions as F

    left = _read(spark, inputs / "left", "lkey STRING, lts STRING, lval DOUBLE, lprice STRING, ltag STRING").select(
        "lkey",
        F.col("lts").cast("timestamp").alias("lts"),
        "lval",
        F.col("lprice").cast("decimal(10,2)").alias("lprice"),
        "ltag",
    )
    right = _read(spark, inputs / "right", "rkey STRING, rts STRING, rval LONG, rd STRING").select(
        "rkey", F.col("rts").cast("timestamp").alias("rts"), "rval", F.col("rd").cast("date").alias("rd")
    )
    left = left.withWatermark("lts", "10 minutes")
    right = right.withWatermark("rts", "10 minutes")
    cond = F.expr("lkey = rkey AND rts >= lts AND rts <= lts + interval 5 minutes")
    return left.join(right, cond, "inner").writeStream.format("noop")


# ARRAY<STRING> in the state struct makes the 4.3.0 Python worker fail (StructType.fromJson: KeyError
# 'elementType'), so the state stays flat.
TIMEOUT_MS = 5 * 60 * 1000  # event time after a key's newest row when its state times out / timer fires
APIWS_STATE = "cnt LONG, total DOUBLE, last_ts TIMESTAMP, last_tag STRING"


def _apiws_func(key: tuple[Any, ...], pdfs: Iterator[Any], state: Any) -> Iterator[Any]:
    import pandas as pd

    if state.hasTimedOut:
        state.remove()
        yield pd.DataFrame({"key": [key[0]], "cnt": [-1]})
        return
    cnt, total, last, last_tag = state.get if state.exists else (0, 0.0, None, None)
    for pdf in pdfs:
        cnt += len(pdf)
        total += float(pdf["amount"].sum())
        newest = pdf["ts"].max().to_pydatetime()
        last = newest if last is None or newest > last else last
        last_tag = next((t for t in reversed(list(pdf["tag"])) if isinstance(t, str)), last_tag)
    state.update((cnt, total, last, last_tag))
    state.setTimeoutTimestamp(int(pd.Timestamp(last).timestamp() * 1000) + TIMEOUT_MS)
    yield pd.DataFrame({"key": [key[0]], "cnt": [cnt]})


def _apiws(spark: Any, inputs: Path) -> Any:
    df = _rich(spark, inputs).select("key", "amount", "ts", "tag").withWatermark("ts", "10 minutes")
    out = df.groupBy("key").applyInPandasWithState(
        _apiws_func, "key STRING, cnt LONG", APIWS_STATE, "update", "EventTimeTimeout"
    )
    return out.writeStream.format("noop").outputMode("update")


def _tws_processor(ttl_ms: int | None = None) -> Any:
    """``ttl_ms``: every state variable with that TTL, so Spark keeps TTL index families (``$ttl_<var>``, and a
    ListState's ``$min_``/``$count_``) beside the variables. TTL needs processing time (Spark refuses it in event
    time), so that variant registers no timers (an event-time instant would be long past in processing time)."""
    import pandas as pd
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor

    class Processor(StatefulProcessor):
        """ValueState ``cnt``, ListState ``events``, MapState ``tags`` and event-time timers that clear
        everything TIMEOUT_MS (event time) after a key's newest row."""

        def init(self, handle: Any) -> None:
            self.handle = handle
            self.cnt = handle.getValueState("cnt", "n LONG, total DOUBLE, last_ts TIMESTAMP", ttl_ms)
            self.events = handle.getListState("events", "id LONG, amount DOUBLE, tag STRING", ttl_ms)
            self.tags = handle.getMapState("tags", "tag STRING", "n INT, last_id LONG", ttl_ms)

        def handleInputRows(self, key: Any, rows: Any, timerValues: Any) -> Any:
            n, total, last = self.cnt.get() if self.cnt.exists() else (0, 0.0, None)
            for pdf in rows:
                for row in pdf.itertuples(index=False):
                    n += 1
                    total += float(row.amount)
                    ts = row.ts.to_pydatetime()
                    last = ts if last is None or ts > last else last
                    tag = row.tag if isinstance(row.tag, str) else None
                    self.events.appendValue((int(row.id), float(row.amount), tag))
                    if tag is not None:
                        old = self.tags.getValue((tag,))
                        self.tags.updateValue((tag,), ((old[0] if old else 0) + 1, int(row.id)))
            self.cnt.update((n, total, last))
            if ttl_ms is None:
                for t in list(self.handle.listTimers()):
                    self.handle.deleteTimer(t)
                self.handle.registerTimer(int(pd.Timestamp(last).timestamp() * 1000) + TIMEOUT_MS)
            yield pd.DataFrame({"key": [key[0]], "n": [n]})

        def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any) -> Any:
            self.cnt.clear()
            self.events.clear()
            self.tags.clear()
            yield pd.DataFrame({"key": [key[0]], "n": [-1]})

        def close(self) -> None:
            pass

    return Processor()


def _tws(spark: Any, inputs: Path, ttl_ms: int | None = None) -> Any:
    df = _rich(spark, inputs).select("id", "key", "amount", "ts", "tag").withWatermark("ts", "10 minutes")
    out = df.groupBy("key").transformWithStateInPandas(
        statefulProcessor=_tws_processor(ttl_ms),
        outputStructType="key STRING, n LONG",
        outputMode="Append",
        timeMode="EventTime" if ttl_ms is None else "ProcessingTime",
    )
    return out.writeStream.format("noop").outputMode("append")


# ------------------------------------------------------------------------------------------ scenarios

JOIN_STORES = ("left-keyToNumValues", "left-keyWithIndexToValue", "right-keyToNumValues", "right-keyWithIndexToValue")


@dataclass(frozen=True)
class Operator:
    name: str
    build: Callable[[Any, Path], Any]
    inputs: dict[str, Callable[[int], list[dict[str, Any]]]]
    # statestore reader option sets (besides operatorId/batchId) to compare; {} = the default store
    read_options: tuple[dict[str, str], ...] = ({},)
    providers: tuple[str, ...] = tuple(PROVIDERS)
    pandas: bool = False


_MAIN = {"main": rich_rows}
TWS_OPTIONS: tuple[dict[str, str], ...] = (
    {"stateVarName": "cnt"},
    {"stateVarName": "events"},
    {"stateVarName": "events", "flattenCollectionTypes": "false"},
    {"stateVarName": "tags"},
    {"stateVarName": "tags", "flattenCollectionTypes": "false"},
    {"readRegisteredTimers": "true"},
)

OPERATORS: dict[str, Operator] = {
    op.name: op
    for op in [
        Operator("agg", _agg, _MAIN),
        Operator("dedup", _dedup, _MAIN),
        Operator("dedup_wm", _dedup_wm, _MAIN),
        Operator("dedup_within_wm", _dedup_within_wm, _MAIN),
        Operator("session", _session, _MAIN),
        Operator(
            "join",
            _join,
            {"left": left_rows, "right": right_rows},
            read_options=({"joinSide": "left"}, {"joinSide": "right"}, *({"storeName": s} for s in JOIN_STORES)),
        ),
        Operator("apiws", _apiws, _MAIN, pandas=True),
        Operator(
            "tws",
            _tws,
            _MAIN,
            read_options=TWS_OPTIONS,
            providers=("rocksdb", "rocksdb_cl", "rocksdb_cl_v2"),
            pandas=True,
        ),
    ]
}
# the same transformWithState query with a TTL on every variable (a day: nothing expires while tests run); not one of
# the state reader's SCENARIO_IDS, and not for ``build``: in processing time Spark runs a no-data batch after every
# batch, even under availableNow (which so never ends), so its tests run it with processAllAvailable() and stop()
OPERATORS["tws_ttl"] = Operator(
    "tws_ttl",
    lambda spark, inputs: _tws(spark, inputs, ttl_ms=86_400_000),
    _MAIN,
    read_options=TWS_OPTIONS,
    providers=("rocksdb",),
    pandas=True,
)

# Python has no flatMapGroupsWithState (Scala/Java only); applyInPandasWithState ("apiws") is PySpark's
# counterpart and runs FlatMapGroupsInPandasWithStateExec on the same kind of state store.
SCENARIO_IDS = [f"{op.name}-{p}" for op in OPERATORS.values() for p in op.providers if op.name != "tws_ttl"]


def split_id(scenario_id: str) -> tuple[Operator, str]:
    op, provider = scenario_id.rsplit("-", 1) if scenario_id.startswith("tws_ttl-") else scenario_id.split("-", 1)
    return OPERATORS[op], provider


@dataclass
class Built:
    scenario_id: str
    operator: Operator
    provider: str
    ckpt: Path
    batches: list[int] = field(default_factory=list)  # committed batch ids

    @property
    def reading_confs(self) -> dict[str, str]:
        return reading_confs(self.provider)

    def sample_batches(self) -> list[int]:
        """First, middle and last committed batch."""
        b = self.batches
        return sorted({b[0], b[len(b) // 2], b[-1]})


def write_inputs(operator: Operator, inputs: Path, batches: int = BATCHES) -> None:
    """One JSON-lines file per batch per input dir, distinct fixed mtimes (the file source orders by mtime)."""
    for sub, rows_of in operator.inputs.items():
        d = inputs / sub
        d.mkdir(parents=True, exist_ok=True)
        for b in range(batches):
            path = d / f"part-{b:04d}.json"
            tmp = d / f".part-{b:04d}.json.tmp"
            tmp.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows_of(b)), encoding="utf-8")
            mtime = INPUT_MTIME_BASE + 60 * b
            os.utime(tmp, (mtime, mtime))
            tmp.rename(path)


@contextlib.contextmanager
def session_confs(spark: Any, confs: dict[str, str], keys: list[str] | None = None) -> Iterator[None]:
    """Set ``confs`` (and unset the other ``keys``) on the session; restore every touched key afterwards."""
    touched = sorted(set(keys or []) | set(confs))
    saved = {k: spark.conf.get(k, None) for k in touched}
    try:
        for k in touched:
            if k in confs:
                spark.conf.set(k, confs[k])
            else:
                spark.conf.unset(k)
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)


def committed_batches(ckpt: Path) -> list[int]:
    d = ckpt / "commits"
    return sorted(int(p.name) for p in d.iterdir() if p.name.isdigit()) if d.is_dir() else []


def build(spark: Any, scenario_id: str, workdir: Path, timeout: float = 300) -> Built:
    """Run the scenario from scratch into ``workdir/ckpt`` (inputs in ``workdir/input``)."""
    operator, provider = split_id(scenario_id)
    if provider not in operator.providers:
        raise ValueError(f"{operator.name} does not run on {provider}")
    if operator.pandas:
        import sys

        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    workdir = Path(workdir)
    ckpt, inputs = workdir / "ckpt", workdir / "input"
    write_inputs(operator, inputs)
    with session_confs(spark, {**COMMON_CONFS, **PROVIDERS[provider]}, CONF_KEYS):
        writer = operator.build(spark, inputs)
        query = (
            writer.option("checkpointLocation", str(ckpt))
            .queryName(f"state_{scenario_id}".replace("-", "_"))
            .trigger(availableNow=True)
            .start()
        )
        try:
            if not query.awaitTermination(timeout):
                raise RuntimeError(f"{scenario_id} did not finish in {timeout}s")
            exc = query.exception()
            if exc is not None:
                raise RuntimeError(f"{scenario_id} failed: {exc}")
        finally:
            with contextlib.suppress(Exception):
                query.stop()
        time.sleep(1.0)  # let the maintenance thread write/upload snapshots of the last versions
    batches = committed_batches(ckpt)
    if batches != list(range(BATCHES)):
        raise RuntimeError(f"{scenario_id}: expected batches 0..{BATCHES - 1} committed, got {batches}")
    return Built(scenario_id, operator, provider, ckpt, batches)


__all__ = [
    "BATCHES",
    "OPERATORS",
    "PROVIDERS",
    "SCENARIO_IDS",
    "Built",
    "Operator",
    "build",
    "reading_confs",
    "session_confs",
    "split_id",
]
