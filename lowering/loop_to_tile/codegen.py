"""
The code generator of `convert-loop-to-tile`: the `tile.for` loops of one planned nest and
its body on blocks (loads, maps with broadcasting, reductions, `tile.dot` contractions).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import cast

from xdsl.builder import Builder
from xdsl.dialects import arith, tensor
from xdsl.dialects import math as mathd
from xdsl.dialects.builtin import (
    DenseIntOrFPElementsAttr,
    FloatAttr,
    IndexType,
    IntegerAttr,
    TensorType,
)
from xdsl.ir import Attribute, Block, BlockArgument, Operation, Region, SSAValue
from xdsl.rewriter import InsertPoint

from plmr.dialects import tile
from plmr.dialects.loop import (
    NestOp,
    ReadOp,
    YieldOp,
    value_element,
)
from plmr.lowering.loop_to_tile.blocks import INDEX_OPS as _INDEX_OPS
from plmr.lowering.loop_to_tile.blocks import Blk, Dim, Untileable, digit
from plmr.lowering.loop_to_tile.blocks import Combine as _Combine
from plmr.lowering.loop_to_tile.blocks import Plan as _Plan
from plmr.lowering.loop_to_tile.blocks import is_const as _is_const
from plmr.lowering.loop_to_tile.blocks import taint as _taint
from plmr.lowering.loop_to_tile.blocks import top_op as _top

_MAP_KINDS: dict[type[Operation], str] = {
    arith.AddfOp: "add",
    arith.SubfOp: "sub",
    arith.MulfOp: "mul",
    arith.DivfOp: "div",
    arith.MaximumfOp: "max",
    arith.MinimumfOp: "min",
    arith.NegfOp: "neg",
    mathd.ExpOp: "exp",
    mathd.LogOp: "log",
    mathd.CosOp: "cos",
    mathd.SinOp: "sin",
    mathd.TanhOp: "tanh",
    mathd.SqrtOp: "sqrt",
    mathd.RsqrtOp: "rsqrt",
    mathd.ErfOp: "erf",
    mathd.AbsFOp: "abs",
}


def _sorted(dims: Sequence[Dim]) -> tuple[Dim, ...]:
    return tuple(sorted(set(dims), key=lambda d: d.order))


def _padded(d: Dim) -> bool:
    """A dimension whose blocks do not divide it: its last block ends past the end."""
    return d.top and d.axis and d.extent % d.block != 0


def _shape(dims: Sequence[Dim]) -> list[int]:
    return [d.block for d in dims]


def _fill(b: Builder, value: float, elt: Attribute, shape: Sequence[int]) -> SSAValue:
    return b.insert(tile.FillOp(value, TensorType(elt, list(shape)))).result


def _index(b: Builder, v: int) -> SSAValue:
    return b.insert(arith.ConstantOp(IntegerAttr(v, IndexType()))).result


class Codegen:
    """Emits the tile program of one top-level nest (and of its epilogue consumer)."""

    def __init__(
        self, nest: NestOp, plan: _Plan, epilogue: NestOp | None, order: Iterator[int]
    ):
        self.nest = nest
        self.plan = plan
        self.epilogue = epilogue
        self.order = order
        self.env: dict[SSAValue, Blk] = {}
        self.axes: dict[SSAValue, list[Dim]] = {}
        """The dims of the tensor axes of tensor-valued values, in order."""
        self.final_axes: list[list[Dim]] = []
        roots: set[SSAValue] = {nest.dims[i] for i in nest.reduction_dims}
        roots.update(nest.accumulators)
        self.varying = _taint(nest.body.block, roots, set())
        self.pre: Builder | None = None
        self.inner: Builder | None = None

    # -- driver -------------------------------------------------------------------------

    def stored(self) -> list[tuple[NestOp, int]]:
        """The results to store: the epilogue's, and the nest's that others read."""
        nest, epi = self.nest, self.epilogue
        block = nest.parent_block()
        keep: list[tuple[NestOp, int]] = []
        for k, r in enumerate(nest.res):
            users = {_top(u.operation, block) for u in r.uses}
            if epi is None or users - {epi}:
                keep.append((nest, k))
        if epi is not None:
            keep += [(epi, k) for k in range(len(epi.res))]
        return keep

    def emit(self, b: Builder) -> list[SSAValue]:
        """Emits the loops at `b`; returns the final value of every stored output."""
        outs: list[SSAValue] = []
        for owner, k in self.stored():
            t = owner.res.types[k]
            if not isinstance(t, TensorType):
                raise Untileable("it has a scalar result")
            outs.append(b.insert(tensor.EmptyOp([], cast(Attribute, t))).results[0])
        par = [self._dim(self.nest.dims[i]) for i in self.nest.parallel_dims]
        return self._par(b, par, 0, outs)

    def _par(
        self,
        b: Builder,
        par: list[Dim],
        level: int,
        outs: list[SSAValue],
        looped: bool = False,
    ) -> list[SSAValue]:
        if level == len(par):
            return self._point(b, outs)
        d = par[level]
        # A dimension of one needs no loop. (Keeping a loop for the last one when there
        # is no other made every all-unit nest its own mesh.spmd and allreduce: llama3-8b
        # decode 420², per-head form, 551,908 -> 1,177,491 cycles per layer.)
        if d.extent == 1:
            d.iv = _index(b, 0)
            return self._par(b, par, level + 1, outs, looped)
        block = Block(arg_types=[IndexType(), *(o.type for o in outs)])
        block.args[0].name_hint = d.name
        loop = tile.ForOp(0, d.extent, d.block, tile.LoopKind.PARALLEL, outs, block)
        b.insert(loop)
        d.iv = block.args[0]
        body = Builder(InsertPoint.at_end(block))
        new = self._par(body, par, level + 1, list(block.args[1:]), True)
        body.insert(tile.YieldOp(*new))
        return list(loop.res)

    def _point(self, b: Builder, outs: list[SSAValue]) -> list[SSAValue]:
        """One parallel block: the reduction (if any), the epilogue, the stores."""
        nest = self.nest
        self.pre = self.inner = b
        par = [self._dim(nest.dims[i]) for i in nest.parallel_dims]
        finals: list[Blk]
        if nest.is_reduction:
            finals = self._reduction(b)
            self.final_axes = [list(self.plan.value_dims[k]) for k in range(len(finals))]
        else:
            finals = []
            for y in nest.yield_op.values:
                axes = self._axes_of(y)
                self.final_axes.append(axes)
                finals.append(self._full(b, self.block_of(y), par + axes))
        self.pre = self.inner = b
        for k, (r, blk) in enumerate(zip(nest.res, finals, strict=True)):
            self.env[r] = blk
            self.axes[r] = par + self.final_axes[k]
        if self.epilogue is not None:
            self._bind_epilogue(par)
        new_outs: list[SSAValue] = []
        for out, (owner, k) in zip(outs, self.stored(), strict=True):
            if owner is nest:
                axes = par + self.final_axes[k]
                blk = self.env[nest.res[k]]
            else:
                y = owner.yield_op.values[k]
                axes = [self._dim(a) for a in owner.dims] + self._axes_of(y)
                blk = self.block_of(y)
            new_outs.append(self._store(b, blk, out, axes))
        return new_outs

    def _bind_epilogue(self, par: list[Dim]) -> None:
        """The epilogue reads the nest's results through its own value dims."""
        epi = self.epilogue
        assert epi is not None
        extra = [self._dim(a) for a in epi.dims[len(par) :]]
        for k, r in enumerate(self.nest.res):
            mine = self.final_axes[k]
            theirs = extra[: len(mine)]
            self.env[r] = self._relabel(self.env[r], mine, theirs)
            self.axes[r] = par + theirs

    # -- reductions ---------------------------------------------------------------------

    def _acc_dims(self, k: int) -> list[Dim]:
        nest = self.nest
        par = [self._dim(nest.dims[i]) for i in nest.parallel_dims]
        return par + self.plan.value_dims[k]

    def _reduction(self, b: Builder) -> list[Blk]:
        nest = self.nest
        carried: list[SSAValue] = []
        for k, init in enumerate(nest.inits):
            value = _splat(init)
            if value is None:
                raise Untileable("an accumulator starts from a computed value")
            dims = _sorted([d for d in self._acc_dims(k) if d.axis])
            carried.append(_fill(b, value, value_element(init.type), _shape(dims)))
        loops: list[tile.ForOp] = []
        builder = b
        for i in nest.reduction_dims:
            d = self._dim(nest.dims[i])
            if d.extent == 1:
                d.iv = _index(builder, 0)
                continue
            block = Block(arg_types=[IndexType(), *(a.type for a in carried)])
            block.args[0].name_hint = d.name
            loop = tile.ForOp(0, d.extent, d.block, tile.LoopKind.REDUCTION, carried, block)
            builder.insert(loop)
            loops.append(loop)
            d.iv = block.args[0]
            carried = list(block.args[1:])
            builder = Builder(InsertPoint.at_end(block))
        if loops:
            # What does not vary along the reduction is computed once, before it.
            self.pre = Builder(InsertPoint.before(loops[0]))
        self.inner = builder
        for k, (acc, value) in enumerate(zip(nest.accumulators, carried, strict=True)):
            dims = _sorted([d for d in self._acc_dims(k) if d.axis])
            self.env[acc] = Blk(value, dims)
            self.axes[acc] = list(self.plan.value_dims[k])
        new: list[SSAValue] = []
        for k, y in enumerate(nest.yield_op.values):
            blk = self._relabel(self.block_of(y), self._axes_of(y), self.plan.value_dims[k])
            new.append(self._full(builder, blk, self._acc_dims(k)).value)
        for loop in reversed(loops):
            Builder(InsertPoint.at_end(loop.body.block)).insert(tile.YieldOp(*new))
            new = list(loop.res)
        return [
            Blk(v, _sorted([d for d in self._acc_dims(k) if d.axis]))
            for k, v in enumerate(new)
        ]

    # -- stores ------------------------------------------------------------------------

    def _store(self, b: Builder, blk: Blk, out: SSAValue, axes: list[Dim]) -> SSAValue:
        """Stores a block of `out` whose tensor axes are `axes`."""
        full = self._full(b, blk, axes)
        shape = [d.block if d.axis else 1 for d in axes]
        value = full.value
        if shape != _shape(full.dims):
            value = b.insert(tile.ReshapeOp(value, shape)).result
        offsets = [d.iv if d.top and d.iv is not None else _index(b, 0) for d in axes]
        clip = any(_padded(d) for d in axes)
        return b.insert(tile.StoreOp(value, out, offsets, clip)).result

    # -- values ------------------------------------------------------------------------

    def _dim(self, arg: SSAValue) -> Dim:
        return self.plan.dims[arg]

    def _axes_of(self, v: SSAValue) -> list[Dim]:
        return list(self.axes.get(v, []))

    def _relabel(self, blk: Blk, src: Sequence[Dim], dst: Sequence[Dim]) -> Blk:
        mapping = dict(zip(src, dst, strict=True))
        return Blk(blk.value, _sorted([mapping.get(d, d) for d in blk.dims]))

    def _builder(self, v: SSAValue) -> Builder:
        b = self.inner if v in self.varying else self.pre
        assert b is not None
        return b

    def block_of(self, v: SSAValue) -> Blk:
        """The block of body value `v`, emitting what computes it on first use."""
        if v in self.env:
            return self.env[v]
        if v in self.plan.dims or isinstance(v.type, IndexType):
            raise Untileable("an index is used as a value")
        op = v.owner
        if not isinstance(op, Operation):
            raise Untileable("a block argument is used as a value")
        if isinstance(op, NestOp):
            self._nested(op)
            return self.env[v]
        b = self._builder(v)
        if op in self.plan.combines:
            blk = self._combine(b, self.plan.combines[op])
        elif isinstance(op, ReadOp):
            blk = self._read(b, op)
        elif isinstance(op, arith.ConstantOp):
            value = _splat(v)
            if value is None or isinstance(v.type, TensorType):
                raise Untileable(f"it uses the constant {op.value}")
            blk = Blk(_fill(b, value, v.type, []), ())
        else:
            blk = self._elementwise(b, op, [self.block_of(x) for x in op.operands])
        self.env[v] = blk
        return blk

    def _nested(self, inner: NestOp) -> None:
        """A nested nest: its dims are whole; its reductions combine along them."""
        for acc, init in zip(inner.accumulators, inner.inits, strict=True):
            self.env[acc] = self.block_of(init)
            self.axes[acc] = self._axes_of(init)
        par = [self._dim(inner.dims[i]) for i in inner.parallel_dims]
        for r, y in zip(inner.res, inner.yield_op.values, strict=True):
            self.env[r] = self.block_of(y)
            self.axes[r] = par + self._axes_of(y)

    def _read(self, b: Builder, op: ReadOp) -> Blk:
        src = op.source
        if src in self.env:
            axes = self.axes.get(src, [])
            new: list[Dim] = []
            for a, idx in enumerate(op.indices):
                if idx in self.plan.dims:
                    new.append(self._dim(idx))
                elif _is_const(idx, 0) and not axes[a].axis:
                    new.append(axes[a])
                else:
                    raise Untileable("it reads a carried tensor at computed indices")
            return self._relabel(self.env[src], axes, new)
        dims = [self._axis_of(idx) for idx in op.indices]
        offsets = [self._offset(b, idx) for idx in op.indices]
        shape = [d.block if d is not None else 1 for d in dims]
        padding = None if op.padding is None else op.padding.value.data
        if padding is None and any(d is not None and _padded(d) for d in dims):
            # The last block of a padded dimension ends past the tensor: its lanes
            # there are computed on zeros and never stored (a parallel dimension), or
            # on the padding that leaves the reduction as it is (`padding`).
            padding = self.plan.pads.get(op, 0.0)
        value = b.insert(tile.LoadOp(src, offsets, shape, padding)).result
        present = [d for d in dims if d is not None]
        if len(present) != len(shape):
            value = b.insert(tile.ReshapeOp(value, _shape(present))).result
        order = _sorted(present)
        if list(order) != present:
            perm = [present.index(d) for d in order]
            value = b.insert(tile.TransposeOp(value, perm)).result
        return Blk(value, order)

    def _axis_of(self, idx: SSAValue) -> Dim | None:
        if idx in self.plan.dims:
            d = self.plan.dims[idx]
            return d if d.axis else None
        op = idx.owner
        if isinstance(op, arith.AddiOp):
            return self._axis_of(op.lhs) or self._axis_of(op.rhs)
        if isinstance(op, arith.SubiOp):
            return self._axis_of(op.lhs)
        found = digit(idx, self.plan.dims)
        if found is not None and found[1]:
            return found[0]
        return None

    def _offset(self, b: Builder, idx: SSAValue) -> SSAValue:
        """The index at the block's start (dims at their `tile.for` index, else 0)."""
        if idx in self.plan.dims:
            d = self.plan.dims[idx]
            if d.top and d.iv is not None:
                return d.iv
            return _index(b, 0)
        op = idx.owner
        if isinstance(op, arith.ConstantOp):
            return b.insert(op.clone()).results[0]
        if isinstance(op, _INDEX_OPS):
            mapping: dict[SSAValue, SSAValue] = {x: self._offset(b, x) for x in op.operands}
            folded = _fold_index(op, [_int_constant(mapping[x]) for x in op.operands])
            if folded is not None:
                # A block offset known at compile time is a constant: the offsets of a
                # nest without loops (every dimension one element) are straight-line
                # code at the function's top, where only constants are placed.
                return _index(b, folded)
            return b.insert(op.clone(mapping)).results[0]
        raise Untileable("an index is computed from data")

    # -- block arithmetic ---------------------------------------------------------------

    def _expand(self, b: Builder, blk: Blk, dims: Sequence[Dim]) -> SSAValue:
        """`blk` with size-1 axes for the dims of `dims` it lacks."""
        if tuple(dims) == blk.dims:
            return blk.value
        shape = [d.block if d in blk.dims else 1 for d in dims]
        if shape == _shape(blk.dims):
            return blk.value
        return b.insert(tile.ReshapeOp(blk.value, shape)).result

    def _full(self, b: Builder, blk: Blk, axes: Sequence[Dim]) -> Blk:
        """`blk` broadcast to every (blocked) dim of `axes`."""
        dims = _sorted([d for d in axes if d.axis])
        if blk.dims == dims:
            return blk
        if not set(blk.dims) <= set(dims):
            raise Untileable("a value varies along a dimension its result does not have")
        value = self._expand(b, blk, dims)
        if any(d not in blk.dims for d in dims):
            value = b.insert(tile.BroadcastOp(value, _shape(dims))).result
        return Blk(value, dims)

    def _elementwise(self, b: Builder, op: Operation, args: list[Blk]) -> Blk:
        if len(op.results) != 1 or op.regions or isinstance(op, ReadOp | YieldOp):
            raise Untileable(f"'{op.name}' cannot be a block operation")
        dims = _sorted([d for a in args for d in a.dims])
        values = [self._expand(b, a, dims) for a in args]
        kind = _MAP_KINDS.get(type(op))
        if kind is not None:
            return Blk(b.insert(tile.MapOp(values, kind)).result, dims)
        body = Block(arg_types=[value_element(x.type) for x in op.operands])
        new = op.clone(dict(zip(op.operands, body.args, strict=True)))
        body.add_op(new)
        body.add_op(tile.YieldOp(new.results[0]))
        result_type = TensorType(op.results[0].type, _shape(dims))
        return Blk(
            b.insert(tile.MapOp(values, None, Region(body), result_type)).result, dims
        )

    def _combine(self, b: Builder, c: _Combine) -> Blk:
        reduce_dims = [d for d in (self._dim(a) for a in c.dims) if d.axis]
        g = self._contract(b, c, reduce_dims) if c.kind == "add" else None
        if g is None:
            g = self._reduce(b, self.block_of(c.g), reduce_dims, c.kind)
        nested = c.h not in self.nest.accumulators
        if nested and c.h is c.t and _is_identity(_init_of(c.h), c.kind):
            return g  # a nested reduction starts from the identity: nothing to add
        h = self.block_of(c.h)
        dims = _sorted([*h.dims, *g.dims])
        values = [self._expand(b, h, dims), self._expand(b, g, dims)]
        return Blk(b.insert(tile.MapOp(values, c.kind)).result, dims)

    def _reduce(self, b: Builder, blk: Blk, dims: Sequence[Dim], kind: str) -> Blk:
        value = blk.value
        kept = list(blk.dims)
        scale = 1
        for d in dims:
            if d not in blk.dims:
                scale *= d.block
                continue
            reducer = "sum" if kind == "add" else kind
            value = b.insert(tile.ReduceOp(reducer, value, list(blk.dims).index(d))).result
            kept.remove(d)
        if kept != list(blk.dims):
            value = b.insert(tile.ReshapeOp(value, _shape(kept))).result
        out = Blk(value, tuple(kept))
        if scale > 1 and kind in ("add", "mul"):
            if kind == "mul":
                raise Untileable("a product over a block of repeated values")
            factor = _fill(b, float(scale), value_element(value.type), [1] * len(kept))
            out = Blk(b.insert(tile.MapOp([value, factor], "mul")).result, out.dims)
        return out

    def _contract(self, b: Builder, c: _Combine, k: Sequence[Dim]) -> Blk | None:
        """`Σ_k a·b` as a `tile.dot` when the term is a product that contracts `k`."""
        op = c.g.owner
        if not k or not isinstance(op, arith.MulfOp):
            return None
        a_blk, b_blk = self.block_of(op.lhs), self.block_of(op.rhs)
        ka, kb = set(a_blk.dims), set(b_blk.dims)
        if not all(d in ka and d in kb for d in k):
            return None
        kset = set(k)
        rows = [d for d in a_blk.dims if d not in kb]
        cols = [d for d in b_blk.dims if d not in ka]
        if (rows and cols and cols[0].order < rows[0].order) or (rows and not cols):
            # A vector goes on the left: one row of K instructions N wide, not N rows.
            a_blk, b_blk, rows, cols = b_blk, a_blk, cols, rows
        batch = [d for d in a_blk.dims if d in b_blk.dims and d not in kset]
        inner = [d for d in a_blk.dims if d in kset]
        lhs, ta = self._matrix(b, a_blk, batch, rows, inner)
        rhs, tb = self._matrix(b, b_blk, batch, inner, cols)
        value = b.insert(tile.DotOp(lhs, rhs, transpose_a=ta, transpose_b=tb)).result
        out = [*batch, *rows, *cols]
        if _shape(out) != list(value.type.get_shape()):  # pyright: ignore[reportAttributeAccessIssue]
            value = b.insert(tile.ReshapeOp(value, _shape(out))).result
        order = _sorted(out)
        if list(order) != out:
            value = b.insert(tile.TransposeOp(value, [out.index(d) for d in order])).result
        return Blk(value, order)

    def _matrix(
        self, b: Builder, blk: Blk, batch: list[Dim], rows: list[Dim], cols: list[Dim]
    ) -> tuple[SSAValue, bool]:
        """
        `blk` as a `batch × rows × cols` matrix; True when it is given transposed
        (`batch × cols × rows`), for the dot to transpose.
        """
        value = blk.value
        dims = list(blk.dims)
        owner = value.owner
        if isinstance(owner, tile.TransposeOp):
            # Use the block from before its transpose when that order serves as well.
            perm = owner.perm.get_values()
            before = [dims[perm.index(k)] for k in range(len(perm))]
            if before in ([*batch, *rows, *cols], [*batch, *cols, *rows]):
                value, dims = owner.input, before
        swapped = dims == [*batch, *cols, *rows] and dims != [*batch, *rows, *cols]
        want = [*batch, *cols, *rows] if swapped else [*batch, *rows, *cols]
        if dims != want:
            value = b.insert(tile.TransposeOp(value, [dims.index(d) for d in want])).result
        first, second = (cols, rows) if swapped else (rows, cols)
        shape = [*_shape(batch), math.prod(_shape(first)), math.prod(_shape(second))]
        if shape != _shape(want):
            value = b.insert(tile.ReshapeOp(value, shape)).result
        return value, swapped


