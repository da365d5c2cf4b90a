"""The bulk (columnar) state reader against the row-by-row one, on every real checkpoint in
tests/fixtures: the same rows in the same order with the same Arrow types, the same JSON lines,
and the same error where a read fails. The row-by-row decoder is the reference (it is what every
other state test checks against Spark); the bulk path must change nothing but speed."""

from __future__ import annotations

import datetime as dt
import io
import tarfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ckptfix.checkpoint import Checkpoint
from ckptfix.errors import CkptfixError, UsageError
from ckptfix.formats.unsaferow import decode_row, encode_row, parse_schema
from ckptfix.state import export
from ckptfix.state.decode import decode_columns
from ckptfix.state.read import read_changes, read_state, select

pa = pytest.importorskip("pyarrow")

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
TARBALLS = sorted(FIXTURES.rglob("*.tar.gz"))
DIRS = sorted(
    {p.parent for p in FIXTURES.glob("*/*/state") if p.is_dir()} | {p.parent for p in FIXTURES.glob("*/state")}
)


def _struct(name: str, type_: str) -> Any:
    return parse_schema({"type": "struct", "fields": [{"name": name, "type": type_, "nullable": True, "metadata": {}}]})


# RocksDB fixtures written without a schema file: the schemas their generator used (as --key-schema gives them)
GIVEN = {
    "formats/rocksdb": {"key_schema": _struct("k", "string"), "value_schema": _struct("count", "long")},
    "formats/rocksdb_v2": {"key_schema": _struct("k", "string"), "value_schema": _struct("count", "long")},
}


def _unpack(tarball: Path, dest: Path) -> list[Path]:
    with tarfile.open(tarball) as tar:
        tar.extractall(dest, filter="data")
    return sorted(p.parent for p in dest.rglob("state") if p.is_dir() and (p.parent / "offsets").is_dir())


def _selections(ckpt: Path) -> list[dict[str, Any]]:
    """Every (operator, version, store/side/variable) a reader can be asked for."""
    model = Checkpoint.open(str(ckpt))
    latest = model.commits.latest
    out: list[dict[str, Any]] = []
    if latest is None:  # fixtures of state files alone: every version a file names
        names = [f.name.split(".")[0].split("_")[0] for f in (ckpt / "state").rglob("*.*") if f.is_file()]
        latest = max((int(n) for n in names if n.isdigit()), default=0) - 1
    for op in sorted(model.state.operators):
        variants: list[dict[str, Any]] = [{}, {"join_side": "left"}, {"join_side": "right"}]
        try:
            info = select(model, operator=op).info
        except CkptfixError:
            info = None
        if info is not None and info.is_tws:
            variants += [{"state_var": n} for n in info.column_families if not n.startswith("$")]
            variants.append({"timers": True})
        for version in range(1, latest + 2):
            out += [{"operator": op, "version": version, **extra} for extra in variants]
    return out


def _change_selections(ckpt: Path) -> list[dict[str, Any]]:
    """Every (operator, store, first and last batch) a change feed can be asked for."""
    model = Checkpoint.open(str(ckpt))
    latest = model.commits.latest
    if latest is None:  # fixtures of state files alone: every version a file names
        names = [f.name.split(".")[0].split("_")[0] for f in (ckpt / "state").rglob("*.*") if f.is_file()]
        latest = max((int(n) for n in names if n.isdigit()), default=0) - 1
    out: list[dict[str, Any]] = []
    for op in sorted(model.state.operators):
        names = sorted(model.state.operators[op].store_names) or ["default"]
        for name in names:
            for last in range(latest + 1):
                for first in sorted({0, last}):
                    out.append({"operator": op, "store_name": name, "from_batch": first, "to_batch": last})
    return out


def _outcome(ckpt: Path, bulk: bool, given: dict[str, Any], sel: dict[str, Any]) -> tuple[str, Any, str, int]:
    """('ok', Arrow table, JSON lines, Arrow batches used) or ('error', message, '', 0)."""
    try:
        read = read_changes(str(ckpt), **given, **sel) if "from_batch" in sel else read_state(str(ckpt), **given, **sel)
        if bulk:
            items = list(read.rows.batches())
            used = sum(1 for i in items if isinstance(i, pa.RecordBatch))
            table = export.arrow_table(_Batches(items), read.columns, read.schemas)
            text = io.StringIO()
            export.write_jsonl(_Batches(items), text, read.columns, read.schemas)
            return "ok", table, text.getvalue(), used
        rows = list(read.rows)
        line = export.JsonLines(read.columns, read.schemas)
        return "ok", export.arrow_table(rows, read.columns, read.schemas), "".join(map(line, rows)), 0
    except UsageError as exc:
        return "usage", str(exc), "", 0
    except CkptfixError as exc:
        return "error", f"{type(exc).__name__}: {exc}", "", 0


