"""The agreement rule between ckptfix's restart verdict and what real Spark did (one rule for every proof).

``verdict.restarts`` must equal Spark's outcome. When Spark failed, the verdict's message fragment, its error
class and the simple name of its exception class must all appear in Spark's error text. When Spark restarted
but the sink ended up with wrong data (and the caller checks data), the audit must report an error finding.
"""

from __future__ import annotations

from typing import Any


def describe(report: Any) -> str:
    v = report.verdict
    findings = ", ".join(f"{f.rule_id}({f.severity})" for f in report.findings) or "none"
    return (
        f"verdict: restarts={v.restarts} exception={v.exception!r} error_class={v.error_class!r} "
        f"message={v.message!r} batch={v.batch!r}\nfindings: {findings}"
    )


def assert_verdict_agrees(report: Any, ok: bool, text: str, correct: bool | None, context: str) -> None:
    """``context`` (what was restarted, by which Spark, with which outcome) is appended to every failure."""
    v = report.verdict
    context = f"{context}\n{text[:2500]}\n{describe(report)}"
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
    if correct is False:
        errors = [f for f in report.findings if f.severity == "error"]
        assert errors, "Spark restarted but produced wrong data; the audit must report an error" + context
