"""Catalogue of checkpoint damage, applied with plain file operations to a COPY of a base checkpoint.

Each case names the scenario whose base checkpoint it damages (``tests/spark/queries.py``) and the Spark
versions it applies to. ``apply`` may raise :class:`SkipCase` when the base does not have what the damage
needs (e.g. no snapshot was written); callers turn that into a skip with the reason.

Hadoop ``.<name>.crc`` sidecars of changed files are left in place (stale) unless the case says otherwise:
Spark does not verify them on these reads, and a stale sidecar is itself something the audit may report.
Deleting a file also deletes its sidecar (as Hadoop's own delete/rename do); renames move it along.

No pytest import here: the recorded-fixture generator (tests/fixtures/generate_spark35.py) uses this module too.
"""

from __future__ import annotations

import json
import re
import shutil
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Spark labels (major.minor) the catalogue runs on: 3.5, 4.0, 4.1 and 4.2 recorded once with real PySpark
# (tests/fixtures/spark-<version>/), 4.3 live.
ALL_VERSIONS = frozenset({"3.5", "4.0", "4.1", "4.2", "4.3"})
#: the query is stateless, as its user would tell the audit: a watermark damaged to a value other than 0 in a
#: checkpoint without state/ is otherwise read as a stateful query whose state is gone (verdict unknown)
STATELESS: dict[str, Any] = {"stateful": False}


class SkipCase(Exception):
    """The base checkpoint lacks what this damage needs (message = reason)."""


@dataclass(frozen=True)
class DamageCase:
    name: str
    scenario: str
    apply: Callable[[Path], None]
    description: str = ""
    versions: frozenset[str] = ALL_VERSIONS
    # Rule id the audit must report with severity "error" when Spark restarts anyway (silent hazard).
    expect_rule: str | None = None
    # Versions on which ``expect_rule`` applies (defaults to all versions of the case).
    expect_rule_versions: frozenset[str] | None = None
    # False when wrong sink data after a successful restart is inherent to the scenario, not a hazard the
    # audit must flag (async progress tracking is at-least-once: unpersisted batches are replayed).
    check_correct: bool = True
    # What the user tells the audit that the files cannot (e.g. {"stateful": True} once state/ is gone).
    audit_kwargs: dict[str, Any] = field(default_factory=dict)
    # The restarted query as ``audit --against`` would describe it (a factory: ckptfix is not importable where the
    # recorder runs), for what only the query says (a join's type); None: the audit has the files only.
    query: Callable[[], Any] | None = None
    # Why the same files on S3 get another verdict (a leftover .crc sidecar breaks only Hadoop's checksummed
    # local file system); "" when the verdict on S3 must be the local one.
    s3_differs: str = ""
    # The rule whose finding makes the audit answer "unknown" (its reason) whatever Spark does here: the outcome
    # depends on what the files do not say (seen both ways on real Spark); "" when the verdict must be Spark's.
    unknown: str = ""
    # How many times the harness restarts the damaged copy (one new input file each, tests/spark/harness.py
    # ``restart_times``); the outcome is the last restart's. 2 for damage that only shows on the restart after the
    # first: a run keeps the state versions it writes in memory, and reads the files again only in the next run.
    restarts: int = 1

    def expects_rule(self, version: str) -> str | None:
        if self.expect_rule is None:
            return None
        if self.expect_rule_versions is not None and version not in self.expect_rule_versions:
            return None
        return self.expect_rule


# ------------------------------------------------------------------------------------------- helpers


def crc_of(path: Path) -> Path:
    return path.parent / f".{path.name}.crc"


def log_ids(ckpt: Path, log: str) -> list[int]:
    d = ckpt / log
    if not d.is_dir():
        return []
    return sorted(int(p.name) for p in d.iterdir() if p.is_file() and re.fullmatch(r"0|[1-9][0-9]*", p.name))


def latest(ckpt: Path, log: str) -> int:
    ids = log_ids(ckpt, log)
    if not ids:
        raise SkipCase(f"{log}/ is empty in the base checkpoint")
    return ids[-1]


def remove(path: Path, with_crc: bool = True) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink()
    if with_crc and crc_of(path).exists():
        crc_of(path).unlink()


def rewrite(path: Path, data: str | bytes, drop_crc: bool = False) -> None:
    """Overwrite ``path`` in place (the Hadoop .crc sidecar stays, now stale, unless ``drop_crc``)."""
    if isinstance(data, str):
        data = data.encode()
    path.write_bytes(data)
    if drop_crc and crc_of(path).exists():
        crc_of(path).unlink()


def latest_file(ckpt: Path, log: str) -> Path:
    return ckpt / log / str(latest(ckpt, log))


def _offset_lines(path: Path) -> list[str]:
    return path.read_text().split("\n")


def state_partitions(ckpt: Path, op: int = 0) -> list[Path]:
    d = ckpt / "state" / str(op)
    if not d.is_dir():
        raise SkipCase("the base checkpoint has no state/ directory")
    return sorted((p for p in d.iterdir() if p.is_dir() and p.name.isdigit()), key=lambda p: int(p.name))


def versions_with(part: Path, ext: str) -> list[int]:
    out = []
    for p in part.iterdir():
        m = re.fullmatch(rf"([0-9]+)\.{ext}", p.name)
        if m and p.is_file():
            out.append(int(m.group(1)))
    return sorted(out)


# ------------------------------------------------------------------------------ offset / commit logs


def _noop(ckpt: Path) -> None:
    return None


def _async_require_gap(ckpt: Path) -> None:
    ids = log_ids(ckpt, "offsets")
    if not ids or ids[-1] == 0 or ids[-1] - 1 in ids:
        raise SkipCase(f"async base is not sparse at the top: offsets {ids}")


def _async_uncommitted(ckpt: Path) -> None:
    _async_require_gap(ckpt)
    last = latest(ckpt, "offsets")
    if last not in log_ids(ckpt, "commits"):
        raise SkipCase("async base has no commit for its latest offset")
    remove(ckpt / "commits" / str(last))


def _commit_beyond_offsets(ckpt: Path) -> None:
    last = latest(ckpt, "offsets")
    shutil.copyfile(ckpt / "commits" / str(last), ckpt / "commits" / str(last + 1))


def _latest_offset_deleted(ckpt: Path) -> None:
    last = latest(ckpt, "offsets")
    if last not in log_ids(ckpt, "commits"):
        raise SkipCase("latest offset has no commit")
    remove(ckpt / "offsets" / str(last))


#: the S3 copy of the tests is an upload of the files: an empty directory does not come along (s3a's directory
#: marker object would, and Spark's exists() check would refuse the write there the same way)
EMPTY_DIR_ON_S3 = "the upload carries files only: the empty directory is not on S3"


def _as_directory(log: str, beyond: bool = False) -> Callable[[Path], None]:
    """``log``/L replaced by an empty directory of the same name (its sidecar gone); ``beyond``: an empty
    directory ``log``/L+1 added next to the files (a mistaken mkdir, a half-done copy)."""

    def apply(ckpt: Path) -> None:
        last = latest(ckpt, log)
        if beyond:
            (ckpt / log / str(last + 1)).mkdir()
            return
        remove(ckpt / log / str(last))
        (ckpt / log / str(last)).mkdir()

    return apply


def _truncate(log: str, content: str) -> Callable[[Path], None]:
    def apply(ckpt: Path) -> None:
        rewrite(latest_file(ckpt, log), content)

    return apply


