"""State: can every store load the version the restarted query needs?

Version N = the state after batch N-1; the first batch of the restart loads N =
``next_batch``. HDFS-backed stores need the newest readable ``S.snapshot`` (S <= N) plus
``S+1..N.delta`` (Spark 4.2+ skips a corrupt snapshot for an older one; 3.5-4.1 fail). RocksDB
stores need the newest ``S.zip`` (S <= N) with its SSTs plus ``S+1..N.changelog``; with state
checkpoint format v2 the commit log names the unique id of version N and the changelog's
lineage names its ancestors (spark-state-formats.md §2.2, §4.4, §4.7).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ckptfix import layout
from ckptfix.audit import spark_errors as E
from ckptfix.audit.context import AuditContext
from ckptfix.audit.model import Evidence, Finding, Skipped, SparkError
from ckptfix.audit.registry import RULES, check, define
from ckptfix.checkpoint import OperatorDir, StoreDir
from ckptfix.errors import FormatError, MissingExtra
from ckptfix.formats import codec, filechecksum, hadoopcrc, opmeta, rocksdbzip, statefile
from ckptfix.formats import schema as schema_format

SHUFFLE = "spark.sql.shuffle.partitions"
PROVIDER = "spark.sql.streaming.stateStore.providerClass"
CODEC = "spark.sql.streaming.stateStore.compression.codec"

CHAIN = define(
    "STATE-CHAIN-INCOMPLETE",
    "error",
    "A state file needed to load the restart's state version is missing",
    "Loading version N needs a base (snapshot/zip at or below N, or nothing) and every delta/changelog after "
    "it up to N. Spark fails with CANNOT_LOAD_STATE_STORE (`Error reading delta file ... does not exist` on 3.5).",
    "Restore the file from a backup, or rebuild version N offline from an older snapshot "
    "(`ckptfix state rebuild`), or roll back (`ckptfix rollback`).",
)
PARTITION_MISSING = define(
    "STATE-PARTITION-MISSING",
    "error",
    "A state partition directory is missing",
    "Every partition 0..numPartitions-1 of every stateful operator loads its store at the first batch.",
    "Restore the partition directory from a backup; it cannot be recreated from the other partitions.",
)
PARTITIONS_MISMATCH = define(
    "STATE-PARTITIONS-MISMATCH",
    "warning",
    "The state partition directories differ from the recorded partitions",
    "The number of state partitions is frozen in the offset log (spark.sql.shuffle.partitions) and wins over "
    "the session's value on restart; directories beyond it are never read.",
    "Do not try to change the number of partitions by editing files; extra directories can be archived.",
)
DIR_MISSING = define(
    "STATE-DIR-MISSING",
    "error",
    "The query is stateful but the checkpoint has no state",
    "Spark 4.x fails with STREAMING_STATEFUL_OPERATOR_MISSING_STATE_DIRECTORY; 3.5 fails loading the first delta.",
    "Restore state/ from a backup, or start over from exported offsets (`ckptfix offsets export`).",
)
SNAPSHOT_CORRUPT = define(
    "STATE-SNAPSHOT-CORRUPT",
    "error",
    "A snapshot the restart would load is unreadable",
    "Spark 3.5-4.1 fail on a corrupt newest snapshot; 4.2+ log the failure and fall back to an older snapshot "
    "plus deltas when those still exist.",
    "Rebuild the snapshot from an older one plus deltas (`ckptfix state rebuild`), or, when the deltas exist, "
    "remove the corrupt snapshot (`ckptfix repair`).",
)
FILE_CORRUPT = define(
    "STATE-FILE-CORRUPT",
    "error",
    "A delta/changelog/zip the restart would load is unreadable",
    "Spark reads every file of the chain; a bad lz4 block, a cut-off record or a broken zip fails the batch.",
    "Restore the file from a backup or roll back before it (`ckptfix rollback`).",
)
SST_MISSING = define(
    "STATE-SST-MISSING",
    "error",
    "An SST file that a RocksDB zip lists is missing or has the wrong size",
    "RocksDB zips hold only metadata; the SST files in SSTs/ hold the data and must match the listed sizes.",
    "Restore the SST from a backup, or load an older zip plus changelogs (`ckptfix state rebuild`).",
)
SST_CORRUPT = define(
    "STATE-SST-CORRUPT",
    "error",
    "An SST file of the restart's state is damaged",
    "Spark loads a RocksDB store without verifying its SSTs (PySpark 4.3.0 restarted a checkpoint with one "
    "flipped SST byte and computed that batch correctly) and reads only the blocks a batch needs: a batch that "
    "reads the damaged block fails, at the restart or much later. On a local file system the audit compares each "
    "SST with its Hadoop .crc sidecar; audit --deep opens the database with RocksDB and reads every key, which "
    "verifies every block's checksum (the only check on object stores).",
    "Load an older zip plus changelogs (`ckptfix state rebuild`), restore the SST from a backup, or roll back "
    "(`ckptfix rollback`).",
)
CHECKSUM = define(
    "STATE-CHECKSUM-MISMATCH",
    "error",
    "A state file does not match its checksum sidecar",
    "Spark 4.1 writes `<file>.crc` (CRC32C, size) next to every state file, 4.2+ next to format-v2 state "
    "files, and verifies it on read: "
    "CHECKPOINT_FILE_CHECKSUM_VERIFICATION_FAILED.",
    "Restore the file from a backup, or rebuild the version (`ckptfix state rebuild`).",
)
OPMETA_UNREADABLE = define(
    "STATE-OPERATOR-METADATA-UNREADABLE",
    "warning",
    "Operator metadata cannot be parsed",
    "state/<op>/_metadata/metadata (4.x) describes the operator's stores and partitions.",
    "Remove it so Spark 4.x rewrites it on the next batch (`ckptfix repair`).",
)
STATE_TRAILING = define(
    "STATE-FILE-TRAILING-BYTES",
    "warning",
    "A state file has bytes after its end marker",
    "Spark stops at the end marker and never notices; ckptfix does, because it hints at a damaged write.",
    "Nothing for restart; keep a backup before rewriting this store.",
)
STATE_OLD_CORRUPT = define(
    "STATE-OLD-FILE-CORRUPT",
    "warning",
    "A state file outside the restart's chain is unreadable",
    "Restart does not read it; reading older versions (state reader, rollback) would.",
    "Restore it from a backup if you may need that version.",
)
STATE_JUNK = define(
    "STATE-JUNK",
    "warning",
    "Unexpected files in a state store directory",
    "Non-hidden files that are not state files make the HDFS provider's maintenance fail repeatedly "
    "(NumberFormatException in doMaintenance): snapshots and cleanup stop for that partition.",
    "Move them out of the checkpoint.",
)


@dataclass(frozen=True)
class Problem:
    rule: str
    message: str
    evidence: tuple[Evidence, ...]
    spark_error: SparkError | None
    severity: str | None = None
    undecided: bool = False


UNVERIFIABLE = ("unknown-codec", "missing-extra")


class CodecError(FormatError):
    """A failure of the compression layer (lz4-java block stream), as opposed to the records."""


def _corrupt_error(exc: FormatError) -> SparkError:
    """What Spark raises reading a damaged state file: lz4-java reports a cut-off stream as
    'Stream ended prematurely' and any other damage as 'Stream is corrupted'; a record cut off
    inside an intact stream surfaces as DataInputStream's EOFException."""
    if isinstance(exc, CodecError):
        return E.corrupt_stream("truncated" if exc.kind in ("truncated", "empty") else "corrupt")
    return SparkError("java.io.EOFException", None, "EOFException")


