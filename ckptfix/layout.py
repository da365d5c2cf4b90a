"""Pure path rules of a checkpoint: which names Spark treats as what. No IO.

Sources of the rules: ``HDFSMetadataLog.isBatchFile`` (a name is a batch iff it parses with
Java ``Long.parseLong``: optional sign, leading zeros allowed), ``CompactibleFileStreamLog``
(``<id>.compact``), ``HDFSBackedStateStoreProvider.fetchFiles`` (``<v>.delta``/``<v>.snapshot``),
``RocksDBFileManager`` (``<v>.zip``, ``<v>.changelog``, 4.x ``<v>_<uuid>.*``), Hadoop's
``ChecksumFileSystem`` (hidden ``.<name>.crc``) and Spark 4.x visible ``<name>.crc`` JSON
sidecars, ``CheckpointFileManager`` temp files (``.<name>.<uuid>[.TID<n>].tmp``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

METADATA = "metadata"
OFFSETS = "offsets"
COMMITS = "commits"
SOURCES = "sources"
STATE = "state"
SINK_LOG = "_spark_metadata"
COMPACT_SUFFIX = ".compact"
#: the stores of a stream-stream join (SymmetricHashJoinStateManager; fixed in code, whatever metadata says)
JOIN_STORES = ("left-keyToNumValues", "left-keyWithIndexToValue", "right-keyToNumValues", "right-keyWithIndexToValue")
#: every store name Spark opens: a join's four, "default" for every other operator (transformWithState's column
#: families live inside it)
SPARK_STORES = frozenset({"default", *JOIN_STORES})

#: the top-level names of a checkpoint (``Checkpoint.open`` takes a directory holding one of them as a checkpoint)
CHECKPOINT_MARKS = frozenset({METADATA, OFFSETS, COMMITS, STATE, SOURCES})


def looks_like_checkpoint(names: set[str]) -> bool:
    """Whether a directory with these entries is a checkpoint, when looking for checkpoints below a prefix (``ckptfix
    scan``): two of :data:`CHECKPOINT_MARKS`, or only marks (a query that stopped before its first batch keeps just
    ``metadata``), leaving out Hadoop ``.crc`` sidecars and ckptfix's own ``_ckptfix``. One mark among other
    names (a table's ``state`` column partition) is not enough."""
    names = {n for n in names if hadoop_crc_target(n) is None and n != "_ckptfix"}
    marks = names & CHECKPOINT_MARKS
    return len(marks) >= 2 or (bool(marks) and marks == names)


_LONG = re.compile(r"^[+-]?[0-9]+$")
_INT64_MAX = 2**63 - 1
_STATE_FILE = re.compile(
    r"^(?P<version>[0-9]+)(?:_(?P<uid>[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}))?"
    r"\.(?P<kind>delta|snapshot|zip|changelog)$",
    re.IGNORECASE,
)


def parse_batch_name(name: str) -> int | None:
    """The batch id Spark reads from a log file name, or None if Spark ignores the name."""
    if not _LONG.match(name):
        return None
    value = int(name)
    if not -(2**63) <= value <= _INT64_MAX:
        return None
    return value


def batch_file_name(batch_id: int) -> str:
    return str(batch_id)


def hadoop_crc_target(name: str) -> str | None:
    """``.<name>.crc`` -> ``<name>``; None for any other name."""
    if name.startswith(".") and name.endswith(".crc") and len(name) > 5:
        return name[1:-4]
    return None


def hadoop_crc_name(name: str) -> str:
    return f".{name}.crc"


def is_temp(name: str) -> bool:
    return name.endswith(".tmp")


@dataclass(frozen=True)
class StateFileName:
    version: int
    kind: str  # "delta" | "snapshot" | "zip" | "changelog"
    unique_id: str | None  # checkpoint format v2 id


def parse_state_file(name: str) -> StateFileName | None:
    m = _STATE_FILE.match(name)
    if not m:
        return None
    return StateFileName(int(m["version"]), m["kind"].lower(), m["uid"])


def state_file_name(version: int, kind: str, unique_id: str | None = None) -> str:
    return f"{version}_{unique_id}.{kind}" if unique_id else f"{version}.{kind}"


def checksum_sidecar_target(name: str) -> str | None:
    """Spark 4.x visible ``<state file>.crc`` JSON sidecar -> the state file's name."""
    if name.startswith(".") or not name.endswith(".crc"):
        return None
    base = name[:-4]
    return base if parse_state_file(base) else None
