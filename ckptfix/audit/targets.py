"""What each Spark release does at restart, as data (facts: ../shared/reference,
spark-logs-and-restart.md §3.4, §4, §6, §12.4; verified live for 4.3.0 and against outcomes recorded with
3.5.9, 4.0.5, 4.1.4 and 4.2.1 in tests/fixtures/spark-<version>/)."""

from __future__ import annotations

from dataclasses import dataclass

from ckptfix.errors import UsageError


@dataclass(frozen=True)
class SparkTarget:
    major: int
    minor: int

    @property
    def label(self) -> str:
        return f"{self.major}.{self.minor}"

    def at_least(self, major: int, minor: int) -> bool:
        return (self.major, self.minor) >= (major, minor)

    @property
    def error_classes(self) -> bool:
        """4.x wraps log errors in error classes (MALFORMED_LOG_FILE, INVALID_LOG_VERSION)."""
        return self.major >= 4

    @property
    def max_offset_version(self) -> int:
        return 2 if self.at_least(4, 2) else 1

    @property
    def max_commit_version(self) -> int:
        return 3 if self.at_least(4, 2) else 1

    @property
    def commit_version_exact(self) -> bool:
        """4.0/4.1 read the commit log only at the version of the session's
        spark.sql.streaming.stateStore.checkpointFormatVersion (default 1)."""
        return self.major == 4 and self.minor in (0, 1)

    @property
    def refuses_missing_metadata(self) -> bool:
        return self.at_least(4, 2)

    @property
    def checks_empty_dirs_on_start(self) -> bool:
        return self.at_least(4, 1)

    @property
    def asserts_no_commits_without_offsets(self) -> bool:
        """Recorded: 4.2.1 fails `assertion failed` with commits and no offsets; 4.1.4 reaches the empty-dirs check."""
        return self.at_least(4, 2)

    @property
    def parses_latest_logs_first(self) -> bool:
        """4.3's initializeExecution parses offsets/L and commits/K before anything else."""
        return self.at_least(4, 3)

    @property
    def checks_unfinished_repartition(self) -> bool:
        return self.at_least(4, 2)

    @property
    def reports_missing_state_directory(self) -> bool:
        """Recorded: 4.2.1 raises STREAMING_STATEFUL_OPERATOR_MISSING_STATE_DIRECTORY; 4.0.5/4.1.4 fail
        loading the first delta instead."""
        return self.at_least(4, 2)

    @property
    def falls_back_from_corrupt_snapshot(self) -> bool:
        """Auto snapshot repair (spark.sql.streaming.stateStore.autoSnapshotRepair.*) ships in 4.2, not 4.1:
        recorded 4.1.4 fails on the missing SSTs of the newest RocksDB zip, 4.2.1 restarts from an older one."""
        return self.at_least(4, 2)


SUPPORTED = ("3.5", "4.0", "4.1", "4.2", "4.3")
NEWEST = SUPPORTED[-1]


def parse_target(text: str | None) -> SparkTarget:
    """'4.3', '4.3.0' or 'spark-4.3' -> SparkTarget; anything unsupported is a usage error."""
    if text is not None and not isinstance(text, str):  # the API: 4.3 as a number would be 4.1 for "4.10"
        raise UsageError(f"target_spark: expected a version string such as {NEWEST!r}, found {text!r}")
    raw = (text or NEWEST).strip().lower().removeprefix("spark-").removeprefix("v")
    parts = raw.split(".")
    label = ".".join(parts[:2])
    if label not in SUPPORTED or not all(p.isdigit() for p in parts):
        raise UsageError(f"--target-spark: expected one of {', '.join(SUPPORTED)}, found {text!r}")
    return SparkTarget(int(parts[0]), int(parts[1]))
