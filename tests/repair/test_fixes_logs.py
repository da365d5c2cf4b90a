"""The log planners (ckptfix/repair/fixes_logs.py) on real checkpoints, without Spark.

Checkpoints: the Spark 3.5.9 tarballs (``stateless``: offsets and commits 0..6, file source
``sources/0`` 0..6 with one input file per batch; ``filesink``: the same with a parquet sink
whose ``_spark_metadata`` holds 0..6; ``agg_hdfs``: a stateful aggregation, batches 0..7) and
``samples/async-sparse`` (rate source, async tracking: offsets = commits = {0,1,3,...,29,31}).
They are damaged with the catalogue's own functions (tests/spark/damage.py). Every expected
action, byte string and refusal below is written by hand from the damage, never computed by
the code under test. Then: apply + undo restores every file's sha256, locally and on S3.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ckptfix.audit import audit
from ckptfix.errors import UsageError
from ckptfix.repair import engine
from ckptfix.repair.plan import Plan, Unfixed
from ckptfix.repair.planning import plan_repair
from ckptfix.storage import Location
from tests.spark.damage import CASES
from tests.support.cli import run_cli
from tests.support.trees import hadoop_crc, s3_tree, tree
from tests.unit.realckpt import sample_checkpoint

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "spark-3.5.9"
QUERY_ID = "f405cca0-6611-4197-acb2-ea3f2b8bf4bf"  # metadata of the 3.5.9 stateless tarball
COMMIT_WM0 = b'v1\n{"nextBatchWatermarkMs":0}'  # what Spark 3.5.9 wrote as every commit of that query


def extract(scenario: str, dest: Path) -> tuple[Path, Path]:
    with tarfile.open(FIXTURES / f"{scenario}.tar.gz") as tar:
        tar.extractall(dest, filter="data")
    return dest / "ckpt", dest / "output"


SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def damaged(tmp_path: Path, case: str) -> Path:
    c = CASES[case]
    ckpt, _ = extract(c.scenario, tmp_path / "x")
    c.apply(ckpt)
    return ckpt


def ops(plan: Plan) -> list[tuple[str, str]]:
    return [(a.op, a.path) for a in plan.actions]


def plan_of(ckpt: Path, target: str = "4.3", **kw: Any) -> tuple[Plan, list[str]]:
    """The plan and what it leaves unfixed, as the lines ``repair`` prints after "not fixed"."""
    plan, _report, unfixed = plan_repair(str(ckpt), target, **kw)
    return plan, [str(u) for u in unfixed]


def content(plan: Plan, path: str) -> bytes | None:
    return next(a.content for a in plan.actions if a.path == path)


def one_effect(plan: Plan, *words: str) -> None:
    text = " | ".join(plan.effects)
    for w in words:
        assert w in text, f"{w!r} not in effects: {text}"


# -- LOG-COMMIT-AHEAD ------------------------------------------------------------------------


def test_commit_beyond_latest_offset_is_deleted_and_nothing_reruns(tmp_path: Path) -> None:
    ckpt = damaged(tmp_path, "commit_beyond_latest_offset")  # commits/7 = copy of commits/6, no sidecar
    plan, unfixed = plan_of(ckpt)
    assert unfixed == []
    assert plan.fixes == ("LOG-COMMIT-AHEAD",)
    assert ops(plan) == [("delete", "commits/7")]
    one_effect(plan, "resumes at batch 7", "no recorded batch re-runs")


def test_latest_offset_deleted_drops_its_commit_and_names_the_replayed_file(tmp_path: Path) -> None:
    ckpt = damaged(tmp_path, "latest_offset_deleted")  # offsets 0..5, commits 0..6
    plan, unfixed = plan_of(ckpt)
    assert unfixed == []
    assert ops(plan) == [("delete", "commits/6"), ("delete", "commits/.6.crc")]
    # sources/0/6 lists part-0006.json for logOffset 6; offsets/5 ends at logOffset 5. Planned anew, batch 6 also
    # takes a new file the source lists at the restart (damage hunt 7, F4: Spark's batch 3 read entries 3..4)
    one_effect(plan, "resumes at batch 6", "1 input file(s) of sources/0 (entries 6..6)", "boundaries after it shift")


def test_a_committed_batch_whose_offset_file_is_lost_warns_of_an_exactly_once_sink(tmp_path: Path) -> None:
    """New-user trial: a truncated offsets/11 warned that a file sink or Delta table skips the re-planned batch 11;
    offsets/11 deleted (commits/11 left) plans the same re-run and said nothing, while claiming "no recorded batch
    re-runs". Both now carry the same warning."""
    ckpt = tmp_path / "ck"
    shutil.copytree(SAMPLES / "rocksdb-changelog", ckpt)
    (ckpt / "offsets" / "11").unlink()
    (ckpt / "offsets" / ".11.crc").unlink()
    plan, unfixed = plan_of(ckpt)
    assert unfixed == [] and "LOG-COMMIT-AHEAD" in plan.fixes
    one_effect(plan, "batch 11 ran before its offset file was lost", "NOT CHECKED without --sink: batch 11")
    assert not any("no recorded batch re-runs" in e for e in plan.effects), plan.effects


MATRIX = Path(__file__).resolve().parents[1] / "fixtures" / "matrix"


def _state_versions(ckpt: Path) -> set[int]:
    """Every state version a file under state/ is written for, read off the names by hand (``N.delta``,
    ``N.snapshot``, ``N.zip``, ``N.changelog``, and ``N_<uuid>.*`` of checkpoint format v2)."""
    out = set()
    for f in (ckpt / "state").rglob("*"):
        head = f.name.split(".")[0].split("_")[0]
        if f.is_file() and not f.name.startswith(".") and f.parent.name != "SSTs" and head.isdigit():
            out.add(int(head))
    return out


def _apply(ckpt: Path, plan: Plan) -> None:
    engine.apply(plan, Location(str(ckpt)), Location(str(ckpt.parent / "backup")), force=True)  # copied just now


def test_commit_ahead_of_a_lost_offset_rolls_back_the_state_that_batch_wrote(tmp_path: Path) -> None:
    """Spark 4.3.0 agg_hdfs ran batches 0..2 (state versions 1..3, 3.snapshot too); offsets/2 is lost. Deleting
    commits/2 makes Spark plan batch 2 anew on new input: it rewrites 3.delta, but a 3.snapshot left from the
    lost batch 2 would be preferred on the next load (silently wrong state). Version 3 goes with commits/2."""
    with tarfile.open(MATRIX / "4.3.0" / "agg_hdfs.tar.gz") as tar:
        tar.extractall(tmp_path / "x", filter="data")
    ckpt = tmp_path / "x" / "ckpt"
    (ckpt / "offsets" / "2").unlink()
    (ckpt / "offsets" / ".2.crc").unlink()
    plan, unfixed = plan_of(ckpt)
    assert unfixed == []
    expected = [("delete", "commits/2"), ("delete", "commits/.2.crc")]
    expected += [
        ("delete", f"state/0/{n}/{f}")
        for n in (0, 1)
        for f in ("3.delta", ".3.delta.crc", "3.snapshot", ".3.snapshot.crc")
    ]
    assert sorted(ops(plan)) == sorted(expected)
    one_effect(plan, "already written state version 3", "loads state version 2")
    _apply(ckpt, plan)
    assert _state_versions(ckpt) == {1, 2}
    after = audit(str(ckpt), "4.3")
    assert after.verdict.restarts and after.facts["state_version"] == 2


