"""A few raw keys of one state store's restart chain, read cheaply: for checks that need evidence from the
state itself (where the keys are placed, what windows they hold), not a full read.

The files are the ones the restart's load reads (the chain of :mod:`ckptfix.stores.chain`), newest first: a
delta's, snapshot's or changelog's first records, or a zip's smallest SST's first data block (the table holds the
partition's keys like any other). Removals count: a removed key was written by the same query.
"""

from __future__ import annotations

from ckptfix.checkpoint import Checkpoint, StoreDir
from ckptfix.errors import FormatError
from ckptfix.formats import rocksdbzip, sst, statefile
from ckptfix.stores import chain as chains


def newest_steps(store: StoreDir, version: int, provider: str, uid: str | None) -> list[chains.Step]:
    """The files the load of ``version`` reads, newest first ([]: the chain is broken, which the chain check
    reports). Format v2 (``uid`` given): the changelog and the zip of that version with the commit's id."""
    if uid is not None:
        return [
            chains.Step(rel, kind, version, uid)
            for kind in ("changelog", "zip")
            if (rel := store.files.get((kind, version, uid)))
        ]
    try:
        chain = chains.plan(store, version, provider)
    except FormatError:
        return []
    return list(reversed(chain.files))


def _by_size(store: StoreDir, meta: rocksdbzip.RocksDBMetadata) -> list[rocksdbzip.SstFile]:
    return sorted((s for s in meta.sst_files if s.dfs_sst_file_name in store.ssts), key=lambda s: s.size_bytes)


def sst_keys(ck: Checkpoint, store: StoreDir, meta: rocksdbzip.RocksDBMetadata, limit: int) -> list[bytes]:
    """Up to ``limit`` keys of the zip's smallest SST (its first data block)."""
    tables = _by_size(store, meta)
    if not tables:
        return []
    return sst.first_keys(ck.location.read(f"{store.rel}/SSTs/{tables[0].dfs_sst_file_name}"), limit)


def sst_entries(
    ck: Checkpoint, store: StoreDir, meta: rocksdbzip.RocksDBMetadata, limit: int
) -> list[tuple[bytes, bytes | None]]:
    """Up to ``limit`` (key, value) entries of the zip's smallest SST (its first data block; value None for a
    deletion or merge operand); where that block holds no value (an SST of tombstones), of the next smallest one
    that does, among the three smallest."""
    first: list[tuple[bytes, bytes | None]] = []
    for i, table in enumerate(_by_size(store, meta)[:3]):
        entries = sst.first_entries(ck.location.read(f"{store.rel}/SSTs/{table.dfs_sst_file_name}"), limit)
        if i == 0:
            first = entries
        if any(v is not None for _, v in entries):
            return entries
    return first


def first_keys(ck: Checkpoint, store: StoreDir, step: chains.Step, compression: str, limit: int) -> list[bytes]:
    """Up to ``limit`` raw keys of ``step`` (a zip: of its smallest SST only). Raises :class:`FormatError` for a file
    that cannot be read."""
    if step.kind == "zip":
        return sst_keys(ck, store, rocksdbzip.parse(ck.read(step.rel), ck.display(step.rel)).metadata, limit)
    return [rec.key for rec in first_records(ck, store, step, compression, limit)]


def first_records(
    ck: Checkpoint, store: StoreDir, step: chains.Step, compression: str, limit: int
) -> list[statefile.Record]:
    """Up to ``limit`` records of ``step``: a delta's, snapshot's or changelog's first ones (puts with their values,
    removals with none); a zip's smallest SST's first entries. Raises :class:`FormatError` for a file that cannot
    be read."""
    path = ck.display(step.rel)
    if step.kind == "zip":
        entries = sst_entries(ck, store, rocksdbzip.parse(ck.read(step.rel), path).metadata, limit)
        return [statefile.Record(k, v) for k, v in entries]
    raw, _ = statefile.decompress_as_read(compression, ck.read(step.rel), path, step.kind)  # type: ignore[arg-type]
    out: list[statefile.Record] = []
    for rec in statefile.iter_records(raw, path, step.kind):  # type: ignore[arg-type]
        out.append(rec)
        if len(out) >= limit:
            break
    return out


def changes(ck: Checkpoint, rel: str, kind: str, compression: str, limit: int) -> list[statefile.Record] | None:
    """Every record of one delta or changelog (puts and removals, in the order the batch wrote them); None when it
    holds more than ``limit``. Raises :class:`FormatError` for a file that cannot be read."""
    path = ck.display(rel)
    raw, _ = statefile.decompress_as_read(compression, ck.read(rel), path, kind)  # type: ignore[arg-type]
    out: list[statefile.Record] = []
    for rec in statefile.iter_records(raw, path, kind):  # type: ignore[arg-type]
        out.append(rec)
        if len(out) > limit:
            return None
    return out


__all__ = ["changes", "first_keys", "first_records", "newest_steps", "sst_entries", "sst_keys"]
