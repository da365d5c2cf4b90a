"""The statestore reads of tests/state/test_vs_spark.py, and Spark's recorded answers to them.

Shared by the test module and its recorder (tests/fixtures/state_vs_spark/generate.py), so both ask Spark exactly
the same questions: :func:`scenario_reads` lists, for one scenario's checkpoint, every set of ``statestore``
options the tests compare ckptfix against (state at a batch, partition filters, snapshot replay, change feeds, and
the change feeds Spark must refuse).

A recording is ``<scenario>.tar.gz`` (the checkpoint Spark wrote, as ``ckpt/``) and ``<scenario>.json``::

    {"pyspark": "4.3.0", "scenario": "agg-hdfs",
     "reads": [{"options": {...}, "schema": <StructType.jsonValue()>, "rows": [<row>, ...]},
               {"options": {...}, "error": <Spark's error, first lines>, "condition": <its [ERROR_CLASS] or null>}]}

A row is :func:`tests.state.normalize.spark_row`'s canonical form as JSON (:func:`encode_row`): an object of the
top-level columns in schema order, each value ``null``, a string, an integer or a tagged list -- ``["bool", true]``,
``["float", "<repr>"]``, ``["dec", "<digits>"]``, ``["ts", <µs>]``, ``["ts_ntz", <µs>]``, ``["date", "<iso>"]``,
``["bin", "<hex>"]``, ``["struct", [[name, value], ...]]``, ``["map", [[key, value], ...]]``, ``["list", [...]]`` --
and :func:`decode_row` gives back exactly the tuple ``spark_row`` made.

No pytest import here (the recorder is a plain script).
"""

from __future__ import annotations

import gzip
import io
import json
import re
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.state import scenarios as S

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "state_vs_spark"

