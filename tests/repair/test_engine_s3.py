"""The same engine on S3 (moto's HTTP server through s3fs): apply, undo, crash + resume."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
from typing import Any

import pytest

from ckptfix.repair import engine
from ckptfix.storage import ENV_STORAGE_OPTIONS, Location
from tests.repair.test_engine import expected_after, small_plan
from tests.support.trees import s3_tree
from tests.unit.realckpt import sample_checkpoint

pytestmark = pytest.mark.s3


def test_apply_and_undo_on_s3(s3_bucket: Any) -> None:
    url = s3_bucket.upload_tree(sample_checkpoint(), "q1")
    opts = s3_bucket.storage_options
    before = s3_tree(s3_bucket.filesystem(), url)
    loc, backup = Location(url, opts), Location(url + "/_ckptfix", opts)
    run = engine.apply(small_plan(url, opts), loc, backup, force=True)
    assert s3_tree(s3_bucket.filesystem(), url) == expected_after(before)
    assert engine.Runs(backup).info(run).status == "complete"
    engine.undo(loc, backup, run, force=True)  # uploaded seconds ago: looks alive otherwise
    assert s3_tree(s3_bucket.filesystem(), url) == before


def test_create_only_writes_are_conditional_on_s3(s3_bucket: Any) -> None:
    url = s3_bucket.upload_tree(sample_checkpoint(), "q2")
    loc = Location(url, s3_bucket.storage_options)
    with pytest.raises(FileExistsError, match="offsets/31: expected no file, found one"):
        loc.create_exclusive("offsets/31", b"v1\n{}\n-")
    assert (
        s3_tree(s3_bucket.filesystem(), url)["offsets/31"]
        == hashlib.sha256((sample_checkpoint() / "offsets/31").read_bytes()).hexdigest()
    )


@pytest.mark.parametrize("crash_after", [4, 10, 14])  # backup phase, mid-steps, after the last step
def test_crash_on_s3_then_resume(s3_bucket: Any, tmp_path: Any, crash_after: int) -> None:
    url = s3_bucket.upload_tree(sample_checkpoint(), f"crash{crash_after}")
    opts = s3_bucket.storage_options
    before = s3_tree(s3_bucket.filesystem(), url)
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(small_plan(url, opts).dumps())
    env = {**os.environ, ENV_STORAGE_OPTIONS: json.dumps(opts), engine.CRASH_ENV: str(crash_after)}
    cmd = [sys.executable, "-m", "ckptfix.cli.main"]
    proc = subprocess.run([*cmd, "apply", str(plan_file), "--force"], env=env, capture_output=True, text=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    del env[engine.CRASH_ENV]
    proc = subprocess.run([*cmd, "apply", "--resume", url], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert s3_tree(s3_bucket.filesystem(), url) == expected_after(before)
    proc = subprocess.run([*cmd, "undo", url, "--force"], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert s3_tree(s3_bucket.filesystem(), url) == before


def test_printed_commands_carry_the_storage_options(s3_bucket: Any) -> None:
    """New-user trial 3: the undo `repair --apply` prints (and the fix of each finding) named the S3 checkpoint
    without --endpoint-url, so run as printed it went to AWS itself. Both carry the options given now, and the
    printed undo runs as printed."""
    import shlex

    from tests.support.cli import run_cli

    url = s3_bucket.upload_tree(sample_checkpoint(), "printed")
    endpoint = s3_bucket.storage_options["client_kwargs"]["endpoint_url"]
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
    env.pop(ENV_STORAGE_OPTIONS, None)
    given = ["--endpoint-url", endpoint, "-o", "use_listings_cache=false"]
    audit = run_cli("audit", url, *given, "-f", "json", env=env)
    fixes = [f["fix"] for f in json.loads(audit.stdout)["findings"] if "`ckptfix repair" in f["fix"]]
    assert fixes and all(
        f"`ckptfix repair {url} --endpoint-url {endpoint} -o use_listings_cache=false`" in f for f in fixes
    )
    done = run_cli("repair", url, *given, "--apply", "--force", env=env)
    assert done.returncode == 0, done.stderr
    (undo,) = [line.split("`")[1] for line in done.stdout.splitlines() if "`ckptfix undo " in line]
    assert undo.startswith(f"ckptfix undo {url} ") and undo.endswith(
        f"--endpoint-url {endpoint} -o use_listings_cache=false"
    )
    undone = run_cli(*shlex.split(undo)[1:], "--force", env=env)
    assert undone.returncode == 0, undone.stderr


def test_command_flags_mask_credentials_and_leave_out_what_the_environment_gives(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ckptfix.storage import command_flags

    monkeypatch.setenv(ENV_STORAGE_OPTIONS, json.dumps({"anon": False, "client_kwargs": {"region_name": "eu"}}))
    options = {
        "anon": False,
        "key": "AKIA",
        "secret": "s3cr3t",
        "client_kwargs": {"endpoint_url": "http://minio:9000", "region_name": "eu"},
        "config_kwargs": {"retries": {"max_attempts": 2}},
    }
    flags = command_flags(options)
    assert flags == (
        "--endpoint-url http://minio:9000 -o 'key=***' -o 'secret=***' -o config_kwargs.retries.max_attempts=2"
    )
    assert "AKIA" not in flags and "s3cr3t" not in flags and command_flags({}) == ""
