"""
What the analysis and the code generator of `convert-loop-to-tile` share: dimensions of
the iteration space, blocks, the plan of a nest, and small queries on values.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr
from xdsl.ir import Block, BlockArgument, Operation, SSAValue

from plmr.dialects.loop import NestOp, ReadOp
from plmr.passes.neptune import nests as N

INDEX_OPS = (
    arith.AddiOp,
    arith.SubiOp,
    arith.MuliOp,
    arith.DivUIOp,
    arith.DivSIOp,
    arith.RemUIOp,
    arith.RemSIOp,
    arith.FloorDivSIOp,
    arith.CeilDivSIOp,
    arith.MaxSIOp,
    arith.MinSIOp,
)


class Untileable(Exception):
    """The nest cannot be blocked; it stays at the loop level."""


@dataclass(eq=False)
class Dim:
    """A dimension of the iteration space: a nest index or an axis of a carried tensor."""

    name: str
    extent: int
    block: int
    order: int
    top: bool
    """A dimension of the top-level nest (it has a `tile.for`); else kept whole."""
    iv: SSAValue | None = None
    """The `tile.for` index (the block's start) of a top-level dimension."""

    @property
    def axis(self) -> bool:
        """Whether blocks have an axis for this dimension (else it is a scalar)."""
        return self.block > 1


@dataclass
class Blk:
    """A block: a tile value whose axes are `dims` (sorted by `Dim.order`)."""

    value: SSAValue
    dims: tuple[Dim, ...]


@dataclass
class Combine:
    """A combining op of a reduction: `h ⊕ reduce(g)` over `dims`."""

    kind: str
    h: SSAValue
    g: SSAValue
    dims: list[SSAValue]
    """The index arguments (of some nest) the term is reduced over."""
    t: SSAValue | None = None
    """The accumulator as `h` reads it (the block argument, or its element)."""


@dataclass
class Plan:
    """What the analysis of one top-level nest decided."""

    dims: dict[SSAValue, Dim]
    combines: dict[Operation, Combine]
    value_dims: dict[int, list[Dim]] = field(default_factory=dict[int, list[Dim]])
    """Per tensor-valued accumulator, the dimensions of its value axes."""
    pads: dict[ReadOp, float] = field(default_factory=dict[ReadOp, float])
    """With a padded reduction block: each read's padding along it (`padding`)."""


def nests_in(nest: NestOp) -> list[NestOp]:
    return [op for op in nest.walk() if isinstance(op, NestOp)]


def taint(block: Block, roots: set[SSAValue], barrier: set[SSAValue]) -> set[SSAValue]:
    """Values of `block` depending on `roots`, not looking through `barrier` values."""
    tainted = set(roots)
    for op in block.walk():
        if any(r in barrier for r in op.results):
            continue
        deps = N.external_values(op) if op.regions else set(op.operands)
        if deps & tainted:
            tainted.update(op.results)
    return tainted


def is_const(v: SSAValue, value: int) -> bool:
    op = v.owner
    return (
        isinstance(op, arith.ConstantOp)
        and isinstance(op.value, IntegerAttr)
        and op.value.value.data == value
    )


DIV_OPS = (arith.DivUIOp, arith.DivSIOp, arith.FloorDivSIOp)
"""Division of an index (a non-negative one: every flavour rounds down)."""
REM_OPS = (arith.RemUIOp, arith.RemSIOp)
"""Remainder of an index (a non-negative one)."""


def _const_int(v: SSAValue) -> int | None:
    op = v.owner
    if isinstance(op, arith.ConstantOp) and isinstance(op.value, IntegerAttr):
        return op.value.value.data
    return None


def aligned_dim(v: SSAValue, dims: dict[SSAValue, Dim]) -> Dim | None:
    """
    The blocked dimension `d` whose index `v` runs along, one for one, within each block
    of `d`: `d` itself, or `x % D` of such an `x` with `D` a multiple of `d`'s block (the
    blocks start at multiples of the block, so none wraps around).
    """
    d = dims.get(v)
    if d is not None:
        return d if d.axis else None
    op = v.owner
    if not isinstance(op, REM_OPS):
        return None
    inner = aligned_dim(op.lhs, dims)
    divisor = _const_int(op.rhs)
    if inner is None or divisor is None or divisor <= 0 or divisor % inner.block:
        return None
    return inner


def digit(v: SSAValue, dims: dict[SSAValue, Dim]) -> tuple[Dim, bool] | None:
    """
    `v` as a digit of a blocked dimension `d` (a delinearised index: a head and its
    column of `h·64 + c`): `(d, True)` for `x % D`, which runs along `d`'s block,
    `(d, False)` for `x / D`, the same across a block; `x` runs along `d`
    (`aligned_dim`) and `D` is a multiple of `d`'s block. None otherwise.
    """
    op = v.owner
    if not isinstance(op, DIV_OPS + REM_OPS):
        return None
    d = aligned_dim(op.lhs, dims)
    divisor = _const_int(op.rhs)
    if d is None or divisor is None or divisor <= 0 or divisor % d.block:
        return None
    return d, isinstance(op, REM_OPS)


def top_op(op: Operation, block: Block | None) -> Operation:
    while op.parent_block() is not block:
        parent = op.parent_op()
        if parent is None:
            return op
        op = parent
    return op


def arguments(values: Sequence[SSAValue]) -> set[SSAValue]:
    """The block arguments (indices, accumulators) the given values are computed from."""
    found: set[SSAValue] = set()
    work = list(values)
    seen: set[SSAValue] = set()
    while work:
        v = work.pop()
        if v in seen:
            continue
        seen.add(v)
        if isinstance(v, BlockArgument):
            found.add(v)
        elif isinstance(v.owner, Operation):
            work.extend(v.owner.operands)
    return found


def defined_in(v: SSAValue, nest: Operation) -> bool:
    """Whether `v` is defined inside `nest` (its body or a nested op's)."""
    owner = v.owner
    op = owner if isinstance(owner, Operation) else owner.parent_op()
    while op is not None:
        if op is nest:
            return True
        op = op.parent_op()
    return False