LATEST = None  # batch=None: the last committed batch
BATCH_IDS: tuple[int | None, ...] = (0, S.BATCHES // 2, S.BATCHES - 1, LATEST)
PARTITION_BATCH = S.BATCHES // 2  # the batch of the partition-filter reads
CHANGE_RANGES: tuple[tuple[int, int | None], ...] = ((0, None), (S.BATCHES // 2, S.BATCHES - 1), (1, 2))
# options a change feed accepts (Spark: joinSide conflicts with readChangeFeed; timers / unflattened maps fail)
CHANGE_FEED_KEYS = {"storeName", "stateVarName"}

Options = dict[str, str]


# ------------------------------------------------------------------------------------------ the questions


def state_options(options: Options, batch: int | None) -> Options:
    out = dict(options, operatorId="0")
    if batch is not None:
        out["batchId"] = str(batch)
    return out


def has_changelog(scenario_id: str) -> bool:
    """RocksDB without changelog checkpointing has no per-version changes (no change feed)."""
    return S.split_id(scenario_id)[1] != "rocksdb"


def change_cases(scenario_id: str) -> list[tuple[Options, int, int | None]]:
    """(options, start, end) of every change feed compared (none without changelog)."""
    if not has_changelog(scenario_id):
        return []
    op, _ = S.split_id(scenario_id)
    seen: list[Options] = []
    out = []
    for options in op.read_options:
        opts = {k: v for k, v in options.items() if k in CHANGE_FEED_KEYS}
        if opts != options or opts in seen:
            continue
        seen.append(opts)
        out += [(opts, start, end) for start, end in CHANGE_RANGES]
    return out


def change_options(options: Options, start: int, end: int | None = None) -> Options:
    out = dict(options, readChangeFeed="true", changeStartBatchId=str(start))
    if end is not None:
        out["changeEndBatchId"] = str(end)
    return out


def first_change_options(scenario_id: str) -> Options:
    """The first read option set a change feed accepts (the partition-filter and needs-changelog cases)."""
    op, _ = S.split_id(scenario_id)
    return next((o for o in op.read_options if set(o) <= CHANGE_FEED_KEYS), {})


def store_dirs(built: S.Built, partition: int) -> list[Path]:
    base = built.ckpt / "state" / "0" / str(partition)
    if built.operator.name == "join":
        return [base / s for s in S.JOIN_STORES]
    return [base]


def snapshot_batches(built: S.Built, partition: int) -> list[int]:
    """Batches b whose state (version b+1) has a snapshot file in EVERY store dir of the partition."""
    common: set[int] | None = None
    for d in store_dirs(built, partition):
        versions = set()
        for p in d.iterdir():
            if p.name.startswith(".") or p.suffix not in (".snapshot", ".zip"):
                continue
            versions.add(int(p.name.split(".")[0].split("_")[0]))
        common = versions if common is None else common & versions
    return sorted(v - 1 for v in common or () if v >= 1)


SNAPSHOT_PARTITION = 0


def snapshot_plan(built: S.Built) -> tuple[int, int] | None:
    """(snapshotStartBatchId, batchId) of the snapshot-replay case in partition 0, or None: no snapshot there.
    RocksDB without changelog reads the snapshot's own batch nearest the middle (Spark cannot replay without
    changelogs: CANNOT_READ_STREAMING_STATE_FILE); the others the oldest snapshot, replayed to the last batch."""
    last = built.batches[-1]
    snaps = [b for b in snapshot_batches(built, SNAPSHOT_PARTITION) if b <= last]
    if not snaps:
        return None
    if built.provider == "rocksdb":
        start = min(snaps, key=lambda b: abs(b - S.BATCHES // 2))
        return start, start
    return snaps[0], last


def snapshot_options(options: Options, start: int, batch: int) -> Options:
    return dict(
        options, snapshotStartBatchId=str(start), snapshotPartitionId=str(SNAPSHOT_PARTITION), batchId=str(batch)
    )


def scenario_reads(built: S.Built) -> Iterator[tuple[Options, bool]]:
    """(statestore options, whether Spark must refuse) of every read the tests compare, once each, in a fixed
    order. The partition-filter reads are among the state reads (batch PARTITION_BATCH) and change feeds (0..)."""
    seen: list[Options] = []

    def once(options: Options, refused: bool = False) -> Iterator[tuple[Options, bool]]:
        if options not in seen:
            seen.append(options)
            yield options, refused

    sid = built.scenario_id
    plan = snapshot_plan(built)
    for options in built.operator.read_options:
        for batch in BATCH_IDS:
            yield from once(state_options(options, batch))
        if plan is not None:
            yield from once(snapshot_options(options, *plan))
    for options, start, end in change_cases(sid):
        yield from once(change_options(options, start, end))
    if has_changelog(sid):
        yield from once(change_options(first_change_options(sid), 0))
    else:
        yield from once(change_options(first_change_options(sid), 0), refused=True)


def key(options: Options) -> str:
    return json.dumps(options, sort_keys=True)


# ------------------------------------------------------------------------------------------ rows as JSON

_SCALAR_TAGS = {"bool", "float", "dec", "ts", "ts_ntz", "date", "time", "bin"}


def encode_value(value: Any) -> Any:
    """One canonical value (tests/state/normalize.py) as JSON: tuples become tagged lists."""
    if value is None or isinstance(value, (str, int)) and not isinstance(value, bool):
        return value
    if not (isinstance(value, tuple) and value and isinstance(value[0], str)):
        raise TypeError(f"not a canonical value: {value!r}")
    tag = value[0]
    if tag == "struct":
        return ["struct", [[name, encode_value(v)] for name, v in value[1]]]
    if tag == "map":
        return ["map", [[encode_value(k), encode_value(v)] for k, v in value[1]]]
    if tag == "list":
        return ["list", [encode_value(v) for v in value[1]]]
    if tag in _SCALAR_TAGS and len(value) == 2:
        return [tag, value[1]]
    raise TypeError(f"not a canonical value: {value!r}")


def decode_value(value: Any) -> Any:
    if not isinstance(value, list):
        return value
    tag, payload = value
    if tag == "struct":
        return ("struct", tuple((name, decode_value(v)) for name, v in payload))
    if tag == "map":
        return ("map", tuple((decode_value(k), decode_value(v)) for k, v in payload))
    if tag == "list":
        return ("list", tuple(decode_value(v) for v in payload))
    if tag not in _SCALAR_TAGS:
        raise ValueError(f"unknown tag in a recorded value: {value!r}")
    return (tag, payload)


def encode_row(canonical: tuple[tuple[str, Any], ...]) -> dict[str, Any]:
    """``spark_row``'s tuple of (column, value) -> a JSON object in column order (top-level names are unique)."""
    out = {name: encode_value(v) for name, v in canonical}
    if len(out) != len(canonical):
        raise ValueError(f"repeated top-level column in {canonical!r}")
    return out


def decode_row(row: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple((name, decode_value(v)) for name, v in row.items())


def row_line(row: dict[str, Any]) -> str:
    return json.dumps(row, ensure_ascii=False, separators=(",", ":"))


# ------------------------------------------------------------------------------------------ recordings


def tarball(scenario_id: str, root: Path = FIXTURES) -> Path:
    return root / f"{scenario_id}.tar.gz"


def answers_path(scenario_id: str, root: Path = FIXTURES) -> Path:
    return root / f"{scenario_id}.json"


def pack(ckpt: Path, dest: Path) -> None:
    """``ckpt`` as ``ckpt/`` in a gzipped tar, byte-identical for the same files: members sorted, owners blank,
    the gzip header without a time (file mtimes are kept: they are Spark's)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        paths = sorted([ckpt, *ckpt.rglob("*")], key=lambda p: p.relative_to(ckpt).parts)
        for path in paths:
            info = tar.gettarinfo(str(path), arcname=("ckpt" / path.relative_to(ckpt)).as_posix())
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = int(info.mtime)
            info.pax_headers = {}
            if info.isfile():
                with path.open("rb") as f:
                    tar.addfile(info, f)
            else:
                tar.addfile(info)
    with dest.open("wb") as out, gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0, compresslevel=9) as gz:
        gz.write(buf.getvalue())


def extract(scenario_id: str, dest: Path, root: Path = FIXTURES) -> Path:
    """The recorded checkpoint extracted to ``dest/ckpt``, its transformWithState schema paths naming their new
    place (operator metadata v2 names its schema files by absolute path: the recorder's build dir)."""
    from tests.spark.harness import rewrite_schema_paths

    with tarfile.open(tarball(scenario_id, root)) as tar:
        try:
            tar.extractall(dest, filter="data")
        except TypeError:  # Python without extraction filters
            tar.extractall(dest)  # noqa: S202 - our own fixture
    ckpt = dest / "ckpt"
    roots = {
        r
        for path in ckpt.glob("state/*/_metadata/v2/*")
        if not path.name.startswith(".")
        for r in re.findall(r'"(?:file:)?(/[^"]*?)/state/\d+/_stateSchema/', path.read_text())
    }
    for r in roots - {str(ckpt)}:
        rewrite_schema_paths(ckpt, r, str(ckpt))
    return ckpt


def load_answers(scenario_id: str, root: Path = FIXTURES) -> dict[str, Any]:
    path = answers_path(scenario_id, root)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no recording; run tests/fixtures/state_vs_spark/generate.py")
    return json.loads(path.read_text(encoding="utf-8"))


def error_condition(text: str) -> str | None:
    """Spark's error class in an error text (``[STATE_STORE_...]``), if it names one."""
    m = re.search(r"\[([A-Z][A-Z0-9_]+(?:\.[A-Z0-9_]+)*)\]", text)
    return m.group(1) if m else None


def dump_answers(answers: dict[str, Any]) -> str:
    """The recording's JSON, one row per line (reviewable, small diffs)."""
    lines = ["{", f' "pyspark": {json.dumps(answers["pyspark"])},', f' "scenario": {json.dumps(answers["scenario"])},']
    lines.append(' "reads": [')
    reads = answers["reads"]
    for i, read in enumerate(reads):
        end = "," if i < len(reads) - 1 else ""
        head = f'  {{"options": {json.dumps(read["options"], sort_keys=True)},'
        if "error" in read:
            err = json.dumps(read["error"], ensure_ascii=False)
            lines.append(f'{head} "condition": {json.dumps(read["condition"])}, "error": {err}}}{end}')
            continue
        lines.append(f'{head} "schema": {json.dumps(read["schema"], separators=(",", ":"))},')
        rows = read["rows"]
        if not rows:
            lines.append(f'   "rows": []}}{end}')
            continue
        lines.append('   "rows": [')
        lines += [f"    {row_line(r)}{',' if j < len(rows) - 1 else ''}" for j, r in enumerate(rows)]
        lines.append(f"   ]}}{end}")
    lines += [" ]", "}", ""]
    return "\n".join(lines)


__all__ = [
    "BATCH_IDS",
    "CHANGE_FEED_KEYS",
    "CHANGE_RANGES",
    "FIXTURES",
    "PARTITION_BATCH",
    "change_cases",
    "change_options",
    "decode_row",
    "dump_answers",
    "encode_row",
    "extract",
    "first_change_options",
    "load_answers",
    "pack",
    "scenario_reads",
    "snapshot_options",
    "snapshot_plan",
    "state_options",
]