def test_commit_ahead_of_a_lost_offset_on_rocksdb_drops_the_newest_zip(tmp_path: Path) -> None:
    """samples/rocksdb-changelog: commits 0..11, state versions 1..12 (12.zip, 12.changelog). offsets/11 lost:
    commits/11 goes, and with it version 12 and the SST only 12.zip lists (000012-*: 3/6/9.zip list 8, 9, 10)."""
    ckpt = tmp_path / "ckpt"
    shutil.copytree(SAMPLES / "rocksdb-changelog", ckpt)
    (ckpt / "offsets" / "11").unlink()
    (ckpt / "offsets" / ".11.crc").unlink()
    plan, unfixed = plan_of(ckpt)
    assert unfixed == []
    ssts = {0: "000012-13ff46f1-a2d6-457b-85f4-0b6ba223f1e6.sst", 1: "000012-0296eff8-c883-4de7-84cb-1f0e5bb7f070.sst"}
    expected = [("delete", "commits/11"), ("delete", "commits/.11.crc")]
    for n, sst in ssts.items():
        expected += [
            ("delete", f"state/0/{n}/{f}")
            for f in ("12.zip", ".12.zip.crc", "12.changelog", ".12.changelog.crc", f"SSTs/{sst}", f"SSTs/.{sst}.crc")
        ]
    assert sorted(ops(plan)) == sorted(expected)
    _apply(ckpt, plan)
    assert max(_state_versions(ckpt)) == 11
    assert audit(str(ckpt), "4.3").facts["state_version"] == 11


def test_two_fixes_of_one_resume_say_it_once(tmp_path: Path) -> None:
    """samples/async-sparse without offsets/31: LOG-ASYNC-GAP (offsets/28 missing) and LOG-COMMIT-AHEAD (commits/31)
    are fixed in one plan, after which Spark resumes at batch 30 (commits/29 exists). Both planners found that
    resume; the plan says it once, in one wording."""
    ckpt = tmp_path / "ckpt"
    shutil.copytree(sample_checkpoint(), ckpt)
    (ckpt / "offsets" / "31").unlink()
    plan, unfixed = plan_of(ckpt)
    assert unfixed == []
    # offsets/.31.crc, left by the deleted offsets/31, goes too: Spark would trip on it when it writes offsets/31
    assert sorted(ops(plan)) == [
        ("delete", "commits/.31.crc"),
        ("delete", "commits/31"),
        ("delete", "offsets/.31.crc"),
        ("write", "offsets/28"),
    ]
    resumes = [e for e in plan.effects if "resumes at batch" in e]
    assert resumes == ["Spark resumes at batch 30 from the offsets of batch 29; no recorded batch re-runs"], resumes
    assert len(plan.effects) == len(set(plan.effects)), plan.effects


def test_commit_ahead_refuses_a_state_pointer(tmp_path: Path) -> None:
    ckpt = damaged(tmp_path, "commit_beyond_latest_offset")
    (ckpt / "commits" / "7").write_bytes(b'v2\n{"nextBatchWatermarkMs":0,"stateUniqueIds":{"0":[["a"],["b"]]}}')
    plan, unfixed = plan_of(ckpt)
    assert plan.empty
    assert len(unfixed) == 1 and unfixed[0].startswith("LOG-COMMIT-AHEAD: commits/7 carries stateUniqueIds")


def test_commit_ahead_refuses_to_replan_what_the_file_sink_holds(tmp_path: Path) -> None:
    c = CASES["latest_offset_deleted"]
    ckpt, output = extract("filesink", tmp_path / "x")  # _spark_metadata 0..6
    c.apply(ckpt)
    plan, unfixed = plan_of(ckpt, sink_path=str(output))
    assert plan.empty
    assert any(u.startswith("LOG-COMMIT-AHEAD: deleting the commits") and "up to 6" in u for u in unfixed), unfixed


