"""
The values of a random `graph` program (`plmr.validate.fuzz.graph_gen`): the function's
arguments and constants, what the generator knows of each value (`Info`: a bound and
whether it is exact), and the draws of values that an op reads (a float value, a value
that broadcasts with another, `|x| + c`, a value squashed by `tanh`). `GraphGenerator`
builds on `ValueDraws` with the draws of the ops.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np
from xdsl.dialects.builtin import (
    Float32Type,
    IntegerType,
    TensorType,
    f32,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue

from plmr.dialects import graph
from plmr.dialects.graph_shapes import element_type, static_shape
from plmr.passes.taso.dag import constant_attr

Shape = tuple[int, ...]


DIMS = (1, 2, 2, 4, 4, 4, 8, 8, 3, 5, 6)
"""Dimension sizes of inputs (drawn uniformly): mostly powers of 2, some odd, and 1."""


@dataclass(frozen=True)
class Info:
    """What the generator knows of a value (see `plmr.validate.fuzz.graph_gen`)."""

    bound: float
    exact: bool


SPECIAL_VALUES = (
    -0.0,
    float(np.finfo(np.float32).smallest_subnormal),
    -1e-40,  # a subnormal f32
    math.inf,
    -math.inf,
    math.nan,
)
"""Values some constants of a `special` program carry."""


MASK_VALUES = (-math.inf, float(np.finfo(np.float32).min), -1e9)
"""The masked entries of an additive mask."""


class Retry(Exception):
    """This draw does not fit: draw another op."""


@dataclass
class ValueDraws:
    """The values of one random function `@main` and the draws of values from them."""

    rng: random.Random
    max_ops: int = 8
    max_elems: int = 128
    special: bool = False
    """Constants, pads and masks with special values (see `plmr.validate.fuzz.graph_gen`)."""

    def __post_init__(self) -> None:
        self.np_rng = np.random.default_rng(self.rng.getrandbits(32))
        self.block = Block()
        self.values: list[SSAValue] = []
        self.info: dict[SSAValue, Info] = {}
        self.arg_types: list[Attribute] = []

    # -- values -----------------------------------------------------------------------

    def _shape(self, rank: int | None = None) -> Shape:
        if rank is None:
            rank = self.rng.choice((1, 2, 2, 2, 3, 3, 4))
        while True:
            shape = tuple(self.rng.choice(DIMS) for _ in range(rank))
            if math.prod(shape) <= self.max_elems:
                return shape

    def _add_arg(self, t: TensorType[Attribute]) -> SSAValue:
        arg = self.block.insert_arg(t, len(self.block.args))
        arg.name_hint = f"x{len(self.block.args) - 1}"
        self.arg_types.append(t)
        self.values.append(arg)
        is_int = not isinstance(t.element_type, Float32Type)
        self.info[arg] = Info(8.0 if is_int else 4.5, True)
        return arg

    def _emit(self, op: Operation, infos: Sequence[Info] | Info) -> Operation:
        self.block.add_op(op)
        if isinstance(infos, Info):
            infos = [infos] * len(op.results)
        for r, i in zip(op.results, infos, strict=True):
            self.values.append(r)
            self.info[r] = i
        return op

    def _constant(self, shape: Shape, elt: Attribute = f32, low: float = -1.0) -> SSAValue:
        width = int_width(elt)
        if width is not None:
            if width == 1:
                data = self.np_rng.integers(0, 2, shape).astype(np.bool_)
            else:
                data = self.np_rng.integers(-3, 4, shape)
            bound = 3.0
        else:
            data = self.np_rng.uniform(low, 1.0, shape).astype(np.float32)
            # Occasionally a constant of integral values (exact products).
            if self.rng.random() < 0.2:
                data = np.round(data * 2).astype(np.float32)
            bound = float(np.max(np.abs(data), initial=0.0))
            if self.special and data.size and self.rng.random() < 0.3:
                flat = data.reshape(-1)
                for _ in range(self.rng.randint(1, min(3, flat.size))):
                    flat[self.rng.randrange(flat.size)] = self.rng.choice(SPECIAL_VALUES)
                data = flat.reshape(data.shape)
                if not np.isfinite(data).all():
                    op = graph.ConstantOp(constant_attr(np.asarray(data), elt))
                    self._emit(op, Info(math.inf, False))
                    return op.results[0]
        op = graph.ConstantOp(constant_attr(np.asarray(data), elt))
        self._emit(op, Info(max(bound, 1e-3), True))
        return op.results[0]

    def _pick(self, pred: Callable[[SSAValue], bool] = lambda v: True) -> SSAValue:
        fits = [v for v in self.values if pred(v)]
        if not fits:
            raise Retry
        # Prefer recent values: deeper programs.
        weights = [1.0 + i for i in range(len(fits))]
        return self.rng.choices(fits, weights)[0]

    def _float(self, v: SSAValue) -> bool:
        return isinstance(element_type(v), Float32Type)

    def _int(self, v: SSAValue) -> bool:
        width = int_width(element_type(v))
        return width is not None and width > 1

    def _bool(self, v: SSAValue) -> bool:
        return int_width(element_type(v)) == 1

    def _pick_float(self, min_rank: int = 0) -> SSAValue:
        return self._pick(
            lambda v: self._float(v) and len(static_shape(v, "v")) >= min_rank
        )

    def _scalar(self, c: float) -> SSAValue:
        op = graph.ConstantOp(constant_attr(np.asarray(c, np.float32), f32))
        return self._emit(op, Info(abs(c), True)).results[0]

    def _positive(self, v: SSAValue, c: float = 0.5) -> SSAValue:
        """|v| + c."""
        a = self._emit(graph.AbsOp(v), self._i(v))
        k = self._scalar(c)
        out = self._emit(graph.AddOp(a.results[0], k), Info(self._i(v).bound + c, False))
        return out.results[0]

    def _squashed(self, v: SSAValue, limit: float = 12.0) -> SSAValue:
        if self._i(v).bound <= limit:
            return v
        return self._emit(graph.TanhOp(v), Info(1.0, False)).results[0]

    def _i(self, v: SSAValue) -> Info:
        return self.info[v]

    def _broadcast_partner(self, a: SSAValue) -> SSAValue:
        """A value (or new constant) whose shape broadcasts with `a`'s."""
        sa = static_shape(a, "a")
        choice = self.rng.random()
        if choice < 0.45:
            same = [v for v in self.values if self._float(v) and static_shape(v, "v") == sa]
            if same:
                return self.rng.choice(same)
        if choice < 0.7:
            ok = [
                v
                for v in self.values
                if self._float(v) and broadcasts(static_shape(v, "v"), sa)
            ]
            if ok:
                return self.rng.choice(ok)
        # A constant of a suffix of the shape, some dims set to 1.
        start = self.rng.randint(0, len(sa))
        shape = tuple(d if self.rng.random() < 0.7 else 1 for d in sa[start:])
        return self._constant(shape)


def int_width(t: Attribute) -> int | None:
    """The width of an integer type, else None."""
    if isinstance(t, IntegerType):
        return cast(IntegerType, t).bitwidth
    return None


def broadcasts(small: Shape, big: Shape) -> bool:
    """Whether `small` broadcasts to exactly `big` (numpy rules)."""
    if len(small) > len(big):
        return False
    return all(s in (1, b) for s, b in zip(reversed(small), reversed(big), strict=False))


def factorize(n: int) -> list[int]:
    """The prime factors of `n`, smallest first, with their multiplicity."""
    out: list[int] = []
    d = 2
    while d * d <= n:
        while n % d == 0:
            out.append(d)
            n //= d
        d += 1
    if n > 1:
        out.append(n)
    return out
