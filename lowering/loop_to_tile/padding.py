"""
Whether a nest's reduction may end in a padded block: `fit`'s uneven split of a
reduction dimension (4,096 features over 420 PEs: one block of 10 on each PE, the last
ending past the end) instead of many small blocks that divide it (five of 2).

The padded lanes of the last block are computed on loads padded with zeros
(`tile.load ... padding 0`, and on the mesh `limits`: whatever a PE's share holds past
the tensor's end). That is exact when every accumulator is a plain sum, `acc + g`,
whose term `g` is zero wherever a read along the padded dimension is: a product with
such a read (a dot, a sum of squares), its negation, a quotient of it, a sum of such
terms. A maximum, an `exp`, a rolling (Neptune) update or a read with a padding of its
own is not: its reduction keeps blocks that divide it.
"""

from __future__ import annotations

from xdsl.dialects import arith
from xdsl.ir import BlockArgument, Operation, SSAValue

from plmr.dialects.loop import NestOp, ReadOp, YieldOp


def zero_padded(nest: NestOp, dim: BlockArgument) -> bool:
    """
    Whether padding reduction dimension `dim` of `nest` with zeros leaves every
    accumulator as it is (see the module docstring).
    """
    if not nest.is_reduction:
        return False
    body = nest.body.block
    for acc, y in zip(nest.accumulators, nest.yield_op.values, strict=True):
        if y is acc:
            continue
        g = _plain_sum_term(acc, y)
        if g is None or not _zero(g, dim, body.args):
            return False
    return True


def _plain_sum_term(acc: BlockArgument, y: SSAValue) -> SSAValue | None:
    """`g` of `y = acc + g` (either order), or None."""
    op = y.owner
    if isinstance(op, NestOp):
        # A parallel nested nest updating a tensor accumulator: `acc[i] + g` inside.
        if op.is_reduction or len(op.res) != 1:
            return None
        inner = op.body.block.last_op
        if not isinstance(inner, YieldOp) or len(inner.values) != 1:
            return None
        add = inner.values[0].owner
        if not isinstance(add, arith.AddfOp):
            return None
        reads = [a for a in add.operands if _reads_acc(a, acc, op)]
        if len(reads) != 1:
            return None
        return add.rhs if add.lhs is reads[0] else add.lhs
    if not isinstance(op, arith.AddfOp):
        return None
    if op.lhs is acc:
        return op.rhs
    if op.rhs is acc:
        return op.lhs
    return None


def _reads_acc(v: SSAValue, acc: BlockArgument, inner: NestOp) -> bool:
    read = v.owner
    return (
        isinstance(read, ReadOp)
        and read.source is acc
        and list(read.indices) == list(inner.dims)
    )


def _zero(v: SSAValue, dim: BlockArgument, top: tuple[BlockArgument, ...]) -> bool:
    """Whether `v` is zero wherever the reads along `dim` are padded with zeros."""
    op = v.owner
    if isinstance(op, ReadOp):
        return op.padding is None and dim in _index_args(op) and op.source not in top
    if isinstance(op, arith.MulfOp):
        return _zero(op.lhs, dim, top) or _zero(op.rhs, dim, top)
    if isinstance(op, arith.DivfOp):
        return _zero(op.lhs, dim, top)
    if isinstance(op, arith.NegfOp):
        return _zero(op.operand, dim, top)
    if isinstance(op, arith.AddfOp | arith.SubfOp):
        return _zero(op.lhs, dim, top) and _zero(op.rhs, dim, top)
    return False


def _index_args(read: ReadOp) -> set[SSAValue]:
    """The block arguments the read's indices are computed from."""
    found: set[SSAValue] = set()
    work: list[SSAValue] = list(read.indices)
    while work:
        v = work.pop()
        if isinstance(v, BlockArgument):
            found.add(v)
        elif isinstance(v.owner, Operation):
            work.extend(v.owner.operands)
    return found
