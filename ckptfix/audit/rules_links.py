"""Symbolic links that lead out of the checkpoint (local trees).

ckptfix lists a local checkpoint without following such a link: it never reads, copies, rewrites or deletes
through one (a rollback that followed a link deleted files outside the tree before, issue 16 #7). Spark
follows links like any other path, so what it reads there is outside what ckptfix checked.
"""

from __future__ import annotations

from collections.abc import Iterator

from ckptfix.audit.context import AuditContext
from ckptfix.audit.model import Evidence, Finding
from ckptfix.audit.registry import check, define

LINK_OUTSIDE = define(
    "CKPT-LINK-OUTSIDE",
    "warning",
    "A symbolic link in the checkpoint leads outside it",
    "ckptfix neither reads nor writes through a link that leaves the checkpoint (its verdict does not cover what "
    "lies there); Spark follows it.",
    "Replace the link with the files it points to (a copy inside the checkpoint), or remove it if it does not "
    "belong there; then audit again.",
)


@check
def outside_links(ctx: AuditContext) -> Iterator[Finding]:
    loc = ctx.ckpt.location
    for rel, real in sorted(loc.outside_links.items()):
        yield LINK_OUTSIDE.finding(
            f"{rel} is a symbolic link to {real}, outside the checkpoint: not read, not written",
            [Evidence(loc.display(rel), expected=f"a file or directory inside {loc.url}", found=f"a link to {real}")],
        )
