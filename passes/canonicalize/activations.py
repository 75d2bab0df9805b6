"""
Activations spelled out op by op, recognised as plmr's own: `x · sigmoid(x)` is
`graph.silu` (LLaMA's MLP), `0.5·x·(1 + erf(x/√2))` is `graph.gelu` (BERT; the 0.5
may multiply either factor) and
`0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))` is `graph.gelu tanh` (GPT-2's `NewGELU`).
The constants must match to a relative `1e-6` (they are f32 roundings in exports).
"""

from __future__ import annotations

import math

from xdsl.ir import SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from plmr.dialects import graph
from plmr.passes.canonicalize.match import (
    commuted,
    elt_of,
    owner_of,
    scalar_const,
    shape_of,
)

_RTOL = 1e-6


def _near(value: float | None, want: float) -> bool:
    return value is not None and abs(value - want) <= _RTOL * abs(want)


def _times_const(value: SSAValue) -> tuple[SSAValue, float] | None:
    """`(v, c)` if `value` is `v · c` for a scalar constant `c` (`scale`, `mul`, `div`)."""
    scale = owner_of(value, graph.ScaleOp)
    if scale is not None:
        return scale.input, scale.factor.value.data
    op = value.owner
    if isinstance(op, graph.MulOp | graph.DivOp):
        for v, c in commuted(op):
            k = scalar_const(c)
            if k is None or shape_of(v) != shape_of(value) or c == v:
                continue
            if isinstance(op, graph.DivOp):
                return (v, 1.0 / k) if k != 0 else None
            return v, k
    return None


def _one_plus(value: SSAValue) -> SSAValue | None:
    """`t` if `value` is `1 + t`."""
    add = owner_of(value, graph.AddOp)
    if add is None:
        return None
    for t, one in commuted(add):
        if scalar_const(one) == 1.0 and shape_of(t) == shape_of(value):
            return t
    return None


def _cube_of(value: SSAValue) -> SSAValue | None:
    """`x` if `value` is `pow(x, 3)` or `x·x·x`."""
    p = owner_of(value, graph.PowOp)
    if p is not None:
        return p.input if p.exponent.value.data == 3.0 else None
    mul = owner_of(value, graph.MulOp)
    if mul is None:
        return None
    for sq, x in commuted(mul):
        inner = owner_of(sq, graph.MulOp)
        if inner is not None and inner.lhs == inner.rhs == x:
            return x
    return None


def _gelu_of(t: SSAValue, x: SSAValue) -> bool | None:
    """Whether `t` is GELU's erf (False) or tanh (True) term of `x`; None if neither."""
    erf = owner_of(t, graph.ErfOp)
    if erf is not None:
        arg = _times_const(erf.input)
        if arg is not None and arg[0] == x and _near(arg[1], 1 / math.sqrt(2.0)):
            return False
        return None
    tanh = owner_of(t, graph.TanhOp)
    if tanh is None:
        return None
    arg = _times_const(tanh.input)
    if arg is None or not _near(arg[1], math.sqrt(2 / math.pi)):
        return None
    inner = owner_of(arg[0], graph.AddOp)
    if inner is None:
        return None
    for lin, cubic in commuted(inner):
        term = _times_const(cubic)
        if lin == x and term is not None and _near(term[1], 0.044715):
            if _cube_of(term[0]) == x:
                return True
    return None


def _half_x_times_one_plus(a: SSAValue, b: SSAValue) -> tuple[SSAValue, SSAValue] | None:
    """`(x, t)` if `a · b` is `(0.5·x) · (1 + t)` or `x · (0.5·(1 + t))`."""
    half = _times_const(a)
    t = _one_plus(b)
    if half is not None and t is not None and half[1] == 0.5:
        return half[0], t
    half = _times_const(b)
    if half is not None and half[1] == 0.5:
        t = _one_plus(half[0])
        if t is not None:
            return a, t
    return None


class RecognizeActivations(RewritePattern):
    """`x · sigmoid(x)` -> `graph.silu x`; the GELU spellings above -> `graph.gelu`."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: graph.MulOp, rewriter: PatternRewriter, /):
        if not graph.is_float_type(elt_of(op.result)):
            return
        for a, b in commuted(op):
            sig = owner_of(b, graph.SigmoidOp)
            if sig is not None and sig.input == a and op.result.type == a.type:
                rewriter.replace(op, graph.SiluOp(a))
                return
            found = _half_x_times_one_plus(a, b)
            if found is None:
                continue
            x, t = found
            tanh = _gelu_of(t, x)
            if tanh is not None and op.result.type == x.type:
                rewriter.replace(op, graph.GeluOp(x, tanh))
                return


ACTIVATION_PATTERNS = (RecognizeActivations,)
