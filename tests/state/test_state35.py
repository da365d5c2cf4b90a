"""Reading the committed Spark 3.5.9 golden checkpoints (tests/fixtures/state35, see generate.py and README.md
there) at every committed batch, against the state rows derived from Spark 3.5's own output.

The expected side is only what the fixtures record (Spark's output, offset-log watermarks, Spark's reported
schemas); this file maps ckptfix's decoded rows onto that shape, never the other way round. No Spark needed.
"""

from __future__ import annotations

import json
import tarfile
from collections import Counter
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ckptfix.cli.main import app
from ckptfix.state.export import parse_json_line, to_json_line
from ckptfix.state.read import read_changes, read_state

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "state35"
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def load(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / f"{name}.expected.json").read_text())


SCENARIOS = sorted(p.name[: -len(".expected.json")] for p in FIXTURES.glob("*.expected.json"))
CASES = [(name, b["batch_id"]) for name in SCENARIOS for b in load(name)["batches"] if b["committed"]]


def extract(name: str, dest: Path) -> Path:
    """Unpack ``<name>.tar.gz`` into dest; returns the checkpoint dir."""
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(FIXTURES / f"{name}.tar.gz") as tar:
        for m in tar.getmembers():  # plain files and dirs only, relative paths
            assert (m.isfile() or m.isdir()) and not m.name.startswith("/") and ".." not in m.name.split("/")
        tar.extractall(dest, filter="data")
    return dest / "ckpt"


