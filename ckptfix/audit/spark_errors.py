"""The exact error Spark raises for each kind of damage, per release.

Texts come from real restarts (spark-behaviour-observed.md §4-5, spark-logs-and-restart.md
§5.3, §6.2, §9) and are re-checked by tests/audit/test_restart_prediction.py against Spark 4.3.0
live and against outcomes recorded from Spark 3.5.9. ``message`` is a fragment that appears
verbatim in Spark's error text.
"""

from __future__ import annotations

import re

from ckptfix.audit.model import SparkError
from ckptfix.audit.targets import SparkTarget
from ckptfix.errors import FormatError, UnsupportedVersion

ISE = "java.lang.IllegalStateException"
IAE = "java.lang.IllegalArgumentException"
JSON_EOF = "com.fasterxml.jackson.core.io.JsonEOFException"
JSON_PARSE = "com.fasterxml.jackson.core.JsonParseException"
FNF = "java.io.FileNotFoundException"


def batch_missing(batch: int) -> SparkError:
    return SparkError(ISE, None, f"batch {batch} doesn't exist", batch)


def previous_batch_not_found(batch: int) -> SparkError:
    return SparkError(IAE, None, f"requirement failed: Previous batch {batch} not found in offset log", batch)


def concurrent_update(batch: int) -> SparkError:
    return SparkError(
        "org.apache.spark.SparkException",
        "CONCURRENT_STREAM_LOG_UPDATE",
        f"Multiple streaming jobs detected for {batch}",
        batch,
    )


def concurrent_use(log: str, batch: int | None) -> SparkError:
    """HDFSMetadataLog's answer to a FileAlreadyExistsException when it renames a new entry into place (here: onto
    a leftover .crc sidecar): ``ConcurrentModificationException: Multiple streaming queries are concurrently using
    file:/.../<log>`` (seen live, 4.3)."""
    return SparkError(
        "java.util.ConcurrentModificationException", None, "Multiple streaming queries are concurrently using", batch
    )


def batch_metadata_not_found(rel: str) -> SparkError:
    """HDFSMetadataLog reads an entry that is not there (``applyFnToBatchByStream``, e.g. the file sink log's
    compaction reading the entries since the previous one): ``[BATCH_METADATA_NOT_FOUND] Unable to find batch
    <path>.`` (3.5.9 to 4.3; the path has its scheme, ``file:``, on 4.x only): ``rel`` is the fragment both show."""
    return SparkError("org.apache.spark.SparkFileNotFoundException", "BATCH_METADATA_NOT_FOUND", rel)


def source_compaction_missing(target: SparkTarget, name: str, latest: int, interval: int) -> SparkError:
    """``CompactibleFileStreamLog.allFiles`` (the file source restoring its seen files at start) finds no
    ``<name>``, the compaction the latest entry builds on: ``<path>/<name> doesn't exist (latestId: L,
    compactInterval: I)``. The exception is ``IllegalStateException`` up to 4.1 and ``FileNotFoundException``
    from 4.2 (javap of the spark-sql jars of 3.5.9, 4.0.5, 4.1.4, 4.2.1 and 4.3.0; recorded 3.5.9-4.2.1, seen on
    4.3 in the damage hunt of 2026-11-27)."""
    cls = FNF if target.at_least(4, 2) else ISE
    return SparkError(cls, None, f"{name} doesn't exist (latestId: {latest}, compactInterval: {interval})")


def get_batch_assertion() -> SparkError:
    """``FileStreamSource.getBatch``'s ``assert(startOffset <= endOffset)`` (every release 3.5.9-4.3: javap shows
    the same check, FileStreamSource.scala line 238 on 3.5.9, 304 on 4.3)."""
    return SparkError("java.lang.AssertionError", None, "assertion failed")


def offset_field_unusable(field: str) -> SparkError:
    """json4s reading a source's offset into its case class (FileStreamSourceOffset, RatePerMicroBatchStreamOffset)
    finds no Long in ``field``: ``org.json4s.MappingException: No usable value for <field>`` then ``Do not know how
    to convert JString(80) into long`` (seen on 4.3, damage hunt of 2026-11-27; the same texts from the classes
    of 3.5.9, 4.0.5 and 4.3.0 called directly)."""
    return SparkError("org.json4s.MappingException", None, f"No usable value for {field}")


def file_not_found(rel: str) -> SparkError:
    return SparkError(FNF, None, f"{rel} does not exist")


def unsupported_version(target: SparkTarget, found: int, maximum: int) -> SparkError:
    if target.error_classes:
        return SparkError(
            ISE,
            "INVALID_LOG_VERSION.MAX_SUPPORTED_VERSION",
            f"The maximum supported log version is v{maximum}, but encountered v{found}",
        )
    return SparkError(ISE, None, f"maximum supported log version is v{maximum}, but encountered v{found}")


