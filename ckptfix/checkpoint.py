"""The checkpoint model: one recursive listing, files parsed only when asked for.

``Checkpoint.open(url)`` lists the tree once and indexes it into logs (offsets, commits,
source logs), the query ``metadata`` file and a state inventory. Reads go through
:meth:`Checkpoint.read` so every byte read is counted in ``location.stats``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ckptfix import layout
from ckptfix.errors import CkptfixError, FormatError, NotACheckpoint
from ckptfix.formats import commitlog, compactlog, offsetlog
from ckptfix.formats import metadata as metadata_format
from ckptfix.storage import Entry, Location

T = TypeVar("T")


def id_ranges(ids: list[int]) -> str:
    """Batch ids as the messages show them: ``[0, 1, 2, 5]`` -> ``0..2,5``, ``[]`` -> ``none`` (gaps visible)."""
    if not ids:
        return "none"
    runs: list[list[int]] = []
    for x in ids:
        if runs and x == runs[-1][1] + 1:
            runs[-1][1] = x
        else:
            runs.append([x, x])
    return ",".join(str(a) if a == b else f"{a}..{b}" for a, b in runs)


@dataclass
class LogDir:
    """One metadata log directory as Spark's ``HDFSMetadataLog`` sees it."""

    rel: str
    exists: bool = False
    files: dict[int, str] = field(default_factory=dict)  # canonical batch files: id -> rel path
    noncanonical: dict[int, str] = field(default_factory=dict)  # e.g. "0007" (Spark opens "7")
    compact: set[int] = field(default_factory=set)  # ids stored as <id>.compact
    numeric_dirs: list[str] = field(default_factory=list)  # directories named like batches (ignored)
    temp: list[str] = field(default_factory=list)
    crc: dict[str, str] = field(default_factory=dict)  # data file name -> rel path of .<name>.crc
    junk: list[str] = field(default_factory=list)
    entry_count: int = 0  # every entry, hidden files included (the 4.1+ emptiness check)

    @property
    def listed_ids(self) -> list[int]:
        """The ids Spark's ``listBatches`` sees (non-canonical names included)."""
        return sorted(set(self.files) | set(self.noncanonical))

    @property
    def latest(self) -> int | None:
        ids = self.listed_ids
        return ids[-1] if ids else None

    def path_of(self, batch_id: int) -> str:
        name = layout.batch_file_name(batch_id) + (layout.COMPACT_SUFFIX if batch_id in self.compact else "")
        return f"{self.rel}/{name}"


@dataclass
class StoreDir:
    """Files of one state store (operator, partition, store name)."""

    rel: str
    operator: int
    partition: int
    store: str
    files: dict[tuple[str, int, str | None], str] = field(default_factory=dict)  # (kind, version, uid) -> rel
    checksums: dict[str, str] = field(default_factory=dict)  # state file name -> visible .crc sidecar
    hadoop_crc: dict[str, str] = field(default_factory=dict)
    ssts: dict[str, Entry] = field(default_factory=dict)  # SSTs/<name> -> entry
    schema: str | None = None
    schema_crc: str | None = None  # Hadoop's sidecar of _metadata/schema (local file systems)
    temp: list[str] = field(default_factory=list)
    junk: list[str] = field(default_factory=list)

    def versions(self, kind: str) -> dict[int, list[tuple[str | None, str]]]:
        out: dict[int, list[tuple[str | None, str]]] = {}
        for (k, v, uid), rel in self.files.items():
            if k == kind:
                out.setdefault(v, []).append((uid, rel))
        return out

    @property
    def provider(self) -> str:
        kinds = {k for k, _, _ in self.files}
        if kinds & {"zip", "changelog"} or self.ssts:
            return "rocksdb"
        if kinds & {"delta", "snapshot"}:
            return "hdfs"
        return "unknown"


@dataclass
class OperatorDir:
    operator: int
    rel: str
    partitions: dict[int, dict[str, StoreDir]] = field(default_factory=dict)
    metadata_v1: str | None = None
    metadata_v1_crc: str | None = None  # Hadoop's sidecar of state/<op>/_metadata/metadata (local file systems)
    metadata_v2: dict[int, str] = field(default_factory=dict)
    state_schema: list[str] = field(default_factory=list)
    junk: list[str] = field(default_factory=list)

    @property
    def store_names(self) -> list[str]:
        return sorted({s for stores in self.partitions.values() for s in stores})


