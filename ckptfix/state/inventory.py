"""``state ls``: operators, stores, partitions, and which versions each store can load.

Loadable versions come from the listing (a snapshot, or an unbroken run of deltas /
changelogs back to one or to the empty state); with checkpoint format v2 they follow the
commit log's unique ids. For the last committed version the chain is resolved exactly and,
with ``verify``, every file of it is read and checked (checksum sidecar, codec, framing).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ckptfix.checkpoint import Checkpoint, OperatorDir
from ckptfix.errors import FormatError
from ckptfix.formats.unsaferow import StructType, simple_string
from ckptfix.state.read import select, store_chain
from ckptfix.state.schemas import OperatorInfo, any_kind, recorded_partitions, store_schema
from ckptfix.stores import chain as chains
from ckptfix.stores import rocks, verify


@dataclass
class StoreStatus:
    partition: int
    store: str
    versions: list[int]  # versions with any file
    loadable: list[int]
    target: int | None  # the version checked in full (last committed)
    chain: str | None = None
    problem: str | None = None  # why ``target`` cannot be loaded
    #: unloadable version ranges with the first file each is missing, e.g. {"1-3": "state/0/0/2.delta"}
    unloadable: dict[str, str] = field(default_factory=dict)
    #: with ``verify``: version ranges whose files are all there but one is damaged -> the first problem
    broken: dict[str, str] = field(default_factory=dict)
    #: versions below the oldest one with a file, e.g. "1-12": cleaned up by Spark's retention
    #: (``minBatchesToRetain``), or the partition did not exist yet (a repartition added it); not damage
    older: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "partition": self.partition,
            "store": self.store,
            "versions": ranges(self.versions),
            "loadable": ranges(self.loadable),
            "checked_version": self.target,
            "chain": self.chain,
            "ok": self.problem is None,
            "problem": self.problem,
            "unloadable": self.unloadable,
            "broken": self.broken,
            "older": self.older,
        }


@dataclass
class SchemaView:
    """The schema Spark checks (and ckptfix decodes with) for one store or transformWithState state variable."""

    store: str
    key: StructType | None = None
    value: StructType | None = None
    source: str | None = None  # the file it was read from
    problem: str | None = None  # why there is none (no schema file, a damaged one)

    def to_json(self) -> dict[str, Any]:
        return {
            "store": self.store,
            "key": None if self.key is None else simple_string(self.key),
            "value": None if self.value is None else simple_string(self.value),
            "key_json": None if self.key is None else self.key.json_value(),
            "value_json": None if self.value is None else self.value.json_value(),
            "source": self.source,
            "problem": self.problem,
        }


@dataclass
class OperatorStatus:
    operator: int
    name: str | None
    provider: str
    stores: list[str]
    num_partitions: int
    state_variables: list[str] = field(default_factory=list)
    partitions: list[StoreStatus] = field(default_factory=list)
    schemas: list[SchemaView] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "operator": self.operator,
            "name": self.name,
            "provider": self.provider,
            "stores": self.stores,
            "num_partitions": self.num_partitions,
            "state_variables": self.state_variables,
            "schemas": [s.to_json() for s in self.schemas],
            "partitions": [p.to_json() for p in self.partitions],
        }


@dataclass
class StateListing:
    checkpoint: str
    last_committed_batch: int | None
    operators: list[OperatorStatus]
    #: every file of every version called loadable was read and checked (``--verify``); without it, "loadable"
    #: means "every file the version needs is there", judged from the names
    verified: bool = False

    @property
    def ok(self) -> bool:
        return all(p.problem is None for op in self.operators for p in op.partitions)

    def to_json(self) -> dict[str, Any]:
        return {
            "checkpoint": self.checkpoint,
            "last_committed_batch": self.last_committed_batch,
            "ok": self.ok,
            "verified": self.verified,
            "operators": [o.to_json() for o in self.operators],
        }


def ranges(versions: list[int]) -> str:
    """[1,2,3,5] -> '1-3,5'."""
    out: list[str] = []
    for v in sorted(versions):
        if out and v == _last(out) + 1:
            head = out[-1].split("-")[0]
            out[-1] = f"{head}-{v}"
        else:
            out.append(str(v))
    return ",".join(out)


def _last(out: list[str]) -> int:
    return int(out[-1].rsplit("-", 1)[-1])


def list_state(
    url: str | Checkpoint, *, verify: bool = False, storage_options: Mapping[str, Any] | None = None
) -> StateListing:
    ckpt = url if isinstance(url, Checkpoint) else Checkpoint.open(url, storage_options)
    latest = ckpt.commits.latest
    listing = StateListing(ckpt.location.url, latest, [], verified=verify)
    for op_id in sorted(ckpt.state.operators):
        op = ckpt.state.operators[op_id]
        kwargs: dict[str, Any] = {"operator": op_id}
        if latest is None:
            kwargs["version"] = (
                max(
                    (v for stores in op.partitions.values() for s in stores.values() for (_, v, _) in s.files),
                    default=1,
                )
                or 1
            )
        sel = select(ckpt, store_name="default", whole=False, **any_kind(ckpt, op_id), **kwargs)
        n = recorded_partitions(ckpt, op, sel.conf)
        status = OperatorStatus(
            op_id,
            sel.info.name,
            sel.provider,
            sel.info.stores,
            len(sel.partitions) if n is None else n,
            sorted(sel.info.column_families),
        )
        status.schemas = _schemas(ckpt, op, sel.info)
        for part in range(n) if n is not None else sorted(op.partitions):
            if not op.partitions.get(part):  # Spark loads it at the restart and fails
                rel = f"{op.rel}/{part}"
                entry = ckpt.entries.get(rel)
                what = (
                    "is missing" if entry is None else "is a file, not a directory" if not entry.is_dir else "is empty"
                )
                status.partitions.append(
                    StoreStatus(part, "default", [], [], latest, problem=f"{ckpt.display(rel)} {what}")
                )
                continue
            for _name, store in sorted(op.partitions[part].items()):
                status.partitions.append(_store_status(sel, store, verify))
        listing.operators.append(status)
    return listing


def _schemas(ckpt: Checkpoint, op: OperatorDir, info: OperatorInfo) -> list[SchemaView]:
    """The stored schemas of an operator: each store's (v1/v2 schema files), or each state variable's
    (transformWithState's v3 file; Spark's own column families, named ``$...``, left out)."""
    if info.is_tws:
        return [
            SchemaView(name, s.key, s.value, s.source)
            for name, s in sorted(info.column_families.items())
            if not name.startswith("$")
        ]
    out = []
    for name in info.stores or ["default"]:
        try:
            s = store_schema(ckpt, op, info, name)
        except FormatError as exc:
            out.append(SchemaView(name, problem=str(exc)))
            continue
        out.append(SchemaView(name, s.key, s.value, s.source))
    return out


def _store_status(sel: Any, store: Any, verify: bool) -> StoreStatus:
    versions = sorted({v for (_, v, _) in store.files})
    uid_mode = any(uid for (_, _, uid) in store.files)
    if uid_mode:
        loadable = [v for v in versions if _loads(sel, store, v)]
    else:
        loadable = chains.loadable_versions(store, sel.provider) if sel.provider in chains.SNAPSHOT_KIND else []
    broken: dict[int, str] = {}
    if verify:  # every byte of every version it calls loadable: one damaged file unloads the versions using it
        checked = _Checked()
        for v in loadable:
            problem = _chain_problem(sel, store, v, checked)
            if problem is not None:
                broken[v] = problem
        loadable = [v for v in loadable if v not in broken]
    status = StoreStatus(store.partition, store.store, versions, loadable, sel.version)
    oldest = min(versions, default=1)
    status.older = ranges(list(range(1, oldest)))
    missing = [v for v in range(oldest, max(versions, default=0) + 1) if v not in set(loadable)]
    for span in ranges(missing).split(",") if missing else []:
        first = int(span.split("-")[0])
        if first in broken:
            status.broken[span] = broken[first]
            continue
        try:
            store_chain(sel, store, first)
        except FormatError as exc:  # the listing names files relative to the checkpoint it lists
            status.unloadable[span] = exc.path.removeprefix(sel.ckpt.display("").rstrip("/") + "/")
    try:
        chain = store_chain(sel, store)
        status.chain = chain.describe()
        if verify:
            for problem in _verify(sel, chain, _Checked()):
                status.problem = problem
                break
    except FormatError as exc:
        status.problem = str(exc)
    return status


def verified_loadable(sel: Any, store: Any) -> list[int]:
    """The versions of one store whose every file verifies (what ``state ls --verify`` calls loadable)."""
    return _store_status(sel, store, True).loadable


def _loads(sel: Any, store: Any, version: int) -> bool:
    try:
        store_chain(sel, store, version)
        return True
    except FormatError:
        return False


def _chain_problem(sel: Any, store: Any, version: int, checked: _Checked) -> str | None:
    try:
        chain = store_chain(sel, store, version)
    except FormatError as exc:
        return str(exc)
    return next(_verify(sel, chain, checked), None)


@dataclass
class _Checked:
    """Verdicts already reached while listing one store: per state file, and per SST (zips share SSTs)."""

    files: dict[str, str | None] = field(default_factory=dict)
    ssts: dict[str, verify.FileProblem | None] = field(default_factory=dict)


def _verify(sel: Any, chain: chains.Chain, checked: _Checked) -> Iterator[str]:
    """Problems of a chain's files, each file (and each SST) verified once across chains."""
    for step in chain.files:
        if step.rel not in checked.files:
            checked.files[step.rel] = _file_problem(sel, chain.store, step, checked.ssts)
        problem = checked.files[step.rel]
        if problem is not None:
            yield problem


