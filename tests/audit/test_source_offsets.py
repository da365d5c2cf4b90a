"""SRC-OFFSET-UNREADABLE: a source offset whose source its JSON names for sure, with a number Spark's json4s cannot
read into a Long. The rate-micro-batch source's case comes from the damage hunt of 2026-11-27 (R12, Spark 4.3:
``{"offset":"80","timestamp":8000}`` in the latest offset file -> ``org.json4s.MappingException: No usable value
for offset`` / ``Do not know how to convert JString(80) into long``); the file source's is a damage case recorded
on 3.5.9-4.2.1 and run live on 4.3 (``offset_source_as_string`` in tests/spark/damage.py). The checkpoints here
are written by hand: no scenario of the harness reads a rate source."""

from __future__ import annotations

from pathlib import Path

from ckptfix.audit import audit

META = '{"batchWatermarkMs":0,"batchTimestampMs":1795757306903,"conf":{"spark.sql.shuffle.partitions":"2"}}'


def _ckpt(tmp_path: Path, offsets: list[str], commits: int) -> Path:
    """offsets/0..n-1 with one source line each, commits/0..commits-1; no sources/ (a DSv2 source keeps none)."""
    ckpt = tmp_path / "ckpt"
    (ckpt / "offsets").mkdir(parents=True)
    (ckpt / "commits").mkdir()
    (ckpt / "metadata").write_text('{"id":"10cb3451-97c7-43bc-80b8-27bd35a46563"}')
    for i, line in enumerate(offsets):
        (ckpt / "offsets" / str(i)).write_text(f"v1\n{META}\n{line}")
    for i in range(commits):
        (ckpt / "commits" / str(i)).write_text('v1\n{"nextBatchWatermarkMs":0}')
    return ckpt


def _rate(offset: str, timestamp: str = "1000") -> str:
    return f'{{"offset":{offset},"timestamp":{timestamp}}}'


def test_rate_offset_as_string_fails_as_spark_does(tmp_path: Path) -> None:
    ckpt = _ckpt(tmp_path, [_rate("70", "7000"), _rate('"80"', "8000")], commits=2)
    report = audit(str(ckpt))
    assert report.verdict.restarts is False
    assert report.verdict.blocking_rule == "SRC-OFFSET-UNREADABLE"
    assert report.verdict.error is not None
    assert report.verdict.error.exception == "org.json4s.MappingException"
    assert report.verdict.error.message == "No usable value for offset"


def test_the_field_json4s_gives_up_on_is_named(tmp_path: Path) -> None:
    ckpt = _ckpt(tmp_path, [_rate("70"), _rate("80", "true")], commits=2)
    report = audit(str(ckpt))
    assert report.verdict.error is not None
    assert report.verdict.error.message == "No usable value for timestamp"


def test_numbers_json4s_reads_are_fine(tmp_path: Path) -> None:
    # json4s truncates a fraction into a Long (RatePerMicroBatchStreamOffset.apply of 3.5.9, 4.0.5 and 4.3.0)
    ckpt = _ckpt(tmp_path, [_rate("70"), _rate("80.0", "8000.5")], commits=2)
    report = audit(str(ckpt))
    assert not [f for f in report.findings if f.rule_id == "SRC-OFFSET-UNREADABLE"]


def test_the_previous_offset_counts_when_the_batch_runs_again(tmp_path: Path) -> None:
    # batch 1 has no commit: Spark runs it again from offsets/0's offset, which it parses
    ckpt = _ckpt(tmp_path, [_rate("null"), _rate("80")], commits=1)
    report = audit(str(ckpt))
    found = [f for f in report.findings if f.rule_id == "SRC-OFFSET-UNREADABLE"]
    assert len(found) == 1 and "offsets/0" in found[0].message
    assert report.verdict.restarts is False


def test_offsets_of_sources_it_cannot_name_are_left_alone(tmp_path: Path) -> None:
    # a Kafka-like partition map and a rate source's bare number: the JSON does not say which source reads them
    ckpt = _ckpt(tmp_path, ['{"topic":{"0":5}}', '{"topic":{"0":"6"}}'], commits=2)
    assert not [f for f in audit(str(ckpt)).findings if f.rule_id == "SRC-OFFSET-UNREADABLE"]
    ckpt2 = _ckpt(tmp_path / "b", ["70", '"80"'], commits=2)
    assert not [f for f in audit(str(ckpt2)).findings if f.rule_id == "SRC-OFFSET-UNREADABLE"]


def test_entries_past_the_log_get_a_runnable_rollback(tmp_path: Path) -> None:
    """Hunt 13: offsets/L's file-source logOffset edited one past the source log (recorded on 3.5.9-4.3.0: Spark
    fails "batches (6, 7) don't exist"). The fix said "restore sources/0/7 from a backup", for an entry nobody lost,
    and named `ckptfix rollback CKPT` without a batch."""
    import tarfile

    from tests.spark.damage import CASES

    with tarfile.open(Path(__file__).resolve().parents[1] / "fixtures" / "spark-4.3.0" / "stateless.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    ckpt = tmp_path / "ckpt"
    CASES["offset_source_moved_forward"].apply(ckpt)
    L = max(int(p.name) for p in (ckpt / "offsets").iterdir() if p.name.isdigit())
    (finding,) = [f for f in audit(str(ckpt), "4.3").findings if f.rule_id == "SRC-LOG-MISSING"]
    assert f"if none was lost (offsets/{L} names entries past the newest the log ever had" in finding.fix
    assert f"`ckptfix rollback {ckpt} --to-batch {L - 1}`" in finding.fix, finding.fix
