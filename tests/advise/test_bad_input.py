"""Bad input: one clear line (or one JSON document) and exit 2, or a warning with file:line and a count."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.advise.helpers import FIXTURES, progress_event, run, write_json

REAL_JSONL = FIXTURES / "spark-4.3.0" / "agg_rocksdb" / "progress.jsonl"
REAL_LOG = FIXTURES / "spark-4.3.0" / "driver.log"


def one_error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("ckptfix: error: ")
    assert "Traceback" not in stderr
    return lines[0]


def test_garbage_lines_in_json_lines(tmp_path: Path) -> None:
    real = REAL_JSONL.read_text().splitlines()
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join([real[0], "this is not json", real[1], '{"hello": 1}', "", real[2], "[1, 2"]) + "\n")
    code, stdout, stderr = run(str(path))
    assert code == 0, stderr
    assert "3 progress events, 3 skipped" in stderr
    assert f"skipped {path}: line 2: expected a StreamingQueryProgress JSON object" in stderr
    assert "text that is not JSON: 'this is not json'" in stderr
    assert f"{path}: line 4:" in stderr and "missing id, runId, batchId, durationMs" in stderr
    assert f"{path}: line 7:" in stderr
    code, stdout, _ = run(str(path), "--format", "json")
    doc = json.loads(stdout)
    assert [s["where"] for s in doc["skipped"]] == ["line 2", "line 4", "line 7"]
    assert doc["inputs"][0]["events"] == 3 and doc["inputs"][0]["skipped"] == 3
    # --strict turns the skipped lines into an error
    code, stdout, stderr = run(str(path), "--strict")
    assert code == 2 and "3 input lines skipped" in one_error_line(stderr)


def test_all_garbage(tmp_path: Path) -> None:
    path = tmp_path / "garbage.txt"
    path.write_text("hello\nworld\n")
    code, stdout, stderr = run(str(path))
    assert code == 2 and stdout == ""
    line = one_error_line(stderr)
    assert str(path) in line and "at byte 0" in line and "no progress event; line 1" in line
    code, stdout, stderr = run(str(path), "--format", "json")
    assert code == 2
    err = json.loads(stdout)["error"]
    assert err["kind"] == "FormatError" and str(path) in err["message"]


def test_empty_and_whitespace(tmp_path: Path) -> None:
    empty = tmp_path / "empty.json"
    empty.write_bytes(b"")
    code, _, stderr = run(str(empty))
    assert code == 2 and "found an empty file" in one_error_line(stderr)
    blank = tmp_path / "blank.json"
    blank.write_text("\n \n")
    code, _, stderr = run(str(blank))
    assert code == 2 and "found only whitespace" in one_error_line(stderr)


def test_missing_file(tmp_path: Path) -> None:
    code, stdout, stderr = run(str(tmp_path / "nope.json"))
    assert code == 2 and "no such file" in one_error_line(stderr)
    code, stdout, _ = run(str(tmp_path / "nope.json"), "--format", "json")
    assert code == 2 and json.loads(stdout)["error"]["kind"] == "FileNotFoundError"


def test_truncated_document(tmp_path: Path) -> None:
    full = json.dumps(progress_event(), indent=2)
    path = tmp_path / "cut.json"
    path.write_text(full[:700])
    code, _, stderr = run(str(path))
    line = one_error_line(stderr)
    assert code == 2
    assert f"{path}: at byte 700: expected a complete JSON document, found the end of the file (truncated JSON)" in line


def test_invalid_json_document(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{\n  "id" : "x",\n  "runId" : oops\n}\n')
    code, _, stderr = run(str(path))
    line = one_error_line(stderr)
    # '{\n' is 2 bytes, '  "id" : "x",\n' 14, '  "runId" : ' 12: the 'o' of oops is byte 28
    assert code == 2 and "at byte 28: expected valid JSON" in line


@pytest.mark.parametrize(
    ("content", "found"),
    [
        ("42\n", "a JSON int '42'"),
        ('"text"\n', None),
        ('{"spark_version": "4.3.0"}\n', "missing id, runId, batchId, durationMs"),
        ("[]\n", "an empty JSON array"),
        ('[{"a": 1}, 2]\n', "no progress event among 2 elements"),
        ('{"id": "a", "runId": "b", "batchId": "zero", "durationMs": {}}\n', "of the wrong type"),
    ],
)
def test_wrong_type(tmp_path: Path, content: str, found: str | None) -> None:
    path = tmp_path / "wrong.json"
    path.write_text(content)
    code, stdout, stderr = run(str(path))
    assert code == 2 and stdout == ""
    line = one_error_line(stderr)
    assert str(path) in line
    if found:
        assert found in line


def test_truncated_block_in_driver_log(tmp_path: Path) -> None:
    """A real driver log whose third progress block is cut off by the next log line (a crashed write)."""
    lines = REAL_LOG.read_text().splitlines()
    starts = [i for i, line in enumerate(lines) if "Streaming query made progress: {" in line]
    third = starts[2]
    damaged = lines[: third + 5] + ["26/11/22 23:24:09 INFO SomeOther: the driver went on"] + lines[third + 5 :]
    # the rest of the cut block now is stray indented text: harmless other lines
    path = tmp_path / "driver.log"
    path.write_text("\n".join(damaged) + "\n")
    code, stdout, stderr = run(str(path), "--format", "json")
    assert code == 0
    doc = json.loads(stdout)
    assert doc["inputs"][0]["events"] == len(starts) - 1
    (sk,) = doc["skipped"]
    assert sk["where"] == f"line {third + 1}"
    assert sk["found"] == f"a new log line at line {third + 6}"
    code, _, stderr = run(str(path))
    assert f"skipped {path}: line {third + 1}: expected the JSON object after" in stderr


def test_log_ending_inside_block(tmp_path: Path) -> None:
    text = REAL_LOG.read_text()
    cut = text.rindex('"stateOperators"')
    path = tmp_path / "driver.log"
    path.write_text(text[:cut])
    code, stdout, _ = run(str(path), "--format", "json")
    assert code == 0
    (sk,) = json.loads(stdout)["skipped"]
    assert sk["found"] == "the end of the file"


def test_log_with_only_a_broken_block(tmp_path: Path) -> None:
    path = tmp_path / "driver.log"
    path.write_text('26/11/22 23:24:06 INFO ProgressReporter: Streaming query made progress: {\n  "id" : "x",\n')
    code, _, stderr = run(str(path))
    assert code == 2
    assert "no readable progress event; line 1" in one_error_line(stderr)


def test_structured_log_and_event_log(tmp_path: Path) -> None:
    """A JSON-layout log line carrying the marker in msg, and Spark event-log QueryProgressEvent lines."""
    ev = progress_event()
    structured = tmp_path / "structured.log"
    structured.write_text(
        json.dumps({"ts": "2026-01-01T00:00:00Z", "level": "INFO", "msg": "Starting query"})
        + "\n"
        + json.dumps({"level": "INFO", "msg": "Streaming query made progress: " + json.dumps(ev, indent=2)})
        + "\n"
    )
    code, stdout, stderr = run(str(structured), "--format", "json")
    assert code == 0, stderr
    assert json.loads(stdout)["queries"][0]["batches"][0]["batch_ms"] == 547730
    eventlog = tmp_path / "events.jsonl"
    eventlog.write_text(
        json.dumps({"Event": "SparkListenerJobStart", "Job ID": 1})
        + "\n"
        + json.dumps(
            {"Event": "org.apache.spark.sql.streaming.StreamingQueryListener$QueryProgressEvent", "progress": ev}
        )
        + "\n"
    )
    code, stdout, stderr = run(str(eventlog), "--format", "json")
    assert code == 0, stderr
    doc = json.loads(stdout)
    assert doc["inputs"][0]["other_lines"] == 1 and doc["inputs"][0]["events"] == 1


def test_bad_concurrency(tmp_path: Path) -> None:
    path = write_json(tmp_path / "p.json", progress_event())
    code, _, stderr = run(str(path), "--concurrency", "0")
    assert code == 2 and "Traceback" not in stderr


def test_gzipped_driver_log(tmp_path: Path) -> None:
    import gzip

    path = tmp_path / "driver.log.gz"
    path.write_bytes(gzip.compress(REAL_LOG.read_bytes()))
    code, stdout, stderr = run(str(path), "--format", "json")
    assert code == 0, stderr
    assert json.loads(stdout)["inputs"][0]["events"] == 9
    damaged = tmp_path / "cut.log.gz"
    damaged.write_bytes(path.read_bytes()[:200])
    code, _, stderr = run(str(damaged))
    assert code == 2 and "expected a complete gzip stream" in one_error_line(stderr)


def test_pretty_documents_one_after_another(tmp_path: Path) -> None:
    """prettyJson appended once per batch: a sequence of multi-line documents."""
    docs = [json.dumps(progress_event(batch_id=i), indent=2) for i in range(3)]
    path = tmp_path / "appended.json"
    path.write_text("\n".join(docs) + "\n")
    code, stdout, stderr = run(str(path), "--format", "json")
    assert code == 0, stderr
    doc = json.loads(stdout)
    assert doc["inputs"][0]["kind"] == "json-sequence"
    assert [b["batch_id"] for b in doc["queries"][0]["batches"]] == [0, 1, 2]
    # lines where each document starts: 1, then after each document's own lines
    first_len = docs[0].count("\n") + 1
    assert [b["origin"] for b in doc["queries"][0]["batches"]][:2] == [f"{path}:1", f"{path}:{first_len + 1}"]
    # the last one cut: a clear error at the byte where the text ends
    cut = "\n".join(docs)[:-40]
    path.write_text(cut)
    code, _, stderr = run(str(path))
    line = one_error_line(stderr)
    assert code == 2 and f"at byte {len(cut.encode())}" in line and "truncated JSON" in line


def test_python_dict_repr_lines(tmp_path: Path) -> None:
    """print(query.lastProgress) under PySpark 3.5 prints the repr of a dict, one per line."""
    path = tmp_path / "printed.txt"
    path.write_text("".join(repr(progress_event(batch_id=i)) + "\n" for i in range(2)) + "{'not': 'closed'\n")
    code, stdout, stderr = run(str(path), "--format", "json")
    assert code == 0, stderr
    doc = json.loads(stdout)
    assert doc["inputs"][0]["events"] == 2
    assert [s["where"] for s in doc["skipped"]] == ["line 3"]
