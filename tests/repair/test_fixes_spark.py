"""Live proof of the log planners (and the async-gap planner) with the session's PySpark.

For every fix: copy a base checkpoint written by this Spark, damage it with the catalogue's
function, and

1. restart a first damaged copy: Spark fails (or, for an edited file, restarts silently wrong)
   exactly as the catalogue records;
2. on a second damaged copy (same damage): plan, apply, undo, and check that every file has its
   original sha256 again; then apply the same plan once more and restart: Spark succeeds, the
   idempotent foreachBatch sink (``batch_id=N`` overwritten per batch) holds exactly the input
   rows, and the append sink saw no more rows twice than the plan announced.

Why undo comes before the restart: a restart legitimately writes the very files a plan touched
(it re-creates ``commits/6`` the plan deleted, adds ``offsets/7``...), and undo refuses to
overwrite a file that no longer holds what ckptfix wrote. So the byte-exact undo is proven on
the repaired tree before Spark runs, and the restart runs on a second, identical apply of the
same plan (its preconditions hold again because undo restored the damaged bytes).

Expected row counts are written by hand: every input file holds 5 rows (tests/spark/queries.py),
and a base batch n reads exactly file n.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ckptfix.repair import engine
from ckptfix.repair.plan import Plan
from ckptfix.repair.planning import plan_repair
from ckptfix.storage import Location
from tests.spark.damage import CASES
from tests.spark.harness import copy_base, restart
from tests.spark.queries import ROWS_PER_FILE, SCENARIOS, append_dir
from tests.support.trees import tree


@dataclass(frozen=True)
class Live:
    case: str
    fails_with: str | None  # a fragment of Spark's error text; None: restarts but silently wrong
    max_dups: int | None  # rows the append sink may see twice (by hand); None: derived from the async logs
    announced: str = ""  # the words the plan's effects must contain for that replay
    kwargs: dict[str, Any] = field(default_factory=dict)
    exact: bool = True  # the idempotent sink must hold exactly the input rows afterwards
    scenario: str | None = None  # another base than the case's (the damage functions are generic)
    also: tuple[str, ...] = ()  # more catalogue damage applied after the case's (several damages at once)


LIVE: dict[str, Live] = {
    # an older snapshot copied as the newest version's (repair hunt 10, M04/M05): Spark restarts with the updates of the
    # deltas in between dropped; the repair deletes the copy, Spark loads the older snapshot and replays every delta
    "stale_snapshot": Live("state_snapshot_copied_as_newest", None, 0, "and the deltas"),
    # a stateful query's logs of batches L-2, L-1 deleted by hand, L committed (repair hunt 10, A11): offsets/L-1 as a
    # copy of offsets/L; the restart runs batch L+1 on state version L+1, nothing re-runs
    "stateful_gap_committed": Live("two_batches_before_latest_deleted", "batch 6 doesn't exist", 0, "state version 8"),
    "commit_ahead": Live("commit_beyond_latest_offset", "CONCURRENT_STREAM_LOG_UPDATE", 0, "no recorded batch re-runs"),
    # spark.sql.shuffle.partitions edited in offsets/L (.crc dropped, as on S3; new-user trial 3): the repair writes
    # the state's count back, no batch re-runs; up fails loading a partition without state, down is silently wrong
    "shuffle_edited_up": Live(
        "offset_latest_shuffle_partitions_edited_up", "1.delta does not exist", 0, "no batch re-runs"
    ),
    "shuffle_edited_down": Live("offset_latest_shuffle_partitions_edited_down", None, 0, "no batch re-runs"),
    # the state store provider edited in offsets/L (HDFS state, RocksDB named; hunt 13): the audit said the state was
    # lost; the repair writes the previous provider back, no batch re-runs
    "provider_edited": Live("offset_latest_provider_rocksdb_two_operators", "does not exist", 0, "no batch re-runs"),
    # a format-v1 store's newest changelog / zip renamed <v>_<uuid>.* (hunt 13: "the changes are in no other file",
    # and no fix renamed it): the repair gives it its version name back, nothing re-runs
    "v2_named_changelog": Live("v1_newest_changelog_renamed_v2", "8.changelog does not exist", 0, "no batch re-runs"),
    "v2_named_zip": Live("v1_newest_zip_renamed_v2", "NumberFormatException", 0, "no batch re-runs"),
    # format v2: the newest changelog's Spark checksum file emptied (hunt 13: the repair tried a rebuild, failed on that
    # file and advised a rollback); the repair deletes the checksum file, Spark loads the changelog unchecked
    "checksum_file_emptied": Live(
        "v2_newest_changelog_checksum_emptied", "No content to map due to end-of-input", 0, "no batch re-runs"
    ),
    # batch 6's file (5 rows) reaches the sink again under batch id 6
    "offset_deleted": Live("latest_offset_deleted", "CONCURRENT_STREAM_LOG_UPDATE", 5, "1 input file(s)"),
    "offset_empty": Live("offset_latest_empty", "Incomplete log file", 5, "1 input file(s)"),
    "offset_header_only": Live("offset_latest_header_only", "next on empty iterator", 5, "1 input file(s)"),
    # a file source's offset in offsets/L edited below offsets/L-1's, or quoted (repair hunt 13: no planner): the
    # file goes as a damaged offsets/L does, and batch L is planned again from offsets/L-1
    # the latest commit of a format-v2 checkpoint relabelled v1 over its ids (repair hunt 13: "restart with a Spark
    # that reads this version"): 4.0/4.1 refuse the version, 4.2+ load the v1 way; the first line goes back to v2
    "v2_commit_relabelled": Live("v2_commit_latest_relabelled_v1", ".changelog does not exist", 0, "no batch re-runs"),
    "offset_source_backwards": Live("offset_source_moved_back", "assertion failed", 5, "1 input file(s)"),
    # offsets/L's logOffset edited one past the source log's newest entry (hunt 14 on 4.3: repair refused, "sources/0/6
    # exists", an entry batch L had read before the edited end): batch L is planned again from offsets/L-1
    # an operator metadata file that contradicts the state (hunt 14: no planner though the text says deleting it is
    # safe): deleted; Spark 4.x skips the check and writes it again at the first batch
    "opmeta_contradicts": Live(
        "opmeta_name_edited", "STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA", 0, "again at the first batch"
    ),
    "offset_source_forward": Live(
        "offset_source_moved_forward", "don't  exist", 5, "the input files that sources/0/7 listed"
    ),
    "offset_source_string": Live("offset_source_as_string", "No usable value", 5, "1 input file(s)"),
    "commit_empty": Live("commit_latest_empty", "Incomplete log file in the offset commit log", 0, "no batch re-runs"),
    "commit_empty_rerun": Live(
        "commit_latest_empty",
        "Incomplete log file in the offset commit log",
        5,
        "1 input file(s)",
        {"strategy": "truncate"},
    ),
    "no_batch_metadata": Live("offset_latest_metadata_empty", "WatermarkTracker", 0, "no batch re-runs"),
    "metadata_missing": Live(
        "metadata_missing", "STREAMING_CHECKPOINT_MISSING_METADATA_FILE", 0, "no batch re-runs", {"query_id": True}
    ),
    "metadata_truncated": Live("metadata_truncated", "JsonEOFException", 0, "no batch re-runs", {"query_id": True}),
    "crc_edited": Live("offset_latest_edited_stale_crc", None, 5, "1 input file(s)"),
    # --accept-edits keeps logOffset 5 in offsets/6: batch 7 re-reads file 6, as the plan warns
    "crc_edited_accepted": Live(
        "offset_latest_edited_stale_crc", None, 5, "moved back re-reads data", {"accept_edits": True}, exact=False
    ),
    # the file sink (exactly once through _spark_metadata): the rewritten commit, and the re-run that the sink skips
    "filesink_commit_empty": Live(
        "commit_latest_empty",
        "Incomplete log file in the offset commit log",
        0,
        "no batch re-runs",
        scenario="filesink",
    ),
    "filesink_commit_empty_rerun": Live(
        "commit_latest_empty",
        "Incomplete log file in the offset commit log",
        0,
        "a file sink skips it",
        {"strategy": "truncate"},
        scenario="filesink",
    ),
    # a version header no Spark writes is damage (LOG-UNREADABLE), fixed like an unreadable latest file
    "offset_v99": Live("offset_latest_v99", "INVALID_LOG_VERSION", 5, "1 input file(s)"),
    "commit_v99": Live("commit_latest_v99", "INVALID_LOG_VERSION", 0, "no batch re-runs"),
    "noncanonical": Live("offset_noncanonical_name", "FileNotFoundException", 0, "nothing re-runs"),
    # a deleted entry's .crc left behind: the repair deletes the sidecar; Spark then re-runs batch L (5 rows again)
    "commit_deleted_crc_left": Live(
        "commit_latest_deleted_crc_left", "Multiple streaming queries are concurrently using", 5, "re-runs it"
    ),
    # offsets/L and commits/L gone: Spark plans batch L again from offsets/L-1 (batch L's file again: 5 rows)
    "batch_deleted_crcs_left": Live(
        "latest_batch_deleted_crcs_left",
        "Multiple streaming queries are concurrently using",
        5,
        "is planned anew from offsets/5",
        scenario="stateless",
    ),
    # the file source's entry of batch L gone: offsets/L and commits/L go, Spark plans batch L again and lists its file
    # again (5 rows twice in the append sink); with the entry's .crc left, the sidecar goes too
    "source_entry_missing": Live("source_log_latest_missing", "doesn't exist", 5, "no longer known as read"),
    "source_entry_missing_crc_left": Live(
        "source_log_latest_deleted_crc_left", "doesn't exist", 5, "no longer known as read"
    ),
    # several damages at once (repair sweep of 2026-11-27): one plan, batch 6 planned again (file 6 read twice)
    "offset_and_commit_empty": Live(
        "offset_latest_empty", "Incomplete log file", 5, "1 input file(s)", also=("commit_latest_empty",)
    ),
    "commit_empty_source_entry_gone": Live(
        "commit_latest_empty",
        "Incomplete log file in the offset commit log",
        5,
        "no longer known as read",
        also=("source_log_latest_deleted_crc_left",),
    ),
    # offsets/6 and commits/5 deleted: commits/6 goes, batch 5 re-runs and batch 6 (sources/0/6 kept) is planned anew:
    # files 5 and 6 reach the append sink twice, both announced
    "offset_and_prev_commit_deleted": Live(
        "latest_offset_deleted",
        "CONCURRENT_STREAM_LOG_UPDATE",
        10,
        "batch 6 ran before its offset file was lost",
        also=("commit_latest_missing",),
    ),
    "commit_ahead_offset_empty": Live(
        "commit_beyond_latest_offset", "Incomplete log file", 5, "1 input file(s)", also=("offset_latest_empty",)
    ),
    # the existing LOG-ASYNC-GAP planner, both strategies, committed and uncommitted latest batch
    "async_gap": Live("async_sparse_gap", "doesn't exist", None, "", exact=False),
    "async_gap_truncate": Live("async_sparse_gap", "doesn't exist", None, "", {"strategy": "truncate"}, exact=False),
    # 4.2+: an uncommitted latest batch meets the repartition check first: "Previous batch L-1 not found"
    "async_uncommitted": Live("async_sparse_uncommitted", "Previous batch", None, "", exact=False),
    "async_uncommitted_truncate": Live(
        "async_sparse_uncommitted", "Previous batch", None, "", {"strategy": "truncate"}, exact=False
    ),
}


def _ids(output: Path) -> list[int]:
    ids: list[int] = []
    for part in sorted(output.rglob("part-*")):
        if part.name.endswith(".crc"):
            continue
        ids += [int(json.loads(line)["id"]) for line in part.read_text().splitlines() if line.strip()]
    return ids


def _input_ids(input_dir: Path) -> set[int]:
    return set(_ids_of_files(sorted(input_dir.glob("part-*.json"))))


def _ids_of_files(paths: list[Path]) -> list[int]:
    out: list[int] = []
    for p in paths:
        out += [int(json.loads(line)["id"]) for line in p.read_text().splitlines() if line.strip()]
    return out


def _log_offset(ckpt: Path, batch: int) -> int:
    return int(json.loads((ckpt / "offsets" / str(batch)).read_text().split("\n")[2])["logOffset"])


def _async_replay_bound(ckpt: Path, input_dir: Path) -> int:
    """Rows the async restart may deliver again: every input file the base run processed after the
    oldest offset the repaired logs can restart from (its files sit beyond that logOffset). Counted
    from the checkpoint's files and the input, by hand, not by ckptfix."""
    offsets = sorted(int(p.name) for p in (ckpt / "offsets").iterdir() if p.name.isdigit())
    start = min(_log_offset(ckpt, b) for b in offsets[-2:])  # the restart starts at or after this offset
    base_files = len(list(input_dir.glob("part-*.json"))) - 1  # the restart added one file
    return ROWS_PER_FILE * max(0, base_files - 1 - start)


