"""--key-schema/--value-schema never silently win over a schema the checkpoint stores (issue 15). On Spark
3.5.9's aggregation checkpoint (tests/fixtures/state35/agg_hdfs: key ``k STRING``, its stored schema file): a
schema that lays values out differently is refused, showing both; a renamed field is accepted (Spark's own check
compares by position); --force-schema overrides; with no stored schema the flags are used."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from typer.testing import CliRunner

from ckptfix.cli.main import app
from tests.state.test_state35 import extract


def read(ckpt: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["state", "read", str(ckpt), *args])
    return result.exit_code, result.stdout, result.stderr


def test_a_disagreeing_schema_is_refused_showing_both(tmp_path: Path) -> None:
    ckpt = extract("agg_hdfs", tmp_path)
    code, out, err = read(ckpt, "--key-schema", "k INT")
    assert code == 2 and out == ""
    assert "struct<k:int>" in err and "struct<k:string>" in err and "state/0/0/_metadata/schema" in err
    assert "--force-schema" in err
    code, _, err = read(ckpt, "--value-schema", "cnt BIGINT")
    assert code == 2 and "--value-schema struct<cnt:bigint>" in err


def test_names_may_differ_and_force_overrides(tmp_path: Path) -> None:
    ckpt = extract("agg_hdfs", tmp_path)
    code, out, _ = read(ckpt, "--key-schema", "name STRING")
    assert code == 0
    rows = [json.loads(line) for line in out.splitlines()]
    assert rows and all(set(r["key"]) == {"name"} for r in rows)
    code, out, _ = read(ckpt, "--key-schema", "k INT", "--force-schema")
    assert code == 0 and all("k" in json.loads(line)["key"] for line in out.splitlines())


def test_without_a_stored_schema_the_flags_are_used(tmp_path: Path) -> None:
    ckpt = extract("agg_hdfs", tmp_path)
    _, stored, _ = read(ckpt)
    for d in ckpt.glob("state/0/*/_metadata"):
        shutil.rmtree(d)
    code, _, err = read(ckpt)
    assert code == 2 and "--key-schema" in err  # nothing to decode with
    _, out, _ = read(ckpt)
    key = "k STRING"
    value = (
        "count BIGINT, sum BIGINT, sum2 DECIMAL(20,2), isEmpty BOOLEAN, max TIMESTAMP, first STRING, "
        "valueSet BOOLEAN, sum7 DOUBLE, count8 BIGINT"
    )
    code, out, err = read(ckpt, "--key-schema", key, "--value-schema", value)
    assert code == 0, err
    assert sorted(json.loads(x)["key"]["k"] for x in out.splitlines()) == sorted(
        json.loads(x)["key"]["k"] for x in stored.splitlines()
    )