@pytest.fixture(scope="module")
def unpacked(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("state35")
    return {name: extract(name, base / name) for name in SCENARIOS}


def micros(value: datetime | None) -> int | None:
    if value is None:
        return None
    assert isinstance(value, datetime) and value.tzinfo is not None, value
    return (value - EPOCH) // (datetime.resolution)  # exact integer microseconds


def canon(rows: list[dict[str, Any]]) -> Counter[str]:
    """Rows as a multiset of canonical JSON (keeps 1 vs 1.0 vs true apart)."""
    return Counter(json.dumps(r, sort_keys=True, default=str) for r in rows)


def assert_same(got: list[dict[str, Any]], want: list[dict[str, Any]], what: str) -> None:
    g, w = canon(got), canon(want)
    missing, extra = sorted((w - g).elements()), sorted((g - w).elements())
    assert g == w, f"{what}\n  missing (expected, not read): {missing}\n  extra (read, not expected): {extra}"


def field_names(schema: dict[str, Any]) -> list[str]:
    return [f["name"] for f in schema["fields"]]


def base_name(col: str) -> str:
    """ckptfix renders repeated field names as 'sum#2'; Spark's schema has plain 'sum'."""
    return col.split("#", 1)[0]


# ------------------------------------------------------------------ mapping ckptfix rows -> expected shape

AGG_BUFFER = [  # value_buffer_derived keys, in the order of Spark's getStateValueSchema
    "count", "sum_v", "sum_d.sum", "sum_d.isEmpty", "max_ts_micros",
    "first_s.first", "first_s.valueSet", "avg_v.sum", "avg_v.count",
]  # fmt: skip


def agg_buffer(value: dict[str, Any], exp: dict[str, Any]) -> dict[str, Any]:
    schema = exp["operators"][0]["getStateValueSchema"]
    assert [base_name(c) for c in value] == field_names(schema), (list(value), field_names(schema))
    vals = list(value.values())
    out = dict(zip(AGG_BUFFER, vals, strict=True))
    sd = out["sum_d.sum"]
    assert sd is None or isinstance(sd, Decimal), sd
    out["sum_d.sum"] = None if sd is None else str(sd)  # decimal(20,2): text keeps the scale
    out["max_ts_micros"] = micros(out["max_ts_micros"])
    return out


def got_rows(name: str, exp: dict[str, Any], rows: list[dict[str, Any]], side: str | None = None) -> list[dict]:
    out = []
    for r in rows:
        key, value = r["key"], r["value"]
        assert r["partition_id"] in range(exp["operators"][0]["num_partitions"]), r
        if name.startswith("agg_"):
            out.append({"key": key, "value_buffer_derived": agg_buffer(value, exp)})
        elif name == "dedup_hdfs":
            assert all(v is None for v in value.values()), value  # dedup stores a dummy (null) value
            out.append({"key": key})
        elif name == "dedup_wm_hdfs":
            assert all(v is None for v in value.values()), value
            assert list(key) == ["id", "ts"], key
            out.append({"key": {"id": key["id"], "ts_micros": micros(key["ts"])}})
        elif name == "session_hdfs":
            op = next(o for o in exp["operators"] if "getStateValueSchema" in o)
            assert list(key) == field_names(op["getStateKeySchema"]) == ["k", "sessionStartTime"], key
            assert list(value) == field_names(op["getStateValueSchema"]), value
            win = value["session_window"]
            assert win["start"] == key["sessionStartTime"] and value["k"] == key["k"], r
            out.append(
                {
                    "key": {"k": key["k"]},
                    "session_start_micros": micros(win["start"]),
                    "session_end_micros": micros(win["end"]),
                    "count": value["count"],
                }
            )
        elif name == "join_hdfs":
            p = side[0]  # type: ignore[index]
            # Spark 3.5 names the join key columns field0..; the one key column is lk / rk
            assert list(key) == ["field0"], key
            assert list(value) == [f"{p}id", f"{p}k", f"{p}ts", "matched"], value
            out.append(
                {
                    "key": {f"{p}k": key["field0"]},
                    "value": {
                        f"{p}id": value[f"{p}id"],
                        f"{p}k": value[f"{p}k"],
                        f"{p}ts_micros": micros(value[f"{p}ts"]),
                    },
                    "matched_derived": value["matched"],
                }
            )
        elif name == "fmgws_hdfs":
            # Spark 3.5's state schema (operators[0].stateSchema) has only groupState under NoTimeout: the
            # timeout timestamp is not stored, which is NO_TIMESTAMP (-1)
            assert list(value) == field_names(exp["operators"][0]["stateSchema"]) == ["groupState"], value
            out.append({"key": key, "state": value["groupState"], "timeout_timestamp": -1})
        elif name == "corrupt_snapshot_hdfs":
            assert list(value) == field_names(exp["operators"][0]["getStateValueSchema"]) == ["count", "sum"], value
            out.append({"key": key, "value": {"cnt": value["count"], "total": value["sum"]}})
        else:
            raise AssertionError(f"no mapping for scenario {name}")
    return out


def want_rows(name: str, state: dict[str, Any], side: str | None = None) -> list[dict]:
    """The expected rows, narrowed to the fields compared (nothing computed here)."""
    if name.startswith("agg_"):
        return [{"key": r["key"], "value_buffer_derived": r["value_buffer_derived"]} for r in state["rows"]]
    if name == "dedup_wm_hdfs":
        return [{"key": {"id": r["key"]["id"], "ts_micros": r["key"]["ts_micros"]}} for r in state["rows"]]
    if name == "session_hdfs":
        keep = ("key", "session_start_micros", "session_end_micros", "count")
        return [{k: r[k] for k in keep} for r in state["rows"]]
    if name == "join_hdfs":
        p = side[0]  # type: ignore[index]
        return [
            {
                "key": r["key"],
                "value": {
                    f"{p}id": r["value"][f"{p}id"],
                    f"{p}k": r["value"][f"{p}k"],
                    f"{p}ts_micros": r["value"][f"{p}ts_micros"],
                },
                "matched_derived": r["matched_derived"],
            }
            for r in state[side]
        ]
    return state["rows"]


# ------------------------------------------------------------------ every scenario, every committed batch


def test_every_committed_batch_is_covered() -> None:
    assert len(SCENARIOS) == 9, SCENARIOS
    for name in SCENARIOS:
        exp = load(name)
        committed = [b["batch_id"] for b in exp["batches"] if b["committed"]]
        assert committed and max(committed) == exp["latest_committed_batch"]
        assert sorted(exp["state"], key=int) == [str(b) for b in committed], name


@pytest.mark.parametrize(("name", "batch"), CASES, ids=[f"{n}-b{b}" for n, b in CASES])
def test_state_equals_spark35(name: str, batch: int, unpacked: dict[str, Path]) -> None:
    exp = load(name)
    state = exp["state"][str(batch)]
    ckpt = str(unpacked[name])
    if name == "join_hdfs":
        for side in ("left", "right"):
            # the matched flags live in the keyWithIndexToValue store (Spark 4.x's joinSide view drops them)
            read = read_state(ckpt, batch=batch, store_name=f"{side}-keyWithIndexToValue")
            assert read.version == state["version"] == batch + 1
            stored = list(read)
            for r in stored:
                r["key"].pop("index")
            assert_same(got_rows(name, exp, stored, side), want_rows(name, state, side), f"{name} b{batch} {side}")
            joined = list(read_state(ckpt, batch=batch, join_side=side))
            without = [{**r, "value": {k: v for k, v in r["value"].items() if k != "matched"}} for r in stored]
            assert sorted(map(to_json_line, joined)) == sorted(map(to_json_line, without))
        return
    read = read_state(ckpt, batch=batch)
    assert read.version == state["version"] == batch + 1
    assert_same(got_rows(name, exp, list(read)), want_rows(name, state), f"{name} batch {batch}")


# ------------------------------------------------------------------ change feed (agg_hdfs)


def updated_in(exp: dict[str, Any], b: int) -> list[dict[str, Any]]:
    """Keys put in batch b: a key with input in batch b changes its output row (cnt grows), other keys keep
    theirs; complete mode puts exactly the keys of the batch and removes nothing."""
    now = {r["key"]["k"]: r for r in exp["state"][str(b)]["rows"]}
    before = {r["key"]["k"]: r for r in exp["state"][str(b - 1)]["rows"]} if b > 0 else {}
    return [
        {"batch_id": b, "change_type": "update", "key": r["key"], "value_buffer_derived": r["value_buffer_derived"]}
        for k, r in now.items()
        if k not in before or before[k]["output"] != r["output"]
    ]


def input_keys(ckpt: Path, b: int) -> set[str]:
    lines = (ckpt.parent / "input" / f"part-{b:04d}.json").read_text().splitlines()
    return {json.loads(line)["k"] for line in lines}


@pytest.mark.parametrize(("start", "end"), [(0, 4), (2, 4), (1, 3), (3, 3)])
def test_agg_hdfs_change_feed(start: int, end: int, unpacked: dict[str, Path]) -> None:
    exp = load("agg_hdfs")
    ckpt = unpacked["agg_hdfs"]
    got = [
        {
            "batch_id": r["batch_id"],
            "change_type": r["change_type"],
            "key": r["key"],
            "value_buffer_derived": agg_buffer(r["value"], exp),
        }
        for r in read_changes(str(ckpt), from_batch=start, to_batch=end)
    ]
    want = [row for b in range(start, end + 1) for row in updated_in(exp, b)]
    for b in range(start, end + 1):  # the output-derived keys are exactly the keys of input file b
        assert {r["key"]["k"] for r in updated_in(exp, b)} == input_keys(ckpt, b)
    assert_same(got, want, f"agg_hdfs changes {start}..{end}")


# ------------------------------------------------------------------ corrupt snapshot: read fails, rebuild, read

CS = "corrupt_snapshot_hdfs"


def flip(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))


