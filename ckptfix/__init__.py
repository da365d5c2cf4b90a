"""ckptfix: read, audit and repair Spark Structured Streaming checkpoints without a JVM.

The Python API (:mod:`ckptfix.api`)::

    import ckptfix
    report = ckptfix.audit("path/to/checkpoint")
    print(report.verdict.headline)

``ckptfix.audit`` is the function (the rules live in the subpackage of the same name: import from it with
``from ckptfix.audit.engine import ...``, not through attribute access on ``ckptfix``).
"""

from __future__ import annotations

__version__ = "0.1.0"

# imported last and on purpose over the subpackage attribute of the same name
from ckptfix.api import (  # noqa: E402
    audit,
    open_checkpoint,
    plan_repair,
    plan_repartition,
    plan_state_delete,
    plan_state_put,
    read_state,
)

__all__ = [
    "__version__",
    "audit",
    "open_checkpoint",
    "plan_repair",
    "plan_repartition",
    "plan_state_delete",
    "plan_state_put",
    "read_state",
]
