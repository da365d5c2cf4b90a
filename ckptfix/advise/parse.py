"""Read StreamingQueryProgress events from bytes: pure, no IO.

Accepted input (detected per file):

* ``json-document``: one progress object (``query.lastProgress``, ``prettyJson``), or a Spark event-log
  style wrapper ``{"progress": {...}}``;
* ``json-array``: a JSON array of progress objects (``query.recentProgress``);
* ``json-lines``: one progress object per line (``progress.json`` of a listener, ``StreamingQueryProgress.json``,
  or the ``repr`` of the dict PySpark 3.5's ``lastProgress`` returns); lines that are JSON objects of other Spark
  listener events (``"Event": ...``, a Spark event log) count as other lines;
* ``json-sequence``: pretty JSON documents one after another (``prettyJson`` appended per batch);
* any of these gzip-compressed (rolled driver logs);
* ``driver-log``: any text containing ``Streaming query made progress: `` -- Spark logs
  ``"Streaming query made progress: " + progress`` at INFO, and ``toString`` is ``prettyJson``, so the JSON
  spans many lines after the marker (logger ``MicroBatchExecution`` in 3.5, ``ProgressReporter`` in 4.x; any
  log4j prefix before the marker is fine). Structured (JSON) log lines whose ``msg`` holds the marker work too.

What is an error and what is skipped (see README):

* empty file, undecodable JSON document (e.g. truncated), a JSON value that is no progress event, or a file
  in which nothing is a progress event: ``FormatError`` (the CLI exits 2);
* in json-lines / json-array input, an element that is not a progress event; in a driver log, a progress
  block whose JSON is truncated or invalid: a ``Skipped`` entry (file, line, expected, found), counted and
  shown as a warning;
* in a driver log, lines that are not part of a progress block: counted as ``other_lines`` (a log has many).
"""

from __future__ import annotations

import ast
import gzip
import json
from typing import Any

from ckptfix.advise.model import InputSummary, Origin, Parsed, ProgressEvent, Skipped, StateOp, _int
from ckptfix.errors import FormatError

MARKER = "Streaming query made progress: "
GZIP_MAGIC = b"\x1f\x8b"
EXPECTED_EVENT = "a StreamingQueryProgress JSON object (id, runId, batchId, durationMs)"
EXPECTED_INPUT = (
    "StreamingQueryProgress events (a JSON document, a JSON array, JSON lines, "
    "or a driver log with 'Streaming query made progress:' lines)"
)


class NotProgress(ValueError):
    """A JSON value that is not a StreamingQueryProgress; the message says what was found."""


def _snippet(text: str, limit: int = 60) -> str:
    text = text.strip()
    if len(text) > limit:
        text = text[:limit] + "..."
    return repr(text)


def _describe(value: Any) -> str:
    if isinstance(value, dict):
        keys = ", ".join(list(value)[:5])
        return f"a JSON object with keys {{{keys}}}" if value else "an empty JSON object"
    if isinstance(value, list):
        return f"a JSON array of {len(value)} elements"
    return f"a JSON {type(value).__name__} {_snippet(json.dumps(value), 30)}"


