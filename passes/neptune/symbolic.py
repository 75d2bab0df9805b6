"""
Scalar expressions of `loop.nest` bodies as sympy expressions, and back.

`to_sympy` follows the definitions of a value through `arith` / `math` float ops and
stops at *leaves* (reads, indices, accumulators, ops sympy does not model), which the
caller names with symbols. `emit` builds `arith` / `math` ops for a sympy expression
whose symbols stand for IR values.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Container, Mapping
from typing import Any, TypeAlias, cast

import numpy as np
import sympy  # pyright: ignore[reportMissingTypeStubs]
from xdsl.dialects import arith
from xdsl.dialects import math as mathd
from xdsl.dialects.builtin import AnyFloat, FloatAttr
from xdsl.ir import Attribute, Operation, SSAValue

from plmr.errors import PlmrError

sp: Any = sympy
"""sympy (it ships no type annotations strict checking can use)."""

Expr: TypeAlias = Any
"""A sympy expression."""

Symbol: TypeAlias = Any
"""A sympy symbol."""

_BINARY: dict[type[Operation], Callable[[Expr, Expr], Expr]] = {
    arith.AddfOp: lambda a, b: a + b,
    arith.SubfOp: lambda a, b: a - b,
    arith.MulfOp: lambda a, b: a * b,
    arith.DivfOp: lambda a, b: a / b,
    arith.MaximumfOp: lambda a, b: sp.Max(a, b),
    arith.MinimumfOp: lambda a, b: sp.Min(a, b),
}

_UNARY: dict[type[Operation], Callable[[Expr], Expr]] = {
    arith.NegfOp: lambda a: -a,
    mathd.ExpOp: sp.exp,
    mathd.LogOp: sp.log,
    mathd.CosOp: sp.cos,
    mathd.SinOp: sp.sin,
    mathd.SqrtOp: sp.sqrt,
    mathd.TanhOp: sp.tanh,
}

Leaf = Callable[[SSAValue], Expr]


def to_sympy(
    value: SSAValue,
    leaf: Leaf,
    stop: Container[SSAValue] = (),
    known: dict[Expr, SSAValue] | None = None,
) -> Expr:
    """
    The expression computing `value`; `leaf` names every value it does not model, and
    the values of `stop`. `known`, if given, receives every subexpression with the IR
    value that computes it (so that `emit` can reuse those values).
    """
    memo: dict[SSAValue, Expr] = {}

    def go(v: SSAValue) -> Expr:
        if v in memo:
            return memo[v]
        op = v.owner
        expr: Expr
        if v in stop:
            expr = leaf(v)
        elif isinstance(op, arith.ConstantOp) and _finite(op):
            expr = sp.Float(cast(FloatAttr, op.value).value.data, 17)
        elif isinstance(op, Operation) and type(op) in _BINARY:
            expr = _BINARY[type(op)](go(op.operands[0]), go(op.operands[1]))
        elif isinstance(op, Operation) and type(op) in _UNARY:
            expr = _UNARY[type(op)](go(op.operands[0]))
        else:
            expr = leaf(v)
        memo[v] = expr
        if known is not None:
            known.setdefault(expr, v)
        return expr

    return go(value)


def modelled(op: Operation) -> bool:
    """Whether `to_sympy` looks through `op` (rather than making it a leaf)."""
    if isinstance(op, arith.ConstantOp):
        return _finite(op)
    return type(op) in _BINARY or type(op) in _UNARY


def _finite(op: arith.ConstantOp) -> bool:
    """
    A finite float constant. NaN and ±inf stay leaves: sympy cannot order NaN (`Max`
    refuses it) and simplifies `inf - inf` to `nan` where the IR's IEEE arithmetic may
    not reach it.
    """
    return isinstance(op.value, FloatAttr) and math.isfinite(op.value.value.data)


def _dtype(elt: AnyFloat) -> Any:
    """The numpy type holding `elt`'s values (bf16 as f32: the same range)."""
    if elt.bitwidth == 16 and elt.name != "bf16":
        return np.float16
    return np.float64 if elt.bitwidth == 64 else np.float32


