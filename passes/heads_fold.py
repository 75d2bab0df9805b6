"""
`graph-fold-heads`: a one-row projection whose result is split into attention heads
becomes a batched projection with one weight per head, so the heads are a dimension of
the product itself.

An export writes a decode step's query, key and value as `x·W` (one row, `1 x N`)
viewed as heads (`reshape` to `[1, H, 1, D]`, or to the grouped `[1, Hkv, G, D]` of
`graph-fold-repeat-kv`), with elementwise ops on the way: the norm's deferred per-row
scale, RoPE's `q·cos + (q·R)·sin` on whole heads. On the mesh, the flat product is split
over the `N` columns and every nest that reads it by head must first gather it: at
LLaMA3-8B width a 4,096-element all-gather over an axis of 420 PEs, per projection. Here
the view moves onto the weight instead: `W` (`K x N`) becomes one `K x D` weight per
head (`graph.weight ... heads [H]`, `H x K x D`, computed by the runtime from the file; an
inline constant is rearranged here), the product `reshape(x)·W'` is `[H, 1, D]` from the
start, and the elementwise ops between are rebuilt on that shape. The planner then splits
the heads and the head dimension of the product as it splits those of its readers, as for
plmr's own decode program (`models/llama_heads.py`).

It applies to a reshape that splits the last dimension `N` of a value into dimensions
`A, ..., D` (besides unit dimensions), where the value is computed from one projection
`x·W` (`x` one row; `W` a rank-2 constant or weight, untransposed) through single-use
ops: reshapes, unary elementwise ops, and binary ones whose other operand varies at most
along the last dimension (a per-row scalar, a `cos`/`sin` table of `D`). Products of more
than one row (a prefill's) are left alone, unless the pass's `rows` option is set: then
`transpose(reshape(x·W))` from `[1, L, N]` to `[1, A, L, D]` becomes a product batched
over the heads too, and the output projection of such heads a sum of per-head products.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import PatternRewriter, PatternRewriteWalker, RewritePattern
from xdsl.rewriter import InsertPoint

from plmr.dialects import graph
from plmr.dialects.graph_weights import weight_ref
from plmr.dialects.narrow import expect
from plmr.passes.canonicalize.match import const_array, constant_op, elt_of, shape_of
from plmr.passes.dead_ops import erase_dead
from plmr.passes.timing import count
from plmr.passes.transpose_elim import rebuild_unary
from plmr.runtime.weights import split_heads

_UNARY = (graph.UnaryElementwiseOp, graph.ScaleOp)
_BINARY = (graph.AddOp, graph.SubOp, graph.MulOp, graph.DivOp)


def _split(src: tuple[int, ...], dst: tuple[int, ...]) -> tuple[int, ...] | None:
    """
    The heads `(A, ..., D)` if a reshape from `src` (`[1, ..., 1, N]`) to `dst` splits
    `N` into two or more dimensions (the last one `D`) besides unit ones.
    """
    if not src or any(d != 1 for d in src[:-1]) or not dst or dst[-1] == 1:
        return None
    dims = tuple(d for d in dst if d != 1)
    if len(dims) < 2 or math.prod(dims) != src[-1]:
        return None
    return dims


def _projection(value: SSAValue, k_rows: int = 1) -> graph.MatmulOp | None:
    """The matmul `x·W` defining `value` if it can take weights per head."""
    mm = value.owner
    if not isinstance(mm, graph.MatmulOp) or not value.has_one_use():
        return None
    if mm.transpose_a is not None or mm.transpose_b is not None:
        return None
    lhs, rhs = shape_of(mm.lhs), shape_of(mm.rhs)
    if len(rhs) != 2 or math.prod(lhs[:-1]) != k_rows:
        return None
    weight = mm.rhs.owner
    if isinstance(weight, graph.ConstantOp):
        return mm
    if isinstance(weight, graph.WeightOp):
        ref = weight_ref(weight)
        return mm if ref is not None and not ref.heads else None
    return None


def _tail_only(other: SSAValue, last: int) -> bool:
    """Whether `other` varies at most along its last dimension, of size 1 or `last`."""
    shape = shape_of(other)
    return all(d == 1 for d in shape[:-1]) and (not shape or shape[-1] in (1, last))


def _foldable(value: SSAValue, last: int) -> bool:
    """Whether `value` comes from one projection through ops `_rebuild` can rebuild."""
    shape = shape_of(value)
    if not value.has_one_use() or not shape or shape[-1] % last:
        return False
    owner = value.owner
    if isinstance(owner, graph.MatmulOp):
        return _projection(value) is not None
    if isinstance(owner, graph.ReshapeOp):
        return _foldable(owner.input, last)
    if isinstance(owner, _UNARY):
        return _foldable(owner.operands[0], last)
    if not isinstance(owner, _BINARY):
        return False
    whole = [v for v in owner.operands if shape_of(v) == shape_of(value)]
    rest = [v for v in owner.operands if shape_of(v) != shape_of(value)]
    if not whole or any(not _tail_only(v, last) for v in rest):
        return False
    if len(whole) == 2 and whole[0] == whole[1]:
        return False  # x·x: one value read twice is not a single use
    return all(_foldable(v, last) for v in whole)


def _weight_per_head(weight: Operation, dims: tuple[int, ...]) -> Operation:
    """`W` (`K x N`) as `A x ... x K x D`: a rearranged constant or a `heads` reference."""
    heads = dims[:-1]
    if isinstance(weight, graph.ConstantOp):
        values = const_array(weight.result)
        assert values is not None
        return constant_op(split_heads(values, heads), elt_of(weight.result))
    ref = weight_ref(weight)
    assert ref is not None
    k = ref.shape[0]
    t = TensorType(ref.type.element_type, [*heads, k, dims[-1]])
    return graph.WeightOp.of(replace(ref, type=t, heads=heads))


@dataclass
class _Rebuild:
    """Rebuilds a foldable value on the heads shape `[A, ..., 1, D]`, collecting ops."""

    dims: tuple[int, ...]
    made: list[Operation]

    def value(self, value: SSAValue) -> SSAValue:
        owner = value.owner
        if isinstance(owner, graph.MatmulOp):
            return self._product(owner)
        if isinstance(owner, graph.ReshapeOp):
            return self.value(owner.input)
        if isinstance(owner, _UNARY):
            op = rebuild_unary(owner, self.value(owner.operands[0]))
        else:
            owner = expect(
                owner, graph.BinaryElementwiseOp, "an op of a projection by heads"
            )
            whole = shape_of(value)
            lhs, rhs = (
                self.value(v) if shape_of(v) == whole else v for v in owner.operands
            )
            op = type(owner)(lhs, rhs)
        op.results[0].name_hint = value.name_hint
        self.made.append(op)
        return op.results[0]

    def _product(self, mm: graph.MatmulOp) -> SSAValue:
        k = shape_of(mm.lhs)[-1]
        row_shape = [1] * len(self.dims) + [k]
        row = mm.lhs
        if list(shape_of(row)) != row_shape:
            reshape = graph.ReshapeOp(row, row_shape)
            self.made.append(reshape)
            row = reshape.result
        weight = _weight_per_head(mm.rhs.owner, self.dims)  # pyright: ignore[reportArgumentType]
        product = graph.MatmulOp(row, weight)
        product.result.name_hint = mm.result.name_hint
        self.made += [weight, product]
        return product.result


@dataclass
class FoldHeads(RewritePattern):
    """Folds a projection's split into heads (a reshape) into per-head weights."""

    folded: int = 0
    """How many projections this pattern folded."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, graph.ReshapeOp):
            return
        dst = shape_of(op.result)
        if not dst or dst[-1] == 1:
            return
        source = op.input
        flat = _flat_shape(source)
        dims = None if flat is None else _split(flat, dst)
        if dims is None or not _foldable(source, dims[-1]):
            return
        rebuild = _Rebuild(dims, [])
        value = rebuild.value(source)
        out = graph.ReshapeOp(value, dst)
        out.result.name_hint = op.result.name_hint
        rewriter.insert([*rebuild.made, out], InsertPoint.before(op))
        rewriter.replace_all_uses_with(op.result, out.result)
        erase_dead(op, rewriter)
        self.folded += 1


def _weight_by_rows(weight: Operation, rows: tuple[int, ...]) -> Operation:
    """`W` (`N x M`) as `A x ... x M`: a reshaped constant or a `rows` reference."""
    if isinstance(weight, graph.ConstantOp):
        values = const_array(weight.result)
        assert values is not None
        return constant_op(values.reshape(*rows, -1), elt_of(weight.result))
    ref = weight_ref(weight)
    assert ref is not None
    t = TensorType(ref.type.element_type, [*rows, ref.shape[-1]])
    return graph.WeightOp.of(replace(ref, type=t, rows=rows))


def _plain_weight(value: SSAValue) -> bool:
    """Whether `value` is a rank-2 constant or a weight not already viewed by heads."""
    owner = value.owner
    if len(shape_of(value)) != 2:
        return False
    if isinstance(owner, graph.ConstantOp):
        return True
    ref = weight_ref(owner) if isinstance(owner, graph.WeightOp) else None
    return ref is not None and not ref.heads and not ref.rows


def _merged_row(op: Operation) -> tuple[graph.MatmulOp, graph.ReshapeOp] | None:
    """
    `op` and the reshape it reads as its row if `op` is an untransposed matmul of that
    (single-use) reshape by a plain weight (`_plain_weight`): a projection of merged heads.
    """
    if not isinstance(op, graph.MatmulOp) or op.transpose_a or op.transpose_b:
        return None
    merge = op.lhs.owner
    if not isinstance(merge, graph.ReshapeOp) or not op.lhs.has_one_use():
        return None
    return (op, merge) if _plain_weight(op.rhs) else None


@dataclass
class _MergedRowFold(RewritePattern):
    """
    A fold of a projection of merged heads (`_merged_row`): `build` makes the ops that
    replace the matmul and its result; the row's reshape and the old weight go if dead.
    """

    folded: int = 0

    def match_and_rewrite(self, root: Operation, rewriter: PatternRewriter) -> None:
        found = _merged_row(root)
        if found is None:
            return
        op, merge = found
        built = self.build(op, merge)
        if built is None:
            return
        made, result = built
        name, old_weight = op.result.name_hint, op.rhs
        rewriter.replace(op, made, [result])
        result.name_hint = name
        erase_dead(merge, rewriter)
        erase_dead(old_weight, rewriter)
        self.folded += 1

    def build(
        self, op: graph.MatmulOp, merge: graph.ReshapeOp
    ) -> tuple[list[Operation], SSAValue] | None:
        raise NotImplementedError


@dataclass
class FoldHeadsIntoRows(_MergedRowFold):
    """
    A one-row projection of heads merged back into one row, `reshape(o)·W` with `o`
    `[.., A, ..., D]`, becomes the sum over the heads of `o` times `W` viewed by heads
    (`A x ... x D x M`): the attention's output projection reads each head where it is.
    """

    def build(
        self, op: graph.MatmulOp, merge: graph.ReshapeOp
    ) -> tuple[list[Operation], SSAValue] | None:
        row, heads = shape_of(op.lhs), shape_of(merge.input)
        dims = _split(row, heads)
        if dims is None:
            return None
        lhs = graph.ReshapeOp(merge.input, [*dims, 1])
        weight = _weight_by_rows(op.rhs.owner, dims)  # pyright: ignore[reportArgumentType]
        # The head dimension outermost, as plmr's own decode program writes it: the mesh
        # splits it over an axis where the product of the heads left it.
        m = len(dims)
        perm = [m - 1, *range(m - 1), m]
        lhs_t = graph.TransposeOp(lhs, perm)
        weight_t = graph.TransposeOp(weight, perm)
        product = graph.MulOp(lhs_t, weight_t)
        total = graph.ReduceOp("sum", product, list(range(m)))
        out = graph.ReshapeOp(total, shape_of(op.result))
        name = op.result.name_hint
        named = (
            (lhs, "row"),
            (weight, "rows"),
            (lhs_t, "heads"),
            (weight_t, "by_dim"),
            (product, "by_head"),
            (total, "sum"),
        )
        for made, suffix in named:
            made.results[0].name_hint = f"{name}_{suffix}" if name else None
        return [lhs, weight, lhs_t, weight_t, product, total, out], out.result


def _rows_split(
    flat: tuple[int, ...], split: tuple[int, ...], moved: tuple[int, ...], perm: list[int]
) -> tuple[int, ...] | None:
    """
    The heads `(A, ..., D)` when `flat` (`[1, ..., L, N]`) is reshaped to `split`
    (`[1, ..., L, A, ..., D]`, the same leading dims) and `perm` moves the rows `L` to just
    before `D` (`moved`: `[1, ..., A, ..., L, D]`); None otherwise.
    """
    lead = len(flat) - 2
    if (
        lead < 0
        or any(d != 1 for d in flat[:lead])
        or tuple(split[: lead + 1]) != flat[:-1]
    ):
        return None
    dims = tuple(split[lead + 1 :])
    if len(dims) < 2 or math.prod(dims) != flat[-1]:
        return None
    want = [*range(lead), *range(lead + 1, len(split) - 1), lead, len(split) - 1]
    if perm != want or len(moved) != len(split):
        return None
    return dims


@dataclass
class FoldHeadsOfRows(RewritePattern):
    """
    A projection of several rows split into heads, `transpose(reshape(x·W))` from
    `[1, L, N]` to `[1, A, ..., L, D]` (a prefill's queries, keys and values), becomes
    the batched product `x·W'` with `W'` one `K x D` weight per head: each head's rows
    are a product of their own, which a per-head nest reads without the others' columns.
    """

    folded: int = 0

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, graph.TransposeOp):
            return
        split = op.input.owner
        if not isinstance(split, graph.ReshapeOp) or not op.input.has_one_use():
            return
        mm = split.input.owner
        if not isinstance(mm, graph.MatmulOp) or not split.input.has_one_use():
            return
        if mm.transpose_a is not None or mm.transpose_b is not None:
            return
        if not _plain_weight(mm.rhs):
            return
        flat = shape_of(mm.result)
        perm = list(op.perm.get_values())
        dims = _rows_split(flat, shape_of(split.result), shape_of(op.result), perm)
        if dims is None or shape_of(mm.lhs)[:-1] != flat[:-1]:
            return
        rows, k = flat[-2], shape_of(mm.lhs)[-1]
        made: list[Operation] = []
        row = mm.lhs
        if shape_of(row) != (*[1] * (len(dims) - 1), rows, k):
            reshape = graph.ReshapeOp(row, [1] * (len(dims) - 1) + [rows, k])
            made.append(reshape)
            row = reshape.result
        weight = _weight_per_head(mm.rhs.owner, dims)  # pyright: ignore[reportArgumentType]
        product = graph.MatmulOp(row, weight)
        product.result.name_hint = mm.result.name_hint
        out = graph.ReshapeOp(product, shape_of(op.result))
        out.result.name_hint = op.result.name_hint
        old_weight = mm.rhs
        rewriter.replace(op, [*made, weight, product, out], [out.result])
        name = mm.result.name_hint
        if made:
            made[0].results[0].name_hint = f"{name}_rows" if name else None
        weight.results[0].name_hint = f"{name}_heads" if name else None
        erase_dead(split, rewriter)
        erase_dead(old_weight, rewriter)
        self.folded += 1


@dataclass
class FoldRowsOfHeads(_MergedRowFold):
    """
    The heads of several rows merged back, `reshape(transpose(o))·W` with `o`
    `[1, A, L, D]` moved to `[1, L, A, D]` then `[1, L, A·D]` (a prefill's attention
    output), becomes the sum over the heads of each head's rows times its rows of `W`
    (`rows [A, D]`): the output projection reads each head where its nest left it.
    """

    def build(
        self, op: graph.MatmulOp, merge: graph.ReshapeOp
    ) -> tuple[list[Operation], SSAValue] | None:
        moved = merge.input.owner
        if not isinstance(moved, graph.TransposeOp) or not merge.input.has_one_use():
            return None
        heads = shape_of(moved.input)
        flat = shape_of(op.lhs)
        perm = list(moved.perm.get_values())
        # The inverse view of FoldHeadsOfRows: `heads` is `[1, A, L, D]`.
        inverse = [perm.index(i) for i in range(len(perm))]
        dims = _rows_split(flat, shape_of(moved.result), heads, inverse)
        if dims is None or len(dims) != 2:
            return None
        a, d = dims
        weight = _weight_by_rows(op.rhs.owner, (a, d))  # pyright: ignore[reportArgumentType]
        product = graph.MatmulOp(moved.input, weight)
        total = graph.ReduceOp("sum", product, [len(heads) - 3])
        name = op.result.name_hint
        for made, suffix in ((weight, "rows"), (product, "by_head")):
            made.results[0].name_hint = f"{name}_{suffix}" if name else None
        new: list[Operation] = [weight, product, total]
        result = total.result
        if shape_of(total.result) != shape_of(op.result):
            out = graph.ReshapeOp(total, shape_of(op.result))
            new.append(out)
            result = out.result
        return new, result


def _flat_shape(value: SSAValue) -> tuple[int, ...] | None:
    """The shape `[1, ..., 1, N]` of the projection `value` comes from, if any."""
    while True:
        owner = value.owner
        if isinstance(owner, graph.MatmulOp):
            shape = shape_of(value)
            return shape if math.prod(shape[:-1]) == 1 else None
        if isinstance(owner, graph.ReshapeOp):
            value = owner.input
        elif isinstance(owner, _UNARY):
            value = owner.operands[0]
        elif isinstance(owner, _BINARY):
            whole = [v for v in owner.operands if shape_of(v) == shape_of(value)]
            if not whole:
                return None
            value = whole[0]
        else:
            return None


@dataclass(frozen=True)
class GraphFoldHeadsPass(ModulePass):
    """
    Folds the split into heads of one-row projections into per-head weights.

    ```mlir
    // before
    %q = graph.matmul %x, %w : (tensor<1x1x8xf32>, tensor<8x8xf32>) -> tensor<1x1x8xf32>
    %s = graph.mul %q, %r : (tensor<1x1x8xf32>, tensor<1x1x1xf32>) -> tensor<1x1x8xf32>
    %h = graph.reshape %s : tensor<1x1x8xf32> -> tensor<1x2x1x4xf32>
    // after (%wh: %w as one 8x4 weight per head)
    %row = graph.reshape %x : tensor<1x1x8xf32> -> tensor<1x1x8xf32>
    %q = graph.matmul %row, %wh : (tensor<1x1x8xf32>, tensor<2x8x4xf32>) -> tensor<2x1x4xf32>
    %s = graph.mul %q, %r : (tensor<2x1x4xf32>, tensor<1x1x1xf32>) -> tensor<2x1x4xf32>
    %h = graph.reshape %s : tensor<2x1x4xf32> -> tensor<1x2x1x4xf32>
    ```
    """

    name = "graph-fold-heads"

    rows: bool = False
    """Also fold projections of several rows (a prefill's). `plmr compile` does so on
    grids of more than 64 PEs, where the heads then run one after the other over all
    PEs (`loop-split-heads`), each reading only its own head's product; on smaller grids
    a prefill's flat Q, K and V merge into one product (`graph-merge-matmuls`)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        count("graph-fold-heads: projections folded", fold_module(op, self.rows))


def fold_module(module: ModuleOp, several_rows: bool = False) -> int:
    """
    Folds every split into heads of a one-row projection in `module`, the last reshape
    of a chain first (a grouping `[Hkv, G]` of the heads after RoPE wins over the plain
    heads before it), and with `several_rows` those of projections of several rows
    (`FoldHeadsOfRows`, `FoldRowsOfHeads`); returns how many.
    """
    pattern = FoldHeads()
    walker = PatternRewriteWalker(pattern, apply_recursively=False, walk_reverse=True)
    walker.rewrite_module(module)
    rows = FoldHeadsIntoRows()
    PatternRewriteWalker(rows, apply_recursively=False).rewrite_module(module)
    if not several_rows:
        return pattern.folded + rows.folded
    of_rows, into_rows = FoldHeadsOfRows(), FoldRowsOfHeads()
    for several in (of_rows, into_rows):
        PatternRewriteWalker(several, apply_recursively=False).rewrite_module(module)
    return pattern.folded + rows.folded + of_rows.folded + into_rows.folded


__all__ = [
    "FoldHeads",
    "FoldHeadsIntoRows",
    "FoldHeadsOfRows",
    "FoldRowsOfHeads",
    "GraphFoldHeadsPass",
    "fold_module",
]
