"""
How the graph fuzzer draws each unary elementwise op: the operand it may read and what it
knows of the result (`Info`).

An op that carries its meaning (`UnaryElementwiseOp.MEANING`) is drawn from it: its domain
says which operand it reads, its bound how large the result gets. The ops whose entries are
registered by hand are listed here once; `UNARY_DRAWS` holds both, and the generator draws
every unary elementwise op from it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from plmr.dialects import graph
from plmr.dialects.graph import Domain


@dataclass(frozen=True)
class UnaryDraw:
    """
    `domain`: the operand the op reads (any float value, `|x| + c`, or one squashed to a
    moderate size); None for a discontinuous op, which reads only exact values (a rounding
    difference must not flip its result) and whose result is then exact too.
    `bound`: a bound of |result| from a bound of |operand|.
    `keeps_exact`: the result is exact when the operand is (`neg`, `abs`, `relu`).
    """

    domain: Domain | None
    bound: Callable[[float], float]
    keeps_exact: bool = False


def _same(bound: float) -> float:
    return bound


def _one(bound: float) -> float:
    return 1.0


_BY_HAND: dict[type[graph.UnaryElementwiseOp], UnaryDraw] = {
    graph.ReluOp: UnaryDraw(Domain.ANY, _same, keeps_exact=True),
    graph.SiluOp: UnaryDraw(Domain.ANY, _same),
    graph.SigmoidOp: UnaryDraw(Domain.ANY, _one),
    graph.TanhOp: UnaryDraw(Domain.ANY, _one),
    graph.ExpOp: UnaryDraw(Domain.SQUASHED, lambda b: math.exp(min(b, 12))),
    graph.ErfOp: UnaryDraw(Domain.ANY, _one),
    graph.SqrtOp: UnaryDraw(Domain.POSITIVE, math.sqrt),
    graph.NegOp: UnaryDraw(Domain.ANY, _same, keeps_exact=True),
    graph.AbsOp: UnaryDraw(Domain.ANY, _same, keeps_exact=True),
    graph.LogOp: UnaryDraw(Domain.POSITIVE, lambda b: math.log(b) + 1),
    # Squashed: the argument's rounding error stays below the tolerance.
    graph.CosOp: UnaryDraw(Domain.SQUASHED, _one),
    graph.SinOp: UnaryDraw(Domain.SQUASHED, _one),
    graph.FloorOp: UnaryDraw(None, lambda b: b + 1),
    graph.CeilOp: UnaryDraw(None, lambda b: b + 1),
    graph.ReciprocalOp: UnaryDraw(Domain.POSITIVE, lambda b: 2.0),
}

UNARY_DRAWS: dict[type[graph.UnaryElementwiseOp], UnaryDraw] = {
    **_BY_HAND,
    **{
        cls: UnaryDraw(meaning.domain, meaning.bound)
        for cls, meaning in graph.unary_meanings().items()
    },
}
"""Every unary elementwise op the fuzzer draws, with its operand's domain and bound."""

UNARY_EXEMPT: dict[type[graph.UnaryElementwiseOp], str] = {
    graph.NotOp: "reads `i1` values: drawn with the comparisons and logic ops",
}
"""Unary elementwise ops drawn elsewhere, with the reason."""
