"""
Reading programs: one context with every xDSL and plmr dialect, and parse/verify errors
turned into one precise `PlmrError` message.
"""

from __future__ import annotations

import sys
from pathlib import Path

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.parser import Parser
from xdsl.universe import Universe
from xdsl.utils.exceptions import DiagnosticException, ParseError

from plmr.dialects.graph_weights import anchor_weights
from plmr.errors import PlmrError


def make_context() -> Context:
    """A context that knows every dialect of xDSL and of plmr (loaded lazily)."""
    ctx = Context()
    for name, factory in Universe.get_multiverse().all_dialects.items():
        ctx.register_dialect(name, factory)
    return ctx


def _enclosing_function(op: Operation) -> str | None:
    parent = op.parent_op()
    while parent is not None:
        if isinstance(parent, func.FuncOp):
            return parent.sym_name.data
        parent = parent.parent_op()
    return None


def describe_op(op: Operation) -> str:
    """`'graph.add' in @f` plus the op's first printed line, for error messages."""
    where = _enclosing_function(op)
    text = str(op).splitlines()[0].strip() if not op.regions else op.name
    if len(text) > 160:
        # A constant's literal can be megabytes long: its head names it well enough.
        text = text[:150] + "…"
    return f"'{op.name}'{f' in @{where}' if where else ''}: `{text}`"


def first_invalid_op(module: ModuleOp) -> tuple[Operation, str] | None:
    """The first op (in program order) that does not verify, with the reason."""
    for op in module.walk():
        try:
            op.verify(verify_nested_ops=False)
        except DiagnosticException as e:
            return op, str(e).strip()
    return None


def verify_module(module: ModuleOp, source: str) -> None:
    """Verifies `module`, raising a one-message `PlmrError` that names the failing op."""
    try:
        module.verify()
    except DiagnosticException as e:
        found = first_invalid_op(module)
        if found is None:
            raise PlmrError(f"{source}: invalid program: {str(e).strip()}") from e
        op, reason = found
        raise PlmrError(
            f"{source}: {describe_op(op)} does not verify: {reason.splitlines()[0]}"
        ) from e


def parse_module(
    text: str, source: str = "<input>", ctx: Context | None = None
) -> ModuleOp:
    """Parses and verifies MLIR text (custom or generic form)."""
    ctx = make_context() if ctx is None else ctx
    try:
        module = Parser(ctx, text, name=source).parse_module()
    except ParseError as e:
        raise PlmrError(f"cannot parse {source}:\n{str(e).strip()}") from e
    except MemoryError as e:
        raise PlmrError(
            f"cannot parse {source}: a constant is too large for this host's memory; "
            "pass large tensors as function arguments instead"
        ) from e
    verify_module(module, source)
    return module


def load_module(
    path: str | Path, ctx: Context | None = None, weights: Path | None = None
) -> ModuleOp:
    """
    Reads, parses and verifies an `.mlir` file (`-`: standard input). Its weights files
    become absolute paths: relative to the file's directory (the current directory for
    standard input), or found in `weights` (a directory, or the one weights file) where
    they moved.
    """
    if str(path) == "-":
        module = parse_module(sys.stdin.read(), "<stdin>", ctx)
        anchor_weights(module, Path.cwd(), weights)
        return module
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError as e:
        raise PlmrError(f"no such file: {path}") from e
    except IsADirectoryError as e:
        raise PlmrError(f"{path} is a directory, not an .mlir file") from e
    except OSError as e:
        raise PlmrError(f"cannot read {path}: {e.strerror}") from e
    if not data.strip():
        raise PlmrError(f"{path} is empty: expected an .mlir program")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise PlmrError(
            f"{path} is not a text (.mlir) file: byte {e.start} is not UTF-8"
        ) from e
    module = parse_module(text, str(path), ctx)
    anchor_weights(module, path.resolve().parent, weights)
    return module
