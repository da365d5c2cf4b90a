"""Which files build version N of one state store, the way Spark's providers load it.

HDFS-backed: the newest ``S.snapshot`` with S <= N (S = 0: the empty state), then every
``S+1..N.delta``. RocksDB, checkpoint format v1: the newest ``S.zip`` with S <= N, then
``S+1..N.changelog``. Checkpoint format v2: the commit log names version N's unique id;
``N_<id>.zip`` if present, else the lineage in ``N_<id>.changelog`` back to a zip (or to
version 1 and the empty state).

``from_snapshot`` forces the base (Spark's ``snapshotStartBatchId``: base version
``snapshotStartBatchId + 1``), ignoring newer snapshots -- for reading past a corrupt one.
``exclude`` drops snapshots already found unreadable, so a caller can fall back to an
older base the way Spark 4.2+ does.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

from ckptfix import layout
from ckptfix.checkpoint import StoreDir
from ckptfix.errors import FormatError
from ckptfix.formats import statefile

SNAPSHOT_KIND = {"hdfs": "snapshot", "rocksdb": "zip"}
STEP_KIND = {"hdfs": "delta", "rocksdb": "changelog"}

#: session confs, not recorded in the offset log: the restarting session decides them
CHANGELOG_CONF = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"
AUTO_REPAIR_CONF = "spark.sql.streaming.stateStore.autoSnapshotRepair.enabled"
FORMAT_VERSION_CONF = "spark.sql.streaming.stateStore.checkpointFormatVersion"


def changelog_checkpointing(store: StoreDir, session_conf: Mapping[str, str]) -> bool:
    """Whether the restart writes and reads RocksDB changelogs: the session's conf when told, else what the
    store shows (with changelog checkpointing on, every version writes ``N.changelog``; without it, none)."""
    told = session_conf.get(CHANGELOG_CONF)
    if told is not None:
        return told.strip().lower() == "true"
    return bool(store.versions("changelog"))


def skips_bad_snapshot(store: StoreDir, provider: str, session_conf: Mapping[str, str]) -> bool:
    """Whether Spark's ``AutoSnapshotLoader`` (4.2+) may skip a snapshot it cannot load for an older one, before
    the target version is considered: ``autoSnapshotRepair.enabled`` (default true) and, for RocksDB, changelog
    checkpointing on (``RocksDB.allowAutoSnapshotRepair`` in the 4.3.0 jar: without changelogs no older zip can
    reach version N, so the newest zip's own error stops the load; seen live on 4.3, damage hunt R03/R05/R11)."""
    if session_conf.get(AUTO_REPAIR_CONF, "true").strip().lower() != "true":
        return False
    return provider != "rocksdb" or changelog_checkpointing(store, session_conf)


@dataclass(frozen=True)
class Step:
    """One file of a chain."""

    rel: str
    kind: str  # snapshot | delta | zip | changelog
    version: int
    unique_id: str | None = None

    @property
    def name(self) -> str:
        return self.rel.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class Chain:
    store: StoreDir
    version: int
    provider: str  # hdfs | rocksdb
    base: Step | None  # None: the empty state (version 0)
    steps: tuple[Step, ...]  # deltas / changelogs after the base, oldest first
    #: from :func:`plan` only: the first file the load needs that is not there (``steps`` stop before it)
    gap: FormatError | None = None

    @property
    def base_version(self) -> int:
        return self.base.version if self.base else 0

    @property
    def files(self) -> tuple[Step, ...]:
        return ((self.base,) if self.base else ()) + self.steps

    def describe(self) -> str:
        base = self.base.name if self.base else "the empty state"
        if not self.steps:
            return base
        kind = self.steps[0].kind + "s"
        first, last = self.steps[0].version, self.steps[-1].version
        return f"{base} + {kind} {first}..{last}" if first != last else f"{base} + {self.steps[0].name}"


def missing(store: StoreDir, rel: str, why: str) -> FormatError:
    return FormatError(rel, 0, f"a file ({why})", "none", kind="missing-file")


def _rel(store: StoreDir, version: int, kind: str, uid: str | None = None) -> str:
    return f"{store.rel}/{layout.state_file_name(version, kind, uid)}"


def resolve(
    store: StoreDir,
    version: int,
    provider: str,
    *,
    unique_id: str | None = None,
    from_snapshot: int | None = None,
    exclude: Collection[int] = (),
    read_lineage: Callable[[str], statefile.ChangelogHeader] | None = None,
    reach_back: bool = False,
) -> Chain:
    """The chain for ``version`` of ``store``; FormatError (kind ``missing-file``) names the
    first file the load needs that is not there. ``from_snapshot`` is a base *version*; ``reach_back`` as for
    :func:`plan`."""
    chain = plan(
        store,
        version,
        provider,
        unique_id=unique_id,
        from_snapshot=from_snapshot,
        exclude=exclude,
        read_lineage=read_lineage,
        reach_back=reach_back,
    )
    if chain.gap is not None:
        raise chain.gap
    return chain


def plan(
    store: StoreDir,
    version: int,
    provider: str,
    *,
    unique_id: str | None = None,
    from_snapshot: int | None = None,
    exclude: Collection[int] = (),
    read_lineage: Callable[[str], statefile.ChangelogHeader] | None = None,
    reach_back: bool = False,
) -> Chain:
    """As :func:`resolve`, but a missing delta/changelog comes back as ``gap`` with the base and the
    steps before it: Spark reads the base first, so a damaged base is what it meets first. A missing base
    named explicitly (``from_snapshot``), a bad version and an unknown provider still raise. ``reach_back``
    (checkpoint format v2, a restart with auto snapshot repair): past a zip that is gone or excluded, to an older
    one through the lineages of older changelogs."""
    if version < 0:
        raise FormatError(store.rel, 0, "a state version >= 0", str(version), kind="bad-version")
    if provider not in SNAPSHOT_KIND:
        raise FormatError(store.rel, 0, "an HDFS-backed or RocksDB state store", provider, kind="unknown-provider")
    if unique_id is not None and from_snapshot is None:
        return _plan_v2(store, version, unique_id, exclude, read_lineage, reach_back)
    snap_kind, step_kind = SNAPSHOT_KIND[provider], STEP_KIND[provider]
    # a v1 load opens N.<kind> by name: where the store has v1 names, a file with a unique id in its name is not
    # one of them (damage hunt 8, H5: Spark failed on the 7.changelog that had been renamed 7_<uuid>.changelog);
    # a store with only ids in its names is a v2 store read without its commit's ids: any file of a version will do
    v1_names = any(uid is None for (_, _, uid) in store.files)

    def named(entries: list[tuple[str | None, str]] | None) -> list[tuple[str | None, str]]:
        return [e for e in entries or () if e[0] is None] if v1_names else list(entries or ())

    if from_snapshot is not None:
        if from_snapshot > version:
            raise FormatError(store.rel, 0, f"a snapshot version <= {version}", str(from_snapshot), kind="bad-version")
        base = None
        if from_snapshot > 0:
            uids = [u for u, _ in store.versions(snap_kind).get(from_snapshot, [])]
            if not uids:
                rel = _rel(store, from_snapshot, snap_kind)
                have = sorted(v for v, entries in store.versions(snap_kind).items() if entries and v <= version)
                # --from-snapshot takes a batch id: snapshot version v is batch v-1 (a new user tried 4, then guessed)
                there = (
                    "; this partition has snapshots of versions "
                    + ", ".join(str(v) for v in have)
                    + f" (of batches {', '.join(str(v - 1) for v in have)}, the values --from-snapshot takes)"
                    if have
                    else "; this partition has no snapshot"
                )
                raise missing(store, rel, f"the snapshot of version {from_snapshot} asked for{there}")
            uid = unique_id if unique_id in uids else uids[0]
            base = Step(_rel(store, from_snapshot, snap_kind, uid), snap_kind, from_snapshot, uid)
        start = from_snapshot
    else:
        candidates = sorted(
            (
                v
                for v, entries in store.versions(snap_kind).items()
                if v <= version and v not in exclude and named(entries)
            ),
            reverse=True,
        )
        start = candidates[0] if candidates else 0
        base = None
        if start:
            uid = named(store.versions(snap_kind)[start])[0][0]
            base = Step(_rel(store, start, snap_kind, uid), snap_kind, start, uid)
    steps: list[Step] = []
    step_versions = store.versions(step_kind)
    for v in range(start + 1, version + 1):
        entries = named(step_versions.get(v))
        if not entries:
            rel = _rel(store, v, step_kind)
            base_text = base.name if base else "the empty state"
            gap = missing(store, rel, f"version {version} = {base_text} + {step_kind}s {start + 1}..{version}")
            return Chain(store, version, provider, base, tuple(steps), gap)
        uid = entries[0][0]
        steps.append(Step(_rel(store, v, step_kind, uid), step_kind, v, uid))
    return Chain(store, version, provider, base, tuple(steps))


def _plan_v2(
    store: StoreDir,
    version: int,
    uid: str,
    exclude: Collection[int],
    read_lineage: Callable[[str], statefile.ChangelogHeader] | None,
    reach_back: bool = False,
) -> Chain:
    def has(v: int, kind: str, u: str | None) -> bool:
        return (kind, v, u) in store.files

    if has(version, "zip", uid) and version not in exclude:
        return Chain(store, version, "rocksdb", Step(_rel(store, version, "zip", uid), "zip", version, uid), ())
    rel = _rel(store, version, "changelog", uid)
    if not has(version, "changelog", uid):
        raise missing(store, rel, f"the commit log names {uid} as version {version}")
    if read_lineage is None:
        raise ValueError("checkpoint format v2 needs read_lineage")
    header = read_lineage(rel)
    lineage = [(e.version, e.checkpoint_unique_id) for e in (header.lineage or ())] + [(version, uid)]

    def base_of(lineage: list[tuple[int, str]]) -> int | None:
        return max((i for i, (v, u) in enumerate(lineage) if has(v, "zip", u) and v not in exclude), default=None)

    base_index = base_of(lineage)
    # a changelog's lineage reaches back to the snapshot written before it; when that zip is gone or excluded (it
    # does not load), Spark 4.2+'s auto snapshot repair loads an older zip: the lineage of the oldest changelog
    # named reaches further back (seen on 4.3, damage hunt 4: zip 6 flipped, deleted or missing an SST, zip 4
    # loaded), and when every zip it lists fails to load, version 1's changelog onwards (V07: an SST all zips
    # share deleted). With no zip there at all, Spark fails instead ("lineage is incomplete", hunt 4 V11)
    extended = lineage
    while reach_back and base_index is None and extended[0][0] > 1 and has(extended[0][0], "changelog", extended[0][1]):
        first_v, first_u = extended[0]
        older = read_lineage(_rel(store, first_v, "changelog", first_u)).lineage or ()
        earlier = [(e.version, e.checkpoint_unique_id) for e in older if e.version < first_v]
        if not earlier:
            break
        extended = earlier + extended
        if base_of(extended) is not None or (extended[0][0] == 1 and exclude):
            lineage, base_index = extended, base_of(extended)
    if base_index is None:
        if lineage[0][0] != 1:
            raise FormatError(
                rel,
                0,
                "a lineage that reaches a snapshot zip or version 1",
                f"a lineage starting at version {lineage[0][0]} with no zip",
                kind="missing-file",
            )
        base, rest = None, lineage
    else:
        bv, bu = lineage[base_index]
        base, rest = Step(_rel(store, bv, "zip", bu), "zip", bv, bu), lineage[base_index + 1 :]
    steps: list[Step] = []
    for v, u in rest:
        step_rel = _rel(store, v, "changelog", u)
        if not has(v, "changelog", u):
            gap = missing(store, step_rel, f"named in the lineage of {rel.rsplit('/', 1)[-1]}")
            return Chain(store, version, "rocksdb", base, tuple(steps), gap)
        steps.append(Step(step_rel, "changelog", v, u))
    return Chain(store, version, "rocksdb", base, tuple(steps))


def loadable_versions(store: StoreDir, provider: str) -> list[int]:
    """Versions whose chain is complete by the listing alone (checkpoint format v1)."""
    snap_kind, step_kind = SNAPSHOT_KIND[provider], STEP_KIND[provider]
    snaps = set(store.versions(snap_kind))
    steps = set(store.versions(step_kind))
    top = max(snaps | steps, default=0)
    out, reachable = [], True  # version 0 (empty) is always reachable
    for v in range(1, top + 1):
        reachable = v in snaps or (reachable and v in steps)
        if reachable:
            out.append(v)
    return out