def event_from_json(obj: Any, origin: Origin) -> ProgressEvent:
    """One progress object -> ProgressEvent; ``NotProgress`` when required fields are missing or mistyped."""
    if isinstance(obj, dict) and "progress" in obj and isinstance(obj["progress"], dict):
        obj = obj["progress"]  # event-log QueryProgressEvent wrapper
    if not isinstance(obj, dict):
        raise NotProgress(_describe(obj))
    missing = [k for k in ("id", "runId", "batchId", "durationMs") if k not in obj]
    if missing:
        raise NotProgress(f"{_describe(obj)} (missing {', '.join(missing)})")
    batch_id = _int(obj["batchId"])
    if batch_id is None or not isinstance(obj["id"], str) or not isinstance(obj["runId"], str):
        raise NotProgress(f"id/runId/batchId of the wrong type ({_snippet(json.dumps(obj)[:200], 50)})")
    dms = obj["durationMs"]
    if not isinstance(dms, dict):
        raise NotProgress(f"durationMs is {_describe(dms)}")
    durations = {str(k): v for k, v in ((k, _int(v)) for k, v in dms.items()) if v is not None}
    ops_raw = obj.get("stateOperators") or []
    if not isinstance(ops_raw, list):
        raise NotProgress(f"stateOperators is {_describe(ops_raw)}")
    ops = []
    for op in ops_raw:
        if not isinstance(op, dict):
            raise NotProgress(f"a stateOperators entry is {_describe(op)}")
        custom_raw = op.get("customMetrics") or {}
        custom = (
            {str(k): v for k, v in ((k, _int(v)) for k, v in custom_raw.items()) if v is not None}
            if isinstance(custom_raw, dict)
            else {}
        )
        ops.append(
            StateOp(
                name=str(op.get("operatorName", "?")),
                commit_ms=_int(op.get("commitTimeMs")),
                partitions=_int(op.get("numShufflePartitions")),
                instances=_int(op.get("numStateStoreInstances")),
                rows_total=_int(op.get("numRowsTotal")),
                rows_updated=_int(op.get("numRowsUpdated")),
                memory_bytes=_int(op.get("memoryUsedBytes")),
                update_ms=_int(op.get("allUpdatesTimeMs")),
                removal_ms=_int(op.get("allRemovalsTimeMs")),
                custom=custom,
            )
        )
    name = obj.get("name")
    return ProgressEvent(
        query_id=obj["id"],
        run_id=obj["runId"],
        name=name if isinstance(name, str) else None,
        timestamp=str(obj.get("timestamp", "")),
        batch_id=batch_id,
        batch_duration=_int(obj.get("batchDuration")),
        duration_ms=durations,
        state_ops=tuple(ops),
        num_input_rows=_int(obj.get("numInputRows")),
        origin=origin,
    )


def _byte_offset(text: str, char_pos: int) -> int:
    return len(text[:char_pos].encode("utf-8", errors="surrogateescape"))


def parse(data: bytes, path: str) -> Parsed:
    """Every progress event in one file, plus what was skipped. Raises FormatError for unusable input."""
    if data[:2] == GZIP_MAGIC:  # rolled driver logs are often gzipped
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as exc:
            raise FormatError(path, 0, "a complete gzip stream", f"a damaged one ({exc})", kind="bad-gzip") from None
    text = data.decode("utf-8", errors="replace")
    if not text.strip():
        raise FormatError(path, 0, EXPECTED_INPUT, "an empty file" if not data else "only whitespace", kind="empty")
    if MARKER in text:
        return _parse_log(text, path)
    head = text.lstrip()
    if head[:1] in ("{", "["):
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            first = next(line for line in text.splitlines() if line.strip())
            if not (head.startswith("{") and _is_json_object(first)):
                return _parse_sequence(text, path, exc)
        else:
            return _parse_document(doc, text, path)
    return _parse_lines(text, path)


