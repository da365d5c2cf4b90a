"""RocksDB state store snapshots through ``rocksdict``: materialize, iterate, replay, build.

Pure of checkpoint IO: callers pass the bytes of ``N.zip`` and of the SSTs it lists; this
module only writes into a private temporary directory that it removes on exit.

What Spark does, and what is mirrored here (RocksDBFileManager / RocksDB.scala, checked
against real 4.3.0 zips):

- Load: unzip ``N.zip`` into the working dir, copy every ``sstFiles`` entry from
  ``SSTs/<dfsSstFileName>`` under its ``localFileName`` (the copied size must equal
  ``sizeBytes``), drop ``metadata``, open RocksDB with Spark's own options (the ``OPTIONS-*``
  file is not loaded).
- Replay of changelogs: put / delete / merge. The merge operator is RocksDB's
  ``StringAppendOperator`` (first operand on a missing key = the operand alone, else
  ``existing + delimiter + operand``) whose delimiter depends on
  ``spark.sql.streaming.stateStore.rocksdb.mergeOperatorVersion``, a conf frozen in the
  offset log: version 1 = ``","``, version 2 = ``""`` (the 4.2+ default for new queries; a
  checkpoint whose offset log lacks the key is read as version 1). ``rocksdict`` cannot set a
  merge operator, so merges are applied here as get + put.
- Upload: flush (WAL disabled), RocksDB ``Checkpoint`` into a fresh directory; top-level
  ``*.sst`` go to ``SSTs/<base>-<uuid>.sst`` (4.x: one uuid per snapshot), every other
  top-level file (``CURRENT``, ``MANIFEST-*``, ``OPTIONS-*``, the live, empty ``*.log``) into
  the zip, followed by ``metadata``; entries deflated, flat names, MS-DOS "made by" with no
  attributes (as Java's ``ZipOutputStream`` writes them).

SSTs of 4.x ListState hold unmerged merge operands until a compaction reaches the bottom
level. ``rocksdict`` resolves them with the merge operator it builds from the database's
``OPTIONS-*`` file, where Spark's JNI-created operator is recorded as plain
``merge_operator=StringAppendOperator``: RocksDB's default delimiter ``","``, wrong for
``mergeOperatorVersion=2``. So the copy's ``OPTIONS-*`` files are rewritten to
``merge_operator={id=StringAppendOperator;delimiter=<d>}`` with the query's delimiter
(verified on real 4.3 snapshots of both versions). Without any merge operator RocksDB refuses
the read (FormatError kind ``unmerged-operands``), never a silently short iteration.
"""

from __future__ import annotations

import io
import itertools
import os
import posixpath
import re
import shutil
import tempfile
import time
import uuid
import zipfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from ckptfix.errors import FormatError, MissingExtra
from ckptfix.formats import rocksdbzip
from ckptfix.formats.rocksdbzip import METADATA, RocksDBMetadata, SstFile
from ckptfix.formats.statefile import Op, Record

SstSource = bytes | Callable[[], bytes]

#: StringAppendOperator delimiter per ``rocksdb.mergeOperatorVersion`` (RocksDB.scala)
MERGE_DELIMITERS: dict[int, bytes] = {1: b",", 2: b""}
MERGE_OPERATOR_VERSION_CONF = "spark.sql.streaming.stateStore.rocksdb.mergeOperatorVersion"
#: what OffsetSeqMetadata assumes when the offset log of an older query lacks the conf
MERGE_OPERATOR_VERSION_ABSENT = 1

#: the 4.x metadata fields of a store without column families, as Spark 4.3 writes them
NO_COLUMN_FAMILIES_4X: dict[str, Any] = {
    "numInternalKeys": 0,
    "columnFamilyMapping": {},
    "columnFamilyTypeMap": {},
    "maxColumnFamilyId": 0,
}

BLOCK_SIZE = 4096  # rocksdb.blockSizeKB = 4
BLOOM_BITS = 10
FORMAT_VERSION = 5  # rocksdb.formatVersion default, frozen in the offset log
COMPRESSIONS = ("lz4", "snappy", "zstd", "zlib", "none")
BATCH = 10_000  # records per WriteBatch while building

