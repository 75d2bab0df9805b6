"""
`convert-graph-to-loop`: lowers every `graph` op to `loop` nests.

Each op becomes one or more `loop.nest`s whose bodies read the operands element by
element (`loop.read`), compute with `arith` / `math`, and yield: an elementwise op is one
parallel nest, a matmul a nest with one reduction dimension, a softmax four nests (max,
exp, sum, divide), a layernorm three (mean, variance, normalise), a conv2d a 7-deep nest
(n, m, oh, ow parallel; c, kh, kw reduction) plus a bias nest. Broadcasting reads index
0 of size-1 dimensions; padding (convolution, pooling) and concatenation read with a
`padding` value outside the tensor. `graph.constant` becomes `arith.constant`.

Reductions over floats start from the lowest (or highest) *finite* value, so a running
maximum never meets `-inf - (-inf)`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from xdsl.builder import ImplicitBuilder
from xdsl.context import Context
from xdsl.dialects import arith
from xdsl.dialects import math as mathd
from xdsl.dialects.builtin import (
    AnyFloat,
    BytesAttr,
    DenseIntOrFPElementsAttr,
    IntegerType,
    ModuleOp,
    Signedness,
    TensorType,
    i1,
)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import PatternRewriter, PatternRewriteWalker, RewritePattern
from xdsl.utils.hints import isa

from plmr.dialects import graph
from plmr.dialects.graph_weights import lowered_weight, weight_ref
from plmr.dialects.loop import ReadOp
from plmr.errors import PlmrError
from plmr.lowering.data_movement import DATA_MOVEMENT_LOWERINGS
from plmr.lowering.gather import lower_gather
from plmr.lowering.loop_builders import (
    LoweringTable,
    Shape,
    add,
    broadcast_read,
    const,
    div,
    exp,
    highest,
    index,
    is_float,
    lowest,
    map_nest,
    maximum,
    minimum,
    mul,
    neg,
    reduce_nest,
    sub,
)
from plmr.lowering.loop_builders import binary_lowering as _binary
from plmr.lowering.loop_builders import element_of as _elt
from plmr.lowering.loop_builders import shape_of as _shape
from plmr.lowering.loop_builders import unary_lowering as _unary
from plmr.lowering.rotation import lower_rotation, rotation_width

GRAPH_LOWERINGS = LoweringTable("convert-graph-to-loop")
"""How each `graph` op becomes loop nests: (op) -> replacement values (built in place)."""


def _relu(x: SSAValue) -> SSAValue:
    return maximum(x, const(0, x.type))


def _sigmoid(x: SSAValue) -> SSAValue:
    one = const(1, x.type)
    return div(one, add(one, exp(neg(x))))


def _silu(x: SSAValue) -> SSAValue:
    one = const(1, x.type)
    return div(x, add(one, exp(neg(x))))


def _gelu_erf(x: SSAValue) -> SSAValue:
    half, one = const(0.5, x.type), const(1, x.type)
    e = mathd.ErfOp(mul(x, const(1 / math.sqrt(2.0), x.type))).result
    return mul(mul(half, x), add(one, e))


def _gelu_tanh(x: SSAValue) -> SSAValue:
    half, one = const(0.5, x.type), const(1, x.type)
    cube = mul(mul(x, x), x)
    inner = add(x, mul(const(0.044715, x.type), cube))
    t = mathd.TanhOp(mul(const(math.sqrt(2 / math.pi), x.type), inner)).result
    return mul(mul(half, x), add(one, t))


@GRAPH_LOWERINGS.impl(graph.GeluOp)
def _lower_gelu(op: graph.GeluOp) -> list[SSAValue]:
    return _unary(_gelu_tanh if op.tanh is not None else _gelu_erf)(op)


@GRAPH_LOWERINGS.impl(graph.ScaleOp)
def _lower_scale(op: graph.ScaleOp) -> list[SSAValue]:
    factor = op.factor.value.data
    return _unary(lambda x: mul(x, const(factor, x.type)))(op)


@GRAPH_LOWERINGS.impl(graph.MatmulOp)
def _lower_matmul(op: graph.MatmulOp) -> list[SSAValue]:
    h = rotation_width(op)
    if h:
        # RoPE's rotate_half: an index map, not a reduction (`lowering.rotation`).
        return [lower_rotation(op, h)]
    a, b = op.lhs, op.rhs
    sa, sb = _shape(a), _shape(b)
    out = _shape(op.result)
    ta, tb = op.transpose_a is not None, op.transpose_b is not None
    k = sa[-2] if ta else sa[-1]
    nbatch = len(out) - 2
    elt = _elt(op.result)

    def term(p: Sequence[SSAValue], r: Sequence[SSAValue]) -> SSAValue:
        batch, m, n, kk = p[:nbatch], p[nbatch], p[nbatch + 1], r[0]
        ia = [*_batch_index(sa[:-2], batch), *((kk, m) if ta else (m, kk))]
        ib = [*_batch_index(sb[:-2], batch), *((n, kk) if tb else (kk, n))]
        return mul(ReadOp(a, ia).result, ReadOp(b, ib).result)

    return [reduce_nest(out, (k,), 0, elt, term, add)]


def _batch_index(shape: Shape, batch: Sequence[SSAValue]) -> list[SSAValue]:
    off = len(batch) - len(shape)
    return [index(0) if d == 1 else batch[off + i] for i, d in enumerate(shape)]


@GRAPH_LOWERINGS.impl(graph.TransposeOp)
def _lower_transpose(op: graph.TransposeOp) -> list[SSAValue]:
    x = op.input
    perm = op.perm.get_values()

    def body(idx: Sequence[SSAValue]) -> SSAValue:
        src: list[SSAValue] = [idx[0]] * len(perm)
        for i, p in enumerate(perm):
            src[p] = idx[i]
        return ReadOp(x, src).result

    return [map_nest(_shape(op.result), body, _elt(x))]


def reshape_groups(src: Shape, dst: Shape) -> list[tuple[list[int], list[int]]]:
    """
    Pairs runs of source and destination dimensions with equal element counts, e.g.
    `1x8x16 -> 1x8x2x8` is `[0]-[0], [1]-[1], [2]-[2, 3]`.
    """
    groups: list[tuple[list[int], list[int]]] = []
    i = j = 0
    while i < len(src) or j < len(dst):
        gs: list[int] = []
        gd: list[int] = []
        ps = pd = 1
        if i < len(src):
            gs.append(i)
            ps *= src[i]
            i += 1
        if j < len(dst):
            gd.append(j)
            pd *= dst[j]
            j += 1
        while ps != pd:
            if ps < pd and i < len(src):
                gs.append(i)
                ps *= src[i]
                i += 1
            elif j < len(dst):
                gd.append(j)
                pd *= dst[j]
                j += 1
            else:
                gs.append(i)
                ps *= src[i]
                i += 1
        # Trailing size-1 dimensions join the group they follow.
        while i < len(src) and src[i] == 1 and (j >= len(dst) or dst[j] != 1):
            gs.append(i)
            i += 1
        while j < len(dst) and dst[j] == 1 and (i >= len(src) or src[i] != 1):
            gd.append(j)
            j += 1
        groups.append((gs, gd))
    return groups


@GRAPH_LOWERINGS.impl(graph.ReshapeOp)
def _lower_reshape(op: graph.ReshapeOp) -> list[SSAValue]:
    x = op.input
    src, dst = _shape(x), _shape(op.result)

    def body(idx: Sequence[SSAValue]) -> SSAValue:
        src_idx: list[SSAValue] = []
        for gs, gd in reshape_groups(src, dst):
            # Linear position inside the group (affine in the destination indices).
            lin: SSAValue | None = None
            for d in gd:
                term = idx[d]
                lin = term if lin is None else add(mul(lin, index(dst[d])), term)
            if lin is None:
                lin = index(0)
            if len(gs) == 1:
                src_idx.append(lin)
                continue
            # Split it over the source dimensions of the group.
            stride = math.prod(src[s] for s in gs)
            for s in gs:
                stride //= src[s]
                q = arith.DivUIOp(lin, index(stride)).result if stride > 1 else lin
                src_idx.append(arith.RemUIOp(q, index(src[s])).result if s != gs[0] else q)
        return ReadOp(x, src_idx).result

    return [map_nest(dst, body, _elt(x))]


def _combine_fn(kind: str) -> Callable[[SSAValue, SSAValue], SSAValue]:
    return {"sum": add, "mean": add, "max": maximum, "min": minimum}[kind]


def _init_of(kind: str, elt: Attribute) -> float:
    if kind == "max":
        return lowest(elt)
    if kind == "min":
        return highest(elt)
    return 0.0


def reduce_axes(x: SSAValue, axes: Sequence[int], keepdims: bool, kind: str) -> SSAValue:
    """`kind` of `x` over `axes`, as one reduction nest (keepdims: extent-1 dims)."""
    shape = _shape(x)
    elt = _elt(x)
    par: list[int] = []
    par_src: list[int | None] = []
    for a, d in enumerate(shape):
        if a not in axes:
            par.append(d)
            par_src.append(a)
        elif keepdims:
            par.append(1)
            par_src.append(None)
    red = [shape[a] for a in axes]

    def term(p: Sequence[SSAValue], r: Sequence[SSAValue]) -> SSAValue:
        idx: list[SSAValue] = [p[0]] * len(shape) if p else [r[0]] * len(shape)
        for pi, a in zip(p, par_src, strict=True):
            if a is not None:
                idx[a] = pi
        for ri, a in zip(r, axes, strict=True):
            idx[a] = ri
        return ReadOp(x, idx).result

    return reduce_nest(
        tuple(par), tuple(red), _init_of(kind, elt), elt, term, _combine_fn(kind)
    )


def _scaled_read(v: SSAValue, idx: Sequence[SSAValue], count: int) -> SSAValue:
    """`v[idx] / count` (a mean from a sum)."""
    x = ReadOp(v, idx).result
    return div(x, const(count, x.type))


@GRAPH_LOWERINGS.impl(graph.ReduceOp)
def _lower_reduce(op: graph.ReduceOp) -> list[SSAValue]:
    kind = op.kind.data.value
    axes = op.normalized_axes()
    keep = op.keepdims is not None
    if kind == "mean" and not isinstance(_elt(op.input), AnyFloat):
        raise PlmrError("convert-graph-to-loop: mean of an integer tensor is not supported")
    total = reduce_axes(op.input, sorted(axes), keep, kind)
    if kind != "mean":
        return [total]
    named(total, op, "sum")
    count = math.prod(_shape(op.input)[a] for a in axes)
    out = _shape(op.result)
    return [map_nest(out, lambda idx: _scaled_read(total, idx, count), _elt(op.result))]


def named(v: SSAValue, op: Operation, suffix: str) -> SSAValue:
    """Names an intermediate result after the op it helps lower (e.g. `%p_max`)."""
    base = op.results[0].name_hint or op.name.split(".")[-1]
    v.name_hint = f"{base}_{suffix}"
    return v


def _drop(idx: Sequence[SSAValue], axes: Sequence[int]) -> list[SSAValue]:
    return [v for a, v in enumerate(idx) if a not in axes]


@GRAPH_LOWERINGS.impl(graph.SoftmaxOp)
def _lower_softmax(op: graph.SoftmaxOp) -> list[SSAValue]:
    x = op.input
    shape = _shape(x)
    axis = graph.normalize_axis(op.axis.value.data, len(shape))
    elt = _elt(x)
    m = named(reduce_axes(x, [axis], False, "max"), op, "max")

    def shifted(idx: Sequence[SSAValue]) -> SSAValue:
        return exp(sub(ReadOp(x, idx).result, ReadOp(m, _drop(idx, [axis])).result))

    e = named(map_nest(shape, shifted, elt), op, "exp")
    s = named(reduce_axes(e, [axis], False, "sum"), op, "sum")

    def normalise(idx: Sequence[SSAValue]) -> SSAValue:
        return div(ReadOp(e, idx).result, ReadOp(s, _drop(idx, [axis])).result)

    return [map_nest(shape, normalise, elt)]


def _norm_param(p: SSAValue, idx: Sequence[SSAValue]) -> SSAValue:
    return broadcast_read(p, idx)


@GRAPH_LOWERINGS.impl(graph.LayerNormOp)
def _lower_layernorm(op: graph.LayerNormOp) -> list[SSAValue]:
    x = op.input
    shape = _shape(x)
    ax = graph.normalize_axis(op.axis.value.data, len(shape))
    axes = list(range(ax, len(shape)))
    count = math.prod(shape[ax:])
    elt = _elt(x)
    eps = op.epsilon.value.data
    total = named(reduce_axes(x, axes, False, "sum"), op, "sum")

    def centred(idx: Sequence[SSAValue]) -> SSAValue:
        mean = _scaled_read(total, _drop(idx, axes), count)
        return sub(ReadOp(x, idx).result, mean)

    def square(p: Sequence[SSAValue], r: Sequence[SSAValue]) -> SSAValue:
        d = centred([*p, *r])
        return mul(d, d)

    var = named(
        reduce_nest(tuple(shape[:ax]), tuple(shape[ax:]), 0, elt, square, add), op, "var"
    )
    bias = op.bias

    def normalise(idx: Sequence[SSAValue]) -> SSAValue:
        v = _scaled_read(var, _drop(idx, axes), count)
        rstd = mathd.SqrtOp(add(v, const(eps, elt))).result
        y = mul(div(centred(idx), rstd), _norm_param(op.scale, idx[ax:]))
        if bias is not None:
            y = add(y, _norm_param(bias, idx[ax:]))
        return y

    return [map_nest(shape, normalise, elt)]


@GRAPH_LOWERINGS.impl(graph.RmsNormOp)
def _lower_rmsnorm(op: graph.RmsNormOp) -> list[SSAValue]:
    x = op.input
    shape = _shape(x)
    ax = graph.normalize_axis(op.axis.value.data, len(shape))
    axes = list(range(ax, len(shape)))
    count = math.prod(shape[ax:])
    elt = _elt(x)
    eps = op.epsilon.value.data

    def square(p: Sequence[SSAValue], r: Sequence[SSAValue]) -> SSAValue:
        v = ReadOp(x, [*p, *r]).result
        return mul(v, v)

    ms = named(
        reduce_nest(tuple(shape[:ax]), tuple(shape[ax:]), 0, elt, square, add), op, "ms"
    )

    def normalise(idx: Sequence[SSAValue]) -> SSAValue:
        v = _scaled_read(ms, _drop(idx, axes), count)
        rms = mathd.SqrtOp(add(v, const(eps, elt))).result
        return mul(div(ReadOp(x, idx).result, rms), _norm_param(op.weight, idx[ax:]))

    return [map_nest(shape, normalise, elt)]


@GRAPH_LOWERINGS.impl(graph.ConcatOp)
def _lower_concat(op: graph.ConcatOp) -> list[SSAValue]:
    inputs = list(op.inputs)
    out = _shape(op.result)
    ax = graph.normalize_axis(op.axis.value.data, len(out))
    offsets = [0]
    for v in inputs:
        offsets.append(offsets[-1] + _shape(v)[ax])
    elt = _elt(op.result)
    pad = 0.0

    def read_piece(k: int, idx: Sequence[SSAValue]) -> SSAValue:
        src = list(idx)
        src[ax] = arith.SubiOp(idx[ax], index(offsets[k])).result if offsets[k] else idx[ax]
        return ReadOp(inputs[k], src, padding=pad).result

    def body(idx: Sequence[SSAValue]) -> SSAValue:
        value = read_piece(len(inputs) - 1, idx)
        for k in range(len(inputs) - 2, -1, -1):
            inside = arith.CmpiOp(idx[ax], index(offsets[k + 1]), "slt").result
            value = arith.SelectOp(inside, read_piece(k, idx), value).result
        return value

    return [map_nest(out, body, elt)]


@GRAPH_LOWERINGS.impl(graph.SplitOp)
def _lower_split(op: graph.SplitOp) -> list[SSAValue]:
    x = op.input
    ax = graph.normalize_axis(op.axis.value.data, len(_shape(x)))
    results: list[SSAValue] = []
    offset = 0
    for out in op.outputs:
        off = offset

        def body(idx: Sequence[SSAValue], off: int = off) -> SSAValue:
            src = list(idx)
            if off:
                src[ax] = arith.AddiOp(idx[ax], index(off)).result
            return ReadOp(x, src).result

        results.append(map_nest(_shape(out), body, _elt(out)))
        offset += _shape(out)[ax]
    return results


def _window_index(
    o: SSAValue, k: SSAValue, stride: int, dilation: int, pad: int
) -> SSAValue:
    """`o * stride + k * dilation - pad` on indices."""
    pos = arith.MuliOp(o, index(stride)).result if stride != 1 else o
    kk = arith.MuliOp(k, index(dilation)).result if dilation != 1 else k
    pos = arith.AddiOp(pos, kk).result
    if pad:
        pos = arith.SubiOp(pos, index(pad)).result
    return pos


@GRAPH_LOWERINGS.impl(graph.Conv2dOp)
def _lower_conv2d(op: graph.Conv2dOp) -> list[SSAValue]:
    x, w = op.input, op.weight
    out = _shape(op.result)
    _, cg, kh, kw = _shape(w)
    groups = op.groups.value.data
    mg = out[1] // groups
    sh, sw = op.strides.get_values()
    pt, pl, _, _ = op.pads.get_values()
    dh, dw = op.dilations.get_values()
    elt = _elt(op.result)

    def term(p: Sequence[SSAValue], r: Sequence[SSAValue]) -> SSAValue:
        n, m, oh, ow = p
        c, i, j = r
        if groups > 1:
            group = arith.DivUIOp(m, index(mg)).result
            c = arith.AddiOp(arith.MuliOp(group, index(cg)).result, c).result
        h = _window_index(oh, i, sh, dh, pt)
        ww = _window_index(ow, j, sw, dw, pl)
        xv = ReadOp(x, [n, c, h, ww], padding=0.0).result
        return mul(xv, ReadOp(w, [m, r[0], i, j]).result)

    y = reduce_nest(out, (cg, kh, kw), 0, elt, term, add)
    bias = op.bias
    if bias is None:
        return [y]
    named(y, op, "nobias")

    def add_bias(idx: Sequence[SSAValue]) -> SSAValue:
        return add(ReadOp(y, idx).result, ReadOp(bias, [idx[1]]).result)

    return [map_nest(out, add_bias, elt)]


@GRAPH_LOWERINGS.impl(graph.PoolOp)
def _lower_pool(op: graph.PoolOp) -> list[SSAValue]:
    x = op.input
    out = _shape(op.result)
    _, _, height, width = _shape(x)
    kh, kw = op.kernel.get_values()
    sh, sw = op.strides.get_values()
    pt, pl, _, _ = op.pads.get_values()
    elt = _elt(op.result)
    is_max = op.kind.data.value == "max"
    # A max-pool pads with -inf and starts from it: a window of -inf (a padded mask)
    # is -inf, not the lowest finite value (no running maximum of a pool is ever
    # subtracted, unlike a softmax's).
    pad = (-math.inf if isinstance(elt, AnyFloat) else lowest(elt)) if is_max else 0.0

    def term(p: Sequence[SSAValue], r: Sequence[SSAValue]) -> SSAValue:
        n, c, oh, ow = p
        h = _window_index(oh, r[0], sh, 1, pt)
        w = _window_index(ow, r[1], sw, 1, pl)
        return ReadOp(x, [n, c, h, w], padding=pad).result

    if is_max:
        return [reduce_nest(out, (kh, kw), pad, elt, term, maximum)]
    total = named(reduce_nest(out, (kh, kw), 0, elt, term, add), op, "sum")
    include_pad = op.count_include_pad is not None

    def average(idx: Sequence[SSAValue]) -> SSAValue:
        s = ReadOp(total, idx).result
        if include_pad:
            return div(s, const(kh * kw, elt))
        count = arith.MuliOp(
            _window_count(idx[2], sh, pt, kh, height),
            _window_count(idx[3], sw, pl, kw, width),
        ).result
        as_int = arith.IndexCastOp(count, IntegerType(64)).result
        return div(s, arith.SIToFPOp(as_int, cast(AnyFloat, elt)).result)

    return [map_nest(out, average, elt)]


def _window_count(o: SSAValue, stride: int, pad: int, kernel: int, size: int) -> SSAValue:
    """How many positions of a pooling window lie inside the input (not padding)."""
    start = _window_index(o, index(0), stride, 1, pad)
    end = arith.AddiOp(start, index(kernel)).result
    lo = arith.MaxSIOp(start, index(0)).result
    hi = arith.MinSIOp(end, index(size)).result
    return arith.SubiOp(hi, lo).result


@GRAPH_LOWERINGS.impl(graph.ConstantOp)
def _lower_constant(op: graph.ConstantOp) -> list[SSAValue]:
    return [arith.ConstantOp(op.value).result]


@GRAPH_LOWERINGS.impl(graph.WeightOp)
def _lower_weight(op: graph.WeightOp) -> list[SSAValue]:
    """A weight stays a reference: an `arith.constant` of a `dense_resource`."""
    ref = weight_ref(op)
    assert ref is not None
    return [lowered_weight(ref).result]


# ---------------------------------------------------------------------------------------
# Selection, comparison, logic and casts
# ---------------------------------------------------------------------------------------

_CMPF = {"eq": "oeq", "ne": "une", "lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge"}
"""ONNX comparisons of floats: false against NaN, except `ne` (`Not(Equal)`)."""
_CMPI = {"eq": "eq", "ne": "ne", "lt": "slt", "le": "sle", "gt": "sgt", "ge": "sge"}
_CMPU = {"eq": "eq", "ne": "ne", "lt": "ult", "le": "ule", "gt": "ugt", "ge": "uge"}
"""Booleans compare unsigned (`false < true`); signed, `true` would be -1."""


def compare(predicate: str, a: SSAValue, b: SSAValue) -> SSAValue:
    """`a <predicate> b` as an `i1`, with ONNX semantics."""
    if is_float(a):
        return arith.CmpfOp(a, b, _CMPF[predicate]).result
    table = _CMPU if a.type == i1 else _CMPI
    return arith.CmpiOp(a, b, table[predicate]).result


@GRAPH_LOWERINGS.impl(graph.CmpOp)
def _lower_cmp(op: graph.CmpOp) -> list[SSAValue]:
    predicate = op.predicate.data.value
    return _binary(lambda a, b: compare(predicate, a, b))(op)


@GRAPH_LOWERINGS.impl(graph.WhereOp)
def _lower_where(op: graph.WhereOp) -> list[SSAValue]:
    c, a, b = op.condition, op.lhs, op.rhs

    def body(idx: Sequence[SSAValue]) -> SSAValue:
        pick = broadcast_read(c, idx)
        return arith.SelectOp(pick, broadcast_read(a, idx), broadcast_read(b, idx)).result

    return [map_nest(_shape(op.result), body, _elt(op.result))]


def _not(x: SSAValue) -> SSAValue:
    return arith.XOrIOp(x, const(1, i1)).result


def _is_int(elt: Attribute) -> bool:
    return isinstance(elt, IntegerType)


def _width(elt: Attribute) -> int:
    if isinstance(elt, AnyFloat):
        return elt.bitwidth
    return cast(IntegerType, elt).width.data


def convert(x: SSAValue, dst: Attribute) -> SSAValue:
    """
    `x` converted to `dst` with ONNX Cast semantics: floats to integers truncate toward
    zero, anything to `i1` is `x != 0`, `i1` converts to 0 or 1.
    """
    src = x.type
    if src == dst:
        return x
    if dst == i1:
        zero = const(0, src)
        if is_float(x):
            return arith.CmpfOp(x, zero, "une").result
        return arith.CmpiOp(x, zero, "ne").result
    from_float, to_float = graph.is_float_type(src), graph.is_float_type(dst)
    from_int, to_int = _is_int(src), _is_int(dst)
    if from_float and to_float and _width(src) != _width(dst):
        wider = _width(src) < _width(dst)
        fdst = cast(AnyFloat, dst)
        return (arith.ExtFOp(x, fdst) if wider else arith.TruncFOp(x, fdst)).result
    if from_int and to_float:
        if src == i1:
            return arith.UIToFPOp(x, cast(AnyFloat, dst)).result
        return arith.SIToFPOp(x, cast(AnyFloat, dst)).result
    idst = cast(IntegerType[int, Signedness], dst)
    if from_float and to_int:
        return arith.FPToSIOp(x, idst).result
    if from_int and to_int:
        if src == i1:
            return arith.ExtUIOp(x, idst).result
        if _width(src) < _width(dst):
            return arith.ExtSIOp(x, idst).result
        if _width(src) > _width(dst):
            return arith.TruncIOp(x, idst).result
    raise PlmrError(f"convert-graph-to-loop: no cast from {src} to {dst}")


@GRAPH_LOWERINGS.impl(graph.CastOp)
def _lower_cast(op: graph.CastOp) -> list[SSAValue]:
    x = op.input
    dst = _elt(op.result)
    return [map_nest(_shape(x), lambda idx: convert(ReadOp(x, idx).result, dst), dst)]


def _abs(x: SSAValue) -> SSAValue:
    return (mathd.AbsFOp(x) if is_float(x) else mathd.AbsIOp(x)).result


@GRAPH_LOWERINGS.impl(graph.PowOp)
def _lower_pow(op: graph.PowOp) -> list[SSAValue]:
    exponent = op.exponent.value.data
    return _unary(lambda x: mathd.PowFOp(x, const(exponent, x.type)).result)(op)


GRAPH_LOWERINGS.add(graph.AddOp, _binary(add))
GRAPH_LOWERINGS.add(graph.SubOp, _binary(sub))
GRAPH_LOWERINGS.add(graph.MulOp, _binary(mul))
GRAPH_LOWERINGS.add(graph.DivOp, _binary(div))
GRAPH_LOWERINGS.add(graph.ReluOp, _unary(_relu))
GRAPH_LOWERINGS.add(graph.SiluOp, _unary(_silu))
GRAPH_LOWERINGS.add(graph.SigmoidOp, _unary(_sigmoid))
GRAPH_LOWERINGS.add(graph.TanhOp, _unary(lambda x: mathd.TanhOp(x).result))
GRAPH_LOWERINGS.add(graph.ExpOp, _unary(exp))
GRAPH_LOWERINGS.add(graph.ErfOp, _unary(lambda x: mathd.ErfOp(x).result))
GRAPH_LOWERINGS.add(graph.SqrtOp, _unary(lambda x: mathd.SqrtOp(x).result))
GRAPH_LOWERINGS.add(graph.NegOp, _unary(neg))
GRAPH_LOWERINGS.add(graph.GatherOp, lower_gather)
GRAPH_LOWERINGS.add(graph.NotOp, _unary(_not))
GRAPH_LOWERINGS.add(graph.AndOp, _binary(lambda a, b: arith.AndIOp(a, b).result))
GRAPH_LOWERINGS.add(graph.OrOp, _binary(lambda a, b: arith.OrIOp(a, b).result))
GRAPH_LOWERINGS.add(graph.XorOp, _binary(lambda a, b: arith.XOrIOp(a, b).result))
GRAPH_LOWERINGS.add(graph.AbsOp, _unary(_abs))
GRAPH_LOWERINGS.add(graph.LogOp, _unary(lambda x: mathd.LogOp(x).result))
GRAPH_LOWERINGS.add(graph.CosOp, _unary(lambda x: mathd.CosOp(x).result))
GRAPH_LOWERINGS.add(graph.SinOp, _unary(lambda x: mathd.SinOp(x).result))
GRAPH_LOWERINGS.add(graph.FloorOp, _unary(lambda x: mathd.FloorOp(x).result))
GRAPH_LOWERINGS.add(graph.CeilOp, _unary(lambda x: mathd.CeilOp(x).result))
GRAPH_LOWERINGS.add(graph.ReciprocalOp, _unary(lambda x: div(const(1, x.type), x)))
GRAPH_LOWERINGS.add(graph.MaximumOp, _binary(maximum))
GRAPH_LOWERINGS.add(graph.MinimumOp, _binary(minimum))
for _cls, _meaning in graph.unary_meanings().items():
    GRAPH_LOWERINGS.add(_cls, _unary(_meaning.body))
GRAPH_LOWERINGS.update(DATA_MOVEMENT_LOWERINGS)


def _is_empty(t: Attribute) -> bool:
    return isa(t, TensorType[Attribute]) and 0 in t.get_shape()


def _empty_constant(t: Attribute) -> SSAValue:
    tt = graph.tensor_type(t, "result")
    empty = DenseIntOrFPElementsAttr[Any](cast(Any, tt), BytesAttr(b""))
    return arith.ConstantOp(empty).result


def lower_graph_op(op: Operation, rewriter: PatternRewriter) -> None:
    """Replaces one graph op by its loop nests (built right before it)."""
    lowering = GRAPH_LOWERINGS.lookup(op)
    if lowering is None:
        raise PlmrError(f"convert-graph-to-loop: no lowering for '{op.name}'")
    with ImplicitBuilder(rewriter):
        if all(_is_empty(r.type) for r in op.results):
            # A loop nest has positive extents: an empty result is an empty constant.
            values = [_empty_constant(r.type) for r in op.results]
        else:
            values = lowering(op)
    for old, new in zip(op.results, values, strict=True):
        if old.type != new.type:
            raise PlmrError(
                f"convert-graph-to-loop: '{op.name}' lowered to {new.type}, "
                f"expected {old.type}"
            )
        if old.name_hint:
            new.name_hint = old.name_hint
    rewriter.replace(op, [], values)


class _LowerGraphOp(RewritePattern):
    """A `graph` op becomes the loop nests its registered lowering builds."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /):
        if op.dialect_name() == "graph":
            lower_graph_op(op, rewriter)


@dataclass(frozen=True)
class ConvertGraphToLoopPass(ModulePass):
    """
    Lowers every `graph` op to `loop` nests (reads, `arith` / `math`, yields);
    constants become `arith.constant`.
    """

    name = "convert-graph-to-loop"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(_LowerGraphOp(), apply_recursively=False).rewrite_module(op)
