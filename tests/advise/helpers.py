"""Shared bits for the ``ckptfix advise`` tests: the CLI runner and a hand-written progress event."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from ckptfix.cli.main import app

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "progress"
VERSIONS = sorted(p.name for p in FIXTURES.iterdir() if p.is_dir() and p.name.startswith("spark-"))


def run(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["advise", *args], input=stdin)
    return result.exit_code, result.stdout, result.stderr


def progress_event(
    *,
    batch_id: int = 0,
    trigger_ms: int = 547730,
    commit_ms: int = 3186626,
    partitions: int = 64,
    name: str = "orders",
    query_id: str = "9f7c6c2e-0000-4000-8000-000000000001",
    run_id: str = "1b2d3c4e-0000-4000-8000-000000000002",
    wal_ms: int = 120,
    commit_offsets_ms: int = 80,
    custom: dict[str, int] | None = None,
) -> dict[str, Any]:
    """A StreamingQueryProgress shaped like Spark 4.x writes it (field order and names from progress.scala)."""
    return {
        "id": query_id,
        "runId": run_id,
        "name": name,
        "timestamp": f"2026-01-01T00:{batch_id // 60:02d}:{batch_id % 60:02d}.000Z",
        "batchId": batch_id,
        "batchDuration": trigger_ms,
        "numInputRows": 1000,
        "durationMs": {
            "addBatch": trigger_ms - wal_ms - commit_offsets_ms - 30,
            "commitOffsets": commit_offsets_ms,
            "getBatch": 0,
            "latestOffset": 10,
            "queryPlanning": 20,
            "triggerExecution": trigger_ms,
            "walCommit": wal_ms,
        },
        "stateOperators": [
            {
                "operatorName": "stateStoreSave",
                "numRowsTotal": 10_000_000,
                "numRowsUpdated": 5000,
                "allUpdatesTimeMs": 1000,
                "numRowsRemoved": 0,
                "allRemovalsTimeMs": 0,
                "commitTimeMs": commit_ms,
                "memoryUsedBytes": 123456789,
                "numRowsDroppedByWatermark": 0,
                "numShufflePartitions": partitions,
                "numStateStoreInstances": partitions,
                "customMetrics": custom if custom is not None else {},
            }
        ],
        "sources": [],
        "sink": {"description": "NoopTable", "numOutputRows": 1000},
    }


def write_json(path: Path, obj: Any, pretty: bool = True) -> Path:
    path.write_text(json.dumps(obj, indent=2 if pretty else None) + "\n")
    return path
