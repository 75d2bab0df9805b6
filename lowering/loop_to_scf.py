"""
`convert-loop-to-scf`: lowers `loop` nests to `scf.for` loops on `memref`s, so that plmr's
loop level feeds any other xDSL or MLIR pipeline.

Functions take and return `memref`s instead of tensors. Each nest allocates its results
(`memref.alloc`) and becomes one `scf.for` per dimension: the parallel ones outside, the
reduction ones inside, carrying scalar accumulators as `iter_args`; an accumulator that
is a tensor (a fused nest's row of an output) lives in a buffer updated in place. A
`loop.read` is a `memref.load` (with a padding value: the load of a clamped index,
selected against the padding when the index is outside). Non-splat tensor constants
become `memref.global`s.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import count
from typing import cast

from xdsl.builder import Builder
from xdsl.context import Context
from xdsl.dialects import arith, func, memref, scf
from xdsl.dialects.builtin import (
    AnyFloat,
    DenseIntOrFPElementsAttr,
    FloatAttr,
    FunctionType,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    ModuleOp,
    StringAttr,
    TensorType,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint
from xdsl.utils.hints import isa

from plmr.dialects.loop import NestOp, ReadOp, YieldOp, value_element, value_shape
from plmr.errors import PlmrError


def memref_type(t: Attribute) -> MemRefType[Attribute]:
    """The memref type holding a (static) tensor type."""
    if not isa(t, TensorType[Attribute]):
        raise PlmrError(f"convert-loop-to-scf: expected a tensor type, got {t}")
    return MemRefType(t.element_type, t.get_shape())


def _scalar(value: float, elt: Attribute) -> FloatAttr | IntegerAttr:
    """A scalar attribute of element type `elt`."""
    if isinstance(elt, AnyFloat):
        return FloatAttr(float(value), elt)
    if isinstance(elt, IntegerType):
        return IntegerAttr(int(value), cast(IntegerType, elt))
    raise PlmrError(f"convert-loop-to-scf: no scalar of type {elt}")


class _Lowering:
    """Lowers one function's body."""

    def __init__(self, module: ModuleOp, fn: func.FuncOp, names: count[int]):
        self.module = module
        self.fn = fn
        self.names = names
        self.mem: dict[SSAValue, SSAValue] = {}
        """Tensor values (function level and in bodies) -> the memrefs holding them."""

    def run(self) -> None:
        block = self.fn.body.block
        done: list[Operation] = []
        for arg in list(block.args):
            new = block.insert_arg(memref_type(arg.type), len(block.args))
            new.name_hint = arg.name_hint
            self.mem[arg] = new
        for op in list(block.ops):
            b = Builder(InsertPoint.before(op))
            if isinstance(op, NestOp):
                outs = self.nest(b, op, {})
                for r, v in zip(op.res, outs, strict=True):
                    self.mem[r] = v
                    v.name_hint = r.name_hint
            elif isinstance(op, arith.ConstantOp) and isinstance(
                op.result.type, TensorType
            ):
                self.mem[op.result] = self.constant(b, op)
            elif isinstance(op, func.ReturnOp):
                b.insert(func.ReturnOp(*(self.mem.get(v, v) for v in op.arguments)))
            elif op.dialect_name() not in ("arith", "math"):
                raise PlmrError(
                    f"convert-loop-to-scf: '{op.name}' is not at the loop level (lower "
                    "the program with convert-graph-to-loop first)"
                )
            else:
                continue
            done.append(op)
        for op in reversed(done):
            op.detach()
            op.erase(safe_erase=False)
        n = len(self.fn.function_type.inputs.data)
        for arg in list(block.args[:n]):
            block.erase_arg(arg, safe_erase=False)
        inputs = [memref_type(t) for t in self.fn.function_type.inputs.data]
        outputs = [memref_type(t) for t in self.fn.function_type.outputs.data]
        self.fn.function_type = FunctionType.from_lists(inputs, outputs)

    # -- constants --------------------------------------------------------------------

    def constant(self, b: Builder, op: arith.ConstantOp) -> SSAValue:
        value = op.value
        t = memref_type(op.result.type)
        if not isinstance(value, DenseIntOrFPElementsAttr):
            raise PlmrError(
                f"convert-loop-to-scf: %{op.result.name_hint or '?'} is a weight by "
                "reference, which the scf level does not carry; compile the program "
                "for the mesh (plmr compile) instead"
            )
        if value.is_splat():
            splat = cast(float, value.get_values()[0])
            buf = b.insert(memref.AllocOp([], [], t)).results[0]
            scalar = b.insert(arith.ConstantOp(_scalar(splat, t.element_type))).result
            self._fill(b, buf, list(t.get_shape()), scalar)
            return buf
        name = f"__plmr_constant_{next(self.names)}"
        glob = memref.GlobalOp.get(StringAttr(name), t, value, constant=None)
        self.module.body.block.insert_op_before(glob, self.module.body.block.first_op)  # pyright: ignore[reportArgumentType]
        return b.insert(memref.GetGlobalOp(name, t)).results[0]

    # -- loops --------------------------------------------------------------------------

    def _index(self, b: Builder, v: int) -> SSAValue:
        return b.insert(arith.ConstantOp(IntegerAttr(v, IndexType()))).result

    def _loops(
        self,
        b: Builder,
        extents: Sequence[int],
        carried: Sequence[SSAValue],
        names: Sequence[str | None] = (),
    ) -> tuple[list[SSAValue], Builder, list[scf.ForOp]]:
        """Nested `scf.for`s over `extents` carrying `carried`: (indices, body, loops)."""
        indices: list[SSAValue] = []
        loops: list[scf.ForOp] = []
        zero, one = self._index(b, 0), self._index(b, 1)
        for e in extents:
            ub = self._index(b, e)
            block = Block(arg_types=[IndexType(), *(v.type for v in carried)])
            loop = scf.ForOp(zero, ub, one, list(carried), block)
            b.insert(loop)
            loops.append(loop)
            indices.append(block.args[0])
            if len(names) > len(loops) - 1:
                block.args[0].name_hint = names[len(loops) - 1]
            carried = list(block.args[1:])
            b = Builder(InsertPoint.at_end(block))
        return indices, b, loops

    def _close(self, loops: list[scf.ForOp], values: Sequence[SSAValue]) -> list[SSAValue]:
        """Ends nested loops yielding `values` from the innermost; their final values."""
        current = list(values)
        for loop in reversed(loops):
            Builder(InsertPoint.at_end(loop.body.block)).insert(scf.YieldOp(*current))
            current: list[SSAValue] = list(loop.results)
        return current

    def _fill(self, b: Builder, buf: SSAValue, shape: list[int], value: SSAValue) -> None:
        idx, inner, loops = self._loops(b, shape, [])
        inner.insert(memref.StoreOp.get(value, buf, idx))
        self._close(loops, [])

    def _copy(
        self,
        b: Builder,
        src: SSAValue,
        dst: SSAValue,
        shape: list[int],
        prefix: list[SSAValue],
    ) -> None:
        """`dst[prefix, i...] = src[i...]` over `shape`."""
        idx, inner, loops = self._loops(b, shape, [])
        v = inner.insert(memref.LoadOp.get(src, idx)).res
        inner.insert(memref.StoreOp.get(v, dst, [*prefix, *idx]))
        self._close(loops, [])

    # -- nests --------------------------------------------------------------------------

    def nest(
        self, b: Builder, nest: NestOp, env: dict[SSAValue, SSAValue]
    ) -> list[SSAValue]:
        """Emits `nest` at `b`; returns its results (memrefs, or scalars)."""
        par = nest.parallel_dims
        red = nest.reduction_dims
        extents = nest.extents
        outs: list[SSAValue | None] = []
        for t in nest.res.types:
            out = None
            if isa(t, TensorType[Attribute]):
                out = b.insert(memref.AllocOp([], [], memref_type(t))).results[0]
            outs.append(out)
        names = [d.name_hint for d in nest.dims]
        pidx, pb, ploops = self._loops(
            b, [extents[i] for i in par], [], [names[i] for i in par]
        )
        for i, v in zip(par, pidx, strict=True):
            env[nest.dims[i]] = v
        values: list[SSAValue]
        if not red:
            values = self.body(pb, nest, env)
        else:
            scalars: list[SSAValue] = []
            buffers: dict[int, SSAValue] = {}
            for k, init in enumerate(nest.inits):
                v = env.get(init, self.mem.get(init, init))
                shape = list(value_shape(init.type))
                if shape:
                    buf = pb.insert(
                        memref.AllocOp([], [], MemRefType(value_element(init.type), shape))
                    ).results[0]
                    self._copy(pb, v, buf, shape, [])
                    buffers[k] = buf
                else:
                    scalars.append(v)
            ridx, rb, rloops = self._loops(
                pb, [extents[i] for i in red], scalars, [names[i] for i in red]
            )
            for i, v in zip(red, ridx, strict=True):
                env[nest.dims[i]] = v
            carried = list(rloops[-1].body.block.args[1:]) if rloops else scalars
            it = iter(carried)
            for k, acc in enumerate(nest.accumulators):
                env[acc] = buffers[k] if k in buffers else next(it)
            yielded = self.body(rb, nest, env)
            new_scalars: list[SSAValue] = []
            for k, y in enumerate(yielded):
                if k in buffers:
                    self._copy(rb, y, buffers[k], list(value_shape(nest.inits[k].type)), [])
                else:
                    new_scalars.append(y)
            finals = iter(self._close(rloops, new_scalars) if rloops else new_scalars)
            values = [
                buffers[k] if k in buffers else next(finals) for k in range(len(nest.res))
            ]
        results: list[SSAValue] = []
        for k, (v, out) in enumerate(zip(values, outs, strict=True)):
            if out is None:
                results.append(v)
                continue
            shape = list(value_shape(nest.yield_op.values.types[k]))
            if shape:
                self._copy(pb, v, out, shape, pidx)
            else:
                pb.insert(memref.StoreOp.get(v, out, pidx))
            results.append(out)
        self._close(ploops, [])
        if any(o is None for o in outs) and ploops:
            raise PlmrError(
                "convert-loop-to-scf: a scalar result needs a nest without parallel dims"
            )
        return results

    def body(
        self, b: Builder, nest: NestOp, env: dict[SSAValue, SSAValue]
    ) -> list[SSAValue]:
        """Emits the body of `nest` at `b`; returns the (mapped) yielded values."""
        for op in nest.body.block.ops:
            if isinstance(op, YieldOp):
                return [env.get(v, self.mem.get(v, v)) for v in op.values]
            if isinstance(op, ReadOp):
                env[op.result] = self.read(b, op, env)
                env[op.result].name_hint = op.result.name_hint
            elif isinstance(op, NestOp):
                for r, v in zip(op.res, self.nest(b, op, env), strict=True):
                    env[r] = v
            else:
                mapping = {v: env[v] for v in op.operands if v in env}
                new = b.insert(op.clone(mapping))
                for old, res in zip(op.results, new.results, strict=True):
                    env[old] = res
        raise PlmrError("a loop.nest body ended without loop.yield")

    def read(self, b: Builder, op: ReadOp, env: dict[SSAValue, SSAValue]) -> SSAValue:
        src = env.get(op.source, self.mem.get(op.source))
        if src is None:
            raise PlmrError("convert-loop-to-scf: a read of an unknown tensor")
        idx = [env.get(i, i) for i in op.indices]
        if op.padding is None:
            return b.insert(memref.LoadOp.get(src, idx)).res
        shape = value_shape(op.source.type)
        inside: SSAValue | None = None
        clamped: list[SSAValue] = []
        zero = self._index(b, 0)
        for i, size in zip(idx, shape, strict=True):
            top = self._index(b, size - 1)
            lo = b.insert(arith.CmpiOp(i, zero, "sge")).result
            hi = b.insert(arith.CmpiOp(i, top, "sle")).result
            ok = b.insert(arith.AndIOp(lo, hi)).result
            inside = ok if inside is None else b.insert(arith.AndIOp(inside, ok)).result
            c = b.insert(arith.MaxSIOp(i, zero)).result
            clamped.append(b.insert(arith.MinSIOp(c, top)).result)
        value = b.insert(memref.LoadOp.get(src, clamped)).res
        elt = value.type
        pad = b.insert(arith.ConstantOp(_scalar(op.padding.value.data, elt))).result
        assert inside is not None
        return b.insert(arith.SelectOp(inside, value, pad)).result


@dataclass(frozen=True)
class ConvertLoopToScfPass(ModulePass):
    """Lowers `loop` nests to `scf.for` loops on `memref`s (functions take memrefs)."""

    name = "convert-loop-to-scf"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        names = count()
        for fn in list(op.ops):
            if isinstance(fn, func.FuncOp) and fn.body.blocks:
                _Lowering(op, fn, names).run()
