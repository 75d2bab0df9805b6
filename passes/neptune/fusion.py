"""
The terms, matches and IR helpers shared by `neptune-fuse` (`passes.neptune.fuse`)
and its rolling (`rolling`) and split-K (`split_k`) updates.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from xdsl.dialects import arith
from xdsl.dialects.builtin import (
    AnyFloat,
    FloatAttr,
    IntegerAttr,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue

from plmr.dialects.loop import (
    IteratorKind,
    NestOp,
    ReadOp,
)
from plmr.passes.neptune import nests as N
from plmr.passes.neptune.repair import Repair
from plmr.passes.neptune.symbolic import Symbol, emit, sp
from plmr.runtime.loop_ops import combiner_of

P = IteratorKind.PARALLEL
R = IteratorKind.REDUCTION

KIND_OF: dict[type[Operation], str] = {
    arith.AddfOp: "add",
    arith.MulfOp: "mul",
    arith.MaximumfOp: "max",
    arith.MinimumfOp: "min",
}


class Refused(Exception):
    """Fusion of one pair is not possible; the reason becomes a remark."""


@dataclass
class Term:
    """The update `acc ⊕ g` of a single-result reduction nest."""

    nest: NestOp
    combine: Operation
    kind: str
    g: SSAValue


def term_of(nest: NestOp) -> Term | None:
    if len(nest.res) != 1:
        return None
    ops = combiner_of(nest)
    if ops is None or type(ops[0]) not in KIND_OF:
        return None
    comb = ops[0]
    acc = nest.accumulators[0]
    g = comb.operands[1] if comb.operands[0] is acc else comb.operands[0]
    return Term(nest, comb, KIND_OF[type(comb)], g)


@dataclass
class Match:
    """How a target nest reads the results of an unfinished producer nest."""

    producer: NestOp
    reads: list[ReadOp]
    sigma: dict[int, int]
    """Producer parallel position -> target dimension."""


@dataclass
class Split:
    """A split-K group: the chunk-local fused nest and the global combine nests."""

    loc: NestOp
    chunks: int
    extent: int
    partial: dict[SSAValue, int] = field(default_factory=dict[SSAValue, int])
    """Global result -> index of its chunk-local partial among `loc`'s results."""


def identity_element(kind: str, elt: Attribute) -> float:
    if kind == "add":
        return 0.0
    if kind == "mul":
        return 1.0
    import numpy as np

    bits = elt.bitwidth if isinstance(elt, AnyFloat) else 32
    dtype = {16: np.float16, 64: np.float64}.get(bits, np.float32)
    info = np.finfo(dtype)
    return float(info.min if kind == "max" else info.max)


def constant_value(v: SSAValue) -> float | None:
    op = v.owner
    if isinstance(op, arith.ConstantOp) and isinstance(op.value, FloatAttr):
        return op.value.value.data
    return None


def emit_repair(
    repair: Repair, kind: str, t: SSAValue, old: Sequence[SSAValue], new: Sequence[SSAValue]
) -> SSAValue:
    """`h(t, old, new)` as ops; guarded where `h` divides by an unfinished value."""
    if repair.is_identity:
        return t
    env: dict[Symbol, SSAValue] = {repair.t: t}
    env.update(zip(repair.old, old, strict=True))
    env.update(zip(repair.new, new, strict=True))
    elt = t.type
    h = emit(repair.h, env, elt)
    denominator = sp.fraction(sp.together(repair.h))[1]
    if kind in ("add", "mul") and denominator.free_symbols & set(repair.old):
        # Neptune's `Select(j > 0, h, t)`: the first partial needs no repair, and h
        # may divide by the initial value there.
        ident = arith.ConstantOp(FloatAttr(identity_element(kind, elt), elt)).result  # pyright: ignore
        first = arith.CmpfOp(t, ident, "oeq").result
        h = arith.SelectOp(first, t, h).result
    return h


def is_zero(v: SSAValue) -> bool:
    op = v.owner
    return (
        isinstance(op, arith.ConstantOp)
        and isinstance(op.value, IntegerAttr)
        and op.value.value.data == 0
    )


def inside(op: Operation, ancestor: Operation | None) -> bool:
    current: Operation | None = op
    while current is not None:
        if current is ancestor:
            return True
        current = current.parent_op()
    return False


def top_op(op: Operation, block: Block) -> Operation:
    """The ancestor of `op` (or `op`) that sits directly in `block`."""
    while op.parent_block() is not block:
        parent = op.parent_op()
        assert parent is not None
        op = parent
    return op


def clone_slice(
    ops: Sequence[Operation], values: Sequence[SSAValue], mapping: dict[SSAValue, SSAValue]
) -> None:
    """Clones, in order, the ops of `ops` that `values` depend on (implicit builder)."""
    needed: set[Operation] = set()
    work = [v.owner for v in values if isinstance(v.owner, Operation)]
    op_set = set(ops)
    while work:
        op = work.pop()
        if op in needed or op not in op_set:
            continue
        needed.add(op)
        for v in N.external_values(op):
            if isinstance(v.owner, Operation):
                work.append(v.owner)
    for op in ops:
        if op in needed:
            N.clone_op(op, mapping)


def nest_name(nest: NestOp) -> str:
    return value_name(nest.res[0]) if nest.res else "a nest"


def value_name(v: SSAValue) -> str:
    return f"%{v.name_hint}" if v.name_hint else "a nest"
