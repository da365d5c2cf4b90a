"""Write a synthetic Structured Streaming checkpoint shaped like one written by Spark 4.3.

    python bench/synth.py OUT_DIR [--batches 100000] [--operators 2] [--partitions 200]
                                  [--versions 100] [--scale 0.01] [--verify]

Shapes are copied from ../shared/reference (spark-logs-and-restart.md §1-4, §8;
spark-behaviour-observed.md §3): a file source feeding an HDFS-provider aggregation, written
through Hadoop's local ChecksumFileSystem (every file has a hidden ``.<name>.crc``):

    metadata                          {"id":"<uuid>"}  (no trailing newline)
    offsets/<b>       b = 0..B-1      v1 / OffsetSeqMetadata with the 17 4.3 conf keys / {"logOffset":b}
    commits/<b>       b = 0..B-1      v1 / {"nextBatchWatermarkMs":0}
    sources/0/<n>     retained tail   v1 / FileEntry lines; <n>.compact when (n+1) % 10 == 0
    state/<op>/_metadata/metadata     operator metadata v1 (4.x)
    state/<op>/0/_metadata/schema     key/value schema v2 (partition 0 only)
    state/<op>/<p>/<v>.delta          the last --versions versions (version = batch id + 1)
    state/<op>/<p>/<v>.snapshot       every 10th of those versions, starting at the first

Deliberate choices: offsets/ and commits/ keep every batch (a checkpoint whose purge never
ran, the worst case for listing); the source log is cut the way Spark's
``CompactibleFileStreamLog.deleteExpiredLog`` cuts it with minBatchesToRetain=100, so its
compaction files hold every entry (as in Spark) but only ~100 files survive.
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import sys
import time
import uuid
import zlib
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any, Literal

lz4block_encode: Callable[[bytes], bytes] | None
try:  # the project's own framing when it exists
    from ckptfix.formats.lz4block import encode as lz4block_encode
except ImportError:  # pragma: no cover - early in the project's life
    lz4block_encode = None

SPARK_VERSION = "4.3.0"
COMPACT_INTERVAL = 10
MIN_BATCHES_TO_RETAIN = 100
SNAPSHOT_EVERY = 10
FIRST_BATCH_TIMESTAMP_MS = 1795246532027
BATCH_INTERVAL_MS = 1000

INT_BE = struct.Struct(">i")  # Java DataOutputStream: big-endian
CRC_HEADER = struct.Struct(">4si")
CRC_VALUE = struct.Struct(">I")
LZ4_HEADER = struct.Struct("<8sBiii")  # lz4-java block header: little-endian ints
LZ4_SEED = 0x9747B28C

# UnsafeRow words are little-endian. Key {"key": "k7"}; value {"count": 1, "sum": 7}
# (decoded examples from spark-behaviour-observed.md §3.2).
KEY_ROW = bytes.fromhex("000000000000000002000000100000006b37000000000000")
VALUE_ROW = bytes.fromhex("000000000000000001000000000000000700000000000000")
KEY_SCHEMA = {"type": "struct", "fields": [{"name": "key", "type": "string", "nullable": True, "metadata": {}}]}
VALUE_SCHEMA = {
    "type": "struct",
    "fields": [
        {"name": "count", "type": "long", "nullable": True, "metadata": {}},
        {"name": "sum", "type": "long", "nullable": True, "metadata": {}},
    ],
}


def conf_43(partitions: int) -> dict[str, str]:
    """The 17 keys a 4.3.0 offset file records (spark-logs-and-restart.md §3.2). The values of
    protobufExtensions and deterministicKeyOrder are not in the notes: UNVERIFIED guesses."""
    return {
        "spark.sql.streaming.stateStore.providerClass": (
            "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
        ),
        "spark.sql.streaming.join.stateFormatVersion": "2",
        "spark.sql.streaming.stateStore.compression.codec": "lz4",
        "spark.sql.optimizer.pruneFiltersCanPruneStreamingSubplan": "false",
        "spark.sql.streaming.stateStore.rocksdb.formatVersion": "5",
        "spark.sql.streaming.statefulOperator.useStrictDistribution": "true",
        "spark.sql.streaming.flatMapGroupsWithState.stateFormatVersion": "2",
        "spark.sql.streaming.multipleWatermarkPolicy": "min",
        "spark.sql.streaming.aggregation.stateFormatVersion": "2",
        "spark.sql.shuffle.partitions": str(partitions),
        "spark.sql.streaming.stateStore.encodingFormat": "unsaferow",
        "spark.sql.streaming.stateStore.rocksdb.mergeOperatorVersion": "2",
        "spark.sql.streaming.stateStore.rowChecksum.enabled": "false",
        "spark.sql.function.protobufExtensions.enabled": "false",
        "spark.sql.streaming.queryEvolution.enableSourceEvolution": "false",
        "spark.sql.streaming.statefulOperator.alwaysNullableOutput.enabled": "true",
        "spark.sql.dropDuplicates.deterministicKeyOrder.enabled": "true",
    }


@dataclass(frozen=True)
class Params:
    batches: int = 100_000
    operators: int = 2
    partitions: int = 200
    versions: int = 100

    def scaled(self, scale: float) -> Params:
        """Fewer batches and partitions for quick runs; operators and versions stay."""
        if scale >= 1:
            return self
        batches = max(2, round(self.batches * scale))
        return Params(
            batches=batches,
            operators=self.operators,
            partitions=max(1, round(self.partitions * scale)),
            versions=min(self.versions, batches),
        )

    def key(self) -> str:
        return f"b{self.batches}-o{self.operators}-p{self.partitions}-v{self.versions}"


@dataclass
class Summary:
    params: dict[str, int]
    files: int = 0  # including .crc sidecars
    data_files: int = 0
    bytes: int = 0
    seconds: float = 0.0


def _json(obj: object) -> str:
    return json.dumps(obj, separators=(",", ":"))


def hadoop_crc(data: bytes, bytes_per_checksum: int = 512) -> bytes:
    """``b"crc\\0"`` + int32BE(512) + one big-endian CRC32 per 512-byte chunk."""
    sums = b"".join(
        CRC_VALUE.pack(zlib.crc32(data[i : i + bytes_per_checksum])) for i in range(0, len(data), bytes_per_checksum)
    )
    return CRC_HEADER.pack(b"crc\x00", bytes_per_checksum) + sums


def _lz4block_raw(raw: bytes) -> bytes:
    """Fallback framing: one stored (token 0x15) block then an end block."""
    import xxhash

    check = xxhash.xxh32_intdigest(raw, seed=LZ4_SEED) & 0x0FFFFFFF
    return (
        LZ4_HEADER.pack(b"LZ4Block", 0x15, len(raw), len(raw), check)
        + raw
        + LZ4_HEADER.pack(b"LZ4Block", 0x15, 0, 0, 0)
    )


def lz4_stream(raw: bytes) -> bytes:
    return lz4block_encode(raw) if lz4block_encode is not None else _lz4block_raw(raw)


def state_records(*, removal: bool) -> bytes:
    """One put (and for deltas one removal), then the end marker keyLen = -1."""
    out = INT_BE.pack(len(KEY_ROW)) + KEY_ROW + INT_BE.pack(len(VALUE_ROW)) + VALUE_ROW
    if removal:
        out += INT_BE.pack(len(KEY_ROW)) + KEY_ROW.replace(b"k7", b"k1") + INT_BE.pack(-1)
    return out + INT_BE.pack(-1)


def write_utf(text: str) -> bytes:
    data = text.encode()  # ASCII JSON: modified UTF-8 is plain UTF-8 here
    return struct.pack(">H", len(data)) + data


def schema_v2(key: Mapping[str, Any], value: Mapping[str, Any]) -> bytes:
    """``writeUTF("v2")`` then key and value StructType JSON, each as int32 nChunks + UTF chunks."""
    out = write_utf("v2")
    for schema in (key, value):
        out += INT_BE.pack(1) + write_utf(_json(schema))
    return out


def source_log_retained(batches: int) -> int:
    """First ``sources/0`` batch id still on disk after Spark's ``deleteExpiredLog`` ran at
    the latest compaction batch (cleanupDelay long passed)."""
    last_compaction = next((b for b in range(batches - 1, -1, -1) if (b + 1) % COMPACT_INTERVAL == 0), None)
    if last_compaction is None:
        return 0
    min_batch = last_compaction + 1 - MIN_BATCHES_TO_RETAIN
    if min_batch < COMPACT_INTERVAL:
        return 0
    return max(0, min_batch - (min_batch % COMPACT_INTERVAL) - 1)


class Writer:
    """Writes a file and its Hadoop sidecar, counting both."""

    def __init__(self, root: Path, summary: Summary) -> None:
        self.root = root
        self.summary = summary
        self._dirs: set[Path] = set()
        self._crc_cache: dict[bytes, bytes] = {}

    def put(self, rel: str, data: bytes) -> None:
        path = self.root / rel
        if path.parent not in self._dirs:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._dirs.add(path.parent)
        crc = self._crc_cache.get(data) if len(data) <= 64 else None
        if crc is None:
            crc = hadoop_crc(data)
            if len(data) <= 64:
                self._crc_cache[data] = crc
        path.write_bytes(data)
        path.with_name(f".{path.name}.crc").write_bytes(crc)
        self.summary.files += 2
        self.summary.data_files += 1
        self.summary.bytes += len(data) + len(crc)


def source_entry(n: int) -> str:
    return _json(
        {
            "path": f"file:///data/events/input/part-{n:06d}.json",
            "timestamp": FIRST_BATCH_TIMESTAMP_MS + n * BATCH_INTERVAL_MS - 500,
            "batchId": n,
        }
    )


def write_checkpoint(root: Path, params: Params, progress: Callable[[str], None] | None = None) -> Summary:
    """Write the checkpoint under ``root`` (created; must not exist or be empty)."""
    started = time.perf_counter()
    root.mkdir(parents=True, exist_ok=True)
    if any(root.iterdir()):
        raise FileExistsError(f"{root}: not empty")
    summary = Summary(params=asdict(params))
    w = Writer(root, summary)
    say = progress or (lambda _msg: None)
    b_count = params.batches

    w.put("metadata", _json({"id": str(uuid.UUID(int=0x0906FB346FBD424F9EB4DBFC11678C28))}).encode())

    conf = conf_43(params.partitions)
    commit = b'v1\n{"nextBatchWatermarkMs":0}'
    for b in range(b_count):
        meta = {
            "batchWatermarkMs": 0,
            "batchTimestampMs": FIRST_BATCH_TIMESTAMP_MS + b * BATCH_INTERVAL_MS,
            "conf": conf,
        }
        w.put(f"offsets/{b}", f"v1\n{_json(meta)}\n{_json({'logOffset': b})}".encode())
        w.put(f"commits/{b}", commit)
        if b % 20_000 == 0 and b:
            say(f"offsets/commits: {b}/{b_count}")

    # file source log: one new input file per batch; compaction files hold every entry so far
    first_kept = source_log_retained(b_count)
    first_compaction = first_kept - (first_kept % COMPACT_INTERVAL)
    entries = [source_entry(n) for n in range(first_compaction)]
    for n in range(first_compaction, b_count):
        entries.append(source_entry(n))
        if n < first_kept:
            continue
        if (n + 1) % COMPACT_INTERVAL == 0:
            w.put(f"sources/0/{n}.compact", ("v1\n" + "\n".join(entries)).encode())
        else:
            w.put(f"sources/0/{n}", ("v1\n" + entries[-1]).encode())
    del entries

    delta = lz4_stream(state_records(removal=True))
    snapshot = lz4_stream(state_records(removal=False))
    last_version = b_count  # state version = batch id + 1
    first_version = max(1, last_version - params.versions + 1)
    schema = schema_v2(KEY_SCHEMA, VALUE_SCHEMA)
    for op in range(params.operators):
        opmeta = {
            "operatorInfo": {"operatorId": op, "operatorName": "stateStoreSave"},
            "stateStoreInfo": [{"storeName": "default", "numColsPrefixKey": 0, "numPartitions": params.partitions}],
        }
        w.put(f"state/{op}/_metadata/metadata", f"v1\n{_json(opmeta)}".encode())
        w.put(f"state/{op}/0/_metadata/schema", schema)
        for part in range(params.partitions):
            for v in range(first_version, last_version + 1):
                w.put(f"state/{op}/{part}/{v}.delta", delta)
                if (v - first_version) % SNAPSHOT_EVERY == 0:
                    w.put(f"state/{op}/{part}/{v}.snapshot", snapshot)
        say(f"state: operator {op + 1}/{params.operators}")
    summary.seconds = time.perf_counter() - started
    return summary


def _parse_state(data: bytes, path: str, kind: Literal["delta", "snapshot"]) -> object:
    from ckptfix.formats import lz4block, statefile

    return statefile.parse(lz4block.decode(data, path), path, kind)


def verify(root: Path) -> list[str]:
    """Parse a sample of every kind of file with ckptfix's own parsers; return problems."""
    from ckptfix.formats import (
        commitlog,
        compactlog,
        hadoopcrc,
        metadata,
        offsetlog,
        opmeta,
        schema,
    )

    problems: list[str] = []
    samples: dict[str, Callable[[bytes, str], object]] = {
        "metadata": metadata.parse,
        "offsets/0": offsetlog.parse,
        "commits/0": commitlog.parse,
        "state/0/_metadata/metadata": opmeta.parse,
        "state/0/0/_metadata/schema": schema.parse,
    }
    kinds: tuple[Literal["delta", "snapshot"], ...] = ("delta", "snapshot")
    for kind in kinds:
        found = next(iter(sorted((root / "state/0/0").glob(f"*.{kind}"))), None)
        if found is not None:
            rel = found.relative_to(root).as_posix()
            samples[rel] = partial(_parse_state, kind=kind)
    for found in sorted((root / "sources/0").iterdir())[-2:]:
        if not found.name.startswith("."):
            samples[found.relative_to(root).as_posix()] = compactlog.parse
    for rel, parse in samples.items():
        data = (root / rel).read_bytes()
        try:
            parse(data, rel)
            crc_rel = str(Path(rel).with_name(f".{Path(rel).name}.crc"))
            crc = hadoopcrc.parse((root / crc_rel).read_bytes(), crc_rel)
            if hadoopcrc.first_mismatch(crc, data) is not None:
                problems.append(f"{rel}: sidecar does not match")
        except Exception as exc:  # noqa: BLE001 - report every problem
            problems.append(f"{rel}: {type(exc).__name__}: {exc}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="checkpoint root to create (must not exist or be empty)")
    parser.add_argument("--batches", type=int, default=Params.batches)
    parser.add_argument("--operators", type=int, default=Params.operators)
    parser.add_argument("--partitions", type=int, default=Params.partitions)
    parser.add_argument("--versions", type=int, default=Params.versions)
    parser.add_argument("--scale", type=float, default=1.0, help="multiply batches and partitions (quick runs)")
    parser.add_argument("--verify", action="store_true", help="parse samples with ckptfix.formats afterwards")
    args = parser.parse_args(argv)
    params = Params(args.batches, args.operators, args.partitions, args.versions).scaled(args.scale)
    summary = write_checkpoint(args.out, params, progress=lambda m: print(m, file=sys.stderr))
    print(_json(asdict(summary)))
    if args.verify:
        problems = verify(args.out)
        for p in problems:
            print(f"verify: {p}", file=sys.stderr)
        return 1 if problems else 0
    return 0


if __name__ == "__main__":
    os.umask(0o022)
    sys.exit(main())
