"""Human renderer (rich). Never the only way to see a result: JSON shows the same."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from ckptfix.render.jsonout import compact

if TYPE_CHECKING:  # annotations only: rendering rows must not load the checkpoint model and the repair engine
    from ckptfix.audit.model import Report
    from ckptfix.audit.scan import ScanReport
    from ckptfix.inspect import Inspection
    from ckptfix.offsets_export import OffsetsExport
    from ckptfix.repair.engine import RunInfo
    from ckptfix.repair.plan import Plan, Unfixed

_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def folding_table(*headers: str, whole: tuple[str, ...] = (), **kwargs: Any) -> Table:
    """A table whose cells wrap instead of being cut with an ellipsis: query ids and provider class names must
    stay whole to be copied. The columns named in ``whole`` (a run id, a time) never wrap at all: the others give
    way, so a double-click copies the id."""
    t = Table(**kwargs)
    for h in headers:
        t.add_column(h, overflow="fold", no_wrap=h in whole)
    return t


def styled(console: Console, style: str, head: str, rest: str = "") -> None:
    """One line: ``head`` in ``style``, then ``rest``, both printed as they are. Every console ckptfix prints
    through has markup off (a path such as ``ck[prod]`` or a hint such as ``pip install -e '/src/ckptfix[rocksdb]'``
    must not lose its brackets): this is the one way a line gets a style."""
    from rich.text import Text

    console.print(Text.assemble((head, style), rest), highlight=False, soft_wrap=True)


def report(r: Report, console: Console) -> None:
    v = r.verdict
    style = "bold yellow" if v.restarts is None else "bold green" if v.restarts and not v.hazards else "bold red"
    styled(console, style, v.headline)
    console.print(f"checkpoint: {r.checkpoint}", highlight=False, soft_wrap=True)
    facts = r.facts

    def fact(key: str) -> Any:
        value = facts.get(key)
        return "none" if value is None else value

    console.print(
        f"latest offset {fact('latest_offset')}, latest commit {fact('latest_commit')}, "
        f"next batch {fact('next_batch')}, state version to load {fact('state_version')}",
        highlight=False,
    )
    if not r.findings:
        console.print("no findings")
    for f in r.findings:
        blocker = " (restart blocker)" if v.blocking_rule == f.rule_id and f.spark_error is v.error else ""
        console.print()
        styled(console, _STYLE[f.severity], f.severity.upper(), f" {f.rule_id}{blocker}: {f.title}")
        console.print(f"  {f.message}", highlight=False, soft_wrap=True)
        for e in f.evidence:
            parts = [e.path]
            if e.offset is not None:
                parts.append(f"byte {e.offset}")
            if e.expected is not None:
                parts.append(f"expected {e.expected}")
            if e.found is not None:
                parts.append(f"found {e.found}")
            if e.note:
                parts.append(e.note)
            console.print("  - " + ", ".join(parts), highlight=False, soft_wrap=True)
        if f.spark_error is not None:
            console.print(f"  Spark raises: {f.spark_error.headline}", highlight=False, soft_wrap=True)
        if f.fix:
            console.print(f"  fix: {f.fix}", highlight=False, soft_wrap=True)
    for s in r.skipped:
        console.print(f"skipped {s.rule_id}: {s.reason}", highlight=False)


_SCAN_HEAD = {
    "fails": ("FAILS", "bold red"),
    "wrong": ("WRONG", "bold red"),
    "unknown": ("UNKNOWN", "bold yellow"),
    "restarts": ("OK", "bold green"),
}


def scan(s: ScanReport, console: Console, ignore: Sequence[str] = (), flags: str = "") -> None:
    """One line per checkpoint: what Spark does on restart, the blocking rule, the findings by severity (those of
    the rules in ``ignore`` counted apart); ``flags``: the storage options for the printed command."""
    ignore = [i.upper() for i in ignore]
    counts = s.counts()
    parts = [f"{counts['fails']} will fail", f"{counts['unknown']} cannot tell", f"{counts['restarts']} will restart"]
    if counts["wrong"]:
        parts.insert(1, f"{counts['wrong']} will restart with silently wrong results")
    if counts["unreadable"]:
        parts.append(f"{counts['unreadable']} could not be audited")
    n = len(s.checkpoints)
    console.print(
        f"Spark {s.target}: {n} checkpoint{'' if n == 1 else 's'} under {', '.join(s.roots)}: {', '.join(parts)}",
        highlight=False,
        soft_wrap=True,
    )
    for c in s.checkpoints:
        r = c.report
        if r is None:
            styled(console, "bold red", "ERROR   ", f" {c.url}: cannot be audited: {c.error}")
            continue
        head, style = _SCAN_HEAD[c.status]
        v = r.verdict
        sev = [
            f"{k} {s_}{'' if k == 1 else 's'}"
            for s_ in ("error", "warning")
            if (k := sum(f.severity == s_ and f.rule_id not in ignore for f in r.findings))
        ]
        said = ""
        if c.status == "fails":
            said = f"{v.error.headline if v.error else ''} ({v.blocking_rule})"
        elif c.status == "unknown":
            said = f"cannot tell ({', '.join(dict.fromkeys(f.rule_id for f in r.findings if f.undecided))})"
        if n_ignored := sum(f.rule_id in ignore for f in r.findings):
            sev.append(f"{n_ignored} ignored")
        tail = "; ".join(x for x in (said, ", ".join(sev)) if x)
        if c.status == "wrong":
            silent = ", ".join(dict.fromkeys(f.rule_id for f in r.findings if f.silent and f.severity == "error"))
            tail = "; ".join(x for x in (f"restarts, silently wrong ({silent})", tail) if x)
        if v.restarts and v.assumptions:  # what "restarts" takes for granted (new-user trial 4: it was dropped)
            tail = "; ".join(x for x in (tail, f"assuming {'; '.join(v.assumptions)}") if x)
        styled(console, style, f"{head:<8}", f" {c.url}" + (f"  {tail}" if tail else ""))
    first = next((c for c in s.checkpoints if c.report is not None and c.status != "restarts"), None)
    if first is not None:
        command = f"ckptfix audit {shlex.quote(first.url)} --target-spark {s.target}" + (f" {flags}" if flags else "")
        console.print(f"the findings of one, in full: {command}", highlight=False, soft_wrap=True)


def inspection(i: Inspection, console: Console) -> None:
    styled(console, "bold", "checkpoint", f" {i.checkpoint}")
    console.print(f"query id: {i.query_id or '(unknown)'}", highlight=False)
    t = folding_table("setting", "value", title="recorded configuration", title_justify="left")
    for k, v in i.settings.items():
        t.add_row(k, "-" if v is None else str(v))
    console.print(t)
    logs = folding_table("log", "files", "first", "last", "gaps", "temp files", title="logs", title_justify="left")
    for name, s in (("offsets", i.offsets), ("commits", i.commits)):
        gaps = ", ".join(map(str, s.gaps[:8])) + (" ..." if len(s.gaps) > 8 else "")
        first, last = ("-" if v is None else str(v) for v in (s.first, s.last))
        logs.add_row(name, str(s.count), first, last, gaps or "-", str(s.temp_files))
    console.print(logs)
    last_committed = "none" if i.last_committed_batch is None else i.last_committed_batch
    console.print(f"last committed batch: {last_committed}", highlight=False)
    if i.sources:
        src = folding_table(
            "source", "committed offset", "planned offset", "source log", title="sources", title_justify="left"
        )
        for source in i.sources:
            log = "-" if source.log_entries is None else f"{source.log_entries} files, latest {source.log_latest}"
            src.add_row(source.id, source.committed_offset or "-", source.planned_offset or "-", log)
        console.print(src)
    if i.operators:
        ops = folding_table(
            "operator",
            "name",
            "provider",
            "partitions",
            "stores",
            "versions",
            "files",
            "bytes",
            title="state",
            title_justify="left",
        )
        for o in i.operators:
            vers = "; ".join(f"{k} {lo}..{hi}" for k, (lo, hi) in sorted(o.versions.items()))
            ops.add_row(
                str(o.id),
                o.name or "-",
                o.provider,
                str(o.partitions),
                ", ".join(o.stores),
                vers or "-",
                str(o.files),
                str(o.bytes),
            )
        console.print(ops)
    console.print(f"{i.total_files} files, {i.total_bytes} bytes", highlight=False)
    if i.batches is not None:
        hist = folding_table(
            "batch",
            "planned at (UTC)",
            "watermark",
            "committed at (UTC)",
            "source offsets",
            title="batches",
            title_justify="left",
        )
        for b in i.batches:
            committed = (b.committed_at or "yes") if b.committed else "no"
            if b.problem is not None:
                missing = b.problem.endswith(" is missing")
                hist.add_row(str(b.batch), "-", "-", committed, b.problem if missing else f"unreadable: {b.problem}")
                continue
            offsets = "; ".join(f"{sid}: {raw if raw is not None else '-'}" for sid, raw in b.offsets.items())
            watermark = "-" if b.watermark_ms is None else str(b.watermark_ms)
            hist.add_row(str(b.batch), b.started or "-", watermark, committed, offsets or "-")
        console.print(hist)
    for p in i.problems:
        styled(console, "yellow", "problem", f" {p}")


def undo_command(checkpoint: str, run_id: str, backup_dir: str | None = None, flags: str = "") -> str:
    """The undo that reverts run ``run_id`` (naming the backup directory when it is not the default one; ``flags``:
    the storage options, :func:`ckptfix.storage.command_flags`)."""
    backup = f" --backup-dir {shlex.quote(backup_dir)}" if backup_dir else ""
    return f"ckptfix undo {shlex.quote(checkpoint)} {run_id}{backup}{' ' + flags if flags else ''}"


def plan(
    p: Plan,
    unfixed: Sequence[Unfixed],
    console: Console,
    applied: str | None = None,
    backup_dir: str | None = None,
    flags: str = "",
) -> None:
    if p.empty:
        styled(console, "bold", "No changes planned.")
    else:
        styled(console, "bold", "Plan", f" for {p.checkpoint} (Spark {p.target_spark}): {p.fix}")
        grouped = False
        for line, many in plan_lines(p.actions):
            grouped = grouped or many
            console.print(f"  {line}", highlight=False, soft_wrap=True)
        if grouped:
            console.print("  (-f json or --plan-out list every file of a grouped line)", highlight=False)
        for e in p.effects:
            console.print(f"  afterwards: {e}", highlight=False, soft_wrap=True)
    for u in unfixed:
        styled(console, "yellow", "not fixed", f" {u}")
    shown = {str(u) for u in unfixed}
    for note in p.notes:
        if note not in shown:
            console.print(f"  note: {note}", highlight=False, soft_wrap=True)
    if applied:
        undo = undo_command(p.checkpoint, applied, backup_dir, flags)
        styled(console, "green", "applied", f" as run {applied}; `{undo}` restores it byte for byte")


#: a run of at least this many deletions in one directory for one reason is shown as one line
GROUP_AT = 4


def plan_lines(actions: Sequence[Any]) -> list[tuple[str, bool]]:
    """The plan's actions as the text shows them, numbered in plan order, with whether a line stands for a
    group: a Hadoop sidecar written or deleted along with its file joins that file's line ("and its .crc"), and a
    run of :data:`GROUP_AT` or more deletions in one directory for the same reason (a provider's old files, a
    rollback's log entries) is one line naming them by kind and version."""
    # (first index, actions) per line: an action and the sidecars that follow it
    units: list[tuple[int, list[Any]]] = []
    for i, a in enumerate(actions, 1):
        last = units[-1][1] if units else []
        if a.sidecar_of and last and last[0].path == a.sidecar_of and last[0].op == a.op:
            last.append(a)
        else:
            units.append((i, [a]))
    lines: list[tuple[str, bool]] = []
    at = 0
    while at < len(units):
        first, unit = units[at]
        end = at + 1

        def key(u: list[Any]) -> tuple[Any, ...]:
            a = u[0]
            return (a.op, a.path.rsplit("/", 1)[0] if "/" in a.path else "", a.reason, a.rule, len(u) > 1)

        if unit[0].op == "delete":
            while end < len(units) and key(units[end][1]) == key(unit):
                end += 1
        if end - at >= GROUP_AT:
            group = [u for _, u in units[at:end]]
            last_index = units[end - 1][0] + len(units[end - 1][1]) - 1
            main = [u[0] for u in group]
            size = sum(a.before.size or 0 for u in group for a in u)
            folder = key(unit)[1]
            crcs = " and their .crc sidecars" if len(unit) > 1 else ""
            why = f" - {unit[0].reason}" if unit[0].reason else ""
            rule = f" [{unit[0].rule}]" if unit[0].rule else ""
            lines.append(
                (
                    f"{first}-{last_index}. delete {len(main)} files in {folder or '.'}/{crcs} "
                    f"({_file_names(a.path for a in main)}; {size:,} bytes){why}{rule}",
                    True,
                )
            )
        else:
            for first, unit in units[at:end]:
                a = unit[0]
                also = " and its .crc" if len(unit) > 1 else ""
                why = f" - {a.reason}" if a.reason else ""
                rule = f" [{a.rule}]" if a.rule else ""
                lines.append((f"{first}. {a.describe()}{also}{why}{rule}", False))
        at = end
    return lines


def _file_names(paths: Any) -> str:
    """File names by kind: ``changelog 1..12, zip 3,6,9,12``; other names listed (the first three), or counted
    when they share an extension (``4 .sst files``)."""
    from ckptfix.checkpoint import id_ranges

    versions: dict[str, list[int]] = {}
    other: list[str] = []
    for path in paths:
        name = path.rsplit("/", 1)[-1]
        stem, dot, kind = name.partition(".")
        if stem.isdigit() and dot:
            versions.setdefault(kind, []).append(int(stem))
        elif not stem and dot:  # a log entry without extension: offsets/7
            other.append(name)
        elif name.isdigit():
            versions.setdefault("", []).append(int(name))
        else:
            other.append(name)
    parts = [f"{kind + ' ' if kind else ''}{id_ranges(sorted(ids))}" for kind, ids in sorted(versions.items())]
    kinds = {name.rpartition(".")[2] for name in other}
    if len(other) > 2 and len(kinds) == 1 and "." in other[0]:  # the SSTs of a store: their names say little
        parts.append(f"{len(other)} .{kinds.pop()} files")
    elif other:
        parts.append(", ".join(other[:3]) + (f" and {len(other) - 3} more" if len(other) > 3 else ""))
    return ", ".join(parts)


def runs(items: list[RunInfo], console: Console) -> None:
    if not items:
        console.print("no ckptfix runs recorded for this checkpoint", highlight=False)
        return
    t = folding_table(
        "run",
        "created (UTC)",
        "status",
        "actions",
        "fix",
        whole=("run", "created (UTC)", "status"),
        title="ckptfix runs",
        title_justify="left",
    )
    for r in items:
        created = r.created_at[:19] if r.created_at.endswith("+00:00") else r.created_at
        t.add_row(r.run_id, created, r.status, str(r.actions), r.fix)
    console.print(t)


def offsets_export(result: OffsetsExport, console: Console) -> None:
    def say(line: str) -> None:
        console.print(line, highlight=False, markup=False, soft_wrap=True)

    say(f"Offsets of committed batch {result.batch} in {result.checkpoint}")
    for s in result.sources:
        raw = compact(s.offset)
        say(f"source {s.source}: {s.kind}")
        if s.kind == "none":
            say(f"  {s.note}")
            continue
        for key, value in s.options.items():
            say(f"  option {key} = {value}")
        if s.processed_files is not None:
            say(
                f"  offset {raw}: {len(s.processed_files)} files already processed "
                f"(newest timestamp {s.newest_processed_timestamp_ms} ms):"
            )
            for path in s.processed_files:
                say(f"    {path}")
        elif not s.options:
            say(f"  offset {raw}")
        say(f"  note: {s.note}")


def _lines(console: Console) -> Any:
    return lambda s: console.print(s, highlight=False, markup=False, soft_wrap=True)


def rules(items: Any, console: Console) -> None:
    """``ckptfix rules``: id, severity and title, what the rule means, its fix."""
    for r in items:
        styled(console, "bold", r.id, f" ({r.severity}) {r.title}")
        console.print(f"  {r.docs}", highlight=False, soft_wrap=True)
        console.print(f"  fix: {r.fix}", highlight=False, soft_wrap=True)


def state_listing(listing: Any, console: Console) -> None:
    """``ckptfix state ls``: operators, stores, partitions and the versions each can load."""
    say = _lines(console)
    last = listing.last_committed_batch
    say(f"State of {listing.checkpoint} ({'no committed batch' if last is None else f'last committed batch {last}'})")
    if listing.operators and not listing.verified:
        say("  loadable: the files each version needs are there (by name); --verify reads and checks them")
    if not listing.operators:
        say("  no state (a stateless query, or state/ is gone)")
    for op in listing.operators:
        name = f" {op.name}" if op.name else ""
        stores = ", ".join(op.stores)
        say(f"operator {op.operator}{name}: {op.provider}, {op.num_partitions} partitions, stores {stores}")
        if op.state_variables:
            say(f"  column families: {', '.join(op.state_variables)}")
        for s in op.schemas:
            j = s.to_json()
            if s.problem is not None:
                say(f"  schema {s.store}: none readable: {s.problem}")
            else:
                say(f"  schema {s.store}: key {j['key']}, value {j['value']} (from {s.source})")
        for p in op.partitions:
            store = "" if p.store == "default" else f" {p.store}"
            state = f"version {p.target}: {p.chain}" if p.problem is None else f"CANNOT LOAD: {p.problem}"
            say(f"  partition {p.partition}{store}: loadable {p.to_json()['loadable'] or 'none'}; {state}")
            if p.older:
                label = "versions" if "-" in p.older else "version"
                say(
                    f"    {label} {p.older}: no files (cleaned up by Spark's retention or a ckptfix migration, or "
                    "the partition is newer)"
                )
            for span, path in p.unloadable.items():
                label = "versions" if "-" in span else "version"
                say(f"    {label} {span} cannot load: {path} is missing")
            for span, why in p.broken.items():
                label = "versions" if "-" in span else "version"
                say(f"    {label} {span} cannot load: {why}")


def relocation(doc: dict[str, Any], applied: bool, console: Console) -> None:
    """``ckptfix migrate relocate``: what is copied and rewritten, and (applied) what was done."""
    p = doc["plan"]
    say = _lines(console)
    say(f"relocate {p['source']} -> {p['dest']}" + ("  (resuming an interrupted relocation)" if p["resume"] else ""))
    say(f"  copy {p['files']} files, {p['bytes']:,} bytes")
    data = [r for r in p["rewrites"] if r["changes"]]
    sidecars = len(p["rewrites"]) - len(data)
    if not data:
        also = " or the input's" if p["input_from"] else ""
        say(f"  rewrite nothing: no file holds the checkpoint's location{also}")
    for r in data:
        say(f"  rewrite {r['path']}: {r['reason']}")
        for old, new in r["changes"][:3]:
            say(f"      {old}\n   -> {new}")
        if len(r["changes"]) > 3:
            say(f"      ... {len(r['changes']) - 3} more")
    if sidecars:
        say(f"  regenerate {sidecars} checksum sidecars of rewritten files")
    for w in p["warnings"]:
        say(f"  warning: {w}")
    if p["dest_uri"].startswith("s3://"):  # new-user trial 3: open-source Spark has no s3:// file system
        say(
            "  note: open-source Spark reads S3 as s3a:// (s3:// is EMR's): give DEST as s3a://... for it, so that "
            "the rewritten paths and the checkpointLocation to restart with name the scheme it reads"
        )
    if applied:
        say(
            f"done: {doc['files_copied']} copied, {doc['files_rewritten']} rewritten, "
            f"{doc['files_already_there']} already there, {doc['bytes_copied']:,} bytes in {doc['seconds']:.1f} s; "
            f"restart the query with checkpointLocation={p['dest_uri']}"
        )


def async_off(outcome: Any, console: Console) -> None:
    """``ckptfix async-off``: the steps a dry run would take, or how the run ended."""
    say = _lines(console)
    if outcome.status == "planned":
        say("dry run: nothing was started. With --apply ckptfix would:")
        steps: list[str] = next((list(e.data["steps"]) for e in outcome.events if e.data.get("steps")), [])
        for i, s in enumerate(steps, 2):
            say(f"  {i}. {s}")
    else:
        say(f"async-off {outcome.status} (run {outcome.run_id})")
        if outcome.new_batches:
            say(f"new batches: {', '.join(map(str, outcome.new_batches))}")
    if not outcome.ok and outcome.offline:
        say(f"offline alternative: {outcome.offline}")
