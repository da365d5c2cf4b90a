"""Relocate a checkpoint: copy it to another path or store and rewrite what holds absolute paths.

What holds absolute paths (Spark's source + real 4.3.0 files, see tests/migrate/test_relocate_live.py):

* ``state/<op>/_metadata/v2/<batch>`` (4.x transformWithState operator metadata v2):
  ``stateStoreInfo[*].stateSchemaFilePaths`` name the schema files *inside the checkpoint*, qualified
  the Hadoop way (``fs.makeQualified(path).toUri.toString``: ``file:/abs/path`` locally,
  ``s3a://bucket/key`` on S3). Spark reads every listed file on restart; a moved checkpoint fails with
  ``File file:<old path> does not exist``. Rewritten (old checkpoint URI -> new one), always.
* ``sources/<k>/<n>`` and ``<n>.compact`` (file-source logs): each entry's ``path`` is the input file's
  URI (``file:///abs/path`` locally: three slashes). When the *input* moved too, the entries must follow
  (``--input-from OLD --input-to NEW``): a restart replays the last batch's file list from this log, and
  Spark 4.3 then fails with ``IllegalArgumentException: Wrong basePath <new dir> for the root path:
  file:<old dir>/...`` (seen live, tests/migrate/test_relocate_live.py).

Nothing else in a checkpoint holds its own location (offsets, commits, ``metadata``, operator metadata
v1, schema files v1-v3, RocksDB zips, changelogs, checkpoint-v2 checksum sidecars were checked on real
files); every small text file is still scanned for the old location and a hit is reported as a warning.

Safety: DEST must be new or empty (or a partial relocation of the same SRC, which is resumed); SRC must
be a checkpoint that looks idle; SRC is only read. Crash safety: a marker ``_ckptfix_relocate.json`` is
created in DEST first and removed last, and ``metadata`` (what makes a directory a checkpoint for Spark
4.x) is written after everything else: an interrupted DEST has no ``metadata`` and carries the marker;
running the same command again finishes it (files already complete in DEST are verified by size and
kept; writes are atomic, so a present file is a complete file).

Rewritten files get a fresh Hadoop ``.<name>.crc`` (when SRC had one) and, when they have a Spark 4.x
JSON checksum sidecar ``<name>.crc``, a recomputed one; every other file is copied byte for byte.
"""

from __future__ import annotations

import contextlib
import json
import os
import posixpath
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ckptfix import layout
from ckptfix.checkpoint import Checkpoint
from ckptfix.errors import (
    FormatError,
    RelocateRefused,
    UsageError,
)
from ckptfix.formats import compactlog, filechecksum, hadoopcrc, opmeta
from ckptfix.progress import ProgressLike, progress_of
from ckptfix.storage import S3_SCHEMES, Entry, Location, split_url, uri_forms

MARKER = "_ckptfix_relocate.json"
BACKUP_DIR = "_ckptfix"  # the repair engine's backups belong to SRC, never copied
CHUNK = 8 << 20
#: text files below this size are scanned for leftover references to the old location
SCAN_LIMIT = 1 << 20
_STATE_DATA = (".delta", ".snapshot", ".zip", ".changelog", ".sst")


# -- URIs ----------------------------------------------------------------------------------------
def spark_uri(url: str, like: str | None = None) -> str:
    """How Spark writes ``url``: local ``file:/p`` (or ``file:///p`` when ``like`` uses three
    slashes, or the bare path when ``like`` is bare); S3 as given (give DEST with the scheme your
    Spark uses, e.g. ``s3a://``)."""
    scheme, path = split_url(url)
    if scheme == "file":
        if like is not None and like.startswith("file:///"):
            return f"file:///{path.lstrip('/')}"
        if like is not None and like.startswith("/"):
            return path
        return f"file:/{path.lstrip('/')}"
    return f"{scheme}://{path}"


def _rebase(value: str, olds: tuple[str, ...], new_url: str) -> str | None:
    """``value`` with its ``olds`` prefix (at a path-component boundary) replaced, else None."""
    for old in olds:
        if value == old or value.startswith(old.rstrip("/") + "/"):
            return spark_uri(new_url, like=old) + value[len(old.rstrip("/")) :]
    return None


