"""
`graph-fold-rotate-half`: RoPE's `rotate_half` of a projection becomes a projection by
weights folded with the rotation, `rotate_half(x·W) = x·(W·R)`.

Exports write `rotate_half(t)` as `Concat(Neg(t[..., h/2:]), t[..., :h/2])` along the
last axis (`graph-canonicalize` makes it `t·R`, a matmul by the `h x h` signed
permutation; both forms fold), where `t` is a projection `x·W` (or `x·W + b`, whose
bias is rotated too) viewed as heads of `h` (reshapes that keep its last axis in blocks
of `h`, transposes that keep the last axis last). `R` is a signed
permutation of `W`'s columns, so `W·R` is a weight again: the columns of each block of `h`
rotated (`[a, b] -> [-b, a]`). The rotated half becomes one more projection of `x` by a
constant (computed here for inline constants; for weights by reference a `graph.weight
... rotate h`, computed by the runtime from the file), viewed through the same reshapes
and transposes; the slices, negation and concatenation go away. Next to the projection
it reads the same `x` as, so `graph-merge-matmuls` merges both into one matmul.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import PatternRewriter, PatternRewriteWalker, RewritePattern
from xdsl.rewriter import InsertPoint

from plmr.dialects import graph
from plmr.dialects.graph_weights import weight_ref
from plmr.dialects.narrow import expect
from plmr.errors import PassOptionError
from plmr.lowering.rotation import rotation_width
from plmr.passes.dead_ops import erase_dead
from plmr.passes.timing import count
from plmr.runtime.weights import rotate_half
from plmr.values import constant_attr, dense_to_numpy


def _halves(concat: graph.ConcatOp) -> tuple[SSAValue, int] | None:
    """`(t, h)` if `concat` is `Concat(Neg(t[..., h/2:h]), t[..., :h/2])` on the last axis."""
    if len(concat.inputs) != 2:
        return None
    neg, low = concat.inputs[0].owner, concat.inputs[1].owner
    if not isinstance(neg, graph.NegOp) or not isinstance(low, graph.SliceOp):
        return None
    high = neg.input.owner
    if not isinstance(high, graph.SliceOp) or high.input != low.input:
        return None
    source = low.input
    shape = graph.static_shape(source, "input")
    rank = len(shape)
    if concat.axis.value.data % rank != rank - 1 or shape[-1] % 2:
        return None
    h = shape[-1]
    whole = [(0, d) for d in shape[:-1]]
    for s, (lo, hi) in ((low, (0, h // 2)), (high, (h // 2, h))):
        starts, ends = s.starts.get_values(), s.ends.get_values()
        if set(s.steps.get_values()) != {1}:
            return None
        if list(zip(starts, ends, strict=True)) != [*whole, (lo, hi)]:
            return None
    return source, h


def _by_rotation(matmul: graph.MatmulOp) -> tuple[SSAValue, int] | None:
    """`(t, h)` if `matmul` is `t·R` with `R` rotate-half's `h x h` signed permutation."""
    h = rotation_width(matmul)
    return (matmul.lhs, h) if h else None


@dataclass
class _Projection:
    """`view(x·W [+ b])`: the matmul, its bias (None without) and the view, in order."""

    matmul: graph.MatmulOp
    bias: graph.AddOp | None
    view: list[Operation]


def _foldable(value: SSAValue, h: int, rank: int) -> bool:
    """Whether `value` is a constant or plain weight of rank `rank`, last axis in blocks of `h`."""
    owner = value.owner
    if not isinstance(owner, graph.ConstantOp | graph.WeightOp):
        return False
    shape = graph.static_shape(value, "weight")
    if len(shape) != rank or shape[-1] % h:
        return False
    ref = weight_ref(owner)
    return ref is None or not (ref.rotate or ref.parts or ref.heads or ref.rows)


def _projection(value: SSAValue, h: int) -> _Projection | None:
    """
    The projection `value` views as heads of `h` (through reshapes and transposes),
    if its weight (and bias, if any) is a constant or weight with its last axis in
    blocks of `h`.
    """
    view: list[Operation] = []
    while not isinstance(value.owner, graph.MatmulOp | graph.AddOp):
        op = value.owner
        if isinstance(op, graph.TransposeOp):
            perm = op.perm.get_values()
            if perm[-1] != len(perm) - 1:
                return None
        elif isinstance(op, graph.ReshapeOp):
            shape = graph.static_shape(op.input, "input")
            out = graph.static_shape(op.result, "result")
            if not shape or not out or shape[-1] % h or out[-1] % h:
                return None
        else:
            return None
        view.append(op)
        value = op.input
    bias: graph.AddOp | None = None
    if isinstance(value.owner, graph.AddOp):
        bias = value.owner
        # x·W + b (Qwen2's biases): b is rotated with W.
        matmul_side = [
            v for v in (bias.lhs, bias.rhs) if isinstance(v.owner, graph.MatmulOp)
        ]
        if len(matmul_side) != 1:
            return None
        other = bias.rhs if matmul_side[0] is bias.lhs else bias.lhs
        if not _foldable(other, h, 1) or graph.static_shape(
            bias.result, "result"
        ) != graph.static_shape(matmul_side[0], "result"):
            return None
        value = matmul_side[0]
    matmul = expect(
        value.owner, graph.MatmulOp, "the producer of a folded rotation's input"
    )
    if matmul.transpose_b is not None or not _foldable(matmul.rhs, h, 2):
        return None
    return _Projection(matmul, bias, view[::-1])