def representable(expr: Expr, elt: Attribute) -> bool:
    """
    Whether every number of `expr` is a finite value of `elt` that does not round to
    0. sympy's automatic evaluation splits `exp(s - 1e9)` into `exp(-1e9)·exp(s)`, a
    coefficient far below the smallest float and a factor that overflows: built as IR,
    their product is `0·inf`, not the small value it stands for.
    """
    if not isinstance(elt, AnyFloat):
        return False
    dtype = _dtype(elt)
    with np.errstate(over="ignore", under="ignore"):
        for n in expr.atoms(sp.Number):
            x = float(n) if n.is_finite else float("inf")
            y = np.array(x).astype(dtype)
            if not np.isfinite(y) or (n != 0 and y == 0):
                return False
    return True


def emit(expr: Expr, env: Mapping[Expr, SSAValue], elt: Attribute) -> SSAValue:
    """
    Builds `arith` / `math` ops (under the current implicit builder) computing `expr`,
    with each symbol (or any subexpression) found in `env` replaced by its value.
    """
    if not isinstance(elt, AnyFloat):
        raise PlmrError(f"repairs are built on floats, not {elt}")
    memo: dict[Expr, SSAValue] = {}

    def number(x: Expr) -> SSAValue:
        if not representable(x, elt):
            raise PlmrError(f"the number {x} of a repair is not a finite {elt}")
        return arith.ConstantOp(FloatAttr(float(x), elt)).result

    def go(e: Expr) -> SSAValue:
        if e in memo:
            return memo[e]
        v = _go(e)
        memo[e] = v
        return v

    def _go(e: Expr) -> SSAValue:
        if e in env:
            return env[e]
        if isinstance(e, sp.Symbol):
            raise PlmrError(f"no value for symbol {e}")
        if e.is_Number:
            return number(e)
        if isinstance(e, sp.Add):
            pos: list[Expr] = []
            negs: list[Expr] = []
            for term in e.as_ordered_terms():
                coeff, _ = term.as_coeff_Mul()
                (negs if coeff.is_negative else pos).append(
                    term if not coeff.is_negative else -term
                )
            acc: SSAValue | None = None
            for term in pos:
                acc = go(term) if acc is None else arith.AddfOp(acc, go(term)).result
            for term in negs:
                acc = (
                    arith.NegfOp(go(term)).result
                    if acc is None
                    else arith.SubfOp(acc, go(term)).result
                )
            assert acc is not None
            return acc
        if isinstance(e, sp.Mul):
            coeff, rest = e.as_coeff_Mul()
            if coeff == -1:
                return arith.NegfOp(go(rest)).result
            nums: list[Expr] = []
            dens: list[Expr] = []
            for f in e.args:
                if isinstance(f, sp.Pow) and f.exp.is_negative:
                    dens.append(f.base ** (-f.exp))
                else:
                    nums.append(f)
            num: SSAValue | None = None
            for f in nums:
                num = go(f) if num is None else arith.MulfOp(num, go(f)).result
            if num is None:
                num = number(sp.Integer(1))
            for f in dens:
                num = arith.DivfOp(num, go(f)).result
            return num
        if isinstance(e, sp.Pow):
            base, ex = e.base, e.exp
            if ex == sp.Rational(1, 2):
                return mathd.SqrtOp(go(base)).result
            if ex.is_Integer and int(ex) > 0:
                b = go(base)
                out = b
                for _ in range(int(ex) - 1):
                    out = arith.MulfOp(out, b).result
                return out
            if ex.is_negative:
                return arith.DivfOp(number(sp.Integer(1)), go(base ** (-ex))).result
            raise PlmrError(f"cannot build the power {e}")
        if isinstance(e, sp.exp):
            return mathd.ExpOp(go(e.args[0])).result
        if isinstance(e, sp.log):
            return mathd.LogOp(go(e.args[0])).result
        if isinstance(e, sp.tanh):
            return mathd.TanhOp(go(e.args[0])).result
        if isinstance(e, sp.Max | sp.Min):
            op = arith.MaximumfOp if isinstance(e, sp.Max) else arith.MinimumfOp
            args = [go(a) for a in e.args]
            out = args[0]
            for a in args[1:]:
                out = op(out, a).result
            return out
        raise PlmrError(f"cannot build IR for the expression {e}")

    return go(expr)