class _Batches(list):  # type: ignore[type-arg]
    """Batches already read, offered the way :class:`ckptfix.state.read.Rows` offers them."""

    def batches(self) -> Any:
        return iter(self)


def _compare(ckpt: Path, given: dict[str, Any], changes: bool = False) -> tuple[int, int]:
    """(reads compared, reads the bulk path decoded); ``changes``: the change feeds instead of the reads."""
    compared = bulk_used = 0
    for sel in _change_selections(ckpt) if changes else _selections(ckpt):
        slow = _outcome(ckpt, False, given, sel)
        fast = _outcome(ckpt, True, given, sel)
        assert fast[0] == slow[0], (ckpt, sel, slow[1] if slow[0] != "ok" else "rows", fast[1])
        if slow[0] != "ok":
            assert fast[1] == slow[1], (ckpt, sel)
            continue
        assert fast[1].schema == slow[1].schema, (ckpt, sel)
        assert _plain(fast[1].to_pylist()) == _plain(slow[1].to_pylist()), (ckpt, sel)
        assert fast[2] == slow[2], (ckpt, sel)
        compared += 1
        bulk_used += fast[3] > 0
    return compared, bulk_used


@pytest.mark.parametrize("ckpt", DIRS, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_bulk_equals_row_by_row_on_fixture_dirs(ckpt: Path) -> None:
    _compare(ckpt, GIVEN.get(str(ckpt.relative_to(FIXTURES)), {}))


@pytest.mark.parametrize("tarball", TARBALLS, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_bulk_equals_row_by_row_on_fixture_tarballs(tarball: Path, tmp_path: Path) -> None:
    for ckpt in _unpack(tarball, tmp_path):
        _compare(ckpt, {})


@pytest.mark.parametrize("ckpt", DIRS, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_bulk_change_feed_equals_row_by_row_on_fixture_dirs(ckpt: Path) -> None:
    _compare(ckpt, GIVEN.get(str(ckpt.relative_to(FIXTURES)), {}), changes=True)


@pytest.mark.parametrize("tarball", TARBALLS, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_bulk_change_feed_equals_row_by_row_on_fixture_tarballs(tarball: Path, tmp_path: Path) -> None:
    for ckpt in _unpack(tarball, tmp_path):
        _compare(ckpt, {}, changes=True)


def test_bulk_path_is_taken_on_plain_stores() -> None:
    """The comparisons above prove something only if the bulk path runs: it does for the HDFS
    (snapshots + deltas) and RocksDB (changelogs, zip) aggregation fixtures at every version."""
    assert _compare(FIXTURES / "formats" / "hdfs", {}) == (4, 4)
    assert _compare(FIXTURES / "formats" / "rocksdb", GIVEN["formats/rocksdb"]) == (4, 4)
    # change feeds: batches 0..b and b..b for b = 0..3 (7 feeds), every file of them decoded in bulk
    assert _compare(FIXTURES / "formats" / "hdfs", {}, changes=True) == (7, 7)
    assert _compare(FIXTURES / "formats" / "rocksdb", GIVEN["formats/rocksdb"], changes=True) == (7, 7)


def test_bulk_change_feed_shows_removals_as_the_row_decoder_does(tmp_path: Path) -> None:
    """Removals (a deduplication's watermark evicting keys, Spark 3.5.9): null values in the bulk columns."""
    (ckpt,) = _unpack(FIXTURES / "state35" / "dedup_wm_hdfs.tar.gz", tmp_path)
    last = Checkpoint.open(str(ckpt)).commits.latest
    bulk = read_changes(str(ckpt), from_batch=0, to_batch=last)
    items = list(bulk.rows.batches())
    assert items and all(isinstance(i, pa.RecordBatch) for i in items)
    table = pa.Table.from_batches(items)
    deletes = [r for r in table.to_pylist() if r["change_type"] == "delete"]
    assert deletes and all(r["value"] is None for r in deletes)
    rows = list(read_changes(str(ckpt), from_batch=0, to_batch=last))
    assert len(rows) == table.num_rows
    assert [r["change_type"] for r in rows] == table.column("change_type").to_pylist()
    assert [r["value"] is None for r in rows] == [v is None for v in table.column("value").to_pylist()]


# ---------------------------------------------------------------- property: any row of the types decoded in bulk

ATOMIC = {
    "boolean": st.booleans(),
    "byte": st.integers(-(2**7), 2**7 - 1),
    "short": st.integers(-(2**15), 2**15 - 1),
    "integer": st.integers(-(2**31), 2**31 - 1),
    "long": st.integers(-(2**63), 2**63 - 1),
    "float": st.floats(width=32, allow_nan=True, allow_infinity=True),
    "double": st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from([-0.0, 0.0, float("nan")]),
    "date": st.dates(),
    "timestamp": st.datetimes(timezones=st.just(dt.timezone.utc)),
    "timestamp_ntz": st.datetimes(),
    "string": st.text() | st.sampled_from(["", "é", "日本語", "\x00", '"\\\n', "\U0001f600"]),
    "binary": st.binary(),
    "decimal(10,2)": st.decimals(min_value=-(10**8) + 1, max_value=10**8 - 1, places=2, allow_nan=False),
    "decimal(18,0)": st.decimals(min_value=-(10**18) + 1, max_value=10**18 - 1, places=0, allow_nan=False),
    "void": st.none(),
    "string collate UTF8_LCASE": st.text(),
}


@st.composite
def _rows(draw: Any) -> tuple[Any, list[bytes]]:
    names = draw(st.lists(st.sampled_from(sorted(ATOMIC)), min_size=1, max_size=6))
    fields = [{"name": f"f{i}", "type": t, "nullable": True, "metadata": {}} for i, t in enumerate(names)]
    schema = parse_schema({"type": "struct", "fields": fields})
    rows = draw(st.lists(st.tuples(*(st.none() | ATOMIC[t] for t in names)), min_size=0, max_size=30))
    return schema, [encode_row(list(r), schema) for r in rows]


def _plain(values: list[Any]) -> list[Any]:
    """Values (rows, structs) compared with NaN equal to NaN and -0.0 unequal to 0.0."""
    return [repr(v) if isinstance(v, float) else _plain(list(v.values())) if isinstance(v, dict) else v for v in values]


@settings(max_examples=300, deadline=None)
@given(_rows())
def test_bulk_decode_equals_row_decode(case: tuple[Any, list[bytes]]) -> None:
    schema, encoded = case
    arrow_type = export.arrow_type(schema)
    bulk = decode_columns(pa.array(encoded, type=pa.binary()), schema, arrow_type)
    assert bulk is not None
    rows = [decode_row(b, schema) for b in encoded]
    reference = export.arrow_table([{"r": r} for r in rows], ["r"], {"r": schema}).column("r").combine_chunks()
    assert bulk.type == reference.type
    assert _plain(bulk.to_pylist()) == _plain(reference.to_pylist())
    # and the JSON lines written from the bulk columns are the row-by-row ones
    lines = export.JsonLines(["r"], {"r": schema})
    batch = pa.RecordBatch.from_arrays([bulk], names=["r"])
    assert lines.batch(batch) == "".join(lines({"r": r}) for r in rows)


def test_irregular_rows_are_left_to_the_row_decoder() -> None:
    """A row whose string points outside it, or that is not a multiple of 8 bytes: no bulk
    result, so the row-by-row decoder reports it with its offset, as before."""
    schema = parse_schema({"type": "struct", "fields": [{"name": "s", "type": "string", "nullable": True}]})
    good = encode_row(["abc"], schema)
    outside = good[:8] + (64 << 32 | 3).to_bytes(8, "little") + good[16:]
    for rows in ([good, outside], [good, good[:-1]], [good, good + b"\0" * 8 + b"\xff" * 0]):
        result = decode_columns(pa.array(rows, type=pa.binary()), schema, export.arrow_type(schema))
        if rows[1] == good + b"\0" * 8:  # longer rows are fine (Spark reads the slots only)
            assert result is not None
        else:
            assert result is None
    invalid_utf8 = encode_row([b"\xff\xfe".decode("utf-8", "surrogateescape")], schema)
    assert decode_columns(pa.array([invalid_utf8], type=pa.binary()), schema, export.arrow_type(schema)) is None
