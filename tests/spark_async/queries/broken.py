"""A query module that does not import (its import raises)."""

import ckptfix_no_such_module_for_tests  # noqa: F401


def build(spark):  # pragma: no cover - never reached
    return None
