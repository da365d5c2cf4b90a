"""Log files edited after Spark wrote them: which files of the restart tail differ from their Hadoop ``.crc``
sidecar, and the sidecar ``--accept-edits`` writes for one (``repair`` and ``rollback`` both use them)."""

from __future__ import annotations

from collections.abc import Iterable

from ckptfix import layout
from ckptfix.checkpoint import Checkpoint
from ckptfix.errors import FormatError
from ckptfix.formats import hadoopcrc
from ckptfix.repair.builder import PlanBuilder


def crc_rel(rel: str) -> str:
    parent, _, name = rel.rpartition("/")
    return f"{parent}/{layout.hadoop_crc_name(name)}" if parent else layout.hadoop_crc_name(name)


def edited_logs(ck: Checkpoint) -> list[tuple[str, hadoopcrc.HadoopCrc]]:
    """The files of the restart tail (``metadata``, ``offsets/L``, ``offsets/L-1``, the latest commit) whose bytes
    differ from their ``.crc`` sidecar (an edit after Spark wrote them), with the sidecar read."""
    L, K = ck.offsets.latest, ck.commits.latest
    rels = [ck.metadata_rel] if ck.metadata_rel else []
    for b in (L, None if L is None else L - 1):
        if b is not None and b in ck.offsets.files:
            rels.append(ck.offsets.files[b])
    if K is not None and K in ck.commits.files:
        rels.append(ck.commits.files[K])
    out: list[tuple[str, hadoopcrc.HadoopCrc]] = []
    for rel in rels:
        side = crc_rel(rel)
        if side not in ck.entries:
            continue
        try:
            crc = hadoopcrc.parse(ck.read(side), ck.display(side))
        except FormatError:
            continue  # an unreadable sidecar is a warning, not this error
        if hadoopcrc.first_mismatch(crc, ck.read(rel)) is not None:
            out.append((rel, crc))
    return out


def accept_edit(builder: PlanBuilder, ck: Checkpoint, rel: str, crc: hadoopcrc.HadoopCrc, rule: str) -> None:
    """--accept-edits: plan a sidecar that records ``rel``'s edited bytes (same chunk size as the old one)."""
    builder.write(
        crc_rel(rel),
        hadoopcrc.dump(hadoopcrc.compute(ck.read(rel), crc.bytes_per_checksum)),
        f"--accept-edits: the sidecar now records the edited {rel}",
        rule,
    )


def sidecar_proven(ck: Checkpoint, rel: str, candidates: Iterable[bytes]) -> bytes | None:
    """The candidate whose every 512-byte chunk matches ``rel``'s Hadoop ``.crc`` sidecar: the bytes Spark wrote
    (a CRC32 per chunk identifies them beyond doubt among a handful of candidates), or None (no sidecar, an
    unreadable one, or no candidate matches)."""
    side = crc_rel(rel)
    if side not in ck.entries:
        return None
    try:
        crc = hadoopcrc.parse(ck.read(side), ck.display(side))
    except FormatError:
        return None
    return next((c for c in candidates if hadoopcrc.first_mismatch(crc, c) is None), None)
