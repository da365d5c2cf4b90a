"""A create-only write on S3 whose answer is lost (found by the battery's faulty S3 proxy, bench/battery/faults.py):
moto carries the conditional PUT out, the connection closes before the answer, botocore retries, and the retry is
refused (412) by the first attempt's own object. Before: FileExistsError, so `apply` reported its own lock as
"another ckptfix run holds this checkpoint" and a run's plan.json or a created log file as written concurrently.
Now the write is recognised by its bytes; an object with other bytes is still refused."""

from __future__ import annotations

from typing import Any

import pytest

from bench.battery.faults import FaultProxy
from ckptfix.repair import engine
from ckptfix.storage import Location

pytestmark = pytest.mark.s3
RETRIES = {"retries": {"max_attempts": 4, "mode": "standard"}}


def _through(proxy: FaultProxy, s3_bucket: Any, prefix: str) -> Location:
    options = {**s3_bucket.storage_options, "client_kwargs": {"endpoint_url": proxy.endpoint}, "config_kwargs": RETRIES}
    return Location(f"{s3_bucket.url}/{prefix}", options)


def test_create_whose_answer_is_lost_succeeds(s3_bucket: Any) -> None:
    proxy = FaultProxy(s3_bucket.server.endpoint_url, 0.0, script=[("PUT", "drop")])
    try:
        loc = _through(proxy, s3_bucket, "ckpt")
        loc.create_exclusive("offsets/5", b"v1\nnew")
        assert proxy.injected["drop"] == 1  # the answer to the first PUT was lost, the retry answered 412
        assert s3_bucket.filesystem().cat_file(f"{s3_bucket.name}/ckpt/offsets/5") == b"v1\nnew"
        # another writer's object (other bytes) is still refused, answer lost or not
        proxy.script = [("PUT", "drop")]
        with pytest.raises(FileExistsError, match="offsets/5: expected no file, found one"):
            loc.create_exclusive("offsets/5", b"v1\nother")
    finally:
        proxy.close()


def test_apply_whose_lock_answer_is_lost_takes_its_own_lock(s3_bucket: Any) -> None:
    proxy = FaultProxy(s3_bucket.server.endpoint_url, 0.0, script=[("PUT", "drop")])
    try:
        backup = _through(proxy, s3_bucket, "ckpt/_ckptfix")
        with engine.locked(backup, "apply"):
            assert proxy.injected["drop"] == 1
            held = s3_bucket.filesystem().cat_file(f"{s3_bucket.name}/ckpt/_ckptfix/lock")
            assert b'"command": "apply"' in held
        assert not s3_bucket.filesystem().exists(f"{s3_bucket.name}/ckpt/_ckptfix/lock")
    finally:
        proxy.close()