def corrupt_like_recorded(ckpt: Path, variant: str) -> dict[str, Any]:
    outcome = load(CS)["outcomes"][f"newest_snapshot_flipped_byte_{variant}"]
    target = ckpt / outcome["corrupted_file"]
    flip(target, outcome["flipped_offset"])
    if variant == "no_crc":
        target.with_name(f".{target.name}.crc").unlink()
    return outcome


@pytest.mark.parametrize("variant", ["stale_crc", "no_crc"])
def test_corrupt_snapshot_rebuild(variant: str, tmp_path: Path) -> None:
    exp = load(CS)
    last = exp["latest_committed_batch"]
    ckpt = extract(CS, tmp_path / CS)
    outcome = corrupt_like_recorded(ckpt, variant)
    # what Spark 3.5 did with this corruption (recorded by generate.py): it failed to restart
    assert outcome["ok"] is False and outcome["root_message_first_line"] == "Stream is corrupted"
    snap = outcome["corrupted_file"]
    assert snap == exp["snapshots"][-1]

    runner = CliRunner()
    bad = runner.invoke(app, ["state", "read", str(ckpt), "--batch", str(last)])
    assert bad.exit_code != 0
    assert snap.rsplit("/", 1)[-1] in bad.output and f"/{snap.split('/')[-2]}/" in bad.output, bad.output

    done = runner.invoke(
        app,
        ["state", "rebuild", str(ckpt), "--version", str(last + 1), "--target-spark", "3.5",
         "--apply", "--idle-seconds", "0"],
    )  # fmt: skip
    assert done.exit_code == 0, done.output

    good = runner.invoke(app, ["state", "read", str(ckpt), "--batch", str(last)])
    assert good.exit_code == 0, good.output
    rows = [json.loads(line) for line in good.stdout.splitlines() if line.strip()]
    got = [{"key": r["key"], "value": {"cnt": r["value"]["count"], "total": r["value"]["sum"]}} for r in rows]
    assert_same(got, exp["state"][str(last)]["rows"], f"{CS} after rebuild")
    assert_same(got_rows(CS, exp, list(read_state(str(ckpt), batch=last))), exp["state"][str(last)]["rows"], CS)

    # the committed evidence that Spark 3.5.9 restarted from a ckptfix-written snapshot (prove_rebuild.py)
    proof = exp["outcomes"].get(f"after_rebuild_{variant}")
    assert proof is not None, "run tests/fixtures/state35/prove_rebuild.py"
    assert proof["restarted"] is True and proof["rows_equal_uncorrupted"] is True, proof
    assert proof["rebuilt_file"] == f"{snap.rsplit('/', 1)[0]}/{last + 1}.snapshot"
    assert (ckpt / proof["rebuilt_file"]).is_file() and proof["spark_version"].startswith("3.5.")
    assert sorted(proof["rows"], key=lambda r: r["k"]) == sorted(proof["uncorrupted_rows"], key=lambda r: r["k"])
    # the state ckptfix wrote there then is what it writes now (same rows)
    assert_same(proof["rebuilt_state_rows"], got, f"{CS} recorded rebuilt rows")


