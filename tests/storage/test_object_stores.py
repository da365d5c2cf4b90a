"""Every object store through the CLI, as a user types it (issue 12 #1): real checkpoints uploaded to S3 (moto's
server), Google Cloud Storage (fake-gcs-server) and Azure Blob Storage (Azurite), then `inspect`, `audit`,
`state ls`, `state read`, `repair --apply` and `undo` run with `--storage-option`s in a child process.

The reference is the same command on the same files on local disk: a store must change nothing but the URL. The
bytes after undo are compared with the uploaded files by hashing the objects directly (not through ckptfix)."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import tarfile
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from ckptfix.storage import Location, command_flags
from tests.support.cli import run_cli
from tests.support.emulators import CLOUD_ENV, ObjectStore
from tests.support.trees import tree

REPO = Path(__file__).resolve().parents[2]
ASYNC_SAMPLE = REPO / "samples" / "async-sparse"
STATE35 = REPO / "tests" / "fixtures" / "state35"
STATEFUL = ("agg_hdfs", "agg_rocksdb_changelog")  # written by Spark 3.5.9: HDFS state store, RocksDB + changelog


@pytest.fixture(params=[pytest.param("s3", marks=pytest.mark.s3), "gcs", "azure"])
def store(request: pytest.FixtureRequest) -> ObjectStore:
    if request.param == "s3":
        bucket = request.getfixturevalue("s3_bucket")
        return ObjectStore("s3", bucket.name, bucket.storage_options)
    fixture = {"gcs": "gcs_bucket", "azure": "azure_container"}[request.param]
    found: ObjectStore = request.getfixturevalue(fixture)
    return found


def options(storage_options: dict[str, Any], prefix: str = "") -> list[str]:
    """The storage options as the CLI takes them: ``-o key=value``, dotted keys for nested objects."""
    out: list[str] = []
    for key, value in storage_options.items():
        if isinstance(value, dict):
            out += options(value, f"{prefix}{key}.")
        else:
            out += ["-o", f"{prefix}{key}={value if isinstance(value, str) else json.dumps(value)}"]
    return out


@functools.cache
def local(*args: str) -> subprocess.CompletedProcess[str]:
    """A command on local files: the same for every store, run once."""
    return ckptfix(*args)


def ckptfix(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {**{k: v for k, v in os.environ.items() if k not in CLOUD_ENV}, **(env or {})}
    return run_cli(*args, env=env, cwd=REPO)


def same_as_local(
    store: ObjectStore, url: str, local_dir: Path, *command: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``command`` (``{ckpt}`` stands for the checkpoint) on the store and on the local copy: same exit code,
    stdout and stderr equal but for the root URL (no warning of a storage library, no retries' noise)."""
    remote = ckptfix(*(a.format(ckpt=url) for a in command), *options(store.storage_options), env=env)
    here = local(*(a.format(ckpt=local_dir) for a in command))
    # the commands ckptfix prints carry the storage options given (credentials as ***): not part of the comparison
    child_env = {**{k: v for k, v in os.environ.items() if k not in CLOUD_ENV}, **(env or {})}
    with mock.patch.dict(os.environ, child_env, clear=True):  # what the child leaves out: what its environment gives
        flags = command_flags(store.storage_options)
    assert "AccountKey=" not in flags and "secret=testing" not in flags, flags  # credentials never printed
    if flags:
        remote.stdout, remote.stderr = (t.replace(f"{url} {flags}", url) for t in (remote.stdout, remote.stderr))
    assert remote.returncode == here.returncode, remote.stderr
    assert "Traceback" not in remote.stderr and "internal error" not in remote.stderr, remote.stderr
    assert remote.stdout.replace(url, "ROOT") == here.stdout.replace(str(local_dir), "ROOT"), remote.stderr
    assert remote.stderr.replace(url, "ROOT") == here.stderr.replace(str(local_dir), "ROOT")
    return remote


