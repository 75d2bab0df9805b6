"""
Random valid `graph` programs: DAGs over every graph op with consistent shapes,
broadcasting, attributes and constants.

Each program is built op by op: an op kind is drawn, its operands are drawn from the
values built so far (or made as constants), and its attributes are drawn to fit their
shapes; the op's own constructor infers (and so checks) the result type, and a draw
that does not fit is drawn again. Values carry what the generator knows of them so
that every program is well defined on standard-normal inputs:

- `bound`: an upper bound of |value| on typical inputs; `exp` of a value that may be
  large is squashed by `tanh` first, so nothing overflows.
- `exact`: the value is computed without rounding that a pass may legitimately change
  (data movement, `max`, `neg`, comparisons, ...). Discontinuous ops (`floor`, `ceil`,
  comparisons, float-to-integer casts) only read exact values, so a rounding difference
  of 1 ulp can never flip their result.
- logs, square roots, reciprocals, divisors and fractional powers read `|x| + c`.

With `special`, the program also holds the values that masks and guards meet: some
float constants carry `-0.0`, subnormals, `±inf` and NaN (such a constant is not
`exact`, so no cast or rounding op reads it), constant pads may pad with `-inf` or
`-0.0` (a max-pool's padding), and `mask` ops add a mask of `-inf`, `finfo(f32).min` or
`-1e9` entries (whole rows of them too) to a value and take its softmax (an additive
attention mask).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    ModuleOp,
    TensorType,
    f32,
    i1,
    i32,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.utils.exceptions import VerifyException

from plmr.dialects import graph
from plmr.dialects.graph import Domain
from plmr.dialects.graph_shapes import element_type, static_shape
from plmr.errors import PlmrError
from plmr.passes.taso.dag import constant_attr
from plmr.validate.fuzz.graph_values import (
    DIMS,
    MASK_VALUES,
    SPECIAL_VALUES,
    Info,
    Shape,
    ValueDraws,
)
from plmr.validate.fuzz.graph_values import Retry as _Retry
from plmr.validate.fuzz.graph_values import broadcasts as _broadcasts
from plmr.validate.fuzz.graph_values import factorize as _factorize
from plmr.validate.fuzz.unary_draws import UNARY_DRAWS, UnaryDraw

DRAWN_OPS: frozenset[type[Operation]] = frozenset(
    {
        graph.AddOp,
        graph.SubOp,
        graph.MulOp,
        graph.DivOp,
        graph.MaximumOp,
        graph.MinimumOp,
        graph.GeluOp,
        graph.PowOp,
        graph.ScaleOp,
        graph.MatmulOp,
        graph.Conv2dOp,
        graph.PoolOp,
        graph.TransposeOp,
        graph.ReshapeOp,
        graph.ConcatOp,
        graph.SplitOp,
        graph.SliceOp,
        graph.ExpandOp,
        graph.PadOp,
        graph.GatherOp,
        graph.GatherElementsOp,
        graph.ReduceOp,
        graph.SoftmaxOp,
        graph.LayerNormOp,
        graph.RmsNormOp,
        graph.WhereOp,
        graph.CmpOp,
        graph.NotOp,
        graph.AndOp,
        graph.OrOp,
        graph.XorOp,
        graph.CastOp,
        graph.ConstantOp,
        *UNARY_DRAWS,
    }
)
"""Every graph op the generator draws: the unary elementwise ops of `UNARY_DRAWS` and the
ops its other draws build (a `graph.weight`'s values live in a file, and fuzzed programs
are self-contained)."""


@dataclass
class GraphGenerator(ValueDraws):
    """Builds one random function `@main` (see `generate_graph`)."""

    # -- ops --------------------------------------------------------------------------

    def _binary(self) -> None:
        kind = self.rng.choice(("add", "sub", "mul", "div", "maximum", "minimum"))
        a = self._pick_float()
        b = self._broadcast_partner(a)
        if self.rng.random() < 0.5:
            a, b = b, a
        ia, ib = self._i(a), self._i(b)
        if kind == "div":
            b = self._positive(b)
            op = graph.DivOp(a, b)
            self._emit(op, Info(ia.bound / 0.5, False))
        elif kind == "add":
            self._emit(graph.AddOp(a, b), Info(ia.bound + ib.bound, False))
        elif kind == "sub":
            self._emit(graph.SubOp(a, b), Info(ia.bound + ib.bound, False))
        elif kind == "mul":
            self._emit(graph.MulOp(a, b), Info(ia.bound * ib.bound, False))
        elif kind == "maximum":
            self._emit(
                graph.MaximumOp(a, b),
                Info(max(ia.bound, ib.bound), ia.exact and ib.exact),
            )
        else:
            self._emit(
                graph.MinimumOp(a, b),
                Info(max(ia.bound, ib.bound), ia.exact and ib.exact),
            )

    UNARY_CHOICES: ClassVar[tuple[type[graph.UnaryElementwiseOp] | str, ...]] = (
        *UNARY_DRAWS,
        "gelu",
        "pow",
        "scale",
    )
    """Every unary elementwise op (`UNARY_DRAWS`) and the unary ops with attributes."""

    def _unary(self) -> None:
        kind = self.rng.choice(self.UNARY_CHOICES)
        if not isinstance(kind, str):
            self._unary_elementwise(kind, UNARY_DRAWS[kind])
            return
        a = self._pick_float()
        ia = self._i(a)
        if kind == "gelu":
            self._emit(graph.GeluOp(a, self.rng.random() < 0.5), Info(ia.bound, False))
        elif kind == "pow":
            exponent = self.rng.choice((2.0, 3.0, 0.5, -1.0, 1.5))
            if exponent != int(exponent) or exponent < 0:
                a = self._positive(a)
            else:
                a = self._squashed(a, 6.0)
            bound = self._i(a).bound
            self._emit(
                graph.PowOp(a, exponent), Info(max(bound, 2.0) ** abs(exponent), False)
            )
        else:
            factor = self.rng.choice((0.5, 2.0, -1.0, 0.1, 3.0))
            exact = ia.exact and factor in (0.5, 2.0, -1.0)
            self._emit(graph.ScaleOp(a, factor), Info(ia.bound * abs(factor), exact))

    def _unary_elementwise(
        self, cls: type[graph.UnaryElementwiseOp], draw: UnaryDraw
    ) -> None:
        if draw.domain is None:
            a = self._pick(lambda v: self._float(v) and self._i(v).exact)
            self._emit(cls(a), Info(draw.bound(self._i(a).bound), True))
            return
        a = self._pick_float()
        if draw.domain is Domain.POSITIVE:
            a = self._positive(a)
        elif draw.domain is Domain.SQUASHED:
            a = self._squashed(a)
        ia = self._i(a)
        self._emit(cls(a), Info(draw.bound(ia.bound), draw.keeps_exact and ia.exact))

    def _matmul(self) -> None:
        a = self._pick_float(1)
        sa = static_shape(a, "a")
        ta = len(sa) >= 2 and self.rng.random() < 0.25
        tb = self.rng.random() < 0.3
        k = sa[len(sa) - 2] if ta else sa[len(sa) - 1]
        if self.rng.random() < 0.6:
            n = self.rng.choice(DIMS)
            rank_b = self.rng.choice((1, 2, 2, len(sa))) if len(sa) >= 2 else 2
            if rank_b == 1:
                tb = False
                shape_b: Shape = (k,)
            else:
                batch = sa[:-2] if rank_b == len(sa) and len(sa) > 2 else ()
                batch = tuple(d if self.rng.random() < 0.7 else 1 for d in batch)
                shape_b = (*batch, n, k) if tb else (*batch, k, n)
            b = self._constant(shape_b)
        else:
            b = self._pick(
                lambda v: (
                    self._float(v)
                    and len(static_shape(v, "v")) >= 2
                    and static_shape(v, "v")[-1 if tb else -2] == k
                )
            )
        op = graph.MatmulOp(a, b, ta, tb)
        if math.prod(static_shape(op.results[0], "r")) > 4 * self.max_elems:
            raise _Retry
        self._emit(op, Info(self._i(a).bound * self._i(b).bound * k, False))

    def _transpose(self) -> None:
        a = self._pick(lambda v: len(static_shape(v, "v")) >= 2)
        perm = list(range(len(static_shape(a, "a"))))
        self.rng.shuffle(perm)
        self._emit(graph.TransposeOp(a, perm), self._i(a))

    def _reshape(self) -> None:
        a = self._pick()
        n = math.prod(static_shape(a, "a"))
        factors = _factorize(n)
        self.rng.shuffle(factors)
        rank = self.rng.randint(1, min(4, max(1, len(factors))))
        shape = [1] * rank
        for f in factors:
            shape[self.rng.randrange(rank)] *= f
        if self.rng.random() < 0.2:
            shape.insert(self.rng.randint(0, len(shape)), 1)
        self._emit(graph.ReshapeOp(a, shape), self._i(a))

    def _reduce(self) -> None:
        a = self._pick(lambda v: self._float(v) and len(static_shape(v, "v")) >= 1)
        rank = len(static_shape(a, "a"))
        axes = sorted(self.rng.sample(range(rank), self.rng.randint(1, rank)))
        if self.rng.random() < 0.3:
            axes = [ax - rank for ax in axes]
        kind = self.rng.choice(("sum", "max", "min", "mean"))
        keep = self.rng.random() < 0.4
        ia = self._i(a)
        n = math.prod(static_shape(a, "a")[ax] for ax in axes)
        bound = ia.bound * n if kind == "sum" else ia.bound
        exact = ia.exact and kind in ("max", "min")
        self._emit(graph.ReduceOp(kind, a, axes, keep), Info(bound, exact))

    def _softmax(self) -> None:
        a = self._pick_float(1)
        axis = self.rng.randrange(-len(static_shape(a, "a")), len(static_shape(a, "a")))
        self._emit(graph.SoftmaxOp(self._squashed(a, 30.0), axis), Info(1.0, False))

    def _mask(self) -> None:
        a = self._pick_float(1)
        sa = static_shape(a, "a")
        start = self.rng.randint(0, len(sa) - 1)
        shape = tuple(d if self.rng.random() < 0.7 else 1 for d in sa[start:])
        share = self.rng.choice((0.3, 0.6, 1.0))
        fill = np.float32(self.rng.choice(MASK_VALUES))
        mask = np.where(self.np_rng.random(shape) < share, fill, np.float32(0.0))
        c = graph.ConstantOp(constant_attr(mask.astype(np.float32), f32))
        self._emit(c, Info(math.inf, False))
        masked = graph.AddOp(self._squashed(a, 30.0), c.results[0])
        self._emit(masked, Info(math.inf, False))
        self._emit(graph.SoftmaxOp(masked.results[0], -1), Info(1.0, False))
        # Only the softmax is read further: sums of products of `finfo.min` entries
        # overflow to `+inf` or `-inf` (or NaN) depending on the order of the sum,
        # which any pass may change.
        self.values.remove(c.results[0])
        self.values.remove(masked.results[0])

    def _norm(self) -> None:
        a = self._pick_float(1)
        shape = static_shape(a, "a")
        axis = self.rng.randrange(len(shape))
        norm = shape[axis:]
        if math.prod(norm) < 2:
            raise _Retry
        param_shape = tuple(d if self.rng.random() < 0.8 else 1 for d in norm)
        if self.rng.random() < 0.3:
            param_shape = param_shape[self.rng.randint(0, len(param_shape) - 1) :]
        scale = self._constant(param_shape, low=0.5)
        axis_attr = axis if self.rng.random() < 0.5 else axis - len(shape)
        if self.rng.random() < 0.5:
            bias = self._constant(param_shape) if self.rng.random() < 0.7 else None
            op: Operation = graph.LayerNormOp(a, scale, bias, axis_attr)
        else:
            op = graph.RmsNormOp(a, scale, axis_attr, self.rng.choice((1e-5, 1e-6)))
        self._emit(op, Info(8.0, False))

    def _concat(self) -> None:
        a = self._pick(lambda v: len(static_shape(v, "v")) >= 1)
        sa = static_shape(a, "a")
        axis = self.rng.randrange(len(sa))
        others = [
            v
            for v in self.values
            if element_type(v) == element_type(a)
            and len(static_shape(v, "v")) == len(sa)
            and all(
                d == e
                for i, (d, e) in enumerate(zip(static_shape(v, "v"), sa))
                if i != axis
            )
        ]
        if self.rng.random() < 0.5 or not others:
            shape = list(sa)
            shape[axis] = self.rng.choice((1, 2, 3))
            b = self._constant(tuple(shape), element_type(a))
        else:
            b = self.rng.choice(others)
        inputs = [a, b] if self.rng.random() < 0.5 else [b, a]
        ia, ib = self._i(a), self._i(b)
        self._emit(
            graph.ConcatOp(inputs, axis - len(sa) if self.rng.random() < 0.3 else axis),
            Info(max(ia.bound, ib.bound), ia.exact and ib.exact),
        )

    def _split(self) -> None:
        a = self._pick(lambda v: any(d >= 2 for d in static_shape(v, "v")))
        sa = static_shape(a, "a")
        axis = self.rng.choice([i for i, d in enumerate(sa) if d >= 2])
        cut = self.rng.randint(1, sa[axis] - 1)
        sizes = [cut, sa[axis] - cut]
        if sizes[1] >= 2 and self.rng.random() < 0.3:
            c2 = self.rng.randint(1, sizes[1] - 1)
            sizes = [cut, c2, sizes[1] - c2]
        self._emit(graph.SplitOp(a, axis, sizes), self._i(a))

    def _conv_input(self) -> SSAValue:
        """A float NCHW value: an existing rank-4 one or a reshape of one."""
        fours = [
            v for v in self.values if self._float(v) and len(static_shape(v, "v")) == 4
        ]
        if fours and self.rng.random() < 0.7:
            return self.rng.choice(fours)
        a = self._pick_float()
        n = math.prod(static_shape(a, "a"))
        f = _factorize(n)
        self.rng.shuffle(f)
        shape = [1, 1, 1, 1]
        for x in f:
            shape[self.rng.choice((1, 2, 2, 3, 3))] *= x
        return self._emit(graph.ReshapeOp(a, shape), self._i(a)).results[0]

    def _conv(self) -> None:
        x = self._conv_input()
        n, c, h, w = static_shape(x, "x")
        groups = self.rng.choice([g for g in (1, 2, 3) if c % g == 0])
        m = groups * self.rng.choice((1, 2, 3))
        kh, kw = self.rng.choice((1, 2, 3)), self.rng.choice((1, 2, 3))
        strides = (self.rng.choice((1, 1, 2)), self.rng.choice((1, 1, 2)))
        dil = (self.rng.choice((1, 1, 2)), self.rng.choice((1, 1, 2)))
        pads = tuple(self.rng.choice((0, 0, 1)) for _ in range(4))
        weight = self._constant((m, c // groups, kh, kw))
        bias = self._constant((m,)) if self.rng.random() < 0.5 else None
        op = graph.Conv2dOp(
            x, weight, bias, strides=strides, pads=pads, dilations=dil, groups=groups
        )
        del n, h, w
        self._emit(op, Info(self._i(x).bound * (c // groups) * kh * kw + 1, False))

    def _pool(self) -> None:
        x = self._conv_input()
        kind = self.rng.choice(("max", "avg"))
        kernel = (self.rng.choice((1, 2, 3)), self.rng.choice((1, 2, 3)))
        strides = (self.rng.choice((1, 2)), self.rng.choice((1, 2)))
        pads = tuple(
            self.rng.choice(range(0, kernel[i % 2])) if self.rng.random() < 0.3 else 0
            for i in range(4)
        )
        include = kind == "avg" and self.rng.random() < 0.5
        op = graph.PoolOp(
            kind, x, kernel, strides=strides, pads=pads, count_include_pad=include
        )
        ix = self._i(x)
        self._emit(op, Info(ix.bound, ix.exact and kind == "max"))

    def _gather(self) -> None:
        data = self._pick(lambda v: len(static_shape(v, "v")) >= 1)
        sd = static_shape(data, "d")
        axis = self.rng.randrange(len(sd))
        shape = self._shape(self.rng.choice((0, 1, 1, 2)))
        if self.rng.random() < 0.4:
            ids = self._add_arg(TensorType(self.rng.choice((i64, i32)), shape))
        else:
            values = self.np_rng.integers(-sd[axis], sd[axis], shape)
            k = graph.ConstantOp(constant_attr(np.asarray(values), i64))
            self._emit(k, Info(float(sd[axis]), True))
            ids = k.results[0]
        axis_attr = axis - len(sd) if self.rng.random() < 0.3 else axis
        self._emit(graph.GatherOp(data, ids, axis_attr), self._i(data))

    def _gather_elements(self) -> None:
        data = self._pick(lambda v: len(static_shape(v, "v")) >= 1)
        sd = static_shape(data, "d")
        axis = self.rng.randrange(len(sd))
        shape = tuple(
            self.rng.randint(1, 4) if i == axis else self.rng.randint(1, d)
            for i, d in enumerate(sd)
        )
        values = self.np_rng.integers(-sd[axis], sd[axis], shape)
        k = graph.ConstantOp(constant_attr(np.asarray(values), i64))
        self._emit(k, Info(float(sd[axis]), True))
        self._emit(graph.GatherElementsOp(data, k.results[0], axis), self._i(data))

    def _cmp(self) -> None:
        a = self._pick(lambda v: not self._bool(v) and self._i(v).exact)
        sa = static_shape(a, "a")
        others = [
            v
            for v in self.values
            if element_type(v) == element_type(a)
            and self._i(v).exact
            and _broadcasts(static_shape(v, "v"), sa)
        ]
        if others and self.rng.random() < 0.6:
            b = self.rng.choice(others)
        else:
            b = self._constant(sa[self.rng.randint(0, len(sa)) :], element_type(a))
        pred = self.rng.choice(("eq", "ne", "lt", "le", "gt", "ge"))
        self._emit(graph.CmpOp(pred, a, b), Info(1.0, True))

    def _a_bool(self) -> SSAValue:
        """A boolean value: an existing one, or a new comparison."""
        if not any(self._bool(v) for v in self.values) or self.rng.random() < 0.3:
            self._cmp()
        return self._pick(self._bool)

    def _logical(self) -> None:
        a = self._a_bool()
        kind = self.rng.choice(("not", "and", "or", "xor"))
        if kind == "not":
            self._emit(graph.NotOp(a), Info(1.0, True))
            return
        sa = static_shape(a, "a")
        others = [
            v
            for v in self.values
            if self._bool(v) and _broadcasts(static_shape(v, "v"), sa)
        ]
        b = self.rng.choice(others) if others else self._constant(sa, i1)
        cls = {"and": graph.AndOp, "or": graph.OrOp, "xor": graph.XorOp}[kind]
        self._emit(cls(a, b), Info(1.0, True))

    def _where(self) -> None:
        c = self._a_bool()
        sc = static_shape(c, "c")
        a = self._pick_float()
        b = self._broadcast_partner(a)
        if not _broadcasts(sc, static_shape(a, "a")) and not _broadcasts(
            static_shape(a, "a"), sc
        ):
            raise _Retry
        ia, ib = self._i(a), self._i(b)
        self._emit(
            graph.WhereOp(c, a, b), Info(max(ia.bound, ib.bound), ia.exact and ib.exact)
        )

    def _cast(self) -> None:
        a = self._pick()
        ea = element_type(a)
        if self._float(a):
            if not self._i(a).exact or self.rng.random() < 0.4:
                # Floats only become integers from exact values.
                if self._i(a).exact:
                    target: Attribute = self.rng.choice((i1, i32, i64))
                else:
                    raise _Retry
            else:
                target = self.rng.choice((i32, i64, i1))
        else:
            target = f32 if self.rng.random() < 0.7 else self.rng.choice((i32, i64, i1))
        if target == ea:
            raise _Retry
        self._emit(graph.CastOp(a, target), Info(self._i(a).bound + 1, True))

    def _int_arith(self) -> None:
        a = self._pick(self._int)
        kind = self.rng.choice(("add", "sub", "mul", "maximum", "minimum", "neg", "abs"))
        ia = self._i(a)
        if kind == "neg":
            self._emit(graph.NegOp(a), ia)
            return
        if kind == "abs":
            self._emit(graph.AbsOp(a), ia)
            return
        sa = static_shape(a, "a")
        others = [
            v
            for v in self.values
            if element_type(v) == element_type(a) and _broadcasts(static_shape(v, "v"), sa)
        ]
        b = self.rng.choice(others) if others else self._constant(sa, element_type(a))
        cls = {
            "add": graph.AddOp,
            "sub": graph.SubOp,
            "mul": graph.MulOp,
            "maximum": graph.MaximumOp,
            "minimum": graph.MinimumOp,
        }[kind]
        ib = self._i(b)
        bound = ia.bound * ib.bound if kind == "mul" else ia.bound + ib.bound
        if bound > 1e6:
            raise _Retry
        self._emit(cls(a, b), Info(bound, True))

    def _slice(self) -> None:
        a = self._pick(lambda v: len(static_shape(v, "v")) >= 1)
        sa = static_shape(a, "a")
        starts: list[int] = []
        ends: list[int] = []
        steps: list[int] = []
        for d in sa:
            step = self.rng.choice((1, 1, 1, 2, -1, 3, -2))
            if step > 0:
                s = self.rng.randint(0, d - 1)
                e = self.rng.randint(s + 1, d)
            else:
                s = self.rng.randint(0, d - 1)
                e = self.rng.randint(-1, s - 1)
            starts.append(s)
            ends.append(e)
            steps.append(step)
        self._emit(graph.SliceOp(a, starts, ends, steps), self._i(a))

    def _expand(self) -> None:
        a = self._pick()
        sa = static_shape(a, "a")
        target = [d if d != 1 else self.rng.choice((1, 2, 3)) for d in sa]
        if self.rng.random() < 0.4 and len(target) < 4:
            target.insert(0, self.rng.choice((2, 3)))
        if math.prod(target) > 4 * self.max_elems:
            raise _Retry
        self._emit(graph.ExpandOp(a, target), self._i(a))

    def _pad(self) -> None:
        a = self._pick(lambda v: len(static_shape(v, "v")) >= 1)
        sa = static_shape(a, "a")
        mode = self.rng.choice(("constant", "constant", "reflect", "edge"))
        rank = len(sa)
        pads: list[int] = []
        for i in range(2 * rank):
            d = sa[i % rank]
            top = d - 1 if mode == "reflect" else 2
            pads.append(self.rng.randint(0, max(0, min(2, top))))
        special = self.special and self._float(a)
        values = (0.0, 1.0, -2.0) + ((-math.inf, -math.inf, -0.0) if special else ())
        value = self.rng.choice(values) if mode == "constant" else 0.0
        self._emit(graph.PadOp(a, pads, mode, value), self._i(a))

    OPS: tuple[tuple[str, float], ...] = (
        ("binary", 4.0),
        ("unary", 4.0),
        ("matmul", 2.5),
        ("transpose", 1.0),
        ("reshape", 1.0),
        ("reduce", 1.5),
        ("softmax", 1.0),
        ("norm", 1.0),
        ("concat", 1.0),
        ("split", 0.8),
        ("conv", 0.7),
        ("pool", 0.7),
        ("gather", 0.8),
        ("gather_elements", 0.6),
        ("cmp", 0.8),
        ("logical", 0.6),
        ("where", 0.8),
        ("cast", 0.8),
        ("int_arith", 0.6),
        ("slice", 1.0),
        ("expand", 0.8),
        ("pad", 0.8),
    )

    def generate(self) -> ModuleOp:
        for _ in range(self.rng.randint(1, 3)):
            self._add_arg(TensorType(f32, self._shape()))
        n_ops = self.rng.randint(1, self.max_ops)
        ops = self.OPS + ((("mask", 1.0),) if self.special else ())
        names = [n for n, _ in ops]
        weights = [w for _, w in ops]
        built = 0
        attempts = 0
        while built < n_ops and attempts < 20 * n_ops:
            attempts += 1
            kind = self.rng.choices(names, weights)[0]
            mark = len(self.values), len(list(self.block.ops)), len(self.block.args)
            try:
                getattr(self, f"_{kind}")()
                built += 1
            except (_Retry, VerifyException, PlmrError, ValueError, IndexError):
                self._rollback(*mark)
        return self._finish()

    def _rollback(self, n_values: int, n_ops: int, n_args: int) -> None:
        ops = list(self.block.ops)
        for op in reversed(ops[n_ops:]):
            op.detach()
            op.erase(safe_erase=False)
        for v in self.values[n_values:]:
            self.info.pop(v, None)
        del self.values[n_values:]
        while len(self.block.args) > n_args:
            self.block.erase_arg(self.block.args[-1])
            self.arg_types.pop()

    def _finish(self) -> ModuleOp:
        computed = [v for v in self.values if not isinstance(v.owner, Block)]
        computed = [v for v in computed if not isinstance(v.owner, graph.ConstantOp)]
        if not computed:
            a = self.values[0]
            computed = [self._emit(graph.NegOp(a), self._i(a)).results[0]]
        # Every leaf is a result (up to 4, the last ones): no op is dead.
        outs = [v for v in computed if not v.uses][-4:]
        self.block.add_op(func.ReturnOp(*outs))
        fn = func.FuncOp("main", (self.arg_types, [v.type for v in outs]))
        old = fn.body.blocks[0]
        fn.body.detach_block(old)
        old.erase()
        fn.body.add_block(self.block)
        _drop_dead(fn)
        module = ModuleOp([fn])
        module.verify()
        return module


def _drop_dead(fn: func.FuncOp) -> None:
    """Erases ops whose results are unused (in reverse order)."""
    for op in reversed(list(fn.body.block.ops)):
        if isinstance(op, func.ReturnOp):
            continue
        if all(not r.uses for r in op.results):
            op.detach()
            op.erase()


def generate_graph(seed: int, max_ops: int = 8, special: bool = False) -> ModuleOp:
    """A random valid graph-level module with one function `@main`, from `seed`."""
    return GraphGenerator(random.Random(seed), max_ops=max_ops, special=special).generate()


__all__ = ["MASK_VALUES", "SPECIAL_VALUES", "GraphGenerator", "generate_graph"]
