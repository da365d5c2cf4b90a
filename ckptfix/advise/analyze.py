"""Per query: batch duration vs state commit time, the RocksDB metrics behind it, and recommendations.

The commit model (documented in README, section ``ckptfix advise``):

* ``commitTimeMs`` of a state operator is the SUM over the batch's tasks (SQLMetric), and the stateful stage
  has one task per shuffle partition, so the commit time of one task is ``commitTimeMs / numShufflePartitions``
  (assumes commit times are about equal across tasks -- progress events carry no per-task figures).
* With C task slots, P tasks run in ``waves = ceil(P / C)`` waves, so commits add about
  ``waves * commitTimeMs / P`` to the batch's wall time. Without ``--concurrency`` every partition is assumed to
  have its own slot (``waves = 1``), the lower bound.
* ``share = commit wall time / batch duration``; the batch duration is ``durationMs.triggerExecution``
  (``batchDuration`` when absent). Several state operators: their commit wall times add up.

Idle triggers (no ``durationMs.addBatch``: no micro-batch ran) are counted but not analysed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ckptfix.advise.model import InputSummary, ProgressEvent, Skipped, StateOp
from ckptfix.errors import UsageError

# --- thresholds (module constants, documented in README; each recommendation names the one it crossed) ---
COMMIT_SHARE_INFO = 0.05
COMMIT_SHARE_WARNING = 0.10
COMMIT_SHARE_HIGH = 0.25
OFFSET_LOG_SHARE = 0.10  # (walCommit + commitOffsets) / batch
ASYNC_INTERVAL_BATCHES = 10  # suggested asyncProgressTrackingCheckpointIntervalMs = 10 median batches
ROCKSDB_MEMORY_PER_INSTANCE = 256 * 1024 * 1024
STATE_MEMORY_TOTAL = 1024 * 1024 * 1024
SNAPSHOT_LAG_VERSIONS = 30  # 3 x spark.sql.streaming.stateStore.minDeltasForSnapshot (default 10)

LEVELS = ("info", "warning", "high")

# RocksDB commit phases (custom metrics, summed over tasks like commitTimeMs; RocksDB.commit's commitLatencyMs:
# writeBatch and pause exist in 3.5 only). The sub-phases are timed inside fileSync (4.x: changelog writer commit
# with changelog checkpointing, zip upload without), so they are reported apart and never added to the phases.
COMMIT_PHASES = (
    "rocksdbCommitWriteBatchLatency",
    "rocksdbCommitFlushLatency",
    "rocksdbCommitCompactLatency",
    "rocksdbCommitPauseLatency",
    "rocksdbCommitCheckpointLatency",
    "rocksdbCommitFileSyncLatencyMs",
)
COMMIT_SUBPHASES = ("rocksdbChangeLogWriterCommitLatencyMs", "rocksdbSaveZipFilesLatencyMs")
ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
HDFS_KEYS = ("stateOnCurrentVersionSizeBytes", "loadedMapCacheHitCount", "loadedMapCacheMissCount")


@dataclass(frozen=True)
class OpBatch:
    """One state operator in one batch."""

    index: int
    name: str
    commit_ms: int | None
    partitions: int | None
    per_task_ms: float | None
    waves: int | None
    commit_wall_ms: float | None  # waves * per_task_ms
    memory_bytes: int | None
    instances: int | None
    rocksdb_phases: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class BatchRow:
    batch_id: int
    run_id: str
    timestamp: str
    origin: str
    batch_ms: int | None
    input_rows: int | None
    durations: dict[str, int]
    ops: list[OpBatch]
    commit_full_ms: float | None  # sum over operators of per-task commit time (waves = 1)
    share_full: float | None
    commit_limited_ms: float | None  # at --concurrency
    share_limited: float | None
    offset_log_ms: int | None  # walCommit + commitOffsets
    offset_log_share: float | None


@dataclass(frozen=True)
class Stat:
    n: int
    median: float
    p95: float
    max: float


@dataclass(frozen=True)
class Recommendation:
    id: str
    level: str  # info | warning | high
    title: str
    text: str
    numbers: dict[str, Any]
    threshold: str
    settings: dict[str, str] = field(default_factory=dict)
    availability: str = ""


@dataclass(frozen=True)
class QueryAdvice:
    query_id: str
    name: str | None
    run_ids: list[str]
    provider: str  # rocksdb | hdfs | unknown | stateless
    changelog: bool | None
    changelog_evidence: str
    batches: list[BatchRow]
    idle_triggers: int
    stats: dict[str, Stat]
    rocksdb_commit_shares: dict[str, float]  # phase -> share of the summed commitTimeMs over all batches
    snapshot_lag: int | None
    recommendations: list[Recommendation]


@dataclass(frozen=True)
class Advice:
    concurrency: int | None
    model: str
    inputs: list[InputSummary]
    skipped: list[Skipped]
    duplicates: int
    queries: list[QueryAdvice]

    def worst_level(self) -> str | None:
        levels = [r.level for q in self.queries for r in q.recommendations]
        return max(levels, key=LEVELS.index) if levels else None


MODEL = (
    "commitTimeMs is summed over tasks; per-task commit = commitTimeMs / numShufflePartitions; "
    "with C task slots the P tasks run in ceil(P / C) waves, so commit adds waves x per-task commit to the batch; "
    "share = that / triggerExecution"
)


def stat(values: Iterable[float | None]) -> Stat | None:
    vs = sorted(v for v in values if v is not None)
    if not vs:
        return None
    n = len(vs)
    mid = n // 2
    median = vs[mid] if n % 2 else (vs[mid - 1] + vs[mid]) / 2
    p95 = vs[max(0, math.ceil(0.95 * n) - 1)]  # nearest rank
    return Stat(n=n, median=median, p95=p95, max=vs[-1])


def waves(partitions: int, concurrency: int | None) -> int:
    return 1 if concurrency is None else math.ceil(partitions / concurrency)


def _op_batch(i: int, op: StateOp, concurrency: int | None) -> OpBatch:
    per_task = None
    w = None
    wall = None
    if op.commit_ms is not None and op.partitions:
        per_task = op.commit_ms / op.partitions
        w = waves(op.partitions, concurrency)
        wall = w * per_task
    phases = {k: op.custom[k] for k in COMMIT_PHASES + COMMIT_SUBPHASES if k in op.custom}
    return OpBatch(i, op.name, op.commit_ms, op.partitions, per_task, w, wall, op.memory_bytes, op.instances, phases)


def _sum(values: list[float | None]) -> float | None:
    return None if not values or any(v is None for v in values) else sum(v for v in values if v is not None)


def _div(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else a / b


def batch_row(e: ProgressEvent, concurrency: int | None) -> BatchRow:
    ops = [_op_batch(i, op, concurrency) for i, op in enumerate(e.state_ops)]
    full = _sum([o.per_task_ms for o in ops]) if ops else None
    limited = _sum([o.commit_wall_ms for o in ops]) if ops and concurrency is not None else None
    wal = e.duration_ms.get("walCommit")
    co = e.duration_ms.get("commitOffsets")
    offsets = None if wal is None and co is None else (wal or 0) + (co or 0)
    return BatchRow(
        batch_id=e.batch_id,
        run_id=e.run_id,
        timestamp=e.timestamp,
        origin=e.origin.where(),
        batch_ms=e.batch_ms,
        input_rows=e.num_input_rows,
        durations=dict(e.duration_ms),
        ops=ops,
        commit_full_ms=full,
        share_full=_div(full, e.batch_ms),
        commit_limited_ms=limited,
        share_limited=_div(limited, e.batch_ms),
        offset_log_ms=offsets,
        offset_log_share=_div(offsets, e.batch_ms),
    )


def _provider(events: list[ProgressEvent]) -> str:
    keys = {k for e in events for op in e.state_ops for k in op.custom}
    if not any(e.state_ops for e in events):
        return "stateless"
    if any(k.startswith("rocksdb") for k in keys):
        return "rocksdb"
    if any(k in HDFS_KEYS for k in keys):
        return "hdfs"
    return "unknown"


def _changelog(events: list[ProgressEvent]) -> tuple[bool | None, str]:
    ops = [op for e in events for op in e.state_ops if any(k.startswith("rocksdb") for k in op.custom)]
    if not ops:
        return None, ""
    writer = [
        op.custom["rocksdbChangeLogWriterCommitLatencyMs"]
        for op in ops
        if "rocksdbChangeLogWriterCommitLatencyMs" in op.custom
    ]
    if writer:
        on = any(v > 0 for v in writer)
        return on, f"rocksdbChangeLogWriterCommitLatencyMs {'> 0' if on else '= 0'} ({max(writer)} ms max)"
    updating = [op for op in ops if (op.rows_updated or 0) > 0 and "rocksdbFilesCopied" in op.custom]
    if not updating:
        return None, "no batch updated state rows"
    no_copy = [op for op in updating if op.custom["rocksdbFilesCopied"] == 0]
    if no_copy:
        return True, f"{len(no_copy)} of {len(updating)} updating commits copied no files (rocksdbFilesCopied = 0)"
    return False, f"all {len(updating)} updating commits copied files to the checkpoint (rocksdbFilesCopied > 0)"


def _snapshot_lag(last: ProgressEvent) -> int | None:
    """Versions since the oldest reported snapshot upload (4.x ``SnapshotLastUploaded.*`` instance metrics)."""
    uploaded = [v for op in last.state_ops for k, v in op.custom.items() if k.startswith("SnapshotLastUploaded.")]
    if not uploaded:
        return None
    version = last.batch_id + 1  # state version committed by batch N is N + 1
    oldest = min(uploaded)
    return version if oldest < 0 else version - oldest


def _level(share: float) -> str | None:
    if share >= COMMIT_SHARE_HIGH:
        return "high"
    if share >= COMMIT_SHARE_WARNING:
        return "warning"
    if share >= COMMIT_SHARE_INFO:
        return "info"
    return None


def _ms(v: float) -> str:
    return f"{v / 1000:.1f} s" if v >= 1000 else f"{v:.0f} ms"


def _pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def _recommend(q: dict[str, Any], rows: list[BatchRow], concurrency: int | None) -> list[Recommendation]:
    recs: list[Recommendation] = []
    stats: dict[str, Stat] = q["stats"]
    share_key = "share_limited" if concurrency is not None else "share_full"
    share = stats.get(share_key)
    batch = stats.get("batch_ms")
    per_task = stats.get("commit_per_task_ms")
    provider = q["provider"]
    level = _level(share.median) if share else None
    if share and batch and per_task and level:
        where = f"at {concurrency} task slots" if concurrency is not None else "if every partition has its own slot"
        recs.append(
            Recommendation(
                id="STATE-COMMIT-SHARE",
                level=level,
                title="state store commit is a large part of the batch",
                text=(
                    f"median per-task commit {_ms(per_task.median)} of a median batch of "
                    f"{_ms(batch.median)}: {_pct(share.median)} of the batch {where} "
                    f"(p95 {_pct(share.p95)}, max {_pct(share.max)})."
                ),
                numbers={
                    "commit_per_task_ms_median": per_task.median,
                    "batch_ms_median": batch.median,
                    "share_median": share.median,
                    "share_p95": share.p95,
                    "share_max": share.max,
                    "concurrency": concurrency,
                },
                threshold=(
                    f"median share >= {_pct(COMMIT_SHARE_INFO)} info, >= {_pct(COMMIT_SHARE_WARNING)} warning, "
                    f">= {_pct(COMMIT_SHARE_HIGH)} high"
                ),
            )
        )
    phases: dict[str, float] = q["rocksdb_commit_shares"]
    upload = sum(
        phases.get(k, 0.0)
        for k in ("rocksdbCommitFileSyncLatencyMs", "rocksdbCommitCheckpointLatency", "rocksdbCommitFlushLatency")
    )
    if provider == "rocksdb" and q["changelog"] is False and share and share.median >= COMMIT_SHARE_INFO:
        recs.append(
            Recommendation(
                id="ROCKSDB-CHANGELOG",
                level="warning" if share.median >= COMMIT_SHARE_WARNING else "info",
                title="enable RocksDB changelog checkpointing",
                text=(
                    f"changelog checkpointing looks off ({q['changelog_evidence']}); flush + checkpoint + file sync "
                    f"are {_pct(upload)} of the summed commit time. With changelog checkpointing a commit writes only "
                    "the changed keys (N.changelog); snapshots are uploaded by the background maintenance task. "
                    "Apache Spark >= 3.5, RocksDB provider; can be switched on for an existing checkpoint."
                ),
                numbers={"upload_phases_share_of_commit": upload, "share_median": share.median},
                threshold=f"RocksDB, changelog off, median commit share >= {_pct(COMMIT_SHARE_INFO)}",
                settings={"spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true"},
                availability="Apache Spark 3.5+ (SPARK-43421)",
            )
        )
    if provider in ("rocksdb", "unknown") and share and share.median >= COMMIT_SHARE_WARNING:
        recs.append(
            Recommendation(
                id="ASYNC-STATE-CHECKPOINT",
                level="info",
                title="asynchronous state checkpointing, where available",
                text=(
                    "asynchronous state checkpointing (commit of batch N overlaps batch N+1) is a Databricks Runtime "
                    "feature for the RocksDB provider; Apache Spark (3.5 and 4.x) has no such option. On Apache Spark "
                    "the nearest is changelog checkpointing, which takes snapshot uploads off the commit path."
                ),
                numbers={
                    "share_median": share.median,
                    "commit_per_task_ms_median": per_task.median if per_task else None,
                },
                threshold=f"median commit share >= {_pct(COMMIT_SHARE_WARNING)}",
                settings={"spark.databricks.streaming.statefulOperator.asyncCheckpoint.enabled": "true"},
                availability="Databricks Runtime 10.4 LTS+ only (not in Apache Spark 3.5 or 4.x)",
            )
        )
    mem = stats.get("state_memory_bytes")
    per_inst = stats.get("state_memory_per_instance_bytes")
    if (
        provider == "rocksdb"
        and mem
        and per_inst
        and (per_inst.max >= ROCKSDB_MEMORY_PER_INSTANCE or mem.max >= STATE_MEMORY_TOTAL)
    ):
        recs.append(
            Recommendation(
                id="ROCKSDB-MEMORY",
                level="warning",
                title="bound RocksDB memory",
                text=(
                    f"state memory up to {mem.max / 2**20:.0f} MiB in total, {per_inst.max / 2**20:.0f} MiB per state "
                    "store instance; bound it per executor so memtables and block cache share one budget."
                ),
                numbers={"memory_bytes_max": mem.max, "memory_per_instance_bytes_max": per_inst.max},
                threshold=(
                    f"per instance >= {ROCKSDB_MEMORY_PER_INSTANCE // 2**20} MiB or total >= "
                    f"{STATE_MEMORY_TOTAL // 2**20} MiB"
                ),
                settings={
                    "spark.sql.streaming.stateStore.rocksdb.boundedMemoryUsage": "true",
                    "spark.sql.streaming.stateStore.rocksdb.maxMemoryUsageMB": "<per-executor budget, e.g. 500>",
                },
                availability="Apache Spark 3.5+",
            )
        )
    big = bool(mem and mem.max >= STATE_MEMORY_TOTAL)
    if provider == "hdfs" and (big or (share and share.median >= COMMIT_SHARE_WARNING)):
        recs.append(
            Recommendation(
                id="HDFS-TO-ROCKSDB",
                level="warning",
                title="consider the RocksDB state store provider",
                text=(
                    "the HDFS-backed provider keeps all state of every loaded version in executor memory and writes "
                    "a delta file per partition per commit; RocksDB keeps state off-heap with bounded memory. "
                    "Switching needs a new checkpoint or `ckptfix migrate provider`."
                ),
                numbers={"memory_bytes_max": mem.max if mem else None, "share_median": share.median if share else None},
                threshold=(
                    f"HDFS provider and (state memory >= {STATE_MEMORY_TOTAL // 2**20} MiB or median commit "
                    f"share >= {_pct(COMMIT_SHARE_WARNING)})"
                ),
                settings={"spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER},
            )
        )
    offs = stats.get("offset_log_share")
    off_ms = stats.get("offset_log_ms")
    if offs and off_ms and batch and offs.median >= OFFSET_LOG_SHARE:
        interval = max(1000, int(math.ceil(ASYNC_INTERVAL_BATCHES * batch.median / 1000.0)) * 1000)
        stateful = provider != "stateless"
        recs.append(
            Recommendation(
                id="ASYNC-PROGRESS",
                level="info" if stateful else "warning",
                title="offset/commit log writes are a large part of the batch",
                text=(
                    f"walCommit + commitOffsets take a median {_ms(off_ms.median)}, {_pct(offs.median)} of the batch. "
                    + (
                        "Async progress tracking would write them in the background, but Apache Spark refuses it for "
                        "stateful queries; reduce checkpoint-store latency instead."
                        if stateful
                        else f"Async progress tracking writes them in the background; with an interval of {interval} ms"
                        f" (~{ASYNC_INTERVAL_BATCHES} median batches) the logs are written about once per "
                        f"{ASYNC_INTERVAL_BATCHES} batches, and a restart may replay up to that much. Needs a "
                        "supporting sink (e.g. Kafka, foreach) and a processing-time trigger; turning it off later "
                        "needs the documented interval-0 restart."
                    )
                ),
                numbers={
                    "offset_log_ms_median": off_ms.median,
                    "offset_log_share_median": offs.median,
                    "batch_ms_median": batch.median,
                    "suggested_interval_ms": None if stateful else interval,
                },
                threshold=f"median (walCommit + commitOffsets) / batch >= {_pct(OFFSET_LOG_SHARE)}",
                settings={}
                if stateful
                else {
                    "asyncProgressTrackingEnabled": "true",
                    "asyncProgressTrackingCheckpointIntervalMs": str(interval),
                },
                availability="Apache Spark 3.4+, stateless queries only",
            )
        )
    lag = q["snapshot_lag"]
    if lag is not None and lag >= SNAPSHOT_LAG_VERSIONS and provider in ("rocksdb", "hdfs"):
        recs.append(
            Recommendation(
                id="SNAPSHOT-LAG",
                level="warning",
                title="state snapshots lag behind",
                text=(
                    f"the most lagging reported state store instance is {lag} versions past its last uploaded snapshot "
                    "(SnapshotLastUploaded.*); a restart replays that many delta/changelog files. Check the "
                    "maintenance task: interval and thread count."
                ),
                numbers={"versions_since_snapshot": lag},
                threshold=f">= {SNAPSHOT_LAG_VERSIONS} versions (3 x default minDeltasForSnapshot 10)",
                settings={
                    "spark.sql.streaming.stateStore.maintenanceInterval": "60s (default)",
                    "spark.sql.streaming.stateStore.numStateStoreMaintenanceThreads": "<more threads>",
                },
                availability="metric reported by Apache Spark 4.x",
            )
        )
    return recs


def analyze(
    events: list[ProgressEvent],
    concurrency: int | None = None,
    query: str | None = None,
    inputs: list[InputSummary] | None = None,
    skipped: list[Skipped] | None = None,
    duplicates: int = 0,
) -> Advice:
    if concurrency is not None and concurrency < 1:
        raise UsageError(f"--concurrency: expected at least 1, found {concurrency}")
    if query is not None:
        events = [e for e in events if query in (e.query_id, e.run_id, e.name)]
        if not events:
            raise UsageError(f"no progress event of a query with name, id or runId {query!r}")
    groups: dict[str, list[ProgressEvent]] = {}
    for e in events:
        groups.setdefault(e.query_id, []).append(e)
    out = []
    for qid, evs in groups.items():
        evs.sort(key=lambda e: (e.timestamp, e.batch_id))
        ran = [e for e in evs if e.executed]
        rows = [batch_row(e, concurrency) for e in ran]
        per_inst = [
            _div(
                sum(op.memory_bytes for op in e.state_ops if op.memory_bytes is not None),
                sum(op.instances or 0 for op in e.state_ops),
            )
            for e in ran
            if e.state_ops
        ]
        stats = {
            k: s
            for k, s in {
                "batch_ms": stat(r.batch_ms for r in rows),
                "commit_per_task_ms": stat(r.commit_full_ms for r in rows),
                "share_full": stat(r.share_full for r in rows),
                "commit_limited_ms": stat(r.commit_limited_ms for r in rows),
                "share_limited": stat(r.share_limited for r in rows),
                "commit_total_ms": stat(_sum([o.commit_ms for o in r.ops]) for r in rows if r.ops),
                "offset_log_ms": stat(r.offset_log_ms for r in rows),
                "offset_log_share": stat(r.offset_log_share for r in rows),
                "state_memory_bytes": stat(_sum([op.memory_bytes for op in e.state_ops]) for e in ran if e.state_ops),
                "state_memory_per_instance_bytes": stat(per_inst),
            }.items()
            if s is not None
        }
        commit_sum = sum(o.commit_ms or 0 for r in rows for o in r.ops)
        phase_sum: dict[str, int] = {}
        for r in rows:
            for o in r.ops:
                for k, v in o.rocksdb_phases.items():
                    phase_sum[k] = phase_sum.get(k, 0) + v
        shares = {k: v / commit_sum for k, v in phase_sum.items()} if commit_sum else {}
        changelog, evidence = _changelog(ran)
        names = [e.name for e in evs if e.name]
        q: dict[str, Any] = {
            "stats": stats,
            "provider": _provider(ran or evs),
            "changelog": changelog,
            "changelog_evidence": evidence,
            "rocksdb_commit_shares": shares,
            "snapshot_lag": _snapshot_lag(ran[-1]) if ran else None,
        }
        out.append(
            QueryAdvice(
                query_id=qid,
                name=names[-1] if names else None,
                run_ids=list(dict.fromkeys(e.run_id for e in evs)),
                provider=q["provider"],
                changelog=changelog,
                changelog_evidence=evidence,
                batches=rows,
                idle_triggers=len(evs) - len(ran),
                stats=stats,
                rocksdb_commit_shares=shares,
                snapshot_lag=q["snapshot_lag"],
                recommendations=_recommend(q, rows, concurrency),
            )
        )
    return Advice(
        concurrency=concurrency,
        model=MODEL,
        inputs=list(inputs or []),
        skipped=list(skipped or []),
        duplicates=duplicates,
        queries=out,
    )
