"""
Reference semantics of the `loop` dialect, vectorised with numpy.

A nest is not run one element at a time. Its body runs once on *index grids*: the index
of dimension `t` is an `arange` laid along axis `t`, so every scalar op of the body is
one numpy call on all iteration points at once (broadcasting does the rest). Inside a
body at depth `n` (the number of enclosing dimensions, outermost first) a scalar value is
an array of rank at most `n` whose axes are those dimensions; a tensor value has `n` grid
axes followed by its own shape. Reductions then depend on the body:

- when every accumulator is updated as `acc ⊕ g` with `⊕` one of add / mul / max / min
  and `g` independent of all accumulators (a matmul, a sum, a max), `g` is evaluated on
  the whole grid and reduced along the reduction axes with numpy;
- otherwise (a fused, rolling-update recurrence) the reduction points run in order, each
  one vectorised over all parallel points.

Large iteration spaces are evaluated in boxes of at most `BOX_ELEMENTS` points (splitting
parallel dimensions, or reduction dimensions whose partial results are combined), so
memory stays bounded at realistic sizes.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from xdsl.dialects import arith, tensor
from xdsl.ir import Attribute, Operation, SSAValue

from plmr.dialects import loop
from plmr.dialects.graph import static_shape
from plmr.errors import PlmrError
from plmr.runtime.evaluator import (
    EvalImpl,
    EvalTable,
    ReferenceEvaluator,
    interpreter_functions,
)
from plmr.values import Array, numpy_dtype, tensor_dtype

BOX_ELEMENTS = 1 << 22
"""Largest number of iteration points (times the yielded value size) evaluated at once."""

Combine = Callable[[Any, Any], Any]
Reduce = Callable[[Any, tuple[int, ...]], Any]


def _sum(x: Any, axes: tuple[int, ...]) -> Any:
    return np.sum(x, axis=axes, dtype=x.dtype)


def _prod(x: Any, axes: tuple[int, ...]) -> Any:
    return np.prod(x, axis=axes, dtype=x.dtype)


def _max(x: Any, axes: tuple[int, ...]) -> Any:
    return np.max(x, axis=axes)


def _min(x: Any, axes: tuple[int, ...]) -> Any:
    return np.min(x, axis=axes)


def _fmax(x: Any, axes: tuple[int, ...]) -> Any:
    return np.fmax.reduce(x, axis=axes)


def _fmin(x: Any, axes: tuple[int, ...]) -> Any:
    return np.fmin.reduce(x, axis=axes)


COMBINERS: dict[type[Operation], tuple[Combine, Reduce]] = {
    arith.AddfOp: (np.add, _sum),
    arith.AddiOp: (np.add, _sum),
    arith.MulfOp: (np.multiply, _prod),
    arith.MuliOp: (np.multiply, _prod),
    arith.MaximumfOp: (np.maximum, _max),
    arith.MaxSIOp: (np.maximum, _max),
    arith.MaxnumfOp: (np.fmax, _fmax),
    arith.MinimumfOp: (np.minimum, _min),
    arith.MinSIOp: (np.minimum, _min),
    arith.MinnumfOp: (np.fmin, _fmin),
}
"""Associative, commutative arith ops a reduction can be vectorised with."""


def combiner_of(nest: loop.NestOp) -> list[Operation] | None:
    """
    For a nest whose accumulators are all updated as `acc ⊕ g` (one op from
    `COMBINERS`, `g` independent of every accumulator), the combining op of each
    accumulator; otherwise None.
    """
    accs = nest.accumulators
    if not accs:
        return None
    tainted: set[SSAValue] = set(accs)
    block = nest.body.block
    for op in block.ops:
        used = {v for inner in op.walk() for v in inner.operands}
        if used & tainted:
            tainted.update(op.results)
    ops: list[Operation] = []
    for acc, value in zip(accs, nest.yield_op.values, strict=True):
        owner = value.owner
        if not isinstance(owner, Operation) or type(owner) not in COMBINERS:
            return None
        if owner.parent_block() is not block or len(owner.operands) != 2:
            return None
        a, b = owner.operands
        other = b if a is acc else a if b is acc else None
        if other is None or other in tainted:
            return None
        if any(use.operation is not owner for use in acc.uses):
            return None
        if any(use.operation is not nest.yield_op for use in owner.results[0].uses):
            return None
        ops.append(owner)
    return ops


def _expand(x: Any, t: Attribute, depth: int) -> Array:
    """Brings a body value to `depth` grid axes (size-1 axes after its own grid axes)."""
    arr = np.asarray(x)
    vrank = len(loop.value_shape(t))
    k = arr.ndim - vrank
    if k >= depth:
        return arr
    return arr.reshape(arr.shape[:k] + (1,) * (depth - k) + arr.shape[k:])


class NestRunner:
    """Evaluates `loop.nest` ops (and the bodies nested in them) on index grids."""

    def __init__(self, ev: ReferenceEvaluator):
        self.ev = ev
        self.scopes: list[dict[SSAValue, Any]] = []
        self.grid: tuple[int, ...] = ()
        self._combiners: dict[int, list[Operation] | None] = {}

    def lookup(self, value: SSAValue) -> Any:
        for scope in reversed(self.scopes):
            if value in scope:
                return scope[value]
        return self.ev.lookup(value)

    def value(self, value: SSAValue) -> Array:
        """A value brought to the current depth."""
        return _expand(self.lookup(value), value.type, len(self.grid))

    # -- nests ------------------------------------------------------------------------

    def combiners(self, nest: loop.NestOp) -> list[Operation] | None:
        key = id(nest)
        if key not in self._combiners:
            self._combiners[key] = combiner_of(nest)
        return self._combiners[key]

    def run(self, nest: loop.NestOp, inits: Sequence[Any]) -> list[Array]:
        """The results of `nest` at the current depth (grid axes, then result shape)."""
        ranges = [(0, e) for e in nest.extents]
        if not nest.is_reduction:
            return self._box(nest, ranges, None)
        combiners = self.combiners(nest)
        if combiners is not None:
            partial = self._box(nest, ranges, combiners)
            k = len(self.grid)
            npar = len(nest.parallel_dims)
            out: list[Array] = []
            for init, acc, p, c in zip(
                inits, nest.accumulators, partial, combiners, strict=True
            ):
                start = _expand(init, acc.type, k + npar)
                out.append(np.asarray(COMBINERS[type(c)][0](start, p)).astype(p.dtype))
            return out
        return self._sequential(nest, ranges, inits)

    def _points(self, ranges: Sequence[tuple[int, int]], nest: loop.NestOp) -> int:
        vsize = max([1, *(loop.nelements(t) for t in nest.yield_op.values.types)])
        return math.prod(self.grid) * math.prod(b - a for a, b in ranges) * vsize

    def _split(
        self, nest: loop.NestOp, ranges: Sequence[tuple[int, int]], prefer_reduction: bool
    ) -> int | None:
        """The dimension to split a too-large box along, or None."""
        if self._points(ranges, nest) <= BOX_ELEMENTS:
            return None
        kinds = nest.kinds
        order = sorted(
            range(len(ranges)),
            key=lambda t: (
                prefer_reduction and kinds[t] != loop.IteratorKind.REDUCTION,
                -(ranges[t][1] - ranges[t][0]),
            ),
        )
        for t in order:
            if ranges[t][1] - ranges[t][0] > 1:
                return t
        return None

    def _box(
        self,
        nest: loop.NestOp,
        ranges: Sequence[tuple[int, int]],
        combiners: list[Operation] | None,
    ) -> list[Array]:
        """
        Maps: the results over the box. Vectorisable reductions: the partial reduction
        of the box (without the initial value).
        """
        t = self._split(nest, ranges, prefer_reduction=combiners is not None)
        k = len(self.grid)
        if t is not None:
            lo, hi = ranges[t]
            mid = (lo + hi) // 2
            halves = [
                self._box(nest, [*ranges[:t], r, *ranges[t + 1 :]], combiners)
                for r in ((lo, mid), (mid, hi))
            ]
            if nest.kinds[t] == loop.IteratorKind.REDUCTION:
                assert combiners is not None
                return [
                    np.asarray(COMBINERS[type(c)][0](a, b)).astype(a.dtype)
                    for c, a, b in zip(combiners, halves[0], halves[1], strict=True)
                ]
            axis = k + nest.parallel_dims.index(t)
            return [
                np.concatenate([a, b], axis=axis)
                for a, b in zip(halves[0], halves[1], strict=True)
            ]
        skip = set(combiners or ())
        outputs = None
        if combiners is not None:
            accs = set(nest.accumulators)
            outputs = [
                c.operands[1] if c.operands[0] in accs else c.operands[0] for c in combiners
            ]
        values = self._body(nest, ranges, {}, skip, outputs)
        out: list[Array] = []
        lengths = tuple(b - a for a, b in ranges)
        red_axes = tuple(k + i for i in nest.reduction_dims)
        for i, (v, ty) in enumerate(zip(values, nest.yield_op.values.types, strict=True)):
            vshape = loop.value_shape(ty)
            full = np.broadcast_to(v, v.shape[:k] + lengths + vshape)
            if combiners is not None:
                full = COMBINERS[type(combiners[i])][1](full, red_axes)
            out.append(np.asarray(full))
        return out

    def _sequential(
        self, nest: loop.NestOp, ranges: Sequence[tuple[int, int]], inits: Sequence[Any]
    ) -> list[Array]:
        """Runs the reduction points in order, each vectorised over the parallel points."""
        k = len(self.grid)
        n = k + nest.rank
        par_ranges = [
            r if kind == loop.IteratorKind.PARALLEL else (0, 1)
            for r, kind in zip(ranges, nest.kinds, strict=True)
        ]
        t = self._split(nest, par_ranges, prefer_reduction=False)
        if t is not None:
            lo, hi = ranges[t]
            mid = (lo + hi) // 2
            halves = [
                self._sequential(nest, [*ranges[:t], r, *ranges[t + 1 :]], inits)
                for r in ((lo, mid), (mid, hi))
            ]
            axis = k + nest.parallel_dims.index(t)
            return [
                np.concatenate([a, b], axis=axis)
                for a, b in zip(halves[0], halves[1], strict=True)
            ]
        accs = [
            _expand(v, a.type, n) for v, a in zip(inits, nest.accumulators, strict=True)
        ]
        red = nest.reduction_dims
        for point in itertools.product(*(range(*ranges[i]) for i in red)):
            box = list(par_ranges)
            for i, j in zip(red, point, strict=True):
                box[i] = (j, j + 1)
            accs = self._body(
                nest, box, dict(zip(nest.accumulators, accs, strict=True)), set()
            )
        lengths = tuple(
            (b - a) if kind == loop.IteratorKind.PARALLEL else 1
            for (a, b), kind in zip(ranges, nest.kinds, strict=True)
        )
        red_axes = tuple(k + i for i in red)
        out: list[Array] = []
        for v, ty in zip(accs, nest.yield_op.values.types, strict=True):
            vshape = loop.value_shape(ty)
            v = _expand(v, ty, n)
            full = np.broadcast_to(v, v.shape[:k] + lengths + vshape)
            out.append(np.squeeze(full, axis=red_axes).copy())
        return out

    def _body(
        self,
        nest: loop.NestOp,
        ranges: Sequence[tuple[int, int]],
        accs: dict[SSAValue, Any],
        skip: set[Operation],
        outputs: Sequence[SSAValue] | None = None,
    ) -> list[Array]:
        """
        Runs the body on the box; returns the yielded values (or `outputs`), at the
        body's depth.
        """
        k = len(self.grid)
        scope: dict[SSAValue, Any] = dict(accs)
        for t, (dim, (a, b)) in enumerate(zip(nest.dims, ranges, strict=True)):
            scope[dim] = np.arange(a, b, dtype=np.int64).reshape((1,) * (k + t) + (b - a,))
        outer = self.grid
        self.grid = outer + tuple(b - a for a, b in ranges)
        self.scopes.append(scope)
        try:
            for op in nest.body.block.ops:
                if isinstance(op, loop.YieldOp):
                    return [
                        self.value(v) for v in (op.values if outputs is None else outputs)
                    ]
                if op in skip:
                    continue
                results = self._op(op)
                for value, result in zip(op.results, results, strict=True):
                    scope[value] = result
        finally:
            self.scopes.pop()
            self.grid = outer
        raise PlmrError("a loop.nest body ended without loop.yield")

    # -- body ops -------------------------------------------------------------------

    def _op(self, op: Operation) -> list[Any]:
        if isinstance(op, loop.ReadOp):
            return [self.read(op)]
        if isinstance(op, loop.NestOp):
            return self.run(op, [self.value(v) for v in op.inits])
        if not self.ev.implements(type(op)):
            raise PlmrError(f"'{op.name}' cannot run inside a loop.nest body")
        results = self.ev.call_impl(op, [self.value(v) for v in op.operands])
        out: list[Any] = []
        for r, res in zip(results, op.results, strict=True):
            try:
                dtype = numpy_dtype(loop.value_element(res.type))
            except PlmrError:
                out.append(r)
                continue
            out.append(np.asarray(r).astype(dtype, copy=False))
        return out

    def read(self, op: loop.ReadOp) -> Array:
        """The elements a `loop.read` reads, at the current depth."""
        src = np.asarray(self.lookup(op.source))
        shape = loop.value_shape(op.source.type)
        n = len(self.grid)
        d = src.ndim - len(shape)
        idx = [self.value(i).astype(np.int64, copy=False) for i in op.indices]
        oob: Any = False
        if op.padding is not None:
            for a, (ix, size) in enumerate(zip(idx, shape, strict=True)):
                bad = (ix < 0) | (ix >= size)
                oob = oob | bad
                idx[a] = np.clip(ix, 0, size - 1)
        else:
            for a, (ix, size) in enumerate(zip(idx, shape, strict=True)):
                if ix.size and (int(ix.min()) < 0 or int(ix.max()) >= size):
                    bad = int(ix.min()) if int(ix.min()) < 0 else int(ix.max())
                    raise PlmrError(
                        f"loop.read index {bad} is outside dimension {a} (size {size}) "
                        f"of {op.source.type}"
                    )
        grid_idx: list[Any] = []
        for a in range(d):
            size = int(src.shape[a])
            if size == 1:
                grid_idx.append(0)
            else:
                axis = np.arange(size, dtype=np.int64)
                grid_idx.append(axis.reshape((1,) * a + (size,) + (1,) * (n - a - 1)))
        value = src[tuple(grid_idx + idx)]
        if op.padding is not None:
            pad = np.asarray(op.padding.value.data).astype(src.dtype)
            value = np.where(oob, pad, value)
        return np.asarray(value)


LOOP_TABLE = EvalTable()
"""The `loop` implementations, each registered for its op class."""


@LOOP_TABLE.impl(loop.NestOp)
def _nest(ev: ReferenceEvaluator, op: loop.NestOp, args: list[Any]) -> list[Any]:
    if ev.lead:
        raise PlmrError("a loop.nest cannot run inside a per-core program")
    with np.errstate(all="ignore"):
        return NestRunner(ev).run(op, args)


@LOOP_TABLE.impl(loop.ReadOp)
def _read(ev: ReferenceEvaluator, op: loop.ReadOp, args: list[Any]) -> list[Any]:
    with np.errstate(all="ignore"):
        return [NestRunner(ev).read(op)]


@LOOP_TABLE.impl(tensor.EmptyOp)
def _empty(ev: ReferenceEvaluator, op: tensor.EmptyOp, args: list[Any]) -> list[Any]:
    """A fresh tensor in global memory (zeros: its contents are unspecified)."""
    t = op.tensor.type
    return [np.zeros(ev.lead + static_shape(t, "tensor"), dtype=tensor_dtype(t))]


LOOP_IMPLS: dict[type[Operation], EvalImpl] = LOOP_TABLE.as_dict()
"""
Implementations of the `loop` ops for the `ReferenceEvaluator`, and of `tensor.empty`
(the global tensors that `convert-loop-to-tile` stores the results of nests into).
"""

LoopFunctions = interpreter_functions("LoopFunctions", LOOP_IMPLS)
"""The `loop` semantics as xDSL `InterpreterFunctions` (one `@impl` per op)."""


__all__ = [
    "BOX_ELEMENTS",
    "COMBINERS",
    "LOOP_IMPLS",
    "LoopFunctions",
    "NestRunner",
    "combiner_of",
]
