"""The raw key/value pairs of one store at one version, and the records of its change files.

Files are read straight from storage (not through the checkpoint's read cache: state is
big), their 4.x checksum sidecars verified, decompressed with the query's codec and their
framing checked to the end *before* the first pair is yielded, so a damaged file never
produces a row.

HDFS-backed stores stream: the deltas after the base snapshot are applied to an overlay
(key -> value or removal), the overlay's puts are yielded, then the snapshot's records
except the keys the overlay decides. Memory is one decompressed file plus the
overlay, never the whole map. RocksDB stores are materialized on local disk by
:mod:`ckptfix.stores.rocks` and iterated from there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from ckptfix.checkpoint import Checkpoint
from ckptfix.errors import FormatError
from ckptfix.formats import codec, filechecksum, rocksdbzip, statefile
from ckptfix.formats.statefile import Op, Record
from ckptfix.formats.unsaferow import trim_value
from ckptfix.stores.chain import Chain, Step

#: key bytes, value bytes, the file they came from and the byte offsets of key and value in its
#: decompressed stream (-1 where there is no such offset: RocksDB databases)
Pair = tuple[bytes, bytes, str, int, int]
ROW_CHECKSUM_BYTES = 4  # 4.x rowChecksum.enabled: int32 (native order) CRC32C before each value


def read_file(ckpt: Checkpoint, step: Step, sidecars: dict[str, str]) -> bytes:
    """The bytes of a state file, checked against its 4.x checksum sidecar if it has one."""
    data = ckpt.location.read(step.rel)
    sidecar = sidecars.get(step.name)
    if sidecar is not None:
        side = filechecksum.parse(ckpt.location.read(sidecar), ckpt.display(sidecar))
        why = filechecksum.mismatch(side, data)
        if why:
            raise FormatError(
                ckpt.display(step.rel),
                0,
                f"the content its sidecar {sidecar.rsplit('/', 1)[-1]} describes",
                why,
                kind="bad-checksum",
            )
    return data


def inner(ckpt: Checkpoint, rel: str, codec_name: str) -> str:
    """How errors name a byte offset inside a file's decompressed content."""
    return f"{ckpt.display(rel)} (offsets in its {codec_name}-decompressed content)"


def file_records(ckpt: Checkpoint, step: Step, codec_name: str, sidecars: dict[str, str]) -> Iterator[Record]:
    """Every record of a delta/snapshot/changelog. The file is read, decompressed and its
    framing walked to the end before the first record is returned (so a damaged file yields
    nothing); records are then produced one at a time, never all held."""
    raw = codec.decompress(codec_name, read_file(ckpt, step, sidecars), ckpt.display(step.rel))
    kind: statefile.FileKind = step.kind  # type: ignore[assignment]
    path = inner(ckpt, step.rel, codec_name)
    statefile.verify(raw, path, kind)
    return statefile.iter_records(raw, path, kind)


def changelog_header(ckpt: Checkpoint, rel: str, codec_name: str) -> statefile.ChangelogHeader:
    raw = codec.decompress(codec_name, ckpt.location.read(rel), ckpt.display(rel))
    return statefile.parse_changelog_header(raw, inner(ckpt, rel, codec_name))


def _strip_checksum(value: bytes, path: str, offset: int) -> bytes:
    if len(value) < ROW_CHECKSUM_BYTES:
        raise FormatError(path, offset, "a 4-byte row checksum before the value", f"{len(value)} bytes", kind="bad-row")
    return value[ROW_CHECKSUM_BYTES:]


