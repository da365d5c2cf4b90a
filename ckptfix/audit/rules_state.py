"""State: can every store load the version the restarted query needs?

Version N = the state after batch N-1; the first batch of the restart loads N =
``next_batch``. HDFS-backed stores need the newest readable ``S.snapshot`` (S <= N) plus
``S+1..N.delta`` (Spark 4.2+ skips a corrupt snapshot for an older one; 3.5-4.1 fail). RocksDB
stores need the newest ``S.zip`` (S <= N) with its SSTs plus ``S+1..N.changelog``; with state
checkpoint format v2 the commit log names the unique id of version N and the changelog's
lineage names its ancestors (spark-state-formats.md §2.2, §4.4, §4.7).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace

from ckptfix import layout
from ckptfix.audit import spark_errors as E
from ckptfix.audit.context import AuditContext
from ckptfix.audit.model import Evidence, Finding, Skipped, SparkError
from ckptfix.audit.registry import RULES, check, define
from ckptfix.checkpoint import OperatorDir, StoreDir
from ckptfix.errors import FormatError, MissingExtra
from ckptfix.formats import codec, opmeta, statefile
from ckptfix.state.schemas import name_contradiction, recorded_partitions
from ckptfix.stores import chain as chains
from ckptfix.stores import provider as providers
from ckptfix.stores import sample, verify
from ckptfix.stores.verify import FileProblem

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
SHUFFLE = "spark.sql.shuffle.partitions"
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
PROVIDER_EDITED = define(
    "CONF-PROVIDER-EDITED",
    "error",
    "The latest offset file's state store provider is not the one the state was written by",
    "Spark restores spark.sql.streaming.stateStore.providerClass from the latest offset file and carries it unchanged "
    "from batch to batch; a checkpoint cannot change provider (`ckptfix migrate provider` converts the state and "
    "starts a new log). A provider of another kind than the previous offset file's, while every state file is the "
    "previous provider's, is an edit of the offset file: the first batch loads the state with the wrong provider "
    "and fails on a file it never wrote.",
    "Write the previous offset file's provider back into the latest one: `ckptfix repair` does (no batch re-runs). "
    "To change the provider, convert the state: `ckptfix migrate provider`.",
)
SHUFFLE_EDITED = define(
    "CONF-SHUFFLE-PARTITIONS-EDITED",
    "error",
    "The latest offset file's spark.sql.shuffle.partitions is not the state's",
    "Spark takes the number of state partitions from the latest offset file and carries it unchanged from batch to "
    "batch; only a repartition batch (Spark's offline runner, `ckptfix state repartition`) records a new count, "
    "and it writes the state in that many partitions. A count that differs from the previous offset file's while "
    "the state stays in the old number of partitions is an edit of the offset file (on an object store no .crc "
    "sidecar shows it). More partitions: the first batch fails loading a partition without state. Fewer: Spark "
    "restarts and silently reads only part of the state and hashes keys anew. The state itself is fine.",
    "`ckptfix repair CKPT` writes the previous count back into the offset file. To change the number of "
    "partitions, repartition the state with `ckptfix state repartition` (the finding names the command).",
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
    "`ckptfix repair`, when an older snapshot (or version 1) and every delta after it exist: it writes a new "
    "snapshot of the version the restart loads from them (as `ckptfix state rebuild` does), which Spark loads "
    "instead, and leaves the corrupt file as it is (restore it from a backup to have it whole: `audit --deep` "
    "reports it until then); otherwise restore the snapshot from a backup.",
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
    "`ckptfix repair`, when an older zip and every changelog after it exist (changelog checkpointing): it writes "
    "the version again from them (as `ckptfix state rebuild` does); otherwise restore the SST from a backup.",
)
SST_CORRUPT = define(
    "STATE-SST-CORRUPT",
    "error",
    "An SST file of the restart's state is damaged",
    "Spark copies every SST the zip lists before RocksDB opens the database. On a local file system Hadoop "
    "verifies each SST against its .crc sidecar while copying (ChecksumException: recorded on 3.5.9-4.3); "
    "RocksDB then opens each table and verifies the checksums of its metaindex, properties and index blocks "
    "(RocksDBException: block checksum mismatch). Either stops the load of that zip: Spark 4.2+ with changelog "
    "checkpointing skips it for an older zip plus changelogs (auto snapshot repair), other Sparks fail. A damaged "
    "bloom filter block RocksDB ignores (a warning). A damaged data block is read only when a lookup of a key in "
    "it, a scan or a compaction reaches it: at the restart or later, so that verdict is unknown. The audit checks "
    "the sidecar where there is one and every block's checksum where there is none (no RocksDB needed); audit "
    "--deep also reads every key through RocksDB.",
    "`ckptfix repair`, when an older zip and every changelog after it exist (changelog checkpointing): it writes "
    "the version again from them (as `ckptfix state rebuild` does); otherwise restore the SST from a backup, or "
    "roll back before the zip that lists it (`ckptfix rollback`).",
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
    "state/<op>/_metadata/metadata (4.x) describes the operator's stores and partitions. A transformWithState "
    "operator's newest state/<op>/_metadata/v2/<batch> is read when the first batch is planned: damaged, it fails "
    "the restart (an error then).",
    "Move a damaged metadata file out of the checkpoint (keep it as a backup) so Spark 4.x rewrites it on the next "
    "batch; for a v2 file, restore it from a backup.",
)
V2_IDS_MISSING = define(
    "STATE-V2-IDS-MISSING",
    "error",
    "The commit log names no state unique ids for state files of checkpoint format v2",
    "With state checkpoint format v2 the state files carry unique ids (`N_<uuid>.zip`, `.changelog`) and "
    "commits/(N-1) names the ones version N is made of (`stateUniqueIds`). Without them Spark loads the store the "
    "v1 way and fails: it takes snapshot versions from zip names (`N_<uuid>.zip`: CANNOT_LOAD_STATE_STORE, "
    '`NumberFormatException: For input string: "N_<uuid>"`, seen on 4.3) or, with no zip yet, replays changelogs '
    "from version 1 (`1.changelog does not exist`, recorded on 4.0.5-4.3).",
    "Restore the commit from a backup: its ids name which attempt's files the batch committed. Or roll back to "
    "the batch before it (the finding names the command; with `--sink OUT --with-sink` when a file sink holds the "
    "batch): Spark runs the batch again.",
)
V2_NAME_IN_V1 = define(
    "STATE-FILE-V2-NAME",
    "error",
    "A state file of a format-v1 checkpoint carries a format-v2 name",
    "A checkpoint of state format v1 names its RocksDB files by version alone (`N.zip`, `N.changelog`); a file "
    "named `N_<uuid>.zip` or `N_<uuid>.changelog` there is one copied in from a format-v2 checkpoint, or renamed by "
    "hand. Spark loads the v1 way: it takes snapshot versions from every zip's name, and `N_<uuid>` is no number "
    '(`NumberFormatException: For input string: "N_<uuid>"`, recorded: v1_newest_zip_renamed_v2); a changelog it '
    "opens by its v1 name, so the renamed one is missing for it (STATE-CHAIN-INCOMPLETE names it).",
    "Rename the file to its v1 name (`N.zip`; the id part dropped), or move it out of the checkpoint when a file of "
    "that name is there already.",
)
STATE_TRAILING = define(
    "STATE-FILE-TRAILING-BYTES",
    "warning",
    "A state file has bytes after its end marker",
    "Spark stops at the end marker and never notices; ckptfix does, because it hints at a damaged write. Also a "
    "delta or snapshot whose compressed stream is cut or damaged after the block that holds the end marker (an "
    "LZ4 end block cut off): Spark's reader stops at the marker and never decompresses the rest (recorded on "
    "3.5.9-4.2.1).",
    "Nothing for restart; keep a backup before rewriting this store.",
)
STATE_OLD_CORRUPT = define(
    "STATE-OLD-FILE-CORRUPT",
    "warning",
    "A state file outside the restart's chain is unreadable",
    "Restart does not read it; reading older versions (state reader, rollback) would.",
    "Restore it from a backup if you may need that version.",
)
CUSTOM_PROVIDER = define(
    "STATE-PROVIDER-CUSTOM",
    "warning",
    "The state store provider is not one of Spark's",
    "The offset log records a providerClass other than Spark's HDFSBackedStateStoreProvider and "
    "RocksDBStateStoreProvider (a vendor's or a user's class). ckptfix checks the files in the layout they show, "
    "but how that class loads them (and whether this Spark has it on its classpath) the files cannot tell.",
    "Restart with the same provider class on the classpath; ckptfix's verdict on the state is a best guess.",
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
    fix: str | None = None  # this finding's own fix (default: the rule's)
    #: the state file whose version the damage costs (an SST's: the zip that lists it), when not evidence[0]'s
    lost: str | None = None
    sst: str | None = None  # the damaged or missing SST, checkpoint-relative


def _corrupt_error(fp: FileProblem) -> SparkError:
    """What Spark raises reading a damaged state file: lz4-java reports a cut-off stream as
    'Stream ended prematurely' and any other damage as 'Stream is corrupted'; a record cut off
    inside an intact stream surfaces as DataInputStream's EOFException. An empty file is an empty lz4 stream, which
    lz4-java reads as its end (stopOnEmptyBlock), so the first readInt fails with a bare EOFException (damage hunt 7,
    c09, on 4.3: CANNOT_LOAD_STATE_STORE.UNCATEGORIZED caused by it; recorded as state_delta_emptied)."""
    if fp.codec_layer and fp.error_kind == "empty" and "LZ4Block" in fp.expected:
        return SparkError("java.io.EOFException", None, "EOFException")
    if fp.codec_layer:
        return E.corrupt_stream("truncated" if fp.error_kind in ("truncated", "empty") else "corrupt")
    return SparkError("java.io.EOFException", None, "EOFException")


#: what Spark raises when it cannot read the lineage at the head of a format v2 changelog, by the kind of the
#: FormatError :meth:`StoreCheck.lineage` raises (the load wraps each: 4.0.5-4.2.1 always UNCATEGORIZED)
LINEAGE_ERRORS = {
    "lineage-corrupt": "Stream is corrupted",
    "lineage-cut": "Stream ended prematurely",
    "lineage-eof": "EOFException",
    "no-lineage": "readLineage should only be invoked with state store checkpoint id enabled",
}


class StoreCheck:
    """Decides whether one store can load version N, from the store model's chain (:mod:`ckptfix.stores.chain`)
    and file facts (:mod:`ckptfix.stores.verify`), the ones ``state ls`` reads too; reads only the chain's files."""

    def __init__(self, ctx: AuditContext, store: StoreDir, version: int, provider: str, unique_id: str | None):
        self.ctx, self.store, self.N, self.provider, self.uid = ctx, store, version, provider, unique_id
        self.codec = codec.normalize(ctx.conf.get(CODEC, "lz4"))
        self.notes: list[Problem] = []
        self.skipped: list[str] = []  # files whose content ckptfix cannot check (yet)

    def display(self, rel: str) -> str:
        return self.ctx.ckpt.display(rel)

    def rel(self, version: int, kind: str, uid: str | None = None) -> str:
        return f"{self.store.rel}/{layout.state_file_name(version, kind, uid)}"

    def check(self, rel: str, kind: str) -> Problem | None:
        """The file's facts: latent and benign ones become notes, the fatal one the problem."""
        from ckptfix.stores import rocks

        facts = verify.check_file(
            self.ctx.ckpt,
            self.store,
            rel,
            kind,
            self.codec,
            read=self.ctx.ckpt.read,
            deep=self.ctx.deep,
            merge_delimiter=rocks.merge_delimiter(self.ctx.conf) if kind == "zip" and self.ctx.deep else None,
        )
        for fp in facts:
            if fp.kind == "unverifiable":
                self.skipped.append(f"{fp.rel}: expected {fp.expected}, found {fp.found}")
            elif fp.kind == "trailing":
                self.notes.append(
                    Problem(
                        STATE_TRAILING.id,
                        f"{rel} is damaged after its end marker ({fp.expected}, found {fp.found}): Spark stops "
                        "reading at the end marker and never reads it"
                        if fp.codec_layer
                        else f"{rel} has bytes after its end marker",
                        (Evidence(self.display(rel), fp.offset, fp.expected, fp.found),),
                        None,
                    )
                )
            elif fp.kind == "zip-header":
                problem = self.zip_header(fp)
                if problem is not None:
                    return problem
            elif fp.kind == "sst-filter":
                self.notes.append(
                    Problem(
                        SST_CORRUPT.id,
                        f"{fp.where}: {fp.expected}, found {fp.found}: RocksDB reads a table whose bloom filter "
                        "fails its checksum as one without a filter (Spark 3.5.9-4.3 restarted such a state with "
                        "the right results); only its lookups are slower",
                        (Evidence(fp.where, fp.offset, fp.expected, fp.found),),
                        None,
                        "warning",
                        lost=fp.zip,
                        sst=fp.rel,
                    )
                )
            elif fp.kind == "checksum-unreadable":
                self.notes.append(
                    Problem(
                        CHECKSUM.id,
                        f"{fp.sidecar}, the checksum file of {rel}, does not parse ({fp.expected}, found {fp.found}): "
                        "Spark parses it before it reads the file; what it raises for one like this is not recorded",
                        (Evidence(fp.where, fp.offset, fp.expected, fp.found),),
                        None,
                        undecided=True,
                    )
                )
            elif fp.kind == "sst-blocks":
                self.notes.append(
                    Problem(
                        SST_CORRUPT.id,
                        f"{fp.where}: {fp.expected}, found {fp.found}: RocksDB fails whatever reads that block "
                        "(a lookup of a key in it, a scan, or a compaction), at the restart or later",
                        (Evidence(fp.where, fp.offset, fp.expected, fp.found),),
                        None,
                        undecided=True,
                        lost=fp.zip,
                        sst=fp.rel,
                    )
                )
            else:
                return self.fatal(fp, kind)
        return None

    def zip_header(self, fp: FileProblem) -> Problem | None:
        """A zip whose metadata says ``v2``: what Spark 4.0 writes with checkpoint format v2 (its
        RocksDBCheckpointMetadata.VERSION is the session's checkpointFormatVersion, and it reads only that one);
        4.1+ read only ``v1`` (``javap`` of 4.1.4-4.3.0). 4.2+ with auto snapshot repair load the state another way
        (seen on 4.3: a 4.0.5 format-v2 checkpoint restarted with the right aggregates): a warning."""
        found = int(fp.found.lstrip("v"))
        target = self.ctx.target
        expected = 1
        if target.at_least(4, 0) and not target.at_least(4, 1):
            told = self.ctx.session_conf.get(chains.FORMAT_VERSION_CONF, "").strip()
            expected = int(told) if told.isdigit() else 2 if self.ctx.ckpt.state_format_v2() else 1
        if found == expected:
            return None
        written = " (what Spark 4.0 writes with checkpoint format v2)" if found == 2 else ""
        message = f"{fp.rel}'s metadata is v{found}{written}; Spark {target.label} reads only v{expected}"
        ev = (Evidence(fp.where, 0, f"v{expected}", f"v{found}"),)
        if target.falls_back_from_corrupt_snapshot and chains.skips_bad_snapshot(
            self.store, self.provider, self.ctx.session_conf
        ):
            self.notes.append(
                Problem(
                    FILE_CORRUPT.id,
                    f"{message}: it loads the state from older files instead (auto snapshot repair)",
                    ev,
                    None,
                    "warning",
                    lost=fp.rel,
                )
            )
            return None
        return Problem(FILE_CORRUPT.id, message, ev, E.cannot_read_zip_metadata(expected, found), lost=fp.rel)

    def fatal(self, fp: FileProblem, kind: str) -> Problem:
        problem = self._fatal(fp, kind)
        return replace(problem, lost=fp.zip, sst=fp.rel) if fp.zip else problem

    def _fatal(self, fp: FileProblem, kind: str) -> Problem:
        ev = (Evidence(self.display(fp.rel), fp.offset, fp.expected, fp.found),)
        if fp.kind == "hadoop-crc":
            return Problem(
                CHECKSUM.id,
                f"{fp.rel}: bytes from offset {fp.offset} differ from its Hadoop sidecar {fp.sidecar}",
                (Evidence(self.display(fp.rel), fp.offset, found=f"differs from {fp.sidecar}"),),
                E.hadoop_checksum(fp.rel, fp.offset or 0),
            )
        if fp.kind == "checksum":
            return Problem(CHECKSUM.id, f"{fp.rel}: {fp.found}", ev, E.checksum_failed(fp.rel))
        if fp.kind == "checksum-empty":
            # Jackson maps the empty file before any verification (damage hunt 8 on 4.3.0, H4)
            return Problem(
                CHECKSUM.id,
                f"{fp.sidecar}, the checksum file of {fp.rel}, is empty: Spark parses it before it reads the file",
                (Evidence(fp.where, 0, fp.expected, fp.found),),
                SparkError(
                    "com.fasterxml.jackson.databind.exc.MismatchedInputException",
                    "CANNOT_LOAD_STATE_STORE.UNCATEGORIZED",
                    "No content to map due to end-of-input",
                ),
                fix=f"Delete {fp.sidecar} (Spark loads a file without a checksum file), then audit again.",
            )
        if fp.kind == "sst-missing":
            return Problem(
                SST_MISSING.id,
                f"{fp.rel} is missing; {fp.zip} lists it",
                (Evidence(self.display(fp.rel), expected="a file", found="none"), Evidence(self.display(fp.zip or ""))),
                E.file_not_found(fp.name),
            )
        if fp.kind == "sst-hadoop-crc":
            return Problem(
                SST_CORRUPT.id,
                f"{fp.rel} differs from its Hadoop sidecar {fp.sidecar} from byte {fp.offset} on; {fp.zip} lists it",
                (Evidence(self.display(fp.rel), fp.offset, found=f"differs from {fp.sidecar}"),),
                E.hadoop_checksum(fp.rel, fp.offset or 0),
            )
        if fp.kind == "sst-corrupt":
            return Problem(
                SST_CORRUPT.id,
                f"{fp.rel}: {fp.expected}, found {fp.found}; RocksDB reads that block when it opens the state "
                f"({fp.zip} lists the SST)",
                ev,
                E.rocksdb_corruption(fp.rocksdb_message or "Corruption"),
            )
        if fp.kind == "sst-size":
            return Problem(
                SST_MISSING.id,
                f"{fp.rel} has {fp.found}; {fp.zip} lists {fp.expected}",
                ev,
                E.unexpected_file_size(self.ctx.target, fp.expected.split()[0], fp.found.split()[0]),
            )
        message = f"{fp.rel} is unreadable ({fp.expected}, found {fp.found})"
        if kind == "snapshot":
            return Problem(SNAPSHOT_CORRUPT.id, message, ev, _corrupt_error(fp))
        if kind == "zip":
            return Problem(
                FILE_CORRUPT.id,
                message,
                ev,
                # java.util.zip reads the entries in order and runs out of input in the middle of one
                E.zip_truncated()
                if fp.error_kind == "truncated"
                # format v2 (4.0, 4.1: no snapshot repair): the ZipException is wrapped unnamed (recorded,
                # v2_newest_zip_flipped: "invalid distance too far back", the inflater's words vary with the byte)
                else SparkError(
                    "org.apache.spark.SparkException",
                    "CANNOT_LOAD_STATE_STORE.UNCATEGORIZED",
                    "An error occurred during loading state.",
                )
                if self.uid is not None
                else SparkError(None, None, fp.name),
            )
        return Problem(FILE_CORRUPT.id, message, ev, _corrupt_error(fp))

    def with_rollback(self, problem: Problem) -> Problem:
        """The rule's "roll back before it" as the command to run (a new user had to guess the batch; repair hunt
        13: a bare `ckptfix rollback` in the texts of STATE-FILE-CORRUPT, -SST-CORRUPT, -SST-MISSING and
        -CHAIN-INCOMPLETE): the newest batch whose state version loads without the damaged file, or, when none,
        that only a backup or a new checkpoint helps."""
        rule = RULES[problem.rule]
        if problem.fix is not None or not problem.evidence or not _BARE_ROLLBACK.search(rule.fix):
            return problem
        m = _STATE_FILE_VERSION.search(problem.lost or problem.evidence[0].path)
        if m is None:
            return problem
        batch = self.rollback_batch(int(m.group(1)), problem.sst)
        if batch is None:
            instead = (
                f"no older version of {self.store.rel} loads without it, so without a backup only a new checkpoint "
                "restarts the query (`ckptfix offsets export` gives where its sources start)"
            )
        else:
            instead = (
                f"roll back to batch {batch}, the newest whose state does not need it: "
                f"{self.ctx.rollback_command(batch)} (the batches after it run again)"
            )
        return replace(problem, fix=_BARE_ROLLBACK.sub(lambda _: instead, rule.fix, count=1))

    def rollback_batch(self, version: int, sst: str | None = None) -> int | None:
        """The newest batch b whose state version b+1 loads without version ``version``'s damaged file (and without
        ``sst``, which older zips may list too) and whose offset and commit files are there. Format v1: by the
        store's listing; format v2: the commit before names version b+1's files (the rollback checks they load)."""
        ck = self.ctx.ckpt
        if self.uid is not None:
            candidates = [version - 1]
        else:
            candidates = sorted(
                (v for v in chains.loadable_versions(self.store, self.provider) if v < version), reverse=True
            )
        for v in candidates:
            b = v - 1
            if b < 0 or b not in ck.commits.files or b not in ck.offsets.files:
                continue
            if sst is not None and self.uid is None and self._base_lists(v, sst):
                continue
            return b
        return None

    def _base_lists(self, version: int, sst: str) -> bool:
        """Whether the zip version ``version`` loads from lists ``sst`` (an unreadable zip counts as listing it)."""
        from ckptfix.formats import rocksdbzip

        base = chains.plan(self.store, version, self.provider).base
        if base is None:
            return False
        try:
            meta = rocksdbzip.parse(self.ctx.ckpt.read(base.rel), self.display(base.rel)).metadata
        except (FormatError, OSError):
            return True
        return sst.rsplit("/", 1)[-1] in {f.dfs_sst_file_name for f in meta.sst_files}

    def fall_back(self, problem: Problem) -> bool:
        """Spark 4.2+ skips a snapshot it cannot load and tries the next older one (then the
        empty state) when its auto snapshot repair applies to this store (:func:`chains.skips_bad_snapshot`);
        older Sparks fail. Records the skipped snapshot as a warning."""
        if not self.ctx.target.falls_back_from_corrupt_snapshot:
            return False
        if not chains.skips_bad_snapshot(self.store, self.provider, self.ctx.session_conf):
            return False
        note = f"{problem.message}; Spark {self.ctx.target.label} falls back to an older snapshot"
        self.notes.append(replace(problem, message=note, spark_error=None, severity="warning", undecided=False))
        return True

    def gap(self, chain: chains.Chain) -> Problem:
        assert chain.gap is not None
        rel = chain.gap.path
        base = chain.base.name if chain.base else "empty state"
        if not self.store.files:
            # no file of the store at all (its directory gone, or a file in its place): not a store without
            # changelogs, which its (absent) files would otherwise suggest (new-user trial)
            entry = self.ctx.ckpt.entries.get(self.store.rel)
            what = "is missing" if entry is None else "is a file, not a directory" if not entry.is_dir else "is empty"
            return Problem(
                CHAIN.id,
                f"{self.store.rel} {what}: no state file of this store is left, so Spark loads the empty state and "
                f"then asks for {rel}",
                (Evidence(self.display(self.store.rel), expected="the store's state files", found=what[3:]),),
                E.delta_missing(self.ctx.target, rel)
                if self.provider == "hdfs"
                else E.streaming_file_missing(self.ctx.target, rel),
                fix=self.gap_fix(self.store.rel),
            )
        if self.provider == "hdfs":
            return Problem(
                CHAIN.id,
                f"{rel} is missing; version {self.N} = {base} + deltas {chain.base_version + 1}..{self.N}",
                (Evidence(self.display(rel), expected="a file", found="none"),),
                E.delta_missing(self.ctx.target, rel),
                fix=self.gap_fix(rel),
            )
        if self.uid is None and not chains.changelog_checkpointing(self.store, self.ctx.session_conf):
            # without changelogs every version lives only in its own zip: the lost file is N.zip, and Spark, which
            # loads the newest zip below it, asks for a changelog that was never written
            lost = self.rel(self.N, "zip")
            return Problem(
                CHAIN.id,
                f"{lost} is missing and this store has no changelogs (changelog checkpointing off), so version "
                f"{self.N} is nowhere else: Spark loads {base} and then asks for {rel}, which was never written",
                (Evidence(self.display(lost), expected="a file", found="none"),),
                E.streaming_file_missing(self.ctx.target, rel),
                fix=self.gap_fix(lost),
            )
        return Problem(
            CHAIN.id,
            f"{rel} is missing; version {self.N} = {base} + changelogs {chain.base_version + 1}..{self.N}",
            (Evidence(self.display(rel), expected="a file", found="none"),),
            E.streaming_file_missing(self.ctx.target, rel),
            fix=self.gap_fix(rel),
        )

    def gap_fix(self, rel: str) -> str:
        """What to do about a missing delta/changelog: the changes it held are nowhere else, so no rebuild brings
        version N back; the newest version this store still loads names the batch to roll back to."""
        name = rel.rsplit("/", 1)[-1]
        named = layout.parse_state_file(name)
        if named is not None and not self.ctx.ckpt.state_format_v2():
            renamed = [
                r for (kind, v, uid), r in self.store.files.items() if uid and kind == named.kind and v == named.version
            ]
            if renamed:  # hunt 13: "in no other file", while the file was there under a format-v2 name
                return (
                    f"It is there as {renamed[0]}, a format-v2 name this format-v1 checkpoint does not read "
                    f"(STATE-FILE-V2-NAME): rename it to {name}; `ckptfix repair` does."
                )
        older = [v for v in chains.loadable_versions(self.store, self.provider) if v < self.N]
        head = f"Restore {rel} from a backup: the changes it held are in no other file, so no rebuild brings back"
        head += f" version {self.N}."
        if not older:
            return head + " No older version of this store loads either: without the file, only a new checkpoint."
        v = max(older)
        return (
            f"{head} Or roll back to batch {v - 1} ({self.ctx.rollback_command(v - 1)}; the newest version this "
            f"store loads is {v}): Spark then runs batches {v}.. again from the source, which must still hold their "
            "input."
        )

    def chain_v1(self) -> Problem | None:
        """HDFS: the newest readable snapshot + deltas; RocksDB: the newest loadable zip + changelogs. Spark
        reads the base first; 4.2+ skips a base it cannot load for an older one."""
        snap_kind, step_kind = chains.SNAPSHOT_KIND[self.provider], chains.STEP_KIND[self.provider]
        exclude: set[int] = set()
        while True:
            chain = chains.plan(self.store, self.N, self.provider, exclude=exclude)
            if chain.base is not None:
                problem = self.check(chain.base.rel, snap_kind)
                if problem is not None:
                    # HDFS falls back from an unreadable snapshot; RocksDB from any zip it cannot load
                    may = self.provider == "rocksdb" or problem.rule == SNAPSHOT_CORRUPT.id
                    if may and self.fall_back(problem):
                        exclude.add(chain.base.version)
                        continue
                    return problem
            if chain.gap is not None:
                return self.gap(chain)
            for step in chain.steps:
                problem = self.check(step.rel, step_kind)
                if problem is not None:
                    return problem
            return None

    def lineage(self, rel: str) -> statefile.ChangelogHeader:
        """The lineage Spark reads at the head of a format v2 changelog, through the codec's stream as its reader
        meets it (javap of 4.2.1's StateStoreChangelogReaderFactory.readVersion; recorded on 4.0.5-4.2.1, damage
        cases v2_newest_changelog_*): an EOFException, UTFDataFormatException or NumberFormatException reading
        the version string makes the file a V1 changelog, which has no lineage (an AssertionError in
        readLineage); any other codec damage in the blocks holding the header fails the read as it is. Damage in
        later blocks surfaces when the records are read (the chain's step check)."""
        display = self.display(rel)
        data = self.ctx.ckpt.read(rel)
        chunks: list[bytes] = []
        failure: FormatError | None = None
        try:
            for chunk in codec.iter_decompressed(self.codec, data, display):
                chunks.append(chunk)
        except FormatError as exc:
            if exc.kind in verify.UNVERIFIABLE:
                raise
            failure = exc
        raw = b"".join(chunks)
        eof = failure is None or failure.kind in ("truncated", "empty")
        side = verify.sidecar_mismatch(self.ctx.ckpt, self.store, rel, data)
        if side is not None and eof:
            # 4.1+ verify the file checksum once the stream has read the whole file (a cut file: recorded on 4.1.4
            # and 4.2.1, v2_newest_changelog_truncated_checksum_kept); a block that does not decompress fails first
            raise FormatError(display, 0, f"the content {side[1]} describes", side[0], kind="lineage-checksum")
        complete = statefile.changelog_header_end(raw)

        def unreadable(exc: FormatError, kind: str) -> FormatError:
            return FormatError(exc.path, exc.offset, exc.expected, exc.found, kind=kind)

        if complete is None and not eof:  # the block holding the header does not decompress
            assert failure is not None
            raise unreadable(failure, "lineage-corrupt")
        header = statefile.parse_changelog_header(raw, display) if complete is not None else None
        if header is None and statefile.changelog_version_read(raw):
            # the version string was read; the lineage after it runs out in readLineage: lz4-java's EOFException
            # in a cut stream, DataInputStream's at the end of a whole one
            if failure is not None:
                raise unreadable(failure, "lineage-cut")
            raise FormatError(display, len(raw), "the lineage string", "the end of the file", kind="lineage-eof")
        if header is None or header.lineage is None:
            found = "a V1 changelog (no lineage)" if failure is None else f"{failure.found} in its header"
            raise FormatError(display, 0, "a V3/V4 changelog header with the lineage", found, kind="no-lineage")
        return header

    def chain_v2(self, uid: str) -> Problem | None:
        """Checkpoint format v2: the commit log names version N's unique id; its zip, or the lineage its
        changelog names back to a zip (or to version 1)."""
        N = self.N
        top = self.rel(N, "changelog", uid)
        exclude: set[int] = set()
        while True:
            result = self._chain_v2_once(uid, top, exclude)
            if isinstance(result, int):  # a zip Spark cannot load and skips (4.2+ auto snapshot repair): re-plan
                exclude.add(result)
                continue
            return result

    def _chain_v2_once(self, uid: str, top: str, exclude: set[int]) -> Problem | int | None:
        N = self.N
        try:
            chain = chains.plan(
                self.store,
                N,
                "rocksdb",
                unique_id=uid,
                read_lineage=self.lineage,
                exclude=exclude,
                reach_back=self.ctx.target.falls_back_from_corrupt_snapshot
                and chains.skips_bad_snapshot(self.store, self.provider, self.ctx.session_conf),
            )
        except MissingExtra as exc:
            self.skipped.append(f"{top}: expected the {self.codec} decoder, found {exc.missing}")
            return None
        except FormatError as exc:
            if exc.kind in verify.UNVERIFIABLE:
                self.skipped.append(f"{top}: expected {exc.expected}, found {exc.found}")
                return None
            if exc.kind == "lineage-checksum":
                return Problem(
                    CHECKSUM.id,
                    f"{top}: {exc.found}",
                    (Evidence(exc.path, None, exc.expected, exc.found),),
                    E.checksum_failed(top),
                )
            if exc.kind in LINEAGE_ERRORS:
                return Problem(
                    FILE_CORRUPT.id,
                    f"{top} is unreadable ({exc.expected}, found {exc.found}): Spark cannot read the lineage at "
                    "its head",
                    (Evidence(exc.path, exc.offset, exc.expected, exc.found),),
                    SparkError(
                        "org.apache.spark.SparkException",
                        "CANNOT_LOAD_STATE_STORE.UNCATEGORIZED",
                        LINEAGE_ERRORS[exc.kind],
                    ),
                )
            if exc.kind != "missing-file":
                return Problem(
                    FILE_CORRUPT.id,
                    f"{top} is unreadable ({exc.expected}, found {exc.found})",
                    (Evidence(self.display(top), exc.offset, exc.expected, exc.found),),
                    SparkError("java.io.EOFException", None, "EOFException"),
                )
            if "lineage" in exc.expected:  # no zip left in the lineage (deleted, or skipped as unloadable)
                repair = self.ctx.target.falls_back_from_corrupt_snapshot
                return Problem(
                    CHAIN.id,
                    f"no snapshot zip left in the lineage of {top} ({exc.found}): Spark cannot load version {N}",
                    (Evidence(self.display(top), note=f"lineage: {exc.found}"),),
                    # recorded: 4.0.5/4.1.4 v2_newest_zip_deleted; 4.3 damage hunt 4 V11 (all zips deleted)
                    SparkError(
                        "org.apache.spark.SparkException",
                        "CANNOT_LOAD_STATE_STORE.AUTO_SNAPSHOT_REPAIR_FAILED"
                        if repair
                        else "CANNOT_LOAD_STATE_STORE.CANNOT_FIND_BASE_SNAPSHOT_CHECKPOINT",
                        "lineage is incomplete" if repair else "Cannot find a base snapshot checkpoint",
                    ),
                )
            if exc.path == top:
                back = N - 2
                roll = (
                    f" Or roll back to batch {back} ({self.ctx.rollback_command(back)}), whose commit names version "
                    f"{back + 1}: the rollback checks that its files load; Spark then runs batch {back + 1}.. again."
                    if back >= 0 and back in self.ctx.ckpt.commits.files
                    else " Without it, only a new checkpoint (`ckptfix offsets export` gives where its sources start)."
                )
                return Problem(
                    CHAIN.id,
                    f"{top} is missing; commits name it as version {N}",
                    (Evidence(self.display(top), expected="a file", found="none"),),
                    E.streaming_file_missing(self.ctx.target, top),
                    # repair hunt 10, P01: the rule's generic fix ("rebuild version N") named a rebuild that cannot
                    # work: the commit names this file as the only one of version N
                    fix=f"Restore {top} from a backup: commits/{N - 1} names it as the file of version {N}, so no "
                    f"rebuild brings that version back.{roll}",
                )
            return Problem(
                CHAIN.id,
                f"no zip in the lineage of {top} and it does not start at version 1",
                (Evidence(self.display(top), note=f"lineage: {exc.found}"),),
                SparkError(None, None, "snapshot"),
            )
        if chain.base is not None:
            problem = self.check(chain.base.rel, "zip")
            if problem is not None:
                return chain.base.version if self.fall_back(problem) else problem
        if chain.gap is not None:
            return self.gap(chain)
        for step in chain.steps:
            problem = self.check(step.rel, "changelog")
            if problem is not None:
                return problem
        return None

    def planned(self) -> list[str]:
        """The files the load most likely reads, from the listing alone (for prefetching)."""
        if self.uid is None:
            files = [step.rel for step in chains.plan(self.store, self.N, self.provider).files]
        else:
            kind = "zip" if (("zip", self.N, self.uid) in self.store.files) else "changelog"
            files = [self.rel(self.N, kind, self.uid)]
        return files + [
            self.store.checksums[f.rsplit("/", 1)[-1]] for f in files if f.rsplit("/", 1)[-1] in self.store.checksums
        ]

    def run(self) -> Problem | None:
        return self.chain_v1() if self.uid is None else self.chain_v2(self.uid)


