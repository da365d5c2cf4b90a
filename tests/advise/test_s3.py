"""Progress logs read from S3 (moto server) through ckptfix.storage."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ckptfix.advise import advise
from tests.advise.helpers import FIXTURES, run


@pytest.mark.s3
def test_driver_log_on_s3(s3_bucket: Any) -> None:
    log = FIXTURES / "spark-4.3.0" / "driver.log"
    url = s3_bucket.put_bytes("logs/driver.log", log.read_bytes())
    a = advise([url], s3_bucket.storage_options, concurrency=2)
    assert sorted(q.name for q in a.queries) == ["agg_hdfs", "agg_rocksdb", "agg_rocksdb_cl"]
    assert a.inputs[0].path == url and a.inputs[0].events == 9
    code, stdout, stderr = run(url, "--endpoint-url", s3_bucket.server.endpoint_url, "--format", "json")
    assert code == 0, stderr
    assert len(json.loads(stdout)["queries"]) == 3
    code, stdout, stderr = run(url + ".missing", "--endpoint-url", s3_bucket.server.endpoint_url)
    assert code == 2 and "no such file" in stderr and "Traceback" not in stderr