def _parse_sequence(text: str, path: str, first_error: json.JSONDecodeError) -> Parsed:
    """Pretty JSON documents one after the other (e.g. ``prettyJson`` appended per batch); else the JSON error."""
    decoder = json.JSONDecoder()
    docs: list[tuple[int, object]] = []
    pos = len(text) - len(text.lstrip())
    exc = first_error
    start = pos
    while pos < len(text):
        start = pos
        try:
            doc, end = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as e:
            exc = e
            docs = []
            break
        docs.append((text.count("\n", 0, pos) + 1, doc))
        pos = end + (len(text[end:]) - len(text[end:].lstrip()))
    if len(docs) < 2:
        # truncated: the document that failed never closes its braces before the end of the file
        at_end = exc.pos >= len(text.rstrip()) or _Scanner().feed(text[start:]) is None
        raise FormatError(
            path,
            len(text.encode("utf-8", errors="surrogateescape")) if at_end else _byte_offset(text, exc.pos),
            "a complete JSON document" if at_end else "valid JSON",
            ("the end of the file (truncated JSON)" if at_end else f"{exc.msg} at line {exc.lineno}"),
            kind="truncated-json" if at_end else "invalid-json",
        )
    events: list[ProgressEvent] = []
    skipped: list[Skipped] = []
    for line_no, doc in docs:
        try:
            events.append(event_from_json(doc, Origin(path, line=line_no)))
        except NotProgress as err:
            skipped.append(Skipped(path, f"line {line_no}", EXPECTED_EVENT, str(err)))
    if not events:
        raise FormatError(
            path, 0, EXPECTED_INPUT, f"no progress event among {len(docs)} JSON documents", kind="no-progress"
        )
    return Parsed(events, skipped, InputSummary(path, "json-sequence", len(events), len(skipped), 0))


def _loads_line(line: str) -> Any:
    """JSON, or the repr of a Python dict (``print(query.lastProgress)`` in PySpark 3.5 prints a dict)."""
    try:
        return json.loads(line)
    except ValueError:
        if not line.lstrip().startswith("{'"):
            raise
        try:
            return ast.literal_eval(line.strip())  # literals only: safe
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            raise ValueError("not a Python literal") from None


def _is_json_object(line: str) -> bool:
    try:
        return isinstance(_loads_line(line), dict)
    except ValueError:
        return False


def _parse_document(doc: Any, text: str, path: str) -> Parsed:
    if isinstance(doc, list):
        events: list[ProgressEvent] = []
        skipped: list[Skipped] = []
        for i, item in enumerate(doc):
            try:
                events.append(event_from_json(item, Origin(path, element=i)))
            except NotProgress as exc:
                skipped.append(Skipped(path, f"element {i}", EXPECTED_EVENT, str(exc)))
        if not events:
            found = "an empty JSON array" if not doc else f"no progress event among {len(doc)} elements ({skipped[0]})"
            raise FormatError(path, 0, "a JSON array of StreamingQueryProgress objects", found, kind="no-progress")
        return Parsed(events, skipped, InputSummary(path, "json-array", len(events), len(skipped), 0))
    try:
        event = event_from_json(doc, Origin(path, line=1))
    except NotProgress as exc:
        raise FormatError(path, 0, EXPECTED_EVENT, str(exc), kind="not-progress") from None
    return Parsed([event], [], InputSummary(path, "json-document", 1, 0, 0))


def _parse_lines(text: str, path: str) -> Parsed:
    events: list[ProgressEvent] = []
    skipped: list[Skipped] = []
    other = 0
    first_problem: tuple[int, Skipped] | None = None
    offset = 0
    for n, line in enumerate(text.splitlines(keepends=True), start=1):
        start = offset
        offset += len(line.encode("utf-8", errors="surrogateescape"))
        if not line.strip():
            continue
        problem: str
        try:
            obj = _loads_line(line)
        except ValueError:
            problem = f"text that is not JSON: {_snippet(line)}"
        else:
            if isinstance(obj, dict) and "Event" in obj and "progress" not in obj:
                other += 1  # another Spark listener event (event log)
                continue
            try:
                events.append(event_from_json(obj, Origin(path, line=n)))
                continue
            except NotProgress as exc:
                problem = str(exc)
        s = Skipped(path, f"line {n}", EXPECTED_EVENT, problem)
        skipped.append(s)
        if first_problem is None:
            first_problem = (start, s)
    if not events:
        assert first_problem is not None or other
        if first_problem is None:
            raise FormatError(
                path, 0, EXPECTED_INPUT, f"{other} Spark listener events, none a progress event", kind="no-progress"
            )
        start, s = first_problem
        raise FormatError(path, start, EXPECTED_INPUT, f"no progress event; {s.where}: {s.found}", kind="no-progress")
    return Parsed(events, skipped, InputSummary(path, "json-lines", len(events), len(skipped), other))


