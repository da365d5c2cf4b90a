"""Live: a rollback that a Delta sink would silently swallow is refused, and forcing it loses exactly the rows
ckptfix said it would; the alternative it offers (a new checkpoint, hence a new query id, starting from
`ckptfix offsets export`) loses none.

delta-spark cannot run here (its jars come from Maven, which this machine and CI cannot reach), so the sink is
a foreachBatch writer that does what ``DeltaSink.addBatch`` does (delta-io/delta, sources/DeltaSink.scala):
skip the batch when ``txnVersion(queryId) >= batchId``, else commit the rows with
``SetTransaction(queryId, batchId)`` — through delta-rs (``deltalake``), a real Delta writer, so the
transaction log ckptfix reads is a real one. Expected rows come from the input files.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

pa = pytest.importorskip("pyarrow")
deltalake = pytest.importorskip("deltalake")

from typer.testing import CliRunner  # noqa: E402

from ckptfix.audit import audit  # noqa: E402
from ckptfix.cli.main import app  # noqa: E402
from ckptfix.repair import engine  # noqa: E402
from ckptfix.repair.rollback import RollbackRefused, plan_rollback  # noqa: E402
from ckptfix.storage import Location  # noqa: E402


def _input(input_dir: Path, i: int) -> list[dict[str, Any]]:
    rows = [{"k": f"f{i}-{j}", "v": i * 10 + j} for j in range(2)]
    (input_dir / f"f{i}.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rows


def _run(spark: Any, ckpt: Path, input_dir: Path, table: Path) -> None:
    """One availableNow run, one input file per batch, into the Delta table as DeltaSink would write it."""

    def write(df: Any, batch_id: int) -> None:
        query_id = json.loads((ckpt / "metadata").read_text())["id"]
        if (table / "_delta_log").exists():
            seen = deltalake.DeltaTable(str(table)).transaction_version(query_id)
            if seen is not None and seen >= batch_id:  # DeltaSink: "Skipping already complete epoch"
                return
        rows = pa.Table.from_pylist(
            [r.asDict() for r in df.collect()], schema=pa.schema([("k", pa.string()), ("v", pa.int64())])
        )
        props = deltalake.CommitProperties(app_transactions=[deltalake.Transaction(query_id, batch_id)])
        deltalake.write_deltalake(str(table), rows, mode="append", commit_properties=props)

    query = (
        spark.readStream.schema("k STRING, v LONG")
        .option("maxFilesPerTrigger", 1)
        .json(str(input_dir))
        .writeStream.foreachBatch(write)
        .option("checkpointLocation", str(ckpt))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(180)
    assert query.exception() is None, query.exception()


def _rows(table: Path) -> list[tuple[str, int]]:
    t = deltalake.DeltaTable(str(table)).to_pyarrow_table()
    return sorted(zip(t.column("k").to_pylist(), t.column("v").to_pylist(), strict=True))


def _key(rows: list[dict[str, Any]]) -> list[tuple[str, int]]:
    return sorted((r["k"], r["v"]) for r in rows)


@pytest.mark.spark
def test_a_rollback_the_delta_sink_would_swallow(spark: Any, tmp_path: Path) -> None:
    input_dir, ckpt, table = tmp_path / "in", tmp_path / "ckpt", tmp_path / "table"
    input_dir.mkdir()
    files = [_input(input_dir, i) for i in range(4)]
    _run(spark, ckpt, input_dir, table)  # batches 0..3, one file each; txn(query id) = 3
    assert _rows(table) == _key([r for f in files for r in f])

    # the user wants batches 2..3 processed again (their rows were removed from the table) plus a new file
    deltalake.DeltaTable(str(table)).delete("k >= 'f2'")
    files.append(_input(input_dir, 4))
    with pytest.raises(RollbackRefused) as refused:
        plan_rollback(str(ckpt), 1, "4.3", sink_path=str(table), force=True)
    assert "up to 3" in str(refused.value) and f"ckptfix offsets export {ckpt} --batch 1" in str(refused.value)

    # --with-sink rolls back file sinks only: for a Delta table it names Delta's RESTORE and the version, the table
    # version before the commit whose txn for the query id is batch 2, read here from the JSON commits themselves
    query_id = json.loads((ckpt / "metadata").read_text())["id"]
    txn_of = {}
    for commit in sorted((table / "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            if "txn" in action and action["txn"]["appId"] == query_id:
                txn_of[action["txn"]["version"]] = int(commit.stem)
    restore_to = txn_of[2] - 1
    before = {p: p.read_bytes() for p in table.rglob("*") if p.is_file()}
    refused_cli = CliRunner().invoke(
        app,
        ["rollback", str(ckpt), "--to-batch", "1", "--sink", str(table), "--with-sink", "--apply", "--force"],
    )
    assert refused_cli.exit_code == 2, refused_cli.output
    (line,) = refused_cli.stderr.strip().splitlines()
    assert f"RESTORE TABLE delta.`{table}` TO VERSION {restore_to}`" in line, line
    assert {p: p.read_bytes() for p in table.rglob("*") if p.is_file()} == before

    # forced (no --sink): ckptfix's audit of the result names the loss before Spark runs ...
    forced_ckpt, forced_table = tmp_path / "forced-ckpt", tmp_path / "forced-table"
    shutil.copytree(ckpt, forced_ckpt)
    shutil.copytree(table, forced_table)
    plan = plan_rollback(str(forced_ckpt), 1, "4.3", force=True).plan
    engine.apply(plan, Location(str(forced_ckpt)), Location(str(tmp_path / "backup")), force=True)
    report = audit(str(forced_ckpt), "4.3", sink_path=str(forced_table))
    assert [f.rule_id for f in report.findings if f.rule_id.startswith("SINK-")] == ["SINK-AHEAD"]
    # ... and Spark does it: batch 2 (files 2..4) is skipped by the sink, those rows never arrive
    _run(spark, forced_ckpt, input_dir, forced_table)
    assert _rows(forced_table) == _key(files[0] + files[1])

    # the alternative ckptfix offers: a new checkpoint (a new query id) that starts after batch 1
    export = CliRunner().invoke(app, ["offsets", "export", str(ckpt), "--batch", "1", "-f", "json"])
    assert export.exit_code == 0, export.output
    done = json.dumps(json.loads(export.stdout))
    moved = tmp_path / "processed"
    moved.mkdir()
    for f in sorted(input_dir.iterdir()):
        if f.name in done:  # the files the export lists as processed move out of the input path
            f.rename(moved / f.name)
    assert sorted(p.name for p in moved.iterdir()) == ["f0.json", "f1.json"]
    _run(spark, tmp_path / "new-ckpt", input_dir, table)
    assert _rows(table) == _key([r for f in files for r in f])  # every row exactly once