# files of a RocksDB directory that are never part of a snapshot zip
_EXCLUDED = re.compile(r"^(LOCK|LOG.*|IDENTITY|rocksdict-config\.json)$")
_SST_NAME = re.compile(r"(\d+)\.sst")
_OFFSET = re.compile(r"offset (\d+)")
_MERGE_OPERATOR_LINE = re.compile(r"^(\s*merge_operator=).*$", re.MULTILINE)
_ZIP_MADE_BY_DOS = 0
_ZIP_VERSION = 20  # "version made by / needed to extract" 2.0 (deflate), as Java writes


def merge_delimiter(offset_confs: Mapping[str, Any]) -> bytes:
    """The merge delimiter of a query, from the ``conf`` map of its offset log entry."""
    raw = offset_confs.get(MERGE_OPERATOR_VERSION_CONF, MERGE_OPERATOR_VERSION_ABSENT)
    try:
        return MERGE_DELIMITERS[int(raw)]
    except (KeyError, ValueError, TypeError):
        raise ValueError(f"{MERGE_OPERATOR_VERSION_CONF}={raw!r}: Spark accepts 1 or 2") from None


_opened = False


def _rocksdict() -> Any:
    global _opened
    try:
        import rocksdict
    except ImportError:
        raise MissingExtra("rocksdict", "rocksdb") from None
    _opened = True
    return rocksdict


def used_in_this_process() -> bool:
    """Whether this process has used RocksDB (through rocksdict). RocksDB keeps background threads and locks in
    a process-wide environment; a process forked after that inherits the locks but not the threads, and its
    first RocksDB call can wait forever (seen: `state read --jobs 2` after an earlier RocksDB read in the same
    process). Forking readers is only safe before the first use."""
    return _opened


def _is_flat(name: str) -> bool:
    """Spark zips hold plain file names: no directories, no drive, no '..', no separators."""
    return bool(name) and name not in (".", "..") and not re.search(r"[/\\:]|\.\.", name) and "\x00" not in name


def _sst_path(zip_path: str, dfs_name: str) -> str:
    return posixpath.join(posixpath.dirname(zip_path), "SSTs", dfs_name)


# ------------------------------------------------------------------------------------ snapshot