def _decompress(codec_name: str, data: bytes, path: str) -> bytes:
    try:
        return codec.decompress(codec_name, data, path)
    except MissingExtra as exc:  # zstd / snappy without the [codecs] extra: cannot check, say so
        raise CodecError(path, 0, f"the {codec_name} decoder", str(exc), kind="missing-extra") from None
    except FormatError as exc:
        raise CodecError(exc.path, exc.offset, exc.expected, exc.found, kind=exc.kind) from None


class StoreCheck:
    """Decides whether one store can load version N; reads only the chain's files."""

    def __init__(self, ctx: AuditContext, store: StoreDir, version: int, provider: str, unique_id: str | None):
        self.ctx, self.store, self.N, self.provider, self.uid = ctx, store, version, provider, unique_id
        self.codec = codec.normalize(ctx.conf.get(CODEC, "lz4"))
        self.notes: list[Problem] = []
        self.skipped: list[str] = []  # files whose content ckptfix cannot check (yet)

    def display(self, rel: str) -> str:
        return self.ctx.ckpt.display(rel)

    def unreadable(self, rel: str, exc: FormatError) -> Problem:
        return Problem(
            FILE_CORRUPT.id,
            f"{rel} is unreadable ({exc.expected}, found {exc.found})",
            (Evidence(self.display(rel), exc.offset, exc.expected, exc.found),),
            _corrupt_error(exc),
        )

    def rel(self, version: int, kind: str, uid: str | None = None) -> str:
        return f"{self.store.rel}/{layout.state_file_name(version, kind, uid)}"

    def has(self, version: int, kind: str, uid: str | None = None) -> bool:
        return (kind, version, uid) in self.store.files

    def hadoop_mismatch(self, rel: str, data: bytes) -> tuple[int, str] | None:
        """(offset, sidecar) where a file differs from its Hadoop ``.<name>.crc`` (written on local file
        systems; a copy in an object store may carry them along, and they are compared there too)."""
        crc_rel = self.store.hadoop_crc.get(rel.rsplit("/", 1)[-1])
        if crc_rel is None:
            return None
        try:
            crc = hadoopcrc.parse(self.ctx.ckpt.read(crc_rel), self.display(crc_rel))
        except FormatError:
            return None  # an unreadable sidecar: Hadoop ignores it too
        at = hadoopcrc.first_mismatch(crc, data)
        return None if at is None else (at, crc_rel)

    def hadoop_crc(self, rel: str, data: bytes) -> None:
        """Spark reads a RocksDB zip through Hadoop's local ChecksumFileSystem, which verifies its sidecar
        (3.5.9: "Checksum error: file:<...>/4.zip at 2560"); deltas, snapshots, changelogs and SSTs are read
        without that check (4.3 restarted with a flipped SST byte, 3.5-4.2 report a flipped snapshot byte as
        lz4's "Stream is corrupted"), so only a zip's mismatch is a restart failure."""
        if not rel.endswith(".zip"):
            return
        found = self.hadoop_mismatch(rel, data)
        if found is not None:
            at, crc_rel = found
            raise _ChecksumFailure(rel, f"bytes from offset {at} differ from its Hadoop sidecar {crc_rel}", at)

    def read_verified(self, rel: str, kind: str) -> FormatError | None:
        """Check the sidecar checksums (Hadoop's on local file systems, 4.x's JSON ones) and the file's own
        framing."""
        ck = self.ctx.ckpt
        data = ck.read(rel)
        self.hadoop_crc(rel, data)
        name = rel.rsplit("/", 1)[-1]
        sidecar = self.store.checksums.get(name)
        if sidecar is not None:
            try:
                why = filechecksum.mismatch(filechecksum.parse(ck.read(sidecar), self.display(sidecar)), data)
            except FormatError:
                why = None
            if why:
                raise _ChecksumFailure(rel, why)
        try:
            if kind == "zip":
                rocksdbzip.parse(data, self.display(rel))
                return None
            raw = _decompress(self.codec, data, self.display(rel))
            statefile.verify(raw, self.display(rel), kind)  # type: ignore[arg-type]
        except FormatError as exc:
            if exc.kind in UNVERIFIABLE:
                self.skipped.append(f"{rel}: {exc.expected}, found {exc.found}")
                return None
            if exc.kind == "trailing-bytes":
                self.notes.append(
                    Problem(
                        STATE_TRAILING.id,
                        f"{rel} has bytes after its end marker",
                        (Evidence(self.display(rel), exc.offset, exc.expected, exc.found),),
                        None,
                    )
                )
                return None
            return exc
        return None

    # -- HDFS-backed -----------------------------------------------------------------
    def hdfs(self) -> Problem | None:
        N, store = self.N, self.store
        snaps = sorted((v for v in store.versions("snapshot") if v <= N), reverse=True)
        for S in [*snaps, 0]:
            if S:
                rel = self.rel(S, "snapshot")
                exc = self.read_verified(rel, "snapshot")
                if exc is not None:
                    problem = Problem(
                        SNAPSHOT_CORRUPT.id,
                        f"{rel} is unreadable ({exc.expected}, found {exc.found})",
                        (Evidence(self.display(rel), exc.offset, exc.expected, exc.found),),
                        _corrupt_error(exc),
                    )
                    if not self.fall_back(problem):
                        return problem
                    continue
            for v in range(S + 1, N + 1):
                if not self.has(v, "delta"):
                    rel = self.rel(v, "delta")
                    base = f"{S}.snapshot" if S else "empty state"
                    return Problem(
                        CHAIN.id,
                        f"{rel} is missing; version {N} = {base} + deltas {S + 1}..{N}",
                        (Evidence(self.display(rel), expected="a file", found="none"),),
                        E.delta_missing(self.ctx.target, rel),
                    )
            for v in range(S + 1, N + 1):
                rel = self.rel(v, "delta")
                exc = self.read_verified(rel, "delta")
                if exc is not None:
                    return self.unreadable(rel, exc)
            return None
        return None  # unreachable: the loop always ends at S == 0

    # -- RocksDB ---------------------------------------------------------------------------
    def rocksdb_zip(self, version: int, uid: str | None) -> Problem | None:
        rel = self.rel(version, "zip", uid)
        ck = self.ctx.ckpt
        try:
            exc = self.read_verified(rel, "zip")  # the checksum sidecars, then the zip itself
            if exc is not None:
                raise exc
            parsed = rocksdbzip.parse(ck.read(rel), self.display(rel))
        except _ChecksumFailure as cf:
            return cf.problem(self)  # a zip Spark cannot load: 4.2+ fall back to an older one
        except FormatError as exc:
            return Problem(
                FILE_CORRUPT.id,
                f"{rel} is unreadable ({exc.expected}, found {exc.found})",
                (Evidence(self.display(rel), exc.offset, exc.expected, exc.found),),
                SparkError(None, None, "ZLIB" if exc.kind == "truncated" else rel.rsplit("/", 1)[-1]),
            )
        for sst in parsed.metadata.sst_files:
            entry = self.store.ssts.get(sst.dfs_sst_file_name)
            sst_rel = f"{self.store.rel}/SSTs/{sst.dfs_sst_file_name}"
            name = sst.dfs_sst_file_name
            if entry is not None and entry.size == sst.size_bytes and name in self.store.hadoop_crc:
                damaged = self.hadoop_mismatch(sst_rel, ck.location.read(sst_rel))
                if damaged is not None:  # Spark loads it anyway: a finding, not a broken chain
                    self.notes.append(
                        Problem(
                            SST_CORRUPT.id,
                            f"{sst_rel} differs from its Hadoop sidecar {damaged[1]} from byte {damaged[0]} on: "
                            "Spark loads it, and a batch that reads the damaged block fails",
                            (Evidence(self.display(sst_rel), damaged[0], f"the bytes {damaged[1]} covers", "others"),),
                            None,
                        )
                    )
            if entry is None:
                return Problem(
                    SST_MISSING.id,
                    f"{sst_rel} is missing; {rel} lists it",
                    (Evidence(self.display(sst_rel), expected="a file", found="none"), Evidence(self.display(rel))),
                    E.file_not_found(sst.dfs_sst_file_name),
                )
            if entry.size != sst.size_bytes:
                return Problem(
                    SST_MISSING.id,
                    f"{sst_rel} has {entry.size} bytes; {rel} lists {sst.size_bytes}",
                    (Evidence(self.display(sst_rel), expected=f"{sst.size_bytes} bytes", found=f"{entry.size} bytes"),),
                    SparkError(None, None, sst.dfs_sst_file_name),
                )
        if self.ctx.deep and not any(n.rule == SST_CORRUPT.id for n in self.notes):
            unreadable = self.sst_contents(rel, parsed.metadata.sst_files)
            if unreadable is not None:
                self.notes.append(unreadable)
        return None

    def sst_contents(self, zip_rel: str, ssts: Sequence[Any]) -> Problem | None:
        """--deep: open the zip's database with RocksDB and read every key, so RocksDB checks every block's
        checksum. Spark reads only the blocks a batch needs, so whether (and when) the restart fails on a
        damaged block the files cannot tell: the finding leaves the verdict unknown."""
        from ckptfix.state import rocks  # the RocksDB reader (rocksdict); state is this layer's sibling

        ck = self.ctx.ckpt

        def loader(name: str) -> Callable[[], bytes]:
            return lambda: ck.location.read(f"{self.store.rel}/SSTs/{name}")

        sources: dict[str, bytes | Callable[[], bytes]] = {
            s.dfs_sst_file_name: loader(s.dfs_sst_file_name) for s in ssts
        }
        try:
            with rocks.RocksSnapshot.materialize(
                ck.read(zip_rel), self.display(zip_rel), sources, merge_delimiter=rocks.merge_delimiter(self.ctx.conf)
            ) as snap:
                snap.count()
        except MissingExtra:
            self.skipped.append(f"{zip_rel}: SST contents not verified (needs ckptfix[rocksdb])")
            return None
        except FormatError as exc:
            return Problem(
                SST_CORRUPT.id,
                f"{exc.path} fails RocksDB's block checksum verification ({exc.found}): Spark loads it, and a "
                "batch that reads the damaged block fails",
                (Evidence(exc.path, exc.offset, exc.expected, exc.found),),
                None,
            )
        return None

    def rocksdb_chain(self, base: int, base_uid: str | None, steps: Sequence[tuple[int, str | None]]) -> Problem | None:
        """Changelogs after a base zip (already checked) or after the empty state (base 0)."""
        for v, uid in steps:
            rel = self.rel(v, "changelog", uid)
            if not self.has(v, "changelog", uid):
                return Problem(
                    CHAIN.id,
                    f"{rel} is missing; version {self.N} = "
                    f"{f'{base}.zip' if base else 'empty state'} + changelogs up to {self.N}",
                    (Evidence(self.display(rel), expected="a file", found="none"),),
                    E.streaming_file_missing(self.ctx.target, rel),
                )
        for v, uid in steps:
            rel = self.rel(v, "changelog", uid)
            try:
                exc = self.read_verified(rel, "changelog")
            except _ChecksumFailure as cf:
                return cf.problem(self)
            if exc is not None:
                return self.unreadable(rel, exc)
        return None

    def fall_back(self, problem: Problem) -> bool:
        """Spark 4.2+ skips a snapshot it cannot load and tries the next older one (then the
        empty state); older Sparks fail. Records the skipped snapshot as a warning."""
        if not self.ctx.target.falls_back_from_corrupt_snapshot:
            return False
        note = f"{problem.message}; Spark {self.ctx.target.label} falls back to an older snapshot"
        self.notes.append(Problem(problem.rule, note, problem.evidence, None, "warning"))
        return True

    def rocksdb(self) -> Problem | None:
        N = self.N
        if self.uid is None:
            zips = sorted((v for v in self.store.versions("zip") if v <= N), reverse=True)
            for S in zips:
                problem = self.rocksdb_zip(S, None)
                if problem is None:
                    return self.rocksdb_chain(S, None, [(v, None) for v in range(S + 1, N + 1)])
                if not self.fall_back(problem):
                    return problem
            return self.rocksdb_chain(0, None, [(v, None) for v in range(1, N + 1)])
        uid = self.uid
        if self.has(N, "zip", uid):
            return self.rocksdb_zip(N, uid)
        rel = self.rel(N, "changelog", uid)
        if not self.has(N, "changelog", uid):
            return Problem(
                CHAIN.id,
                f"{rel} is missing; commits name it as version {N}",
                (Evidence(self.display(rel), expected="a file", found="none"),),
                E.streaming_file_missing(self.ctx.target, rel),
            )
        try:
            raw = _decompress(self.codec, self.ctx.ckpt.read(rel), self.display(rel))
            header = statefile.parse_changelog_header(raw, self.display(rel))
        except FormatError as exc:
            if exc.kind in UNVERIFIABLE:
                self.skipped.append(f"{rel}: {exc.expected}, found {exc.found}")
                return None
            return self.unreadable(rel, exc)
        lineage = [(e.version, e.checkpoint_unique_id) for e in (header.lineage or ())] + [(N, uid)]
        base_index = max((i for i, (v, u) in enumerate(lineage) if self.has(v, "zip", u)), default=None)
        if base_index is None:
            if lineage[0][0] != 1:
                return Problem(
                    CHAIN.id,
                    f"no zip in the lineage of {rel} and it does not start at version 1",
                    (Evidence(self.display(rel), note=f"lineage starts at {lineage[0][0]}"),),
                    SparkError(None, None, "snapshot"),
                )
            return self.rocksdb_chain(0, None, lineage)
        bv, bu = lineage[base_index]
        return self.rocksdb_zip(bv, bu) or self.rocksdb_chain(bv, bu, lineage[base_index + 1 :])

    def planned(self) -> list[str]:
        """The files the load most likely reads, from the listing alone (for prefetching)."""
        N, files = self.N, []
        if self.provider == "hdfs":
            S = max((v for v in self.store.versions("snapshot") if v <= N), default=0)
            if S:
                files.append(self.rel(S, "snapshot"))
            files += [self.rel(v, "delta") for v in range(S + 1, N + 1) if self.has(v, "delta")]
        elif self.uid is None:
            S = max((v for v in self.store.versions("zip") if v <= N), default=0)
            if S:
                files.append(self.rel(S, "zip"))
            files += [self.rel(v, "changelog") for v in range(S + 1, N + 1) if self.has(v, "changelog")]
        else:
            kind = "zip" if self.has(N, "zip", self.uid) else "changelog"
            files.append(self.rel(N, kind, self.uid))
        return files + [
            self.store.checksums[f.rsplit("/", 1)[-1]] for f in files if f.rsplit("/", 1)[-1] in self.store.checksums
        ]

    def run(self) -> Problem | None:
        try:
            return self.hdfs() if self.provider == "hdfs" else self.rocksdb()
        except _ChecksumFailure as cf:
            return cf.problem(self)