def _delimiter(sel: Any) -> bytes:
    found = sel.delimiter
    return rocks.MERGE_DELIMITERS[rocks.MERGE_OPERATOR_VERSION_ABSENT] if found is None else found


def _file_problem(sel: Any, store: Any, step: chains.Step, ssts: dict[str, verify.FileProblem | None]) -> str | None:
    """Every byte of one state file (the store model's facts, :mod:`ckptfix.stores.verify`): its checksum
    sidecars, its framing decoded to the end, and for a RocksDB zip its CRCs, its SSTs (present, listed size,
    sidecars) and every block of the database it makes. Any damaged byte counts, even one Spark's load would
    not notice (a stale SST sidecar, a bad block): the versions using the file are not vouched for."""
    try:
        facts = verify.check_file(
            sel.ckpt,
            store,
            step.rel,
            step.kind,
            sel.codec,
            deep=True,
            merge_delimiter=_delimiter(sel),
            ssts_checked=ssts,
        )
    except FormatError as exc:  # an unreadable file (permission, vanished)
        return str(exc)
    bad = next((fp for fp in facts if fp.kind in verify.FATAL or fp.kind in verify.LATENT), None)
    return None if bad is None else str(bad)


__all__ = ["StateListing", "list_state", "ranges", "verified_loadable"]
