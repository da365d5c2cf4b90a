"""Audit a checkpoint: findings with stable rule ids and a restart verdict.

The names below load on first use (PEP 562), so that importing a light module of this package (``targets``,
``model``) does not load every rule.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ckptfix.audit.engine import audit
    from ckptfix.audit.model import Evidence, Finding, Report, Skipped, SparkError, Verdict
    from ckptfix.audit.registry import RULES

__all__ = ["RULES", "Evidence", "Finding", "Report", "Skipped", "SparkError", "Verdict", "audit"]

_HOME = {
    "audit": "ckptfix.audit.engine",
    "RULES": "ckptfix.audit.registry",  # filled by the rule modules, which the engine imports
    **{name: "ckptfix.audit.model" for name in ("Evidence", "Finding", "Report", "Skipped", "SparkError", "Verdict")},
}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if name == "RULES":
        importlib.import_module("ckptfix.audit.engine")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value
