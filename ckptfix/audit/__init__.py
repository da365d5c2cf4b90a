"""Audit a checkpoint: findings with stable rule ids and a restart verdict."""

from ckptfix.audit.engine import audit
from ckptfix.audit.model import Evidence, Finding, Report, Skipped, SparkError, Verdict
from ckptfix.audit.registry import RULES

__all__ = ["RULES", "Evidence", "Finding", "Report", "Skipped", "SparkError", "Verdict", "audit"]