def _plan(ckpt: Path, spec: Live, query_id: str, sink: Path | None) -> Plan:
    options: dict[str, Any] = {}
    if spec.kwargs.get("query_id"):
        options["query_id"] = query_id
    if spec.kwargs.get("accept_edits"):
        options["accept_edits"] = True
    strategy = spec.kwargs.get("strategy", "least-reprocessing")
    plan, _report, unfixed = plan_repair(
        str(ckpt), "4.3", strategy=strategy, options=options, sink_path=None if sink is None else str(sink)
    )
    assert not plan.empty, unfixed
    assert unfixed == [], unfixed
    return plan


@pytest.mark.spark
@pytest.mark.parametrize("name", sorted(LIVE))
def test_fix_then_restart_with_spark(
    name: str, spark: Any, spark_version: str, spark_bases: Any, tmp_path: Path
) -> None:
    spec = LIVE[name]
    case = CASES[spec.case]
    scenario = spec.scenario or case.scenario
    file_sink = SCENARIOS[scenario].sink == "file"
    base = spark_bases(scenario)
    query_id = json.loads((base[0] / "metadata").read_text())["id"]

    # 1. the damage alone, restarted by Spark
    bad, input_dir, bad_out = copy_base(base, tmp_path / "damaged")
    case.apply(bad)
    for more in spec.also:
        CASES[more].apply(bad)
    before = restart(spark, scenario, bad, input_dir, bad_out)
    if spec.fails_with is None:
        assert before.ok and before.correct is False, f"expected a silently wrong restart: {before.detail}"
    else:
        assert not before.ok, "the damage alone should stop Spark"
        assert spec.fails_with in before.text, before.text[:1500]

    # 2. the same damage on a second copy: plan, apply, undo (exact), apply again, restart
    ckpt, input_dir, out = copy_base(base, tmp_path / "fixed")
    case.apply(ckpt)
    for more in spec.also:
        CASES[more].apply(ckpt)
    damaged_tree = tree(ckpt)
    plan = _plan(ckpt, spec, query_id, out if file_sink else None)
    if spec.announced:
        assert spec.announced in " | ".join(plan.effects), plan.effects
    loc, backup = Location(str(ckpt)), Location(str(tmp_path / "backup"))
    # force (apply and undo): the base was written by Spark and damaged seconds ago, so the 120 s idle check
    # would (rightly) take the fresh files for a live query. Nothing runs on this private copy: skipped on purpose.
    engine.apply(plan, loc, backup, force=True)
    repaired_tree = tree(ckpt)
    assert repaired_tree != damaged_tree
    engine.undo(loc, backup, force=True)
    assert tree(ckpt) == damaged_tree, "undo must restore every file's original bytes"
    engine.apply(plan, loc, backup, force=True)
    assert tree(ckpt) == repaired_tree

    if file_sink or SCENARIOS[scenario].stateful:
        # exactly once through _spark_metadata (the harness reads the committed parquet files); a stateful query's
        # output is checked by its scenario (aggregates against the input)
        after = restart(spark, scenario, ckpt, input_dir, out, new_files=0)
        assert after.ok, after.text[:2000]
        assert after.correct is True, after.detail
        return
    appended_before = _ids(append_dir(out))
    assert len(appended_before) == len(set(appended_before)), "the base's append sink starts exactly once"
    limit = spec.max_dups if spec.max_dups is not None else _async_replay_bound(ckpt, input_dir)
    after = restart(spark, scenario, ckpt, input_dir, out, new_files=0)  # part-<base> exists since step 1
    assert after.ok, after.text[:2000]
    if spec.kwargs.get("query_id"):
        assert after.query_id == query_id

    want = _input_ids(input_dir)
    idem = _ids(out)
    assert want <= set(idem), f"rows lost: {sorted(want - set(idem))[:20]}"
    if spec.exact:
        assert after.correct is True, after.detail
        assert sorted(idem) == sorted(want)
    appended = _ids(append_dir(out))
    assert want <= set(appended), f"rows lost in the append sink: {sorted(want - set(appended))[:20]}"
    dups = len(appended) - len(set(appended))
    print(f"{name}: batches {after.batches}, append sink {len(appended)} rows, {dups} twice (limit {limit})")
    assert dups <= limit, f"append sink saw {dups} rows twice, the plan allowed {limit}"
    if name == "crc_edited_accepted":
        assert dups == ROWS_PER_FILE  # file 6 read again, as the --accept-edits effect says