class _ChecksumFailure(Exception):
    def __init__(self, rel: str, why: str, hadoop_offset: int | None = None) -> None:
        self.rel, self.why, self.hadoop_offset = rel, why, hadoop_offset

    def problem(self, sc: StoreCheck) -> Problem:
        at = self.hadoop_offset
        return Problem(
            CHECKSUM.id,
            f"{self.rel}: {self.why}",
            (Evidence(sc.display(self.rel), at, found=self.why),),
            E.checksum_failed(self.rel) if at is None else E.hadoop_checksum(self.rel, at),
        )


def _provider(ctx: AuditContext, op: OperatorDir) -> str:
    cls = ctx.conf.get(PROVIDER, "")
    if "rocksdb" in cls.lower():
        return "rocksdb"
    if cls:
        return "hdfs"
    kinds = {s.provider for stores in op.partitions.values() for s in stores.values()}
    return "rocksdb" if "rocksdb" in kinds else "hdfs"


def _unique_ids(ctx: AuditContext, version: int) -> dict[str, list[list[str]]] | None:
    """Checkpoint format v2: commits/(N-1) names the unique ids of version N."""
    b = version - 1
    if b < 0 or b not in ctx.ckpt.commits.files:
        return None
    entry, _ = ctx.commit_or_error(b)
    return entry.state_unique_ids if entry else None


