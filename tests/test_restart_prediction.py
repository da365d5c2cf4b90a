"""The proof: ckptfix's restart verdict equals what real Spark does on damaged checkpoints.

For every damage case in ``tests/spark/damage.py``:

* live (``@pytest.mark.spark``): copy the session's base checkpoint (built by real PySpark, see
  ``tests/spark/plugin.py``), apply the damage, audit it, then restart it with the live Spark and compare;
* Spark 3.5.9 (recorded): extract ``tests/fixtures/spark-3.5.9/<scenario>.tar.gz``, apply the same damage, audit
  with ``target_spark="3.5"`` and compare with the outcome real Spark 3.5.9 had
  (``tests/fixtures/spark-3.5.9/outcomes.json``, written by ``tests/fixtures/generate_spark35.py``).

Each damaged copy is audited twice: on local disk and copied into S3 on moto's HTTP server (through s3fs);
both verdicts must agree with Spark and with each other. (Spark itself restarts the local copy: the PyPI
PySpark has no s3a connector, and nothing else can be downloaded here.)

Agreement: ``verdict.restarts == spark_ok``. When Spark fails, the verdict's message fragment, error class and
the simple name of its exception class must all appear in Spark's error text. When Spark restarts but the
case is a known silent hazard (``expect_rule``) or the sink ends up with wrong data, the audit must report an
error-severity finding.
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any

import pytest

from tests.spark.damage import CASES, DamageCase, SkipCase
from tests.spark.harness import copy_base, restart
from tests.spark.queries import SCENARIOS

FIXTURES_35 = Path(__file__).parent / "fixtures" / "spark-3.5.9"
OUTCOMES_35: dict[str, dict[str, Any]] = (
    json.loads((FIXTURES_35 / "outcomes.json").read_text()) if (FIXTURES_35 / "outcomes.json").exists() else {}
)


def run_audit(ckpt: Path, target: str, output_dir: Path, case: DamageCase, s3: Any = None) -> Any:
    """Audit the damaged copy on local disk, or (``s3`` = the moto bucket) a copy uploaded to S3."""
    from ckptfix.audit import audit

    kwargs: dict[str, Any] = dict(case.audit_kwargs)
    url, sink = str(ckpt), str(output_dir)
    if s3 is not None:
        url = s3.upload_tree(ckpt, f"{case.name}/ckpt")
        sink = s3.upload_tree(output_dir, f"{case.name}/output")
        kwargs["storage_options"] = s3.storage_options
    if SCENARIOS[case.scenario].sink == "file":
        kwargs["sink_path"] = sink
    return audit(url, target_spark=target, **kwargs)


def assert_same_verdict(local: Any, remote: Any) -> None:
    """The checkpoint copied into S3 gets the verdict and findings it gets on local disk."""
    assert remote.verdict.restarts == local.verdict.restarts
    assert remote.verdict.error == local.verdict.error

    def key(r: Any) -> list[tuple[str, str]]:
        return sorted((f.rule_id, f.severity) for f in r.findings)

    assert key(remote) == key(local), f"local: {key(local)}\ns3: {key(remote)}"


def _describe(report: Any) -> str:
    v = report.verdict
    findings = ", ".join(f"{f.rule_id}({f.severity})" for f in report.findings) or "none"
    return (
        f"verdict: restarts={v.restarts} exception={v.exception!r} error_class={v.error_class!r} "
        f"message={v.message!r} batch={v.batch!r}\nfindings: {findings}"
    )


def assert_agreement(
    case: DamageCase, version: str, report: Any, ok: bool, text: str, correct: bool | None, detail: str = ""
) -> None:
    v = report.verdict
    spark_said = f"Spark {version}: {'restarted' if ok else 'FAILED'}" + (f" ({detail})" if ok else "")
    context = f"\ncase {case.name}: {case.description}\n{spark_said}\n{text[:2500]}\n{_describe(report)}"
    assert v.restarts == ok, "restart prediction differs from real Spark" + context
    if not ok:
        assert v.message, "Spark fails but the verdict has no message" + context
        assert v.message in text, "verdict message is not in Spark's error text" + context
        if v.error_class:
            assert v.error_class in text, "verdict error class is not in Spark's error text" + context
        if v.exception:
            simple = v.exception.rsplit(".", 1)[-1]
            assert simple in text, "verdict exception class is not in Spark's error text" + context
        return
    errors = [f for f in report.findings if f.severity == "error"]
    rule = case.expects_rule(version)
    if rule is not None:
        assert any(f.rule_id == rule for f in errors), f"silent hazard: expected error finding {rule}" + context
    if correct is False and case.check_correct:
        assert errors, "Spark restarted but produced wrong data; the audit must report an error" + context


# ------------------------------------------------------------------------------------------ live Spark


def _live_cases() -> list[str]:
    return sorted(CASES)


@pytest.mark.spark
@pytest.mark.parametrize("name", _live_cases())
def test_live_restart_matches_audit(
    name: str, spark: Any, spark_version: str, spark_bases: Any, tmp_path: Path, s3_bucket: Any
) -> None:
    case = CASES[name]
    if spark_version not in case.versions:
        pytest.skip(f"case does not apply to Spark {spark_version}")
    base = spark_bases(case.scenario)
    ckpt, input_dir, output_dir = copy_base(base, tmp_path)
    try:
        case.apply(ckpt)
    except SkipCase as exc:
        pytest.skip(f"base checkpoint of {case.scenario} does not fit: {exc}")

    # Audit first (restart changes the checkpoint); run Spark even if the audit raises, so a failure
    # always shows what Spark really did.
    audit_error: BaseException | None = None
    report = None
    try:
        report = run_audit(ckpt, spark_version, output_dir, case)
        s3_report = run_audit(ckpt, spark_version, output_dir, case, s3=s3_bucket)
    except Exception as exc:
        audit_error = exc
    outcome = restart(spark, case.scenario, ckpt, input_dir, output_dir)
    if audit_error is not None:
        raise AssertionError(
            f"audit raised {type(audit_error).__name__}: {audit_error}\n"
            f"Spark {spark_version}: {'restarted' if outcome.ok else 'FAILED'}\n{outcome.text[:2000]}"
        ) from audit_error
    assert not outcome.text.startswith("timeout"), outcome.text
    assert_agreement(case, spark_version, report, outcome.ok, outcome.text, outcome.correct, outcome.detail)
    assert_same_verdict(report, s3_report)


# --------------------------------------------------------------------------------- recorded Spark 3.5.9


def _extract(scenario: str, dest: Path) -> tuple[Path, Path]:
    with tarfile.open(FIXTURES_35 / f"{scenario}.tar.gz") as tar:
        try:
            tar.extractall(dest, filter="data")
        except TypeError:  # Python without extraction filters
            tar.extractall(dest)  # noqa: S202 - our own fixture
    return dest / "ckpt", dest / "output"


def _cases_35() -> list[str]:
    return sorted(n for n, c in CASES.items() if "3.5" in c.versions)


@pytest.mark.parametrize("name", _cases_35())
def test_spark35_recorded_outcome_matches_audit(name: str, tmp_path: Path, s3_bucket: Any) -> None:
    case = CASES[name]
    rec = OUTCOMES_35.get(name)
    if rec is None:
        pytest.fail(f"no recorded Spark 3.5.9 outcome for {name}: run tests/fixtures/generate_spark35.py")
    if "skipped" in rec:
        pytest.skip(f"the 3.5.9 base did not fit this case when recorded: {rec['skipped']}")
    ckpt, output_dir = _extract(case.scenario, tmp_path)
    case.apply(ckpt)  # a SkipCase here means the tarball changed since outcomes.json was written
    report = run_audit(ckpt, "3.5", output_dir, case)
    assert_agreement(case, "3.5", report, rec["ok"], rec["text"], rec.get("correct"), rec.get("detail", ""))
    s3_report = run_audit(ckpt, "3.5", output_dir, case, s3=s3_bucket)
    assert_agreement(case, "3.5", s3_report, rec["ok"], rec["text"], rec.get("correct"), rec.get("detail", ""))
    assert_same_verdict(report, s3_report)


def test_catalogue_is_consistent() -> None:
    for case in CASES.values():
        assert case.scenario in SCENARIOS, case.name
        assert case.versions <= {"3.5", "4.3"}, case.name
    for name in _cases_35():
        assert name in OUTCOMES_35 or not OUTCOMES_35, f"{name} has no recorded 3.5.9 outcome"
    for scenario in {CASES[n].scenario for n in _cases_35()}:
        tarball = FIXTURES_35 / f"{scenario}.tar.gz"
        if OUTCOMES_35:
            assert tarball.exists() and tarball.stat().st_size < 1_000_000, tarball