def unique_ids(ctx: AuditContext, version: int) -> dict[str, list[list[str]]] | None:
    """Checkpoint format v2: commits/(N-1) names the unique ids of version N. Spark reads them from a ``v2`` commit
    only: under a ``v1`` header they are not there for it (damage hunt 8 on 4.3.0: a v2 commit relabelled ``v1``,
    ids kept, fails as one without ids, NumberFormatException on an ``N_<uuid>`` zip name)."""
    b = version - 1
    if b < 0 or b not in ctx.ckpt.commits.files:
        return None
    entry, _ = ctx.commit_or_error(b)
    return entry.state_unique_ids if entry and entry.version >= 2 else None


def store_unique_id(ids: dict[str, list[list[str]]] | None, op_id: int, part: int, store_index: int) -> str | None:
    """The unique id a format-v2 commit's ``stateUniqueIds`` gives one store (None: not there, or format v1)."""
    try:
        return ids[str(op_id)][part][store_index] if ids is not None else None
    except (KeyError, IndexError, TypeError):
        return None


def _all_state_files(ctx: AuditContext) -> dict[tuple[str, int, str | None], str]:
    return {
        key: rel
        for op in ctx.ckpt.state.operators.values()
        for stores in op.partitions.values()
        for store in stores.values()
        for key, rel in store.files.items()
    }


