"""Build plans against a listed checkpoint: record each file's current state as the action's
precondition and keep Hadoop ``.crc`` and Spark 4.x checksum sidecars in step."""

from __future__ import annotations

import posixpath
from datetime import datetime, timezone

from ckptfix import layout
from ckptfix.checkpoint import Checkpoint
from ckptfix.errors import (
    PlanConflict,
)
from ckptfix.formats import filechecksum, hadoopcrc
from ckptfix.repair.plan import Action, FileState, Plan


class PlanBuilder:
    def __init__(self, ckpt: Checkpoint, target_spark: str) -> None:
        self.ckpt = ckpt
        self.target = target_spark
        self.actions: list[Action] = []
        self._paths: set[str] = set()

    def current(self, rel: str) -> bytes | None:
        entry = self.ckpt.entries.get(rel)
        if entry is None or entry.is_dir:
            return None
        return self.ckpt.read(rel)

    def _add(self, action: Action) -> None:
        if action.path in self._paths:
            raise PlanConflict(f"two actions on {action.path}: a plan touches each file once")
        self._paths.add(action.path)
        self.actions.append(action)

    def touches(self, rel: str) -> bool:
        """Whether an action of the plan so far writes or deletes ``rel``."""
        return rel in self._paths

    def mark(self) -> int:
        return len(self.actions)

    def rollback(self, mark: int) -> None:
        """Forget the actions added since ``mark`` (a planner that gave up)."""
        for action in self.actions[mark:]:
            self._paths.discard(action.path)
        del self.actions[mark:]

    def write(self, rel: str, content: bytes, reason: str, rule: str | None = None) -> None:
        self._add(Action("write", rel, FileState.of(self.current(rel)), content, reason, rule))
        self._sidecars(rel, content, rule)

    def copy(self, rel: str, source: str, reason: str, rule: str | None = None) -> None:
        """Write ``rel`` as a byte copy of ``source``, whose state now becomes a precondition of the action."""
        data = self.ckpt.read(source)
        state = FileState.of(data)
        self._add(Action("write", rel, FileState.of(self.current(rel)), data, reason, rule, None, source, state))
        self._sidecars(rel, data, rule)

    def delete(self, rel: str, reason: str, rule: str | None = None) -> None:
        before = self.current(rel)
        if before is None:
            return
        self._add(Action("delete", rel, FileState.of(before), None, reason, rule))
        self._sidecars(rel, None, rule)

    def _sidecars(self, rel: str, content: bytes | None, rule: str | None) -> None:
        parent, name = posixpath.split(rel)
        hadoop = posixpath.join(parent, layout.hadoop_crc_name(name))
        old = self.current(hadoop)
        if old is not None and hadoop not in self._paths:
            if content is None:
                self._add(Action("delete", hadoop, FileState.of(old), None, f"sidecar of {rel}", rule, rel))
            else:
                new = hadoopcrc.dump(hadoopcrc.compute(content))
                if new != old:  # a sidecar that already records these bytes stays (no action that changes nothing)
                    self._add(Action("write", hadoop, FileState.of(old), new, f"sidecar of {rel}", rule, rel))
        if layout.parse_state_file(name) is not None:  # Spark 4.x <state file>.crc JSON sidecar
            sidecar = f"{rel}.crc"
            old = self.current(sidecar)
            if old is not None and sidecar not in self._paths:
                if content is None:
                    self._add(Action("delete", sidecar, FileState.of(old), None, f"checksum of {rel}", rule, rel))
                    self._sidecars(sidecar, None, rule)  # its own Hadoop .crc: left alone, a later rename fails on it
                else:
                    new = filechecksum.dump(filechecksum.make(content))
                    if new != old:
                        self._add(Action("write", sidecar, FileState.of(old), new, f"checksum of {rel}", rule, rel))
                        self._sidecars(sidecar, new, rule)

    def build(
        self,
        fix: str,
        fixes: list[str],
        effects: list[str],
        notes: list[str] | None = None,
        *,
        aims_at_restart: bool = True,
    ) -> Plan:
        qid = None
        try:
            qid = self.ckpt.query_metadata().id if self.ckpt.metadata_rel else None
        except Exception:  # noqa: BLE001 - an unreadable metadata file is a finding, not a plan error
            qid = None
        return Plan(
            checkpoint=self.ckpt.location.url,
            query_id=qid,
            target_spark=self.target,
            fix=fix,
            actions=tuple(self.actions),
            effects=tuple(effects),
            fixes=tuple(fixes),
            latest_offset=self.ckpt.offsets.latest,
            latest_commit=self.ckpt.commits.latest,
            created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
            notes=tuple(notes or ()),
            aims_at_restart=aims_at_restart,
        )