def exact_version(found: int, expected: int) -> SparkError:
    return SparkError(
        ISE,
        "INVALID_LOG_VERSION.EXACT_MATCH_VERSION",
        f"The only supported log version is v{expected}, but encountered v{found}",
    )


JSON_TOKEN_KINDS = ("non-numeric-literal", "number-too-long", "no-usable-value")


def json_token_error(target: SparkTarget, exc: FormatError) -> SparkError:
    """What Jackson / json4s say of a token Python's json reads (seen with PySpark 4.3.0; the number length
    wording of 3.5's Jackson recorded with 3.5.9)."""
    if exc.kind == "non-numeric-literal":
        return SparkError(JSON_PARSE, None, f"Non-standard token '{exc.found}'")
    if exc.kind == "number-too-long":
        m = re.search(r"Number value length \((\d+)\)", exc.expected)
        n = m.group(1) if m else ""
        text = (
            f"Number value length ({n}) exceeds the maximum allowed (1000"
            if target.at_least(4, 0)
            else f"Number length ({n}) exceeds the maximum length (1000)"
        )
        return SparkError("com.fasterxml.jackson.core.exc.StreamConstraintsException", None, text)
    field = exc.expected.removeprefix("a number for ")
    return SparkError("org.json4s.MappingException", None, f"No usable value for {field}")


def log_parse_error(target: SparkTarget, log: str, rel: str, exc: FormatError) -> SparkError | None:
    """Spark's error for an unreadable log file (offsets, commits, a file source's or a file sink's log); None if
    Spark reads it fine."""
    kind = exc.kind
    if kind == "empty":
        suffix = " in the offset commit log" if log == "commits" else ""
        return SparkError(ISE, None, f"{rel}. Incomplete log file{suffix}")
    if kind == "header-only":
        return SparkError("java.util.NoSuchElementException", None, "next on empty iterator")
    if kind == "malformed-version":
        cls = "MALFORMED_LOG_FILE" if target.error_classes else None
        return SparkError(ISE, cls, "Log file was malformed: failed to read correct log version from")
    if isinstance(exc, UnsupportedVersion):
        if log == "commits" and target.commit_version_exact:  # 4.0/4.1 read exactly the conf's version
            return exact_version(exc.version, 1)
        # the compactible logs (sources/<k>, _spark_metadata) are at version 1 on every release
        maximum = {"offsets": target.max_offset_version, "commits": target.max_commit_version}.get(log, 1)
        return unsupported_version(target, exc.version, maximum)
    if kind == "malformed-utf8":  # scala.io.Source's decoder reports malformed input
        return SparkError("java.nio.charset.MalformedInputException", None, "Input length")
    if kind == "truncated-json":
        return SparkError(JSON_EOF, None, "Unexpected end-of-input")
    if kind in JSON_TOKEN_KINDS:
        return json_token_error(target, exc)
    if kind == "invalid-json":
        return SparkError(JSON_PARSE, None, "Unexpected character")
    if kind == "v2-no-colon":
        line = exc.found.strip("'\"")
        return SparkError(ISE, None, f"Invalid OffsetMap format: {line}")
    if kind == "empty-metadata":
        return SparkError(ISE, None, "VERSION_2 offset log requires metadata")
    return SparkError(None, None, exc.expected)


def metadata_error(target: SparkTarget, exc: FormatError) -> SparkError:
    if exc.kind == "empty":
        return SparkError(
            "com.fasterxml.jackson.databind.exc.MismatchedInputException",
            None,
            "No content to map due to end-of-input",
        )
    if exc.kind == "no-id":
        return SparkError("org.json4s.MappingException", None, "No usable value for id")
    if exc.kind == "truncated-json":
        return SparkError(JSON_EOF, None, "Unexpected end-of-input")
    if exc.kind in JSON_TOKEN_KINDS:
        return json_token_error(target, exc)
    return SparkError(JSON_PARSE, None, "Unexpected character")


def missing_metadata() -> SparkError:
    return SparkError(
        "org.apache.spark.SparkRuntimeException",
        "STREAMING_CHECKPOINT_MISSING_METADATA_FILE",
        "the metadata file is missing but offset and/or commit logs contain data",
    )


def checkpoint_not_empty() -> SparkError:
    return SparkError(
        "org.apache.spark.sql.execution.streaming.state.StateStoreCheckpointLocationNotEmpty",
        "STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY",
        "should be empty on batch 0",
    )


def no_offsets_assertion() -> SparkError:
    return SparkError("java.lang.AssertionError", None, "assertion failed")


def watermark_npe() -> SparkError:
    return SparkError("java.lang.NullPointerException", None, "watermarkTracker()")