@check
def state_v2_names_in_v1(ctx: AuditContext) -> Iterator[Finding]:
    """Zips with a unique id in their names in a checkpoint of format v1 (damage hunt 8, H5): the snapshot listing
    of Spark's v1 load parses every zip name as a version. Changelogs with such names the chain rules see as
    missing (:func:`ckptfix.stores.chain.plan` reads v1 names only where a store has them); they are named here too,
    without Spark's error, which is the chain's "does not exist" (hunt 13: the text said the changes were lost)."""
    ck = ctx.ckpt
    if ctx.state_version <= 0 or ck.state_format_v2():
        return
    logs_named = False
    for op in sorted(ck.state.operators.values(), key=lambda o: o.operator):
        n, _ = expected_partitions(ctx, op)
        for part, stores in sorted(op.partitions.items()):
            if n is not None and part >= n:
                continue  # never loaded
            for _name, store in sorted(stores.items()):
                logs = sorted(rel for (kind, _, uid), rel in store.files.items() if kind == "changelog" and uid)
                if logs and not logs_named:
                    logs_named = True
                    name = logs[0].rsplit("/", 1)[-1]
                    canonical = f"{name.split('_', 1)[0]}.changelog"
                    yield V2_NAME_IN_V1.finding(
                        f"{logs[0]} has a format-v2 name in a checkpoint of format v1: Spark reads {canonical} and "
                        "does not see it",
                        [Evidence(ck.display(logs[0]), expected=canonical, found=name)]
                        + [Evidence(ck.display(r), note="also v2-named") for r in logs[1:4]],
                        fix=f"Rename it to {store.rel}/{canonical} (`ckptfix repair` does)",
                        stage=60,
                    )
                named = sorted(rel for (kind, _, uid), rel in store.files.items() if kind == "zip" and uid)
                if not named:
                    continue
                rel = named[0]
                name = rel.rsplit("/", 1)[-1]
                version = name.split("_", 1)[0]
                there = f"{store.rel}/{version}.zip" in store.files.values()
                yield V2_NAME_IN_V1.finding(
                    f"{rel} has a format-v2 name in a checkpoint of format v1 (its other files are named by version "
                    f"alone): Spark takes snapshot versions from zip names, and {name.removesuffix('.zip')} is no "
                    "number",
                    [Evidence(ck.display(rel), expected=f"{version}.zip", found=name)]
                    + [Evidence(ck.display(r), note="also v2-named") for r in named[1:4]],
                    fix=(
                        f"Move {rel} out of the checkpoint: {version}.zip is there"
                        if there
                        else f"Rename {rel} to {store.rel}/{version}.zip"
                    )
                    + (
                        f" (and likewise the {len(named) - 1} other v2-named zips of this store)"
                        if len(named) > 1
                        else ""
                    ),
                    spark_error=SparkError(
                        "java.lang.NumberFormatException", None, f'For input string: "{name.removesuffix(".zip")}"'
                    ),
                    stage=64,
                )
                return  # the first store Spark loads fails the batch