@pytest.fixture(scope="module")
def stateful(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The stateful checkpoints unpacked once (the local side of every comparison)."""
    dest = tmp_path_factory.mktemp("stateful")
    for name in STATEFUL:
        with tarfile.open(STATE35 / f"{name}.tar.gz") as tar:
            tar.extractall(dest / name, filter="data")
    return {name: dest / name / "ckpt" for name in STATEFUL}


def test_inspect_and_audit_equal_the_local_ones(store: ObjectStore) -> None:
    url = store.upload_tree(ASYNC_SAMPLE, "async")
    same_as_local(store, url, ASYNC_SAMPLE, "inspect", "{ckpt}", "-f", "json")
    audit = same_as_local(store, url, ASYNC_SAMPLE, "audit", "{ckpt}", "-f", "json")
    assert audit.returncode == 1  # the sample's verdict: batch 30 doesn't exist
    verdict = json.loads(audit.stdout)["verdict"]
    assert verdict["restarts"] is False and verdict["blocking_rule"] == "LOG-ASYNC-GAP"


def test_state_ls_and_read_equal_the_local_ones(store: ObjectStore, stateful: dict[str, Path]) -> None:
    for name, local_dir in stateful.items():
        url = store.upload_tree(local_dir, name)
        same_as_local(store, url, local_dir, "state", "ls", "{ckpt}", "-f", "json")
        rows = ckptfix("state", "read", url, *options(store.storage_options))
        local_rows = local("state", "read", str(local_dir))
        assert rows.returncode == local_rows.returncode == 0, rows.stderr
        assert sorted(rows.stdout.splitlines()) == sorted(local_rows.stdout.splitlines())
        # complete mode: Spark's output of the last committed batch holds every group in the state
        expected = json.loads((STATE35 / f"{name}.expected.json").read_text())
        last = [b for b in expected["batches"] if b["committed"]][-1]
        keys = sorted(json.loads(line)["key"]["k"] for line in rows.stdout.splitlines())
        assert keys == sorted(r["k"] for r in last["sink_rows"]), name


def test_repair_apply_then_undo_restores_every_byte(store: ObjectStore) -> None:
    url = store.upload_tree(ASYNC_SAMPLE, "async")
    opts = options(store.storage_options)
    before = store.tree("async")
    assert before == tree(ASYNC_SAMPLE)  # the upload itself kept every byte, hidden .crc files included
    applied = ckptfix("repair", url, "--apply", "--idle-seconds", "0", *opts)
    assert applied.returncode == 0, applied.stderr
    after = store.tree("async")
    assert set(after) - set(before) == {"offsets/30"} and after["offsets/30"] == before["offsets/31"]
    assert ckptfix("audit", url, "--quiet", *opts).returncode == 0
    undone = ckptfix("undo", url, "--idle-seconds", "0", *opts)
    assert undone.returncode == 0, undone.stderr
    assert store.tree("async") == before
    assert ckptfix("audit", url, "--quiet", *opts).returncode == 1


def test_create_exclusive_refuses_an_object_that_exists(store: ObjectStore) -> None:
    """The repair engine's create-only write is a conditional PUT on every store; a second writer loses."""
    location = Location(store.url("excl"), store.storage_options)
    location.create_exclusive("offsets/30", b"first")
    with pytest.raises(FileExistsError, match="expected no file, found one"):
        location.create_exclusive("offsets/30", b"second")
    assert store.filesystem().cat_file(f"{store.container}/excl/offsets/30") == b"first"


@pytest.mark.parametrize(
    ("fixture", "url"),
    [
        ("gcs_bucket", "gcs://{c}/async"),
        ("azure_container", "az://{c}/async"),
        ("azure_container", "abfss://{c}@devstoreaccount1.dfs.core.windows.net/async"),
        ("azure_container", "wasbs://{c}@devstoreaccount1.blob.core.windows.net/async"),
    ],
)
def test_every_spelling_reads_the_same_checkpoint(request: pytest.FixtureRequest, fixture: str, url: str) -> None:
    store: ObjectStore = request.getfixturevalue(fixture)
    store.upload_tree(ASYNC_SAMPLE, "async")
    same_as_local(store, url.format(c=store.container), ASYNC_SAMPLE, "audit", "{ckpt}", "-f", "json")


def test_gcs_emulator_named_by_the_environment(gcs_bucket: ObjectStore) -> None:
    """$STORAGE_EMULATOR_HOST (host:port, as Google's clients take it) instead of endpoint_url."""
    url = gcs_bucket.upload_tree(ASYNC_SAMPLE, "async")
    host = gcs_bucket.storage_options["endpoint_url"].removeprefix("http://")
    emulator = ObjectStore("gs", gcs_bucket.container, {"token": "anon"})
    same_as_local(emulator, url, ASYNC_SAMPLE, "audit", "{ckpt}", "-f", "json", env={"STORAGE_EMULATOR_HOST": host})


def test_azure_connection_string_from_the_environment(azure_container: ObjectStore) -> None:
    """$AZURE_STORAGE_CONNECTION_STRING (adlfs reads it) instead of a storage option."""
    url = azure_container.upload_tree(ASYNC_SAMPLE, "async")
    env = {"AZURE_STORAGE_CONNECTION_STRING": azure_container.storage_options["connection_string"]}
    bare = ObjectStore("abfs", azure_container.container, {})
    same_as_local(bare, url, ASYNC_SAMPLE, "audit", "{ckpt}", "-f", "json", env=env)


def test_a_missing_bucket_or_container_is_named_as_such(store: ObjectStore) -> None:
    """A typo in the bucket (S3, GCS) or container (Azure) read "no such file or directory", as if the checkpoint
    were missing in a bucket that exists."""
    kind = "container" if store.scheme == "abfs" else "bucket"
    url = f"{store.scheme}://ckptfix-no-such-{kind}/q1"
    proc = ckptfix("audit", url, *options(store.storage_options))
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == (
        f"ckptfix: error: {url}: no such {kind} 'ckptfix-no-such-{kind}' (or these credentials cannot see it)\n"
    )
