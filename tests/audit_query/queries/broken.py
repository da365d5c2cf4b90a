"""A query module that does not import (for the bad-input tests)."""

import ckptfix_no_such_module  # noqa: F401
