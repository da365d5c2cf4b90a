"""Avro-encoded transformWithState state (``encodingFormat=avro``) written by real PySpark 4.0.5 / 4.1.4 /
4.2.1 / 4.3.0 (tests/fixtures/formats/generate_avro.py): ckptfix's rows against the rows Spark's own
``statestore`` reader returned for the same checkpoint (recorded next to it), for every state variable kind,
timers and the change feed; and damaged Avro bytes."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any

import pytest

from ckptfix.checkpoint import Checkpoint
from ckptfix.errors import FormatError
from ckptfix.formats import avro, codec, statefile
from ckptfix.formats.unsaferow import parse_schema
from ckptfix.state.decode import Decoder, column_family_of
from ckptfix.state.read import read_changes, read_state, select
from ckptfix.state.schemas import operator_info
from tests.state import normalize as N

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "formats" / "avro"
VERSIONS = sorted(p.name[len("spark-") : -len(".json")] for p in FIXTURES.glob("spark-*.json"))


def recorded(version: str) -> dict[str, Any]:
    result: dict[str, Any] = json.loads((FIXTURES / f"spark-{version}.json").read_text())
    return result


def unpack(version: str, into: Path) -> Path:
    with tarfile.open(FIXTURES / f"spark-{version}.tar.gz") as tar:
        tar.extractall(into, filter="data")
    return into / "ckpt"


@pytest.fixture(scope="module", params=VERSIONS)
def fixture(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    version = str(request.param)
    return version, unpack(version, tmp_path_factory.mktemp(f"avro-{version}"))


def test_every_spark_version_is_recorded() -> None:
    assert {"4.0.5", "4.3.0"} <= set(VERSIONS)


def _ours(ckpt: Path, options: dict[str, str]) -> Any:
    kwargs: dict[str, Any] = {}
    if "stateVarName" in options:
        kwargs["state_var"] = options["stateVarName"]
    if options.get("readRegisteredTimers") == "true":
        kwargs["timers"] = True
    if options.get("readChangeFeed") == "true":
        return read_changes(str(ckpt), from_batch=int(options["changeStartBatchId"]), **kwargs)
    if options.get("flattenCollectionTypes") == "false":
        kwargs["flatten"] = False
    return read_state(str(ckpt), batch=int(options["batchId"]), **kwargs)


def test_rows_equal_sparks(fixture: tuple[str, Path]) -> None:
    """Every read the generator recorded: the same columns and the same rows (as multisets)."""
    pyspark_types = pytest.importorskip("pyspark.sql.types")
    version, ckpt = fixture
    reads = recorded(version)["reads"]
    assert recorded(version)["spark"] == version
    assert len(reads) == 18
    for read in reads:
        schema = pyspark_types.StructType.fromJson(read["schema"])
        ours = _ours(ckpt, read["options"])
        rows = sorted(json.dumps(N.row(r, schema)) for r in ours)
        assert ours.columns == read["columns"], read["options"]
        assert rows == read["rows"], read["options"]


def test_encoding_is_avro(fixture: tuple[str, Path]) -> None:
    _, ckpt = fixture
    sel = select(str(ckpt), state_var="cnt")
    assert sel.conf["spark.sql.streaming.stateStore.encodingFormat"] == "avro"


def _store_pairs(ckpt: Path, version: int = 1) -> tuple[list[statefile.Record], dict[str, int]]:
    """The records of ``<version>.changelog`` and the column family ids of ``1.zip``."""
    from ckptfix.formats import rocksdbzip

    ck = Checkpoint.open(str(ckpt))
    meta = rocksdbzip.parse(ck.location.read("state/0/0/1.zip"), "1.zip").metadata
    raw = codec.decompress("lz4", (ckpt / f"state/0/0/{version}.changelog").read_bytes())
    return list(statefile.iter_records(raw, "changelog", "changelog")), dict(meta.column_family_mapping or {})


def test_range_scan_timer_keys(fixture: tuple[str, Path]) -> None:
    """``$procTimers_timestampToKey`` (range-scan keys: an Avro record of marker and big-endian value binaries,
    then the grouping key) holds the timers Spark's reader shows (read from the prefix-scan family)."""
    version, ckpt = fixture
    ck = Checkpoint.open(str(ckpt))
    info = operator_info(ck, ck.state.operators[0], 0)
    sch = info.column_families["$procTimers_timestampToKey"]
    assert sch.encoding.kind == "range" and sch.encoding.ordinals == (0,)
    dec = Decoder(sch, "rocksdb", "timestampToKey", column_family=True, avro_encoded=True)
    recs, mapping = _store_pairs(ckpt)
    cf = mapping["$procTimers_timestampToKey"]
    keys = [dec.key(r.key) for r in recs if column_family_of(r.key) == cf and r.value is not None]
    spark = next(
        r for r in recorded(version)["reads"] if r["options"] == {"batchId": "0", "readRegisteredTimers": "true"}
    )
    expected = sorted(
        (row[0][1][1][0][1], row[0][1][1][1][1], row[1][1]) for row in map(json.loads, spark["rows"])
    )  # (k, g, expiration_timestamp_ms)
    assert sorted((k["key"]["k"], k["key"]["g"], k["expiryTimestampMs"]) for k in keys) == expected