def test_commit_ahead_with_an_async_gap_is_one_plan(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    shutil.copytree(sample_checkpoint(), ckpt)
    CASES["commit_beyond_latest_offset"].apply(ckpt)  # commits/32 next to offsets ..29, 31
    plan, unfixed = plan_of(ckpt)
    assert unfixed == []
    assert sorted(plan.fixes) == ["LOG-ASYNC-GAP", "LOG-COMMIT-AHEAD"]
    assert sorted(ops(plan)) == [("delete", "commits/32"), ("write", "offsets/30")]
    assert content(plan, "offsets/30") == (ckpt / "offsets" / "31").read_bytes()


# -- LOG-UNREADABLE / LOG-NO-BATCH-METADATA -------------------------------------------------

DROP_6 = [
    ("delete", "offsets/6"),
    ("delete", "offsets/.6.crc"),
    ("delete", "commits/6"),
    ("delete", "commits/.6.crc"),
]


@pytest.mark.parametrize(
    "case",
    [
        "offset_latest_empty",
        "offset_latest_header_only",
        "offset_latest_metadata_truncated",
        "offset_latest_bad_header",
    ],
)
def test_damaged_latest_offset_is_planned_again(tmp_path: Path, case: str) -> None:
    ckpt = damaged(tmp_path, case)  # offsets/6 damaged; batch 6 was committed
    plan, unfixed = plan_of(ckpt)
    assert unfixed == []
    assert plan.fixes == ("LOG-UNREADABLE",)
    assert ops(plan) == DROP_6
    one_effect(plan, "plans batch 6 again from offsets/5", "1 input file(s) of sources/0 (entries 6..6)")


def test_damaged_previous_offset_of_a_committed_batch_becomes_a_copy(tmp_path: Path) -> None:
    ckpt, _ = extract("stateless", tmp_path / "x")
    (ckpt / "offsets" / "5").write_bytes(b"")  # offsets/6 and commits/6 intact: batch 6 is committed
    plan, unfixed = plan_of(ckpt)
    assert unfixed == []
    assert ops(plan) == [("write", "offsets/5"), ("write", "offsets/.5.crc")]
    six = (ckpt / "offsets" / "6").read_bytes()
    assert content(plan, "offsets/5") == six and content(plan, "offsets/.5.crc") == hadoop_crc(six)
    one_effect(plan, "resumes at batch 7")


def test_damaged_previous_offset_of_an_uncommitted_batch_is_refused(tmp_path: Path) -> None:
    ckpt = damaged(tmp_path, "commit_latest_missing")  # batch 6 in flight
    (ckpt / "offsets" / "5").write_bytes(b"v1")
    plan, unfixed = plan_of(ckpt)
    assert plan.empty
    assert unfixed == [
        "LOG-UNREADABLE: offsets/5 is damaged and batch 6 is not committed: it is the start of batch 6's range; "
        "restore it"
    ]


def test_what_stays_unfixed_is_a_value_in_the_api_json_and_text(tmp_path: Path) -> None:
    """The refusal above as a value (rule, reason, the finding's file); ``repair -f json`` prints the same fields
    as an object, the text output the same "not fixed RULE-ID: reason" line as ever."""
    ckpt = damaged(tmp_path, "commit_latest_missing")
    (ckpt / "offsets" / "5").write_bytes(b"v1")
    reason = "offsets/5 is damaged and batch 6 is not committed: it is the start of batch 6's range; restore it"
    _plan, _report, unfixed = plan_repair(str(ckpt), "4.3")
    assert unfixed == [Unfixed("LOG-UNREADABLE", reason, f"{ckpt}/offsets/5")]
    doc = json.loads(_cli("repair", str(ckpt), "-f", "json", "-q").stdout)
    assert doc["unfixed"] == [{"rule_id": "LOG-UNREADABLE", "reason": reason, "path": f"{ckpt}/offsets/5"}]
    assert f"\nnot fixed LOG-UNREADABLE: {reason}\n" in _cli("repair", str(ckpt)).stdout


def test_damaged_latest_offset_refused_when_the_file_sink_holds_it(tmp_path: Path) -> None:
    ckpt, output = extract("filesink", tmp_path / "x")
    CASES["offset_latest_empty"].apply(ckpt)
    plan, unfixed = plan_of(ckpt, sink_path=str(output))
    assert plan.empty
    assert any(u.startswith("LOG-UNREADABLE: offsets/6 is damaged: Spark would plan batch 6 anew") for u in unfixed)


def test_damaged_latest_offset_whose_state_exists_is_rolled_back_with_it(tmp_path: Path) -> None:
    """Repair completeness (issue 16): where the safe fix is a rollback, repair plans it itself. Batch 7 wrote
    state version 8 (8.delta in partitions 0..2); planning batch 7 again needs version 8 gone, as
    `rollback --to-batch 6` would remove it, and nothing else."""
    ckpt, _ = extract("agg_hdfs", tmp_path / "x")  # batches 0..7; batch 7 wrote state version 8
    CASES["offset_latest_empty"].apply(ckpt)
    plan, unfixed = plan_of(ckpt)
    assert unfixed == []
    expected = [("delete", p) for p in ("offsets/7", "offsets/.7.crc", "commits/7", "commits/.7.crc")]
    expected += [("delete", f"state/0/{n}/{f}") for n in (0, 1, 2) for f in ("8.delta", ".8.delta.crc")]
    assert sorted(ops(plan)) == sorted(expected)
    one_effect(plan, "already written state version 8", "loads state version 7")


def test_damaged_latest_commit_is_rewritten_without_watermark(tmp_path: Path) -> None:
    ckpt = damaged(tmp_path, "commit_latest_empty")  # commits/6 0 bytes, its .crc still the original
    original_crc = (ckpt / "commits" / ".6.crc").read_bytes()
    plan, unfixed = plan_of(ckpt)
    assert unfixed == []
    # the rewritten commit is byte for byte the one Spark wrote: its sidecar already records it and stays (a plan
    # lists no action that changes nothing)
    assert ops(plan) == [("write", "commits/6")]
    assert content(plan, "commits/6") == COMMIT_WM0
    assert original_crc == hadoop_crc(COMMIT_WM0)
    one_effect(plan, "resumes at batch 7", "no batch re-runs")


def test_damaged_latest_commit_truncate_strategy_reruns_the_batch(tmp_path: Path) -> None:
    ckpt = damaged(tmp_path, "commit_latest_empty")
    plan, unfixed = plan_of(ckpt, strategy="truncate")
    assert unfixed == []
    assert ops(plan) == [("delete", "commits/6"), ("delete", "commits/.6.crc")]
    # batch 6 re-runs offsets/5 -> offsets/6: logOffset 5 -> 6, one file
    one_effect(plan, "re-runs batch 6 with its recorded offsets", "1 input file(s) of sources/0 (entries 6..6)")


def test_damaged_commit_of_the_batch_before_the_latest_is_rewritten(tmp_path: Path) -> None:
    ckpt = damaged(tmp_path, "commit_latest_missing")  # commits 0..5, offsets 0..6
    (ckpt / "commits" / "5").write_bytes(b'v1\n{"nextBatch')
    plan, unfixed = plan_of(ckpt)
    assert unfixed == []
    assert ops(plan) == [("write", "commits/5")]  # its sidecar records what Spark wrote, the bytes written again
    assert content(plan, "commits/5") == COMMIT_WM0  # batchWatermarkMs of offsets/6 is 0
    assert (ckpt / "commits" / ".5.crc").read_bytes() == hadoop_crc(COMMIT_WM0)
    one_effect(plan, "re-runs batch 6 from offsets/5 to offsets/6")


def test_empty_metadata_line_is_rebuilt_from_the_previous_batch(tmp_path: Path) -> None:
    ckpt = damaged(tmp_path, "offset_latest_metadata_empty")
    prev = (ckpt / "offsets" / "5").read_text().split("\n")
    plan, unfixed = plan_of(ckpt)
    assert unfixed == []
    # the damage left offsets/.6.crc stale: rewriting offsets/6 regenerates it, which answers LOG-CRC-MISMATCH too
    assert plan.fixes == ("LOG-NO-BATCH-METADATA", "LOG-CRC-MISMATCH")
    assert ops(plan) == [("write", "offsets/6"), ("write", "offsets/.6.crc")]
    written = (content(plan, "offsets/6") or b"").decode().split("\n")
    assert written[0] == "v1" and written[2] == '{"logOffset":6}' and len(written) == 3
    meta, want = json.loads(written[1]), json.loads(prev[1])
    assert meta == want  # offsets/5: batchWatermarkMs 0 (= commits/5's next watermark), its conf and timestamp
    one_effect(plan, "resumes at batch 7")


def test_empty_metadata_line_of_an_uncommitted_batch_keeps_its_offsets(tmp_path: Path) -> None:
    ckpt = damaged(tmp_path, "offset_latest_metadata_empty")
    CASES["commit_latest_missing"].apply(ckpt)  # commits 0..5: batch 6 in flight
    plan, unfixed = plan_of(ckpt)
    assert unfixed == []
    assert ops(plan) == [("write", "offsets/6"), ("write", "offsets/.6.crc")]
    assert (content(plan, "offsets/6") or b"").endswith(b'\n{"logOffset":6}')
    one_effect(plan, "re-runs batch 6 with its recorded offsets", "1 input file(s) of sources/0 (entries 6..6)")


# -- META-MISSING / META-UNREADABLE ------------------------------------------------------------


@pytest.mark.parametrize("case", ["metadata_missing", "metadata_empty", "metadata_braces", "metadata_truncated"])
def test_metadata_restored_from_query_id_option(tmp_path: Path, case: str) -> None:
    ckpt = damaged(tmp_path, case)
    plan, unfixed = plan_of(ckpt, options={"query_id": QUERY_ID.upper()})
    assert unfixed == []
    assert content(plan, "metadata") == b'{"id":"f405cca0-6611-4197-acb2-ea3f2b8bf4bf"}'
    # the id is the one Spark wrote, so the bytes are too: a sidecar left by the damage already records them
    assert [p for _, p in ops(plan) if p != "metadata"] == []
    crc = ckpt / ".metadata.crc"
    assert not crc.exists() or crc.read_bytes() == hadoop_crc(b'{"id":"f405cca0-6611-4197-acb2-ea3f2b8bf4bf"}')


def test_metadata_refused_without_an_id(tmp_path: Path) -> None:
    ckpt = damaged(tmp_path, "metadata_missing")
    for target, says in (("3.5", "silently starts the query under a NEW id"), ("4.3", "refuses to start")):
        plan, unfixed = plan_of(ckpt, target)
        assert plan.empty
        assert len(unfixed) == 1 and unfixed[0].startswith("META-MISSING: the query id is unknown: pass --query-id")
        assert says in unfixed[0] and "exactly-once sinks" in unfixed[0]


NOT_A_UUID = (
    "--query-id: expected a UUID like Spark's metadata id (6f1c2a4e-0b9d-4c3e-8f7a-1d2e3f405162), found 'my-query'"
)


def test_a_query_id_that_is_no_uuid_is_a_usage_error(tmp_path: Path) -> None:
    """Refused before anything is planned (exit 2, one line), whether the metadata needs the id or not."""
    ckpt = damaged(tmp_path, "metadata_missing")
    with pytest.raises(UsageError) as refused:
        plan_of(ckpt, options={"query_id": "my-query"})
    assert str(refused.value) == NOT_A_UUID
    proc = _cli("repair", str(ckpt), "--query-id", "my-query")
    assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", f"ckptfix: error: {NOT_A_UUID}\n")
    healthy, _ = extract("stateless", tmp_path / "healthy")
    proc = _cli("repair", str(healthy), "--query-id", "my-query")
    assert (proc.returncode, proc.stderr) == (2, f"ckptfix: error: {NOT_A_UUID}\n")


def test_metadata_restored_from_an_earlier_ckptfix_run(tmp_path: Path) -> None:
    ckpt = damaged(tmp_path, "commit_latest_empty")
    first, _ = plan_of(ckpt)
    assert first.query_id == QUERY_ID
    engine.apply(first, Location(str(ckpt)), Location(engine.default_backup_url(str(ckpt))), force=True)
    CASES["metadata_missing"].apply(ckpt)  # metadata and .metadata.crc deleted
    plan, unfixed = plan_of(ckpt)
    assert unfixed == []
    assert ops(plan) == [("write", "metadata")]
    assert content(plan, "metadata") == b'{"id":"f405cca0-6611-4197-acb2-ea3f2b8bf4bf"}'
    one_effect(plan, "ckptfix's records", "/_ckptfix/runs/")


# -- LOG-CRC-MISMATCH ------------------------------------------------------------------------


def test_edited_committed_offset_is_replanned(tmp_path: Path) -> None:
    ckpt = damaged(tmp_path, "offset_latest_edited_stale_crc")  # offsets/6 says logOffset 5 now
    plan, unfixed = plan_of(ckpt)
    assert unfixed == []
    assert plan.fixes == ("LOG-CRC-MISMATCH",)
    assert ops(plan) == DROP_6
    one_effect(plan, "plans batch 6 again from offsets/5", "stays in the backup", "--accept-edits")


def test_edited_offset_kept_only_with_accept_edits(tmp_path: Path) -> None:
    ckpt = damaged(tmp_path, "offset_latest_edited_stale_crc")
    edited = (ckpt / "offsets" / "6").read_bytes()
    plan, unfixed = plan_of(ckpt, options={"accept_edits": True})
    assert unfixed == []
    assert ops(plan) == [("write", "offsets/.6.crc")]
    assert content(plan, "offsets/.6.crc") == hadoop_crc(edited)
    one_effect(plan, "Spark uses the edited offsets/6", "batch 7 starts from the edited offsets")


def test_edited_commit_of_an_uncommitted_batch_needs_accept_edits(tmp_path: Path) -> None:
    ckpt = damaged(tmp_path, "commit_latest_missing")  # commits 0..5: batch 6 in flight
    # an edit that keeps the watermark at 0 (a moved watermark would make a checkpoint without state/ look like a
    # stateful query's whose state is gone: STATE-DIR-MISSING, unknown); the stale .5.crc stays
    (ckpt / "commits" / "5").write_bytes(b'v1\n{"nextBatchWatermarkMs": 0}')
    # the edit changed only the formatting: the sidecar proves which bytes Spark wrote, and the plan writes them
    plan, unfixed = plan_of(ckpt)
    assert unfixed == [] and ops(plan) == [("write", "commits/5")]
    assert content(plan, "commits/5") == COMMIT_WM0 and hadoop_crc(COMMIT_WM0) == (ckpt / "commits/.5.crc").read_bytes()
    one_effect(plan, "commits/5 holds again the bytes Spark wrote", "changed only their formatting", "nothing re-runs")
    # an edit no sidecar check can undo (Spark wrote a watermark no file of the checkpoint records) is refused
    (ckpt / "commits" / ".5.crc").write_bytes(hadoop_crc(b'v1\n{"nextBatchWatermarkMs":123}'))
    plan, unfixed = plan_of(ckpt)
    assert plan.empty
    assert unfixed == [
        "LOG-CRC-MISMATCH: commits/5 was edited after Spark wrote it and Spark cannot re-create it safely: restore "
        "the original (a backup), or keep the edit with --accept-edits (Spark then relies on it)"
    ]


def test_edited_latest_commit_gets_the_bytes_its_sidecar_proves(tmp_path: Path) -> None:
    """An edited commits/6 whose .crc matches the commit Spark wrote (watermark 0, as offsets/6 records): those
    bytes are written back; no batch re-runs."""
    ckpt, _ = extract("stateless", tmp_path / "x")
    (ckpt / "commits" / "6").write_bytes(b'v1\n{"nextBatchWatermarkMs":7}')
    plan, unfixed = plan_of(ckpt)
    assert unfixed == [] and ops(plan) == [("write", "commits/6")]
    assert content(plan, "commits/6") == COMMIT_WM0
    one_effect(plan, "the edit is undone", "nothing re-runs")


def test_edited_latest_commit_reruns_its_batch(tmp_path: Path) -> None:
    """When no candidate matches the sidecar (here: Spark wrote watermark 123, which no other file records), batch
    6 re-runs with its recorded offsets and Spark writes the commit again."""
    ckpt, _ = extract("stateless", tmp_path / "x")
    (ckpt / "commits" / "6").write_bytes(b'v1\n{"nextBatchWatermarkMs":7}')
    (ckpt / "commits" / ".6.crc").write_bytes(hadoop_crc(b'v1\n{"nextBatchWatermarkMs":123}'))
    plan, unfixed = plan_of(ckpt)
    assert unfixed == []
    assert ops(plan) == [("delete", "commits/6"), ("delete", "commits/.6.crc")]
    one_effect(plan, "re-runs batch 6 with its recorded offsets")


def test_an_edited_commit_rerun_keeps_the_state_its_batch_wrote(tmp_path: Path) -> None:
    """Damage hunt 7, F3: a stateful query with a file sink, commits/L edited. The plan deleted commits/L and state
    version L+1; Spark re-ran batch L, the file sink skipped it (no operator ran, version L+1 was never written
    again) and the next restart failed: "4.delta does not exist". Version L+1 stays now, as in Spark's own
    recovery from a crash before the commit."""
    ckpt, _ = extract("agg_hdfs", tmp_path / "x")
    (ckpt / "commits" / "7").write_bytes(b'v1\n{"nextBatchWatermarkMs":7}')
    (ckpt / "commits" / ".7.crc").write_bytes(hadoop_crc(b'v1\n{"nextBatchWatermarkMs":123}'))
    plan, unfixed = plan_of(ckpt)
    assert unfixed == []
    assert ops(plan) == [("delete", "commits/7"), ("delete", "commits/.7.crc")], ops(plan)
    one_effect(plan, "re-runs batch 7 with its recorded offsets", "state version 8, which batch 7 wrote, stays")


# -- LOG-NONCANONICAL-NAME -------------------------------------------------------------------


def test_noncanonical_latest_offset_is_renamed_with_its_sidecar(tmp_path: Path) -> None:
    ckpt, _ = extract("stateless", tmp_path / "x")
    data, crc = (ckpt / "offsets" / "6").read_bytes(), (ckpt / "offsets" / ".6.crc").read_bytes()
    CASES["offset_noncanonical_name"].apply(ckpt)
    plan, unfixed = plan_of(ckpt)
    assert unfixed == []
    assert ops(plan) == [
        ("write", "offsets/6"),
        ("write", "offsets/.6.crc"),
        ("delete", "offsets/0006"),
        ("delete", "offsets/.0006.crc"),
    ]
    assert content(plan, "offsets/6") == data and content(plan, "offsets/.6.crc") == crc


def test_noncanonical_name_refused_when_both_names_exist(tmp_path: Path) -> None:
    ckpt, _ = extract("stateless", tmp_path / "x")
    shutil.copyfile(ckpt / "offsets" / "6", ckpt / "offsets" / "7")
    shutil.copyfile(ckpt / "offsets" / "6", ckpt / "offsets" / "0007")
    (ckpt / "offsets" / "7").unlink()
    (ckpt / "offsets" / "7").mkdir()  # a directory named 7 is ignored by Spark, but the name is taken
    plan, unfixed = plan_of(ckpt)
    assert any(u.startswith("LOG-NONCANONICAL-NAME: offsets/0007 and offsets/7 both exist") for u in unfixed), unfixed


# -- apply then undo: every file back to its sha256, locally and on S3 ----------------------

Setup = Callable[[Path], Path]


def _sample_commit_ahead(tmp_path: Path) -> Path:
    ckpt = tmp_path / "ckpt"
    shutil.copytree(sample_checkpoint(), ckpt)
    CASES["commit_beyond_latest_offset"].apply(ckpt)
    return ckpt


ROUND_TRIPS: dict[str, tuple[Callable[[Path], Path], dict[str, Any]]] = {
    "commit_beyond_latest_offset": (lambda p: damaged(p, "commit_beyond_latest_offset"), {}),
    "latest_offset_deleted": (lambda p: damaged(p, "latest_offset_deleted"), {}),
    "offset_latest_empty": (lambda p: damaged(p, "offset_latest_empty"), {}),
    "commit_latest_empty": (lambda p: damaged(p, "commit_latest_empty"), {}),
    "offset_latest_metadata_empty": (lambda p: damaged(p, "offset_latest_metadata_empty"), {}),
    "metadata_missing": (lambda p: damaged(p, "metadata_missing"), {"options": {"query_id": QUERY_ID}}),
    "metadata_truncated": (lambda p: damaged(p, "metadata_truncated"), {"options": {"query_id": QUERY_ID}}),
    "edited_crc": (lambda p: damaged(p, "offset_latest_edited_stale_crc"), {}),
    "edited_crc_accepted": (
        lambda p: damaged(p, "offset_latest_edited_stale_crc"),
        {"options": {"accept_edits": True}},
    ),
    "noncanonical": (lambda p: damaged(p, "offset_noncanonical_name"), {}),
    "async_sample_commit_ahead": (_sample_commit_ahead, {}),
}


@pytest.mark.parametrize("name", sorted(ROUND_TRIPS))
def test_apply_then_undo_restores_every_file(tmp_path: Path, name: str) -> None:
    setup, kw = ROUND_TRIPS[name]
    ckpt = setup(tmp_path)
    before = tree(ckpt)
    plan, unfixed = plan_of(ckpt, **kw)
    assert unfixed == [] and not plan.empty
    loc, backup = Location(str(ckpt)), Location(str(tmp_path / "backup"))
    engine.apply(plan, loc, backup, force=True)  # the copy was made just now: skip the 120 s idle check
    after = audit(str(ckpt), "4.3")
    assert not [f for f in after.findings if f.severity == "error"], [f.message for f in after.findings]
    assert after.verdict.restarts
    assert tree(ckpt) != before
    engine.undo(loc, backup, force=True)  # the damage is seconds old: skip the idle check
    assert tree(ckpt) == before


S3_CASES = ["latest_offset_deleted", "offset_latest_empty", "commit_latest_empty", "metadata_missing", "noncanonical"]


@pytest.mark.s3
@pytest.mark.parametrize("name", S3_CASES)
def test_apply_then_undo_on_s3(tmp_path: Path, s3_bucket: Any, name: str) -> None:
    setup, kw = ROUND_TRIPS[name]
    local = setup(tmp_path)
    url = s3_bucket.upload_tree(local, f"{name}/ckpt")
    fs, root = s3_bucket.filesystem(), url.removeprefix("s3://")
    before = s3_tree(fs, root)
    assert before == tree(local)  # the upload is the damaged copy, byte for byte
    opts = s3_bucket.storage_options
    plan, _report, unfixed = plan_repair(url, "4.3", storage_options=opts, **kw)
    assert unfixed == [] and not plan.empty
    local_plan, _ = plan_of(local, **kw)
    assert ops(plan) == ops(local_plan)
    loc, backup = Location(url, opts), Location(engine.default_backup_url(url), opts)
    engine.apply(plan, loc, backup, force=True)  # uploaded seconds ago
    assert audit(url, "4.3", storage_options=opts).verdict.restarts
    assert s3_tree(fs, root) != before
    engine.undo(loc, backup, force=True)  # the damage is seconds old: skip the idle check
    assert s3_tree(fs, root) == before


# -- the CLI passes --accept-edits and --query-id through ------------------------------------


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args)