@dataclass
class StateInventory:
    exists: bool = False
    operators: dict[int, OperatorDir] = field(default_factory=dict)
    entry_count: int = 0
    junk: list[str] = field(default_factory=list)


def index_log(rel: str, entries: Mapping[str, Entry], compactible: bool = False) -> LogDir:
    log = LogDir(rel)
    prefix = rel + "/"
    log.exists = rel in entries and entries[rel].is_dir
    for path, entry in entries.items():
        if not path.startswith(prefix) or "/" in path[len(prefix) :]:
            continue
        name = path[len(prefix) :]
        log.entry_count += 1
        if layout.hadoop_crc_target(name) is not None:
            log.crc[layout.hadoop_crc_target(name) or ""] = path
            continue
        if layout.is_temp(name):
            log.temp.append(path)
            continue
        stem = name
        is_compact = compactible and name.endswith(layout.COMPACT_SUFFIX)
        if is_compact:
            stem = name[: -len(layout.COMPACT_SUFFIX)]
        batch = layout.parse_batch_name(stem)
        if batch is None:
            log.junk.append(path)
        elif entry.is_dir:
            log.numeric_dirs.append(path)
        elif stem == layout.batch_file_name(batch):
            log.files[batch] = path
            if is_compact:
                log.compact.add(batch)
        else:
            log.noncanonical[batch] = path
    return log


def _index_state(entries: Mapping[str, Entry]) -> StateInventory:
    inv = StateInventory(exists=layout.STATE in entries and entries[layout.STATE].is_dir)
    prefix = layout.STATE + "/"
    for path, entry in entries.items():
        if not path.startswith(prefix):
            continue
        inv.entry_count += 1
        parts = path[len(prefix) :].split("/")
        op_id = layout.parse_batch_name(parts[0])
        if op_id is None:
            inv.junk.append(path)
            continue
        op = inv.operators.setdefault(op_id, OperatorDir(op_id, f"{prefix}{parts[0]}"))
        if len(parts) == 1:
            continue
        head = parts[1]
        if head == "_metadata":
            if len(parts) == 3 and parts[2] == "metadata" and not entry.is_dir:
                op.metadata_v1 = path
            elif len(parts) == 3 and parts[2] == ".metadata.crc" and not entry.is_dir:
                op.metadata_v1_crc = path
            elif len(parts) == 4 and parts[2] == "v2" and not entry.is_dir:
                b = layout.parse_batch_name(parts[3])
                if b is not None:
                    op.metadata_v2[b] = path
            continue
        if head == "_stateSchema":
            if not entry.is_dir and not parts[-1].startswith("."):
                op.state_schema.append(path)
            continue
        part = layout.parse_batch_name(head)
        if part is None:
            if not entry.is_dir:
                op.junk.append(path)
            continue
        stores = op.partitions.setdefault(part, {})
        rest = parts[2:]
        if not rest:
            continue
        # state/<op>/<part>/<file> is the default store; any other directory is a named store
        store_name = "default"
        if entry.is_dir and len(rest) == 1 and rest[0] not in ("SSTs", "_metadata", "logs"):
            stores.setdefault(rest[0], StoreDir(path, op_id, part, rest[0]))
            continue
        if len(rest) >= 2 and rest[0] not in ("SSTs", "_metadata", "logs"):
            store_name, rest = rest[0], rest[1:]
        store_rel = f"{op.rel}/{head}" + ("" if store_name == "default" else f"/{store_name}")
        store = stores.setdefault(store_name, StoreDir(store_rel, op_id, part, store_name))
        _index_store_entry(store, rest, path, entry)
    return inv