def _offset_metadata_truncated(ckpt: Path) -> None:
    path = latest_file(ckpt, "offsets")
    lines = _offset_lines(path)
    meta = lines[1]
    rewrite(path, lines[0] + "\n" + meta[: len(meta) // 2])


def _offset_metadata_empty(ckpt: Path) -> None:
    path = latest_file(ckpt, "offsets")
    lines = _offset_lines(path)
    lines[1] = ""
    rewrite(path, "\n".join(lines))


def _replace_latest(log: str, old: str, new: str) -> Callable[[Path], None]:
    def apply(ckpt: Path) -> None:
        path = latest_file(ckpt, log)
        text = path.read_text()
        if old not in text:
            raise SkipCase(f"{log}/L has no {old!r}")
        rewrite(path, text.replace(old, new, 1))

    return apply


def _drop_latest_conf(key: str) -> Callable[[Path], None]:
    """Remove ``key`` from offsets/L's conf map (an edit; the .crc is dropped); the older files keep it."""

    def apply(ckpt: Path) -> None:
        path = latest_file(ckpt, "offsets")
        lines = _offset_lines(path)
        meta = json.loads(lines[1])
        if key not in meta.get("conf", {}):
            raise SkipCase(f"offsets/L does not record {key}")
        del meta["conf"][key]
        lines[1] = json.dumps(meta, separators=(",", ":"))
        rewrite(path, "\n".join(lines), drop_crc=True)

    return apply


def _set_latest_conf(key: str, value: str) -> Callable[[Path], None]:
    """Set ``key`` in offsets/L's conf map to ``value`` (an edit; the .crc is dropped); the older files keep theirs."""

    def apply(ckpt: Path) -> None:
        path = latest_file(ckpt, "offsets")
        lines = _offset_lines(path)
        meta = json.loads(lines[1])
        if meta.get("conf", {}).get(key) in (None, value):
            raise SkipCase(f"offsets/L does not record {key}, or records {value} already")
        meta["conf"][key] = value
        lines[1] = json.dumps(meta, separators=(",", ":"))
        rewrite(path, "\n".join(lines), drop_crc=True)

    return apply


def _operator_deleted(which: str) -> Callable[[Path], None]:
    """Delete the state directory of the query's first (lowest id) or last stateful operator."""

    def apply(ckpt: Path) -> None:
        ops = sorted((p for p in (ckpt / "state").iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
        if len(ops) < 2:
            raise SkipCase("fewer than two stateful operators")
        shutil.rmtree(ops[0] if which == "first" else ops[-1])

    return apply


def _dedup_agg_query() -> Any:
    """The ``dedup_agg`` scenario's query as ``audit --against`` describes it: one file source, the aggregation
    (operator 0) over dropDuplicates (operator 1; Spark numbers the plan's stateful operators top down),
    foreachBatch."""
    from ckptfix.audit.queryshape import OperatorShape, QueryShape, SinkShape, SourceShape

    ops = (
        OperatorShape(0, "stateStoreSave", "StateStoreSaveExec"),
        OperatorShape(1, "dedupe", "StreamingDeduplicateExec"),
    )
    sink = SinkShape("foreachBatch", output_mode="update")
    return QueryShape("tests.spark.queries:_build_dedup_agg", "", (SourceShape("file"),), sink, ops)


def _opmeta_v2_truncated(ckpt: Path) -> None:
    """transformWithState (4.x): the newest operator metadata v2 file (``state/0/_metadata/v2/<batch>``) cut to half
    its bytes, its .crc dropped."""
    files = sorted((int(p.name), p) for p in (ckpt / "state" / "0" / "_metadata" / "v2").glob("*") if p.name.isdigit())
    if not files:
        raise SkipCase("no operator metadata v2")
    path = files[-1][1]
    data = path.read_bytes()
    rewrite(path, data[: len(data) // 2], drop_crc=True)


def _left_outer_join_query() -> Any:
    """The ``join_left`` scenario's query as ``audit --against`` describes it: two file sources, one left outer
    stream-stream join (operator 0), foreachBatch."""
    from ckptfix.audit.queryshape import OperatorShape, QueryShape, SinkShape, SourceShape

    join = OperatorShape(0, "symmetricHashJoin", "StreamingSymmetricHashJoinExec", detail="LeftOuter join")
    sink = SinkShape("foreachBatch", output_mode="append")
    return QueryShape("tests.spark.queries:_build_join_left", "", (SourceShape("file"),) * 2, sink, (join,))


def _opmeta_name_edited(ckpt: Path) -> None:
    """state/0/_metadata/metadata (4.x) names another operator: stateStoreSave -> dedupe (.crc dropped)."""
    path = ckpt / "state" / "0" / "_metadata" / "metadata"
    if not path.exists():
        raise SkipCase("no operator metadata (Spark 3.5 writes none)")
    text = path.read_text()
    if '"stateStoreSave"' not in text:
        raise SkipCase("operator 0 is not an aggregation")
    rewrite(path, text.replace('"stateStoreSave"', '"dedupe"'), drop_crc=True)


def _metadata_deleted_crc_left(rel: str) -> Callable[[Path], None]:
    """A state metadata file deleted by hand, its hidden Hadoop .crc left behind."""

    def apply(ckpt: Path) -> None:
        path = ckpt / rel
        if not path.exists() or not crc_of(path).exists():
            raise SkipCase(f"no {rel} with a .crc sidecar")
        path.unlink()

    return apply


def _v2_newest_zip(damage: str) -> Callable[[Path], None]:
    """Checkpoint format v2: partition 0's newest zip (``<v>_<uid>.zip``) deleted, or one byte flipped in its middle
    with its Hadoop and visible .crc sidecars dropped (as on an object store). ``emptied`` / ``truncated``: the zip
    cut to nothing / to half its size with both sidecars kept (the Hadoop ``.<name>.crc`` and, 4.1+, Spark's file
    checksum ``<name>.crc``; damage hunt 8, H6). The changelogs stay."""

    def apply(ckpt: Path) -> None:
        part = state_partitions(ckpt)[0]
        zips = sorted(
            (int(m.group(1)), p) for p in part.iterdir() if (m := re.fullmatch(r"([0-9]+)_[0-9a-f-]+\.zip", p.name))
        )
        if len(zips) < 2:
            raise SkipCase("fewer than two v2 zips in partition 0")
        path = zips[-1][1]
        if damage == "deleted":
            remove(path)
            (path.parent / f"{path.name}.crc").unlink(missing_ok=True)
            return
        data = bytearray(path.read_bytes())
        if damage in ("emptied", "truncated"):
            rewrite(path, bytes(data[: len(data) // 2] if damage == "truncated" else b""))
            return
        data[len(data) // 2] ^= 0xFF
        rewrite(path, bytes(data), drop_crc=True)
        (path.parent / f"{path.name}.crc").unlink(missing_ok=True)

    return apply


def _v2_newest_zip_header_flipped(ckpt: Path) -> None:
    """Checkpoint format v2: partition 0's newest zip rewritten with its metadata's ``v<N>`` header flipped (v2 ->
    v1 as Spark 4.0 writes it, v1 -> v2 as 4.1+ do), every other member as it was; its Hadoop .crc and file checksum
    dropped (as on an object store). What a tool that rebuilt the zip with the wrong header leaves (hunt 13)."""
    part = state_partitions(ckpt)[0]
    zips = sorted(
        (int(m.group(1)), p) for p in part.iterdir() if (m := re.fullmatch(r"([0-9]+)_[0-9a-f-]+\.zip", p.name))
    )
    if not zips:
        raise SkipCase("no v2 zip in partition 0")
    path = zips[-1][1]
    with zipfile.ZipFile(path) as zf:
        members = [(info, zf.read(info)) for info in zf.infolist()]
    out = []
    for info, data in members:
        if info.filename == "metadata":
            head, _, rest = data.partition(b"\n")
            data = (b"v1" if head == b"v2" else b"v2") + b"\n" + rest
        out.append((info, data))
    path.unlink()
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for info, data in out:
            zf.writestr(info, data)
    rewrite(path, path.read_bytes(), drop_crc=True)
    (path.parent / f"{path.name}.crc").unlink(missing_ok=True)


def _v2_newest_changelog(damage: str) -> Callable[[Path], None]:
    """Checkpoint format v2: partition 0's newest changelog (``<v>_<uid>.changelog``, the one the commit log names
    last) damaged: one byte flipped in its middle (``flipped``: its Hadoop .crc dropped, and its 4.2+ file
    checksum ``<name>.crc`` too; ``flipped_checksum_kept``: that checksum kept), or cut to half its size
    (``truncated``, both sidecars dropped; ``truncated_checksum_kept``: the file checksum kept)."""

    def apply(ckpt: Path) -> None:
        part = state_partitions(ckpt)[0]
        logs = sorted(
            (int(m.group(1)), p)
            for p in part.iterdir()
            if (m := re.fullmatch(r"([0-9]+)_[0-9a-f-]+\.changelog", p.name))
        )
        if not logs:
            raise SkipCase("no v2 changelog in partition 0")
        newest = max(v for v, _ in logs)
        paths = [p for v, p in logs if v == newest]
        if len(paths) != 1:  # two attempts wrote this version: which one the lineage names is not ours to guess
            uid = json.loads((ckpt / "commits" / str(newest - 1)).read_text().split("\n")[1])
            ids = uid.get("stateUniqueIds", {}).get("0", [[]])[0]
            paths = [p for p in paths if any(i in p.name for i in ids)]
        if len(paths) != 1:
            raise SkipCase("cannot tell which changelog of the newest version the commit log names")
        path = paths[0]
        data = path.read_bytes()
        if damage == "checksum_emptied":  # the changelog intact, its file checksum emptied (damage hunt 8, H4)
            checksum = path.parent / f"{path.name}.crc"
            if not checksum.exists():
                raise SkipCase("this Spark writes no file checksum")
            rewrite(checksum, b"", drop_crc=True)
            return
        if damage.startswith("truncated"):
            rewrite(path, data[: len(data) // 2], drop_crc=True)
        else:
            flipped = bytearray(data)
            flipped[len(flipped) // 2] ^= 0xFF
            rewrite(path, bytes(flipped), drop_crc=True)
        if not damage.endswith("_checksum_kept"):
            (path.parent / f"{path.name}.crc").unlink(missing_ok=True)
        elif not (path.parent / f"{path.name}.crc").exists():
            raise SkipCase("this Spark writes no file checksum")

    return apply


def _relabel(log: str, header: str) -> Callable[[Path], None]:
    def apply(ckpt: Path) -> None:
        path = latest_file(ckpt, log)
        lines = _offset_lines(path)
        lines[0] = header
        rewrite(path, "\n".join(lines))

    return apply


def _offset_edited_stale_crc(ckpt: Path) -> None:
    path = latest_file(ckpt, "offsets")
    text = path.read_text()
    m = re.search(r'"logOffset":([0-9]+)', text)
    if not m or int(m.group(1)) == 0:
        raise SkipCase("latest offset has no logOffset > 0")
    if not crc_of(path).exists():
        raise SkipCase("latest offset file has no .crc sidecar")
    n = int(m.group(1))
    rewrite(path, text.replace(f'"logOffset":{n}', f'"logOffset":{n - 1}'))


def _middle_gap(ckpt: Path) -> None:
    if latest(ckpt, "offsets") < 4:
        raise SkipCase("too few batches for a middle gap")
    remove(ckpt / "offsets" / "2")


def _snapshot_overwritten_by_older(ckpt: Path) -> None:
    """Partition 0's newest HDFS snapshot (and .crc) overwritten with its oldest one: a restore that took the wrong
    file (repair hunt 10, M04/M05)."""
    part = state_partitions(ckpt)[0]
    snaps = sorted(int(p.name.split(".")[0]) for p in part.glob("*.snapshot"))
    if len(snaps) < 2:
        raise SkipCase("fewer than two snapshots in state/0/0")
    old, new = part / f"{snaps[0]}.snapshot", part / f"{snaps[-1]}.snapshot"
    shutil.copyfile(old, new)
    if crc_of(old).exists():
        shutil.copyfile(crc_of(old), crc_of(new))


def _snapshot_copied_as_newest_version(ckpt: Path) -> None:
    """Partition 0's newest HDFS snapshot copied (with its sidecars) as the snapshot of the newest version, which had
    only a delta: a restore script that took the wrong file (repair hunt 10, M04/M05, where the restart then loaded
    the older state and dropped the updates in between)."""
    part = state_partitions(ckpt)[0]
    snaps = sorted(int(p.name.split(".")[0]) for p in part.glob("*.snapshot"))
    deltas = sorted(int(p.name.split(".")[0]) for p in part.glob("*.delta"))
    if not snaps or not deltas or deltas[-1] <= snaps[-1]:
        raise SkipCase("state/0/0's newest version has a snapshot already, or there is none")
    old, new = snaps[-1], deltas[-1]
    for name in ("{}.snapshot", ".{}.snapshot.crc", "{}.snapshot.crc", ".{}.snapshot.crc.crc"):
        if (part / name.format(old)).exists():
            shutil.copyfile(part / name.format(old), part / name.format(new))


def _two_batches_before_latest_deleted(ckpt: Path) -> None:
    """offsets and commits of batches L-2 and L-1 deleted by hand (with their .crc), batch L committed (repair hunt
    10, A11: a stateful query's logs cleaned by hand)."""
    last = latest(ckpt, "offsets")
    if last < 3 or last not in log_ids(ckpt, "commits"):
        raise SkipCase("fewer than 4 batches, or the latest is not committed")
    for b in (last - 2, last - 1):
        remove(ckpt / "offsets" / str(b))
        remove(ckpt / "commits" / str(b))


def _leftovers(ckpt: Path) -> None:
    last = latest(ckpt, "offsets")
    src = (ckpt / "offsets" / str(last)).read_bytes()
    (ckpt / "offsets" / f".{last + 1}.3f1c7a52-8d0e-4b7a-9a55-0c2f4de1b6aa.tmp").write_bytes(src)
    (ckpt / "offsets" / f"{last + 1}.tmp").write_bytes(src)
    (ckpt / "offsets" / "garbage.txt").write_text("not a batch\n")
    (ckpt / "commits" / f".{last + 1}.0b7d1e9c-2f4a-4c1e-8e3b-5a6d7c8e9f00.tmp").write_text("v1\n")
    (ckpt / "commits" / "README").write_text("junk\n")


def _noncanonical_name(ckpt: Path) -> None:
    last = latest(ckpt, "offsets")
    old = ckpt / "offsets" / str(last)
    new = ckpt / "offsets" / f"{last:04d}"
    old.rename(new)
    if crc_of(old).exists():
        crc_of(old).rename(crc_of(new))


def _source_log_latest_missing(ckpt: Path) -> None:
    d = ckpt / "sources" / "0"
    if not d.is_dir():
        raise SkipCase("no sources/0 log")
    ids = []
    for p in d.iterdir():
        m = re.fullmatch(r"([0-9]+)(\.compact)?", p.name)
        if m:
            ids.append((int(m.group(1)), p))
    if not ids:
        raise SkipCase("sources/0 is empty")
    remove(max(ids)[1])


def _commit_latest_missing(ckpt: Path) -> None:
    last = latest(ckpt, "offsets")
    if last not in log_ids(ckpt, "commits"):
        raise SkipCase("latest offset has no commit")
    remove(ckpt / "commits" / str(last))


def _commit_latest_deleted_crc_left(ckpt: Path) -> None:
    last = latest(ckpt, "offsets")
    if last not in log_ids(ckpt, "commits") or not crc_of(ckpt / "commits" / str(last)).exists():
        raise SkipCase("latest offset has no commit with a .crc sidecar")
    remove(ckpt / "commits" / str(last), with_crc=False)


def _latest_batch_deleted_crcs_left(ckpt: Path) -> None:
    last = latest(ckpt, "offsets")
    if last not in log_ids(ckpt, "commits") or not crc_of(ckpt / "offsets" / str(last)).exists():
        raise SkipCase("latest offset has no commit, or no .crc sidecar")
    remove(ckpt / "offsets" / str(last), with_crc=False)
    remove(ckpt / "commits" / str(last), with_crc=False)


def _source_log_latest_deleted_crc_left(ckpt: Path) -> None:
    d = ckpt / "sources" / "0"
    ids = sorted(int(p.name) for p in d.iterdir() if p.name.isdigit()) if d.is_dir() else []
    if not ids or not crc_of(d / str(ids[-1])).exists():
        raise SkipCase("no sources/0 entry with a .crc sidecar")
    remove(d / str(ids[-1]), with_crc=False)


def _source_log_old_entry(content: bytes) -> Callable[[Path], None]:
    """An entry the latest batch does not read, but that the file source restores its seen files from at start
    (every entry from the latest compaction on): rewritten with ``content`` (its .crc dropped, as a copy without
    sidecars would have it)."""

    def apply(ckpt: Path) -> None:
        d = ckpt / "sources" / "0"
        ids = sorted(int(p.name) for p in d.iterdir() if p.name.isdigit()) if d.is_dir() else []
        if len(ids) < 3:
            raise SkipCase("fewer than 3 sources/0 entries")
        target = d / str(ids[-3])
        data = target.read_bytes()
        rewrite(target, content if content else data[: len(data) // 2], drop_crc=True)

    return apply


def _commit_latest_garbage_appended(ckpt: Path) -> None:
    """Bytes after the JSON of the latest commit, on its line (a torn append, a bad copy): Jackson reads one value
    and ignores the rest, so Spark restarts (damage hunt of 2026-11-26)."""
    path = latest_file(ckpt, "commits")
    rewrite(path, path.read_bytes().rstrip(b"\n") + b"garbage\x00\x01junk", drop_crc=True)


def _offset_void_source(ckpt: Path) -> None:
    path = latest_file(ckpt, "offsets")
    lines = _offset_lines(path)
    if len(lines) < 3:
        raise SkipCase("latest offset file has no source line")
    lines[2] = "-"
    rewrite(path, "\n".join(lines))


def _offset_source_moved_back(ckpt: Path) -> None:
    """The file source's logOffset in offsets/L set one below offsets/L-1's (an edit; .crc dropped)."""
    L = latest(ckpt, "offsets")
    if L < 1:
        raise SkipCase("no offset file before the latest")
    prev = json.loads(_offset_lines(ckpt / "offsets" / str(L - 1))[2])["logOffset"]
    if prev < 1:
        raise SkipCase("the previous batch's logOffset is 0")
    path = ckpt / "offsets" / str(L)
    lines = _offset_lines(path)
    lines[2] = json.dumps({"logOffset": prev - 1}, separators=(",", ":"))
    rewrite(path, "\n".join(lines), drop_crc=True)


def _source_log_entries(ckpt: Path) -> dict[int, Path]:
    d = ckpt / "sources" / "0"
    out: dict[int, Path] = {}
    for p in d.iterdir() if d.is_dir() else []:
        m = re.fullmatch(r"([0-9]+)(\.compact)?", p.name)
        if m:
            out[int(m.group(1))] = p
    return out


def _source_log_newest_compact_deleted(ckpt: Path) -> None:
    """sources/0's newest ``N.compact`` deleted, the entries after it kept: the source restores its seen files from
    that compaction on at start."""
    entries = _source_log_entries(ckpt)
    compacts = [b for b, p in entries.items() if p.name.endswith(".compact")]
    if not compacts or max(compacts) == max(entries):
        raise SkipCase("no sources/0 compaction with entries after it")
    remove(entries[max(compacts)])


def _source_log_cut_below_noop_batch(ckpt: Path) -> None:
    """offsets/L records the file source at offsets/L-1's logOffset (batch L read no file, as a watermark's no-data
    batch does; an edit, .crc dropped), and sources/0's newest compaction and every entry after it deleted: the log
    now ends two entries below the recorded offset (damage hunt of 2026-11-27, F07)."""
    L = latest(ckpt, "offsets")
    entries = _source_log_entries(ckpt)
    compacts = [b for b, p in entries.items() if p.name.endswith(".compact")]
    if L < 1 or not compacts:
        raise SkipCase("no offset file before the latest, or no sources/0 compaction")
    prev = json.loads(_offset_lines(ckpt / "offsets" / str(L - 1))[2])["logOffset"]
    cut = max(compacts)
    if prev - cut < 1:
        raise SkipCase("the newest compaction is not below the previous batch's logOffset")
    path = ckpt / "offsets" / str(L)
    lines = _offset_lines(path)
    lines[2] = json.dumps({"logOffset": prev}, separators=(",", ":"))
    rewrite(path, "\n".join(lines), drop_crc=True)
    for b, p in entries.items():
        if b >= cut:
            remove(p)


def _source_log_entry_missing_after_noop_batch(ckpt: Path) -> None:
    """offsets/L records the file source at offsets/L-1's logOffset P (batch L read no file, as a watermark's no-data
    batch does; an edit, .crc dropped), and sources/0's entries from P on deleted: the log ends one entry below the
    recorded offset (repair hunt 10, W14: the latest entry of a windowed query's log deleted after its trailing
    no-data batches; Spark restarted and lost the new file's rows)."""
    L = latest(ckpt, "offsets")
    entries = _source_log_entries(ckpt)
    if L < 1 or not entries:
        raise SkipCase("no offset file before the latest, or no sources/0 entries")
    prev = json.loads(_offset_lines(ckpt / "offsets" / str(L - 1))[2])["logOffset"]
    if prev < 1 or any(p.name.endswith(".compact") for b, p in entries.items() if b >= prev):
        raise SkipCase("no entry below the previous batch's logOffset, or a compaction from it on")
    path = ckpt / "offsets" / str(L)
    lines = _offset_lines(path)
    lines[2] = json.dumps({"logOffset": prev}, separators=(",", ":"))
    rewrite(path, "\n".join(lines), drop_crc=True)
    for b, p in entries.items():
        if b >= prev:
            remove(p)


def _offset_source_as_string(ckpt: Path) -> None:
    """The file source's offset in offsets/L with its number written as a JSON string, ``{"logOffset":"N"}``
    (an edit; .crc dropped)."""
    path = latest_file(ckpt, "offsets")
    lines = _offset_lines(path)
    n = json.loads(lines[2])["logOffset"]
    lines[2] = json.dumps({"logOffset": str(n)}, separators=(",", ":"))
    rewrite(path, "\n".join(lines), drop_crc=True)


def _byte_not_utf8(log: str, marker: bytes) -> Callable[[Path], None]:
    """The first byte of ``marker`` in the log's latest entry replaced by 0xFF (not UTF-8; the JSON stays
    well-formed around it, as a flipped bit in a string would leave it); .crc dropped."""

    def apply(ckpt: Path) -> None:
        path = latest_file(ckpt, log)
        data = path.read_bytes()
        at = data.find(marker)
        if at < 0:
            raise SkipCase(f"no {marker!r} in {path.name}")
        rewrite(path, data[:at] + b"\xff" + data[at + 1 :], drop_crc=True)

    return apply


def _offset_source_moved_forward(ckpt: Path) -> None:
    """The file source's logOffset in offsets/L set one past the source log's newest entry (an edit; .crc
    dropped): batch L's entries run beyond the log."""
    path = latest_file(ckpt, "offsets")
    lines = _offset_lines(path)
    ahead = max(log_ids(ckpt, "sources/0"), default=-1) + 1
    lines[2] = json.dumps({"logOffset": ahead}, separators=(",", ":"))
    rewrite(path, "\n".join(lines), drop_crc=True)


def _offsets_all_deleted(ckpt: Path) -> None:
    for i in log_ids(ckpt, "offsets"):
        remove(ckpt / "offsets" / str(i))


def _async_repaired(ckpt: Path) -> None:
    """The documented-equivalent file repair of an async checkpoint: copy offsets/P to offsets/L-1."""
    _async_require_gap(ckpt)
    ids = log_ids(ckpt, "offsets")
    last, prev = ids[-1], ids[-2] if len(ids) > 1 else None
    if prev is None:
        raise SkipCase("async base has a single offset file")
    src = last if last in log_ids(ckpt, "commits") else prev
    shutil.copyfile(ckpt / "offsets" / str(src), ckpt / "offsets" / str(last - 1))


# ----------------------------------------------------------------------------------- metadata file


def _metadata(content: str | None) -> Callable[[Path], None]:
    def apply(ckpt: Path) -> None:
        path = ckpt / "metadata"
        if content is None:
            remove(path)
        else:
            rewrite(path, content)

    return apply


def _metadata_truncated(ckpt: Path) -> None:
    path = ckpt / "metadata"
    text = path.read_text()
    rewrite(path, text[: len(text) // 2])


# ---------------------------------------------------------------------------------------- state


def _latest_state_version(part: Path) -> int:
    vs = versions_with(part, "delta") + versions_with(part, "changelog") + versions_with(part, "zip")
    if not vs:
        raise SkipCase(f"no state files in {part}")
    return max(vs)


def _state_delta_missing(ckpt: Path) -> None:
    """Delete the newest delta of a partition whose newest version has no snapshot (so the delta is needed)."""
    for part in state_partitions(ckpt):
        v = _latest_state_version(part)
        if v not in versions_with(part, "snapshot") and (part / f"{v}.delta").exists():
            remove(part / f"{v}.delta")
            return
    raise SkipCase("every partition has a snapshot of its newest version (no delta is needed)")


def _state_delta_missing_covered(ckpt: Path) -> None:
    """Delete a delta that the newest snapshot of its partition covers (harmless)."""
    for part in state_partitions(ckpt):
        snaps = versions_with(part, "snapshot")
        if snaps and (part / f"{snaps[-1]}.delta").exists():
            remove(part / f"{snaps[-1]}.delta")
            return
    raise SkipCase("no partition has a snapshot with a delta below it")


def _state_partition_missing(ckpt: Path) -> None:
    parts = state_partitions(ckpt)
    if len(parts) < 2:
        raise SkipCase("fewer than 2 state partitions")
    shutil.rmtree(parts[1])


def _state_partitions_swapped(ckpt: Path) -> None:
    """state/0/0 and state/0/1 swapped (a copy script with its targets crossed; damage hunt 8)."""
    parts = state_partitions(ckpt)
    if len(parts) < 2:
        raise SkipCase("fewer than 2 state partitions")
    a, b = parts[0], parts[1]
    tmp = a.with_name(a.name + ".swap")
    a.rename(tmp)
    b.rename(a)
    tmp.rename(b)


def _state_base_snapshots_swapped(ckpt: Path) -> None:
    """Only the newest snapshot of partitions 0 and 1 swapped (their deltas stay in place; repair hunt 10, M03)."""
    parts = state_partitions(ckpt)
    if len(parts) < 2:
        raise SkipCase("fewer than 2 state partitions")
    a, b = parts[0], parts[1]
    common = set(versions_with(a, "snapshot")) & set(versions_with(b, "snapshot"))
    if not common:
        raise SkipCase("partitions 0 and 1 have no snapshot of one version")
    v = max(common)
    for name in (f"{v}.snapshot", f".{v}.snapshot.crc", f"{v}.snapshot.crc", f".{v}.snapshot.crc.crc"):
        if (a / name).exists() and (b / name).exists():
            (a / name).rename(a / (name + ".swap"))
            (b / name).rename(a / name)
            (a / (name + ".swap")).rename(b / name)


def _state_schema_missing(ckpt: Path) -> None:
    path = ckpt / "state" / "0" / "0" / "_metadata" / "schema"
    if not path.exists():
        raise SkipCase("no state/0/0/_metadata/schema")
    remove(path)


def _schema_from_operator(src_op: int, dst_op: int) -> Callable[[Path], None]:
    def apply(ckpt: Path) -> None:
        """Operator ``dst_op``'s partition-0 schema file overwritten by operator ``src_op``'s: a restore that took
        the wrong file (damage hunt 8, H1). Hadoop's .crc sidecar goes with the copy."""
        src = ckpt / "state" / str(src_op) / "0" / "_metadata" / "schema"
        dst = ckpt / "state" / str(dst_op) / "0" / "_metadata" / "schema"
        if not (src.exists() and dst.exists()):
            raise SkipCase(f"no schema files of operators {src_op} and {dst_op}")
        shutil.copyfile(src, dst)
        if crc_of(src).exists():
            shutil.copyfile(crc_of(src), crc_of(dst))

    return apply


def _state_junk_file(ckpt: Path) -> None:
    part = state_partitions(ckpt)[0]
    (part / "temp-1234567.tmp").write_bytes(b"junk")
    (part / f".{_latest_state_version(part) + 1}.delta.5d1f0c3e-6a7b-4c8d-9e0f-112233445566.tmp").write_bytes(b"")


def _rocksdb_zips_missing(ckpt: Path) -> None:
    found = False
    for part in state_partitions(ckpt):
        for v in versions_with(part, "zip"):
            remove(part / f"{v}.zip")
            found = True
    if not found:
        raise SkipCase("no RocksDB zip files")


def _state_dir_missing(ckpt: Path) -> None:
    if not (ckpt / "state").is_dir():
        raise SkipCase("no state/ directory")
    shutil.rmtree(ckpt / "state")


def _v2_commit_ids_dropped(ckpt: Path) -> None:
    """The latest commit rewritten without its stateUniqueIds (its .crc dropped)."""
    path = latest_file(ckpt, "commits")
    header, body = path.read_text().split("\n", 1)
    entry = json.loads(body.splitlines()[0])
    if "stateUniqueIds" not in entry:
        raise SkipCase("the latest commit names no stateUniqueIds (not checkpoint format v2)")
    del entry["stateUniqueIds"]
    rewrite(path, header + "\n" + json.dumps(entry, separators=(",", ":")), drop_crc=True)


def _v2_commit_relabelled_v1(ckpt: Path) -> None:
    """The latest commit's first line set to ``v1``, its stateUniqueIds kept (its .crc dropped)."""
    path = latest_file(ckpt, "commits")
    header, body = path.read_text().split("\n", 1)
    if header != "v2" or "stateUniqueIds" not in body:
        raise SkipCase("the latest commit is not a v2 commit with stateUniqueIds")
    rewrite(path, "v1\n" + body, drop_crc=True)


def _sources_dir_missing(ckpt: Path) -> None:
    if not (ckpt / "sources").is_dir():
        raise SkipCase("no sources/ directory")
    shutil.rmtree(ckpt / "sources")


LZ4_BLOCK_HEADER = 21  # "LZ4Block" + token + compressedLen + rawLen + checksum


def _state_snapshot_corrupt(ckpt: Path) -> None:
    """Flip bytes inside the first LZ4 block payload of the newest snapshot of every partition that has one
    (deltas up to it stay, so a reader that falls back to older snapshots + deltas can still rebuild)."""
    done = 0
    for part in state_partitions(ckpt):
        snaps = versions_with(part, "snapshot")
        if not snaps:
            continue
        path = part / f"{snaps[-1]}.snapshot"
        data = bytearray(path.read_bytes())
        if len(data) < LZ4_BLOCK_HEADER + 4 or data[:8] != b"LZ4Block":
            continue
        comp_len = int.from_bytes(data[9:13], "little")
        if comp_len == 0:
            continue  # empty store: nothing to corrupt
        start = LZ4_BLOCK_HEADER + comp_len // 3
        for i in range(start, min(start + 8, LZ4_BLOCK_HEADER + comp_len)):
            data[i] ^= 0xFF
        rewrite(path, bytes(data))
        done += 1
    if not done:
        raise SkipCase("the base checkpoint has no non-empty HDFS snapshot")


def _schema_cut_copy_in_partition_1(ckpt: Path) -> None:
    """A copy of partition 0's schema file, cut to half its bytes, as state/0/1/_metadata/schema (Spark writes and
    reads the schema file of partition 0 only)."""
    src, dest = ckpt / "state/0/0/_metadata/schema", ckpt / "state/0/1/_metadata/schema"
    if not src.exists() or dest.exists() or not dest.parent.parent.is_dir():
        raise SkipCase("no state/0/0/_metadata/schema, no partition 1, or partition 1 has a schema file")
    dest.parent.mkdir()
    data = src.read_bytes()
    dest.write_bytes(data[: len(data) // 2])


def _read_delta(ckpt: Path) -> Path:
    """Partition 0's newest delta when the restart reads it (its version has no snapshot), an LZ4Block stream."""
    part = state_partitions(ckpt)[0]
    v = _latest_state_version(part)
    path = part / f"{v}.delta"
    if v in versions_with(part, "snapshot") or not path.exists():
        raise SkipCase(f"{part} has a snapshot of its newest version {v}, or no delta of it")
    if path.read_bytes()[:8] != b"LZ4Block":
        raise SkipCase(f"{path} is not an LZ4Block stream")
    return path


def _lz4_blocks(data: bytes) -> list[tuple[int, int]]:
    """(offset, payload length) of each block of an LZ4Block stream."""
    out, at = [], 0
    while at + LZ4_BLOCK_HEADER <= len(data):
        comp_len = int.from_bytes(data[at + 9 : at + 13], "little")
        out.append((at, comp_len))
        at += LZ4_BLOCK_HEADER + comp_len
    return out


def _delta_cut(where: str, keep_crc: bool = False) -> Callable[[Path], None]:
    """Cut partition 0's newest delta (which the restart reads) inside its LZ4 end block (``end``: the 21-byte block
    with both lengths 0 after the block that holds the -1 end marker), in the middle of its last data block
    (``data``) or to nothing (``zero``); its Hadoop .crc and 4.1+ JSON checksum sidecars dropped."""

    def apply(ckpt: Path) -> None:
        path = _read_delta(ckpt)
        data = path.read_bytes()
        if where == "zero":
            rewrite(path, b"", drop_crc=not keep_crc)
            return
        blocks = _lz4_blocks(data)
        (end_at, end_len), (last_at, last_len) = blocks[-1], blocks[-2] if len(blocks) > 1 else (0, 0)
        if end_len != 0 or last_len == 0 or end_at + LZ4_BLOCK_HEADER != len(data):
            raise SkipCase(f"{path} does not end with a data block and an end block")
        cut = end_at + LZ4_BLOCK_HEADER // 2 if where == "end" else last_at + LZ4_BLOCK_HEADER + last_len // 2
        rewrite(path, data[:cut], drop_crc=not keep_crc)
        if keep_crc:  # the Hadoop .crc of the whole file stays: a local file system verifies it on read
            return
        sidecar = path.with_name(path.name + ".crc")
        if sidecar.exists():
            sidecar.unlink()
            if crc_of(sidecar).exists():
                crc_of(sidecar).unlink()

    return apply


def _schema_damaged(rel: str, damage: str) -> Callable[[Path], None]:
    """Cut a state schema file to half its bytes (``cut``) or append bytes after its schemas (``appended``), its
    .crc dropped."""

    def apply(ckpt: Path) -> None:
        path = ckpt / rel
        if not path.exists():
            raise SkipCase(f"no {rel}")
        data = path.read_bytes()
        rewrite(path, data[: len(data) // 2] if damage == "cut" else data + b"\x00\x07garbage", drop_crc=True)

    return apply


def _schema_text_edited(where: str, old: bytes, new: bytes) -> Callable[[Path], None]:
    """Replace the first ``old`` in a state schema file by ``new`` of the same length (the lengths the file records
    stay right: a flipped byte, or a hand edit of that size), its .crc dropped. ``where``: ``v2`` for
    state/0/0/_metadata/schema, ``v3`` for the newest file under state/0/_stateSchema/default."""

    def apply(ckpt: Path) -> None:
        if where == "v2":
            path = ckpt / "state/0/0/_metadata/schema"
        else:
            files = sorted(
                (ckpt / "state/0/_stateSchema/default").glob("[0-9]*"), key=lambda p: int(p.name.split("_")[0])
            )
            if not files:
                raise SkipCase("no state/0/_stateSchema/default files")
            path = files[-1]
        if not path.exists():
            raise SkipCase(f"no {path.relative_to(ckpt)}")
        data = path.read_bytes()
        if old not in data or len(old) != len(new):
            raise SkipCase(f"{path.relative_to(ckpt)} holds no {old!r}")
        rewrite(path, data.replace(old, new, 1), drop_crc=True)

    return apply


def _rocksdb_changelog_missing(ckpt: Path) -> None:
    """Delete a changelog newer than the newest zip of partition 0's store (deleting the newest zip first when
    it already covers the latest version, so that the changelog is needed)."""
    for part in state_partitions(ckpt):
        changelogs = versions_with(part, "changelog")
        if not changelogs:
            continue
        zips = versions_with(part, "zip")
        v = changelogs[-1]
        if zips and zips[-1] >= v:
            remove(part / f"{zips[-1]}.zip")
        remove(part / f"{v}.changelog")
        return
    raise SkipCase("no RocksDB changelog files")


def _v1_file_renamed_v2(kind: str) -> Callable[[Path], None]:
    """Checkpoint format v1 (RocksDB with changelog checkpointing): partition 0's newest ``<v>.<kind>`` renamed to
    the v2 name ``<v>_<uuid>.<kind>`` (its .crc dropped), as a copy from a format-v2 checkpoint names it (damage
    hunt 8, H5: the audit took the checkpoint for v2 and blamed the commit log)."""

    def apply(ckpt: Path) -> None:
        part = state_partitions(ckpt)[0]
        have = versions_with(part, kind)
        if not have:
            raise SkipCase(f"no {kind} in partition 0")
        path = part / f"{have[-1]}.{kind}"
        crc_of(path).unlink(missing_ok=True)
        path.rename(part / f"{have[-1]}_1b4c7d0e-9a55-4f3e-8e21-6d2f0c9b7a13.{kind}")

    return apply


def _zip_ssts(zip_path: Path) -> list[str]:
    with zipfile.ZipFile(zip_path) as zf:
        text = zf.read("metadata").decode()
    meta = json.loads(text.split("\n", 1)[1])
    return [f["dfsSstFileName"] for f in meta.get("sstFiles", [])]


def _newest_zip_sst(ckpt: Path) -> Path:
    """The first SST that partition 0's newest zip lists (the zip the restart loads)."""
    part = state_partitions(ckpt)[0]
    zips = versions_with(part, "zip")
    if not zips:
        raise SkipCase("no RocksDB zip")
    ssts = _zip_ssts(part / f"{zips[-1]}.zip")
    if not ssts:
        raise SkipCase("the newest zip lists no SST")
    return part / "SSTs" / ssts[0]


def _rocksdb_sst_flipped(ckpt: Path) -> None:
    """One flipped byte, size unchanged, in an SST that the zip the restart loads lists (partition 0); the SST's
    Hadoop .crc sidecar stays as Spark wrote it."""
    path = _newest_zip_sst(ckpt)
    data = bytearray(path.read_bytes())
    data[len(data) // 3] ^= 0xFF
    rewrite(path, bytes(data))


def sst_footer_handles(data: bytes) -> list[tuple[int, int]]:
    """The metaindex and index block handles (offset, size) of a block-based table's 53-byte footer (format
    versions 1-5: a checksum type byte, then four varint64s), read here by hand, not by ckptfix."""
    pos, values = len(data) - 53 + 1, []
    for _ in range(4):
        value = shift = 0
        while True:
            byte = data[pos]
            pos += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                break
        values.append(value)
    return [(values[0], values[1]), (values[2], values[3])]


def _rocksdb_sst_block_flipped(block: str) -> Callable[[Path], None]:
    """One flipped byte, size unchanged, in a meta block (index, filter, properties, metaindex: read when RocksDB
    opens the table) or in the first data block (read only when a lookup reaches it) of an SST that partition 0's
    newest zip lists; its Hadoop .crc dropped (as on an object store), so only RocksDB's block checksums can tell."""

    def apply(ckpt: Path) -> None:
        path = _newest_zip_sst(ckpt)
        data = bytearray(path.read_bytes())
        (meta_offset, meta_size), (index_offset, index_size) = sst_footer_handles(bytes(data))
        # RocksDB writes data blocks, the filter (Spark turns the bloom filter on), the index, the properties and
        # the metaindex, in this order: 10 bytes before a block are in the one written before it
        at = {
            "index": index_offset + index_size // 2,
            "filter": index_offset - 10,
            "properties": meta_offset - 10,
            "metaindex": meta_offset + meta_size // 2,
        }.get(block, min(16, index_offset // 2))
        data[at] ^= 0xFF
        rewrite(path, bytes(data), drop_crc=True)

    return apply


def _rocksdb_zip_flipped(ckpt: Path) -> None:
    """One flipped byte, size unchanged, in the middle of partition 0's newest zip (its Hadoop .crc kept)."""
    part = state_partitions(ckpt)[0]
    zips = versions_with(part, "zip")
    if not zips:
        raise SkipCase("no RocksDB zip")
    path = part / f"{zips[-1]}.zip"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    rewrite(path, bytes(data))


def _rocksdb_zip_truncated(ckpt: Path) -> None:
    """Partition 0's newest zip cut to half (a partial upload), its Hadoop .crc dropped."""
    part = state_partitions(ckpt)[0]
    zips = versions_with(part, "zip")
    if not zips:
        raise SkipCase("no RocksDB zip")
    path = part / f"{zips[-1]}.zip"
    rewrite(path, path.read_bytes()[: path.stat().st_size // 2], drop_crc=True)


def _rocksdb_zip_missing(ckpt: Path) -> None:
    """Partition 0's newest zip deleted (with its .crc)."""
    part = state_partitions(ckpt)[0]
    zips = versions_with(part, "zip")
    if not zips:
        raise SkipCase("no RocksDB zip")
    remove(part / f"{zips[-1]}.zip")


def _rocksdb_sst_grown(ckpt: Path) -> None:
    """100 bytes appended to an SST that partition 0's newest zip lists (its .crc dropped): the size no longer
    matches the zip's metadata."""
    path = _newest_zip_sst(ckpt)
    rewrite(path, path.read_bytes() + b"\0" * 100, drop_crc=True)


def _rocksdb_sst_missing(ckpt: Path) -> None:
    """Delete the SST files that the newest zip of a partition lists."""
    for part in state_partitions(ckpt):
        zips = versions_with(part, "zip")
        if not zips:
            continue
        ssts = _zip_ssts(part / f"{zips[-1]}.zip")
        present = [part / "SSTs" / s for s in ssts if (part / "SSTs" / s).exists()]
        if present:
            for p in present:
                remove(p)
            return
    raise SkipCase("no RocksDB zip lists an SST file that exists")


# ------------------------------------------------------------------ state ahead of the logs (hand rollback)


def _hand_rollback(ckpt: Path, first: int) -> None:
    """``rm offsets/<b> commits/<b>`` for every batch b >= ``first`` (their .crc sidecars too), leaving state/ as it
    is: batch ``first`` is planned again with new offsets and the state versions > ``first`` stay behind."""
    if first < 1:
        raise SkipCase(f"a rollback to before batch {first} leaves no committed batch")
    for log in ("offsets", "commits"):
        for b in log_ids(ckpt, log):
            if b >= first:
                remove(ckpt / log / str(b))


def _state_ahead_base(kind: str) -> Callable[[Path], None]:
    """Roll back by hand to before the batch that wrote partition 0's newest ``kind`` (snapshot / zip) S: batches
    S-1.. go from offsets/ and commits/, S.<kind> and every later version stay."""

    def apply(ckpt: Path) -> None:
        part = state_partitions(ckpt)[0]
        bases = versions_with(part, kind)
        if not bases:
            raise SkipCase(f"partition 0 has no {kind}")
        _hand_rollback(ckpt, bases[-1] - 1)

    return apply


def _state_ahead_base_v2(ckpt: Path) -> None:
    """As ``_state_ahead_base("zip")`` for state checkpoint format v2 (``<version>_<unique id>.zip``)."""
    part = state_partitions(ckpt)[0]
    zips = sorted(int(m.group(1)) for p in part.iterdir() if (m := re.fullmatch(r"([0-9]+)_[0-9a-f-]+\.zip", p.name)))
    if not zips:
        raise SkipCase("partition 0 has no checkpoint format v2 zip")
    _hand_rollback(ckpt, zips[-1] - 1)


def _state_ahead_latest(kind: str) -> Callable[[Path], None]:
    """Roll back the latest batch L by hand when no partition has a ``kind`` (snapshot / zip) of version L+1: only
    the delta / changelog of L+1 stays behind."""

    def apply(ckpt: Path) -> None:
        last = latest(ckpt, "offsets")
        for part in state_partitions(ckpt):
            if last + 1 in versions_with(part, kind):
                raise SkipCase(f"{part.name} has a {kind} of version {last + 1}")
        _hand_rollback(ckpt, last)

    return apply


def _state_ahead_batches(n: int) -> Callable[[Path], None]:
    """Roll back the latest ``n`` batches by hand."""

    def apply(ckpt: Path) -> None:
        _hand_rollback(ckpt, latest(ckpt, "offsets") - n + 1)

    return apply


def sink_log(ckpt: Path) -> Path:
    """The file sink's ``_spark_metadata`` of a scenario copy (the output dir is next to the checkpoint)."""
    return ckpt.parent / "output" / "_spark_metadata"


def _sink_compaction_reads(ckpt: Path) -> list[Path]:
    """The sink log entries the restart's batch compacts (the newest .compact and every entry after it), when the
    restart's batch L+1 is a compaction batch of the sink's log."""
    log = sink_log(ckpt)
    compacts = sorted(int(p.name.split(".")[0]) for p in log.glob("*.compact"))
    last = latest(ckpt, "commits")
    if len(compacts) < 2 or (last + 2) % (compacts[-1] - compacts[-2]) != 0:
        raise SkipCase(f"batch {last + 1} is not a compaction batch of {log.name}: compact files {compacts}")
    return [log / f"{compacts[-1]}.compact", *(log / str(b) for b in range(compacts[-1] + 1, last + 1))]


def _sink_compaction_entry(index: int, damage: Callable[[Path], None]) -> Callable[[Path], None]:
    """Damage the ``index``-th entry the restart's compaction reads (0: the previous compaction)."""

    def apply(ckpt: Path) -> None:
        reads = _sink_compaction_reads(ckpt)
        if len(reads) <= index:
            raise SkipCase(f"the compaction reads {len(reads)} entries")
        damage(reads[index])

    return apply


def _cut_half(path: Path) -> None:
    data = path.read_bytes()
    rewrite(path, data[: len(data) // 2])


def _not_utf8(path: Path) -> None:
    data = bytearray(path.read_bytes())
    at = data.index(b'"path"') + 2  # inside the first entry's key: 0xff is never UTF-8
    data[at] = 0xFF
    rewrite(path, bytes(data))


def _sink_log_deleted(ckpt: Path) -> None:
    _sink_compaction_reads(ckpt)  # the restart's batch compacts
    remove(sink_log(ckpt))


def _sink_entry_deleted_before_compaction(ckpt: Path) -> None:
    """A plain sink entry deleted while the restart's batch does not compact, but a later batch's compaction reads
    it (default interval 10: batch 9 reads 0..8)."""
    log, last = sink_log(ckpt), latest(ckpt, "commits")
    if list(log.glob("*.compact")) or last + 1 >= 9:
        raise SkipCase(f"expected no compaction yet and a restart before batch 9, found latest commit {last}")
    remove(log / "3")


def _directory_beyond(log_of: Callable[[Path], Path]) -> Callable[[Path], None]:
    """An empty directory named like the entry after the newest one of a log that is not offsets/ or commits/
    (``log_of(ckpt)``: a file source's ``sources/0``, the file sink's ``_spark_metadata``)."""

    def apply(ckpt: Path) -> None:
        log = log_of(ckpt)
        ids = [int(p.name.split(".")[0]) for p in log.iterdir() if p.name.split(".")[0].isdigit()]
        if not ids:
            raise SkipCase(f"{log.name} holds no entry")
        (log / str(max(ids) + 1)).mkdir()

    return apply


# -------------------------------------------------------------------------------------- file sink


def _filesink_ahead(ckpt: Path) -> None:
    last = latest(ckpt, "offsets")
    if last not in log_ids(ckpt, "commits"):
        raise SkipCase("latest offset has no commit")
    remove(ckpt / "offsets" / str(last))
    remove(ckpt / "commits" / str(last))


# ----------------------------------------------------------------------------------------- catalogue

_CASES = [
    # asynchronous progress tracking (base written with async on; restarted with it off)
    DamageCase(
        "async_sparse_gap",
        "async",
        _async_require_gap,
        "real async run: latest offset L with offsets/L-1 missing (no change)",
    ),
    DamageCase(
        "async_sparse_uncommitted",
        "async",
        _async_uncommitted,
        "real async run with commits/L deleted: latest commit older than L, offsets/L-1 missing",
    ),
    # commit/offset collisions
    DamageCase(
        "commit_beyond_latest_offset",
        "stateless",
        _commit_beyond_offsets,
        "commits/L+1 (copy of commits/L) without offsets/L+1",
    ),
    DamageCase(
        "latest_offset_deleted", "stateless", _latest_offset_deleted, "offsets/L deleted while commits/L exists"
    ),
    DamageCase(
        "async_repaired_copy_prev",
        "async",
        _async_repaired,
        "async checkpoint repaired by copying offsets/L (L committed) or offsets/P to offsets/L-1",
        check_correct=False,
    ),
    DamageCase(
        "commit_latest_missing",
        "stateless",
        _commit_latest_missing,
        "commits/L deleted (the normal crash window: batch L is re-executed)",
    ),
    # a data file deleted by hand, its Hadoop .crc sidecar left behind: Spark's rename of the entry it writes again
    # onto it fails (FileAlreadyExistsException -> "Multiple streaming queries are concurrently using"); found by
    # the damage hunt of 2026-11-26 on 4.3; recorded on 3.5-4.2 too (there the deleted sources/0 entry fails
    # first: "batch L doesn't exist")
    DamageCase(
        "commit_latest_deleted_crc_left",
        "stateless",
        _commit_latest_deleted_crc_left,
        "commits/L deleted, its .crc left",
        s3_differs="object stores keep no .crc: the sidecar is inert there",
    ),
    DamageCase(
        "latest_batch_deleted_crcs_left",
        "agg_hdfs",
        _latest_batch_deleted_crcs_left,
        "offsets/L and commits/L deleted, their .crc left",
        s3_differs="object stores keep no .crc: the sidecars are inert there",
    ),
    DamageCase(
        "source_log_latest_deleted_crc_left",
        "stateless",
        _source_log_latest_deleted_crc_left,
        "the newest sources/0 entry deleted, its .crc left",
        s3_differs="object stores keep no .crc: the sidecar is inert there",
    ),
    # the file source parses every entry from its latest compaction on, not only the latest batch's (damage hunt
    # of 2026-11-26)
    DamageCase(
        "source_log_old_entry_truncated",
        "stateless",
        _source_log_old_entry(b""),
        "an older sources/0 entry (not read by the latest batch) cut to half",
    ),
    DamageCase(
        "source_log_old_entry_garbage",
        "stateless",
        _source_log_old_entry(b"v1\n{garbage"),
        "an older sources/0 entry rewritten as garbage after its header",
    ),
    DamageCase(
        "commit_latest_garbage_appended",
        "stateless",
        _commit_latest_garbage_appended,
        "bytes appended after the latest commit's JSON, on the same line (its .crc dropped)",
    ),
    # the file source's whole log gone (damage hunt of 2026-11-27, B10): it numbers new files from 0 again, below the
    # recorded offset
    DamageCase("sources_dir_missing", "stateless", _sources_dir_missing, "whole sources/ deleted"),
    DamageCase(
        "offsets_all_deleted",
        "stateless",
        _offsets_all_deleted,
        "every offsets/ file deleted while commits/ (and sources/) remain",
    ),
    # damaged latest offset / commit files
    DamageCase("offset_latest_empty", "stateless", _truncate("offsets", ""), "offsets/L is 0 bytes"),
    DamageCase(
        "offset_latest_directory",
        "stateless",
        _as_directory("offsets"),
        "offsets/L is an empty directory",
        s3_differs=EMPTY_DIR_ON_S3,
    ),
    DamageCase(
        "commit_latest_directory",
        "stateless",
        _as_directory("commits"),
        "commits/L is an empty directory",
        s3_differs=EMPTY_DIR_ON_S3,
    ),
    # the shuffle-partition count of the latest offset file edited, its .crc dropped (as an object store has none):
    # new-user trial 3, where the audit blamed the healthy state directories
    DamageCase(
        "offset_latest_shuffle_partitions_edited_up",
        "agg_hdfs",
        _set_latest_conf("spark.sql.shuffle.partitions", "4"),
        "offsets/L records 4 shuffle partitions, offsets/L-1 and the state 3",
    ),
    DamageCase(
        "offset_latest_shuffle_partitions_edited_up_rocksdb",
        "agg_rocksdb_cl",
        _set_latest_conf("spark.sql.shuffle.partitions", "4"),
        "offsets/L records 4 shuffle partitions, offsets/L-1 and the state 3 (RocksDB with changelog)",
    ),
    DamageCase(
        "offset_latest_shuffle_partitions_edited_down",
        "agg_hdfs",
        _set_latest_conf("spark.sql.shuffle.partitions", "2"),
        "offsets/L records 2 shuffle partitions, offsets/L-1 and the state 3",
        expect_rule="CONF-SHUFFLE-PARTITIONS-EDITED",
    ),
    DamageCase(
        "source_log_directory_beyond_latest",
        "stateless",
        _directory_beyond(lambda ckpt: ckpt / "sources" / "0"),
        "an empty directory sources/0/N+1 after the file source's newest entry N",
        s3_differs=EMPTY_DIR_ON_S3,
    ),
    DamageCase(
        "filesink_metadata_directory_beyond_latest",
        "filesink",
        _directory_beyond(sink_log),
        "an empty directory _spark_metadata/N+1 after the file sink's newest entry N",
        s3_differs=EMPTY_DIR_ON_S3,
    ),
    DamageCase(
        "offset_directory_beyond_latest",
        "stateless",
        _as_directory("offsets", beyond=True),
        "an empty directory offsets/L+1 beside the files",
        s3_differs=EMPTY_DIR_ON_S3,
    ),
    DamageCase("commit_latest_empty", "stateless", _truncate("commits", ""), "commits/L is 0 bytes"),
    DamageCase("offset_latest_header_only", "stateless", _truncate("offsets", "v1"), "offsets/L is just 'v1'"),
    DamageCase(
        "offset_latest_metadata_truncated",
        "stateless",
        _offset_metadata_truncated,
        "offsets/L cut in the middle of the metadata JSON",
    ),
    DamageCase("offset_latest_metadata_empty", "stateless", _offset_metadata_empty, "offsets/L metadata line is empty"),
    DamageCase("offset_latest_bad_header", "stateless", _relabel("offsets", "x1"), "offsets/L header 'x1'"),
    DamageCase("offset_latest_v99", "stateless", _relabel("offsets", "v99"), "offsets/L header 'v99'"),
    DamageCase(
        "offset_latest_not_utf8",
        "stateless",
        _byte_not_utf8("offsets", b"org.apache"),
        "a byte of offsets/L (in a conf value) replaced by 0xFF, not UTF-8 (.crc dropped)",
    ),
    DamageCase(
        "source_log_latest_not_utf8",
        "stateless",
        _byte_not_utf8("sources/0", b"part-"),
        "a byte of sources/0's latest entry (in a file name) replaced by 0xFF, not UTF-8 (.crc dropped)",
    ),
    DamageCase(
        "offset_source_moved_forward",
        "stateless",
        _offset_source_moved_forward,
        "offsets/L's file-source logOffset edited to one past the source log's newest entry (.crc dropped)",
    ),
    DamageCase(
        "offset_source_moved_back",
        "stateless",
        _offset_source_moved_back,
        "offsets/L's file-source logOffset edited to one below offsets/L-1's (.crc dropped)",
    ),
    # the file source's offset as a JSON string: json4s reads logOffset as a Long (damage hunt of 2026-11-27, R12 on
    # the rate source's offset)
    DamageCase(
        "offset_source_as_string",
        "stateless",
        _offset_source_as_string,
        'offsets/L\'s file-source offset written {"logOffset":"N"} (a JSON string; .crc dropped)',
    ),
    # the file source's log compacted every 3 batches (damage hunt of 2026-11-27, D01/F01/F07)
    DamageCase(
        "source_log_newest_compact_deleted",
        "stateless_src_c3",
        _source_log_newest_compact_deleted,
        "sources/0's newest .compact deleted (the entries after it kept)",
    ),
    DamageCase(
        "source_log_cut_below_noop_batch",
        "stateless_src_c3",
        _source_log_cut_below_noop_batch,
        "offsets/L records the file source at offsets/L-1's logOffset (a batch that read no file), and sources/0's "
        "newest .compact and every entry after it deleted",
    ),
    DamageCase(
        "source_log_entry_missing_after_noop_batch",
        "stateless",
        _source_log_entry_missing_after_noop_batch,
        "offsets/L records the file source at offsets/L-1's logOffset P (a batch that read no file), and sources/0's "
        "entries from P on deleted: the restarted source logs the new file as entry P, already counted as read",
        expect_rule="SRC-LOG-MISSING",
    ),
    DamageCase("commit_latest_v99", "stateless", _relabel("commits", "v99"), "commits/L header 'v99'"),
    DamageCase("commit_latest_v1_only", "stateless", _truncate("commits", "v1"), "commits/L is just 'v1'"),
    # numbers no Spark writes (issue 16): what Spark makes of them decides what the audit must say
    DamageCase(
        "commit_latest_watermark_inf",
        "stateless",
        _replace_latest("commits", '"nextBatchWatermarkMs":0', '"nextBatchWatermarkMs":1e999'),
        "commits/L watermark 1e999 (overflows a double)",
        audit_kwargs=STATELESS,
    ),
    DamageCase(
        "commit_latest_watermark_string",
        "stateless",
        _replace_latest("commits", '"nextBatchWatermarkMs":0', '"nextBatchWatermarkMs":"123"'),
        "commits/L watermark as a JSON string",
        audit_kwargs=STATELESS,
    ),
    DamageCase(
        "commit_latest_watermark_fraction",
        "stateless",
        _replace_latest("commits", '"nextBatchWatermarkMs":0', '"nextBatchWatermarkMs":1.5'),
        "commits/L watermark 1.5",
        audit_kwargs=STATELESS,
    ),
    DamageCase(
        "commit_latest_watermark_bool",
        "stateless",
        _replace_latest("commits", '"nextBatchWatermarkMs":0', '"nextBatchWatermarkMs":true'),
        "commits/L watermark true",
        audit_kwargs=STATELESS,
    ),
    DamageCase(
        "commit_latest_watermark_nan",
        "stateless",
        _replace_latest("commits", '"nextBatchWatermarkMs":0', '"nextBatchWatermarkMs":NaN'),
        "commits/L watermark NaN literal",
        audit_kwargs=STATELESS,
    ),
    DamageCase(
        "offset_latest_watermark_long_overflow",
        "stateless",
        _replace_latest("offsets", '"batchWatermarkMs":0', '"batchWatermarkMs":' + "9" * 30),
        "offsets/L watermark of 30 digits (beyond a Java long)",
        audit_kwargs=STATELESS,
    ),
    DamageCase(
        "commit_latest_watermark_huge_int",
        "stateless",
        _replace_latest("commits", '"nextBatchWatermarkMs":0', '"nextBatchWatermarkMs":' + "9" * 5000),
        "commits/L watermark of 5000 digits",
        # 3.5.9's Jackson words it "Number length (5000) exceeds the maximum length (1000)"
        audit_kwargs=STATELESS,
    ),
    DamageCase(
        "offset_latest_version_huge",
        "stateless",
        _relabel("offsets", "v" + "9" * 5000),
        "offsets/L version line of 5000 digits",
    ),
    DamageCase(
        "offset_latest_void_source",
        "stateless",
        _offset_void_source,
        "offsets/L source line replaced by '-' (no offset for the source)",
    ),
    DamageCase(
        "offset_latest_relabelled_v2",
        "stateless",
        _relabel("offsets", "v2"),
        "offsets/L header relabelled 'v2' (v1 body)",
    ),
    DamageCase(
        "offset_latest_edited_stale_crc",
        "stateless",
        _offset_edited_stale_crc,
        "offsets/L logOffset N -> N-1 edited in place, Hadoop .crc left stale (silent replay)",
        expect_rule="LOG-CRC-MISMATCH",
    ),
    DamageCase("offsets_middle_gap", "stateless", _middle_gap, "offsets/2 deleted (harmless)"),
    DamageCase(
        "state_snapshot_overwritten_by_older",
        "agg_hdfs",
        _snapshot_overwritten_by_older,
        "state/0/0's newest snapshot (and .crc) overwritten with its oldest one (every batch of this query updates "
        "every key, so the deltas after it write the whole state again: Spark restarts right, and the audit must "
        "not call it stale; repair hunt 10's M04/M05, where keys were left behind, restarted wrong)",
    ),
    DamageCase(
        "state_snapshot_copied_as_newest",
        "agg_hdfs",
        _snapshot_copied_as_newest_version,
        "state/0/0's newest snapshot copied as the snapshot of the newest version (the updates of the deltas in "
        "between are lost at the restart)",
        expect_rule="STATE-SNAPSHOT-STALE",
    ),
    DamageCase(
        "two_batches_before_latest_deleted",
        "agg_hdfs",
        _two_batches_before_latest_deleted,
        "a stateful query's offsets and commits of batches L-2 and L-1 deleted (with .crc), batch L committed",
    ),
    DamageCase(
        "leftover_temp_and_junk",
        "stateless",
        _leftovers,
        "leftover .<n>.<uuid>.tmp, <n>.tmp, garbage.txt, README in offsets/ and commits/ (harmless)",
    ),
    DamageCase(
        "offset_noncanonical_name", "stateless", _noncanonical_name, "offsets/L renamed to offsets/000L (with its .crc)"
    ),
    DamageCase(
        "source_log_latest_missing",
        "stateless",
        _source_log_latest_missing,
        "latest file of the file source log sources/0 deleted",
    ),
    # metadata
    DamageCase(
        "metadata_missing",
        "stateless",
        _metadata(None),
        "metadata deleted",
        expect_rule="META-MISSING",
        expect_rule_versions=frozenset({"3.5", "4.0", "4.1"}),
    ),
    DamageCase("metadata_empty", "stateless", _metadata(""), "metadata is 0 bytes"),
    DamageCase("metadata_braces", "stateless", _metadata("{}"), "metadata is '{}'"),
    DamageCase("metadata_truncated", "stateless", _metadata_truncated, "metadata JSON cut in half"),
    # an id that is no UUID (a new user's hand edit): StreamExecution parses it with java.util.UUID.fromString
    DamageCase("metadata_id_not_uuid", "stateless", _metadata('{"id":"not-a-uuid"}'), "metadata id 'not-a-uuid'"),
    DamageCase("metadata_id_empty", "stateless", _metadata('{"id":""}'), "metadata id ''"),
    DamageCase(
        "metadata_id_not_hex",
        "stateless",
        _metadata('{"id":"zzzzzzzz-1111-2222-3333-444444444444"}'),
        "metadata id of UUID shape with non-hex digits",
    ),
    DamageCase(
        "metadata_id_upper_case",
        "stateless",
        _metadata('{"id":"6F1C2A4E-0B9D-4C3E-8F7A-1D2E3F405162"}'),
        "metadata id in upper case (a UUID all the same)",
    ),
    # HDFS state store
    DamageCase(
        "state_delta_missing",
        "agg_hdfs",
        _state_delta_missing,
        "newest delta of a partition whose newest version has no snapshot deleted",
    ),
    DamageCase(
        "state_delta_missing_covered",
        "agg_hdfs",
        _state_delta_missing_covered,
        "a delta covered by the partition's newest snapshot deleted (harmless)",
    ),
    DamageCase("state_partition_missing", "agg_hdfs", _state_partition_missing, "state/0/1 deleted"),
    # Spark restarts and looks every key up where it is not (damage hunt 8: windows emitted twice, counts restarted)
    DamageCase(
        "state_partitions_swapped",
        "agg_hdfs",
        _state_partitions_swapped,
        "state/0/0 and state/0/1 swapped",
        expect_rule="STATE-PARTITION-MISPLACED",
    ),
    # the deltas after it hold the partition's own keys: what Spark does with the foreign base is recorded
    DamageCase(
        "state_base_snapshots_swapped",
        "agg_hdfs",
        _state_base_snapshots_swapped,
        "the newest snapshots of state/0/0 and state/0/1 swapped, their deltas in place",
    ),
    DamageCase(
        "state_partitions_swapped_rocksdb",
        "agg_rocksdb",
        _state_partitions_swapped,
        "state/0/0 and state/0/1 swapped (RocksDB without changelog checkpointing: the keys are in SST files only)",
        expect_rule="STATE-PARTITION-MISPLACED",
    ),
    DamageCase(
        "state_partitions_swapped_tws",
        "tws_pandas",
        _state_partitions_swapped,
        "transformWithStateInPandas: state/0/0 and state/0/1 swapped",
        versions=frozenset({"4.0", "4.1", "4.2", "4.3"}),
        expect_rule="STATE-PARTITION-MISPLACED",
    ),
    DamageCase(
        "state_partitions_swapped_rocksdb_cl",
        "agg_rocksdb_cl",
        _state_partitions_swapped,
        "state/0/0 and state/0/1 swapped (RocksDB with changelog checkpointing)",
        expect_rule="STATE-PARTITION-MISPLACED",
    ),
    # the stored schema no longer describes the rows: the rows' key does not decode with it (damage hunt 8, H1)
    DamageCase(
        "state_schema_from_other_operator",
        "dedup_agg",
        _schema_from_operator(0, 1),
        "dropDuplicates' state/1/0/_metadata/schema (and .crc) replaced by the aggregation's state/0/0 one",
    ),
    # the other way: the dedup's key (id: long) over the aggregation's string keys decodes, as garbage; the rows are
    # longer than a long's
    DamageCase(
        "state_schema_from_other_operator_agg",
        "dedup_agg",
        _schema_from_operator(1, 0),
        "the aggregation's state/0/0/_metadata/schema (and .crc) replaced by dropDuplicates' state/1/0 one",
    ),
    # one edit that breaks every store of two operators: Spark fails on the upstream operator (the highest id, the
    # earlier stage) in whichever partition's task comes first (hunt 6: conf_provider_rocks, conf_provider_hdfs)
    DamageCase(
        "offset_latest_provider_rocksdb_two_operators",
        "dedup_agg",
        _set_latest_conf(
            "spark.sql.streaming.stateStore.providerClass",
            "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
        ),
        "dropDuplicates then an aggregation on HDFS state: offsets/L's providerClass set to RocksDB (.crc dropped)",
    ),
    # one operator's state directory deleted in a query with two (damage hunt 4: D01)
    DamageCase(
        "state_first_operator_deleted",
        "dedup_agg",
        _operator_deleted("first"),
        "dropDuplicates then an aggregation: state/0 deleted, state/1 kept",
    ),
    DamageCase(
        "state_last_operator_deleted",
        "dedup_agg",
        _operator_deleted("last"),
        "dropDuplicates then an aggregation: state/1 deleted, state/0 kept; the audit is told the query (the "
        "directory of the highest operator id leaves no gap in the files)",
        query=_dedup_agg_query,
    ),
    # a delta cut short (damage hunt 5): lz4-java reads block by block and Spark stops reading at the -1 key size, so
    # a cut inside the end block that follows is never read; a cut inside a data block is
    DamageCase(
        "state_delta_cut_in_end_block",
        "agg_hdfs",
        _delta_cut("end"),
        "partition 0's newest delta (read at restart) cut inside its LZ4 end block, its .crc sidecars dropped",
    ),
    DamageCase(
        "state_delta_cut_in_end_block_crc_kept",
        "agg_hdfs",
        _delta_cut("end", keep_crc=True),
        "partition 0's newest delta cut inside its LZ4 end block, its Hadoop .crc kept (it covers the whole file; "
        "recorded: Spark restarts all the same)",
    ),
    # damage hunt 7, c09 (4.3): lz4-java reads an empty stream as its end (no "Stream ended prematurely"), so the
    # delta's first readInt fails with a bare EOFException under CANNOT_LOAD_STATE_STORE.UNCATEGORIZED
    DamageCase(
        "state_delta_emptied",
        "agg_hdfs",
        _delta_cut("zero", keep_crc=True),
        "partition 0's newest delta (read at restart) truncated to 0 bytes, its .crc sidecar left as it was",
    ),
    DamageCase(
        "state_delta_cut_in_data_block",
        "agg_hdfs",
        _delta_cut("data"),
        "partition 0's newest delta (read at restart) cut in the middle of its last LZ4 data block, its .crc "
        "sidecars dropped",
    ),
    # a store's schema file cut short (damage hunt 5): the restart reads partition 0's schema files
    DamageCase(
        "schema_truncated",
        "agg_hdfs",
        _schema_damaged("state/0/0/_metadata/schema", "cut"),
        "state/0/0/_metadata/schema cut to half its bytes, its .crc dropped",
    ),
    DamageCase(
        "schema_truncated_in_partition_1",
        "agg_hdfs",
        _schema_cut_copy_in_partition_1,
        "a copy of state/0/0/_metadata/schema cut to half its bytes written as state/0/1/_metadata/schema (not read)",
    ),
    DamageCase(
        "schema_garbage_appended",
        "agg_hdfs",
        _schema_damaged("state/0/0/_metadata/schema", "appended"),
        "9 bytes appended to state/0/0/_metadata/schema after its schemas, its .crc dropped (never read)",
    ),
    # a schema file whose JSON still parses but names no Spark type, or lacks a key Spark reads (damage hunt 6)
    DamageCase(
        "schema_type_name_flipped",
        "agg_hdfs",
        _schema_text_edited("v2", b'"type":"long"', b'"type":"lonf"'),
        "state/0/0/_metadata/schema: the first type name 'long' flipped to 'lonf', its .crc dropped",
    ),
    DamageCase(
        "schema_fields_key_flipped",
        "agg_hdfs",
        _schema_text_edited("v2", b'"fields":', b'"fielcs":'),
        "state/0/0/_metadata/schema: the key schema's 'fields' key flipped to 'fielcs', its .crc dropped",
    ),
    DamageCase(
        "schema_v3_type_name_flipped",
        "tws_pandas",
        _schema_text_edited("v3", b'"type":"string"', b'"type":"stxing"'),
        "transformWithStateInPandas: the newest v3 schema file's first type name 'string' flipped to 'stxing', its "
        ".crc dropped",
        versions=frozenset({"4.0", "4.1", "4.2", "4.3"}),
    ),
    # operator metadata and schema files (damage hunt 4, 2026-11-27: J05/D03, J01, J26 on 4.3)
    # checkpoint format v2: 4.2+ auto snapshot repair loads an older zip through the changelogs' lineages (damage
    # hunt 4, V07/V08/V25/T12 on 4.3)
    DamageCase(
        "v2_newest_zip_flipped",
        "agg_v2",
        _v2_newest_zip("flipped"),
        "format v2: a byte flipped in partition 0's newest zip, its .crc sidecars dropped",
        versions=frozenset({"4.0", "4.1", "4.2", "4.3"}),
    ),
    # format v2: the newest changelog damaged (damage hunt 4, V06 V09)
    DamageCase(
        "v2_newest_changelog_flipped",
        "agg_v2",
        _v2_newest_changelog("flipped"),
        "format v2: one byte flipped in the middle of partition 0's newest changelog (Hadoop .crc and 4.2+ file "
        "checksum dropped)",
        versions=frozenset({"4.0", "4.1", "4.2", "4.3"}),
    ),
    DamageCase(
        "v2_newest_changelog_flipped_checksum_kept",
        "agg_v2",
        _v2_newest_changelog("flipped_checksum_kept"),
        "format v2: one byte flipped in the middle of partition 0's newest changelog (Hadoop .crc dropped, 4.2+ "
        "file checksum kept)",
        versions=frozenset({"4.0", "4.1", "4.2", "4.3"}),
    ),
    DamageCase(
        "v2_newest_changelog_checksum_emptied",
        "agg_v2",
        _v2_newest_changelog("checksum_emptied"),
        "format v2: the file checksum (<name>.crc, 4.1+) of partition 0's newest changelog emptied, the changelog "
        "intact (damage hunt 8 on 4.3: Jackson's MismatchedInputException)",
        versions=frozenset({"4.0", "4.1", "4.2", "4.3"}),
    ),
    DamageCase(
        "v2_newest_changelog_truncated_checksum_kept",
        "agg_v2",
        _v2_newest_changelog("truncated_checksum_kept"),
        "format v2: partition 0's newest changelog cut to half its size (Hadoop .crc dropped, 4.1+ file checksum "
        "kept; hunt 6 on 4.3: CHECKPOINT_FILE_CHECKSUM_VERIFICATION_FAILED)",
        versions=frozenset({"4.0", "4.1", "4.2", "4.3"}),
    ),
    DamageCase(
        "v2_newest_changelog_truncated",
        "agg_v2",
        _v2_newest_changelog("truncated"),
        "format v2: partition 0's newest changelog cut to half its size (both sidecars dropped)",
        versions=frozenset({"4.0", "4.1", "4.2", "4.3"}),
    ),
    DamageCase(
        "v1_newest_changelog_renamed_v2",
        "agg_rocksdb_cl",
        _v1_file_renamed_v2("changelog"),
        "format v1: partition 0's newest changelog renamed <v>_<uuid>.changelog (a v2 name), its .crc dropped",
    ),
    DamageCase(
        "v1_newest_zip_renamed_v2",
        "agg_rocksdb_cl",
        _v1_file_renamed_v2("zip"),
        "format v1: partition 0's newest zip renamed <v>_<uuid>.zip (a v2 name), its .crc dropped",
    ),
    DamageCase(
        "v2_newest_zip_emptied_sidecars_kept",
        "agg_v2",
        _v2_newest_zip("emptied"),
        "format v2: partition 0's newest zip emptied, its Hadoop .crc and (4.1+) file checksum kept",
        versions=frozenset({"4.0", "4.1", "4.2", "4.3"}),
    ),
    DamageCase(
        "v2_newest_zip_header_flipped",
        "agg_v2",
        _v2_newest_zip_header_flipped,
        "format v2: partition 0's newest zip rewritten with its metadata header flipped (v2 <-> v1), sidecars dropped",
        versions=frozenset({"4.0", "4.1", "4.2", "4.3"}),
    ),
    DamageCase(
        "v2_newest_zip_truncated_sidecars_kept",
        "agg_v2",
        _v2_newest_zip("truncated"),
        "format v2: partition 0's newest zip cut to half its size, its Hadoop .crc and (4.1+) file checksum kept",
        versions=frozenset({"4.0", "4.1", "4.2", "4.3"}),
    ),
    DamageCase(
        "v2_newest_zip_deleted",
        "agg_v2",
        _v2_newest_zip("deleted"),
        "format v2: partition 0's newest zip deleted (with its sidecars)",
        versions=frozenset({"4.0", "4.1", "4.2", "4.3"}),
    ),
    DamageCase(
        "opmeta_name_edited",
        "agg_hdfs",
        _opmeta_name_edited,
        "state/0/_metadata/metadata names operator 0 'dedupe' instead of 'stateStoreSave' (.crc dropped)",
        versions=frozenset({"4.0", "4.1", "4.2", "4.3"}),
    ),
    DamageCase(
        "opmeta_v2_truncated",
        "tws_pandas",
        _opmeta_v2_truncated,
        "transformWithStateInPandas: the newest operator metadata v2 file cut to half its bytes (.crc dropped)",
        versions=frozenset({"4.0", "4.1", "4.2", "4.3"}),
    ),
    DamageCase(
        "opmeta_deleted_crc_left",
        "agg_hdfs",
        _metadata_deleted_crc_left("state/0/_metadata/metadata"),
        "state/0/_metadata/metadata deleted, its .metadata.crc left",
        s3_differs="object stores keep no .crc: the sidecar is inert there",
        versions=frozenset({"4.0", "4.1", "4.2", "4.3"}),
    ),
    DamageCase(
        "schema_deleted_crc_left",
        "agg_hdfs",
        _metadata_deleted_crc_left("state/0/0/_metadata/schema"),
        "state/0/0/_metadata/schema deleted, its .schema.crc left",
        s3_differs="object stores keep no .crc: the sidecar is inert there",
    ),
    # an edit that drops the aggregation's state format version from offsets/L (damage hunt 3, F20/X04/Y04): Spark
    # restores the legacy default 1 against state written in format 2
    DamageCase(
        "offset_latest_agg_format_dropped",
        "agg_hdfs",
        _drop_latest_conf("spark.sql.streaming.aggregation.stateFormatVersion"),
        "spark.sql.streaming.aggregation.stateFormatVersion removed from offsets/L's conf (.crc dropped)",
    ),
    DamageCase(
        "offset_latest_agg_format_dropped_rocksdb",
        "agg_rocksdb_cl",
        _drop_latest_conf("spark.sql.streaming.aggregation.stateFormatVersion"),
        "spark.sql.streaming.aggregation.stateFormatVersion removed from offsets/L's conf, RocksDB with changelogs "
        "(.crc dropped)",
    ),
    # the state format conf of offsets/L edited to 1, or removed (-> the legacy default 1), against state written in
    # format 2 (damage hunt 4: D08, J18, X04, Y04, A02, A03)
    DamageCase(
        "offset_latest_agg_format_set_1",
        "agg_hdfs",
        _set_latest_conf("spark.sql.streaming.aggregation.stateFormatVersion", "1"),
        "spark.sql.streaming.aggregation.stateFormatVersion set to 1 in offsets/L's conf (.crc dropped)",
    ),
    DamageCase(
        "offset_latest_join_format_dropped",
        "join",
        _drop_latest_conf("spark.sql.streaming.join.stateFormatVersion"),
        "inner stream-stream join: spark.sql.streaming.join.stateFormatVersion removed from offsets/L's conf "
        "(.crc dropped)",
    ),
    DamageCase(
        "offset_latest_join_format_set_1",
        "join",
        _set_latest_conf("spark.sql.streaming.join.stateFormatVersion", "1"),
        "inner stream-stream join: spark.sql.streaming.join.stateFormatVersion set to 1 in offsets/L's conf "
        "(.crc dropped)",
    ),
    DamageCase(
        "offset_latest_left_join_format_set_1",
        "join_left",
        _set_latest_conf("spark.sql.streaming.join.stateFormatVersion", "1"),
        "left outer stream-stream join: spark.sql.streaming.join.stateFormatVersion set to 1 in offsets/L's conf "
        "(.crc dropped); the audit is told the join type (the files do not say it)",
        query=_left_outer_join_query,
    ),
    DamageCase(
        "offset_latest_fmgws_format_dropped",
        "pandas_state",
        _drop_latest_conf("spark.sql.streaming.flatMapGroupsWithState.stateFormatVersion"),
        "applyInPandasWithState: spark.sql.streaming.flatMapGroupsWithState.stateFormatVersion removed from "
        "offsets/L's conf (.crc dropped)",
    ),
    DamageCase(
        "offset_latest_fmgws_format_set_1",
        "pandas_state",
        _set_latest_conf("spark.sql.streaming.flatMapGroupsWithState.stateFormatVersion", "1"),
        "applyInPandasWithState: spark.sql.streaming.flatMapGroupsWithState.stateFormatVersion set to 1 in "
        "offsets/L's conf (.crc dropped)",
    ),
    DamageCase(
        "rocksdb_zip_flipped_byte",
        "agg_rocksdb_cl",
        _rocksdb_zip_flipped,
        "one byte flipped in partition 0's newest zip (size unchanged, Hadoop .crc kept)",
    ),
    # one flipped SST byte, its Hadoop .crc kept: Hadoop's ChecksumException while Spark copies the SST stops the
    # load of that zip; 4.2+ with changelog checkpointing load an older zip plus changelogs instead (recorded:
    # with changelogs 3.5-4.1 fail, 4.2 and 4.3 restart with correct aggregates; without, all fail)
    DamageCase(
        "rocksdb_sst_flipped_byte",
        "agg_rocksdb_cl",
        _rocksdb_sst_flipped,
        "one byte flipped in an SST of the newest zip (size unchanged, Hadoop .crc kept)",
    ),
    DamageCase(
        "rocksdb_sst_flipped_byte_no_changelog",
        "agg_rocksdb",
        _rocksdb_sst_flipped,
        "one byte flipped in an SST of the newest zip, changelog checkpointing off (Hadoop .crc kept)",
    ),
    # RocksDB without changelog checkpointing: Spark's auto snapshot repair (4.2+) needs changelogs
    # (RocksDB.allowAutoSnapshotRepair), so the newest zip's own error stops the load on every version (damage hunt
    # of 2026-11-26, R03/R04/R05/R11)
    DamageCase(
        "rocksdb_zip_truncated_no_changelog",
        "agg_rocksdb",
        _rocksdb_zip_truncated,
        "partition 0's newest zip cut to half, changelog checkpointing off",
    ),
    DamageCase(
        "rocksdb_zip_missing_no_changelog",
        "agg_rocksdb",
        _rocksdb_zip_missing,
        "partition 0's newest zip deleted, changelog checkpointing off",
    ),
    # one flipped byte in an SST without its Hadoop .crc (as on an object store): RocksDB's own block checksums.
    # The index block is read when RocksDB opens the table: every load of that zip fails (4.2+ with changelogs
    # load an older zip instead). A data block is read only when a lookup, a scan or a compaction reaches it:
    # recorded both ways (3.5.9 without changelogs restarted correctly; every other run failed), so unknown
    DamageCase(
        "rocksdb_sst_index_flipped_no_crc",
        "agg_rocksdb_cl",
        _rocksdb_sst_block_flipped("index"),
        "one byte flipped in the index block of an SST of partition 0's newest zip, its .crc dropped",
    ),
    DamageCase(
        "rocksdb_sst_index_flipped_no_crc_no_changelog",
        "agg_rocksdb",
        _rocksdb_sst_block_flipped("index"),
        "one byte flipped in the index block of an SST of partition 0's newest zip, its .crc dropped, "
        "changelog checkpointing off",
    ),
    DamageCase(
        "rocksdb_sst_filter_flipped_no_crc_no_changelog",
        "agg_rocksdb",
        _rocksdb_sst_block_flipped("filter"),
        "one byte flipped in the bloom filter block of an SST of partition 0's newest zip, its .crc dropped, "
        "changelog checkpointing off",
    ),
    DamageCase(
        "rocksdb_sst_properties_flipped_no_crc_no_changelog",
        "agg_rocksdb",
        _rocksdb_sst_block_flipped("properties"),
        "one byte flipped in the properties block of an SST of partition 0's newest zip, its .crc dropped, "
        "changelog checkpointing off",
    ),
    DamageCase(
        "rocksdb_sst_metaindex_flipped_no_crc_no_changelog",
        "agg_rocksdb",
        _rocksdb_sst_block_flipped("metaindex"),
        "one byte flipped in the metaindex block of an SST of partition 0's newest zip, its .crc dropped, "
        "changelog checkpointing off",
    ),
    DamageCase(
        "rocksdb_sst_data_flipped_no_crc",
        "agg_rocksdb_cl",
        _rocksdb_sst_block_flipped("data"),
        "one byte flipped in the first data block of an SST of partition 0's newest zip, its .crc dropped",
        unknown="STATE-SST-CORRUPT",
    ),
    DamageCase(
        "rocksdb_sst_data_flipped_no_crc_no_changelog",
        "agg_rocksdb",
        _rocksdb_sst_block_flipped("data"),
        "one byte flipped in the first data block of an SST of partition 0's newest zip, its .crc dropped, "
        "changelog checkpointing off",
        unknown="STATE-SST-CORRUPT",
    ),
    DamageCase(
        "rocksdb_sst_missing_no_changelog",
        "agg_rocksdb",
        _rocksdb_sst_missing,
        "SST files listed by a partition's newest zip deleted, changelog checkpointing off",
    ),
    DamageCase(
        "rocksdb_sst_grown_no_changelog",
        "agg_rocksdb",
        _rocksdb_sst_grown,
        "100 bytes appended to an SST of partition 0's newest zip, changelog checkpointing off",
    ),
    # with changelog checkpointing on, 4.2+ skip the damaged zip for an older one plus changelogs
    DamageCase(
        "rocksdb_zip_truncated",
        "agg_rocksdb_cl",
        _rocksdb_zip_truncated,
        "partition 0's newest zip cut to half (changelogs kept)",
    ),
    DamageCase(
        "state_schema_missing",
        "agg_hdfs",
        _state_schema_missing,
        "state/0/0/_metadata/schema deleted (regenerated by Spark)",
    ),
    DamageCase(
        "state_junk_file",
        "agg_hdfs",
        _state_junk_file,
        "non-hidden temp-1234567.tmp and a hidden .<v>.delta.<uuid>.tmp in a state partition",
    ),
    DamageCase(
        "state_dir_missing",
        "agg_hdfs",
        _state_dir_missing,
        "whole state/ deleted (audited with --stateful)",
        audit_kwargs={"stateful": True},
    ),
    DamageCase(
        "state_snapshot_corrupt",
        "agg_hdfs",
        _state_snapshot_corrupt,
        "bytes flipped in the LZ4 payload of each partition's newest snapshot (deltas kept)",
    ),
    # RocksDB + changelog checkpointing
    DamageCase(
        "rocksdb_changelog_missing",
        "agg_rocksdb_cl",
        _rocksdb_changelog_missing,
        "a changelog after the newest zip deleted (newest zip deleted first if it covers the latest version)",
    ),
    DamageCase(
        "rocksdb_zips_missing",
        "agg_rocksdb_cl",
        _rocksdb_zips_missing,
        "every RocksDB snapshot zip deleted (changelogs from version 1 remain)",
    ),
    DamageCase(
        "rocksdb_sst_missing",
        "agg_rocksdb_cl",
        _rocksdb_sst_missing,
        "SST files listed by a partition's newest zip deleted",
    ),
    # the file sink's log compaction (filesink_c3: compact interval 3, the restart's batch 8 compacts 5.compact, 6
    # and 7; damage hunt of 2026-11-27, class A): CompactibleFileStreamLog.compact reads every entry since the previous
    # compaction and fails on a missing or damaged one
    DamageCase(
        "filesink_compact_previous_deleted",
        "filesink_c3",
        _sink_compaction_entry(0, remove),
        "the sink log's newest .compact deleted, the restart's batch compacts",
    ),
    DamageCase(
        "filesink_compact_entry_deleted",
        "filesink_c3",
        _sink_compaction_entry(1, remove),
        "the sink log entry after its newest .compact deleted, the restart's batch compacts",
    ),
    DamageCase(
        "filesink_compact_entry_truncated",
        "filesink_c3",
        _sink_compaction_entry(2, _cut_half),
        "the sink log's latest entry cut to half, the restart's batch compacts",
    ),
    DamageCase(
        "filesink_compact_entry_not_utf8",
        "filesink_c3",
        _sink_compaction_entry(1, _not_utf8),
        "a byte of a sink log entry after the newest .compact set to 0xff, the restart's batch compacts",
    ),
    DamageCase(
        "filesink_compact_log_deleted",
        "filesink_c3",
        _sink_log_deleted,
        "the whole _spark_metadata deleted, the restart's batch compacts (interval from the session conf)",
        # the files cannot tell this output from a foreachBatch one without _SUCCESS markers, which no compaction
        # reads (new-user trial of 2026-11-28: --sink on such an output got this error)
        unknown="SINK-LOG-COMPACT",
    ),
    DamageCase(
        "filesink_entry_deleted_later_compaction",
        "filesink",
        _sink_entry_deleted_before_compaction,
        "_spark_metadata/3 deleted; the restart's batch 7 does not compact, batch 9 will",
        expect_rule="SINK-LOG-COMPACT",
    ),
    # state checkpoint format v2: a crash between the file sink's commit of batch L and commits/L (damage hunt of
    # 2026-11-27, V07): the sink skips batch L, the stateful operator reports no checkpoint info
    DamageCase(
        "v2_commit_latest_deleted_sink_holds",
        "dedup_v2_filesink",
        _commit_latest_missing,
        "commits/L (and its .crc) deleted while the file sink holds batch L, state checkpoint format v2",
        versions=frozenset({"4.0", "4.1", "4.2", "4.3"}),
    ),
    DamageCase(
        "v2_commit_latest_ids_dropped",
        "dedup_v2_filesink",
        _v2_commit_ids_dropped,
        "the latest commit without its stateUniqueIds, state checkpoint format v2 (damage hunt of 2026-11-27, V06)",
        versions=frozenset({"4.0", "4.1", "4.2", "4.3"}),
    ),
    DamageCase(
        "v2_commit_latest_relabelled_v1",
        "dedup_v2_filesink",
        _v2_commit_relabelled_v1,
        "the latest commit's header set to v1, its stateUniqueIds kept, state checkpoint format v2 (damage hunt 8)",
        versions=frozenset({"4.0", "4.1", "4.2", "4.3"}),
    ),
    # hand rollback (`rm offsets/<b> commits/<b>`) that leaves state/ as it is: the batches planned again write their
    # state versions anew, but an HDFS snapshot of a version > the rollback point stays and the next run that loads
    # it reads it instead (silently wrong, from the second restart on); so does a RocksDB zip with changelog
    # checkpointing until maintenance uploads the new snapshot (here, with a 200 ms maintenance interval, it always
    # did; with 60 s the second restart was wrong on 4.3.0 and 3.5.9); deltas, changelogs, and zips without
    # changelog checkpointing are written again (state ahead hunt of 2026-11-27)
    DamageCase(
        "state_ahead_snapshot_hand_rollback",
        "agg_hdfs",
        _state_ahead_base("snapshot"),
        "offsets/ and commits/ rolled back by hand to before the newest snapshot's batch, state/ left (two restarts)",
        expect_rule="STATE-AHEAD",
        restarts=2,
    ),
    DamageCase(
        "state_ahead_delta_hand_rollback",
        "agg_hdfs",
        _state_ahead_latest("snapshot"),
        "offsets/L and commits/L deleted by hand, the delta of version L+1 left (two restarts)",
        restarts=2,
    ),
    DamageCase(
        "state_ahead_zip_hand_rollback",
        "agg_rocksdb_cl",
        _state_ahead_base("zip"),
        "offsets/ and commits/ rolled back by hand to before the newest zip's batch, state/ left (two restarts)",
        expect_rule="STATE-AHEAD",
        restarts=2,
    ),
    # state checkpoint format v2: the restarted batches write their versions under new unique ids, which the commit
    # log names; the stale zip keeps its old id and is never loaded (4.3.0 with 60 s maintenance too)
    DamageCase(
        "state_ahead_zip_hand_rollback_v2",
        "agg_v2",
        _state_ahead_base_v2,
        "offsets/ and commits/ rolled back by hand to before the newest zip's batch, state/ left, state checkpoint "
        "format v2 (two restarts)",
        # 4.0.5 restarted it right too, but ckptfix reads its v2 zips' metadata "v2" as too new for 4.0
        versions=frozenset({"4.1", "4.2", "4.3"}),
        restarts=2,
    ),
    DamageCase(
        "state_ahead_changelog_hand_rollback",
        "agg_rocksdb_cl",
        _state_ahead_latest("zip"),
        "offsets/L and commits/L deleted by hand, the changelog of version L+1 left (two restarts)",
        restarts=2,
    ),
    DamageCase(
        "state_ahead_zips_hand_rollback_no_changelog",
        "agg_rocksdb",
        _state_ahead_batches(3),
        "the latest 3 batches deleted from offsets/ and commits/ by hand, their zips left, changelog checkpointing "
        "off (two restarts)",
        restarts=2,
    ),
    # file sink
    DamageCase(
        "filesink_metadata_ahead",
        "filesink",
        _filesink_ahead,
        "offsets/L and commits/L deleted: _spark_metadata has batch L the logs don't (silent loss)",
        expect_rule="SINK-AHEAD",
    ),
]

CASES: dict[str, DamageCase] = {c.name: c for c in _CASES}
assert len(CASES) == len(_CASES), "duplicate case names"