def test_cli_accept_edits_changes_the_plan(tmp_path: Path) -> None:
    ckpt = damaged(tmp_path, "offset_latest_edited_stale_crc")
    default = json.loads(_cli("repair", str(ckpt), "--format", "json").stdout)
    accepted = json.loads(_cli("repair", str(ckpt), "--accept-edits", "--format", "json").stdout)
    assert [a["path"] for a in default["plan"]["actions"]] == [p for _, p in DROP_6]
    assert [a["path"] for a in accepted["plan"]["actions"]] == ["offsets/.6.crc"]


def test_cli_repair_apply_restores_metadata(tmp_path: Path) -> None:
    ckpt = damaged(tmp_path, "metadata_missing")
    proc = _cli("repair", str(ckpt), "--query-id", QUERY_ID, "--apply", "--force")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (ckpt / "metadata").read_bytes() == b'{"id":"f405cca0-6611-4197-acb2-ea3f2b8bf4bf"}'


def test_damaged_latest_offset_refused_when_a_delta_sink_holds_it(tmp_path: Path) -> None:
    """The same refusal when the sink is a Delta table (delta-rs writes the txn DeltaSink would: appId = the
    query id, version = the batch id): batch 6 is in the table, so planning it anew would be skipped."""
    pa = pytest.importorskip("pyarrow")
    deltalake = pytest.importorskip("deltalake")
    ckpt, _ = extract("stateless", tmp_path / "x")  # offsets and commits 0..6
    qid = json.loads((ckpt / "metadata").read_text())["id"]
    table = tmp_path / "table"
    for b in range(7):
        props = deltalake.CommitProperties(app_transactions=[deltalake.Transaction(qid, b)])
        deltalake.write_deltalake(str(table), pa.table({"k": [b]}), mode="append", commit_properties=props)
    CASES["offset_latest_empty"].apply(ckpt)
    plan, unfixed = plan_of(ckpt, sink_path=str(table))
    assert plan.empty
    assert any(
        u.startswith("LOG-UNREADABLE: offsets/6 is damaged: Spark would plan batch 6 anew")
        and f"txn of appId {qid}" in u
        and "up to 6" in u
        for u in unfixed
    ), unfixed
    # without the table, the same damage is planned (the refusal comes from the sink alone)
    assert not plan_of(ckpt)[0].empty


