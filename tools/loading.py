"""Reading programs under their former module name; they live in `plmr.dialects.context`."""

from plmr.dialects.context import (
    describe_op,
    first_invalid_op,
    load_module,
    make_context,
    parse_module,
    verify_module,
)

__all__ = [
    "describe_op",
    "first_invalid_op",
    "load_module",
    "make_context",
    "parse_module",
    "verify_module",
]
