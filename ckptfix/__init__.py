"""ckptfix: read, audit and repair Spark Structured Streaming checkpoints without a JVM.

The Python API (:mod:`ckptfix.api`)::

    import ckptfix
    report = ckptfix.audit("path/to/checkpoint")
    print(report.verdict.headline)

``ckptfix.audit`` and ``ckptfix.advise`` are the functions (the subpackages of the same names hold the rules and
the analysis: import from them with ``from ckptfix.audit.engine import ...``, not through attribute access on
``ckptfix``).

The API's functions load on first use (PEP 562): ``import ckptfix.formats.unsaferow`` or a CLI command does not
pay for the audit engine it does not need.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from ckptfix.api import (
        advise,
        async_off,
        audit,
        export_offsets,
        history,
        inspect_checkpoint,
        list_state,
        open_checkpoint,
        plan_provider,
        plan_rebuild,
        plan_relocation,
        plan_repair,
        plan_repartition,
        plan_rollback,
        plan_state_delete,
        plan_state_put,
        read_changes,
        read_state,
        resume,
        scan,
        undo,
    )
    from ckptfix.errors import CkptfixError

__all__ = [
    "CkptfixError",
    "__version__",
    "advise",
    "async_off",
    "audit",
    "export_offsets",
    "history",
    "inspect_checkpoint",
    "list_state",
    "open_checkpoint",
    "plan_provider",
    "plan_rebuild",
    "plan_relocation",
    "plan_repair",
    "plan_repartition",
    "plan_rollback",
    "plan_state_delete",
    "plan_state_put",
    "read_changes",
    "read_state",
    "resume",
    "scan",
    "undo",
]

# The subpackages ``ckptfix.audit`` and ``ckptfix.advise`` are loaded here, and the attributes their imports set on
# this package removed, so that ``ckptfix.audit`` and ``ckptfix.advise`` resolve to the API's functions below however
# and whenever the subpackages' modules are imported later (the import system sets a parent's attribute only when it
# first loads a child). Both packages load nothing more until used.
from ckptfix import advise as _advise_package  # noqa: E402
from ckptfix import audit as _audit_package  # noqa: E402

del globals()["audit"], globals()["advise"]
del _audit_package, _advise_package


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if name == "CkptfixError":  # every error ckptfix raises on purpose (bad input, refusals); OSError for storage
        from ckptfix.errors import CkptfixError

        value: Any = CkptfixError
    else:
        import ckptfix.api

        value = getattr(ckptfix.api, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    # the API and the module's own dunders, not the names this file imports for itself (Any, TYPE_CHECKING)
    return sorted({*__all__, *(n for n in globals() if n.startswith("__"))})