# -- a damaged latest offset whose predecessor is missing (async tracking's sparse logs) --------------------------


def test_truncated_latest_offset_without_predecessor(tmp_path: Path) -> None:
    """samples/async-sparse with offsets/31 cut to 100 bytes; offsets/30 was never written (async tracking). The
    default repair goes back to batch 29, the newest committed one: offsets/31 and commits/31 deleted (with their
    sidecars), offsets/28 a copy of offsets/29 (as the async-gap fix writes L-1 for a committed L); nothing is left
    "not fixed". `--strategy truncate` instead cuts to the last consecutive pair (batch 1) and, deleting offsets/31
    too, also leaves nothing unfixed. (tests/docs/test_sample.py restarts the default fix in real Spark.)"""
    ckpt = tmp_path / "ckpt"
    shutil.copytree(sample_checkpoint(), ckpt)
    (ckpt / "offsets" / "31").write_bytes((ckpt / "offsets" / "31").read_bytes()[:100])
    truncate = tmp_path / "truncate"
    shutil.copytree(ckpt, truncate)
    default = json.loads(_cli("repair", str(ckpt), "--idle-seconds", "0", "-f", "json").stdout)
    assert default["unfixed"] == []
    actions = [(a["op"], a["path"]) for a in default["plan"]["actions"]]
    assert actions == [
        ("delete", "offsets/31"),
        ("delete", "offsets/.31.crc"),
        ("delete", "commits/31"),
        ("delete", "commits/.31.crc"),
        ("write", "offsets/28"),
    ], actions
    done = _cli("repair", str(truncate), "--idle-seconds", "0", "--strategy", "truncate", "--apply")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "not fixed" not in done.stdout
    grouped = r"\. delete \d+ files in offsets/ and their \.crc sidecars \([0-9.,]*\b31;"
    assert re.search(grouped, done.stdout), done.stdout
    assert not (truncate / "offsets" / "31").exists() and audit(str(truncate), "4.3").verdict.restarts