@check
def state_v2_ids(ctx: AuditContext) -> Iterator[Finding]:
    """A format-v2 checkpoint whose commit for the restart's state version names no unique ids (V06 of the damage
    hunt of 2026-11-27)."""
    N = ctx.state_version
    b = N - 1
    if b < 0 or b not in ctx.ckpt.commits.files or not ctx.target.at_least(4, 0) or not ctx.ckpt.state_format_v2():
        return
    entry, _ = ctx.commit_or_error(b)
    if entry is None or (entry.state_unique_ids and entry.version >= 2):
        return  # unreadable: the log rules report it
    rel = ctx.ckpt.commits.path_of(b)
    example = next(name.rsplit("/", 1)[-1].split(".")[0] for (_, _, uid), name in _all_state_files(ctx).items() if uid)
    relabelled = bool(entry.state_unique_ids)  # a v1 header over a v2 commit's ids: Spark does not read them
    yield V2_IDS_MISSING.finding(
        (
            f"{rel} is a v{entry.version} commit: Spark reads no stateUniqueIds from it (the ids it holds are a v2 "
            "commit's: was its first line edited?)"
            if relabelled
            else f"{rel} names no stateUniqueIds"
        )
        + f", but the state files carry unique ids (e.g. {example}): Spark loads version {N} the v1 way, and no "
        "file has a v1 name",
        [
            Evidence(
                ctx.ckpt.display(rel),
                expected="a v2 commit" if relabelled else "stateUniqueIds",
                found=f"v{entry.version}" if relabelled else "none",
            )
        ],
        fix=f"Set the first line of {rel} back to v2 (`ckptfix repair` does): its ids are there."
        if relabelled
        else f"Restore {rel} from a backup: its ids name which attempt's files the batch committed. "
        + (
            f"Or roll back to batch {b - 1}, whose commit names version {b}'s files: {ctx.rollback_command(b - 1)} "
            f"(the rollback checks that they load; Spark runs batch {b} again)."
            if b - 1 in ctx.ckpt.commits.files and b - 1 in ctx.ckpt.offsets.files
            else "Without it, only a new checkpoint (`ckptfix offsets export` gives where its sources start)."
        ),
        # snapshot versions come from zip names: an N_<uuid>.zip is no number (seen on 4.3: NumberFormatException);
        # without zips, no v1 snapshot: changelogs from version 1 (recorded 4.0.5-4.2.1, seen on 4.3)
        spark_error=SparkError("java.lang.NumberFormatException", None, "For input string")
        if any(kind == "zip" and uid for kind, _, uid in _all_state_files(ctx))
        else E.file_not_found("1.changelog"),
        stage=65,
    )