def unfinished_repartition(batch: int) -> SparkError:
    return SparkError(
        "org.apache.spark.SparkIllegalStateException",
        "STREAMING_UNFINISHED_REPARTITION_DETECTED",
        f"The latest batch {batch} is for an unfinished state repartitioning",
        batch,
    )


def delta_missing(target: SparkTarget, rel: str) -> SparkError:
    if target.error_classes:
        return SparkError(
            "org.apache.spark.SparkException",
            "CANNOT_LOAD_STATE_STORE.CANNOT_READ_DELTA_FILE_NOT_EXISTS",
            f"{rel} does not exist",
        )
    return SparkError(ISE, None, f"{rel} does not exist")


def streaming_file_missing(target: SparkTarget, rel: str) -> SparkError:
    if target.error_classes:
        return SparkError(
            "org.apache.spark.SparkException",
            "CANNOT_LOAD_STATE_STORE.CANNOT_READ_STREAMING_STATE_FILE",
            f"{rel} does not exist",
        )
    return SparkError(ISE, None, f"{rel} does not exist")


def state_dir_missing() -> SparkError:
    return SparkError(
        "org.apache.spark.SparkRuntimeException",
        "STREAMING_STATEFUL_OPERATOR_MISSING_STATE_DIRECTORY",
        "the state directory is empty or missing",
    )


def unexpected_file_size(target: SparkTarget, expected: str, found: str) -> SparkError:
    """RocksDBFileManager copies an SST and compares its size with the zip's (recorded on 3.5.9 to 4.3:
    ``Copied <sst> to <local>, expected 1316 bytes, found 1416 bytes``; 4.x as
    ``CANNOT_LOAD_STATE_STORE.UNEXPECTED_FILE_SIZE``)."""
    message = f"expected {expected} bytes, found {found} bytes"
    if target.error_classes:
        return SparkError("org.apache.spark.SparkException", "CANNOT_LOAD_STATE_STORE.UNEXPECTED_FILE_SIZE", message)
    return SparkError(ISE, None, message)


def zip_truncated() -> SparkError:
    """A RocksDB zip cut short: ``Utils.unzipFilesFromFile`` (seen on 4.3, wrapped in CANNOT_LOAD_STATE_STORE)."""
    return SparkError("java.io.EOFException", None, "Unexpected end of ZLIB input stream")


def cannot_read_zip_metadata(expected: int, found: int) -> SparkError:
    """``RocksDBCheckpointMetadata.readFromFile`` wants the header ``v<VERSION>`` exactly (VERSION: 1 on 4.1+;
    on 4.0 the session's checkpointFormatVersion), error-conditions.json of 4.3:
    CANNOT_LOAD_STATE_STORE.CANNOT_READ_CHECKPOINT "Cannot read RocksDB checkpoint metadata. Expected
    <expectedVersion>, but found <actualVersion>." (4.0.5, fresh JVM, a ``v1`` zip in a format-v2 store: "Expected
    v2, but found v1"; hunt 13. In a JVM that ran a format-v1 query first, 4.0's VERSION stays 1 and its own ``v2``
    zips fail "Expected v1, but found v2": one JVM, one format there.)"""
    return SparkError(
        "org.apache.spark.SparkException",
        "CANNOT_LOAD_STATE_STORE.CANNOT_READ_CHECKPOINT",
        f"Expected v{expected}, but found v{found}",
    )


def rocksdb_corruption(message: str) -> SparkError:
    """RocksDB refuses a table block whose checksum does not match when it opens the database (seen on 4.3 for a
    flipped index byte: ``org.rocksdb.RocksDBException: block checksum mismatch: stored = 3623834813, computed =
    842994371, type = 4  in <local dir>/000015.sst offset 122 size 30``, wrapped in CANNOT_LOAD_STATE_STORE)."""
    return SparkError("org.rocksdb.RocksDBException", None, message)


def corrupt_stream(kind: str) -> SparkError:
    if kind == "truncated":
        return SparkError("java.io.EOFException", None, "Stream ended prematurely")
    return SparkError("java.io.IOException", None, "Stream is corrupted")


def hadoop_checksum(rel: str, offset: int) -> SparkError:
    """Hadoop's local ChecksumFileSystem verifies ``.<name>.crc`` on every read (3.5.9: "Checksum error:
    file:<path>/4.zip at 2560 exp: ... got: ..." for one flipped byte of a RocksDB zip)."""
    return SparkError("org.apache.hadoop.fs.ChecksumException", None, f"{rel} at {offset}")


def checksum_failed(rel: str) -> SparkError:
    return SparkError(
        "org.apache.spark.SparkException",
        "CHECKPOINT_FILE_CHECKSUM_VERIFICATION_FAILED",
        "Checksum verification failed, the file may be corrupted",
    )