def test_planning_a_committed_batch_again_says_the_sink_is_unchecked(tmp_path: Path) -> None:
    """offsets/L empty, commits/L present: the plan drops both and Spark plans batch L again. Without --sink it
    cannot know whether an exactly-once sink holds batch L (then skips the new one and its rows are lost: seen
    with a file sink on Spark 4.3), and says so."""
    ckpt = tmp_path / "ckpt"
    shutil.copytree(Path(__file__).resolve().parents[2] / "samples" / "rocksdb-changelog", ckpt)
    (ckpt / "offsets" / "11").write_bytes(b"")
    (ckpt / "offsets" / ".11.crc").unlink()
    plan, _, unfixed = plan_repair(str(ckpt))
    assert not unfixed, unfixed
    assert {a.path for a in plan.actions} >= {"offsets/11", "commits/11"}
    (warning,) = [e for e in plan.effects if e.startswith("NOT CHECKED without --sink")]
    assert "batch 11 was committed" in warning and "--sink OUT" in warning


def test_an_orphan_sidecar_of_a_later_entry_is_deleted_too(tmp_path: Path) -> None:
    """offsets/.8.crc without offsets/8 while Spark resumes at batch 7: the restart works, and the query fails when
    it writes offsets/8 (the rename onto the leftover sidecar, seen on 4.3). A warning, which repair fixes anyway."""
    ckpt, _ = extract("stateless", tmp_path / "x")  # offsets and commits 0..6 (Spark 3.5.9)
    shutil.copy(ckpt / "offsets" / ".6.crc", ckpt / "offsets" / ".8.crc")
    report = audit(str(ckpt))
    (orphan,) = [f for f in report.findings if f.rule_id == "LOG-CRC-ORPHAN"]
    assert orphan.severity == "warning" and report.verdict.restarts is True
    plan, unfixed = plan_of(ckpt)
    assert unfixed == []
    assert ops(plan) == [("delete", "offsets/.8.crc")]


# -- SRC-LOG-MISSING ---------------------------------------------------------------------------


def test_missing_source_entry_of_the_latest_batch_plans_the_batch_again(tmp_path: Path) -> None:
    """sources/0/6 (batch 6's file list) deleted, offsets/6 and commits/6 kept: Spark fails with "batch 6 doesn't
    exist". Without the entry batch 6 is as if never planned: offsets/6 and commits/6 go, Spark plans batch 6 from
    offsets/5 and lists part-0006 again (seen on Spark 4.3: the sink gets exactly the input rows, file 6 twice in an
    append sink)."""
    ckpt = damaged(tmp_path, "source_log_latest_missing")  # sources/0/6 and its .crc deleted
    plan, unfixed = plan_of(ckpt)
    assert unfixed == []
    assert plan.fixes == ("SRC-LOG-MISSING",)
    assert ops(plan) == [("delete", p) for p in ("offsets/6", "offsets/.6.crc", "commits/6", "commits/.6.crc")]
    one_effect(plan, "plans batch 6 again from offsets/5", "sources/0/6 listed are no longer known as read")
    assert not any("no input file" in e for e in plan.effects)  # the lost entry's file IS read again
    assert any(e.startswith("NOT CHECKED without --sink") for e in plan.effects)


def test_missing_source_entry_with_its_sidecar_left_deletes_the_sidecar_too(tmp_path: Path) -> None:
    ckpt = damaged(tmp_path, "source_log_latest_deleted_crc_left")  # sources/0/6 deleted, sources/0/.6.crc left
    plan, unfixed = plan_of(ckpt)
    assert unfixed == []
    assert ("delete", "sources/0/.6.crc") in ops(plan) and ("delete", "offsets/6") in ops(plan)


def test_missing_source_entry_refused_when_the_file_sink_holds_the_batch(tmp_path: Path) -> None:
    ckpt, output = extract("filesink", tmp_path / "x")  # _spark_metadata holds batches 0..6
    CASES["source_log_latest_missing"].apply(ckpt)
    plan, unfixed = plan_of(ckpt, sink_path=str(output))
    assert plan.empty
    assert any("Spark would plan batch 6 anew" in u and "already holds batches up to 6" in u for u in unfixed)


def test_missing_source_entry_below_the_latest_batch_is_not_planned(tmp_path: Path) -> None:
    """sources/0/5 gone too: the restart restores the source's file list from entries 0..5 after the rollback as
    well, so dropping batch 6 does not help; restore from a backup."""
    ckpt = damaged(tmp_path, "source_log_latest_missing")
    (ckpt / "sources" / "0" / "5").unlink()
    (ckpt / "sources" / "0" / ".5.crc").unlink()
    plan, unfixed = plan_of(ckpt)
    assert plan.empty
    assert any(u.startswith("SRC-LOG-MISSING: ") and "Restore the entries from a backup" in u for u in unfixed)
    # repair hunt 13: the text offered `ckptfix rollback` (no batch), which cannot help: the rolled-back restart
    # reads the same entries
    assert any("A rollback does not bring them back" in u for u in unfixed), unfixed


# -- several damages at once (repair sweep of 2026-11-27, Spark 4.3) ---------------------------


def test_damaged_offset_and_commit_of_the_latest_batch_are_both_dropped(tmp_path: Path) -> None:
    """offsets/6 and commits/6 both 0 bytes: planning batch 6 again from offsets/5 needs neither (was refused as
    "several log files restart reads are damaged")."""
    ckpt = damaged(tmp_path, "offset_latest_empty")
    CASES["commit_latest_empty"].apply(ckpt)
    plan, unfixed = plan_of(ckpt)
    assert unfixed == []
    assert ops(plan) == [("delete", p) for p in ("offsets/6", "offsets/.6.crc", "commits/6", "commits/.6.crc")]
    one_effect(plan, "plans batch 6 again from offsets/5", "1 input file(s) of sources/0 (entries 6..6)")