# -- the plan ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Rewrite:
    rel: str
    reason: str
    changes: tuple[tuple[str, str], ...]  # (old value, new value)
    content: bytes = field(repr=False, compare=False)


@dataclass(frozen=True)
class RelocationPlan:
    source: str
    dest: str
    source_uri: str
    dest_uri: str
    files: tuple[tuple[str, int], ...]  # every file of SRC to carry (rel, size), metadata last
    dirs: tuple[str, ...]
    rewrites: dict[str, Rewrite]  # rel -> new content (data files and regenerated sidecars)
    input_from: str | None
    input_to: str | None
    warnings: tuple[str, ...]
    resume: bool  # DEST holds a partial relocation of the same SRC

    @property
    def total_bytes(self) -> int:
        return sum(size for _, size in self.files)

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "dest": self.dest,
            "source_uri": self.source_uri,
            "dest_uri": self.dest_uri,
            "files": len(self.files),
            "bytes": self.total_bytes,
            "rewrites": [
                {"path": r.rel, "reason": r.reason, "changes": [list(c) for c in r.changes]}
                for r in sorted(self.rewrites.values(), key=lambda r: r.rel)
            ],
            "input_from": self.input_from,
            "input_to": self.input_to,
            "warnings": list(self.warnings),
            "resume": self.resume,
        }


@dataclass
class RelocationResult:
    plan: RelocationPlan
    applied: bool = False
    files_copied: int = 0
    bytes_copied: int = 0
    files_rewritten: int = 0
    files_already_there: int = 0  # resumed: complete in DEST before this run
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "plan": self.plan.to_json(),
            "applied": self.applied,
            "files_copied": self.files_copied,
            "bytes_copied": self.bytes_copied,
            "files_rewritten": self.files_rewritten,
            "files_already_there": self.files_already_there,
            "seconds": round(self.seconds, 3),
        }


def _is_backup(rel: str) -> bool:
    return rel == BACKUP_DIR or rel.startswith(BACKUP_DIR + "/")


def _same_store(a: Location, b: Location) -> bool:
    sa, sb = split_url(a.url)[0], split_url(b.url)[0]
    family = {s: "s3" for s in S3_SCHEMES}
    return family.get(sa, sa) == family.get(sb, sb)


def _inside(child: Location, parent: Location) -> bool:
    if not _same_store(child, parent):
        return False
    c, p = child.root.rstrip("/"), parent.root.rstrip("/")
    if child.is_local:
        c, p = os.path.realpath(c), os.path.realpath(p)
    return c == p or c.startswith(p + "/")


def _dest_state(dest: Location) -> dict[str, Entry]:
    try:
        return dest.list_tree()
    except FileNotFoundError:
        return {}
    except NotADirectoryError:
        raise RelocateRefused(f"{dest.url}: expected a new or empty directory, found a file") from None


def _sidecars(rel: str, entries: Mapping[str, Entry]) -> tuple[str | None, str | None]:
    """(hidden Hadoop ``.<name>.crc``, visible Spark 4.x JSON ``<name>.crc``) of ``rel`` if present."""
    d, name = posixpath.split(rel)
    hidden = posixpath.join(d, layout.hadoop_crc_name(name))
    visible = posixpath.join(d, f"{name}.crc")
    return (hidden if hidden in entries else None, visible if visible in entries else None)


def _hadoop_crc_for(src: Location, crc_rel: str, data: bytes) -> bytes:
    """A Hadoop sidecar for ``data`` with the bytes-per-checksum of the one it replaces."""
    bpc = hadoopcrc.DEFAULT_BYTES_PER_CHECKSUM
    with contextlib.suppress(FormatError):
        bpc = hadoopcrc.parse(src.read(crc_rel), src.display(crc_rel)).bytes_per_checksum
    return hadoopcrc.dump(hadoopcrc.compute(data, bpc))


def _foreign(value: str, entries: Mapping[str, Entry], dest_url: str) -> str | None:
    """A schema path under some *other* root (a checkpoint moved before by a plain copy): rebased on
    DEST when its ``state/<op>/_stateSchema/...`` tail is a file of SRC, else None."""
    start = 0
    while (i := value.find("/state/", start)) >= 0:
        tail = value[i + 1 :]
        if "/_stateSchema/" in tail and tail in entries and not entries[tail].is_dir:
            return spark_uri(dest_url) + "/" + tail
        start = i + 1
    return None


