"""Printing modules as MLIR text (custom or generic form)."""

from __future__ import annotations

from io import StringIO

from xdsl.dialects.builtin import ModuleOp
from xdsl.printer import Printer


def module_text(module: ModuleOp, generic: bool = False) -> str:
    """The module as MLIR text, ending with a newline."""
    out = StringIO()
    Printer(stream=out, print_generic_format=generic).print_op(module)
    out.write("\n")
    return out.getvalue()