def test_damaged_commit_whose_batch_lost_its_source_entry_is_planned_again(tmp_path: Path) -> None:
    """commits/6 0 bytes and sources/0/6 deleted (its .crc left): rewriting commits/6 cannot help (the restart reads
    batch 6's entry); batch 6 is planned again instead, and the sidecar goes."""
    ckpt = damaged(tmp_path, "commit_latest_empty")
    CASES["source_log_latest_deleted_crc_left"].apply(ckpt)
    plan, unfixed = plan_of(ckpt)
    assert unfixed == []
    assert sorted(ops(plan)) == sorted(
        [("delete", p) for p in ("offsets/6", "offsets/.6.crc", "commits/6", "commits/.6.crc", "sources/0/.6.crc")]
    )


def test_damaged_latest_offset_with_a_commit_beyond_it_drops_both_in_one_plan(tmp_path: Path) -> None:
    """commits/7 (a copy of commits/6) and offsets/6 0 bytes: one plan deletes offsets/6, commits/6 and commits/7
    (was: commits/7 only, with "fix LOG-COMMIT-AHEAD first" for offsets/6, so the result still failed)."""
    ckpt = damaged(tmp_path, "commit_beyond_latest_offset")
    CASES["offset_latest_empty"].apply(ckpt)
    plan, unfixed = plan_of(ckpt)
    assert unfixed == []
    assert sorted(ops(plan)) == sorted(
        [("delete", p) for p in ("offsets/6", "offsets/.6.crc", "commits/6", "commits/.6.crc", "commits/7")]
    )
    assert audit(str(ckpt), "4.3").verdict.restarts is False  # untouched until applied


# -- a re-run into a sink that skips it, state checkpoint format v2 ------------------------------

V2 = Path(__file__).resolve().parents[1] / "fixtures" / "spark-4.2.1" / "dedup_v2_filesink.tar.gz"


def _v2(tmp_path: Path, case: str) -> tuple[Path, Path]:
    with tarfile.open(V2) as tar:
        tar.extractall(tmp_path / "x", filter="data")
    ckpt = tmp_path / "x" / "ckpt"
    CASES[case].apply(ckpt)
    return ckpt, tmp_path / "x" / "output"


def test_damaged_commit_rerun_refused_when_the_v2_sink_holds_the_batch(tmp_path: Path) -> None:
    """commits/L 0 bytes, state checkpoint format v2, the file sink holds batch L: re-running L makes the sink skip
    it and Spark 4.3 fails with "CheckpointInfo length: 0" (seen live); the plan used to say "a file sink skips it"."""
    ckpt, output = _v2(tmp_path, "commit_latest_empty")
    L = max(int(p.name) for p in (ckpt / "offsets").iterdir() if p.name.isdigit())
    plan, unfixed = plan_of(ckpt, sink_path=str(output))
    assert plan.empty
    (reason,) = unfixed
    assert reason.startswith(f"LOG-UNREADABLE: commits/{L} is damaged: Spark would re-run batch {L}, but the file sink")
    assert "CheckpointInfo length: 0" in reason and f"--to-batch {L - 1} --sink {output} --with-sink" in reason
    plan, unfixed = plan_of(ckpt)  # without --sink: planned, and said to be unchecked
    assert unfixed == [] and ("delete", f"commits/{L}") in ops(plan)
    one_effect(plan, "NOT CHECKED without --sink: this checkpoint uses state checkpoint format v2")


@pytest.mark.parametrize("case", ["offset_latest_empty", "latest_offset_deleted", "commit_beyond_latest_offset"])
def test_a_v2_state_pointer_refusal_names_a_rollback_that_works(tmp_path: Path, case: str) -> None:
    """The refusals said "the state helper must decide", which names nothing a user can run. They name the rollback
    instead; with `--sink OUT --with-sink` it made each of these damages restart on Spark 4.3 with exactly the input
    rows in the file sink (repair sweep of 2026-11-27)."""
    ckpt, _output = _v2(tmp_path, case)
    plan, unfixed = plan_of(ckpt)
    assert plan.empty
    assert not any("state helper" in u for u in unfixed)
    L = max(int(p.name) for p in (ckpt / "offsets").iterdir() if p.name.isdigit())
    keep = L - 1 if case == "offset_latest_empty" else L  # LOG-UNREADABLE drops batch L; LOG-COMMIT-AHEAD keeps it
    # no --sink given: the command, and the flags a file sink needs (without them its rows are lost, repair hunt 10)
    with_sink = f"`ckptfix rollback {ckpt} --to-batch {keep}` (a file sink: add `--sink OUT --with-sink`"
    assert any(with_sink in u for u in unfixed), unfixed
    plan, unfixed = plan_of(ckpt, sink_path=str(_output))
    assert any(f"`ckptfix rollback {ckpt} --to-batch {keep} --sink {_output} --with-sink`" in u for u in unfixed)


def test_commit_ahead_over_an_uncommitted_batch_announces_both_replays(tmp_path: Path) -> None:
    """offsets/6 and commits/5 deleted: deleting commits/6 makes Spark re-run batch 5 and plan batch 6 anew from
    sources/0/6, which outlived offsets/6; on Spark 4.3 the append sink got files 5 and 6 twice, and the plan
    named only file 5 (repair sweep of 2026-11-27)."""
    ckpt = damaged(tmp_path, "latest_offset_deleted")  # offsets 0..5, commits 0..6
    CASES["commit_latest_missing"].apply(ckpt)  # commits/5 (now the latest offset's) deleted
    plan, unfixed = plan_of(ckpt)
    assert unfixed == []
    assert ops(plan) == [("delete", "commits/6"), ("delete", "commits/.6.crc")]
    one_effect(plan, "re-runs batch 5", "(entries 5..5)", "batch 6 ran before its offset file was lost")
    one_effect(plan, "(entries 6..6)")


@pytest.mark.parametrize(
    ("case", "words"),
    [
        ("commit_latest_deleted_crc_left", "batch 6 has no commit: Spark re-runs it with its recorded offsets"),
        ("latest_batch_deleted_crcs_left", "batch 6 is planned anew from offsets/5"),
    ],
)
def test_an_orphan_sidecar_plan_says_what_the_lost_file_makes_spark_run_again(
    tmp_path: Path, case: str, words: str
) -> None:
    """commits/6 deleted with its .crc left: the plan deleted the sidecar and said only that; Spark then re-ran
    batch 6 and file 6 reached the append sink twice (Spark 4.3, repair sweep of 2026-11-27)."""
    ckpt, _ = extract("stateless", tmp_path / "x")  # batches 0..6, one input file each
    CASES[case].apply(ckpt)
    plan, unfixed = plan_of(ckpt)
    assert unfixed == []
    one_effect(plan, words, "1 input file(s) of sources/0 (entries 6..6)")


