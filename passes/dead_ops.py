"""
Erasing what a rewrite leaves unused: xDSL's `is_trivially_dead` (a pure op, not a
terminator, whose results have no uses) decides, and the erasure goes through a
rewriter so that its listeners see it.
"""

from __future__ import annotations

from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter
from xdsl.rewriter import Rewriter
from xdsl.transforms.dead_code_elimination import is_trivially_dead


def erase_dead(root: Operation | SSAValue, rewriter: PatternRewriter | None = None) -> None:
    """
    Erases `root` (an op, or the op defining a value) if it is trivially dead, then,
    transitively, the defining ops of its operands that this leaves trivially dead.
    Ops still used, with effects, or already erased stay; block arguments are left.
    """
    first = root if isinstance(root, Operation) else root.owner
    pending = [first] if isinstance(first, Operation) else []
    while pending:
        op = pending.pop()
        if op.parent is None or not is_trivially_dead(op):
            continue
        owners = [v.owner for v in op.operands if isinstance(v.owner, Operation)]
        if rewriter is None:
            Rewriter.erase_op(op)
        else:
            rewriter.erase(op)
        pending.extend(owners)
