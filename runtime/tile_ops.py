"""
Reference semantics of the `tile` dialect and of the `arith` / `math` ops it uses.

The implementations are vectorised over the evaluator's leading shape (`ev.lead`): on the
host `lead = ()` and a value is just its block; inside a mesh program `lead = (H, W)` and
every value holds the blocks of all H×W cores, so one numpy call runs an op on every core.
Indices (loop counters, offsets) are either uniform scalars or arrays of shape `lead`.

`TileStats` counts the bytes a tile program moves between global memory (the tensors
the function receives) and SRAM: the memory traffic that fusion is meant to reduce.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
from xdsl.dialects import arith, func, tensor
from xdsl.dialects import math as mathd
from xdsl.dialects.builtin import (
    DenseIntOrFPElementsAttr,
    FloatAttr,
    IntegerAttr,
    TensorType,
)
from xdsl.interpreter import Interpreter, PythonValues
from xdsl.ir import Attribute, BlockArgument, Operation, OpResult, SSAValue

from plmr.dialects import tile
from plmr.dialects.graph import normalize_axis, static_shape
from plmr.dialects.graph_weights import weight_ref
from plmr.errors import PlmrError
from plmr.runtime.evaluator import (
    EvalImpl,
    EvalTable,
    ReferenceEvaluator,
    interpreter_functions,
)
from plmr.runtime.numpy_ops import erf, gelu, sigmoid, silu
from plmr.runtime.weights import load_weight
from plmr.target.op_cost import op_work
from plmr.values import Array, dense_to_numpy, numpy_dtype, tensor_dtype

Impl = EvalImpl


TILE_IMPLS = EvalTable()
"""The tile, `arith` and `math` implementations, each registered for its op class."""


def _lead(ev: ReferenceEvaluator) -> int:
    return len(ev.lead)


def _is_uniform(x: Any) -> bool:
    return np.ndim(x) == 0


def _expand(ev: ReferenceEvaluator, x: Array, rank: int) -> Array:
    """Inserts size-1 dims after the lead so that a block has `rank` dims (broadcasting)."""
    lead = _lead(ev)
    x = np.asarray(x)
    block_rank = x.ndim - lead
    if block_rank >= rank:
        return x
    shape = x.shape[:lead] + (1,) * (rank - block_rank) + x.shape[lead:]
    return x.reshape(shape)


# ---------------------------------------------------------------------------------------
# tile ops
# ---------------------------------------------------------------------------------------


@TILE_IMPLS.impl(tile.FillOp)
def _fill(ev: ReferenceEvaluator, op: tile.FillOp, args: list[Any]) -> list[Any]:
    shape = ev.lead + static_shape(op.result, "result")
    return [np.full(shape, op.value.value.data, dtype=tensor_dtype(op.result.type))]


def _window_index(
    ev: ReferenceEvaluator,
    offsets: Sequence[Any],
    block: Sequence[int],
    full: Sequence[int],
) -> tuple[Any, ...]:
    """Index tuple selecting, per core, the block at `offsets` of a `lead + full` array."""
    lead = ev.lead
    for d, (o, b, f) in enumerate(zip(offsets, block, full, strict=True)):
        lo, hi = int(np.min(o)), int(np.max(o))
        if lo < 0 or hi + b > f:
            raise PlmrError(
                f"block of size {b} at offset {lo if lo < 0 else hi} is outside dimension "
                f"{d} (size {f})"
            )
    if all(_is_uniform(o) for o in offsets):
        return (
            *(slice(None) for _ in lead),
            *(slice(int(o), int(o) + b) for o, b in zip(offsets, block, strict=True)),
        )
    n = len(lead) + len(block)
    grids: list[Any] = []
    for i, size in enumerate(lead):
        shape = [1] * n
        shape[i] = size
        grids.append(np.arange(size).reshape(shape))
    for d, (o, b) in enumerate(zip(offsets, block, strict=True)):
        shape = [1] * n
        shape[len(lead) + d] = b
        base = np.asarray(o).reshape(np.shape(o) + (1,) * len(block))
        grids.append(base + np.arange(b).reshape(shape))
    return tuple(grids)


@TILE_IMPLS.impl(tile.LoadOp)
def _load(ev: ReferenceEvaluator, op: tile.LoadOp, args: list[Any]) -> list[Any]:
    src = args[0]
    offsets = args[1 : 1 + len(op.offsets)]
    limits = args[1 + len(op.offsets) :]
    block = static_shape(op.result, "result")
    full = static_shape(op.source, "source")
    if op.padding is not None:
        return [_padded_load(ev, np.asarray(src), offsets, block, full, op.padding, limits)]
    index = _window_index(ev, offsets, block, full)
    return [np.array(src[index])]


def _padded_load(
    ev: ReferenceEvaluator,
    src: Array,
    offsets: Sequence[Any],
    block: Sequence[int],
    full: Sequence[int],
    padding: FloatAttr[Any],
    limits: Sequence[Any] = (),
) -> Array:
    """
    The block at `offsets`, with `padding` wherever it lies outside the tensor or at or
    past a dimension's limit (per core).
    """
    pad = np.asarray(padding.value.data).astype(src.dtype)
    if 0 in full:
        return np.full(ev.lead + tuple(block), pad)
    grids, inside = _clipped_index(ev, offsets, block, full, limits)
    lead = len(ev.lead)
    clipped = tuple(
        g if i < lead else np.clip(g, 0, full[i - lead] - 1) for i, g in enumerate(grids)
    )
    return np.where(inside, src[clipped], pad)


def _clipped_index(
    ev: ReferenceEvaluator,
    offsets: Sequence[Any],
    block: Sequence[int],
    full: Sequence[int],
    limits: Sequence[Any] = (),
) -> tuple[tuple[Any, ...], Any]:
    """
    Per core, the index grids of the block at `offsets` (broadcast to the block's
    shape) and the mask of its elements inside the tensor (a clipped store) and before
    each dimension's limit (a load's `limits`).
    """
    lead = ev.lead
    n = len(lead) + len(block)
    grids: list[Any] = []
    for i, size in enumerate(lead):
        shape = [1] * n
        shape[i] = size
        grids.append(np.arange(size).reshape(shape))
    inside: Any = True
    for d, (o, b, f) in enumerate(zip(offsets, block, full, strict=True)):
        shape = [1] * n
        shape[len(lead) + d] = b
        base = np.asarray(o).reshape(np.shape(o) + (1,) * len(block))
        ix = base + np.arange(b).reshape(shape)
        inside = inside & (ix >= 0) & (ix < f)
        if limits:
            bound = np.asarray(limits[d]).reshape(np.shape(limits[d]) + (1,) * len(block))
            inside = inside & (ix < bound)
        grids.append(ix)
    out = np.broadcast_arrays(*grids, np.asarray(inside))
    return tuple(out[:-1]), out[-1]


@TILE_IMPLS.impl(tile.StoreOp)
def _store(ev: ReferenceEvaluator, op: tile.StoreOp, args: list[Any]) -> list[Any]:
    blk, dest, *offsets = args
    block = static_shape(op.block, "block")
    full = static_shape(op.dest, "dest")
    if op.clip is None:
        index = _window_index(ev, offsets, block, full)
    else:
        grids, inside = _clipped_index(ev, offsets, block, full)
        blk = np.broadcast_to(np.asarray(blk), inside.shape)[inside]
        index = tuple(g[inside] for g in grids)
    # Value semantics: update in place only when nothing else can see the old value.
    if _dead_after(op.dest, op) and id(dest) in ev.owned_buffers:
        out = dest
    else:
        out = np.array(dest, copy=True)
        ev.owned_buffers.add(id(out))
        # Forget the id when the array dies, so that a new array reusing it is not owned.
        weakref.finalize(out, ev.owned_buffers.discard, id(out))
    out[index] = blk
    return [out]


def _dead_after(value: SSAValue, use: Operation) -> bool:
    """
    Whether `value` is dead once `use` has run: it has no other use and is defined in the
    block of `use` (a value of an enclosing block is read again by each loop iteration).
    """
    if not value.has_one_use():
        return False
    if isinstance(value, BlockArgument):
        return value.block is use.parent_block()
    return isinstance(value, OpResult) and value.op.parent_block() is use.parent_block()


@TILE_IMPLS.impl(tile.DotOp)
def _dot(ev: ReferenceEvaluator, op: tile.DotOp, args: list[Any]) -> list[Any]:
    a, b = np.asarray(args[0]), np.asarray(args[1])
    if op.transpose_a is not None:
        a = np.swapaxes(a, -1, -2)
    if op.transpose_b is not None:
        b = np.swapaxes(b, -1, -2)
    out = np.matmul(a, b)
    if op.acc is not None:
        out = out + args[2]
    return [out]


@TILE_IMPLS.impl(tile.ReduceOp)
def _reduce(ev: ReferenceEvaluator, op: tile.ReduceOp, args: list[Any]) -> list[Any]:
    x = np.asarray(args[0])
    rank = len(static_shape(op.input, "input"))
    axis = _lead(ev) + normalize_axis(op.axis.value.data, rank)
    kind = op.kind.data
    if kind == tile.ReduceKind.SUM:
        return [np.sum(x, axis=axis, keepdims=True, dtype=x.dtype)]
    if kind == tile.ReduceKind.MAX:
        return [np.max(x, axis=axis, keepdims=True)]
    return [np.min(x, axis=axis, keepdims=True)]


def _relu(x: Array) -> Array:
    return np.maximum(x, np.zeros((), dtype=x.dtype))


def _rsqrt(x: Array) -> Array:
    return (1 / np.sqrt(x)).astype(x.dtype)


def _recip(x: Array) -> Array:
    return (1 / x).astype(x.dtype)


def _gelu_tanh(x: Array) -> Array:
    return gelu(x, tanh=True)


UNARY: dict[str, Callable[[Array], Array]] = {
    "exp": np.exp,
    "log": np.log,
    "cos": np.cos,
    "sin": np.sin,
    "neg": np.negative,
    "abs": np.abs,
    "relu": _relu,
    "sigmoid": sigmoid,
    "tanh": np.tanh,
    "erf": erf,
    "sqrt": np.sqrt,
    "rsqrt": _rsqrt,
    "recip": _recip,
    "gelu": gelu,
    "gelu_tanh": _gelu_tanh,
    "silu": silu,
}

BINARY: dict[str, Callable[[Array, Array], Array]] = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.divide,
    "max": np.maximum,
    "min": np.minimum,
}


@TILE_IMPLS.impl(tile.MapOp)
def _map(ev: ReferenceEvaluator, op: tile.MapOp, args: list[Any]) -> list[Any]:
    rank = len(static_shape(op.result, "result"))
    inputs = [_expand(ev, np.asarray(a), rank) for a in args]
    kind = op.kind_name
    if kind is not None:
        if kind in UNARY:
            return [UNARY[kind](inputs[0])]
        return [BINARY[kind](inputs[0], inputs[1])]
    (out,) = ev.run_block(op.body.block, inputs)
    return [np.broadcast_to(out, ev.lead + static_shape(op.result, "result"))]


@TILE_IMPLS.impl(tile.BroadcastOp)
def _broadcast(ev: ReferenceEvaluator, op: tile.BroadcastOp, args: list[Any]) -> list[Any]:
    shape = static_shape(op.result, "result")
    x = _expand(ev, np.asarray(args[0]), len(shape))
    return [np.array(np.broadcast_to(x, ev.lead + shape))]


@TILE_IMPLS.impl(tile.CastOp)
def _cast(ev: ReferenceEvaluator, op: tile.CastOp, args: list[Any]) -> list[Any]:
    return [np.asarray(args[0]).astype(tensor_dtype(op.result.type))]


@TILE_IMPLS.impl(tile.TransposeOp)
def _transpose(ev: ReferenceEvaluator, op: tile.TransposeOp, args: list[Any]) -> list[Any]:
    lead = _lead(ev)
    perm = [*range(lead), *(lead + p for p in op.perm.get_values())]
    return [np.transpose(args[0], perm).copy()]


@TILE_IMPLS.impl(tile.ReshapeOp)
def _reshape(ev: ReferenceEvaluator, op: tile.ReshapeOp, args: list[Any]) -> list[Any]:
    return [np.reshape(args[0], ev.lead + static_shape(op.result, "result"))]


@TILE_IMPLS.impl(tile.SelectOp)
def _select_block(ev: ReferenceEvaluator, op: tile.SelectOp, args: list[Any]) -> list[Any]:
    cond, a, b = (np.asarray(v) for v in args)
    rank = len(static_shape(op.result, "result"))
    cond = cond.reshape(cond.shape + (1,) * rank)
    return [np.where(cond, a, b)]


@TILE_IMPLS.impl(tile.ForOp)
def _for(ev: ReferenceEvaluator, op: tile.ForOp, args: list[Any]) -> list[Any]:
    values = list(args)
    # A carried array that some other value still names must not be updated in place.
    for init, value in zip(op.iter_args, values, strict=True):
        if not _dead_after(init, op):
            ev.owned_buffers.discard(id(value))
    terminator = op.body.block.last_op
    assert terminator is not None
    for i in range(op.lb.value.data, op.ub.value.data, op.step.value.data):
        values = ev.run_block(op.body.block, [np.int64(i), *values])
        for yielded, value in zip(terminator.operands, values, strict=True):
            if not _dead_after(yielded, terminator):
                ev.owned_buffers.discard(id(value))
    return values


def lookup_rows(table: Array, ids: Array, axis: int) -> Array:
    """
    `tile.lookup` on the host: `table` gathered along `axis` by `ids` (negative ids
    count from the end); an id out of range is an error."""
    size = table.shape[axis]
    raw = np.asarray(ids).astype(np.int64)
    bad = (raw < -size) | (raw >= size)
    if bad.any():
        first = int(raw[bad].flat[0])
        raise PlmrError(
            f"tile.lookup: id {first} is out of range for {size} rows (ids must lie in "
            f"[{-size}, {size}))"
        )
    return np.take(table, np.where(raw < 0, raw + size, raw), axis=axis)


@TILE_IMPLS.impl(tile.LookupOp)
def _lookup(ev: ReferenceEvaluator, op: tile.LookupOp, args: list[Any]) -> list[Any]:
    if ev.lead:
        raise PlmrError("tile.lookup runs on the host: it cannot appear inside a mesh.spmd")
    table = np.asarray(args[0])
    axis = normalize_axis(op.axis.value.data, table.ndim)
    return [lookup_rows(table, np.asarray(args[1]), axis)]


# ---------------------------------------------------------------------------------------
# arith / math
# ---------------------------------------------------------------------------------------


@TILE_IMPLS.impl(arith.ConstantOp)
def _constant(ev: ReferenceEvaluator, op: arith.ConstantOp, args: list[Any]) -> list[Any]:
    value: Attribute = op.value
    if isinstance(value, IntegerAttr):
        return [np.asarray(value.value.data, dtype=numpy_dtype(op.result.type))]
    if isinstance(value, FloatAttr):
        return [np.asarray(value.value.data, dtype=numpy_dtype(op.result.type))]
    if isinstance(value, DenseIntOrFPElementsAttr):
        arr = dense_to_numpy(value)  # pyright: ignore[reportUnknownArgumentType]
        return [np.broadcast_to(arr, ev.lead + arr.shape).copy()]
    ref = weight_ref(op)
    if ref is not None:
        arr = load_weight(ref)
        return [np.broadcast_to(arr, ev.lead + arr.shape).copy()]
    raise PlmrError(f"unsupported constant {value}")


def _divsi(a: Any, b: Any) -> Any:
    """Signed division rounding toward zero (MLIR's `arith.divsi`)."""
    # Floor division, then one up where it rounded a negative quotient down (no `abs`,
    # which overflows for the most negative value).
    return a // b + ((a % b != 0) & ((a < 0) != (b < 0)))


def _remsi(a: Any, b: Any) -> Any:
    return a - _divsi(a, b) * b


def _ceildivsi(a: Any, b: Any) -> Any:
    return a // b + (a % b != 0)


def _unsigned(fn: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """`fn` on the unsigned reading of signless (two's complement) integers."""

    def as_unsigned(x: Any) -> Any:
        x = np.asarray(x)
        return x.astype(f"u{x.dtype.itemsize}") if x.dtype.kind == "i" else x

    return lambda a, b: fn(as_unsigned(a), as_unsigned(b))


def _ordered(fn: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """`fn`, and false when an operand is NaN."""
    return lambda a, b: fn(a, b) & ~(np.isnan(a) | np.isnan(b))


def _unordered(fn: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """`fn`, or true when an operand is NaN."""
    return lambda a, b: fn(a, b) | np.isnan(a) | np.isnan(b)


_CMP: dict[int, Callable[[Any, Any], Any]] = {
    0: np.equal,
    1: np.not_equal,
    2: np.less,
    3: np.less_equal,
    4: np.greater,
    5: np.greater_equal,
    6: _unsigned(np.less),
    7: _unsigned(np.less_equal),
    8: _unsigned(np.greater),
    9: _unsigned(np.greater_equal),
}

_CMPF: dict[int, Callable[[Any, Any], Any]] = {
    1: np.equal,
    2: np.greater,
    3: np.greater_equal,
    4: np.less,
    5: np.less_equal,
    6: _ordered(np.not_equal),
    8: _unordered(np.equal),
    9: _unordered(np.greater),
    10: _unordered(np.greater_equal),
    11: _unordered(np.less),
    12: _unordered(np.less_equal),
    13: np.not_equal,
}


@TILE_IMPLS.impl(arith.CmpiOp)
def _cmpi(ev: ReferenceEvaluator, op: arith.CmpiOp, args: list[Any]) -> list[Any]:
    return [_CMP[op.predicate.value.data](args[0], args[1])]


@TILE_IMPLS.impl(arith.CmpfOp)
def _cmpf(ev: ReferenceEvaluator, op: arith.CmpfOp, args: list[Any]) -> list[Any]:
    pred = op.predicate.value.data
    if pred not in _CMPF:
        raise PlmrError(f"unsupported arith.cmpf predicate {pred}")
    return [_CMPF[pred](args[0], args[1])]


@TILE_IMPLS.impl(arith.SelectOp)
def _select(ev: ReferenceEvaluator, op: arith.SelectOp, args: list[Any]) -> list[Any]:
    return [np.where(args[0], args[1], args[2])]


@TILE_IMPLS.impl(
    arith.IndexCastOp,
    arith.SIToFPOp,
    arith.FPToSIOp,
    arith.ExtFOp,
    arith.TruncFOp,
    arith.TruncIOp,
)
def _convert(ev: ReferenceEvaluator, op: Operation, args: list[Any]) -> list[Any]:
    return [convert_to(args[0], op.results[0].type)]


def convert_to(x: Any, t: Attribute) -> Array:
    """`x` converted to the element type `t` (`arith.sitofp`, `arith.index_cast`, ...)."""
    return np.asarray(x).astype(numpy_dtype(t))


@TILE_IMPLS.impl(arith.ExtSIOp)
def _extsi(ev: ReferenceEvaluator, op: arith.ExtSIOp, args: list[Any]) -> list[Any]:
    """Sign extension: an `i1` true is all ones (-1)."""
    x = np.asarray(args[0])
    dtype = numpy_dtype(op.results[0].type)
    if x.dtype.kind == "b":
        return [np.where(x, -1, 0).astype(dtype)]
    return [x.astype(dtype)]


@TILE_IMPLS.impl(arith.ExtUIOp, arith.UIToFPOp)
def _from_unsigned(ev: ReferenceEvaluator, op: Operation, args: list[Any]) -> list[Any]:
    """`arith.uitofp` / `arith.extui`: the integer read as unsigned (`i1` true is 1)."""
    x = np.asarray(args[0])
    if x.dtype.kind == "i":
        x = x.astype(f"u{x.dtype.itemsize}")
    return [x.astype(numpy_dtype(op.results[0].type))]


def _rsqrt_scalar(x: Any) -> Any:
    return 1 / np.sqrt(x)


@TILE_IMPLS.impl(mathd.FmaOp)
def _fma(ev: ReferenceEvaluator, op: mathd.FmaOp, args: list[Any]) -> list[Any]:
    return [args[0] * args[1] + args[2]]


ELEMENTWISE: dict[type[Operation], Callable[..., Any]] = {
    arith.AddiOp: np.add,
    arith.SubiOp: np.subtract,
    arith.MuliOp: np.multiply,
    arith.DivSIOp: _divsi,
    arith.DivUIOp: _unsigned(np.floor_divide),
    arith.RemSIOp: _remsi,
    arith.RemUIOp: _unsigned(np.remainder),
    arith.FloorDivSIOp: np.floor_divide,
    arith.CeilDivSIOp: _ceildivsi,
    arith.MaxSIOp: np.maximum,
    arith.MinSIOp: np.minimum,
    arith.AndIOp: np.bitwise_and,
    arith.OrIOp: np.bitwise_or,
    arith.XOrIOp: np.bitwise_xor,
    arith.AddfOp: np.add,
    arith.SubfOp: np.subtract,
    arith.MulfOp: np.multiply,
    arith.DivfOp: np.divide,
    arith.MaximumfOp: np.maximum,
    arith.MinimumfOp: np.minimum,
    arith.MaxnumfOp: np.fmax,
    arith.MinnumfOp: np.fmin,
    arith.NegfOp: np.negative,
    mathd.ExpOp: np.exp,
    mathd.LogOp: np.log,
    mathd.CosOp: np.cos,
    mathd.SinOp: np.sin,
    mathd.SqrtOp: np.sqrt,
    mathd.RsqrtOp: _rsqrt_scalar,
    mathd.TanhOp: np.tanh,
    mathd.ErfOp: erf,
    mathd.AbsFOp: np.abs,
    mathd.AbsIOp: np.abs,
    mathd.FloorOp: np.floor,
    mathd.CeilOp: np.ceil,
    mathd.PowFOp: np.power,
}
"""
The elementwise `arith` / `math` ops as numpy functions of their operands: the one
semantics of these ops, vectorised over blocks and cores here and applied to Python
scalars by `plmr.runtime.xdsl_interp`.
"""


def _elementwise(fn: Callable[..., Any]) -> Impl:
    def run(ev: ReferenceEvaluator, op: Operation, args: list[Any]) -> list[Any]:
        return [fn(*args)]

    return run


for _cls, _fn in ELEMENTWISE.items():
    TILE_IMPLS.add(_cls, _elementwise(_fn))

EVAL_IMPLS: dict[type[Operation], EvalImpl] = TILE_IMPLS.as_dict()
"""Implementations that run on the evaluator (vectorised over its leading shape)."""

TileFunctions = interpreter_functions("TileFunctions", EVAL_IMPLS)
"""The `tile`, `arith` and `math` semantics as xDSL `InterpreterFunctions`."""


# ---------------------------------------------------------------------------------------
# Memory traffic
# ---------------------------------------------------------------------------------------


@dataclass
class TileStats:
    """What a tile program did: global-memory traffic, SRAM work and op counts."""

    bytes_loaded: int = 0
    """Bytes copied from global tensors into SRAM by `tile.load`."""
    bytes_stored: int = 0
    """Bytes written from SRAM into global tensors by `tile.store`."""
    flops: int = 0
    op_counts: dict[str, int] = field(default_factory=dict[str, int])

    @property
    def bytes_moved(self) -> int:
        return self.bytes_loaded + self.bytes_stored


def global_values(fn: func.FuncOp) -> set[SSAValue]:
    """
    The SSA values of `fn` that denote tensors in global memory (not SRAM blocks): its
    arguments, the tensors it allocates (`tensor.empty`) or holds as constants at its top
    level, and what stores and loops make of them.
    """
    result: set[SSAValue] = set(fn.body.block.args)
    for op in fn.body.block.ops:
        if isinstance(op, tensor.EmptyOp) or (
            isinstance(op, arith.ConstantOp) and isinstance(op.result.type, TensorType)
        ):
            result.update(op.results)
    changed = True
    while changed:
        changed = False
        for op in fn.walk():
            new: list[SSAValue] = []
            if isinstance(op, tile.StoreOp) and op.dest in result:
                new.append(op.result)
            if isinstance(op, tile.ForOp):
                block_args = op.body.block.args[1:]
                last = op.body.block.last_op
                yielded = list(last.operands) if last is not None else []
                for i, init in enumerate(op.iter_args):
                    through = i < len(yielded) and yielded[i] in result
                    if init in result or through:
                        new += [op.res[i], block_args[i]]
            for v in new:
                if v not in result:
                    result.add(v)
                    changed = True
    return result


def count_op(
    stats: TileStats, globals_: set[SSAValue], op: Operation, results: list[Any]
) -> None:
    """Counts `op` (with its `results`) in `stats`; `globals_` are the global tensors."""
    stats.op_counts[op.name] = stats.op_counts.get(op.name, 0) + 1
    if isinstance(op, tile.LoadOp) and op.source in globals_:
        stats.bytes_loaded += tile.nbytes(op.result.type)
    elif isinstance(op, tile.StoreOp) and op.dest in globals_:
        stats.bytes_stored += tile.nbytes(op.block.type)
    if isinstance(op, tile.TileOp) and not isinstance(op, tile.ForOp):
        stats.flops += op_work(op).flops


class TrafficCounter(Interpreter.Listener):
    """
    Listens to an evaluator running a tile-level function and counts what it does in
    `stats` (`watch` the function first: its global tensors are what traffic is to).
    """

    def __init__(self) -> None:
        self.stats = TileStats()
        self.globals: set[SSAValue] = set()

    def watch(self, fn: func.FuncOp) -> None:
        """Counts traffic to and from the global tensors of `fn`."""
        self.globals = global_values(fn)

    def did_interpret_op(self, op: Operation, results: PythonValues) -> None:
        count_op(self.stats, self.globals, op, list(results))


def tensor_bytes(t: Attribute) -> int:
    """Bytes of a static-shape tensor type in host (numpy) representation."""
    if not isinstance(t, TensorType):
        raise PlmrError(f"expected a tensor type, got {t}")
    attr = cast(Attribute, t)
    return math.prod(static_shape(attr, "tensor")) * tensor_dtype(attr).itemsize


__all__ = [
    "ELEMENTWISE",
    "EVAL_IMPLS",
    "TileFunctions",
    "TileStats",
    "TrafficCounter",
    "convert_to",
    "count_op",
    "global_values",
    "tensor_bytes",
]
