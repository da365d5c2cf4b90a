"""Numbers and text no Spark log holds (issue 16 #1), written into real log files Spark wrote
(samples/async-sparse). What Spark 4.3 makes of each is recorded live by the damage cases
(tests/spark/damage.py, commit_latest_watermark_* and *_version_huge): the NaN/Infinity literals, a number token
longer than 1,000 characters, a version line beyond a Java int, a string or a boolean watermark fail; a double
that overflows (1e999) saturates, a fraction truncates, an integer beyond 64 bits wraps, and Spark restarts.
Here: the failing ones are FormatErrors from the parsers; the accepted ones parse to the value Spark uses; none
ends in an internal error (exit 3) in any command, including the `repair` that fixes the file; a lone surrogate
prints escaped in a whole report."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from ckptfix.errors import FormatError
from ckptfix.formats import commitlog, metadata, offsetlog
from tests.support.cli import run_cli

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "samples" / "async-sparse"
HUGE = "9" * 5000

# (file, old text, new text)
MUTATIONS = {
    "commit-infinity": ("commits/31", '"nextBatchWatermarkMs":0', '"nextBatchWatermarkMs":Infinity'),
    "commit-nan": ("commits/31", '"nextBatchWatermarkMs":0', '"nextBatchWatermarkMs":NaN'),
    "commit-huge-int": ("commits/31", '"nextBatchWatermarkMs":0', f'"nextBatchWatermarkMs":{HUGE}'),
    "commit-huge-version": ("commits/31", "v1\n", f"v{HUGE}\n"),
    "offset-huge-watermark": ("offsets/31", '"batchWatermarkMs":0', f'"batchWatermarkMs":{HUGE}'),
    "offset-huge-version": ("offsets/31", "v1\n", f"v{HUGE}\n"),
    "offset-version-over-int": ("offsets/31", "v1\n", "v2147483648\n"),
    "metadata-nan-field": ("metadata", "{", '{"x":NaN,'),
    "commit-string": ("commits/31", '"nextBatchWatermarkMs":0', '"nextBatchWatermarkMs":"0"'),
    "commit-bool": ("commits/31", '"nextBatchWatermarkMs":0', '"nextBatchWatermarkMs":true'),
}
PARSERS = {"commits": commitlog.parse, "offsets": offsetlog.parse, "metadata": metadata.parse}


def mutate(dest: Path, name: str) -> Path:
    rel, old, new = MUTATIONS[name]
    shutil.copytree(SAMPLE, dest)
    path = dest / rel
    text = path.read_text()
    assert old in text, (rel, old)
    path.write_text(text.replace(old, new, 1))
    crc = path.parent / f".{path.name}.crc"
    crc.unlink(missing_ok=True)
    return path


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_parsers_raise_format_error(tmp_path: Path, name: str) -> None:
    path = mutate(tmp_path / "ckpt", name)
    parse = PARSERS[MUTATIONS[name][0].split("/")[0]]
    with pytest.raises(FormatError) as info:
        parse(path.read_bytes(), str(path))
    assert str(path) in str(info.value)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, cwd=ROOT)


ACCEPTED = {  # (file, old, new) -> the value Spark reads (json4s' Long extraction)
    "inf": ("commits/31", '"nextBatchWatermarkMs":0', '"nextBatchWatermarkMs":1e999', 2**63 - 1),
    "minus-inf": ("commits/31", '"nextBatchWatermarkMs":0', '"nextBatchWatermarkMs":-1e999', -(2**63)),
    "fraction": ("commits/31", '"nextBatchWatermarkMs":0', '"nextBatchWatermarkMs":1.9', 1),
    "wrap": ("commits/31", '"nextBatchWatermarkMs":0', f'"nextBatchWatermarkMs":{2**64 + 5}', 5),
}


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_values_spark_accepts(tmp_path: Path, name: str) -> None:
    rel, old, new, want = ACCEPTED[name]
    MUTATIONS[f"accepted-{name}"] = (rel, old, new)
    try:
        path = mutate(tmp_path / "ckpt", f"accepted-{name}")
    finally:
        del MUTATIONS[f"accepted-{name}"]
    assert commitlog.parse(path.read_bytes(), str(path)).next_batch_watermark_ms == want
    proc = cli("audit", str(tmp_path / "ckpt"), "-q")
    assert proc.returncode == 1 and "LOG-UNREADABLE" not in proc.stdout, proc.stdout  # only the async gap


@pytest.mark.parametrize("name", ["commit-nan", "commit-huge-int", "offset-huge-version", "commit-string"])
def test_cli_never_internal_error(tmp_path: Path, name: str) -> None:
    path = mutate(tmp_path / "ckpt", name)
    ckpt = str(tmp_path / "ckpt")
    for args in (["audit", ckpt, "-q"], ["inspect", ckpt], ["repair", ckpt], ["audit", ckpt, "-f", "json", "-q"]):
        proc = cli(*args)
        assert proc.returncode in (0, 1, 2), (args, proc.returncode, proc.stderr[-2000:])
        assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    audit = cli("audit", ckpt, "-q")
    assert str(path) in audit.stdout + audit.stderr


def test_lone_surrogate_prints_whole_report(tmp_path: Path) -> None:
    shutil.copytree(SAMPLE, tmp_path / "ckpt")
    meta = tmp_path / "ckpt" / "metadata"
    meta.write_text(meta.read_text().replace("{", '{"note":"\\ud800",', 1))
    (tmp_path / "ckpt" / ".metadata.crc").unlink(missing_ok=True)
    for args in (["inspect", str(tmp_path / "ckpt")], ["audit", str(tmp_path / "ckpt"), "-q"]):
        proc = cli(*args)
        assert proc.returncode in (0, 1), (args, proc.returncode, proc.stderr[-2000:])
        assert "internal error" not in proc.stderr
    assert "doesn't exist" in cli("audit", str(tmp_path / "ckpt"), "-q").stdout  # the report is whole