@pytest.mark.parametrize("name", ["offset_latest_v99", "commit_latest_v99"])
def test_a_version_no_spark_writes_is_damage_the_repair_fixes(tmp_path: Path, name: str) -> None:
    """`v99` is no log version any Spark release writes (3.5-4.3 write offsets up to v2, commits up to v3): it was
    reported as LOG-VERSION-TOO-NEW with the circular advice to restart with a Spark that reads it. It is damage
    (LOG-UNREADABLE), fixed like an unreadable latest file; live proof in test_fixes_spark.py (offset_v99,
    commit_v99)."""
    with tarfile.open(FIXTURES / "stateless.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    ckpt = tmp_path / "ckpt"
    CASES[name].apply(ckpt)
    before = audit(str(ckpt), "3.5")
    assert before.verdict.restarts is False and before.verdict.blocking_rule == "LOG-UNREADABLE", before.verdict
    assert "no Spark release up to 4.3 writes that version" in before.findings[0].message
    plan, _report, unfixed = plan_repair(str(ckpt), "3.5")
    assert unfixed == [] and not plan.empty, unfixed
    engine.apply(plan, Location(str(ckpt)), Location(str(tmp_path / "bk")), idle_seconds=0)
    assert audit(str(ckpt), "3.5").verdict.restarts is True


def test_a_harmless_orphan_sidecar_is_no_job_for_repair(tmp_path: Path) -> None:
    """New-user trial 3: commits/3 of an older batch deleted, its .crc left. The audit said "will restart" with an
    info finding whose fix promised `ckptfix repair`; repair then answered "not fixed ... (the checkpoint
    changed?)" and exit 1. Now the finding says it is nothing for the restart, and repair has nothing to do."""
    with tarfile.open(Path(__file__).resolve().parents[1] / "fixtures" / "spark-4.3.0" / "agg_hdfs.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    ckpt = tmp_path / "ckpt"
    (ckpt / "commits" / "3").unlink()
    report = audit(str(ckpt), "4.3")
    (orphan,) = [f for f in report.findings if f.rule_id == "LOG-CRC-ORPHAN"]
    assert report.verdict.restarts is True and orphan.severity == "info"
    assert (
        orphan.fix.startswith("Nothing for the restart: Spark does not write this entry again")
        and "repair" not in orphan.fix
    )
    plan, _, unfixed = plan_repair(str(ckpt), "4.3")
    assert plan.empty and unfixed == []
    done = run_cli("repair", str(ckpt))
    assert done.returncode == 0 and "not fixed" not in done.stdout + done.stderr, done.stdout + done.stderr


# -- a format-v2 commit relabelled v1; a source offset Spark cannot use (repair hunt 13) -------------------------


@pytest.mark.parametrize("version", ["4.0.5", "4.1.4", "4.2.1", "4.3.0"])
def test_a_relabelled_v2_commit_gets_its_first_line_back(version: str, tmp_path: Path) -> None:
    """commits/L of a checkpoint Spark wrote with state checkpoint format v2, its first line edited to v1 (recorded:
    4.0/4.1 refuse the version, 4.2/4.3 look for 1.changelog). The audit no longer says "restart with a Spark that
    reads this version"; repair sets the line back (only that: the rest of the file is byte for byte Spark's) and
    the audit then says the release restarts it."""
    from tests.audit.test_restart_prediction import _recorded, run_audit

    case, target, rec, ckpt, output = _recorded(version, "v2_commit_latest_relabelled_v1", tmp_path)
    assert rec["ok"] is False
    report = run_audit(ckpt, target, output, case)
    assert not any("reads this version" in (f.fix or "") for f in report.findings), [f.fix for f in report.findings]
    latest = max(int(p.name) for p in (ckpt / "commits").iterdir() if p.name.isdigit())
    before = (ckpt / "commits" / str(latest)).read_bytes()
    plan, unfixed = plan_of(ckpt, target, sink_path=str(output))
    assert unfixed == []
    assert ops(plan) == [("write", f"commits/{latest}")], ops(plan)
    assert before.startswith(b"v1\n") and content(plan, f"commits/{latest}") == b"v2\n" + before[3:]
    engine.apply(plan, Location(str(ckpt)), Location(str(tmp_path / "backup")), force=True)
    assert run_audit(ckpt, target, output, case).verdict.restarts


@pytest.mark.parametrize(
    ("name", "rule"),
    [
        ("offset_source_moved_back", "SRC-OFFSET-BACKWARDS"),
        ("offset_source_as_string", "SRC-OFFSET-UNREADABLE"),
        # hunt 14: refused as "sources/0/6 exists", an entry batch L read before the edited end
        ("offset_source_moved_forward", "SRC-LOG-MISSING"),
    ],
)
def test_an_unusable_source_offset_in_the_latest_offset_file_is_planned_again(
    name: str, rule: str, tmp_path: Path
) -> None:
    """offsets/L's file-source offset edited below offsets/L-1's, or quoted (.crc dropped): repair had no planner
    although the file goes as a damaged offsets/L does. Batch L is planned again from offsets/L-1 (the live proof is
    in tests/repair/test_fixes_spark.py)."""
    ckpt = damaged(tmp_path, name)
    L = max(int(p.name) for p in (ckpt / "offsets").iterdir() if p.name.isdigit())
    assert rule in {f.rule_id for f in audit(str(ckpt), "4.3").findings}
    plan, unfixed = plan_of(ckpt)
    assert unfixed == []
    assert ("delete", f"offsets/{L}") in ops(plan), ops(plan)
    one_effect(plan, f"Spark plans batch {L} again from offsets/{L - 1}")
    engine.apply(plan, Location(str(ckpt)), Location(str(tmp_path / "backup")), force=True)
    assert audit(str(ckpt), "4.3").verdict.restarts


def test_an_undecided_restart_is_not_called_fixed(tmp_path: Path) -> None:
    """Repair hunt 13 (3.5.9-4.2.1): the file sink's _spark_metadata deleted, its output given with --sink. The audit
    cannot tell whether the path is this query's file sink (the verdict is unknown), and repair printed "No changes
    planned." with exit 0; Spark then failed with BATCH_METADATA_NOT_FOUND at the compaction. The finding that
    leaves the restart undecided is now listed as not fixed, and repair exits 1."""
    from tests.audit.test_restart_prediction import _recorded

    _, target, rec, ckpt, output = _recorded("3.5.9", "filesink_compact_log_deleted", tmp_path)
    assert rec["ok"] is False and "BATCH_METADATA_NOT_FOUND" in rec["text"]
    proc = run_cli(
        "repair",
        str(ckpt),
        "--target-spark",
        target,
        "--sink",
        str(output),
        "--conf",
        "spark.sql.streaming.fileSink.log.compactInterval=3",
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "not fixed SINK-LOG-COMPACT" in proc.stdout, proc.stdout


def test_an_undecided_restart_does_not_hold_back_the_fixes_of_errors(tmp_path: Path) -> None:
    """The undecided finding is listed and repair exits 1, but it is no known blocker: only an error left unfixed
    holds a plan back from --apply (`blocks`), so the fixes of the errors still go in."""
    from tests.audit.test_restart_prediction import _recorded

    _, target, _, ckpt, output = _recorded("3.5.9", "filesink_compact_log_deleted", tmp_path)
    conf = {"spark.sql.streaming.fileSink.log.compactInterval": "3"}
    _, _, unfixed = plan_repair(str(ckpt), target, sink_path=str(output), session_conf=conf)
    assert [(u.rule_id, u.blocks) for u in unfixed] == [("SINK-LOG-COMPACT", False)]
    # an error without a fix (entries of the source log lost below the newest) does block
    _, _, errors = plan_repair(str(damaged(tmp_path / "other", "source_log_cut_below_noop_batch")), "3.5")
    assert [(u.rule_id, u.blocks) for u in errors] == [("SRC-LOG-MISSING", True)]