def _int_constant(v: SSAValue) -> int | None:
    op = v.owner
    if isinstance(op, arith.ConstantOp) and isinstance(op.value, IntegerAttr):
        return op.value.value.data
    return None


def _fold_index(op: Operation, args: Sequence[int | None]) -> int | None:
    """The value of index op `op` on constant operands `args`; None if not folded."""
    if len(args) != 2 or args[0] is None or args[1] is None:
        return None
    a, c = args[0], args[1]
    unsigned = isinstance(op, arith.DivUIOp | arith.RemUIOp)
    divides = isinstance(
        op,
        arith.DivUIOp
        | arith.DivSIOp
        | arith.RemUIOp
        | arith.RemSIOp
        | arith.FloorDivSIOp
        | arith.CeilDivSIOp,
    )
    if (unsigned and (a < 0 or c < 0)) or (divides and c == 0):
        return None
    if isinstance(op, arith.AddiOp):
        return a + c
    if isinstance(op, arith.SubiOp):
        return a - c
    if isinstance(op, arith.MuliOp):
        return a * c
    if isinstance(op, arith.MaxSIOp):
        return max(a, c)
    if isinstance(op, arith.MinSIOp):
        return min(a, c)
    if isinstance(op, arith.FloorDivSIOp):
        return a // c
    if isinstance(op, arith.CeilDivSIOp):
        return -(-a // c)
    if isinstance(op, arith.DivUIOp | arith.DivSIOp):
        quotient = abs(a) // abs(c)
        return quotient if (a < 0) == (c < 0) else -quotient
    if isinstance(op, arith.RemUIOp | arith.RemSIOp):
        remainder = abs(a) % abs(c)
        return remainder if a >= 0 else -remainder
    return None


def _init_of(acc: SSAValue) -> SSAValue | None:
    """The initial value of a nest's accumulator argument."""
    if not isinstance(acc, BlockArgument):
        return None
    nest = acc.block.parent_op()
    if not isinstance(nest, NestOp) or acc not in nest.accumulators:
        return None
    return nest.inits[list(nest.accumulators).index(acc)]


def _is_identity(v: SSAValue | None, kind: str) -> bool:
    value = None if v is None else _splat(v)
    return value == {"add": 0.0, "mul": 1.0}.get(kind)


def _splat(v: SSAValue) -> float | None:
    op = v.owner
    if not isinstance(op, arith.ConstantOp):
        return None
    value = op.value
    if isinstance(value, FloatAttr):
        return value.value.data
    if isinstance(value, IntegerAttr):
        return float(value.value.data)
    if isinstance(value, DenseIntOrFPElementsAttr) and value.is_splat():
        return float(cast(float, value.get_values()[0]))
    return None