def _rewrite_opmeta(
    data: bytes, display: str, olds: tuple[str, ...], dest_url: str, entries: Mapping[str, Entry]
) -> tuple[bytes, list[tuple[str, str]]]:
    meta = opmeta.parse(data, display)
    raw = json.loads(json.dumps(meta.raw))  # a deep copy; unknown keys kept
    changes: list[tuple[str, str]] = []
    for store in raw.get("stateStoreInfo", []) or []:
        if not isinstance(store, dict):
            continue
        for key in ("stateSchemaFilePaths", "stateSchemaFilePath"):  # list in 4.x; one path in early 4.0 builds
            value = store.get(key)
            values = value if isinstance(value, list) else [value] if isinstance(value, str) else []
            new_values = []
            for v in values:
                nv = None
                if isinstance(v, str):
                    nv = _rebase(v, olds, dest_url) or _foreign(v, entries, dest_url)
                if nv is not None and nv != v:
                    changes.append((v, nv))
                new_values.append(nv if nv is not None else v)
            if isinstance(value, list):
                store[key] = new_values
            elif isinstance(value, str):
                store[key] = new_values[0]
    if not changes:
        return data, []
    return opmeta.dump(
        opmeta.OperatorMetadata(meta.version, meta.operator_id, meta.operator_name, meta.stores, raw)
    ), changes


def _rewrite_source_log(
    data: bytes, display: str, olds: tuple[str, ...], new_url: str
) -> tuple[bytes, list[tuple[str, str]]]:
    log = compactlog.parse(data, display)
    changes: list[tuple[str, str]] = []
    entries = []
    for e in log.entries:
        path = e.get("path")
        nv = _rebase(path, olds, new_url) if isinstance(path, str) else None
        if nv is not None and nv != path:
            changes.append((str(path), nv))
            e = {**e, "path": nv}
        entries.append(e)
    if not changes:
        return data, []
    out = compactlog.dump(compactlog.CompactLogFile(log.version, tuple(entries)))
    if data.endswith(b"\n"):
        out += b"\n"
    return out, changes