def test_corrupt_snapshot_fixture_is_intact(tmp_path: Path) -> None:
    ckpt = extract(CS, tmp_path / CS)
    exp = load(CS)
    assert sorted(str(p.relative_to(ckpt)) for p in (ckpt / "state").rglob("*.snapshot")) == exp["snapshots"]
    assert list(read_state(str(ckpt), batch=exp["latest_committed_batch"]))  # the tarball itself is not corrupt


RC = "agg_rocksdb_changelog"


def test_rocksdb_changelog_corrupt_zip_rebuild(tmp_path: Path) -> None:
    exp = load(RC)
    last = exp["latest_committed_batch"]
    ckpt = extract(RC, tmp_path / RC)
    before = exp["outcomes"]["newest_zip_flipped_byte"]
    # Spark 3.5.9 on this corruption, no repair: the stale Hadoop .crc of the zip trips first
    assert before["restarted"] is False and before["root_exception_class"] == "org.apache.hadoop.fs.ChecksumException"
    no_crc = exp["outcomes"]["newest_zip_flipped_byte_no_crc"]  # sidecar deleted: the zip itself fails to inflate
    assert no_crc["restarted"] is False and no_crc["root_exception_class"] == "java.util.zip.ZipException"
    assert no_crc["corrupted_file"] == before["corrupted_file"] and no_crc["flipped_offset"] == before["flipped_offset"]
    proof = exp["outcomes"]["after_rebuild_corrupt_zip"]
    assert proof["corrupted_file"] == before["corrupted_file"] == f"state/0/1/{last}.zip"
    flip(ckpt / proof["corrupted_file"], proof["flipped_offset"])

    runner = CliRunner()
    bad = runner.invoke(app, ["state", "read", str(ckpt), "--batch", str(last)])
    assert bad.exit_code != 0 and f"state/0/1/{last}.zip" in bad.output, bad.output
    done = runner.invoke(
        app,
        ["state", "rebuild", str(ckpt), "--version", str(last + 1), "--target-spark", "3.5",
         "--apply", "--idle-seconds", "0"],
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    assert (ckpt / proof["rebuilt_file"]).is_file()
    read = read_state(str(ckpt), batch=last)
    assert_same(got_rows(RC, exp, list(read)), want_rows(RC, exp["state"][str(last)]), f"{RC} after rebuild")
    assert read.chains[1] == f"{last + 1}.zip", read.chains  # filled as read

    good = runner.invoke(app, ["state", "read", str(ckpt), "--batch", str(last)])
    assert good.exit_code == 0, good.output
    cli_rows = [parse_json_line(line) for line in good.stdout.splitlines() if line.strip()]
    assert_same([{"key": r["key"], "value": r["value"]} for r in cli_rows], proof["rebuilt_state_rows"], RC)

    # committed evidence (prove_rebuild.py): Spark 3.5.9 restarted from the ckptfix-written zip + SSTs
    assert proof["spark_version"].startswith("3.5.") and proof["restarted"] is True
    assert proof["rows_equal_uncorrupted"] is True and proof["rows"] == proof["uncorrupted_rows"]
    assert proof["last_commit_after_restart"] == last + 1
