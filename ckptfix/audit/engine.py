"""Run every registered check and decide the restart verdict."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ckptfix.audit import (  # noqa: F401
    rules_conf,
    rules_links,
    rules_logs,
    rules_placement,
    rules_query,
    rules_schema,
    rules_sink,
    rules_sources,
    rules_stale,
    rules_state,
    rules_state_ahead,
    rules_upgrade,
)
from ckptfix.audit.context import AuditContext
from ckptfix.audit.model import Finding, Report, Skipped, Verdict, severity_rank
from ckptfix.audit.queryshape import QueryShape
from ckptfix.audit.registry import CHECKS
from ckptfix.audit.targets import parse_target
from ckptfix.checkpoint import Checkpoint
from ckptfix.progress import ProgressLike, progress_of
from ckptfix.sinks import Sink, open_sink
from ckptfix.storage import Location, command_flags

#: the commands whose first argument is the checkpoint, as advice names them: `ckptfix repair`, `ckptfix rollback
#: CKPT --to-batch N` (the rules' static texts cannot know the path)
_COMMAND = re.compile(
    r"`ckptfix (repair|rollback|audit|state rebuild|state repartition|offsets export|migrate relocate|async-off)"
    r"( CKPT(?=[ `])|(?=`| -))"
)


def runnable(finding: Finding, url: str, flags: str = "") -> Finding:
    """The finding with every command its fix and message name made runnable as written: the checkpoint's path
    where the text has none or says CKPT (new-user trial: `ckptfix repair` run verbatim failed "Missing argument
    'CHECKPOINT'", `ckptfix repair CKPT --accept-edits` looked for a directory named CKPT), and after it ``flags``,
    the storage options the audit was given (:func:`ckptfix.storage.command_flags`)."""
    path = shlex.quote(url) + (f" {flags}" if flags else "")

    def fill(text: str) -> str:
        return _COMMAND.sub(lambda m: f"`ckptfix {m.group(1)} {path}", text)

    fix, message = fill(finding.fix), fill(finding.message)
    if fix == finding.fix and message == finding.message:
        return finding
    return replace(finding, fix=fix, message=message)


def decide(target: str, findings: list[Finding], skipped: list[Skipped] | None = None) -> Verdict:
    """The first blocker in Spark's own order decides; silent hazards are listed, and a "restarts" names what it
    assumes (the checks skipped on an assumption)."""
    blockers = sorted((f for f in findings if f.spark_error is not None), key=lambda f: f.stage or 0)
    hazards = tuple(f.message for f in findings if f.silent and f.severity == "error")
    if blockers:
        first = blockers[0]
        return Verdict(target, False, first.spark_error, first.rule_id, hazards)
    unknowns = tuple(f.message for f in findings if f.undecided)
    assumptions = tuple(dict.fromkeys(s.assumption for s in skipped or () if s.assumption))
    return Verdict(target, None if unknowns else True, None, None, hazards, unknowns, assumptions)


def audit(
    url: str,
    target_spark: str | None = None,
    *,
    storage_options: Mapping[str, Any] | None = None,
    deep: bool = False,
    sink_path: str | None = None,
    stateful: bool | None = None,
    progress: ProgressLike = None,
    checkpoint: Checkpoint | None = None,
    query: QueryShape | None = None,
    session_conf: Mapping[str, str] | None = None,
    sink: Sink | None = None,
) -> Report:
    """``sink``: an already opened sink (e.g. as a rollback will leave it), instead of opening ``sink_path``."""
    target = parse_target(target_spark)
    obs = progress_of(progress)
    obs.stage("listing")
    ckpt = checkpoint or Checkpoint.open(url, storage_options)
    if sink_path is None and query is not None and query.sink.is_file:
        sink_path = query.sink.path  # the new query's file sink: its _spark_metadata against the logs
        if sink_path is not None and not Location(sink_path, storage_options).exists(""):
            sink_path = None  # a new output path (Spark creates it): no sink log to compare (damage hunt 8, H7)
    if sink is None and sink_path:
        sink = open_sink(sink_path, storage_options)
    session = {**(query.conf if query is not None else {}), **(session_conf or {})}
    if stateful is None and query is not None:
        stateful = bool(query.operators)  # the new query says whether it has stateful operators
    ctx = AuditContext(
        ckpt, target, deep=deep, sink=sink, stateful=stateful, progress=obs, query=query, session_conf=session
    )
    findings: list[Finding] = []
    skipped: list[Skipped] = []
    flags = command_flags(ckpt.location.storage_options)
    for fn in CHECKS:
        for item in fn(ctx):
            if isinstance(item, Skipped):
                skipped.append(item)
            else:
                findings.append(runnable(item, ckpt.location.url, flags))
    findings.sort(key=lambda f: (-severity_rank(f.severity), f.stage if f.stage is not None else 999, f.rule_id))
    verdict = decide(target.label, findings, skipped)
    facts = {
        "latest_offset": ctx.latest_offset,
        "latest_commit": ctx.latest_commit,
        "next_batch": ctx.next_batch,
        "state_version": ctx.state_version,
    }
    return Report(ckpt.location.url, target.label, verdict, findings, skipped, facts, ckpt.location.stats)
