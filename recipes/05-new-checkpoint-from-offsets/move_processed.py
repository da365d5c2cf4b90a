"""Move the input files a checkpoint has already processed out of the input path.

``python move_processed.py OFFSETS_JSON DEST_DIR`` reads ``ckptfix offsets export CKPT --format json`` output and
moves every ``processed_files`` entry of every file source into DEST_DIR (created if needed), printing each move.
Local paths (``file://``) only; for S3 move the listed keys with your own tooling (``aws s3 mv``).
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from urllib.parse import unquote, urlparse


def main(offsets_json: str, dest: str) -> int:
    export = json.loads(Path(offsets_json).read_text())
    target = Path(dest)
    target.mkdir(parents=True, exist_ok=True)
    moved = 0
    for source in export["sources"]:
        for url in source.get("processed_files") or []:
            parsed = urlparse(url)
            if parsed.scheme not in ("", "file"):
                print(f"not a local file, move it yourself: {url}", file=sys.stderr)
                return 2
            path = Path(unquote(parsed.path))
            if path.exists():
                shutil.move(str(path), target / path.name)
                print(f"moved {path} -> {target / path.name}")
                moved += 1
            else:
                print(f"already gone: {path}")
    print(f"{moved} files moved")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit("usage: python move_processed.py OFFSETS_JSON DEST_DIR")
    raise SystemExit(main(sys.argv[1], sys.argv[2]))