def _index_store_entry(store: StoreDir, rest: list[str], path: str, entry: Entry) -> None:
    if entry.is_dir:
        return
    name = rest[-1]
    if rest[0] == "SSTs":
        target = layout.hadoop_crc_target(name)
        if target is not None:
            store.hadoop_crc[target] = path  # Hadoop's sidecar of an SST (local file systems)
        elif not name.startswith("."):
            store.ssts[name] = entry
        return
    if rest[0] == "_metadata":
        if name == "schema":
            store.schema = path
        elif name == ".schema.crc":
            store.schema_crc = path
        return
    if rest[0] == "logs" or len(rest) > 1:
        return
    target = layout.hadoop_crc_target(name)
    if target is not None:
        store.hadoop_crc[target] = path
        return
    if layout.is_temp(name):
        store.temp.append(path)
        return
    sidecar = layout.checksum_sidecar_target(name)
    if sidecar is not None:
        store.checksums[sidecar] = path
        return
    parsed = layout.parse_state_file(name)
    if parsed is None:
        store.junk.append(path)
    else:
        store.files[(parsed.kind, parsed.version, parsed.unique_id)] = path


def _did_you_mean(location: Location, entries: Mapping[str, Entry], marks: set[str]) -> str:
    """A hint for a path next to a checkpoint: its parent directory (a checkpoint below it) or one of its
    directories (``offsets/``, ``state/`` ...)."""
    inside = sorted({p.split("/", 1)[0] for p in entries if "/" in p and p.split("/")[1] in marks})
    if inside:
        names = " or ".join(location.display(d) for d in inside[:3])
        return f"; {names} {'holds' if len(inside) == 1 else 'hold'} one: did you mean it?"
    name = location.url.rstrip("/").rsplit("/", 1)[-1]
    if name in marks and "/" in location.url.rstrip("/"):
        parent = location.url.rstrip("/").rsplit("/", 1)[0]
        return f"; this looks like the {name}/ directory of a checkpoint: did you mean {parent}?"
    return ""


#: how many times ckptfix itself changed the checkpoint at each URL in this process (an apply, resume or undo):
#: a handle listed before a later change re-lists itself when the API is given it again (:meth:`Checkpoint.fresh`)
_WRITES: dict[str, int] = {}


def mark_written(url: str) -> None:
    """Note that this process changed the checkpoint at ``url`` (a :class:`Location`'s ``url``)."""
    _WRITES[url] = _WRITES.get(url, 0) + 1


