"""The battery's inputs: real files written by Spark, from the repository's own fixtures (samples/,
tests/fixtures/: the committed checkpoints and the version matrix's tarballs), grouped by format, each with
the chain of ckptfix format functions that reads that format (the same calls ckptfix's audit and state reader
make). Nothing here is generated: every corpus file is a file Spark wrote."""

from __future__ import annotations

import re
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
CACHE = Path(tempfile.gettempdir()) / "ckptfix-battery"

#: tarballs of the version matrix and the 3.5.9 fixtures that the corpus and the crash/CLI sections use
TARBALLS = (
    "matrix/4.3.0/agg_hdfs",
    "matrix/4.3.0/agg_rocksdb_cl",
    "matrix/4.3.0/filesink",
    "matrix/4.3.0/join",
    "matrix/4.3.0/tws_pandas",
    "matrix/4.3.0/async",
    "spark-3.5.9/agg_hdfs",
    "spark-3.5.9/agg_rocksdb_cl",
)
#: directories committed as plain files
TREES = (
    ROOT / "samples" / "async-sparse",
    FIXTURES / "formats",
    FIXTURES / "codecs",
    FIXTURES / "state_rocks",
    FIXTURES / "state_rowchecksum",
)


def extracted(name: str) -> Path:
    """The tarball ``tests/fixtures/<name>.tar.gz`` extracted once under the cache (tar keeps Spark's mtimes)."""
    dest = CACHE / "fixtures" / name
    done = dest / ".extracted"
    if not done.exists():
        dest.mkdir(parents=True, exist_ok=True)
        with tarfile.open(FIXTURES / f"{name}.tar.gz") as tar:
            tar.extractall(dest, filter="tar")
        done.write_text("ok\n")
    return dest


# ---------------------------------------------------------------- readers: bytes -> the parse ckptfix does


def _codec_of(path: str) -> str:
    for name in ("lz4", "lzf", "snappy", "zstd"):
        if f"/codecs/{name}/" in path:
            return name
    return "lz4"


def _state(kind: str) -> Callable[[bytes, str], Any]:
    def read(data: bytes, path: str) -> Any:
        from ckptfix.errors import FormatError
        from ckptfix.formats import codec, statefile
        from ckptfix.stores.records import frames

        raw = codec.decompress(_codec_of(path), data, path)
        # the bulk framing decides alone where it accepts a file (state verification, bulk reads): it must never
        # accept what the record reader rejects, and must see the same records where both accept
        bulk = frames(raw, kind)  # type: ignore[arg-type]
        try:
            statefile.verify(raw, path, kind)  # type: ignore[arg-type]
        except FormatError as exc:
            if bulk is not None:
                raise AssertionError(f"frames() accepted {len(bulk)} records the record reader rejects: {exc}") from exc
            raise
        parsed = statefile.parse(raw, path, kind)  # type: ignore[arg-type]
        if bulk is not None and len(bulk) != len(parsed.records):  # the two readers must agree
            raise AssertionError(f"frames() saw {len(bulk)} records, iter_records {len(parsed.records)}")
        return parsed

    return read


def _zip(data: bytes, path: str) -> Any:
    from ckptfix.formats import rocksdbzip

    return rocksdbzip.parse(data, path)


def _simple(module: str, function: str = "parse") -> Callable[[bytes, str], Any]:
    def read(data: bytes, path: str) -> Any:
        import importlib

        return getattr(importlib.import_module(f"ckptfix.formats.{module}"), function)(data, path)

    return read


def _hadoop_crc(data: bytes, path: str) -> Any:
    from ckptfix.formats import hadoopcrc

    crc = hadoopcrc.parse(data, path)
    main = Path(path).with_name(Path(path).name[1:].removesuffix(".crc"))
    if main.exists():
        hadoopcrc.first_mismatch(crc, main.read_bytes())
    return crc


def _file_checksum(data: bytes, path: str) -> Any:
    from ckptfix.formats import filechecksum

    side = filechecksum.parse(data, path)
    main = Path(path.removesuffix(".crc"))
    if main.exists():
        filechecksum.mismatch(side, main.read_bytes())
    return side


def _unsaferow(schema_file: Path, which: str) -> Callable[[bytes, str], Any]:
    def read(data: bytes, path: str) -> Any:
        from ckptfix.formats import schema, unsaferow

        model = schema.parse(schema_file.read_bytes(), str(schema_file))
        struct = unsaferow.parse_schema(getattr(model, f"{which}_schema"), str(schema_file))
        return unsaferow.decode_row(data, struct, path)

    return read