def plan_relocation(
    source: str,
    dest: str,
    *,
    source_options: Mapping[str, Any] | None = None,
    dest_options: Mapping[str, Any] | None = None,
    input_from: str | None = None,
    input_to: str | None = None,
    force: bool = False,
    idle_seconds: float = 120,
    progress: ProgressLike = None,
) -> RelocationPlan:
    """Check everything and work out what to copy and what to rewrite. Reads SRC, lists DEST, writes nothing."""
    from ckptfix.repair.engine import LiveQuery, check_recent_writes

    obs = progress_of(progress)
    if (input_from is None) != (input_to is None):
        raise UsageError("--input-from and --input-to: expected both or neither, found only one")
    obs.stage("listing the source")
    ckpt = Checkpoint.open(source, source_options)
    src = ckpt.location
    dst = Location(dest, dest_options if dest_options is not None else source_options)
    if _inside(dst, src):
        raise RelocateRefused(f"{dst.url}: expected a destination outside the source {src.url}, found it inside")
    if _inside(src, dst):
        raise RelocateRefused(f"{dst.url}: expected a new or empty directory, found one that contains the source")
    if ckpt.metadata_rel is None:
        raise RelocateRefused(f"{src.display('metadata')}: expected the query's metadata file, found none")
    existing = _dest_state(dst)
    resume = False
    if any(not e.is_dir for e in existing.values()):
        marker = dst.read_if_exists(MARKER) if MARKER in existing else None
        try:
            info = json.loads(marker) if marker is not None else None
        except json.JSONDecodeError:
            info = None
        if not isinstance(info, dict) or info.get("source") != src.url:
            found = sorted(p for p, e in existing.items() if not e.is_dir)
            raise RelocateRefused(
                f"{dst.url}: expected a new or empty directory, found {len(found)} files (e.g. {found[0]})"
            )
        resume = True
    if not force:
        try:
            check_recent_writes(src, ckpt.entries, idle_seconds)
        except LiveQuery as exc:
            raise RelocateRefused(str(exc)) from None

    entries = ckpt.entries
    files = [(p, e.size) for p, e in sorted(entries.items()) if not e.is_dir and not _is_backup(p)]
    files = [f for f in files if not layout.is_temp(posixpath.basename(f[0]))]  # Spark's own leftovers
    dirs = tuple(sorted(p for p, e in entries.items() if e.is_dir and not _is_backup(p)))
    # metadata (and its sidecar) last: an interrupted DEST does not look like a checkpoint to Spark 4.x
    last = {layout.METADATA, layout.hadoop_crc_name(layout.METADATA)}
    files = [f for f in files if f[0] not in last] + [f for f in files if f[0] in last]

    olds = uri_forms(src.url)
    rewrites: dict[str, Rewrite] = {}
    warnings: list[str] = []

    def add(rel: str, data: bytes, new: bytes, reason: str, changes: list[tuple[str, str]]) -> None:
        rewrites[rel] = Rewrite(rel, reason, tuple(changes), new)
        hidden, visible = _sidecars(rel, entries)
        if hidden is not None:
            rewrites[hidden] = Rewrite(
                hidden, f"Hadoop checksum of the rewritten {rel}", (), _hadoop_crc_for(src, hidden, new)
            )
        if visible is not None:
            try:
                old = filechecksum.parse(src.read(visible), src.display(visible))
                side = filechecksum.dump(
                    filechecksum.FileChecksum(
                        filechecksum.compute(new), len(new), old.algorithm, old.timestamp_ms, old.creator, old.extra
                    )
                )
            except FormatError:
                side = None
            if side is not None:
                rewrites[visible] = Rewrite(visible, f"checksum of the rewritten {rel}", (), side)
                vh, _ = _sidecars(visible, entries)
                if vh is not None:
                    rewrites[vh] = Rewrite(vh, f"Hadoop checksum of {visible}", (), _hadoop_crc_for(src, vh, side))

    obs.stage("planning rewrites")
    for op in ckpt.state.operators.values():
        for rel in sorted([*op.metadata_v2.values(), *([op.metadata_v1] if op.metadata_v1 else [])]):
            data = src.read(rel)
            new, changes = _rewrite_opmeta(data, src.display(rel), olds, dst.url, entries)
            if changes:
                add(rel, data, new, "operator metadata: state schema file paths point into the checkpoint", changes)

    if input_from is not None and input_to is not None:
        in_olds = uri_forms(input_from)
        seen: list[str] = []
        matched = 0
        for name, log in sorted(ckpt.sources.items()):
            for batch in sorted(log.files):
                rel = log.path_of(batch)
                data = src.read(rel)
                try:
                    new, changes = _rewrite_source_log(data, src.display(rel), in_olds, input_to)
                except FormatError as exc:
                    warnings.append(f"{src.display(rel)}: not a file-source log, left as is ({exc.expected})")
                    break
                if changes:
                    matched += len(changes)
                    add(rel, data, new, f"file-source log of source {name}: input moved", changes)
                elif not seen:
                    seen += [str(e.get("path")) for e in compactlog.parse(data).entries if "path" in e][:1]
        if not matched:
            example = f"e.g. {seen[0]}" if seen else "no file-source log entries"
            raise RelocateRefused(
                f"--input-from {input_from}: expected file-source log entries under it, found {example}"
            )

    obs.stage("scanning for other references to the source location")
    scan = [
        rel
        for rel, size in files
        if rel not in rewrites
        and size <= SCAN_LIMIT
        and not rel.endswith(_STATE_DATA)
        and not posixpath.basename(rel).startswith(".")
        and "/_stateSchema/" not in rel
    ]
    if not (input_from is not None and input_to is not None):
        scan = [r for r in scan if not r.startswith(layout.SOURCES + "/")]  # input paths: only with --input-from
    got = src.read_many(scan)
    needles = [o.encode() for o in olds if o.startswith(("file:", *(s + ":" for s in S3_SCHEMES))) or "://" in o]
    for rel in scan:
        data = got[rel] if rel in got else src.read(rel)
        if any(n in data for n in needles):
            warnings.append(
                f"{src.display(rel)}: mentions the source location and is copied unchanged (not a known format)"
            )

    return RelocationPlan(
        source=src.url,
        dest=dst.url,
        source_uri=spark_uri(src.url),
        dest_uri=spark_uri(dst.url),
        files=tuple(files),
        dirs=dirs,
        rewrites=rewrites,
        input_from=input_from,
        input_to=input_to,
        warnings=tuple(warnings),
        resume=resume,
    )


