"""Fingerprints of checkpoint trees for tests, computed independently of ckptfix."""

from __future__ import annotations

import hashlib
import os
import struct
import zlib
from pathlib import Path
from typing import Any


def tree(root: Path) -> dict[str, str]:
    """sha256 of every file below root, hidden files included, ckptfix's own `_ckptfix/` excluded."""
    out = {}
    for dirpath, dirnames, files in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != "_ckptfix"]
        for f in files:
            p = Path(dirpath, f)
            out[p.relative_to(root).as_posix()] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def directories(root: Path) -> set[str]:
    """Every directory below root, empty ones included (`tree` sees files only), ckptfix's own `_ckptfix/`
    excluded: on local disk a run that created directories leaves the checkpoint as it was only without them."""
    out = set()
    for dirpath, dirnames, _ in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != "_ckptfix"]
        out.update(Path(dirpath, d).relative_to(root).as_posix() for d in dirnames)
    return out


def s3_tree(fs: Any, url: str) -> dict[str, str]:
    """The same for every object below an s3:// URL."""
    root = url.removeprefix("s3://").rstrip("/")
    out = {}
    for path in fs.find(root):
        rel = path[len(root) + 1 :]
        if not rel.startswith("_ckptfix/"):
            out[rel] = hashlib.sha256(fs.cat_file(path)).hexdigest()
    return out


def hadoop_crc(data: bytes) -> bytes:
    """A Hadoop ChecksumFileSystem `.crc` sidecar: b"crc\\0", int32 BE 512, CRC-32 BE per 512 bytes."""
    sums = b"".join(struct.pack(">I", zlib.crc32(data[i : i + 512])) for i in range(0, len(data), 512))
    return b"crc\x00" + struct.pack(">i", 512) + sums