def expected_partitions(ctx: AuditContext, op: OperatorDir) -> tuple[int | None, list[str]]:
    ck = ctx.ckpt
    stores: list[str] = []
    if op.metadata_v1:
        with contextlib.suppress(FormatError):
            stores = [s.store_name for s in opmeta.parse(ck.read(op.metadata_v1), ck.display(op.metadata_v1)).stores]
    n = recorded_partitions(ck, op, ctx.conf)
    # the stores Spark opens are fixed in code: a name the metadata holds but Spark never opens (an edit) is not
    # looked for (hunt 4, J04/J24/A08: Spark restarted), and a join opens its four stores whatever it lists
    stores = [s for s in stores if s in layout.SPARK_STORES]
    if any(s in layout.JOIN_STORES for s in [*stores, *op.store_names]):
        return n, list(layout.JOIN_STORES)
    return n, stores or [s for s in op.store_names if s in layout.SPARK_STORES] or op.store_names or ["default"]


def _watermark(ctx: AuditContext) -> int:
    """The newest event-time watermark the logs record (0: none)."""
    K = ctx.latest_commit
    commit = ctx.commit_or_error(K)[0] if K is not None else None
    offset = ctx.latest_offset_file
    return max(
        commit.next_batch_watermark_ms if commit else 0,
        offset.metadata.batch_watermark_ms if offset and offset.metadata else 0,
    )