#: the state schema of StreamingGlobalLimitExec (key: one NullType field, value: the count so far)
GLOBAL_LIMIT_SCHEMA = ({"key": "void"}, {"value": "long"})


def _global_limit(ctx: AuditContext, op: OperatorDir, name: str | None) -> bool:
    """A streaming global limit runs in one task (AllTuples): only partition 0 holds and loads state, whatever
    the shuffle partitions and its operator metadata's numPartitions say (PySpark 4.3.0 writes state/0/0 only
    and restarts it). 4.x names the operator in its metadata; 3.5 only writes the schema."""
    if name is not None:
        return name == "globalLimit"
    store = op.partitions.get(0, {}).get("default")
    if store is None or store.schema is None:
        return False
    try:
        parsed = schema_format.parse(ctx.ckpt.read(store.schema), ctx.ckpt.display(store.schema))
    except (FormatError, OSError):
        return False
    if isinstance(parsed, schema_format.SchemaV3):
        return False

    def shape(s: dict[str, Any]) -> dict[Any, Any]:
        fields = s.get("fields") if isinstance(s, dict) else None
        return {f.get("name"): f.get("type") for f in fields or [] if isinstance(f, dict)}

    return (shape(parsed.key_schema), shape(parsed.value_schema)) == GLOBAL_LIMIT_SCHEMA


