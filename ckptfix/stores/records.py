"""The raw key/value pairs of one store at one version, and the records of its change files.

Files are read straight from storage (not through the checkpoint's read cache: state is
big), their 4.x checksum sidecars verified, decompressed with the query's codec and their
framing checked to the end *before* the first pair is yielded, so a damaged file never
produces a row. As in Spark, a delta or snapshot is read up to its end marker: damage in the
compressed stream after it (an LZ4 end block cut off) is not read
(:func:`ckptfix.formats.statefile.decompress_as_read`).

HDFS-backed stores stream: the deltas after the base snapshot are applied to an overlay
(key -> value or removal), the overlay's puts are yielded, then the snapshot's records
except the keys the overlay decides. Memory is one decompressed file plus the
overlay, never the whole map. RocksDB stores are materialized on local disk by
:mod:`ckptfix.stores.rocks` and iterated from there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ckptfix.checkpoint import Checkpoint
from ckptfix.errors import FormatError
from ckptfix.formats import codec, filechecksum, rocksdbzip, statefile
from ckptfix.formats.statefile import Op, Record
from ckptfix.formats.unsaferow import trim_value
from ckptfix.stores.chain import Chain, Step

if TYPE_CHECKING:
    from ckptfix.stores.rocks import RocksSnapshot

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
    kind: statefile.FileKind = step.kind  # type: ignore[assignment]
    raw, _ = statefile.decompress_as_read(codec_name, read_file(ckpt, step, sidecars), ckpt.display(step.rel), kind)
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
def rocksdb_snapshot(
    ckpt: Checkpoint, chain: Chain, codec_name: str, delimiter: bytes = b","
) -> Iterator[tuple[RocksSnapshot, dict]]:
    """(database, zip metadata JSON fields) of a RocksDB store at ``chain.version``: the base zip materialized
    with its SSTs in a temporary directory (removed on exit), the changelogs replayed on top."""
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
        yield snap, meta


@contextmanager
def rocksdb_pairs(
    ckpt: Checkpoint, chain: Chain, codec_name: str, delimiter: bytes = b","
) -> Iterator[tuple[Iterator[Pair], dict]]:
    """(pairs iterator, zip metadata JSON fields) of a RocksDB store at ``chain.version``: the pairs of
    :func:`rocksdb_snapshot`. ``delimiter``: the query's merge delimiter
    (:func:`ckptfix.stores.rocks.merge_delimiter`)."""
    with rocksdb_snapshot(ckpt, chain, codec_name, delimiter) as (snap, meta):
        where = f"{ckpt.display(chain.store.rel)} (version {chain.version}, {chain.describe()})"
        yield ((k, v, where, 0, 0) for k, v in snap.items()), meta


def _loader(ckpt: Checkpoint, rel: str) -> Callable[[], bytes]:
    return lambda: ckpt.location.read(rel)


def _metadata_fields(meta: rocksdbzip.RocksDBMetadata) -> dict:
    return {
        "metadataVersion": meta.version,  # the zip's ``v<N>`` header: a rewrite keeps it (Spark 4.0 reads one only)
        "numKeys": meta.num_keys,
        "columnFamilyMapping": dict(meta.column_family_mapping or {}),
        "columnFamilyTypeMap": dict(meta.column_family_type_map or {}),
        "maxColumnFamilyId": meta.max_column_family_id,
    }


__all__ = ["Op", "Pair", "changelog_header", "hdfs_pairs", "read_file", "rocksdb_pairs"]


# ---------------------------------------------------------------- record framing in bulk (numpy)


class Frames:
    """Where the records of one decompressed state file lie, as numpy arrays (one entry per
    record, in file order): ``key_start``/``key_len``, ``value_start``/``value_len``
    (``value_len`` -1 for a removal or delete) and ``op`` (:data:`OP_PUT`, :data:`OP_DELETE`,
    :data:`OP_MERGE`). ``raw`` is the decompressed file they index."""

    __slots__ = ("key_len", "key_start", "op", "raw", "value_len", "value_start")

    def __init__(self, raw: bytes, key_start: Any, key_len: Any, value_start: Any, value_len: Any, op: Any) -> None:
        self.raw, self.key_start, self.key_len = raw, key_start, key_len
        self.value_start, self.value_len, self.op = value_start, value_len, op

    def __len__(self) -> int:
        return len(self.key_start)


OP_PUT, OP_DELETE, OP_MERGE = 0x01, 0x10, 0x11
_RUN_MIN = 16  # a run of equally framed records shorter than this: walk record by record for a while
_SCALAR_STEPS = 256


def frames(raw: bytes, kind: statefile.FileKind) -> Frames | None:
    """The framing of a whole decompressed state file in bulk, or None where anything is
    irregular (the record-by-record reader then reports it, with its offset, as it always did).

    Records of one shape (the same key length, value length and type) usually follow each
    other: a run is found by reading the length fields at the positions the shape predicts,
    all at once, and jumping to its end; where shapes change record by record it walks the
    records one at a time for a while. Same checks as :func:`statefile.iter_records`: lengths
    in bounds, -1 removals only in deltas and changelogs, the end marker at the very end."""
    import numpy as np

    typed = False
    pos = 0
    if kind == "changelog":
        try:
            header = statefile.parse_changelog_header(raw)
        except FormatError:
            return None
        typed = header.version in statefile.TYPED_VERSIONS
        pos = header.size
    n = len(raw)
    if n >= 2**31:
        return None
    buf = np.frombuffer(raw, dtype=np.uint8)
    starts: list[Any] = []  # arrays of record starts (after the type byte), one per run
    shapes: list[tuple[int, int, int, int]] = []  # (count, key_len, value_len, op) per run
    head = 5 if typed else 4  # bytes before the key: [type byte] int32 keyLen
    unpack = statefile.INT.unpack_from
    snapshot = kind == "snapshot"

    def shape_at(at: int) -> tuple[int, int, int, int] | None:
        """(op, key_len, value_len, record size) of the record at ``at``; op 0: the end."""
        if typed:
            if at >= n:
                return None
            op = raw[at]
            if op == statefile.END_RECORD:
                return (0, 0, 0, 1)
            if op not in (OP_PUT, OP_DELETE, OP_MERGE) or at + 5 > n:
                return None
            (key_len,) = unpack(raw, at + 1)
        else:
            if at + 4 > n:
                return None
            (key_len,) = unpack(raw, at)
            if key_len == statefile.END:
                return (0, 0, 0, 4)
            op = OP_PUT
        if key_len < 0 or at + head + key_len + 4 > n:
            return None
        (value_len,) = unpack(raw, at + head + key_len)
        if value_len == statefile.END:
            if snapshot or op == OP_MERGE or (typed and op == OP_PUT):
                return None
            op = OP_DELETE
            size = head + key_len + 4
        elif value_len < 0 or op == OP_DELETE:
            return None
        else:
            size = head + key_len + 4 + value_len
        if at + size > n:
            return None
        return (op, key_len, value_len, size)

    def be32(at: Any) -> Any:
        b = buf[at[:, None] + np.arange(4)].astype(np.int64)
        v = (b[:, 0] << 24) | (b[:, 1] << 16) | (b[:, 2] << 8) | b[:, 3]
        return np.where(v >= 2**31, v - 2**32, v)

    scalar, window = 0, 64
    while True:
        shape = shape_at(pos)
        if shape is None:
            return None
        op, key_len, value_len, size = shape
        if op == 0:
            if pos + size != n:
                return None  # trailing bytes
            break
        count = 1
        if scalar > 0:
            scalar -= 1
        else:
            limit = min((n - pos) // size, window)
            if limit > 1:
                at = pos + size * np.arange(1, limit, dtype=np.int64)
                ok = be32(at + (1 if typed else 0)) == key_len
                if typed:
                    ok &= buf[at] == op
                ok &= be32(at + head + key_len) == (value_len if op != OP_DELETE else statefile.END)
                bad = np.flatnonzero(~ok)
                count = 1 + (int(bad[0]) if len(bad) else len(at))
            # a run that fills the window: look further next time; one that ends: look close again
            window = min(window * 4, 1 << 16) if count == limit else 64
            if count < _RUN_MIN:
                scalar = _SCALAR_STEPS
        starts.append(pos + size * np.arange(count, dtype=np.int64))
        shapes.append((count, key_len, value_len, op))
        pos += size * count
    if not starts:
        empty = np.zeros(0, dtype=np.int32)
        return Frames(raw, empty, empty, empty, empty, np.zeros(0, dtype=np.uint8))
    # int32 throughout (a file is below 2 GiB): half the memory of the default int64
    rec = np.concatenate(starts).astype(np.int32)
    counts = np.array([s[0] for s in shapes], dtype=np.int64)
    key_len_a = np.repeat(np.array([s[1] for s in shapes], dtype=np.int32), counts)
    value_len_a = np.repeat(np.array([s[2] if s[3] != OP_DELETE else -1 for s in shapes], dtype=np.int32), counts)
    op_a = np.repeat(np.array([s[3] for s in shapes], dtype=np.uint8), counts)
    key_start = rec + np.int32(head)
    value_start = key_start + key_len_a + np.int32(4)
    return Frames(raw, key_start, key_len_a, value_start, value_len_a, op_a)


def step_slices(
    ckpt: Checkpoint, step: Step, codec_name: str, sidecars: dict[str, str], rocks: bool
) -> tuple[Any, Any, Any] | None:
    """The records of one delta, snapshot or changelog in bulk: (key rows, value rows, ops) in file
    order, the rows as compact Arrow binary arrays (a removal's value is empty; ``ops`` says
    which, :data:`OP_DELETE`), the ops a numpy array. HDFS values are trimmed as
    :func:`trim_value` does; RocksDB (``rocks``) keys and values lose their state encoding
    version byte. None where the file is not what the record-by-record reader expects (a bad
    checksum, codec or framing, a merge, a version byte other than 0): that reader reports it. None also without
    numpy and pyarrow (extra ``[arrow]``)."""
    try:
        import numpy as np
        import pyarrow  # noqa: F401  (slices)
    except ImportError:
        return None

    try:
        raw, _ = statefile.decompress_as_read(
            codec_name,
            read_file(ckpt, step, sidecars),
            ckpt.display(step.rel),
            step.kind,  # type: ignore[arg-type]
        )
    except FormatError:
        return None
    fr = frames(raw, step.kind)  # type: ignore[arg-type]
    if fr is None:
        return None
    buf = np.frombuffer(raw, dtype=np.uint8)
    key_start, key_len = fr.key_start, fr.key_len
    live = fr.value_len >= 0
    value_len = np.where(live, fr.value_len, 0)
    value_start = fr.value_start
    if rocks:
        if (fr.op == OP_MERGE).any() or (key_len < 1).any() or (value_len[live] < 1).any():
            return None
        if buf[key_start].any() or buf[value_start[live]].any():
            return None  # a state encoding version other than 0: the decoder says so
        key_start, key_len = key_start + 1, key_len - 1
        value_start, value_len = value_start + np.where(live, 1, 0), value_len - np.where(live, 1, 0)
    else:
        value_len = value_len // 8 * 8
    keys = slices(raw, key_start, key_len)
    values = slices(raw, value_start, value_len)
    if keys is None or values is None:
        return None
    return keys, values, fr.op


#: how many bytes of a chain's files :func:`bulk_pairs` reads before it folds them into the state
FOLD_BYTES = 64 << 20


def bulk_pairs(ckpt: Checkpoint, chain: Chain, codec_name: str, provider: str) -> list[tuple[Any, Any]] | None:
    """The live (key row, value row) pairs of a store at ``chain.version`` as compact Arrow binary
    arrays, in the order :func:`hdfs_pairs` / :func:`rocksdb_pairs` yield them, built in bulk:
    every file of the chain framed by :func:`frames`, the last write of every key found by hashing
    all keys at once. HDFS values are trimmed as :func:`trim_value` does; RocksDB keys and values
    lose their state encoding version byte. A list of (keys, values) segments.

    Covers HDFS stores and RocksDB stores replayed from changelogs alone (no zip), without row
    checksums or merges. None for anything else, or where a file is not what the record-by-record
    reader expects (that reader then reports it as before), and without numpy and pyarrow (extra ``[arrow]``)."""
    try:
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc
    except ImportError:
        return None

    if provider == "rocksdb" and chain.base is not None:
        return None
    sidecars = chain.store.checksums
    rocks = provider == "rocksdb"

    def load(step: Step) -> tuple[Any, Any, Any] | None:
        return step_slices(ckpt, step, codec_name, sidecars, rocks)

    # The files are folded, oldest first, into the keys seen so far (in order of their first record, removed ones
    # kept as removals: a dict's order, as hdfs_pairs gives it) with each key's last value and op: in one go while
    # the files not yet folded stay under FOLD_BYTES or the state's own size, else as often as that is reached, so
    # that memory stays within about twice the state plus FOLD_BYTES whatever the length of the chain
    state: tuple[Any, Any, Any] | None = None
    pending: list[tuple[Any, Any, Any]] = []
    pending_bytes = state_bytes = 0

    def fold() -> tuple[Any, Any, Any]:
        parts = ([state] if state is not None else []) + pending
        all_keys = pa.concat_arrays([k for k, _, _ in parts])
        all_values = pa.chunked_array([v for _, v, _ in parts])
        all_ops = np.concatenate([o for _, _, o in parts])
        last, distinct = _last_writes(all_keys)
        return distinct, all_values.take(arrow_of(last)).combine_chunks(), all_ops[last]

    for step in chain.steps:
        one = load(step)
        if one is None:
            return None
        pending.append(one)
        pending_bytes += one[0].nbytes + one[1].nbytes
        if pending_bytes > max(FOLD_BYTES, state_bytes):
            state, pending, pending_bytes = fold(), [], 0
            state_bytes = state[0].nbytes + state[1].nbytes
    if pending:
        state = fold()
    segments: list[tuple[Any, Any]] = []
    keys = None
    if state is not None:
        keys, values, ops = state
        kept = np.flatnonzero(ops != OP_DELETE)
        if rocks:  # RocksDB iterates in bytewise key order
            kept = kept[numpy_of(pc.sort_indices(keys.take(arrow_of(kept))))]
        take = arrow_of(kept)
        segments.append((keys.take(take), values.take(take)))
    if chain.base is not None:
        base = load(chain.base)
        if base is None:
            return None
        base_keys, base_values, _ = base
        if keys is not None and len(keys):
            keep = arrow_of(np.flatnonzero(~numpy_of(pc.is_in(base_keys, value_set=keys))))
            base_keys, base_values = base_keys.take(keep), base_values.take(keep)
        segments.append((base_keys, base_values))
    return segments


def _lengths_be(arr: Any) -> Any:
    """The byte length of every element of a binary array as a 4-byte big-endian binary array."""
    import numpy as np
    import pyarrow as pa

    n = len(arr)
    lens = np.diff(numpy_of_offsets(arr)).astype(">i4")
    offsets = np.arange(0, 4 * n + 1, 4, dtype=np.int32)
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(lens.tobytes())])


def snapshot_bytes(segments: list[tuple[Any, Any]], chunk: int = 65536) -> bytes:
    """The uncompressed HDFS ``N.snapshot`` of (key rows, value rows) segments of compact Arrow
    binary arrays, built in bulk, ``chunk`` pairs at a time (an Arrow binary array holds under 2 GiB):
    ``keyLen key valueLen value`` (int32 big-endian lengths) per pair, then the end marker -1; the bytes
    :func:`ckptfix.formats.statefile.dump_snapshot` writes for the same pairs."""
    import pyarrow.compute as pc

    parts: list[bytes] = []
    for all_keys, all_values in segments:
        for at in range(0, len(all_keys), chunk):
            keys, values = all_keys.slice(at, chunk), all_values.slice(at, chunk)
            joined = pc.binary_join_element_wise(_lengths_be(keys), keys, _lengths_be(values), values, b"")
            offsets = numpy_of_offsets(joined)
            parts.append(joined.buffers()[2].to_pybytes()[int(offsets[0]) : int(offsets[-1])])
    parts.append(statefile.INT.pack(statefile.END))
    return b"".join(parts)


def prefixed_pairs(segments: list[tuple[Any, Any]], prefix: bytes, chunk: int = 65536) -> Iterator[tuple[bytes, bytes]]:
    """The pairs of (key rows, value rows) segments as Python bytes, ``prefix`` put before every
    key and value (RocksDB's state encoding version byte), ``chunk`` pairs converted at a time."""
    import pyarrow as pa
    import pyarrow.compute as pc

    head = pa.scalar(prefix, type=pa.binary())
    for keys, values in segments:
        for at in range(0, len(keys), chunk):
            ks = pc.binary_join_element_wise(head, keys.slice(at, chunk), b"").to_pylist()
            vs = pc.binary_join_element_wise(head, values.slice(at, chunk), b"").to_pylist()
            yield from zip(ks, vs, strict=True)


def slices(data: Any, starts: Any, lens: Any, arrow_type: Any = None) -> Any | None:
    """The byte ranges ``data[starts[i] : starts[i] + lens[i]]`` (in ascending, non-overlapping
    order) as one compact Arrow binary array: a binary array over ``data`` whose elements are the
    ranges and the gaps between them, every other element taken. None past 2 GiB."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    arrow_type = arrow_type or pa.binary()
    n = len(starts)
    if n == 0:
        return pa.array([], type=arrow_type)
    ends = starts + lens
    if int(ends[-1]) >= 2**31:
        return None
    bounds = np.empty(2 * n, dtype=np.int32)
    bounds[0::2], bounds[1::2] = starts, ends
    body = data if isinstance(data, pa.Buffer) else pa.py_buffer(data)
    spread = pa.Array.from_buffers(arrow_type, 2 * n - 1, [None, pa.py_buffer(bounds), body])
    return pc.take(spread, arrow_of(np.arange(0, 2 * n, 2, dtype=np.int64)))


def _last_writes(keys: Any) -> tuple[Any, Any]:
    """(index of the last record of every distinct key, ordered by the key's first record; the
    distinct keys). Keys of one width (the usual case: fixed-width key rows) are hashed with numpy
    and the hash checked against the keys themselves; otherwise, or on a hash collision, Arrow's
    dictionary encoding."""
    import numpy as np
    import pyarrow.compute as pc

    n = len(keys)
    offsets = numpy_of_offsets(keys)
    lens = np.diff(offsets)
    if n and lens[0] % 8 == 0 and lens[0] and (lens == lens[0]).all() and int(offsets[0]) % 8 == 0:
        width = int(lens[0]) // 8
        words = np.frombuffer(keys.buffers()[2], dtype="<u8", count=width * n, offset=int(offsets[0]))
        words = words.reshape(n, width)
        h = np.zeros(n, dtype=np.uint64)
        for w in range(width):  # a multiplicative mix of every 8-byte word of the key
            h = (h ^ words[:, w]) * np.uint64(0x9E3779B97F4A7C15)
            h ^= h >> np.uint64(29)
        uniq, first, inverse = np.unique(h, return_index=True, return_inverse=True)
        del h
        same = True
        representative = first[inverse]
        for w in range(width):  # no two keys share a hash (word by word: no n x width temporaries)
            same = same and bool((words[:, w] == words[representative, w]).all())
        del representative
        if same:
            last = np.full(len(uniq), -1, dtype=np.int64)
            np.maximum.at(last, inverse, np.arange(n, dtype=np.int64))
            del inverse
            order = np.argsort(first, kind="stable")
            return last[order], keys.take(arrow_of(np.sort(first)))
    encoded = pc.dictionary_encode(keys)  # the dictionary lists keys in order of first appearance
    index = numpy_of(encoded.indices)
    last = np.full(len(encoded.dictionary), -1, dtype=np.int64)
    np.maximum.at(last, index, np.arange(n, dtype=np.int64))
    return last, encoded.dictionary


def numpy_of_offsets(arr: Any) -> Any:
    """The n + 1 offsets of an Arrow binary array as int64."""
    import numpy as np

    return np.frombuffer(arr.buffers()[1], dtype=np.int32, count=len(arr) + 1, offset=4 * arr.offset).astype(np.int64)


def rocksdb_bulk_pairs(
    ckpt: Checkpoint, chain: Chain, codec_name: str, delimiter: bytes = b",", meta: dict | None = None
) -> list[tuple[Any, Any]] | None:
    """:func:`bulk_pairs` for a RocksDB store with a zip: the database is materialized and the
    changelogs replayed as :func:`rocksdb_pairs` does, its pairs collected into Arrow arrays
    (iterating RocksDB costs a Python object per key and value: the floor of this path), the
    version byte cut off in bulk. None where a key or value does not start with it, or where
    the store cannot be read (the record-by-record reader reports that). ``meta`` receives the zip
    metadata's fields, as :func:`rocksdb_pairs` gives them."""
    import numpy as np
    import pyarrow as pa

    try:
        with rocksdb_snapshot(ckpt, chain, codec_name, delimiter) as (snap, fields):
            if meta is not None:
                meta.update(fields)
            keys_list, values_list = snap.columns()
    except FormatError:
        return None
    out = []
    for items in (keys_list, values_list):
        arr = pa.array(items, type=pa.binary())
        items.clear()
        offsets = np.frombuffer(arr.buffers()[1], dtype=np.int32, count=len(arr) + 1).astype(np.int64)
        starts, lens = offsets[:-1], np.diff(offsets)
        body = arr.buffers()[2]
        if len(arr) and ((lens < 1).any() or np.frombuffer(body, dtype=np.uint8)[starts].any()):
            return None
        stripped = slices(body, starts + 1, lens - 1) if len(arr) else arr
        if stripped is None:
            return None
        out.append(stripped)
    return [(out[0], out[1])]


def arrow_of(values: Any, arrow_type: Any = None, valid: Any = None) -> Any:
    """A numpy array as an Arrow array of ``arrow_type`` (default: the numpy dtype's) over the
    same bytes, null where ``valid`` is False. (``pyarrow.array`` on a numpy array imports
    pandas, which costs more than most reads.)"""
    import numpy as np
    import pyarrow as pa

    if arrow_type is None:
        arrow_type = pa.from_numpy_dtype(values.dtype)
    validity = None
    if valid is not None and not valid.all():
        validity = pa.py_buffer(np.packbits(valid, bitorder="little"))
    if values.dtype == np.bool_:
        data = pa.py_buffer(np.packbits(values, bitorder="little"))
    else:
        data = pa.py_buffer(np.ascontiguousarray(values))
    return pa.Array.from_buffers(arrow_type, len(values), [validity, data])


def numpy_of(arr: Any) -> Any:
    """The values of an Arrow integer or boolean array without nulls as a numpy array (numpy's
    own conversion of Arrow arrays imports pandas too)."""
    import numpy as np
    import pyarrow as pa

    data = arr.buffers()[1]
    if pa.types.is_boolean(arr.type):
        bits = np.unpackbits(np.frombuffer(data, dtype=np.uint8), bitorder="little")
        return bits[arr.offset : arr.offset + len(arr)].astype(bool)
    dtype = np.dtype(arr.type.to_pandas_dtype())
    return np.frombuffer(data, dtype=dtype, count=len(arr), offset=arr.offset * dtype.itemsize)
