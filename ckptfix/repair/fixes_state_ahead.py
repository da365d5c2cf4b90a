"""Planner for STATE-AHEAD: state versions beyond the offset log, left by a hand rollback of offsets/ and commits/.

Every state file of a version > L+1 (L = the latest offset) goes, with the SSTs only their zips list, as
``ckptfix rollback --to-batch L`` would delete them (:func:`ckptfix.repair.rollback.state_deletions`): the batches
Spark plans anew write those versions from the state it loads, and no later load meets a snapshot of the batches
that were rolled back.
"""

from __future__ import annotations

from ckptfix.audit.model import Finding
from ckptfix.errors import CannotFix
from ckptfix.repair.fixes import FixContext, fixes
from ckptfix.repair.rollback import state_deletions


@fixes("STATE-AHEAD")
def state_ahead(fc: FixContext, finding: Finding) -> list[str]:
    L = fc.audit.latest_offset
    if L is None:
        raise CannotFix("the offset log is empty: no batch to keep the state of")
    keep = L + 1
    doomed = state_deletions(fc.ckpt, keep)
    if not doomed:
        raise CannotFix(f"no state file of a version > {keep} (the checkpoint changed?)")
    for rel, what in doomed:
        if fc.builder.touches(rel):  # another planner of this plan deletes it already
            continue
        fc.builder.delete(
            rel,
            f"left by batches after {L}, which Spark plans anew: it writes the version again ({what})",
            finding.rule_id,
        )
    # what Spark loads once the plan is carried out (not before it: a commit beyond L, which LOG-COMMIT-AHEAD's fix
    # deletes in the same plan, makes the audit of the damaged checkpoint re-run batch L): with commits/L it resumes
    # at batch L+1 and loads version L+1, else it re-runs batch L from version L
    loads = keep if L in fc.ckpt.commits.files and not fc.builder.touches(fc.ckpt.commits.files[L]) else L
    return [
        f"state versions > {keep} go (as `ckptfix rollback --to-batch {L}` would): Spark loads state version "
        f"{loads} and writes the later versions again as it runs batch {loads} and the batches after it"
    ]