def _expected_partitions(ctx: AuditContext, op: OperatorDir) -> tuple[int | None, list[str]]:
    ck = ctx.ckpt
    stores: list[str] = []
    n: int | None = None
    name: str | None = None
    if op.metadata_v1:
        try:
            meta = opmeta.parse(ck.read(op.metadata_v1), ck.display(op.metadata_v1))
            stores = [s.store_name for s in meta.stores]
            n = max((s.num_partitions for s in meta.stores), default=None)
            name = meta.operator_name
        except FormatError:
            pass
    raw = ctx.conf.get(SHUFFLE)
    if raw is not None and raw.isdigit():
        n = int(raw)
    if _global_limit(ctx, op, name):
        n = 1
    return n, stores or op.store_names or ["default"]


@check
def state_chains(ctx: AuditContext) -> Iterator[Finding | Skipped]:
    ck, N = ctx.ckpt, ctx.state_version
    inv = ck.state
    ids = _unique_ids(ctx, N) if N else None
    stateful = ctx.stateful if ctx.stateful is not None else bool(inv.operators or ids)
    if not inv.operators:
        # async progress tracking refuses stateful queries: sparse async logs mean a stateless one
        if ctx.stateful is None and not stateful and N > 0 and not ck.looks_async():
            yield Skipped(
                DIR_MISSING.id,
                "state/ is empty or absent: fine for a stateless query; if the query has stateful operators, "
                "audit with --stateful (Spark then fails to load state)",
            )
        if stateful and N > 0 and ctx.latest_offset is not None:
            provider = "rocksdb" if "rocksdb" in ctx.conf.get(PROVIDER, "").lower() else "hdfs"
            first = f"/1.{'delta' if provider == 'hdfs' else 'changelog'}"  # which partition fails first varies
            if ctx.target.reports_missing_state_directory:
                err = E.state_dir_missing()
            elif provider == "hdfs":
                err = E.delta_missing(ctx.target, first)
            else:
                err = E.streaming_file_missing(ctx.target, first)
            yield DIR_MISSING.finding(
                f"state/ has no operators, but the query is stateful and the restart loads state version {N}",
                [Evidence(ck.display("state"), expected="state/<operator>/<partition>/...", found="nothing")],
                spark_error=err,
                stage=65,
            )
        return
    for op_id, op in sorted(inv.operators.items()):
        if op.metadata_v1:
            try:
                opmeta.parse(ck.read(op.metadata_v1), ck.display(op.metadata_v1))
            except FormatError as exc:
                yield OPMETA_UNREADABLE.finding(
                    f"{op.metadata_v1} cannot be read",
                    [Evidence(ck.display(op.metadata_v1), exc.offset, exc.expected, exc.found)],
                )
        n, store_names = _expected_partitions(ctx, op)
        present = sorted(op.partitions)
        expected = list(range(n)) if n is not None else present
        extra = [p for p in present if p not in expected]
        missing = [p for p in expected if p not in op.partitions]
        if extra:
            yield PARTITIONS_MISMATCH.finding(
                f"operator {op_id} has partition directories {extra} beyond the recorded {n} partitions",
                [Evidence(ck.display(f"{op.rel}/{p}")) for p in extra[:3]],
            )
        provider = _provider(ctx, op)
        checks: list[tuple[int, StoreCheck]] = []
        for p in expected:
            for s_index, store_name in enumerate(store_names):
                store = op.partitions.get(p, {}).get(store_name)
                if store is None:
                    rel = f"{op.rel}/{p}" + ("" if store_name == "default" else f"/{store_name}")
                    store = StoreDir(rel, op_id, p, store_name)
                for name in store.junk:
                    yield STATE_JUNK.finding(f"{name} is not a state file", [Evidence(ck.display(name))])
                if N == 0:
                    continue
                uid = None
                if ids is not None:
                    try:
                        uid = ids[str(op_id)][p][s_index]
                    except (KeyError, IndexError, TypeError):
                        uid = None
                checks.append((p, StoreCheck(ctx, store, N, provider, uid)))
        ctx.observer.stage(f"state operator {op_id}: reading", total=None)
        ck.prefetch([rel for _, sc in checks for rel in sc.planned()])
        ctx.observer.stage(f"state operator {op_id}: verifying", total=len(checks))
        for p, sc in checks:
            ctx.observer.advance()
            problem = sc.run()
            for note in sc.notes:
                yield _as_finding(note)
            for what in sc.skipped:
                yield Skipped(CHAIN.id, f"content not verified: {what}")
            if problem is None:
                continue
            if p in missing:
                yield PARTITION_MISSING.finding(
                    f"{sc.store.rel} is missing (operator {op_id} has {n} partitions); loading version {N} fails",
                    [Evidence(ck.display(sc.store.rel), expected="a directory", found="none"), *problem.evidence],
                    spark_error=problem.spark_error,
                    stage=70,
                )
            else:
                yield _as_finding(problem, stage=70)
    if ctx.deep:
        yield from _deep_state(ctx)


