"""A repair plan is data: frozen actions on checkpoint files, each with the state the file
must be in right before it is touched (its precondition) and the state it is left in.

Plans serialise to JSON (``--plan-out``) and load back with full validation: a plan that is
malformed or was made for another checkpoint is refused before anything is touched.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from ckptfix.errors import (
    PlanError,
)

PLAN_FORMAT = "ckptfix-plan"
PLAN_VERSION = 1


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class FileState:
    """What a path holds: nothing, or exactly these bytes (by sha256 and size)."""

    exists: bool
    sha256: str | None = None
    size: int | None = None

    @classmethod
    def of(cls, data: bytes | None) -> FileState:
        return cls(False) if data is None else cls(True, sha256(data), len(data))

    def describe(self) -> str:
        return f"{self.size} bytes, sha256 {self.sha256[:12]}" if self.exists and self.sha256 else "no file"

    def to_json(self) -> dict[str, Any]:
        return {"exists": self.exists, "sha256": self.sha256, "size": self.size}


@dataclass(frozen=True)
class Unfixed:
    """An error finding a repair plan leaves as it is, and why. ``str()`` is the line ``ckptfix repair``
    prints after "not fixed" (``RULE-ID: reason``)."""

    rule_id: str
    reason: str
    #: the finding's first file (its evidence), when it names one
    path: str | None = None
    #: an error Spark fails on (its fix held back, the rest of the plan is not applied without --partial); False
    #: for a finding that only leaves the restart undecided (a plan that fixes the rest can still be applied)
    blocks: bool = True

    def __str__(self) -> str:
        return f"{self.rule_id}: {self.reason}"

    def to_json(self) -> dict[str, Any]:
        return {"rule_id": self.rule_id, "reason": self.reason, "path": self.path}


@dataclass(frozen=True)
class Action:
    """Write ``content`` to ``path`` (create or replace) or delete it."""

    op: str  # "write" | "delete"
    path: str  # relative to the checkpoint root
    before: FileState
    content: bytes | None = None
    reason: str = ""
    rule: str | None = None  # the finding this action fixes
    sidecar_of: str | None = None  # set for .crc sidecars kept in step with a main file
    #: a write whose content is a copy of another checkpoint file: that file's path and state when planned. A
    #: precondition like ``before``: apply refuses when the source no longer holds these bytes (the copy would
    #: carry bytes the source no longer has, and the source's change is a finding of its own)
    copy_of: str | None = None
    copy_of_state: FileState | None = None

    @property
    def after(self) -> FileState:
        return FileState.of(self.content) if self.op == "write" else FileState(False)

    def describe(self) -> str:
        verb = {"write": "replace" if self.before.exists else "create", "delete": "delete"}[self.op]
        return f"{verb} {self.path} ({self.before.describe()} -> {self.after.describe()})"


@dataclass(frozen=True)
class Plan:
    checkpoint: str
    query_id: str | None
    target_spark: str
    fix: str  # what the plan does, e.g. "LOG-ASYNC-GAP: copy offsets/29 to offsets/30"
    actions: tuple[Action, ...]
    #: what Spark does after the plan: batches re-run, rows an at-least-once sink may see again
    effects: tuple[str, ...] = ()
    fixes: tuple[str, ...] = ()  # rule ids
    #: the logs' tail when planned; a new batch since then means the query is alive
    latest_offset: int | None = None
    latest_commit: int | None = None
    created_at: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)
    #: a run that a driver carried out instead of the engine (``"async-off"``: Spark ran the query). It has no
    #: file actions, so nothing to restore; its steps are in the run's journal.
    driver: str | None = None
    #: True (repair, rollback): the run must leave a clean restart, else it exits 1. False (state rebuild/edits,
    #: repartition, provider migration): it must only not turn a clean restart into anything else
    aims_at_restart: bool = True

    @property
    def empty(self) -> bool:
        return not self.actions

    # -- JSON -------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {
            "format": PLAN_FORMAT,
            "version": PLAN_VERSION,
            "checkpoint": self.checkpoint,
            "query_id": self.query_id,
            "target_spark": self.target_spark,
            "fix": self.fix,
            "fixes": list(self.fixes),
            "effects": list(self.effects),
            "notes": list(self.notes),
            "latest_offset": self.latest_offset,
            "latest_commit": self.latest_commit,
            "created_at": self.created_at,
            **({"driver": self.driver} if self.driver is not None else {}),
            "aims_at_restart": self.aims_at_restart,
            "actions": [
                {
                    "op": a.op,
                    "path": a.path,
                    "before": a.before.to_json(),
                    "after": a.after.to_json(),
                    "content_base64": None if a.content is None else base64.b64encode(a.content).decode(),
                    "reason": a.reason,
                    "rule": a.rule,
                    "sidecar_of": a.sidecar_of,
                    **(
                        {"copy_of": {"path": a.copy_of, **a.copy_of_state.to_json()}}
                        if a.copy_of is not None and a.copy_of_state is not None
                        else {}
                    ),
                }
                for a in self.actions
            ],
        }

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2)


def _need(obj: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if key not in obj:
        raise PlanError(f"{where}: expected a field {key!r}, found none")
    value = obj[key]
    if not isinstance(value, kind):
        raise PlanError(f"{where}: expected {key!r} to be {getattr(kind, '__name__', kind)}, found {value!r:.40}")
    return value


def _state(obj: Any, where: str) -> FileState:
    if not isinstance(obj, dict):
        raise PlanError(f"{where}: expected an object, found {obj!r:.40}")
    exists = _need(obj, "exists", bool, where)
    sha, size = obj.get("sha256"), obj.get("size")
    if exists and (not isinstance(sha, str) or len(sha) != 64 or not isinstance(size, int)):
        raise PlanError(f"{where}: expected sha256 and size of an existing file, found {obj!r:.80}")
    return FileState(exists, sha if exists else None, size if exists else None)


def load(path: str) -> Plan:
    """Read and parse a plan file (``repair --plan-out``); a file that is not there, is a directory or cannot be
    read is one PlanError naming it, what was expected and what was found."""
    expected = "a plan file (written by `ckptfix repair --plan-out`)"
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        raise PlanError(f"{path}: expected {expected}, found no such file") from None
    except IsADirectoryError:
        raise PlanError(f"{path}: expected {expected}, found a directory") from None
    except PermissionError:
        raise PlanError(f"{path}: expected {expected}, found a file ckptfix may not read (permission denied)") from None
    except UnicodeDecodeError as exc:
        raise PlanError(f"{path}: at byte {exc.start}: expected {expected}, found bytes that are not UTF-8") from None
    return loads(text, path)


def loads(text: str, source: str = "<plan>") -> Plan:
    """Parse and validate a plan file; every problem is one PlanError naming where it is."""
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PlanError(f"{source}: at byte {exc.pos}: expected a JSON plan, found invalid JSON ({exc.msg})") from None
    if not isinstance(obj, dict) or obj.get("format") != PLAN_FORMAT:
        raise PlanError(f"{source}: expected a ckptfix plan (format {PLAN_FORMAT!r}), found something else")
    if obj.get("version") != PLAN_VERSION:
        raise PlanError(f"{source}: expected plan version {PLAN_VERSION}, found {obj.get('version')!r}")
    actions = []
    for i, raw in enumerate(_need(obj, "actions", list, source)):
        where = f"{source}: action {i}"
        if not isinstance(raw, dict):
            raise PlanError(f"{where}: expected an object, found {raw!r:.40}")
        op = _need(raw, "op", str, where)
        if op not in ("write", "delete"):
            raise PlanError(f"{where}: expected op 'write' or 'delete', found {op!r}")
        path = _need(raw, "path", str, where)
        if not path or path.startswith("/") or ".." in path.split("/"):
            raise PlanError(f"{where}: expected a path inside the checkpoint, found {path!r}")
        content = None
        if op == "write":
            try:
                content = base64.b64decode(_need(raw, "content_base64", str, where), validate=True)
            except ValueError:
                raise PlanError(f"{where}: expected base64 content, found invalid base64") from None
        copy_of, copy_state = _copy_of(raw.get("copy_of"), op, content, where)
        action = Action(
            op,
            path,
            _state(raw.get("before"), f"{where} before"),
            content,
            str(raw.get("reason", "")),
            raw.get("rule"),
            raw.get("sidecar_of"),
            copy_of,
            copy_state,
        )
        declared = _state(raw.get("after"), f"{where} after")
        if declared != action.after:
            raise PlanError(
                f"{where}: expected content matching 'after' ({declared.describe()}), found {action.after.describe()}"
            )
        actions.append(action)
    return Plan(
        checkpoint=_need(obj, "checkpoint", str, source),
        query_id=obj.get("query_id"),
        target_spark=_need(obj, "target_spark", str, source),
        fix=_need(obj, "fix", str, source),
        actions=tuple(actions),
        effects=tuple(obj.get("effects", [])),
        fixes=tuple(obj.get("fixes", [])),
        latest_offset=obj.get("latest_offset"),
        latest_commit=obj.get("latest_commit"),
        created_at=str(obj.get("created_at", "")),
        notes=tuple(obj.get("notes", [])),
        driver=_driver(obj.get("driver"), source),
        aims_at_restart=_flag(obj.get("aims_at_restart", True), "aims_at_restart", source),
    )


def _flag(value: Any, key: str, source: str) -> bool:
    if not isinstance(value, bool):
        raise PlanError(f"{source}: expected {key!r} to be true or false, found {value!r:.40}")
    return value


def _copy_of(obj: Any, op: str, content: bytes | None, where: str) -> tuple[str | None, FileState | None]:
    """An action's ``copy_of`` (a write that copies another file): its path and the state it must still be in."""
    if obj is None:
        return None, None
    where = f"{where} copy_of"
    if op != "write" or not isinstance(obj, dict):
        raise PlanError(f"{where}: expected the source of a write, found {obj!r:.40}")
    path = _need(obj, "path", str, where)
    if not path or path.startswith("/") or ".." in path.split("/"):
        raise PlanError(f"{where}: expected a path inside the checkpoint, found {path!r}")
    state = _state(obj, where)
    if not state.exists or state != FileState.of(content):
        raise PlanError(f"{where}: expected the content to be a copy of {path} ({state.describe()}), found otherwise")
    return path, state


def _driver(value: Any, source: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise PlanError(f"{source}: expected 'driver' to be a string, found {value!r:.40}")
    return value