def apply_relocation(
    plan: RelocationPlan,
    *,
    source_options: Mapping[str, Any] | None = None,
    dest_options: Mapping[str, Any] | None = None,
    progress: ProgressLike = None,
    chunk_size: int = CHUNK,
    _fail_after: int | None = None,
) -> RelocationResult:
    """Carry the plan out into DEST (SRC is only read). ``_fail_after``: tests inject a crash after k files."""
    obs = progress_of(progress)
    started = time.monotonic()
    src = Location(plan.source, source_options)
    dst = Location(plan.dest, dest_options if dest_options is not None else source_options)
    result = RelocationResult(plan, applied=True)
    marker = json.dumps({"source": plan.source, "dest": plan.dest, "started": time.time()}).encode()
    before = {p: (e.size, e.mtime) for p, e in src.list_tree().items() if not e.is_dir}
    present: dict[str, Entry] = {}
    if plan.resume:
        present = _dest_state(dst)
        for rel in [p for p in present if p.endswith(".ckptfix.tmp")]:  # our own interrupted temp files
            dst.delete(rel)
    else:
        dst.create_exclusive(MARKER, marker)
    obs.stage("copying", total=len(plan.files))
    for done, (rel, size) in enumerate(plan.files, start=1):
        if rel == layout.METADATA:
            _check_unchanged(src, before)
        rw = plan.rewrites.get(rel)
        want = len(rw.content) if rw is not None else size
        have = present.get(rel)
        if have is not None and not have.is_dir:
            if have.size != want:
                raise RelocateRefused(
                    f"{dst.display(rel)}: expected {want} bytes from the interrupted relocation, found {have.size}"
                )
            result.files_already_there += 1
        elif rw is not None:
            dst.create_exclusive(rel, rw.content)
            result.files_rewritten += 1
            result.bytes_copied += len(rw.content)
        else:
            result.bytes_copied += dst.create_exclusive_chunks(rel, src.iter_chunks(rel, chunk_size))
            result.files_copied += 1
        obs.advance()
        if _fail_after is not None and done >= _fail_after:
            raise OSError(f"injected failure after {done} files")
    if dst.is_local:  # keep empty directories (an empty sources/<k>/ is still a fact)
        for rel in plan.dirs:
            os.makedirs(dst.path(rel), exist_ok=True)
    dst.delete(MARKER)
    result.seconds = time.monotonic() - started
    return result


def _check_unchanged(src: Location, before: Mapping[str, tuple[int, float | None]]) -> None:
    now = {p: (e.size, e.mtime) for p, e in src.list_tree().items() if not e.is_dir}
    changed = sorted(p for p in set(before) | set(now) if before.get(p) != now.get(p) and not _is_backup(p))
    if changed:
        raise RelocateRefused(
            f"{src.display(changed[0])}: expected the source unchanged during the copy, found {len(changed)} "
            "changed files (is the query running?); the destination is left incomplete (no metadata)"
        )


def relocate(
    source: str,
    dest: str,
    *,
    apply: bool = False,
    source_options: Mapping[str, Any] | None = None,
    dest_options: Mapping[str, Any] | None = None,
    input_from: str | None = None,
    input_to: str | None = None,
    force: bool = False,
    idle_seconds: float = 120,
    progress: ProgressLike = None,
) -> RelocationResult:
    """Plan, and with ``apply`` carry out, the relocation of ``source`` to ``dest``."""
    plan = plan_relocation(
        source,
        dest,
        source_options=source_options,
        dest_options=dest_options,
        input_from=input_from,
        input_to=input_to,
        force=force,
        idle_seconds=idle_seconds,
        progress=progress,
    )
    if not apply:
        return RelocationResult(plan)
    return apply_relocation(plan, source_options=source_options, dest_options=dest_options, progress=progress)