def _as_finding(problem: Problem, stage: int | None = None) -> Finding:
    return RULES[problem.rule].finding(
        problem.message,
        problem.evidence,
        severity=problem.severity,
        spark_error=problem.spark_error,
        stage=stage if problem.spark_error else None,
        undecided=problem.undecided,
    )


def _deep_state(ctx: AuditContext) -> Iterator[Finding]:
    ck = ctx.ckpt
    conf_codec = codec.normalize(ctx.conf.get(CODEC, "lz4"))
    for op in ck.state.operators.values():
        for stores in op.partitions.values():
            for store in stores.values():
                for (kind, _v, _u), rel in sorted(store.files.items(), key=lambda kv: kv[1]):
                    if ck.was_read(rel):  # already verified as part of the chain
                        continue
                    try:
                        data = ck.read(rel)
                        if kind == "zip":
                            rocksdbzip.parse(data, ck.display(rel))
                        else:
                            statefile.verify(codec.decompress(conf_codec, data, ck.display(rel)), ck.display(rel), kind)  # type: ignore[arg-type]
                    except FormatError as exc:
                        if exc.kind not in ("trailing-bytes", *UNVERIFIABLE):
                            yield STATE_OLD_CORRUPT.finding(
                                f"{rel} is unreadable ({exc.expected}, found {exc.found})",
                                [Evidence(ck.display(rel), exc.offset, exc.expected, exc.found)],
                            )
