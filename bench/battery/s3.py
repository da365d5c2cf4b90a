"""moto's S3 server for the battery, started the way the suite starts it (tests/support/s3.py: ThreadedMotoServer
on 127.0.0.1, port 0, fake credentials), plus the few bucket operations the sections need."""

from __future__ import annotations

import hashlib
import itertools
import logging
from pathlib import Path
from typing import Any

from tests.support.s3 import FAKE_AWS_ENV, apply_env

_numbers = itertools.count()


class Moto:
    def __init__(self, endpoint: str | None = None, bucket: str | None = None) -> None:
        """Start a server, or use a running one (the suite's ``moto_server``) at ``endpoint``."""
        self.server: Any = None
        self._previous: dict[str, str | None] = {}
        if endpoint is None:
            from moto.server import ThreadedMotoServer

            self._previous = apply_env(FAKE_AWS_ENV)
            logging.getLogger("werkzeug").setLevel(logging.ERROR)
            self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
            self.server.start()
            host, port = self.server.get_host_and_port()
            endpoint = f"http://{host}:{port}"
        self.endpoint = endpoint
        self.bucket = bucket or f"battery-{next(_numbers)}"
        if bucket is None:
            self.fs().mkdir(self.bucket)

    @property
    def bucket_url(self) -> str:
        return f"s3://{self.bucket}"

    def close(self) -> None:
        if self.server is not None:
            self.server.stop()
            apply_env(self._previous)

    def env(self) -> dict[str, str]:
        return {k: v for k, v in FAKE_AWS_ENV.items() if v is not None}

    def options(self, endpoint: str | None = None, **more: Any) -> dict[str, Any]:
        return {
            "key": "testing",
            "secret": "testing",
            "token": "testing",
            "client_kwargs": {"endpoint_url": endpoint or self.endpoint},
            "use_listings_cache": False,
            "skip_instance_cache": True,
            **more,
        }

    def fs(self) -> Any:
        import s3fs

        return s3fs.S3FileSystem(**self.options())

    def upload(self, local: Path, key: str) -> str:
        fs = self.fs()
        base = f"{self.bucket}/{key.strip('/')}"
        sources, targets = [], []
        for path in sorted(p for p in Path(local).rglob("*") if p.is_file()):
            sources.append(str(path))
            targets.append(f"{base}/{path.relative_to(local).as_posix()}")
        fs.put(sources, targets)
        return f"s3://{base}"

    def tree(self, url: str) -> dict[str, str]:
        """sha256 of every object below ``url`` but ckptfix's own ``_ckptfix/`` (as tests/support/trees.s3_tree),
        the objects fetched concurrently."""
        fs = self.fs()
        root = url.removeprefix("s3://").rstrip("/")
        paths = [p for p in fs.find(root) if not p[len(root) + 1 :].startswith("_ckptfix/")]
        blobs = fs.cat(paths, on_error="raise") if paths else {}
        if len(paths) == 1:  # fsspec returns the bytes themselves for a single path
            blobs = {paths[0]: blobs} if isinstance(blobs, bytes) else blobs
        return {p[len(root) + 1 :]: hashlib.sha256(blobs[p]).hexdigest() for p in paths}

    def copy(self, url: str, key: str) -> str:
        fs = self.fs()
        src = url.removeprefix("s3://").rstrip("/")
        dst = f"{self.bucket}/{key.strip('/')}"
        for path in fs.find(src):
            fs.copy(path, dst + path[len(src) :])
        return f"s3://{dst}"

    def move(self, src_url: str, dst_url: str) -> None:
        """Make ``dst_url`` hold exactly what ``src_url`` holds (every object, _ckptfix included)."""
        fs = self.fs()
        src = src_url.removeprefix("s3://").rstrip("/")
        dst = dst_url.removeprefix("s3://").rstrip("/")
        old = fs.find(dst)
        if old:
            fs.rm(old)
        for path in fs.find(src):
            fs.copy(path, dst + path[len(src) :])
        fs.rm(fs.find(src))