def _left_by_repartition(ctx: AuditContext, op: OperatorDir, p: int) -> bool:
    """Whether partition directory ``p``, beyond the recorded count, is one a repartition left: no file of the
    restart's state version (Spark's offline runner leaves them untouched) or an empty snapshot of it (ckptfix's
    `state repartition`, so that tools listing directories do not read their old state). Spark never opens them.
    A directory written by the last batch (a shuffle-partition count edited in the offset log) is not."""
    N = ctx.state_version
    compression = codec.normalize(ctx.conf.get(CODEC, "lz4"))
    for store in op.partitions[p].values():
        at = [(kind, rel) for (kind, v, uid), rel in store.files.items() if v >= N]
        if any(
            kind not in ("snapshot", "zip") or not rel.rsplit("/", 1)[-1].startswith((f"{N}.", f"{N}_"))
            for kind, rel in at
        ):
            return False
        for kind, rel in at:
            try:
                if sample.first_records(ctx.ckpt, store, chains.Step(rel, kind, N), compression, 1):
                    return False
            except FormatError:
                return False
    return True


@dataclass(frozen=True)
class ShuffleEdit:
    """offsets/``batch`` records ``edited`` shuffle partitions where offsets/``batch - 1`` and the state layout have
    ``state`` (CONF-SHUFFLE-PARTITIONS-EDITED)."""

    batch: int
    state: int
    edited: int


@dataclass(frozen=True)
class ProviderEdit:
    batch: int  # the latest offset file, which was edited
    state: str  # the provider class the previous offset file records (the one the state files are written by)
    edited: str  # the one offsets/<batch> records


def provider_edit(ctx: AuditContext) -> ProviderEdit | None:
    """The edited state store provider of the latest offset file, if that is what it is (memoized per audit): its
    providerClass is of another kind (HDFS, RocksDB) than the previous offset file's, and every operator's files
    are the previous kind's. Spark carries the provider unchanged from batch to batch (it is one of the confs a
    restart restores from the offset log), so only an edit changes it (hunt 13: such a checkpoint got "4.zip is
    missing ... only a new checkpoint")."""
    key = ("provider-edit",)
    if key not in ctx.memo:
        ctx.memo[key] = _provider_edit(ctx)
    found: ProviderEdit | None = ctx.memo[key]
    return found


def _recorded_twice(ctx: AuditContext, key: str) -> tuple[int, str | None, str | None] | None:
    """(L, the conf ``key`` in offsets/L, in offsets/L-1) when both offset files read with their metadata: what the
    edit rules (CONF-SHUFFLE-PARTITIONS-EDITED, CONF-PROVIDER-EDITED) compare."""
    L, entry = ctx.latest_offset, ctx.latest_offset_file
    if not L or entry is None or entry.metadata is None or L - 1 not in ctx.ckpt.offsets.files:
        return None
    previous, _ = ctx.offset_or_error(L - 1)
    if previous is None or previous.metadata is None:
        return None
    return L, entry.metadata.conf.get(key), previous.metadata.conf.get(key)


def _provider_edit(ctx: AuditContext) -> ProviderEdit | None:
    recorded = _recorded_twice(ctx, providers.PROVIDER_CONF)
    if recorded is None:
        return None
    L, now, before = recorded
    if not now or not before or now == before:
        return None
    new_kind, old_kind = providers.known(now), providers.known(before)
    if new_kind is None or old_kind is None or new_kind == old_kind:
        return None
    ops = [op for op in ctx.ckpt.state.operators.values() if op.partitions]
    if not ops or any(providers.layout_of(op) != old_kind for op in ops):
        return None
    return ProviderEdit(L, before, now)


@check
def provider_edited(ctx: AuditContext) -> Iterator[Finding]:
    edit = provider_edit(ctx)
    if edit is None:
        return
    ck, L = ctx.ckpt, edit.batch
    short = {c: c.rsplit(".", 1)[-1] for c in (edit.state, edit.edited)}
    yield PROVIDER_EDITED.finding(
        f"offsets/{L} records the state store provider {short[edit.edited]}, but offsets/{L - 1} records "
        f"{short[edit.state]} and every state file is {short[edit.state]}'s: the offset file was edited. Spark "
        f"restores the provider from offsets/{L} and loads the state with {short[edit.edited]}, which finds none of "
        "its files (the STATE-* findings that follow are that load, not lost state)",
        [
            Evidence(ck.display(f"offsets/{L}"), expected=edit.state, found=edit.edited),
            Evidence(ck.display(f"offsets/{L - 1}"), note=f"{providers.PROVIDER_CONF}={edit.state}"),
        ],
        stage=60,  # listed before the failed loads it causes (the verdict is theirs: Spark's error is the load's)
    )


def shuffle_edit(ctx: AuditContext) -> ShuffleEdit | None:
    """The edited shuffle-partition count of the latest offset file, if that is what it is (memoized per audit):
    it differs from the previous offset file's, and every hash-partitioned operator's directories are the previous
    count's (up: none of the new partitions exists; down: a partition beyond the new count was written by the
    latest batch, not left by a repartition, :func:`_left_by_repartition`)."""
    key = ("shuffle-edit",)
    if key not in ctx.memo:
        ctx.memo[key] = _shuffle_edit(ctx)
    found: ShuffleEdit | None = ctx.memo[key]
    return found


def _shuffle_edit(ctx: AuditContext) -> ShuffleEdit | None:
    recorded = _recorded_twice(ctx, SHUFFLE) if ctx.state_version != 0 else None
    if recorded is None:
        return None
    L, now, before = recorded
    if not (now and before and now.isdigit() and before.isdigit()) or int(now) == int(before):
        return None
    edited, state = int(now), int(before)
    ck = ctx.ckpt
    hashed = [op for op in ck.state.operators.values() if op.partitions and recorded_partitions(ck, op, ctx.conf) != 1]
    if not hashed or edited < 1:
        return None
    for op in hashed:
        if max(op.partitions) + 1 != state:
            return None
        if edited > state and any(p in op.partitions for p in range(state, edited)):
            return None
        # a directory missing there is not one the latest batch wrote (nor a repartition): it counts as left
        beyond = range(edited, state)
        if edited < state and all(p not in op.partitions or _left_by_repartition(ctx, op, p) for p in beyond):
            return None
    return ShuffleEdit(L, state, edited)


@check
def shuffle_partitions_edited(ctx: AuditContext) -> Iterator[Finding]:
    edit = shuffle_edit(ctx)
    if edit is None:
        return
    ck, L = ctx.ckpt, edit.batch
    evidence = [
        Evidence(ck.display(f"offsets/{L}"), expected=f"{SHUFFLE}={edit.state}", found=f"{SHUFFLE}={edit.edited}"),
        Evidence(ck.display(f"offsets/{L - 1}"), note=f"{SHUFFLE}={edit.state}"),
        Evidence(ck.display("state"), note=f"every operator's state in partitions 0..{edit.state - 1}"),
    ]
    head = (
        f"offsets/{L} records {SHUFFLE}={edit.edited}, but offsets/{L - 1} records {edit.state} and the state is "
        f"in {edit.state} partitions: the offset file was edited"
    )
    fix = (
        f"`ckptfix repair` writes {SHUFFLE}={edit.state} back into offsets/{L}. To run the query with {edit.edited} "
        f"partitions, repartition the state after that: `ckptfix state repartition --partitions {edit.edited}`."
    )
    if edit.edited > edit.state:
        rocks = providers.of(ctx.conf).kind == "rocksdb"
        rel = f"/{edit.state}/1.{'changelog' if rocks else 'delta'}"  # the first partition without state
        err = E.streaming_file_missing(ctx.target, rel) if rocks else E.delta_missing(ctx.target, rel)
        yield SHUFFLE_EDITED.finding(
            f"{head}; partition{'s' if edit.edited - edit.state > 1 else ''} "
            + (f"{edit.state}..{edit.edited - 1} have" if edit.edited - edit.state > 1 else f"{edit.state} has")
            + f" no state and the first batch fails loading {'them' if edit.edited - edit.state > 1 else 'it'}",
            evidence,
            spark_error=err,
            stage=66,
            fix=fix,
        )
    else:
        yield SHUFFLE_EDITED.finding(
            f"{head}; Spark restarts but reads only partitions 0..{edit.edited - 1} of the state and hashes keys "
            f"into {edit.edited} partitions, so results are silently wrong",
            evidence,
            silent=True,
            fix=fix,
        )