def hdfs_pairs(ckpt: Checkpoint, chain: Chain, codec_name: str, row_checksum: bool = False) -> Iterator[Pair]:
    """(key, value) UnsafeRow bytes of an HDFS-backed store at ``chain.version``."""
    sidecars = chain.store.checksums
    # key -> latest value (None: removed). Only bytes are kept, not where they came from
    # (that would double the memory); :func:`locate` finds it again for an error message
    overlay: dict[bytes, bytes | None] = {}
    for step in chain.steps:
        path = inner(ckpt, step.rel, codec_name)
        for rec in file_records(ckpt, step, codec_name, sidecars):
            key = rec.key
            if row_checksum and rec.value is None:
                key = _strip_checksum(key, path, rec.offset)
            value = rec.value
            if value is not None and row_checksum:
                value = _strip_checksum(value, path, rec.offset)
            overlay[key] = None if value is None else trim_value(value)
    # the keys the deltas decide first: a bad row there surfaces before the bulk
    where = f"{ckpt.display(chain.store.rel)} ({chain.describe()})"
    for key, maybe in overlay.items():
        if maybe is not None:
            yield key, maybe, where, UNKNOWN, UNKNOWN
    if chain.base is not None:
        path = inner(ckpt, chain.base.rel, codec_name)
        for rec in file_records(ckpt, chain.base, codec_name, sidecars):
            if rec.key in overlay:
                continue
            assert rec.value is not None  # snapshots hold no removals (checked by the parser)
            value = _strip_checksum(rec.value, path, rec.offset) if row_checksum else rec.value
            at = rec.offset + 8 + len(rec.key) + (ROW_CHECKSUM_BYTES if row_checksum else 0)
            yield rec.key, trim_value(value), path, rec.offset + 4, at


UNKNOWN = -1  # offset of a pair whose file position was not kept (see locate)


def locate(
    ckpt: Checkpoint, chain: Chain, codec_name: str, key: bytes, row_checksum: bool = False
) -> tuple[str, int, int]:
    """(path, key offset, value offset) of the record that gave ``key`` its value in the
    deltas of ``chain``: the last write wins, so the newest delta holding it."""
    for step in reversed(chain.steps):
        path = inner(ckpt, step.rel, codec_name)
        found = None
        for rec in file_records(ckpt, step, codec_name, chain.store.checksums):
            if rec.key == key and rec.value is not None:
                found = rec
        if found is not None:
            at = found.offset + 8 + len(found.key) + (ROW_CHECKSUM_BYTES if row_checksum else 0)
            return path, found.offset + 4, at
    return ckpt.display(chain.store.rel), 0, 0


@contextmanager
def rocksdb_pairs(
    ckpt: Checkpoint, chain: Chain, codec_name: str, delimiter: bytes = b","
) -> Iterator[tuple[Iterator[Pair], dict]]:
    """(pairs iterator, zip metadata JSON fields) of a RocksDB store at ``chain.version``:
    the base zip materialized with its SSTs, the changelogs replayed on top. ``delimiter``:
    the query's merge delimiter (:func:`ckptfix.stores.rocks.merge_delimiter`)."""
    from ckptfix.stores import rocks

    store = chain.store
    sidecars = store.checksums
    meta: dict = {}
    # check every changelog before touching the database: a damaged file yields no row
    step_records = [file_records(ckpt, step, codec_name, sidecars) for step in chain.steps]
    if chain.base is None:
        snap = rocks.RocksSnapshot.empty(merge_delimiter=delimiter)
    else:
        zip_bytes = read_file(ckpt, chain.base, sidecars)
        zip_path = ckpt.display(chain.base.rel)
        parsed = rocksdbzip.parse(zip_bytes, zip_path)
        meta = _metadata_fields(parsed.metadata)
        sst_dir = f"{store.rel}/SSTs"
        loaders = {
            s.dfs_sst_file_name: _loader(ckpt, f"{sst_dir}/{s.dfs_sst_file_name}")
            for s in parsed.metadata.sst_files
            if s.dfs_sst_file_name in store.ssts
        }
        snap = rocks.RocksSnapshot.materialize(zip_bytes, zip_path, loaders, merge_delimiter=delimiter)
    with snap:
        for records in step_records:
            snap.replay(records)
        where = f"{ckpt.display(store.rel)} (version {chain.version}, {chain.describe()})"
        yield ((k, v, where, 0, 0) for k, v in snap.items()), meta


def _loader(ckpt: Checkpoint, rel: str) -> Callable[[], bytes]:
    return lambda: ckpt.location.read(rel)


def _metadata_fields(meta: rocksdbzip.RocksDBMetadata) -> dict:
    return {
        "numKeys": meta.num_keys,
        "columnFamilyMapping": dict(meta.column_family_mapping or {}),
        "columnFamilyTypeMap": dict(meta.column_family_type_map or {}),
        "maxColumnFamilyId": meta.max_column_family_id,
    }


__all__ = ["Op", "Pair", "changelog_header", "hdfs_pairs", "read_file", "rocksdb_pairs"]
