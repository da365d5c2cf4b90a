"""What is wrong with one state file, as facts: the single place that checks a state file's bytes.

``audit`` turns these facts into a restart prediction (a zip or SST that differs from its Hadoop ``.crc`` fails
Spark's load on a local file system), ``state ls --verify`` into loadable versions (any damaged byte breaks the
versions that use the file): both read the same facts, so they cannot disagree about a file.

Order of the checks, as Spark meets them: a zip's Hadoop ``.<name>.crc`` (verified by Hadoop's local
ChecksumFileSystem when Spark opens it), the 4.x JSON checksum sidecar ``<name>.crc``, then the content
(lz4/zstd/snappy stream and record framing to the end marker; a zip's CRCs and metadata), then, for a zip,
its SSTs (present, of the listed size, against their Hadoop sidecars, as Spark copies them; those without a
sidecar by their own block checksums, :mod:`ckptfix.formats.sst`) and, when asked (``deep``), every key of the
database they make, read through RocksDB.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from ckptfix import layout
from ckptfix.checkpoint import Checkpoint, StoreDir
from ckptfix.errors import FormatError, MissingExtra
from ckptfix.formats import filechecksum, hadoopcrc, rocksdbzip, statefile
from ckptfix.formats import sst as sstfile

#: a file the load cannot use
FATAL = frozenset(
    {"hadoop-crc", "checksum", "checksum-empty", "corrupt", "sst-missing", "sst-size", "sst-hadoop-crc", "sst-corrupt"}
)
#: damaged bytes that Spark's load does not notice (a batch reading them may fail later): an SST's data block; a
#: checksum file that does not parse (Spark parses it first; what it raises is recorded only for an empty one)
LATENT = frozenset({"sst-blocks", "checksum-unreadable"})
#: facts that do not make the file unusable (RocksDB reads a table whose filter block is damaged as one without;
#: "trailing": bytes after the end marker, or a damaged compressed chunk after the one holding it, which Spark's
#: HDFS reader never reads)
BENIGN = frozenset({"trailing", "unverifiable", "sst-filter", "zip-header"})
#: FormatError kinds of the codec layer meaning "cannot check", not "damaged"
UNVERIFIABLE = ("unknown-codec", "missing-extra")


@dataclass(frozen=True)
class FileProblem:
    rel: str  # the file at fault (a state file, or an SST a zip lists), checkpoint-relative
    kind: str  # one of FATAL | LATENT | BENIGN
    where: str  # how messages name the file (a URL, or the path inside its decompressed content)
    offset: int | None
    expected: str
    found: str
    #: the damage is in the compression stream (lz4-java's "Stream is corrupted"), not in the records
    codec_layer: bool = False
    sidecar: str | None = None  # the sidecar the file was compared with
    zip: str | None = None  # for SST problems: the zip that lists the SST
    error_kind: str | None = None  # the parser's kind (truncated, empty, bad-block, ...)
    rocksdb_message: str | None = None  # SST damage: how RocksDB's own error message starts

    def __str__(self) -> str:
        at = f": at byte {self.offset}" if self.offset is not None else ""
        return f"{self.where}{at}: expected {self.expected}, found {self.found}"

    @property
    def name(self) -> str:
        return self.rel.rsplit("/", 1)[-1]


def hadoop_mismatch(ckpt: Checkpoint, store: StoreDir, rel: str, data: bytes) -> tuple[int, str] | None:
    """(byte, sidecar) where Hadoop's checksummed read of ``data`` fails against its ``.<name>.crc`` (written on
    local file systems; copies in object stores may carry them along): :func:`hadoopcrc.read_error_at`. An
    unreadable sidecar Hadoop ignores too."""
    crc_rel = store.hadoop_crc.get(rel.rsplit("/", 1)[-1])
    if crc_rel is None:
        return None
    try:
        crc = hadoopcrc.parse(ckpt.read(crc_rel), ckpt.display(crc_rel))
    except FormatError:
        return None
    at = hadoopcrc.read_error_at(crc, data)
    return None if at is None else (at, crc_rel)


def sidecar_mismatch(ckpt: Checkpoint, store: StoreDir, rel: str, data: bytes) -> tuple[str, str] | None:
    """(why, sidecar) when ``data`` differs from its 4.x JSON checksum sidecar ``<name>.crc``."""
    sidecar = store.checksums.get(rel.rsplit("/", 1)[-1])
    if sidecar is None:
        return None
    try:
        why = filechecksum.mismatch(filechecksum.parse(ckpt.read(sidecar), ckpt.display(sidecar)), data)
    except FormatError:
        return None
    return None if not why else (why, sidecar)


def sidecar_unreadable(ckpt: Checkpoint, store: StoreDir, rel: str) -> tuple[str, FormatError] | None:
    """(sidecar, why) when the 4.x JSON checksum sidecar ``<name>.crc`` of ``rel`` is there but does not parse:
    Spark parses it before it verifies anything (damage hunt 8 on 4.3.0: an empty one fails the load with
    Jackson's MismatchedInputException)."""
    sidecar = store.checksums.get(rel.rsplit("/", 1)[-1])
    if sidecar is None:
        return None
    try:
        filechecksum.parse(ckpt.read(sidecar), ckpt.display(sidecar))
    except FormatError as exc:
        return sidecar, exc
    return None


def check_file(
    ckpt: Checkpoint,
    store: StoreDir,
    rel: str,
    kind: str,
    codec_name: str,
    *,
    read: Callable[[str], bytes] | None = None,
    deep: bool = False,
    merge_delimiter: bytes | None = None,
    ssts_checked: dict[str, FileProblem | None] | None = None,
) -> list[FileProblem]:
    """The problems of one state file (``kind``: snapshot | delta | changelog | zip), ending at the first
    FATAL one. ``read`` reads the file itself (the audit's cached reader; default: straight from storage);
    SSTs are always read straight from storage. ``deep``: open a zip's database and read every key.
    ``ssts_checked``: the verdict on each SST already checked (by path), shared across the zips of a store that
    list the same tables, so each SST is read and verified once."""
    display = ckpt.display(rel)
    data = (read or ckpt.location.read)(rel)
    out: list[FileProblem] = []
    if kind == "zip":
        hadoop = hadoop_mismatch(ckpt, store, rel, data)
        if hadoop is not None:
            at, crc_rel = hadoop
            return [
                FileProblem(rel, "hadoop-crc", display, at, f"the bytes {crc_rel} covers", "others", sidecar=crc_rel)
            ]
    if kind == "zip":
        # RocksDBFileManager unzips straight from the file system (Utils.unzipFilesFromFile): the Hadoop .crc is
        # verified on a local file system, the JSON checksum sidecar never (recorded on 4.1.4: a cut zip fails
        # with "Unexpected end of ZLIB input stream", not CHECKPOINT_FILE_CHECKSUM_VERIFICATION_FAILED)
        return _zip(ckpt, store, rel, data, deep, merge_delimiter, {} if ssts_checked is None else ssts_checked)
    bad = sidecar_unreadable(ckpt, store, rel)
    if bad is not None:
        sidecar, exc = bad
        what = "checksum-empty" if exc.kind == "empty" else "checksum-unreadable"
        return [FileProblem(rel, what, exc.path, exc.offset, exc.expected, exc.found, sidecar=sidecar)]
    side = sidecar_mismatch(ckpt, store, rel, data)
    if side is not None:
        why, sidecar = side
        return [FileProblem(rel, "checksum", display, None, f"the content {sidecar} describes", why, sidecar=sidecar)]
    try:
        raw, unread = statefile.decompress_as_read(codec_name, data, display, kind)  # type: ignore[arg-type]
    except FormatError as exc:
        if exc.kind in UNVERIFIABLE:
            return [FileProblem(rel, "unverifiable", exc.path, exc.offset, exc.expected, exc.found)]
        return [
            FileProblem(
                rel, "corrupt", exc.path, exc.offset, exc.expected, exc.found, codec_layer=True, error_kind=exc.kind
            )
        ]
    except MissingExtra as exc:
        return [FileProblem(rel, "unverifiable", display, None, f"the {codec_name} decoder", exc.missing)]
    if unread is not None:  # damage after the chunk holding the end marker: Spark never reads it
        out.append(
            FileProblem(
                rel,
                "trailing",
                unread.path,
                unread.offset,
                unread.expected,
                unread.found,
                codec_layer=True,
                error_kind=unread.kind,
            )
        )
    if _framed_in_bulk(raw, kind):
        return out
    try:
        statefile.verify(raw, f"{display} (offsets in its {codec_name}-decompressed content)", kind)  # type: ignore[arg-type]
    except FormatError as exc:
        k = "trailing" if exc.kind == "trailing-bytes" else "corrupt"
        out.append(FileProblem(rel, k, exc.path, exc.offset, exc.expected, exc.found, error_kind=exc.kind))
    return out


def _framed_in_bulk(raw: bytes, kind: str) -> bool:
    """Whether the whole file frames cleanly, found in bulk (:func:`ckptfix.stores.records.frames`, which checks
    what :func:`statefile.verify` checks, without a Python step per record). False also where numpy is missing or
    the file is irregular: then the record-by-record walk decides, and names the offset where it breaks."""
    from ckptfix.stores import records

    try:
        return records.frames(raw, kind) is not None  # type: ignore[arg-type]
    except ImportError:
        return False


def _zip(
    ckpt: Checkpoint,
    store: StoreDir,
    rel: str,
    data: bytes,
    deep: bool,
    merge_delimiter: bytes | None,
    checked: dict[str, FileProblem | None],
) -> list[FileProblem]:
    display = ckpt.display(rel)
    try:
        meta = rocksdbzip.parse(data, display).metadata
    except FormatError as exc:
        return [FileProblem(rel, "corrupt", exc.path, exc.offset, exc.expected, exc.found, error_kind=exc.kind)]
    out: list[FileProblem] = []
    name = rel.rsplit("/", 1)[-1]
    named = layout.parse_state_file(name)
    # a fact: which Spark reads it is the audit's to say. A format-v2 zip's header is always told (Spark 4.0 reads
    # only v2 there, every later release only v1; hunt 13: a v1 zip in a 4.0.5 v2 store failed CANNOT_READ_CHECKPOINT)
    if meta.version != rocksdbzip.METADATA_VERSION or (named is not None and named.unique_id):
        out.append(FileProblem(rel, "zip-header", f"{display}!/metadata", 0, "v1", f"v{meta.version}"))
    bare: list[rocksdbzip.SstFile] = []  # SSTs without a Hadoop sidecar: only their own block checksums tell
    for sst in meta.sst_files:
        sst_name = sst.dfs_sst_file_name
        sst_rel = f"{store.rel}/SSTs/{sst_name}"
        entry = store.ssts.get(sst_name)
        if entry is None:
            return [
                *out,
                FileProblem(
                    sst_rel, "sst-missing", ckpt.display(sst_rel), None, f"a file ({name} lists it)", "none", zip=rel
                ),
            ]
        if entry.size != sst.size_bytes:
            return [
                *out,
                FileProblem(
                    sst_rel,
                    "sst-size",
                    ckpt.display(sst_rel),
                    None,
                    f"{sst.size_bytes} bytes ({name} lists it)",
                    f"{entry.size} bytes",
                    zip=rel,
                ),
            ]
        if sst_name in store.hadoop_crc:
            # Hadoop's local ChecksumFileSystem verifies the sidecar while Spark copies the SST: the load fails
            if sst_rel not in checked:
                damaged = hadoop_mismatch(ckpt, store, sst_rel, ckpt.location.read(sst_rel))
                checked[sst_rel] = (
                    None
                    if damaged is None
                    else FileProblem(
                        sst_rel,
                        "sst-hadoop-crc",
                        ckpt.display(sst_rel),
                        damaged[0],
                        f"the bytes {damaged[1]} covers",
                        "others",
                        sidecar=damaged[1],
                    )
                )
            problem = checked[sst_rel]
            if problem is not None:
                return [replace(problem, zip=rel)]
        else:
            bare.append(sst)
    # then RocksDB opens the database: it reads each table's footer, metaindex, properties and index blocks and
    # verifies their checksums (a flipped byte there failed every load, recorded 3.5.9-4.3); a filter block that
    # fails its own it ignores; data blocks it reads only when a lookup, a scan or a compaction reaches them
    for sst in bare:
        sst_rel = f"{store.rel}/SSTs/{sst.dfs_sst_file_name}"
        if sst_rel not in checked:
            checked[sst_rel] = _sst_blocks(ckpt, sst_rel)
        problem = checked[sst_rel]
        if problem is None:
            continue
        problem = replace(problem, zip=rel)
        if problem.kind in FATAL:
            return [problem]
        out.append(problem)
    if deep and all(fp.kind in BENIGN for fp in out):
        out.extend(_blocks(ckpt, store, rel, data, meta.sst_files, merge_delimiter))
    return out


def _sst_blocks(ckpt: Checkpoint, sst_rel: str) -> FileProblem | None:
    """One SST's block checksums (:mod:`ckptfix.formats.sst`): damage that stops RocksDB opening the table
    (``sst-corrupt``), in a data block (``sst-blocks``: read only when something reaches it), in the bloom filter
    (``sst-filter``: ignored), or what could not be checked (``unverifiable``)."""
    where = ckpt.display(sst_rel)
    report = sstfile.verify(ckpt.location.read(sst_rel))  # read straight from storage: SSTs are large
    damage = report.damage
    if damage is not None:
        kind = "sst-corrupt" if damage.fails_open else "sst-filter" if damage.role == "filter" else "sst-blocks"
        block = f"{damage.role} block at byte {damage.offset}" if damage.role != "footer" else "footer"
        return FileProblem(
            sst_rel,
            kind,
            where,
            damage.offset,
            f"{damage.expected} for its {block}",
            damage.found,
            rocksdb_message=_rocksdb_message(damage),
        )
    if report.unverified:
        return FileProblem(sst_rel, "unverifiable", where, None, "block checksums ckptfix can check", report.unverified)
    return None


def _rocksdb_message(damage: sstfile.BlockDamage) -> str:
    """The start of RocksDB's own message for this damage (``block checksum mismatch: stored = 3623834813, computed
    = 842994371, type = 4  in <local dir>/000015.sst offset 122 size 30``, seen on 4.3), or of a footer's."""
    if damage.stored is None:  # the footer: RocksDB's "Bad table magic number: expected ..., found ... in <file>"
        return "Bad table magic number" if "magic" in damage.expected else "Corruption"
    stored, computed, ctype = damage.stored, damage.computed, damage.checksum_type
    return f"block checksum mismatch: stored = {stored}, computed = {computed}, type = {ctype}"


def _blocks(
    ckpt: Checkpoint,
    store: StoreDir,
    rel: str,
    data: bytes,
    ssts: Sequence[rocksdbzip.SstFile],
    merge_delimiter: bytes | None,
) -> list[FileProblem]:
    """Open the zip's database with RocksDB and read every key: RocksDB verifies every block's checksum."""
    from ckptfix.stores import rocks

    def loader(name: str) -> Callable[[], bytes]:
        return lambda: ckpt.location.read(f"{store.rel}/SSTs/{name}")

    sources: dict[str, bytes | Callable[[], bytes]] = {s.dfs_sst_file_name: loader(s.dfs_sst_file_name) for s in ssts}
    delimiter = (
        rocks.MERGE_DELIMITERS[rocks.MERGE_OPERATOR_VERSION_ABSENT] if merge_delimiter is None else merge_delimiter
    )
    try:
        with rocks.RocksSnapshot.materialize(data, ckpt.display(rel), sources, merge_delimiter=delimiter) as snap:
            snap.count()
    except MissingExtra as exc:
        return [
            FileProblem(rel, "unverifiable", ckpt.display(rel), None, "RocksDB to verify the SST contents", exc.missing)
        ]
    except FormatError as exc:
        return [FileProblem(rel, "sst-blocks", exc.path, exc.offset, exc.expected, exc.found, zip=rel)]
    return []


__all__ = ["BENIGN", "FATAL", "LATENT", "FileProblem", "check_file", "hadoop_mismatch", "sidecar_mismatch"]