@check
def state_chains(ctx: AuditContext) -> Iterator[Finding | Skipped]:
    ck, N = ctx.ckpt, ctx.state_version
    inv = ck.state
    ids = unique_ids(ctx, N) if N else None
    stateful = ctx.stateful if ctx.stateful is not None else bool(inv.operators or ids)
    if not inv.operators:
        # async progress tracking refuses stateful queries: sparse async logs mean a stateless one
        if ctx.stateful is None and not stateful and N > 0 and not ck.looks_async():
            watermark = _watermark(ctx)
            if watermark:
                # a watermark that moves is (almost always) there for a stateful operator: B09 of the damage hunt
                # of 2026-11-27 (state/ deleted under an update-mode aggregation) failed on 4.3
                yield DIR_MISSING.finding(
                    f"state/ is empty or absent, but the event-time watermark has advanced ({watermark} ms): a "
                    "stateful query whose state is gone fails at the restart, a stateless one with a watermark "
                    "restarts; audit with --stateful or --stateless to decide",
                    [Evidence(ck.display("state"), expected="state/<operator>/<partition>/...", found="nothing")],
                    undecided=True,
                )
                return
            yield Skipped(
                DIR_MISSING.id,
                "state/ is empty or absent: fine for a stateless query; if the query has stateful operators, "
                "audit with --stateful (Spark then fails to load state)",
                # nothing outside state/ tells a stateless query from a stateful one without a watermark whose
                # state/ was deleted (damage hunt 7, F1: 4.3 fails STREAMING_STATEFUL_OPERATOR_MISSING_STATE_DIRECTORY)
                assumption="its query is stateless: state/ is absent; --stateful if it is not, --stateless to confirm",
            )
        if stateful and N > 0 and ctx.latest_offset is not None:
            provider = providers.of(ctx.conf).kind
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
    # the highest operator id first: Spark numbers operators from the sink up, so the upstream one (the highest id)
    # runs in the earlier stage, or feeds the same task, and its load fails first (hunt 6: a join under an
    # aggregation, every store broken by one edit; Spark named state/1, the join)
    for op_id, op in sorted(inv.operators.items(), reverse=True):
        if op.metadata_v1:
            try:
                opmeta.parse(ck.read(op.metadata_v1), ck.display(op.metadata_v1))
            except FormatError as exc:
                yield OPMETA_UNREADABLE.finding(
                    f"{op.metadata_v1} cannot be read",
                    [Evidence(ck.display(op.metadata_v1), exc.offset, exc.expected, exc.found)],
                )
        if op.metadata_v2 and ctx.target.at_least(4, 0):
            # transformWithState reads its newest v2 file (the path of its state schema) when it plans the first
            # batch: a damaged one fails there (recorded on 4.0.5-4.2.1, opmeta_v2_truncated; hunt 6 on 4.3)
            rel = op.metadata_v2[max(op.metadata_v2)]
            try:
                opmeta.parse(ck.read(rel), ck.display(rel))
            except FormatError as exc:
                yield OPMETA_UNREADABLE.finding(
                    f"{rel} cannot be read (expected {exc.expected}, found {exc.found}): Spark {ctx.target.label} "
                    "reads the newest operator metadata of a transformWithState operator when it plans the first "
                    "batch, and fails",
                    [Evidence(ck.display(rel), exc.offset, exc.expected, exc.found)],
                    severity="error",
                    spark_error=E.metadata_error(ctx.target, exc),
                    stage=62,
                )
        n, store_names = expected_partitions(ctx, op)
        edit = shuffle_edit(ctx)
        if edit is not None and n == edit.edited:
            n = edit.state  # the edit is CONF-SHUFFLE-PARTITIONS-EDITED's finding; the state's own count is checked
        present = sorted(op.partitions)
        expected = list(range(n)) if n is not None else present
        extra = [p for p in present if p not in expected and not _left_by_repartition(ctx, op, p)]
        missing = [p for p in expected if p not in op.partitions]
        if extra:
            yield PARTITIONS_MISMATCH.finding(
                f"operator {op_id} has partition directories {extra} beyond the recorded {n} partitions",
                [Evidence(ck.display(f"{op.rel}/{p}")) for p in extra[:3]],
            )
        found = providers.of(ctx.conf, op)
        provider = found.kind
        if found.custom:
            yield CUSTOM_PROVIDER.finding(
                f"operator {op_id} is kept by {found.cls}, not one of Spark's providers: its files are checked as "
                f"the {provider} layout they show, but how that class loads them the files cannot tell",
                [Evidence(ck.display("offsets"), expected="one of Spark's provider classes", found=found.cls)],
                undecided=True,
            )
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
                uid = store_unique_id(ids, op_id, p, s_index)
                checks.append((p, StoreCheck(ctx, store, N, provider, uid)))
        ctx.progress.stage(f"state operator {op_id}: reading", total=None)
        ck.prefetch([rel for _, sc in checks for rel in sc.planned()])
        ctx.progress.stage(f"state operator {op_id}: verifying", total=len(checks))
        results: list[tuple[int, StoreCheck, Problem]] = []
        for p, sc in checks:
            ctx.progress.advance()
            problem = sc.run()
            for note in sc.notes:
                yield _as_finding(sc.with_rollback(note))
            for what in sc.skipped:
                yield Skipped(CHAIN.id, f"content not verified: {what}")
            if problem is not None:
                results.append((p, sc, problem))
        for p, sc, problem in _partition_agnostic(op, results):
            if p in missing:
                yield PARTITION_MISSING.finding(
                    f"{sc.store.rel} is missing (operator {op_id} has {n} partitions); loading version {N} fails"
                    + (
                        f"; {', '.join(f'{op.rel}/{x}' for x in extra)}, beyond the recorded partitions, may be it "
                        "renamed: rename it back"
                        if extra
                        else ""
                    ),
                    [Evidence(ck.display(sc.store.rel), expected="a directory", found="none"), *problem.evidence],
                    spark_error=problem.spark_error,
                    stage=70,
                )
            else:
                yield _as_finding(_edited_provider_fix(ctx, sc.with_rollback(problem)), stage=70)
    if ctx.deep:
        yield from _deep_state(ctx)


def _edited_provider_fix(ctx: AuditContext, problem: Problem) -> Problem:
    """Under an edited provider (CONF-PROVIDER-EDITED) a store's "missing" files are the other provider's: the fix
    is the edit's, not a backup or a new checkpoint."""
    edit = provider_edit(ctx)
    if edit is None:
        return problem
    return replace(
        problem,
        fix=f"Nothing is lost: offsets/{edit.batch}'s state store provider was edited (CONF-PROVIDER-EDITED), and "
        "Spark looks for the other provider's files. `ckptfix repair` writes the provider back.",
    )


#: a rule text's "roll back (before it)" with no batch (the finding names the command to run)
_BARE_ROLLBACK = re.compile(r"roll back[^(.;]*\(`ckptfix rollback`\)")
_STATE_FILE_VERSION = re.compile(r"/(\d+)(?:_[0-9a-fA-F-]+)?\.(?:delta|changelog|zip|snapshot)$")


def _partition_agnostic(
    op: OperatorDir, results: list[tuple[int, StoreCheck, Problem]]
) -> list[tuple[int, StoreCheck, Problem]]:
    """Where the same file of one store fails in several partitions (one edit broke them all: a conf, deleted
    deltas), which partition's task fails first is a race (hunt 6 on 4.3: state/0/1, then state/0/2 in a rerun):
    the predicted text then names the file below the partition directory only (``/1.delta does not exist``)."""
    by_store: dict[str, list[tuple[int, Problem]]] = {}
    for p, sc, problem in results:
        by_store.setdefault(sc.store.store, []).append((p, problem))
    common: dict[str, SparkError] = {}
    for name, items in by_store.items():
        forms = set()
        for p, problem in items:
            err, prefix = problem.spark_error, f"{op.rel}/{p}/"
            if err is None or prefix not in err.message:
                break
            forms.add((err.exception, err.error_class, "/" + err.message.split(prefix, 1)[1], err.batch))
        else:
            if len(items) > 1 and len(forms) == 1:
                exception, error_class, message, batch = forms.pop()
                common[name] = SparkError(exception, error_class, message, batch)
    return [
        (p, sc, replace(problem, spark_error=common[sc.store.store]) if sc.store.store in common else problem)
        for p, sc, problem in results
    ]


def _as_finding(problem: Problem, stage: int | None = None) -> Finding:
    return RULES[problem.rule].finding(
        problem.message,
        problem.evidence,
        severity=problem.severity,
        spark_error=problem.spark_error,
        stage=stage if problem.spark_error else None,
        undecided=problem.undecided,
        fix=problem.fix,
    )


