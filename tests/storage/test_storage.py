"""One behaviour suite for ``ckptfix.storage`` over local files, ``memory://`` and S3 (moto).

The same tree is materialised on each backend and must look and read the same; errors
must be Python's own ``FileNotFoundError`` / ``NotADirectoryError`` / ``PermissionError``
naming the URL the user gave.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ckptfix.errors import UsageError
from ckptfix.storage import ENV_STORAGE_OPTIONS, Entry, open_location, parse_storage_options
from tests.support.cli import run_cli

#: A small checkpoint-shaped tree: hidden Hadoop sidecars, nested dirs, an empty file and a
#: file larger than one read buffer.
TREE: dict[str, bytes] = {
    "metadata": b'{"id":"0906fb34-6fbd-424f-9eb4-dbfc11678c28"}',
    ".metadata.crc": b"crc\x00\x00\x00\x02\x00\x12\x34\x56\x78",
    "offsets/0": b'v1\n{"batchWatermarkMs":0,"batchTimestampMs":1,"conf":{}}\n{"logOffset":0}',
    "offsets/.0.crc": b"crc\x00\x00\x00\x02\x00\x00\x00\x00\x01",
    "commits/0": b'v1\n{"nextBatchWatermarkMs":0}',
    "commits/.0.crc": b"crc\x00\x00\x00\x02\x00\x00\x00\x00\x02",
    "sources/0/9.compact": b"v1\n" + b"\n".join(b'{"path":"file:///in/f%d.json"}' % i for i in range(10)),
    "state/0/0/1.delta": bytes(range(256)) * 300,  # 76,800 bytes, binary
    "state/0/0/_metadata/schema": b"\x00\x02v2",
    "state/0/1/.1.delta.crc": b"",  # empty and hidden
}
DIRS = {
    "offsets",
    "commits",
    "sources",
    "sources/0",
    "state",
    "state/0",
    "state/0/0",
    "state/0/0/_metadata",
    "state/0/1",
}


@dataclass
class Backend:
    """One storage backend with a way to put a tree on it."""

    name: str
    tmp_path: Path
    storage_options: dict[str, Any] = field(default_factory=dict)
    s3_bucket: Any = None  # tests.support.s3.S3Bucket for "s3"
    _memory_roots: list[str] = field(default_factory=list)

    def make_tree(self, files: dict[str, bytes], name: str = "ckpt") -> str:
        """Materialise ``files`` and return the URL of its root."""
        local = self.tmp_path / f"src-{name}"
        for rel, data in files.items():
            path = local / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        if self.name == "local":
            return str(local)
        if self.name == "memory":
            import fsspec

            root = f"/ckptfix-test-{uuid.uuid4().hex}/{name}"
            self._memory_roots.append(root.rsplit("/", 1)[0])
            memfs = fsspec.filesystem("memory")
            memfs.pipe({f"{root}/{rel}": data for rel, data in files.items()})
            return f"memory://{root}"
        return self.s3_bucket.upload_tree(local, name)

    def missing_url(self) -> str:
        if self.name == "local":
            return str(self.tmp_path / "no-such-checkpoint")
        if self.name == "memory":
            return f"memory:///ckptfix-test-{uuid.uuid4().hex}/no-such-checkpoint"
        return f"{self.s3_bucket.url}/no-such-checkpoint"

    def cleanup(self) -> None:
        if self._memory_roots:
            import fsspec

            memfs = fsspec.filesystem("memory")
            for root in self._memory_roots:
                if memfs.exists(root):
                    memfs.rm(root, recursive=True)


@pytest.fixture(params=["local", "memory", pytest.param("s3", marks=pytest.mark.s3)])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param == "s3":
        bucket = request.getfixturevalue("s3_bucket")
        b = Backend("s3", tmp_path, dict(bucket.storage_options), s3_bucket=bucket)
    else:
        b = Backend(request.param, tmp_path)
    yield b
    b.cleanup()


# -- listing ------------------------------------------------------------------------------


def expected_listing() -> dict[str, tuple[bool, int]]:
    out = {rel: (False, len(data)) for rel, data in TREE.items()}
    out.update({d: (True, 0) for d in DIRS})
    return out


def summarize(listing: dict[str, Entry]) -> dict[str, tuple[bool, int]]:
    return {rel: (e.is_dir, 0 if e.is_dir else e.size) for rel, e in listing.items()}


def test_list_tree_same_entries_on_every_backend(backend: Backend) -> None:
    loc = open_location(backend.make_tree(TREE), backend.storage_options)
    listing = loc.list_tree()
    assert summarize(listing) == expected_listing()
    assert ".metadata.crc" in listing and "offsets/.0.crc" in listing  # hidden files kept
    assert all(not rel.startswith("/") and not rel.endswith("/") for rel in listing)
    assert loc.stats.list_calls == 1
    assert loc.stats.entries_listed == len(listing)
    assert loc.stats.files_read == 0


def test_list_tree_of_a_subdirectory(backend: Backend) -> None:
    loc = open_location(backend.make_tree(TREE), backend.storage_options)
    # names stay relative to the root, not to the listed subdirectory
    assert summarize(loc.list_tree("state")) == {
        rel: v for rel, v in expected_listing().items() if rel.startswith("state/")
    }


def test_file_mtimes_are_numbers_when_reported(backend: Backend) -> None:
    loc = open_location(backend.make_tree(TREE), backend.storage_options)
    before = time.time() - 24 * 3600
    for rel, entry in loc.list_tree().items():
        if not entry.is_dir and entry.mtime is not None:
            assert entry.mtime > before, rel


def test_trailing_slash_in_url_is_the_same_root(backend: Backend) -> None:
    url = backend.make_tree(TREE)
    loc = open_location(url + "/", backend.storage_options)
    assert summarize(loc.list_tree()) == expected_listing()
    assert loc.display("metadata") == f"{url}/metadata"


# -- reading -------------------------------------------------------------------------------


def test_read_returns_exact_bytes_and_counts(backend: Backend) -> None:
    loc = open_location(backend.make_tree(TREE), backend.storage_options)
    wanted = ["metadata", "state/0/0/1.delta", "offsets/.0.crc", "state/0/1/.1.delta.crc"]
    for rel in wanted:
        assert loc.read(rel) == TREE[rel], rel
    assert loc.stats.files_read == len(wanted)
    assert loc.stats.bytes_read == sum(len(TREE[rel]) for rel in wanted)
    assert loc.stats.paths_read == wanted
    assert loc.stats.list_calls == 0  # reading never lists


def test_exists(backend: Backend) -> None:
    loc = open_location(backend.make_tree(TREE), backend.storage_options)
    assert loc.exists("metadata")
    assert loc.exists("offsets/.0.crc")
    assert not loc.exists("offsets/1")
    assert loc.stats.files_read == 0


# -- errors --------------------------------------------------------------------------------


def test_missing_root_raises_file_not_found_naming_the_url(backend: Backend) -> None:
    url = backend.missing_url()
    loc = open_location(url, backend.storage_options)
    with pytest.raises(FileNotFoundError) as info:
        loc.list_tree()
    assert url in str(info.value)


def test_missing_file_raises_file_not_found_naming_the_file(backend: Backend) -> None:
    url = backend.make_tree(TREE)
    loc = open_location(url, backend.storage_options)
    with pytest.raises(FileNotFoundError) as info:
        loc.read("offsets/7")
    assert f"{url}/offsets/7" in str(info.value)
    assert loc.stats.files_read == 0


def test_root_that_is_a_file_raises_not_a_directory(backend: Backend) -> None:
    url = backend.make_tree(TREE)
    loc = open_location(f"{url}/metadata", backend.storage_options)
    with pytest.raises(NotADirectoryError) as info:
        loc.list_tree()
    assert f"{url}/metadata" in str(info.value)


def _as_unprivileged(code: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a child Python without root's power to ignore file modes (CI runs as
    root): the capabilities DAC_OVERRIDE and DAC_READ_SEARCH are dropped with setpriv."""
    prefix: list[str] = []
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root without setpriv: file modes cannot be enforced")
        prefix = [setpriv, "--bounding-set", "-dac_override,-dac_read_search"]
    return subprocess.run([*prefix, sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


_PROBE = """
import sys
from ckptfix.storage import open_location
loc = open_location(sys.argv[1])
try:
    {call}
except PermissionError as exc:
    print("PermissionError:", exc)
else:
    print("no error")
"""


def test_local_permission_denied_raises_permission_error(tmp_path: Path) -> None:
    root = tmp_path / "ckpt"
    (root / "offsets").mkdir(parents=True)
    secret = root / "offsets" / "0"
    secret.write_bytes(b"v1\n")
    secret.chmod(0)
    try:
        code = _PROBE.format(call='loc.read("offsets/0")').replace("sys.argv[1]", repr(str(root)))
        proc = _as_unprivileged(code)
    finally:
        secret.chmod(0o644)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("PermissionError:"), proc.stdout
    assert f"{root}/offsets/0" in proc.stdout


def test_local_unreadable_directory_fails_the_listing(tmp_path: Path) -> None:
    root = tmp_path / "ckpt"
    hidden = root / "state" / "0"
    hidden.mkdir(parents=True)
    (hidden / "1.delta").write_bytes(b"x")
    hidden.chmod(0)
    try:
        code = _PROBE.format(call="loc.list_tree()").replace("sys.argv[1]", repr(str(root)))
        proc = _as_unprivileged(code)
    finally:
        hidden.chmod(0o755)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("PermissionError:"), proc.stdout
    assert f"{root}/state/0" in proc.stdout


def _listing_error(root: Path) -> str:
    with pytest.raises(OSError) as failed:
        open_location(str(root)).list_tree()
    return str(failed.value)


def test_a_dangling_or_looping_link_is_named_not_its_directory(tmp_path: Path) -> None:
    """New-user trial: a dangling symlink offsets/12 made the listing say "offsets: no such file or directory"."""
    root = tmp_path / "ckpt"
    (root / "offsets").mkdir(parents=True)
    (root / "offsets" / "12").symlink_to("gone")
    assert _listing_error(root) == (
        f"{root}/offsets/12: expected a file or directory, found a symbolic link to 'gone', which does not exist"
    )
    (root / "offsets" / "12").unlink()
    (root / "offsets" / "12").symlink_to("12")
    said = _listing_error(root)
    assert said.startswith(f"{root}/offsets/12: expected a file or directory, found a symbolic link to '12' "), said


def test_a_fifo_is_refused_before_anything_reads_it(tmp_path: Path) -> None:
    """New-user trial: a FIFO in offsets/ hung the audit (reading it blocks)."""
    root = tmp_path / "ckpt"
    (root / "offsets").mkdir(parents=True)
    os.mkfifo(root / "offsets" / "12")
    assert _listing_error(root) == f"{root}/offsets/12: expected a file or directory, found a named pipe (FIFO)"


@pytest.mark.s3
def test_unreachable_s3_endpoint_is_an_os_error_naming_the_url() -> None:
    pytest.importorskip("s3fs")
    options = {
        "key": "testing",
        "secret": "testing",
        "client_kwargs": {"endpoint_url": "http://127.0.0.1:9", "region_name": "us-east-1"},
        "config_kwargs": {"connect_timeout": 1, "retries": {"max_attempts": 1}},
        "skip_instance_cache": True,
        "use_listings_cache": False,
    }
    url = "s3://no-such-host-bucket/ckpt"
    started = time.monotonic()
    loc = open_location(url, options)
    with pytest.raises(OSError) as info:
        loc.list_tree()
    assert url in str(info.value)
    assert time.monotonic() - started < 30


# -- parse_storage_options -----------------------------------------------------------------


@pytest.fixture
def no_env_options() -> Iterator[None]:
    saved = os.environ.pop(ENV_STORAGE_OPTIONS, None)
    yield
    os.environ.pop(ENV_STORAGE_OPTIONS, None)
    if saved is not None:
        os.environ[ENV_STORAGE_OPTIONS] = saved


@pytest.mark.usefixtures("no_env_options")
class TestParseStorageOptions:
    def test_empty(self) -> None:
        assert parse_storage_options([]) == {}

    def test_dotted_keys_nest_and_values_parse_as_json(self) -> None:
        got = parse_storage_options(
            [
                "anon=false",
                "client_kwargs.region_name=eu-west-1",
                "config_kwargs.retries.max_attempts=3",
                "config_kwargs.connect_timeout=1.5",
                'requester_pays={"a": [1, 2]}',
                "key=AKIA==x",  # splits at the first '=' only
            ]
        )
        assert got == {
            "anon": False,
            "client_kwargs": {"region_name": "eu-west-1"},
            "config_kwargs": {"retries": {"max_attempts": 3}, "connect_timeout": 1.5},
            "requester_pays": {"a": [1, 2]},
            "key": "AKIA==x",
        }

    def test_non_json_values_stay_strings(self) -> None:
        assert parse_storage_options(["profile=my-profile", "empty="]) == {"profile": "my-profile", "empty": ""}

    def test_endpoint_url_goes_to_client_kwargs(self) -> None:
        got = parse_storage_options(["client_kwargs.region_name=us-east-1"], endpoint_url="http://127.0.0.1:9000")
        assert got == {"client_kwargs": {"region_name": "us-east-1", "endpoint_url": "http://127.0.0.1:9000"}}

    def test_env_var_is_the_base_and_pairs_win(self) -> None:
        os.environ[ENV_STORAGE_OPTIONS] = json.dumps({"anon": True, "client_kwargs": {"region_name": "us-east-1"}})
        got = parse_storage_options(["anon=false", "client_kwargs.endpoint_url=http://x"])
        assert got == {"anon": False, "client_kwargs": {"region_name": "us-east-1", "endpoint_url": "http://x"}}

    @pytest.mark.parametrize("env", ["{not json", "[1, 2]", '"s3"'])
    def test_bad_env_var_is_a_usage_error(self, env: str) -> None:
        os.environ[ENV_STORAGE_OPTIONS] = env
        with pytest.raises(UsageError, match=ENV_STORAGE_OPTIONS):
            parse_storage_options([])

    @pytest.mark.parametrize(
        ("pair", "said"),
        [
            ("client_kwargs={bad", "client_kwargs: expected a JSON value, found '{bad'"),
            ("requester_pays=[1,", "requester_pays: expected a JSON value"),
            ("client_kwargs=abc", "client_kwargs: expected a JSON object, found 'abc'"),
            ("config_kwargs=3", "config_kwargs: expected a JSON object"),
        ],
    )
    def test_a_value_meant_as_json_or_a_keyword_dict_is_checked(self, pair: str, said: str) -> None:
        """A new user's `-o 'client_kwargs={bad'` reached s3fs as a string: "'str' object has no attribute 'copy'"."""
        with pytest.raises(UsageError, match=re.escape(said)):
            parse_storage_options([pair])

    @pytest.mark.parametrize("pair", ["novalue", "=value", ""])
    def test_bad_pair_is_a_usage_error(self, pair: str) -> None:
        with pytest.raises(UsageError, match="key=value"):
            parse_storage_options([pair])

    def test_an_output_file_given_to_o_names_out(self) -> None:
        """A new user's `state changes CKPT -o out.parquet`: -o is the storage option, the file is --out."""
        with pytest.raises(UsageError, match=re.escape("found 'out.parquet' (-o is --storage-option; the output")):
            parse_storage_options(["out.parquet"])

    @pytest.mark.parametrize("pairs", [["a=1", "a.b=2"], ["a..b=1"], ["a.=1"]])
    def test_conflicting_or_empty_dotted_keys_are_usage_errors(self, pairs: list[str]) -> None:
        with pytest.raises(UsageError):
            parse_storage_options(pairs)


def test_hadoop_qualified_file_url_is_a_local_path(tmp_path: Path) -> None:
    """Spark writes `file:/abs` (one slash); users paste it from logs."""
    (tmp_path / "x").write_bytes(b"hi")
    loc = open_location(f"file:{tmp_path}")
    assert loc.read("x") == b"hi"
    assert loc.display("x") == f"file://{tmp_path}/x"


def test_a_percent_encoded_file_url_names_the_directory_spark_logged(tmp_path: Path) -> None:
    """Spark logs `file:/data/with%20space/ck%20pt`; a new user pasted it and got "no such file or directory"."""
    d = tmp_path / "with space"
    d.mkdir()
    (d / "x").write_bytes(b"hi")
    for url in (f"file:{tmp_path}/with%20space", f"file://{tmp_path}/with%20space"):
        loc = open_location(url)
        assert loc.read("x") == b"hi"
        assert loc.display("x") == f"file://{d}/x"


def test_a_quoted_tilde_is_read_and_named_as_the_home_directory(tmp_path: Path, monkeypatch: Any) -> None:
    """`rollback "~/rdb" ... --plan-out p.json` recorded `<cwd>/~/rdb` while it read `$HOME/rdb`."""
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "ck").mkdir()
    (tmp_path / "ck" / "x").write_bytes(b"hi")
    loc = open_location("~/ck")
    assert loc.read("x") == b"hi" and loc.url == str(tmp_path / "ck")


def test_a_file_in_the_root_directory_is_named_once_slashed() -> None:
    assert open_location("/").display("nonexistent.json") == "/nonexistent.json"


@pytest.mark.s3
def test_a_missing_bucket_is_named_as_a_bucket(s3_bucket: Any) -> None:
    """New-user trial: a typo in the bucket read "no such file or directory", as if the checkpoint were missing."""
    options = ["-o", f"endpoint_url={s3_bucket.server.endpoint_url}"]
    for command in (["audit"], ["inspect"], ["state", "ls"]):
        proc = run_cli(*command, "s3://ckptfix-no-such-bucket/q1", *options)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr == (
            "ckptfix: error: s3://ckptfix-no-such-bucket/q1: no such bucket 'ckptfix-no-such-bucket' (or these "
            "credentials cannot see it)\n"
        )
    proc = run_cli("audit", f"{s3_bucket.url}/no-such-checkpoint", *options)  # the bucket is there: the path is not
    assert proc.stderr.endswith("no such file or directory\n") and "bucket" not in proc.stderr.split(":", 2)[2]