def _rewrite(ckpt: Path, version: int, change: Any) -> None:
    path = ckpt / f"state/0/0/{version}.changelog"
    raw = codec.decompress("lz4", path.read_bytes())
    header = statefile.parse_changelog_header(raw)
    recs = [change(r) for r in statefile.iter_records(raw, "changelog", "changelog")]
    path.write_bytes(codec.compress("lz4", statefile.dump_changelog(recs, header.version, header.lineage)))
    crc = path.parent / f".{path.name}.crc"
    crc.unlink(missing_ok=True)


def _rich_id(ckpt: Path) -> int:
    return _store_pairs(ckpt)[1]["rich"]


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        (lambda v: v[:-5], "bytes before the end of the data"),  # truncated inside the map
        (lambda v: v[:3] + b"\x08" + v[4:], "a branch index of union [null, string]"),  # union index 4
        (lambda v: v[:3] + b"\x02\xff\xff\xff\xff\xff" + v[5:], "a string length"),  # a varint too long
        (lambda v: v + b"\x00", "the end of the Avro record"),
        (lambda v: v[:1] + b"\x07\x00" + v[3:], "value schema id 0"),
    ],
    ids=["truncated", "union-index", "varint", "trailing", "schema-id"],
)
def test_damaged_value_is_a_format_error(tmp_path: Path, damage: Any, expected: str) -> None:
    ckpt = unpack("4.3.0", tmp_path)
    cf = _rich_id(ckpt)

    def change(r: statefile.Record) -> statefile.Record:
        if r.value is not None and column_family_of(r.key) == cf:
            return statefile.Record(r.key, damage(r.value), r.op)
        return r

    _rewrite(ckpt, 1, change)
    with pytest.raises(FormatError) as info:
        list(read_changes(str(ckpt), from_batch=0, to_batch=0, state_var="rich"))
    err = info.value
    assert "state/0/0/1.changelog" in err.path and err.kind == "bad-row", err
    assert expected in err.expected or expected in err.found, err
    assert err.offset > 0
    assert f"at byte {err.offset}" in str(err)


def test_damaged_key_is_a_format_error(tmp_path: Path) -> None:
    ckpt = unpack("4.3.0", tmp_path)
    cf = _rich_id(ckpt)

    def change(r: statefile.Record) -> statefile.Record:
        if column_family_of(r.key) == cf:  # key = cf | 0x00 | schema id | [null, string] k | [null, int] g
            return statefile.Record(r.key[:-1], r.value, r.op)
        return r

    _rewrite(ckpt, 1, change)
    with pytest.raises(FormatError) as info:
        list(read_changes(str(ckpt), from_batch=0, to_batch=0, state_var="rich"))
    assert "state/0/0/1.changelog" in info.value.path
    assert "an int" in info.value.expected and "end of the data" in info.value.found


def test_unknown_encoding_still_refused(tmp_path: Path) -> None:
    """Only transformWithState state is Avro-encoded: other reads of such a checkpoint keep refusing."""
    ckpt = unpack("4.3.0", tmp_path)
    offsets = ckpt / "offsets" / "2"
    offsets.write_text(offsets.read_text().replace('encodingFormat":"avro"', 'encodingFormat":"protobuf"'))
    with pytest.raises(FormatError) as info:
        read_state(str(ckpt), state_var="cnt")
    assert info.value.kind == "unsupported-encoding" and "protobuf" in info.value.found


# ---------------------------------------------------------------- the Avro decoder alone


def _struct(ddl_fields: list[tuple[str, Any]]) -> Any:
    return parse_schema(
        {"type": "struct", "fields": [{"name": n, "type": t, "nullable": True, "metadata": {}} for n, t in ddl_fields]}
    )


def test_blocks_with_byte_sizes_and_negative_counts() -> None:
    """Spark's writer emits one block per array/map; Avro's negative block counts (with a byte size) still
    decode, as Avro's readers do."""
    schema = avro.schema_for(_struct([("a", {"type": "array", "elementType": "long", "containsNull": False})]))
    # field a: union branch 1, array: block of -2 items (byte size 2), items 1, -1, block of 1 item: 3, end
    data = bytes([0x02, 0x03, 0x04, 0x02, 0x01, 0x02, 0x06, 0x00])
    assert avro.decode(data, schema) == {"a": [1, -1, 3]}