def _deep_state(ctx: AuditContext) -> Iterator[Finding]:
    """--deep: every state file outside the restart's chain, through the same file facts as the chain's."""
    ck = ctx.ckpt
    conf_codec = codec.normalize(ctx.conf.get(CODEC, "lz4"))
    for op in ck.state.operators.values():
        for stores in op.partitions.values():
            for store in stores.values():
                for (kind, _v, _u), rel in sorted(store.files.items(), key=lambda kv: kv[1]):
                    if ck.was_read(rel):  # already verified as part of the chain
                        continue
                    try:
                        facts = verify.check_file(ck, store, rel, kind, conf_codec, read=ck.read)
                    except FormatError as exc:
                        facts = [FileProblem(rel, "corrupt", exc.path, exc.offset, exc.expected, exc.found)]
                    for fp in facts:
                        if fp.kind in ("corrupt", "checksum", "hadoop-crc"):
                            yield STATE_OLD_CORRUPT.finding(
                                f"{rel} is unreadable ({fp.expected}, found {fp.found})",
                                [Evidence(ck.display(rel), fp.offset, fp.expected, fp.found)],
                            )


# ----------------------------------------------------------------- operator metadata and schema sidecars

OPMETA_MISMATCH = define(
    "STATE-OPERATOR-METADATA-MISMATCH",
    "error",
    "An operator's metadata does not match the state it describes",
    "Spark 4.x reads state/<op>/_metadata/metadata of every operator at the first batch of a restart and compares "
    "the (operator id, name) pairs with the restarted plan's (IncrementalExecution, checkOperatorValidWithMetadata): "
    "any difference fails with STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA (damage hunt of "
    "2026-11-27 on 4.3: a name or an id edited). The audit flags what the files contradict: an id other than the "
    "directory's, a name no Spark gives, a name whose state layout the stores do not have. Spark 3.5 does not read "
    "operator metadata.",
    "Restore the file from a backup. Or delete it (and its .metadata.crc; `ckptfix repair` does): Spark 4.x writes "
    "it again at the first batch and skips the check when it finds none.",
)
METADATA_CRC_ORPHAN = define(
    "STATE-METADATA-CRC-ORPHAN",
    "error",
    "A state metadata file is gone but its Hadoop .crc sidecar is not",
    "Spark writes a missing operator metadata file (4.x) or partition schema file (3.5 and 4.x) again at the first "
    "batch, through a rename that refuses an existing checksum file on a local file system (ChecksumFs): "
    "FileAlreadyExistsException 'Rename destination .../.metadata.crc already exists' (damage hunt of 2026-11-27 "
    "on 4.3, J01 and J26). Object stores keep no sidecars.",
    "`ckptfix repair` deletes the leftover sidecar (after a backup); Spark then writes the file and its sidecar.",
)


def metadata_crc_orphans(ctx: AuditContext) -> list[tuple[str, str]]:
    """(sidecar, its file) for every Hadoop .crc of a state metadata file that is gone and that the restart
    writes again: operator metadata v1 (4.x, checkpoint format v1) and partition 0's store schemas (3.5 and
    4.x, not transformWithState's v3 files). Local file systems only: object stores keep no sidecars."""
    ck, t = ctx.ckpt, ctx.target
    if not ck.location.is_local or ctx.state_version == 0:
        return []
    out = []
    for op in sorted(ck.state.operators.values(), key=lambda o: o.operator):
        if t.at_least(4, 0) and op.metadata_v1 is None and op.metadata_v1_crc is not None and not op.metadata_v2:
            out.append((op.metadata_v1_crc, f"{op.rel}/_metadata/metadata"))
        if not op.state_schema:
            for _, store in sorted(op.partitions.get(0, {}).items()):
                if store.schema is None and store.schema_crc is not None:
                    out.append((store.schema_crc, f"{store.rel}/_metadata/schema"))
    return out


@check
def operator_metadata(ctx: AuditContext) -> Iterator[Finding]:
    ck, t = ctx.ckpt, ctx.target
    if not ck.state.operators or ctx.state_version == 0:
        return
    for op in sorted(ck.state.operators.values(), key=lambda o: o.operator):
        if t.at_least(4, 0) and op.metadata_v1 is not None:
            reason = name_contradiction(ck, op)
            if reason is not None and _schema_misfits(ctx, op):
                # the name contradicts partition 0's schema file, which does not describe the rows either: the
                # schema file is the odd one (a restore that took another operator's), and Spark's schema check
                # fails, not the operator check (recorded on 4.3: state_schema_from_other_operator)
                reason = None
            if reason is not None:
                yield OPMETA_MISMATCH.finding(
                    f"{op.metadata_v1}: {reason}; Spark {t.label} compares it with the restarted plan's operators "
                    "at the first batch and fails",
                    [Evidence(ck.display(op.metadata_v1), note=reason)],
                    spark_error=SparkError(
                        "org.apache.spark.SparkRuntimeException",
                        "STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA",
                        "Streaming stateful operator name does not match with the operator in state metadata.",
                        ctx.next_batch,
                    ),
                    stage=62,
                )
    for crc_rel, data_rel in metadata_crc_orphans(ctx):
        yield METADATA_CRC_ORPHAN.finding(
            f"{data_rel} is gone but {crc_rel} is not: Spark writes the file again at the first batch and its "
            "rename onto the leftover sidecar fails",
            [Evidence(ck.display(crc_rel), expected="no sidecar without its file", found="a leftover sidecar")],
            spark_error=SparkError(
                "org.apache.hadoop.fs.FileAlreadyExistsException", None, f"{crc_rel} already exists", ctx.next_batch
            ),
            stage=63,
        )


def _schema_misfits(ctx: AuditContext, op: OperatorDir) -> bool:
    from ckptfix.audit import sampled  # (it imports this module)

    return any(
        r.error is not None
        for name in op.store_names or ["default"]
        for r in (sampled.store_rows(ctx, op, name) or {}).values()
    )


OPERATOR_MISSING = define(
    "STATE-OPERATOR-MISSING",
    "error",
    "A stateful operator's state directory is missing",
    "Spark numbers a query's stateful operators 0, 1, 2, ... in plan order, and every one writes state/<id> at its "
    "first batch; a gap in the numbers is an operator whose state was deleted. At the restart, Spark 4.x compares "
    "the plan's operators with the operator metadata it finds and fails with "
    "STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA; Spark 3.5 (or 4.x when no operator has metadata, a "
    "3.5-written checkpoint) fails loading the operator's first state file. Seen on 3.5.9-4.3 with "
    "dropDuplicates before an aggregation, either directory deleted (damage hunt 4, D01). The directory of the "
    "operator with the highest id leaves no gap: only the query tells (`audit --against`).",
    "Restore the directory from a backup; it cannot be recreated from the other operators' state. Else start the "
    "query on a new checkpoint (`ckptfix offsets export` keeps the sources' positions).",
)


def first_state_file_missing(ctx: AuditContext) -> SparkError:
    """What Spark raises loading state version N > 0 of an operator that has no files: the provider walks back
    to version 1 and finds no ``1.delta`` (HDFS) or ``1.changelog`` (RocksDB); which partition it names first
    varies (recorded on 3.5.9 with a deleted operator directory)."""
    if providers.of(ctx.conf).kind == "hdfs":
        return E.delta_missing(ctx.target, "/1.delta")
    return E.streaming_file_missing(ctx.target, "/1.changelog")


@check
def operators_missing(ctx: AuditContext) -> Iterator[Finding]:
    ck, t, N = ctx.ckpt, ctx.target, ctx.state_version
    ops = ck.state.operators
    if not ops or not N:
        return
    gaps = [i for i in range(max(ops)) if i not in ops]
    if not gaps:
        return
    with_metadata = [op for op in ops.values() if op.metadata_v1 is not None or op.metadata_v2]
    if t.at_least(4, 0) and with_metadata:
        err = SparkError(
            "org.apache.spark.SparkRuntimeException",
            "STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA",
            "Streaming stateful operator name does not match with the operator in state metadata.",
            ctx.next_batch,
        )
        how = f"Spark {t.label} finds no operator metadata for it and fails when it plans the first batch"
    else:
        err = first_state_file_missing(ctx)
        how = "Spark fails loading its state at the first batch"
    names = ", ".join(f"state/{i}" for i in gaps)
    yield OPERATOR_MISSING.finding(
        f"{names} missing while state/{max(ops)} exists: Spark numbers stateful operators from 0, so the query has "
        f"operator(s) {', '.join(map(str, gaps))} and their state is gone; {how}",
        [Evidence(ck.display(f"state/{i}"), expected="the operator's state directory", found="none") for i in gaps],
        spark_error=err,
        stage=62 if t.at_least(4, 0) and with_metadata else 65,
    )