class Checkpoint:
    """A streaming checkpoint, listed once."""

    def __init__(self, location: Location, entries: dict[str, Entry]) -> None:
        self._listed_at = _WRITES.get(location.url, 0)
        self.location = location
        self.entries = entries
        meta = entries.get(layout.METADATA)
        self.metadata_rel: str | None = layout.METADATA if meta is not None and not meta.is_dir else None
        self.offsets = index_log(layout.OFFSETS, entries)
        self.commits = index_log(layout.COMMITS, entries)
        self.sources: dict[str, LogDir] = {}
        for path, entry in entries.items():
            parts = path.split("/")
            if len(parts) == 2 and parts[0] == layout.SOURCES and entry.is_dir:
                self.sources[parts[1]] = index_log(path, entries, compactible=True)
        self.state = _index_state(entries)
        self._bytes: dict[str, bytes] = {}
        self._parsed: dict[tuple[str, str], Any] = {}

    @classmethod
    def open(cls, url: str, storage_options: Mapping[str, Any] | None = None) -> Checkpoint:
        location = Location(url, storage_options)
        entries = location.list_tree()
        top = {p.split("/", 1)[0] for p in entries}
        marks = set(layout.CHECKPOINT_MARKS)
        if not top & marks:
            found = "an empty directory" if not top else "entries " + ", ".join(sorted(top)[:5])
            raise NotACheckpoint(location.url, found + _did_you_mean(location, entries, marks))
        return cls(location, entries)

    @classmethod
    def find(
        cls, url: str, storage_options: Mapping[str, Any] | None = None
    ) -> list[tuple[str, Checkpoint | CkptfixError | OSError]]:
        """Every checkpoint at or below ``url`` (:func:`ckptfix.layout.looks_like_checkpoint`; nothing below a
        checkpoint is searched), in path order: ``(url, checkpoint)``, opened as :meth:`open` would open it, or
        ``(url, error)`` when that fails. One listing of the prefix finds them; a remote checkpoint is opened from
        that listing, a local one is walked again on its own (a symbolic link is judged against the checkpoint it
        is in, as :meth:`open` does)."""
        location = Location(url, storage_options)
        if location.is_local:
            return cls._find_local(location, storage_options)
        entries = location.list_tree()
        children: dict[str, set[str]] = {}
        for path in entries:
            parent, _, name = path.rpartition("/")
            children.setdefault(parent, set()).add(name)
        found: list[str] = []
        for rel in sorted(children, key=lambda r: (r.count("/") if r else -1, r)):
            inside = any(f == "" or rel == f or rel.startswith(f + "/") for f in found)
            if not inside and layout.looks_like_checkpoint(children[rel]):
                found.append(rel)
        out: list[tuple[str, Checkpoint | CkptfixError | OSError]] = []
        for rel in sorted(found):
            sub = location.url.rstrip("/") + "/" + rel if rel else location.url
            prefix = rel + "/" if rel else ""
            mine = {p[len(prefix) :]: e for p, e in entries.items() if p.startswith(prefix) and p != rel}
            out.append((sub, cls(Location(sub, storage_options), mine)))
        return out

    @classmethod
    def _find_local(
        cls, location: Location, storage_options: Mapping[str, Any] | None
    ) -> list[tuple[str, Checkpoint | CkptfixError | OSError]]:
        """:meth:`find` on a local tree: a walk that does not follow symbolic links and steps over what is neither a
        file nor a directory outside checkpoints (new-user trial 4: one FIFO or link loop anywhere under the prefix
        stopped the whole scan); each checkpoint is then opened as :meth:`open` does, so such an entry inside one
        is that checkpoint's error. A directory that cannot be listed is reported as such, not skipped."""
        location.require_directory()
        root = location.url
        found: list[tuple[str, Checkpoint | CkptfixError | OSError]] = []
        errors: list[OSError] = []
        for dirpath, dirnames, filenames in os.walk(root, onerror=errors.append):
            if layout.looks_like_checkpoint({*dirnames, *filenames}):
                dirnames[:] = []
                try:
                    found.append((dirpath, cls.open(dirpath, storage_options)))
                except (CkptfixError, OSError) as exc:
                    found.append((dirpath, exc))
            else:
                dirnames.sort()
        for err in errors:
            where = err.filename or root
            found.append((str(where), OSError(err.errno, f"cannot be listed: {err.strerror}", where)))
        return sorted(found, key=lambda item: item[0])

    def fresh(self) -> Checkpoint:
        """This handle, listed again first when ckptfix changed the checkpoint since it was listed (a plan applied
        or undone in this process: a new user's ``plan.apply()`` then ``read_state(ckpt)`` read the old listing,
        a deleted key came back and a rewritten zip's SSTs looked missing). Changes by others (a running query)
        are not seen: open the checkpoint again for those."""
        if _WRITES.get(self.location.url, 0) != self._listed_at:
            self.__init__(self.location, self.location.list_tree())  # type: ignore[misc]
        return self

    @property
    def last_batch(self) -> int | None:
        """The newest batch id of the offset log (None: no offset file), from the listing."""
        return self.offsets.latest

    @property
    def last_commit(self) -> int | None:
        """The newest batch id of the commit log (None: no commit file), from the listing."""
        return self.commits.latest

    def __repr__(self) -> str:
        """What the listing says, without reading a file (storage options stay out: they may hold secrets)."""
        return (
            f"<Checkpoint {self.location.url!r} last_batch={self.last_batch} "
            f"last_commit={self.last_commit} stateful_operators={len(self.state.operators)}>"
        )

    # -- reading -------------------------------------------------------------------------
    def display(self, rel: str) -> str:
        return self.location.display(rel)

    def read(self, rel: str) -> bytes:
        if rel not in self._bytes:
            try:
                self._bytes[rel] = self.location.read(rel)
            except FileNotFoundError as exc:
                if rel not in self.entries:
                    raise
                # listed when this handle was opened, gone now: a plan applied since, or a query writing (a
                # new user audited the handle ckptfix.open_checkpoint gave before plan.apply())
                raise FileNotFoundError(
                    f"{exc} (it was there when this checkpoint was listed: the checkpoint changed since; open it "
                    "again, ckptfix.open_checkpoint, to see it as it is now)"
                ) from None
        return self._bytes[rel]

    def prefetch(self, rels: list[str]) -> None:
        """Read files ahead in one batch so that later reads hit the cache."""
        self._bytes.update(self.location.read_many([r for r in rels if r not in self._bytes]))

    def _parse(self, rel: str, parser: Callable[[bytes, str], T]) -> T:
        key = (rel, getattr(parser, "__module__", ""))
        if key not in self._parsed:
            try:
                self._parsed[key] = parser(self.read(rel), self.display(rel))
            except FormatError as exc:
                self._parsed[key] = exc
        value = self._parsed[key]
        if isinstance(value, FormatError):
            raise value
        return value

    def offset(self, batch_id: int) -> offsetlog.OffsetFile:
        return self._parse(self.offsets.path_of(batch_id), offsetlog.parse)

    def commit(self, batch_id: int) -> commitlog.CommitFile:
        return self._parse(self.commits.path_of(batch_id), commitlog.parse)

    def source_log(self, source: str, batch_id: int) -> compactlog.CompactLogFile:
        return self._parse(self.sources[source].path_of(batch_id), compactlog.parse)

    def query_metadata(self) -> metadata_format.StreamMetadata:
        return self._parse(layout.METADATA, metadata_format.parse)

    def without(self, paths: set[str]) -> Checkpoint:
        """The checkpoint as it would be with ``paths`` deleted (for auditing a plan before it
        runs); what was read of the remaining files is shared."""
        other = Checkpoint(self.location, {p: e for p, e in self.entries.items() if p not in paths})
        other._bytes = self._bytes
        return other

    def planned(self, writes: Mapping[str, bytes], deletes: set[str]) -> Checkpoint:
        """The checkpoint as it would be after a plan writes ``writes`` and deletes ``deletes`` (for auditing a
        plan before it runs); this handle's reads are copied, not changed."""
        entries = {p: e for p, e in self.entries.items() if p not in deletes}
        for rel, data in writes.items():
            old = self.entries.get(rel)
            entries[rel] = Entry(len(data), old.mtime if old is not None else None)
        other = Checkpoint(self.location, entries)
        other._bytes = {**{p: b for p, b in self._bytes.items() if p not in deletes}, **writes}
        return other

    def was_read(self, rel: str) -> bool:
        return rel in self._bytes

    def looks_async(self) -> bool:
        """Evidence of asynchronous progress tracking: offsets and commits both sparse and
        (nearly) the same ids, and no state (async tracking refuses stateful queries)."""
        O, C = set(self.offsets.files), set(self.commits.files)
        if not O:
            return False
        holes = (max(O) - min(O) + 1) - len(O)
        return holes > 0 and len(O ^ C) <= 2 and not self.state.operators

    def state_format_v2(self) -> bool:
        """State checkpoint format v2 (``checkpointFormatVersion`` 2): its state file names carry unique ids
        (``N_<uuid>.zip``), from the listing alone; most of them, when both kinds of name are there (a file copied
        in from a checkpoint of the other format: damage hunt 8, H5, one ``N_<uuid>.changelog`` among the v1 files
        of a v1 checkpoint, which the audit took for v2)."""
        named = [
            uid is not None
            for op in self.state.operators.values()
            for stores in op.partitions.values()
            for store in stores.values()
            for (_, _, uid) in store.files
        ]
        return 2 * sum(named) > len(named)

    def try_offset(self, batch_id: int) -> offsetlog.OffsetFile | None:
        try:
            return self.offset(batch_id)
        except (FormatError, OSError):
            return None

    def recorded_conf(self) -> dict[str, str]:
        """The SQL confs Spark restores from the latest readable offset file."""
        for b in reversed(sorted(self.offsets.files)):
            entry = self.try_offset(b)
            if entry is not None and entry.metadata is not None:
                return dict(entry.metadata.conf)
        return {}

    def restored_conf(self) -> dict[str, str]:
        """The SQL confs a restart plans with (``OffsetSeqMetadata.setSessionConf``): the latest readable offset
        file's, and for a key Spark restores that the file does not record, Spark's legacy default, which wins
        over the session's value (:data:`ckptfix.formats.offsetlog.LEGACY_DEFAULTS`; hunt 12: a windowed
        aggregation written before 4.3 planned with 4.3's alwaysNullableOutput=true looked like a key schema
        change). Nothing without a readable offset file: a first start plans with the session's confs."""
        recorded = self.recorded_conf()
        if not recorded and not any(self.try_offset(b) is not None for b in self.offsets.files):
            return {}
        return {**offsetlog.LEGACY_DEFAULTS, **recorded}