def test_decimal_fixed_and_bounds() -> None:
    schema = avro.schema_for(_struct([("d", "decimal(4,2)")]))
    assert avro.min_bytes_for_precision(4) == 2 and avro.min_bytes_for_precision(38) == 16
    assert str(avro.decode(b"\x02\xfb\x2e", schema)["d"]) == "-12.34"
    with pytest.raises(FormatError) as info:
        avro.decode(b"\x02\x27\x10", schema, "f", 100)  # 10000: five digits
    assert info.value.offset == 101 and "at most 4 digits" in info.value.expected


def test_short_and_byte_ranges() -> None:
    schema = avro.schema_for(_struct([("s", "short"), ("b", "byte")]))
    assert avro.decode(b"\x02\xff\xff\x03\x02\xff\x01", schema) == {"s": -32768, "b": -128}
    with pytest.raises(FormatError):
        avro.decode(b"\x02\x80\x80\x04\x00", schema)  # 32768


def test_map_keys_must_be_strings() -> None:
    bad = _struct([("m", {"type": "map", "keyType": "integer", "valueType": "long", "valueContainsNull": True})])
    with pytest.raises(FormatError) as info:
        avro.schema_for(bad, "schema-file")
    assert info.value.kind == "bad-schema" and info.value.path == "schema-file"


def test_cli_state_read_and_changes(tmp_path: Path) -> None:
    """``ckptfix state read`` / ``state changes`` on the Avro checkpoint: the JSON lines of the value state and
    the timers (Spark's reader gave 4 rows each after batch 2, 7 changes of ``rich`` from batch 0)."""
    from typer.testing import CliRunner

    from ckptfix.cli.main import app

    ckpt = unpack("4.3.0", tmp_path)
    runner = CliRunner()
    result = runner.invoke(app, ["state", "read", str(ckpt), "--state-var", "rich", "--jobs", "1"])
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert len(lines) == 4
    k1 = next(row for row in lines if row["key"] == {"k": "k1", "g": 1})
    assert k1["value"]["m"] == {"a": 0.5, "b": -1.0} and k1["value"]["sarr"] == [{"a": 5}, None, {"a": None}]
    timers = runner.invoke(app, ["state", "read", str(ckpt), "--timers", "--jobs", "1"])
    assert timers.exit_code == 0 and timers.stdout.count("expiration_timestamp_ms") == 4, timers.output
    changes = runner.invoke(app, ["state", "changes", str(ckpt), "--from", "0", "--state-var", "rich", "--jobs", "1"])
    assert changes.exit_code == 0 and changes.stdout.count('"change_type"') == 7, changes.output


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_cli_exports_an_unflattened_map_state(tmp_path: Path, fmt: str) -> None:
    """``state read --state-var mp --no-flatten`` failed with an internal error in JSON (``'tuple' object has no
    attribute 'get'``) and Parquet: the reader holds a struct map key as a tuple of (name, value) pairs. The map of
    k1 after batch 0, as Spark's reader recorded it: {(k1, 1): (2, 2024-01-01), (k1-other, -1): (null, null)}."""
    from typer.testing import CliRunner

    from ckptfix.cli.main import app

    ckpt = unpack("4.3.0", tmp_path)
    out = tmp_path / f"mp.{fmt}"
    args = ["state", "read", str(ckpt), "--state-var", "mp", "--no-flatten", "--batch", "0", "--out", str(out)]
    result = CliRunner().invoke(app, [*args, "--jobs", "1"])
    assert result.exit_code == 0, result.output
    if fmt == "jsonl":
        rows = [json.loads(line) for line in out.read_text().splitlines()]
        k1 = next(r for r in rows if r["key"] == {"k": "k1", "g": 1})
        assert sorted(k1["map_value"], key=lambda e: e["key"]["uk"]) == [
            {"key": {"uk": "k1", "ui": 1}, "value": {"c": 2, "last": "2024-01-01"}},
            {"key": {"uk": "k1-other", "ui": -1}, "value": {"c": None, "last": None}},
        ]
        return
    import datetime

    import pyarrow.parquet as pq

    table = pq.read_table(out).to_pylist()
    k1 = next(r for r in table if r["key"] == {"k": "k1", "g": 1})
    assert sorted(k1["map_value"], key=lambda e: e[0]["uk"]) == [
        ({"uk": "k1", "ui": 1}, {"c": 2, "last": datetime.date(2024, 1, 1)}),
        ({"uk": "k1-other", "ui": -1}, {"c": None, "last": None}),
    ]
