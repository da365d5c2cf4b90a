"""Which Spark release wrote a checkpoint, inferred from its files alone.

Spark records every ``OffsetSeqMetadata.relevantSQLConfs`` key in each offset file it writes (the value is the
session's, or the conf's default), so the key set of ``offsets/N`` says which releases can have written it:
a key is present from the release that added it on. Counted on real files (tests/fixtures/spark-<v>/, live 4.3.0):

* 3.5.9: 10 keys (3.5.1 lacked ``pruneFiltersCanPruneStreamingSubplan``);
* 4.0.5 and 4.1.4: 11 (+ ``stateStore.encodingFormat``); 4.1 rebinds ``spark.sql.shuffle.partitions`` to the
  internal state-partitions conf but keeps the key name, so 4.0 and 4.1 files have the same key set;
* 4.2.1: 15 (+ ``rocksdb.mergeOperatorVersion``, ``rowChecksum.enabled``, ``protobufExtensions.enabled``,
  ``queryEvolution.enableSourceEvolution``);
* 4.3.0: 17 (+ ``statefulOperator.alwaysNullableOutput.enabled``, ``dropDuplicates.deterministicKeyOrder.enabled``).

Other files only give lower bounds (a feature first written by release X): offset log v2 (4.2, on request),
commit log v2 with state unique ids (4.0, checkpoint format v2) and v3 (4.2), operator metadata
``state/<op>/_metadata/metadata`` (4.0; 3.5 never writes it) and ``_metadata/v2/<b>`` (4.0), schema files v3 /
``_stateSchema`` (4.0, transformWithState), state files named ``<v>_<uuid>`` (4.0), visible JSON ``<file>.crc``
checksum sidecars of state files (seen first in 4.1.4 files, on by default there; 4.0.5 wrote none).

Everything here is pure: :func:`range_from_conf` takes a conf map, :func:`infer` takes a listed
:class:`~ckptfix.checkpoint.Checkpoint` and reads a handful of small files.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ckptfix.checkpoint import Checkpoint
from ckptfix.errors import FormatError
from ckptfix.formats import offsetlog

#: releases ckptfix knows, oldest first (targets.SUPPORTED)
LABELS = ("3.5", "4.0", "4.1", "4.2", "4.3")

#: the keys 3.5.9 records (spark-logs-and-restart.md §3.2; tests/fixtures/spark-3.5.9)
KEYS_35 = frozenset(
    {
        "spark.sql.shuffle.partitions",
        "spark.sql.streaming.stateStore.providerClass",
        "spark.sql.streaming.multipleWatermarkPolicy",
        "spark.sql.streaming.flatMapGroupsWithState.stateFormatVersion",
        "spark.sql.streaming.aggregation.stateFormatVersion",
        "spark.sql.streaming.join.stateFormatVersion",
        "spark.sql.streaming.stateStore.compression.codec",
        "spark.sql.streaming.stateStore.rocksdb.formatVersion",
        "spark.sql.streaming.statefulOperator.useStrictDistribution",
        "spark.sql.optimizer.pruneFiltersCanPruneStreamingSubplan",
    }
)

#: conf key -> the first release that records it in the offset log
CONF_ADDED: dict[str, str] = {
    "spark.sql.streaming.stateStore.encodingFormat": "4.0",
    "spark.sql.streaming.stateStore.rocksdb.mergeOperatorVersion": "4.2",
    "spark.sql.streaming.stateStore.rowChecksum.enabled": "4.2",
    "spark.sql.function.protobufExtensions.enabled": "4.2",
    "spark.sql.streaming.queryEvolution.enableSourceEvolution": "4.2",
    "spark.sql.streaming.statefulOperator.alwaysNullableOutput.enabled": "4.3",
    "spark.sql.dropDuplicates.deterministicKeyOrder.enabled": "4.3",
}

#: the value a release assumes for a key missing from an older offset file: the old behaviour is kept
LEGACY_DEFAULTS = offsetlog.LEGACY_DEFAULTS


def rank(label: str) -> int:
    return LABELS.index(label)


def label_of(major: int, minor: int) -> str:
    return f"{major}.{minor}"


@dataclass(frozen=True)
class VersionRange:
    """Releases that can have written some files: ``low``..``high`` inclusive; None = unbounded
    (``low`` None: 3.5 or older; ``high`` None: this release or newer)."""

    low: str | None
    high: str | None
    evidence: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        lo, hi = self.low, self.high
        if lo is not None and lo == hi:
            return f"Spark {lo}"
        if lo is None and hi is None:
            return "an unknown Spark release"
        if lo is None:
            return f"Spark <= {hi}"
        if hi is None:
            return f"Spark >= {lo}"
        return f"Spark >= {lo}, <= {hi}"

    def contains(self, label: str) -> bool:
        r = rank(label)
        return (self.low is None or rank(self.low) <= r) and (self.high is None or r <= rank(self.high))

    def newer_than(self, label: str) -> bool:
        """Every release in the range is newer than ``label`` (the target would be a downgrade)."""
        return self.low is not None and rank(self.low) > rank(label)

    def older_than(self, label: str) -> bool:
        """Every release in the range is older than ``label`` (the target would be an upgrade)."""
        return self.high is not None and rank(self.high) < rank(label)

    def at_least(self, label: str, why: str) -> VersionRange:
        """Narrow with a lower bound from another file; a bound above ``high`` is ignored (a newer release
        ran earlier, then an older one planned the latest batch)."""
        if self.low is not None and rank(self.low) >= rank(label):
            return VersionRange(self.low, self.high, (*self.evidence, why))
        if self.high is not None and rank(self.high) < rank(label):
            return self  # the offset file is newer evidence: a newer release ran before an older one
        return VersionRange(label, self.high, (*self.evidence, why))


def usable_conf(conf: Mapping[str, str]) -> bool:
    """A conf map that can tell the release: most of the keys every release records are there (an empty or
    hand-trimmed map says nothing)."""
    return len(KEYS_35 & set(conf)) >= len(KEYS_35) // 2


def range_from_conf(conf: Mapping[str, str], where: str = "the offset file") -> VersionRange:
    """The releases whose offset files record exactly this key set."""
    keys = set(conf)
    present = sorted({CONF_ADDED[k] for k in keys if k in CONF_ADDED}, key=rank)
    absent = sorted({CONF_ADDED[k] for k in CONF_ADDED if k not in keys}, key=rank)
    unknown = sorted(k for k in keys - KEYS_35 - set(CONF_ADDED) if k.startswith("spark.sql."))
    low = present[-1] if present else None
    high = str(LABELS[rank(absent[0]) - 1]) if absent else None
    why = [f"{where} records {len(keys)} conf keys"]
    if present:
        newest = [k for k in keys if CONF_ADDED.get(k) == low]
        why.append(f"{sorted(newest)[0]} is recorded from Spark {low} on")
    if absent:
        missing = sorted(k for k in CONF_ADDED if k not in keys and CONF_ADDED[k] == absent[0])
        why.append(f"{missing[0]} (recorded from Spark {absent[0]} on) is absent")
    if unknown:
        # keys no known release records: a newer release (or a hand edit)
        why.append(f"keys no release up to {LABELS[-1]} records: {', '.join(unknown[:3])}")
        low, high = LABELS[-1], None
    if high is not None and low is not None and rank(high) < rank(low):  # inconsistent set (hand edit)
        high = None
    return VersionRange(low, high, ("; ".join(why),))


@dataclass(frozen=True)
class Feature:
    """A file only releases from ``since`` on write."""

    key: str  # stable id: commit-v3, checkpoint-v2, opmeta-v1, opmeta-v2, schema-v3, state-uid, checksum-json
    title: str
    since: str
    path: str  # display path of one such file


@dataclass(frozen=True)
class WriterInfo:
    """``latest``: the release that planned the newest batch (the latest offset file, narrowed by every other
    file's lower bound); ``first``: the release that wrote the oldest offset file still there (it also wrote the
    state schema files, which are never rewritten)."""

    latest: VersionRange | None
    first: VersionRange | None
    latest_batch: int | None = None
    first_batch: int | None = None
    features: tuple[Feature, ...] = ()

    @property
    def text(self) -> str:
        if self.latest is None:
            return "the writing Spark release cannot be told (no readable offset file)"
        out = f"written by {self.latest.text}"
        if self.first is not None and self.first.text != self.latest.text:
            out += f" (its oldest offset file, batch {self.first_batch}, by {self.first.text})"
        return out

    def feature(self, key: str) -> Feature | None:
        return next((f for f in self.features if f.key == key), None)


def _conf_range(ckpt: Checkpoint, batches: Iterable[int]) -> tuple[VersionRange | None, int | None]:
    for b in batches:
        try:
            entry = ckpt.offset(b)
        except (FormatError, OSError):
            continue
        if entry.metadata is None or not usable_conf(entry.metadata.conf):
            continue
        r = range_from_conf(entry.metadata.conf, f"offsets/{b}")
        if entry.version >= 2:
            r = r.at_least("4.2", f"offsets/{b} is v{entry.version} (offset log v2 exists from Spark 4.2)")
        return r, b
    return None, None


def features(ckpt: Checkpoint) -> tuple[Feature, ...]:
    """Files only newer releases write (one example path each)."""
    found: dict[str, Feature] = {}

    def add(key: str, title: str, since: str, rel: str) -> None:
        found.setdefault(key, Feature(key, title, since, ckpt.display(rel)))

    K = ckpt.commits.latest
    if K is not None and K in ckpt.commits.files:
        try:
            entry = ckpt.commit(K)
        except (FormatError, OSError):
            entry = None
        if entry is not None and entry.version >= 3:
            add("commit-v3", f"commit log v{entry.version}", "4.2", ckpt.commits.files[K])
        elif entry is not None and (entry.version == 2 or entry.state_unique_ids):
            add(
                "checkpoint-v2",
                "state checkpoint format v2 (commit log v2 with state unique ids)",
                "4.0",
                ckpt.commits.files[K],
            )
    v2 = ckpt.state_format_v2()  # a v2-named file among v1 ones is a stray (STATE-FILE-V2-NAME), not the format
    for op in sorted(ckpt.state.operators.values(), key=lambda o: o.operator):
        if op.metadata_v1 is not None:
            add("opmeta-v1", "operator metadata state/<op>/_metadata/metadata", "4.0", op.metadata_v1)
        if op.metadata_v2:
            add("opmeta-v2", "operator metadata v2 (transformWithState)", "4.0", op.metadata_v2[min(op.metadata_v2)])
        if op.state_schema:
            add("schema-v3", "state schema v3 files (_stateSchema, transformWithState)", "4.0", op.state_schema[0])
        for _, stores in sorted(op.partitions.items()):
            for _, store in sorted(stores.items()):
                uid = next((rel for (_, _, u), rel in sorted(store.files.items(), key=str) if u), None)
                if uid is not None and v2:
                    add("state-uid", "state files named <version>_<uuid> (checkpoint format v2)", "4.0", uid)
                if store.checksums:
                    add(
                        "checksum-json",
                        "JSON checksum sidecars <state file>.crc",
                        "4.1",
                        store.checksums[sorted(store.checksums)[0]],
                    )
    return tuple(found.values())


def infer(ckpt: Checkpoint) -> WriterInfo:
    ids = sorted(ckpt.offsets.files)
    latest, lb = _conf_range(ckpt, reversed(ids))
    first, fb = _conf_range(ckpt, ids)
    feats = features(ckpt)
    if latest is not None:
        for f in sorted(feats, key=lambda f: rank(f.since)):
            latest = latest.at_least(f.since, f"{f.path}: {f.title} (written from Spark {f.since} on)")
    return WriterInfo(latest, first, lb, fb, feats)