class _Scanner:
    """Brace depth of a JSON text fed piece by piece (strings and escapes respected)."""

    def __init__(self) -> None:
        self.depth = 0
        self.in_str = False
        self.esc = False
        self.started = False

    def feed(self, s: str) -> int | None:
        """Index just past the closing brace of the top-level object, if it closes in ``s``."""
        for i, ch in enumerate(s):
            if self.in_str:
                if self.esc:
                    self.esc = False
                elif ch == "\\":
                    self.esc = True
                elif ch == '"':
                    self.in_str = False
            elif ch == '"':
                self.in_str = True
            elif ch in "{[":
                self.depth += 1
                self.started = True
            elif ch in "}]":
                self.depth -= 1
                if self.started and self.depth == 0:
                    return i + 1
        return None


def _parse_log(text: str, path: str) -> Parsed:
    events: list[ProgressEvent] = []
    skipped: list[Skipped] = []
    other = 0
    lines = text.splitlines()
    expected_block = "the JSON object after 'Streaming query made progress:' to be complete"

    def take(js: str, line_no: int) -> None:
        try:
            obj = json.loads(js)
        except ValueError as exc:
            skipped.append(Skipped(path, f"line {line_no}", expected_block, f"invalid JSON ({exc})"))
            return
        try:
            events.append(event_from_json(obj, Origin(path, line=line_no)))
        except NotProgress as exc:
            skipped.append(Skipped(path, f"line {line_no}", EXPECTED_EVENT, str(exc)))

    i = 0
    while i < len(lines):
        line = lines[i]
        n = i + 1
        i += 1
        if MARKER not in line:
            other += 1
            continue
        if line.lstrip().startswith("{") and _structured_msg(line) is not None:
            take(_structured_msg(line) or "", n)
            continue
        rest = line.split(MARKER, 1)[1]
        if not rest.lstrip().startswith("{"):
            skipped.append(Skipped(path, f"line {n}", "a JSON object after the marker", _snippet(rest)))
            continue
        scanner = _Scanner()
        buf = [rest]
        end = scanner.feed(rest)
        while end is None and i < len(lines):
            nxt = lines[i]
            if nxt[:1] and not nxt[:1].isspace() and nxt[:1] not in "}]":
                break  # a new log line began before the JSON closed
            buf.append(nxt)
            i += 1
            end = scanner.feed(nxt)
        if end is None:
            found = f"a new log line at line {i + 1}" if i < len(lines) else "the end of the file"
            skipped.append(Skipped(path, f"line {n}", expected_block + " (truncated)", found))
            continue
        buf[-1] = buf[-1][:end]
        take("\n".join(buf), n)
    if not events:
        if skipped:
            s = skipped[0]
            raise FormatError(
                path, 0, EXPECTED_INPUT, f"no readable progress event; {s.where}: {s.found}", kind="no-progress"
            )
        raise FormatError(path, 0, EXPECTED_INPUT, "no progress event", kind="no-progress")
    return Parsed(events, skipped, InputSummary(path, "driver-log", len(events), len(skipped), other))


def _structured_msg(line: str) -> str | None:
    """The JSON after the marker in a structured (JSON layout) log line, if ``line`` is one."""
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    for key in ("msg", "message"):
        msg = obj.get(key)
        if isinstance(msg, str) and MARKER in msg:
            return msg.split(MARKER, 1)[1]
    return None


def merge(parsed: list[Parsed]) -> tuple[list[ProgressEvent], int]:
    """All events of several files, de-duplicated by (id, runId, batchId, timestamp); returns (events, duplicates)."""
    seen: set[tuple[str, str, int, str]] = set()
    out: list[ProgressEvent] = []
    dups = 0
    for p in parsed:
        for e in p.events:
            if e.key() in seen:
                dups += 1
                continue
            seen.add(e.key())
            out.append(e)
    return out, dups