def _rotated(weight: Operation, h: int) -> Operation:
    # The weight and R are both exact: W·R only moves and negates W's values.
    """The weight with each block of `h` columns rotated: a constant, or a reference."""
    if isinstance(weight, graph.ConstantOp):
        values = rotate_half(dense_to_numpy(weight.value), h)
        return graph.ConstantOp(constant_attr(values, graph.element_type(weight.result)))
    ref = weight_ref(weight)
    assert ref is not None
    return graph.WeightOp.of(replace(ref, rotate=h))


def _rows(matmul: graph.MatmulOp) -> int:
    """The rows of a projection: its input's elements per column of its weight."""
    return math.prod(graph.static_shape(matmul.lhs, "lhs")[:-1])


@dataclass
class FoldRotateHalf(RewritePattern):
    """
    Folds the `rotate_half` of a projection that a concat or a matmul by R computes;
    with `max_rows`, only of a projection of at most that many rows.
    """

    max_rows: int = 0
    """0: every projection."""
    folded: int = 0
    """How many rotations this pattern folded."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if isinstance(op, graph.ConcatOp):
            halves = _halves(op)
        elif isinstance(op, graph.MatmulOp):
            halves = _by_rotation(op)
        else:
            return
        if halves is None:
            return
        source, h = halves
        found = _projection(source, h)
        if found is None:
            return
        matmul = found.matmul
        if self.max_rows and _rows(matmul) > self.max_rows:
            return
        weight = _rotated(matmul.rhs.owner, h)  # pyright: ignore[reportArgumentType]
        new = graph.MatmulOp(matmul.lhs, weight, matmul.transpose_a is not None)
        new.result.name_hint = f"{op.results[0].name_hint or 'rot'}_proj"
        made: list[Operation] = [weight, new]
        value = new.result
        if found.bias is not None:
            b = found.bias
            other = b.rhs if b.lhs == matmul.result else b.lhs
            bias = _rotated(other.owner, h)  # pyright: ignore[reportArgumentType]
            add = graph.AddOp(value, bias)
            made += [bias, add]
            value = add.result
        for link in found.view:
            clone = link.clone(value_mapper={link.operands[0]: value})
            made.append(clone)
            value = clone.results[0]
        value.name_hint = op.results[0].name_hint
        rewriter.insert(made, InsertPoint.before(op))
        rewriter.replace_all_uses_with(op.results[0], value)
        erase_dead(op, rewriter)
        self.folded += 1


@dataclass(frozen=True)
class GraphFoldRotateHalfPass(ModulePass):
    """
    Folds RoPE's `rotate_half` of a projection into the projection's weights.

    ```mlir
    // before
    %q = graph.matmul %x, %w : (tensor<1x8xf32>, tensor<8x8xf32>) -> tensor<1x8xf32>
    %lo = graph.slice %q starts = [0, 0] ends = [1, 4] steps = [1, 1] : tensor<1x8xf32> -> tensor<1x4xf32>
    %hi = graph.slice %q starts = [0, 4] ends = [1, 8] steps = [1, 1] : tensor<1x8xf32> -> tensor<1x4xf32>
    %n = graph.neg %hi : tensor<1x4xf32>
    %r = graph.concat %n, %lo axis = 1 : (tensor<1x4xf32>, tensor<1x4xf32>) -> tensor<1x8xf32>
    // after (W·R: the columns of %w rotated, a constant)
    %wr = graph.constant dense<...> : tensor<8x8xf32>
    %r = graph.matmul %x, %wr : (tensor<1x8xf32>, tensor<8x8xf32>) -> tensor<1x8xf32>
    ```

    With `max-rows = N` (N > 0), only the rotations of projections of at most N rows
    fold (a decode step's): the folded rotation is one more projection, whose cost
    grows with the rows, while a prefill's rotation is a local permutation of its
    rows wherever a head's dimension is whole on a PE. 0 (the default) folds every one.
    """

    name = "graph-fold-rotate-half"

    max_rows: int = 0

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.max_rows < 0:
            raise PassOptionError(
                f"graph-fold-rotate-half: max-rows must be 0 (every projection) or "
                f"positive, got {self.max_rows}"
            )
        count("graph-fold-rotate-half: rotations folded", fold_module(op, self.max_rows))


def fold_module(module: ModuleOp, max_rows: int = 0) -> int:
    """
    Folds every `rotate_half` of a projection in `module` (of at most `max_rows` rows,
    if positive), in one walk (the ops a fold makes are not visited again); returns
    how many.
    """
    pattern = FoldRotateHalf(max_rows)
    PatternRewriteWalker(pattern, apply_recursively=False).rewrite_module(module)
    return pattern.folded