#: (format, path pattern relative to a tree, reader); the first match wins
KINDS: tuple[tuple[str, re.Pattern[str], Callable[[bytes, str], Any]], ...] = (
    ("hadoop-crc", re.compile(r"(.*/)?\.[^/]+\.crc"), _hadoop_crc),
    ("checksum-sidecar", re.compile(r".*\.(changelog|zip|delta|snapshot)\.crc"), _file_checksum),
    ("operator-metadata", re.compile(r"(.*/)?state/\d+/_metadata/(metadata|v2/\d+)"), _simple("opmeta")),
    ("metadata", re.compile(r"(.*/)?metadata"), _simple("metadata")),
    ("offsets", re.compile(r"(.*/)?offsets/\d+"), _simple("offsetlog")),
    ("commits", re.compile(r"(.*/)?commits/\d+"), _simple("commitlog")),
    ("source-log", re.compile(r"(.*/)?sources/\d+/\d+(\.compact)?"), _simple("compactlog")),
    ("sink-log", re.compile(r"(.*/)?_spark_metadata/\d+(\.compact)?"), _simple("compactlog")),
    ("state-schema", re.compile(r"(.*/)?(_metadata/schema|_stateSchema/.+)"), _simple("schema")),
    ("delta", re.compile(r".*/\d+\.delta"), _state("delta")),
    ("snapshot", re.compile(r".*/\d+\.snapshot"), _state("snapshot")),
    ("changelog", re.compile(r".*/\d+(_[0-9a-f-]+)?\.changelog"), _state("changelog")),
    ("rocksdb-zip", re.compile(r".*/\d+(_[0-9a-f-]+)?\.zip"), _zip),
)


@dataclass(frozen=True)
class CorpusFile:
    kind: str
    path: Path
    read: Callable[[bytes, str], Any]

    @property
    def data(self) -> bytes:
        return self.path.read_bytes()


def _classify(rel: str) -> tuple[str, Callable[[bytes, str], Any]] | None:
    for kind, pattern, read in KINDS:
        if pattern.fullmatch(rel):
            return kind, read
    return None


def collect(per_kind: int = 6, max_bytes: int = 64 * 1024) -> list[CorpusFile]:
    """Up to ``per_kind`` files of every format (the smallest and largest first, then spread over the
    sources), none bigger than ``max_bytes``; plus UnsafeRow keys and values cut from a real delta."""
    roots = [*TREES, *(extracted(t) for t in TARBALLS)]
    found: dict[str, list[Path]] = {}
    for root in roots:
        for path in sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink()):
            rel = path.relative_to(root).as_posix()
            if "/input/" in f"/{rel}" or rel.endswith((".py", ".md", ".json", ".sst", ".parquet")):
                continue
            hit = _classify(rel)
            if hit is not None and path.stat().st_size <= max_bytes:
                found.setdefault(hit[0], []).append(path)
    out: list[CorpusFile] = []
    for kind, paths in sorted(found.items()):
        read = next(r for k, _, r in KINDS if k == kind)
        by_size = sorted(paths, key=lambda p: (p.stat().st_size, str(p)))
        picked: list[Path] = []
        for p in [by_size[0], by_size[-1], *paths[:: max(1, len(paths) // per_kind)]]:
            if p not in picked and len(picked) < per_kind:
                picked.append(p)
        out += [CorpusFile(kind, p, read) for p in picked]
    out += unsaferows()
    kept = []
    for f in out:  # a file that does not read as its format unmutated (e.g. a rate source's own log) is no input
        try:
            f.read(f.data, str(f.path))
            kept.append(f)
        except Exception as exc:  # noqa: BLE001
            REJECTED[str(f.path)] = f"{type(exc).__name__}: {str(exc)[:160]}"
    return kept


#: corpus files left out because they do not read as the format their path suggests (path -> why)
REJECTED: dict[str, str] = {}


def unsaferows() -> list[CorpusFile]:
    """Keys and values of the real delta holding every Spark type (tests/fixtures/formats/unsaferow), each
    written to the cache as a file, with the schema Spark stored beside it."""
    from ckptfix.formats import codec, statefile

    base = FIXTURES / "formats" / "unsaferow" / "state" / "0" / "0"
    schema_file = base / "_metadata" / "schema"
    raw = codec.decompress("lz4", (base / "1.delta").read_bytes(), "1.delta")
    dest = CACHE / "unsaferow"
    dest.mkdir(parents=True, exist_ok=True)
    out = []
    for i, rec in enumerate(statefile.parse(raw, "1.delta").records):
        for which, blob in (("key", rec.key), ("value", rec.value)):
            if blob is None:
                continue
            p = dest / f"row{i}.{which}"
            p.write_bytes(blob)
            out.append(CorpusFile(f"unsaferow-{which}", p, _unsaferow(schema_file, which)))
    return out
