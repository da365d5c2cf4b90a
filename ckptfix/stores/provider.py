"""Which state store provider wrote (and will load) an operator's stores: one answer for every command.

Spark takes ``spark.sql.streaming.stateStore.providerClass`` from the offset log when it records one
(``OffsetSeqMetadata.relevantSQLConfs``), else the session's value, whose default is the HDFS-backed
provider. Only Spark's two classes have a known file layout; any other class (a vendor's provider, a
user's subclass) keeps the layout its files show, marked ``custom`` so that callers can say that they
cannot vouch for how it loads them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ckptfix.checkpoint import OperatorDir

PROVIDER_CONF = "spark.sql.streaming.stateStore.providerClass"
CLASSES = {
    "hdfs": "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider",
    "rocksdb": "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
}
DEFAULT = "hdfs"


@dataclass(frozen=True)
class Provider:
    kind: str  # hdfs | rocksdb: the file layout to read
    cls: str  # the class Spark loads
    #: the class is not one of Spark's (the layout comes from the files, or the name)
    custom: bool = False
    recorded: bool = True  # False: the offset log does not name it (Spark uses the session's value)


def known(cls: str) -> str | None:
    """``hdfs``/``rocksdb`` for Spark's own classes (full or simple name), else None."""
    for kind, full in CLASSES.items():
        if cls in (full, full.rsplit(".", 1)[-1]):
            return kind
    return None


def layout_of(op: OperatorDir) -> str | None:
    """The layout an operator's files show: zips or changelogs are RocksDB's, deltas or snapshots HDFS's."""
    kinds = {s.provider for stores in op.partitions.values() for s in stores.values()}
    if "rocksdb" in kinds:
        return "rocksdb"
    if "hdfs" in kinds:
        return "hdfs"
    return None


def of(conf: Mapping[str, str], op: OperatorDir | None = None) -> Provider:
    """The provider of ``op`` under the recorded ``conf`` (an offset log entry's)."""
    cls = conf.get(PROVIDER_CONF, "")
    if not cls:
        files = layout_of(op) if op is not None else None
        kind = files or DEFAULT
        return Provider(kind, CLASSES[kind], recorded=False)
    named = known(cls)
    if named is not None:
        return Provider(named, cls)
    files = layout_of(op) if op is not None else None
    guess = files or ("rocksdb" if "rocksdb" in cls.lower() else DEFAULT)
    return Provider(guess, cls, custom=True)


__all__ = ["CLASSES", "DEFAULT", "PROVIDER_CONF", "Provider", "known", "layout_of", "of"]
