"""Roll a file sink back to batch N: move the files of its batches above N out of the output path.

``python rollback_sink.py OUTPUT_DIR N BACKUP_DIR`` moves ``OUTPUT_DIR/_spark_metadata/<b>`` of every batch
``b > N`` (with its ``.crc``) and every data file those entries add (with its ``.crc``) into BACKUP_DIR (created
if needed), printing each move. Afterwards the sink's log ends at batch N, so Spark writes batches N+1.. again,
and ``spark.read`` of OUTPUT_DIR (which lists the files the log names) no longer sees the old ones.

Refused (exit 2, nothing moved): a compacted log entry (``<b>.compact``, Spark writes one every
``spark.sql.streaming.fileSink.log.compactInterval`` = 10 batches) above N, which holds the files of every batch
before it and would have to be rewritten; a file that is not local (``file://``: on S3 move the keys listed in
the entries with your own tooling).
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from urllib.parse import unquote, urlparse


def main(output_dir: str, to_batch: int, backup: str) -> int:
    log = Path(output_dir) / "_spark_metadata"
    entries = sorted((int(p.name.split(".")[0]), p) for p in log.iterdir() if p.name.split(".")[0].isdigit())
    later = [(b, p) for b, p in entries if b > to_batch]
    compacted = [p.name for b, p in later if p.name.endswith(".compact")]
    if compacted:
        print(f"refused: {', '.join(compacted)} is a compacted log entry above batch {to_batch}", file=sys.stderr)
        return 2
    files: list[Path] = []
    for _, entry in later:
        for line in entry.read_text().splitlines()[1:]:  # line 1 is the log version, "v1"
            url = json.loads(line)["path"]
            parsed = urlparse(url)
            if parsed.scheme not in ("", "file"):
                print(f"refused: not a local file, move it yourself: {url}", file=sys.stderr)
                return 2
            files.append(Path(unquote(parsed.path)))
    target = Path(backup)
    (target / "_spark_metadata").mkdir(parents=True, exist_ok=True)
    for _, entry in later:  # the log entries first: a crash after this leaves files no reader lists
        for p in (entry, entry.with_name(f".{entry.name}.crc")):
            if p.exists():
                shutil.move(str(p), target / "_spark_metadata" / p.name)
                print(f"moved {p} -> {target / '_spark_metadata' / p.name}")
    for path in files:
        for p in (path, path.with_name(f".{path.name}.crc")):
            if p.exists():
                shutil.move(str(p), target / p.name)
                print(f"moved {p} -> {target / p.name}")
    print(f"file sink rolled back to batch {to_batch}: {len(later)} batches, {len(files)} data files moved")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 4:
        raise SystemExit("usage: python rollback_sink.py OUTPUT_DIR N BACKUP_DIR")
    raise SystemExit(main(sys.argv[1], int(sys.argv[2]), sys.argv[3]))