class RocksSnapshot:
    """A RocksDB database in a private temp dir; use as a context manager (removed on exit)."""

    def __init__(
        self,
        root: str,
        zip_path: str | None = None,
        sst_paths: Mapping[str, str] | None = None,
        merge_delimiter: bytes = MERGE_DELIMITERS[MERGE_OPERATOR_VERSION_ABSENT],
    ) -> None:
        _check_delimiter(merge_delimiter)
        self.root = root
        self.merge_delimiter = merge_delimiter
        self.db_dir = os.path.join(root, "db")
        self.zip_path = zip_path
        #: localFileName -> the path its bytes came from (for error messages)
        self.sst_paths: dict[str, str] = dict(sst_paths or {})
        self.metadata: RocksDBMetadata | None = None

    # -- construction

    @classmethod
    def empty(
        cls, workdir: str | None = None, *, merge_delimiter: bytes = MERGE_DELIMITERS[MERGE_OPERATOR_VERSION_ABSENT]
    ) -> RocksSnapshot:
        """An empty database (Spark's version 0: no zip yet, replay changelogs from 1)."""
        _rocksdict()
        _check_delimiter(merge_delimiter)
        root = tempfile.mkdtemp(prefix="ckptfix-rocks-", dir=workdir)
        snap = cls(root, merge_delimiter=merge_delimiter)
        try:
            os.mkdir(snap.db_dir)
            snap.replay([])  # creates the database files
        except BaseException:
            snap.close()
            raise
        return snap

    @classmethod
    def materialize(
        cls,
        zip_bytes: bytes,
        zip_path: str,
        ssts: Mapping[str, SstSource],
        workdir: str | None = None,
        *,
        merge_delimiter: bytes = MERGE_DELIMITERS[MERGE_OPERATOR_VERSION_ABSENT],
    ) -> RocksSnapshot:
        """Unzip ``zip_bytes`` and copy the listed SSTs (``ssts``: dfsSstFileName -> bytes or
        loader) under their local names, as Spark's load does. ``merge_delimiter``: the
        query's StringAppend delimiter (:func:`merge_delimiter`; ``b""`` for 4.2+ defaults)."""
        _rocksdict()
        _check_delimiter(merge_delimiter)
        names = _flat_member_names(zip_bytes, zip_path)
        parsed = rocksdbzip.parse(zip_bytes, zip_path)  # CRCs, metadata; FormatError with offsets
        meta = parsed.metadata
        locals_seen: set[str] = set()
        for sst in meta.sst_files:
            if not _is_flat(sst.local_file_name) or sst.local_file_name in names or sst.local_file_name in locals_seen:
                raise FormatError(
                    f"{zip_path}!/{METADATA}",
                    0,
                    "a flat, unique localFileName",
                    repr(sst.local_file_name),
                    kind="invalid-metadata",
                )
            locals_seen.add(sst.local_file_name)
        root = tempfile.mkdtemp(prefix="ckptfix-rocks-", dir=workdir)
        sst_paths = {s.local_file_name: _sst_path(zip_path, s.dfs_sst_file_name) for s in meta.sst_files}
        snap = cls(root, zip_path, sst_paths, merge_delimiter)
        snap.metadata = meta
        try:
            os.mkdir(snap.db_dir)
            with zipfile.ZipFile(io.BytesIO(zip_bytes)) as zf:
                for info in zf.infolist():
                    if info.filename == METADATA or not DB_MEMBER.fullmatch(info.filename):
                        continue  # not a file RocksDB opens: never decompressed
                    if info.file_size > MAX_DB_MEMBER:
                        raise FormatError(
                            f"{zip_path}!/{info.filename}",
                            info.header_offset,
                            f"a RocksDB metadata file of at most {MAX_DB_MEMBER >> 20} MiB",
                            f"{info.file_size} bytes",
                            kind="oversized-member",
                        )
                    _extract(zf, info, os.path.join(snap.db_dir, info.filename))
            for sst in meta.sst_files:
                _write_new(os.path.join(snap.db_dir, sst.local_file_name), _load_sst(zip_path, sst, ssts))
            snap._set_merge_operator()
        except BaseException:
            snap.close()
            raise
        return snap

    # -- lifetime

    def __enter__(self) -> RocksSnapshot:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    # -- reading

    def items(self) -> Iterator[tuple[bytes, bytes]]:
        """All (key, value) pairs in bytewise key order, streamed from a read-only open."""
        db = self._open(read_only=True)
        try:
            it = db.iter()
            try:
                it.seek_to_first()
                while it.valid():
                    yield bytes(it.key()), bytes(it.value())
                    it.next()
                it.status()  # an iterator stops early on corruption: surface it
            except Exception as exc:
                raise self._error(exc) from None
        finally:
            db.close()

    def columns(self) -> tuple[list[bytes], list[bytes]]:
        """Every key and every value, in bytewise key order, as two lists: :meth:`items` without a generator step
        and a tuple per pair (the bulk readers turn them into Arrow arrays). The iterator's status is checked at
        the end, as by :meth:`items`: RocksDB stops an iterator early on a corrupt block, silently."""
        db = self._open(read_only=True)
        keys: list[bytes] = []
        values: list[bytes] = []
        try:
            it = db.iter()
            try:
                it.seek_to_first()
                add_key, add_value, key, value, step, valid = (
                    keys.append,
                    values.append,
                    it.key,
                    it.value,
                    it.next,
                    it.valid,
                )
                while valid():
                    add_key(key())
                    add_value(value())
                    step()
                it.status()
            except Exception as exc:
                raise self._error(exc) from None
        finally:
            db.close()
        return keys, values

    def count(self) -> int:
        return sum(1 for _ in self.items())

    # -- writing

    def replay(self, records: Iterable[Record], *, merge_delimiter: bytes | None = None) -> int:
        """Apply changelog records in order (put / delete / StringAppend merge); returns the
        number applied. ``merge_delimiter`` defaults to the snapshot's own."""
        rd = _rocksdict()
        delim = self.merge_delimiter if merge_delimiter is None else merge_delimiter
        _check_delimiter(delim)
        db = self._open(read_only=False)
        applied = 0
        try:
            wo = rd.WriteOptions()
            wo.disable_wal = True
            try:
                for rec in records:
                    if rec.op is Op.PUT:
                        db.put(rec.key, _value(rec), wo)
                    elif rec.op is Op.DELETE:
                        db.delete(rec.key, wo)
                    else:
                        old = db.get(rec.key)
                        operand = _value(rec)
                        db.put(rec.key, operand if old is None else bytes(old) + delim + operand, wo)
                    applied += 1
                db.flush()
            except FormatError:
                raise
            except Exception as exc:
                raise self._error(exc) from None
        finally:
            db.close()
            # a read-write open writes a new OPTIONS file naming the operator without its delimiter
            self._set_merge_operator()
        return applied

    # -- internals

    def _set_merge_operator(self) -> None:
        """Point the OPTIONS files (which rocksdict loads) at StringAppend with our delimiter."""
        line = "merge_operator={id=StringAppendOperator;delimiter=" + self.merge_delimiter.decode("ascii") + "}"
        for name in os.listdir(self.db_dir):
            if name.startswith("OPTIONS-"):
                path = os.path.join(self.db_dir, name)
                with open(path, encoding="utf-8", errors="surrogateescape") as f:
                    text = f.read()
                text = _MERGE_OPERATOR_LINE.sub(lambda m: m.group(1) + line[len("merge_operator=") :], text)
                with open(path, "w", encoding="utf-8", errors="surrogateescape") as f:
                    f.write(text)

    def _open(self, *, read_only: bool) -> Any:
        rd = _rocksdict()
        opts = rd.Options(raw_mode=True)
        opts.set_disable_auto_compactions(True)  # no background work on a copy we only read/patch
        opts.set_paranoid_checks(True)
        if read_only:
            access = rd.AccessType.read_only(False)
        else:
            opts.create_if_missing(True)
            access = rd.AccessType.read_write()
        try:
            return rd.Rdict(self.db_dir, opts, access_type=access)
        except Exception as exc:
            raise self._error(exc) from None

    def _error(self, exc: BaseException) -> FormatError:
        """One FormatError naming the file RocksDB complained about."""
        # RocksDB names files by their path in our temp copy: keep just the file names
        msg = (str(exc) or type(exc).__name__).replace(self.db_dir + os.sep, "").replace(self.db_dir, ".")
        offset_m = _OFFSET.search(msg)
        offset = int(offset_m.group(1)) if offset_m else 0
        kind = "corrupt-sst"
        low = msg.lower()
        if "merge_operator" in low or "merge operator" in low:
            kind = "unmerged-operands"
        path = self.zip_path or self.db_dir
        sst = next((m.group(0) for m in _SST_NAME.finditer(msg) if m.group(0) in self.sst_paths), None)
        if sst is not None:
            path = self.sst_paths[sst]
        else:
            other = re.search(r"(MANIFEST-\d+|CURRENT|OPTIONS-\d+|\d+\.log)", msg)
            if other and self.zip_path:
                path = f"{self.zip_path}!/{other.group(1)}"
            if other and kind == "corrupt-sst":
                kind = "corrupt-manifest" if other.group(1).startswith("MANIFEST-") else "corrupt-zip-member"
        expected = (
            "merged values (RocksDB needs the StringAppend merge operator for these SSTs)"
            if kind == "unmerged-operands"
            else "a RocksDB database RocksDB can open and read"
        )
        return FormatError(path, offset, expected, f"{type(exc).__name__}: {msg}", kind=kind)


