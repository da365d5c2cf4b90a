"""Delta Lake's transaction log (``<table>/_delta_log/``), as far as a streaming sink's exactly-once handshake needs.

Delta's streaming sink (``org.apache.spark.sql.delta.sources.DeltaSink.addBatch``) commits every micro-batch with
a ``SetTransaction(appId = the query id, version = the batch id)`` action, and skips a batch whose id is at or
below ``txnVersion(queryId)`` ("Skipping already complete epoch"). The newest ``txn`` per ``appId`` is therefore
what a checkpoint's restart is checked against. Files, from the Delta protocol (PROTOCOL.md):

* ``%020d.json``: a commit, one JSON action per line (``txn``: ``{"appId", "version", "lastUpdated"}``);
* ``%020d.checkpoint.parquet``: a classic checkpoint; ``%020d.checkpoint.%010d.%010d.parquet``: part i of n;
  ``%020d.checkpoint.<uuid>.json|parquet``: a V2 checkpoint (its ``txn`` actions are in this top-level file;
  sidecars hold only file actions). Each checkpoint is the table's state *at* its version;
* ``_last_checkpoint``, ``%020d.crc``, ``%020d.%020d.compacted.json``: hints and caches, never needed here.

Parquet checkpoints are read with pyarrow (the ``[arrow]`` extra); the ``txn`` column is a struct
``{appId: string, version: long, lastUpdated: long}``, null on rows holding other actions.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ckptfix.errors import FormatError, MissingExtra
from ckptfix.formats.text import json_expected, json_failure, loads, preview

LOG_DIR = "_delta_log"

_COMMIT = re.compile(r"^(\d{20})\.json$")
_CLASSIC = re.compile(r"^(\d{20})\.checkpoint\.parquet$")
_MULTI = re.compile(r"^(\d{20})\.checkpoint\.(\d{10})\.(\d{10})\.parquet$")
_V2 = re.compile(r"^(\d{20})\.checkpoint\.([0-9a-fA-F-]{36})\.(json|parquet)$")


@dataclass(frozen=True)
class Txn:
    """The newest ``txn`` action of one application id, and the log file it was read from."""

    app_id: str
    version: int
    rel: str


@dataclass(frozen=True)
class LogFile:
    kind: str  # "commit" or "checkpoint"
    version: int
    rel: str
    #: checkpoints: "classic", "multi", "v2-json", "v2-parquet"; part index and count for "multi"
    form: str = ""
    part: int = 1
    parts: int = 1


def classify(name: str, rel: str) -> LogFile | None:
    """What one file name in ``_delta_log`` is, or None for files the replay does not read."""
    if m := _COMMIT.match(name):
        return LogFile("commit", int(m.group(1)), rel)
    if m := _CLASSIC.match(name):
        return LogFile("checkpoint", int(m.group(1)), rel, "classic")
    if m := _MULTI.match(name):
        return LogFile("checkpoint", int(m.group(1)), rel, "multi", int(m.group(2)), int(m.group(3)))
    if m := _V2.match(name):
        return LogFile("checkpoint", int(m.group(1)), rel, f"v2-{m.group(3)}")
    return None


def _json_actions(data: bytes, path: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """(byte offset, action) for every non-empty line of a JSON-lines log file."""
    offset = 0
    for raw in data.split(b"\n"):
        line_at, offset = offset, offset + len(raw) + 1
        text = raw.decode("utf-8", errors="replace").strip()
        if not text:
            continue
        try:
            obj = loads(text)
        except json.JSONDecodeError as exc:
            kind, pos, found = json_failure(exc, text)
            raise FormatError(
                path, line_at + pos, f"one JSON action per line ({json_expected(exc)})", found, kind=kind
            ) from None
        if not isinstance(obj, dict):
            raise FormatError(path, line_at, "a JSON object (one Delta action)", preview(text), kind="invalid-json")
        yield line_at, obj


def _txn(value: Any, path: str, at: int) -> tuple[str, int]:
    if not isinstance(value, dict):
        raise FormatError(path, at, 'a "txn" object {"appId", "version"}', preview(json.dumps(value)))
    app, version = value.get("appId"), value.get("version")
    if not isinstance(app, str) or isinstance(version, bool) or not isinstance(version, int):
        raise FormatError(
            path, at, 'a "txn" with a string "appId" and an integer "version"', preview(json.dumps(value))
        )
    return app, version


def txns_in_json(data: bytes, path: str, rel: str) -> dict[str, Txn]:
    """The ``txn`` actions of a commit (or a V2 JSON checkpoint), by application id."""
    out: dict[str, Txn] = {}
    for at, action in _json_actions(data, path):
        if "txn" in action:
            app, version = _txn(action["txn"], path, at)
            out[app] = Txn(app, version, rel)
    return out


def txns_in_parquet(data: bytes, path: str, rel: str) -> dict[str, Txn]:
    """The ``txn`` rows of a Parquet checkpoint (or a V2 Parquet checkpoint), by application id."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise MissingExtra("pyarrow", "arrow") from None
    try:
        parquet = pq.ParquetFile(io.BytesIO(data))
        if "txn" not in parquet.schema_arrow.names:
            return {}
        column = parquet.read(columns=["txn"]).column("txn").to_pylist()
    except Exception as exc:  # pyarrow raises its own ArrowInvalid/OSError family for damaged files
        raise FormatError(path, 0, "a Parquet Delta checkpoint", f"{type(exc).__name__}: {exc}") from None
    out: dict[str, Txn] = {}
    for row in column:
        if row is None:
            continue
        app, version = _txn(row, path, 0)
        out[app] = Txn(app, version, rel)
    return out


__all__ = ["LOG_DIR", "LogFile", "Txn", "classify", "txns_in_json", "txns_in_parquet"]
