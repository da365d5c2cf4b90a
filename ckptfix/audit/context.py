"""What every rule may ask about the checkpoint, computed once per audit."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from ckptfix.audit.targets import NEWEST, SparkTarget
from ckptfix.checkpoint import Checkpoint
from ckptfix.errors import FormatError
from ckptfix.formats import commitlog, offsetlog
from ckptfix.progress import NullProgress, Progress
from ckptfix.sinks import Sink

if TYPE_CHECKING:
    from ckptfix.audit.queryshape import QueryShape


@dataclass
class AuditContext:
    ckpt: Checkpoint
    target: SparkTarget
    deep: bool = False
    sink: Sink | None = None
    stateful: bool | None = None  # None: infer from the files
    progress: Progress = field(default_factory=NullProgress)
    query: QueryShape | None = None  # audit --against: the new query, for the QUERY-* rules
    #: confs of the restarting session the user told (``--conf``): they decide where the offset log is silent
    session_conf: dict[str, str] = field(default_factory=dict)
    #: what shared samplers computed once for several rules (:mod:`ckptfix.audit.sampled`)
    memo: dict[Any, Any] = field(default_factory=dict, repr=False)

    def rollback_command(self, batch: int) -> str:
        """The ``ckptfix rollback`` that goes back to ``batch``, as advice: with the file sink the audit was given
        (``--sink OUT --with-sink``: otherwise the sink skips the batch ids it already holds and the rows of the
        batches run again are lost; repair hunt 10, on 4.3.0) and the audit's target when it is not the newest."""
        parts = ["ckptfix rollback", shlex.quote(self.ckpt.location.url), f"--to-batch {batch}"]
        if self.sink is not None:
            parts += ["--sink", shlex.quote(self.sink.location.url), "--with-sink"]
        if self.target.label != NEWEST:
            parts += ["--target-spark", self.target.label]
        command = f"`{' '.join(parts)}`"
        if self.sink is None:
            command += " (a file sink: add `--sink OUT --with-sink`, or the sink skips the batches run again)"
        return command

    # -- the facts Spark's restart is decided on (spark-logs-and-restart.md §6.3) --------
    @cached_property
    def latest_offset(self) -> int | None:
        return self.ckpt.offsets.latest

    @cached_property
    def latest_commit(self) -> int | None:
        return self.ckpt.commits.latest

    def offset_or_error(self, batch: int) -> tuple[offsetlog.OffsetFile | None, FormatError | None]:
        try:
            return self.ckpt.offset(batch), None
        except FormatError as exc:
            return None, exc

    def commit_or_error(self, batch: int) -> tuple[commitlog.CommitFile | None, FormatError | None]:
        try:
            return self.ckpt.commit(batch), None
        except FormatError as exc:
            return None, exc

    @cached_property
    def latest_offset_file(self) -> offsetlog.OffsetFile | None:
        L = self.latest_offset
        if L is None or L not in self.ckpt.offsets.files:
            return None
        return self.offset_or_error(L)[0]

    @cached_property
    def conf(self) -> dict[str, str]:
        """The confs Spark restores from offsets/L (falling back to older readable files)."""
        entry = self.latest_offset_file
        if entry is not None and entry.metadata is not None:
            return dict(entry.metadata.conf)
        return self.ckpt.recorded_conf()

    @cached_property
    def next_batch(self) -> int | None:
        """The first batch the restarted query runs: L+1 when L committed, else L again."""
        L, K = self.latest_offset, self.latest_commit
        if L is None:
            return 0
        return L + 1 if K == L else L

    @cached_property
    def state_version(self) -> int:
        """The state version the first batch loads (state version v = after batch v-1)."""
        return self.next_batch or 0

    @cached_property
    def operator_names(self) -> dict[int, str | None]:
        """Which operator wrote each state/<op> (Spark's shortName; None when its files do not say)."""
        from ckptfix.state.schemas import operator_name

        return {op.operator: operator_name(self.ckpt, op) for op in self.ckpt.state.operators.values()}
