"""
Whether a nest's reduction may end in a padded block: `fit`'s uneven split of a
reduction dimension (4,096 features over 420 PEs: one block of 10 on each PE, the last
ending past the end) instead of many small blocks that divide it (five of 2).

The padded lanes of the last block are computed on padded loads (`tile.load ...
padding`, and on the mesh `limits`: whatever a PE's share holds past the tensor's end
reads as the padding). That is exact when, with each read along the padded dimension
padded with `0` or `-inf`, every accumulator's term `g` is the identity of its combine
on the padded lanes: `0` for a sum (a product with a read padded with zeros: a dot, a
sum of squares), `-inf` for a maximum (a score read padded with `-inf`), and likewise
the terms of a rolling (Neptune) update: `exp(-inf - m) · v = 0` with `v` padded with
zeros. `padding_values` finds such paddings by evaluating the terms over an abstract
domain (zero, ±inf, finite of known or unknown sign, unknown) for each assignment of
`0` / `-inf` to the reads. Values the padded reads do not reach are those every lane
sees, taken as finite.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from enum import Enum

from xdsl.dialects import arith
from xdsl.dialects import math as mathd
from xdsl.dialects.builtin import FloatAttr
from xdsl.ir import BlockArgument, Operation, SSAValue

from plmr.dialects.graph import static_shape
from plmr.dialects.loop import NestOp, ReadOp
from plmr.lowering.loop_to_tile.blocks import arguments, defined_in

NEG_INF = -math.inf


class V(Enum):
    """What a value is on a padded lane."""

    ZERO = "0"
    NEG_INF = "-inf"
    POS_INF = "+inf"
    POS = "finite > 0"
    NEG = "finite < 0"
    FINITE = "finite"
    UNKNOWN = "unknown"


_FINITE = (V.ZERO, V.POS, V.NEG, V.FINITE)
IDENTITY = {"add": V.ZERO, "max": V.NEG_INF, "min": V.POS_INF}
"""The value a term must take on a padded lane, by combine."""

MAX_READS = 6
"""Reads along the padded dimension whose paddings are searched one by one; with more,
only all zeros and all `-inf` are tried."""


def padding_values(
    nest: NestOp, dim: BlockArgument, terms: Sequence[tuple[str, SSAValue]]
) -> dict[ReadOp, float] | None:
    """
    A padding for each read of `nest` along `dim` under which every `(combine, g)` of
    `terms` is the combine's identity on the padded lanes, or None.
    """
    if not terms or any(kind not in IDENTITY for kind, _ in terms):
        return None
    reads = [
        op
        for op in nest.walk()
        if isinstance(op, ReadOp)
        and dim in arguments(op.indices)
        and not defined_in(op.source, nest)
    ]
    if not reads or not all(_reads_dim_whole(r, nest, dim) for r in reads):
        return None
    choices: list[tuple[float, ...]]
    if len(reads) <= MAX_READS:
        choices = list(itertools.product((0.0, NEG_INF), repeat=len(reads)))
    else:
        choices = [(0.0,) * len(reads), (NEG_INF,) * len(reads)]
    for pads in choices:
        chosen = dict(zip(reads, pads, strict=True))
        values = _Evaluator(chosen)
        if all(values.of(g) == IDENTITY[kind] for kind, g in terms):
            return chosen
    return None


def _reads_dim_whole(read: ReadOp, nest: NestOp, dim: BlockArgument) -> bool:
    """
    Whether `read` indexes one axis by `dim` itself, an axis as long as the dimension,
    and no other by a value computed from it: then a padded lane (past the dimension's
    end) reads past the tensor's end, where the padding is. A shifted read (`k + 1`) or
    a read of a longer tensor would read real data there.
    """
    if read.padding is not None:
        return False
    axes = [j for j, i in enumerate(read.indices) if i is dim]
    if len(axes) != 1:
        return False
    if any(dim in arguments([i]) for i in read.indices if i is not dim):
        return False
    extent = nest.extents[list(nest.dims).index(dim)]
    return static_shape(read.source, "source")[axes[0]] == extent


class _Evaluator:
    """The abstract value of each SSA value on a padded lane (memoised)."""

    def __init__(self, pads: dict[ReadOp, float]):
        self.pads = pads
        self.memo: dict[SSAValue, V] = {}

    def of(self, v: SSAValue) -> V:
        found = self.memo.get(v)
        if found is None:
            found = self.memo[v] = self._eval(v)
        return found

    def _eval(self, v: SSAValue) -> V:
        op = v.owner
        if isinstance(op, ReadOp) and op in self.pads:
            return V.ZERO if self.pads[op] == 0.0 else V.NEG_INF
        if not isinstance(op, Operation) or not self._reaches_pad(v):
            return _constant(op) if isinstance(op, arith.ConstantOp) else V.FINITE
        rule = _RULES.get(type(op))
        if rule is None:
            return V.UNKNOWN
        return rule([self.of(x) for x in op.operands])

    def _reaches_pad(self, v: SSAValue) -> bool:
        """Whether a padded read reaches `v` (through the ops of the nest's body)."""
        seen: set[SSAValue] = set()
        work = [v]
        while work:
            x = work.pop()
            if x in seen:
                continue
            seen.add(x)
            op = x.owner
            if isinstance(op, ReadOp) and op in self.pads:
                return True
            if isinstance(op, NestOp):
                if any(r in self.pads for r in op.walk() if isinstance(r, ReadOp)):
                    return True
            elif isinstance(op, Operation):
                work.extend(op.operands)
        return False


def _constant(op: arith.ConstantOp) -> V:
    value = op.value
    if not isinstance(value, FloatAttr):
        return V.FINITE
    x = float(value.value.data)
    if math.isnan(x):
        return V.UNKNOWN
    if x == 0:
        return V.ZERO
    if math.isinf(x):
        return V.POS_INF if x > 0 else V.NEG_INF
    return V.POS if x > 0 else V.NEG


def _sign(a: V) -> int | None:
    """+1 / -1 for a value of known sign (infinities included), 0 for zero."""
    return {V.POS: 1, V.POS_INF: 1, V.NEG: -1, V.NEG_INF: -1, V.ZERO: 0}.get(a)


def _neg(a: V) -> V:
    return {
        V.NEG_INF: V.POS_INF,
        V.POS_INF: V.NEG_INF,
        V.POS: V.NEG,
        V.NEG: V.POS,
    }.get(a, a)


def _add(args: list[V]) -> V:
    a, b = args
    if V.UNKNOWN in (a, b) or {a, b} == {V.NEG_INF, V.POS_INF}:
        return V.UNKNOWN
    for inf in (V.NEG_INF, V.POS_INF):
        if inf in (a, b):
            return inf
    if a == V.ZERO:
        return b
    if b == V.ZERO:
        return a
    if a == b and a in (V.POS, V.NEG):
        return a
    return V.FINITE


def _sub(args: list[V]) -> V:
    return _add([args[0], _neg(args[1])])


def _mul(args: list[V]) -> V:
    a, b = args
    if V.UNKNOWN in (a, b):
        return V.UNKNOWN
    infinite = {V.NEG_INF, V.POS_INF}
    if V.ZERO in (a, b):
        # 0 · ±inf is NaN.
        return V.UNKNOWN if a in infinite or b in infinite else V.ZERO
    sa, sb = _sign(a), _sign(b)
    if a in infinite or b in infinite:
        if sa is None or sb is None:
            return V.UNKNOWN
        return V.POS_INF if sa * sb > 0 else V.NEG_INF
    if sa is not None and sb is not None:
        return V.POS if sa * sb > 0 else V.NEG
    return V.FINITE


def _div(args: list[V]) -> V:
    a, b = args
    if b not in (V.POS, V.NEG):
        # By zero, by an infinity, by what may be zero (a finite value of unknown
        # sign) or by what is unknown.
        return V.UNKNOWN
    if a == V.ZERO:
        return V.ZERO
    return _mul([a, b])


def _max(args: list[V]) -> V:
    a, b = args
    if V.UNKNOWN in (a, b) or V.POS_INF in (a, b):
        return V.UNKNOWN if V.UNKNOWN in (a, b) else V.POS_INF
    if a == V.NEG_INF:
        return b
    if b == V.NEG_INF:
        return a
    if V.POS in (a, b):
        return V.POS
    return V.FINITE


def _min(args: list[V]) -> V:
    return _neg(_max([_neg(a) for a in args]))


def _exp(args: list[V]) -> V:
    (a,) = args
    if a == V.NEG_INF:
        return V.ZERO
    if a in _FINITE:
        return V.POS
    return V.POS_INF if a == V.POS_INF else V.UNKNOWN


_RULES: dict[type[Operation], Callable[[list[V]], V]] = {
    arith.AddfOp: _add,
    arith.SubfOp: _sub,
    arith.MulfOp: _mul,
    arith.DivfOp: _div,
    arith.NegfOp: lambda args: _neg(args[0]),
    arith.MaximumfOp: _max,
    arith.MinimumfOp: _min,
    mathd.ExpOp: _exp,
}
"""How each op acts on the abstract values (other ops of a padded value: unknown)."""
