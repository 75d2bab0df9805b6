"""
Static bounds of `loop.read` indices: a read without a padding value whose index can
leave its dimension reads past the end of its tensor. Blocking such a nest would turn
the out-of-range read into tile loads of the wrong rows, so `convert-loop-to-tile`
refuses it with the read, the range and the dimension.

The range of an index is known when it is built from the nest indices (`0 .. extent-1`)
and integer constants with `arith.addi`, `arith.subi` and `arith.muli`; other indices
(data-dependent ones, e.g. a gather's) are left to the runtime.
"""

from __future__ import annotations

from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr, ModuleOp
from xdsl.ir import BlockArgument, SSAValue

from plmr.dialects.loop import NestOp, ReadOp
from plmr.errors import PassError

Range = tuple[int, int]


def index_range(value: SSAValue, depth: int = 0) -> Range | None:
    """The smallest and largest value of an index, when they are static."""
    if depth > 32:
        return None
    if isinstance(value, BlockArgument):
        nest = value.block.parent_op()
        if isinstance(nest, NestOp) and value.index < nest.rank:
            return (0, nest.extents[value.index] - 1)
        return None
    op = value.owner
    if isinstance(op, arith.ConstantOp) and isinstance(op.value, IntegerAttr):
        v = op.value.value.data
        return (v, v)
    if isinstance(op, arith.AddiOp | arith.SubiOp | arith.MuliOp):
        lhs = index_range(op.lhs, depth + 1)
        rhs = index_range(op.rhs, depth + 1)
        if lhs is None or rhs is None:
            return None
        if isinstance(op, arith.AddiOp):
            return (lhs[0] + rhs[0], lhs[1] + rhs[1])
        if isinstance(op, arith.SubiOp):
            return (lhs[0] - rhs[1], lhs[1] - rhs[0])
        products = [a * b for a in lhs for b in rhs]
        return (min(products), max(products))
    return None


def check_read_bounds(module: ModuleOp, pass_name: str) -> None:
    """Raises a `PassError` at the first unpadded read whose index can leave its tensor."""
    for op in module.walk():
        if not isinstance(op, ReadOp) or op.padding is not None:
            continue
        shape = op.source.type.get_shape()  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType, reportUnknownVariableType]
        for dim, (index, size) in enumerate(zip(op.indices, shape, strict=True)):  # pyright: ignore[reportUnknownArgumentType, reportUnknownVariableType]
            bounds = index_range(index)
            if bounds is None or (bounds[0] >= 0 and bounds[1] < size):
                continue
            nest = op.parent_op()
            name = ""
            if isinstance(nest, NestOp) and nest.res and nest.res[0].name_hint:
                name = f" of the nest computing %{nest.res[0].name_hint}"
            raise PassError(
                f"{pass_name}: the loop.read{name} of {op.source.type} reads indices "
                f"{bounds[0]}..{bounds[1]} of dimension {dim} (size {size}): past the "
                "end of its tensor; fix the index or give the read a padding value"
            )