def _check_delimiter(delim: bytes) -> None:
    ok = isinstance(delim, bytes) and (delim == b"" or (len(delim) == 1 and 0x20 < delim[0] < 0x7F))
    if not ok or delim in (b";", b"{", b"}", b"="):
        raise ValueError(f"merge delimiter {delim!r}: expected b'' or one printable ASCII byte")


def _value(rec: Record) -> bytes:
    if rec.value is None:
        raise FormatError("<changelog>", max(rec.offset, 0), f"a value for a {rec.op.value} record", "none")
    return rec.value


#: the members of a Spark RocksDB zip that RocksDB reads (the SSTs live beside the zip, in SSTs/); anything else
#: in a zip is left packed
DB_MEMBER = re.compile(r"CURRENT|IDENTITY|MANIFEST-[0-9]+|OPTIONS-[0-9]+|[0-9]+\.log")
#: a bound on one of them, far above what a checkpoint's MANIFEST/OPTIONS/CURRENT hold
MAX_DB_MEMBER = 64 << 20


def _extract(zf: zipfile.ZipFile, info: zipfile.ZipInfo, path: str) -> None:
    """Stream one member to a new file (bounded memory)."""
    with zf.open(info) as src, open(path, "xb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)


def _write_new(path: str, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _flat_member_names(data: bytes, path: str) -> set[str]:
    """Reject any member that is not a plain file name, before anything is written."""
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
    except Exception:
        rocksdbzip.parse(data, path)  # raises the FormatError (empty, truncated, not a zip ...)
        raise
    names: set[str] = set()
    with zf:
        for info in zf.infolist():
            name = info.filename
            # ZipInfo turns '\\' into '/' on Windows only; also look at the raw header name
            raw = getattr(info, "orig_filename", name)
            if not _is_flat(name) or not _is_flat(raw) or name in names:
                raise FormatError(path, info.header_offset, "a flat member name", repr(raw), kind="unsafe-member")
            names.add(name)
    return names


def _load_sst(zip_path: str, sst: SstFile, ssts: Mapping[str, SstSource]) -> bytes:
    where = _sst_path(zip_path, sst.dfs_sst_file_name)
    source = ssts.get(sst.dfs_sst_file_name)
    if source is None:
        raise FormatError(
            where, 0, f"the SST file listed in {zip_path}!/{METADATA}", "no such file", kind="missing-file"
        )
    if callable(source):
        try:
            data = source()
        except FileNotFoundError:
            raise FormatError(
                where, 0, f"the SST file listed in {zip_path}!/{METADATA}", "no such file", kind="missing-file"
            ) from None
    else:
        data = source
    if len(data) != sst.size_bytes:
        raise FormatError(
            where, min(len(data), sst.size_bytes), f"{sst.size_bytes} bytes", f"{len(data)} bytes", kind="size-mismatch"
        )
    return bytes(data)


# ------------------------------------------------------------------------------------ building


@dataclass(frozen=True)
class BuiltSnapshot:
    zip_bytes: bytes
    ssts: dict[str, bytes]  # dfsSstFileName -> bytes, to write under SSTs/
    metadata: RocksDBMetadata


def build_snapshot(
    items: Iterable[tuple[bytes, bytes]],
    *,
    compression: str = "lz4",
    sst_suffix_uuid: str | None = None,
    column_family_fields: Mapping[str, Any] | None = None,
    num_keys: int | None = None,
    workdir: str | None = None,
    metadata_version: int = rocksdbzip.METADATA_VERSION,
) -> BuiltSnapshot:
    """A fresh RocksDB snapshot of ``items`` that Spark's RocksDB provider loads.

    ``metadata_version``: the zip metadata's ``v<N>`` header: the one of the store's other zips (Spark 4.0 with
    checkpoint format v2 writes and reads only ``v2``; every other release ``v1``).

    ``compression``: ``lz4`` (4.x default) or ``snappy`` (3.5). ``column_family_fields``: the
    4.x metadata fields (``numInternalKeys``, ``columnFamilyMapping``, ``columnFamilyTypeMap``,
    ``maxColumnFamilyId``; e.g. :data:`NO_COLUMN_FAMILIES_4X`), omitted for the 3.5 shape.
    ``num_keys``: the user-visible key count; by default the number of distinct keys written.
    """
    rd = _rocksdict()
    if compression not in COMPRESSIONS:
        raise ValueError(f"compression {compression!r}: expected one of {COMPRESSIONS}")
    suffix = sst_suffix_uuid or str(uuid.uuid4())
    root = tempfile.mkdtemp(prefix="ckptfix-rocks-build-", dir=workdir)
    try:
        db_dir, ck_dir = os.path.join(root, "db"), os.path.join(root, "checkpoint")
        opts = rd.Options(raw_mode=True)
        opts.create_if_missing(True)
        opts.set_compression_type(getattr(rd.DBCompressionType, compression)())
        table = rd.BlockBasedOptions()
        table.set_block_size(BLOCK_SIZE)
        table.set_bloom_filter(BLOOM_BITS, False)
        table.set_format_version(FORMAT_VERSION)
        opts.set_block_based_table_factory(table)
        wo = rd.WriteOptions()
        wo.disable_wal = True
        db = rd.Rdict(db_dir, opts)
        try:
            pending = iter(items)
            while chunk := list(itertools.islice(pending, BATCH)):
                batch = rd.WriteBatch(raw_mode=True)
                put = batch.put
                for key, value in chunk:
                    put(key if type(key) is bytes else bytes(key), value if type(value) is bytes else bytes(value))
                db.write(batch, wo)
            db.flush()
            rd.Checkpoint(db).create_checkpoint(ck_dir)
        finally:
            db.close()
        counted = 0
        if num_keys is None:
            ro = rd.Rdict(ck_dir, rd.Options(raw_mode=True), access_type=rd.AccessType.read_only(False))
            try:
                it = ro.iter()
                it.seek_to_first()
                while it.valid():
                    counted += 1
                    it.next()
                it.status()
            finally:
                ro.close()
        files = sorted(f for f in os.listdir(ck_dir) if os.path.isfile(os.path.join(ck_dir, f)))
        sst_files: list[SstFile] = []
        ssts: dict[str, bytes] = {}
        members: dict[str, bytes] = {}
        for name in files:
            if _EXCLUDED.match(name):
                continue
            with open(os.path.join(ck_dir, name), "rb") as f:
                data = f.read()
            if name.endswith(".sst"):
                dfs = f"{name[: -len('.sst')]}-{suffix}.sst"
                sst_files.append(SstFile(name, dfs, len(data)))
                ssts[dfs] = data
            else:
                members[name] = data
    finally:
        shutil.rmtree(root, ignore_errors=True)
    metadata = _metadata(
        tuple(sst_files), counted if num_keys is None else num_keys, column_family_fields, metadata_version
    )
    return BuiltSnapshot(_zip(members, metadata), ssts, metadata)


def _metadata(
    sst_files: tuple[SstFile, ...], num_keys: int, cf: Mapping[str, Any] | None, version: int
) -> RocksDBMetadata:
    cf = dict(cf or {})
    known = ("numInternalKeys", "columnFamilyMapping", "columnFamilyTypeMap", "maxColumnFamilyId")
    return RocksDBMetadata(
        version=version,
        sst_files=sst_files,
        num_keys=num_keys,
        num_internal_keys=cf.get("numInternalKeys"),
        column_family_mapping=cf.get("columnFamilyMapping"),
        column_family_type_map=cf.get("columnFamilyTypeMap"),
        max_column_family_id=cf.get("maxColumnFamilyId"),
        extra={k: v for k, v in cf.items() if k not in known},
    )


def _zip(members: Mapping[str, bytes], metadata: RocksDBMetadata) -> bytes:
    """Deflated, flat entries; ``metadata`` last (as RocksDBFileManager zips them)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in [*members.items(), (METADATA, rocksdbzip.dump_metadata(metadata))]:
            info = zipfile.ZipInfo(name, date_time=time.localtime()[:6])
            info.compress_type = zipfile.ZIP_DEFLATED
            info.create_system = _ZIP_MADE_BY_DOS
            info.create_version = info.extract_version = _ZIP_VERSION
            info.external_attr = 0
            zf.writestr(info, data)
    return buf.getvalue()
