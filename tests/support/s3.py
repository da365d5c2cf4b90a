"""S3 for tests: moto's real HTTP server on 127.0.0.1, reset before every test.

Nothing of ckptfix is mocked: the code under test talks HTTP to moto through s3fs, as it
would to AWS. Register with ``pytest_plugins = ["tests.support.s3"]``.

* ``moto_server`` (session): one ``ThreadedMotoServer`` on a free port, fake credentials
  and region in ``os.environ`` for the session (previous values restored afterwards).
* ``s3_bucket`` (function): moto reset, then a fresh bucket; ``upload_tree`` copies a local
  directory (hidden ``.crc`` sidecars included) and returns its ``s3://`` URL.
"""

from __future__ import annotations

import itertools
import logging
import os
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

#: Environment for the whole session. ``None`` removes a variable (a developer's own
#: profile, config file or endpoint override must never reach the fake server).
FAKE_AWS_ENV: dict[str, str | None] = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SECURITY_TOKEN": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
    "AWS_PROFILE": None,
    "AWS_ENDPOINT_URL": None,
    "AWS_ENDPOINT_URL_S3": None,
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    "NO_PROXY": "127.0.0.1,localhost",
    "no_proxy": "127.0.0.1,localhost",
}

_bucket_numbers = itertools.count()


def apply_env(changes: Mapping[str, str | None]) -> dict[str, str | None]:
    """Set (or, for ``None``, remove) variables; return what to pass back to undo it."""
    previous = {name: os.environ.get(name) for name in changes}
    for name, value in changes.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    return previous


@dataclass(frozen=True)
class MotoServer:
    endpoint_url: str  # e.g. "http://127.0.0.1:53211"

    def reset(self) -> None:
        """Forget every bucket and object (moto's own reset API)."""
        request = urllib.request.Request(f"{self.endpoint_url}/moto-api/reset", method="POST")
        with urllib.request.urlopen(request, timeout=10) as response:
            response.read()

    def storage_options(self) -> dict[str, Any]:
        """s3fs options for this server; fresh instance and no listing cache, so a test
        always sees what is on the server now and never a previous test's listing."""
        return {
            "key": "testing",
            "secret": "testing",
            "token": "testing",
            "client_kwargs": {"endpoint_url": self.endpoint_url},
            "use_listings_cache": False,
            "skip_instance_cache": True,
        }


@dataclass(frozen=True)
class S3Bucket:
    name: str
    server: MotoServer
    storage_options: dict[str, Any]

    @property
    def url(self) -> str:
        return f"s3://{self.name}"

    def filesystem(self) -> Any:
        """A fresh s3fs filesystem for setting up or inspecting objects directly."""
        import s3fs

        return s3fs.S3FileSystem(**self.storage_options)

    def upload_tree(self, local_dir: Path, prefix: str) -> str:
        """Upload every file below ``local_dir`` (hidden files included) to
        ``<bucket>/<prefix>/...`` and return ``s3://<bucket>/<prefix>``.

        The objects go into the server's store through moto's own backend API (the server runs in this process),
        not one HTTP PUT each: test setup, not the code under test, which reads them over HTTP through s3fs as
        always. About 50 times faster (an HTTP upload took ~0.7 s per checkpoint, a tenth of the suite's S3 time)."""
        from moto.core import DEFAULT_ACCOUNT_ID
        from moto.s3.models import s3_backends

        backend = s3_backends[DEFAULT_ACCOUNT_ID]["global"]
        local_dir = Path(local_dir)
        prefix = prefix.strip("/")
        for dirpath, _dirnames, filenames in os.walk(local_dir):
            for filename in filenames:
                path = Path(dirpath, filename)
                key = f"{prefix}/{path.relative_to(local_dir).as_posix()}" if prefix else path.name
                backend.put_object(self.name, key, path.read_bytes())
        return f"s3://{self.name}/{prefix}" if prefix else f"s3://{self.name}"

    def put_bytes(self, key: str, data: bytes) -> str:
        """Write one object; returns its ``s3://`` URL."""
        path = f"{self.name}/{key.lstrip('/')}"
        self.filesystem().pipe_file(path, data)
        return f"s3://{path}"


@pytest.fixture(scope="session")
def moto_server() -> Iterator[MotoServer]:
    pytest.importorskip("s3fs", reason="S3 tests need the [s3] extra")
    server_module = pytest.importorskip("moto.server", reason="S3 tests need moto[server]")
    previous = apply_env(FAKE_AWS_ENV)
    # werkzeug logs one line per request; keep test output readable
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = server_module.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()  # the real port, chosen by the OS
        yield MotoServer(f"http://{host}:{port}")
    finally:
        server.stop()
        apply_env(previous)


@pytest.fixture
def s3_bucket(moto_server: MotoServer, request: pytest.FixtureRequest) -> S3Bucket:
    if request.node.get_closest_marker("s3") is None:  # asked for at run time (getfixturevalue): collection missed it
        pytest.fail(f"{request.node.nodeid} starts moto's S3 server without @pytest.mark.s3")
    moto_server.reset()
    bucket = S3Bucket(
        name=f"ckptfix-test-{next(_bucket_numbers)}",
        server=moto_server,
        storage_options=moto_server.storage_options(),
    )
    bucket.filesystem().mkdir(bucket.name)
    return bucket
