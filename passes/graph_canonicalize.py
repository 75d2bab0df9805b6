"""
`graph-canonicalize`: recognise what exporters spell out op by op, at the graph level.

`torch.onnx.export` writes transformer idioms one ONNX op at a time; this pass turns
them into the forms plmr compiles well, so an imported model and hand-written `.mlir`
compile alike. Its patterns (run greedily to a fixed point), by module:

- `canonicalize.simplify`: drop no-op casts, reshapes, expands, slices, pads and
  `where`s with a constant condition; compose reshapes; turn transposes of unit
  dimensions into reshapes; fold ops on small constants;
- `canonicalize.norms`: RMSNorm and LayerNorm spelled out (`pow`/`mean`/`add`/`sqrt`/
  `reciprocal`/`div`/`mul`, with or without the weight and bias) -> `graph.rmsnorm` /
  `graph.layernorm`;
- `canonicalize.activations`: `x · sigmoid(x)` -> `graph.silu`, GELU's erf and tanh
  spellings -> `graph.gelu`;
- `canonicalize.attention`: SDPA's NaN guard `where(isnan(p), 0, p)` -> `p` when `p`
  provably holds no NaN; K/V heads repeated for grouped-query attention -> a matmul that
  broadcasts the un-repeated K/V over the query heads of each group (option
  `unrepeat-kv`, on by default; `plmr compile` turns it off, see `attention`);
- `canonicalize.rope`: RoPE's `rotate_half` -> a matmul with a constant signed
  permutation;
- `canonicalize.gather`: a `graph.gather` by constant indices forming a range (a scalar
  index, the identity, a strided or reversed range) -> `graph.slice` + `graph.reshape`;
- from `transpose-elim`: composing transposes, folding transposes of constants, sinking
  transposes below unary ops and absorbing last-two-dimension transposes into
  `graph.matmul` (so that the `Kᵀ` of repeated heads reaches the matmul). The rest of the transpose work (splitting and merging
  heads) stays in `transpose-elim`, which `plmr compile` runs next.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriteWalker,
    RewritePattern,
)

from plmr.passes.canonicalize.activations import ACTIVATION_PATTERNS
from plmr.passes.canonicalize.attention import ATTENTION_PATTERNS, GROUPED_KV_PATTERNS
from plmr.passes.canonicalize.gather import GATHER_PATTERNS
from plmr.passes.canonicalize.norms import NORM_PATTERNS
from plmr.passes.canonicalize.rope import ROPE_PATTERNS
from plmr.passes.canonicalize.simplify import SIMPLIFY_PATTERNS
from plmr.passes.transpose_elim import (
    AbsorbIntoMatmul,
    ComposeTransposes,
    FoldConstantTranspose,
    SinkThroughUnary,
)

CANONICALIZE_PATTERNS: tuple[type[RewritePattern], ...] = (
    *SIMPLIFY_PATTERNS,
    ComposeTransposes,
    FoldConstantTranspose,
    AbsorbIntoMatmul,
    SinkThroughUnary,
    *NORM_PATTERNS,
    *ACTIVATION_PATTERNS,
    *ATTENTION_PATTERNS,
    *ROPE_PATTERNS,
    *GATHER_PATTERNS,
)


def canonicalize(module: ModuleOp, unrepeat_kv: bool = True) -> None:
    """Runs every `graph-canonicalize` pattern to a fixed point."""
    grouped = GROUPED_KV_PATTERNS if unrepeat_kv else ()
    patterns = [p() for p in (*CANONICALIZE_PATTERNS, *grouped)]
    PatternRewriteWalker(GreedyRewritePatternApplier(patterns)).rewrite_module(module)


@dataclass(frozen=True)
class GraphCanonicalizePass(ModulePass):
    """
    Recognises RMSNorm, LayerNorm, SiLU, GELU, SDPA's NaN guard, grouped-query K/V
    repetition (`unrepeat-kv`) and RoPE's `rotate_half` in exported graphs, and removes
    no-ops.

    ```mlir
    // before
    %sq = graph.mul %x, %x : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
    %ms = graph.reduce mean %sq axes = [-1] keepdims : tensor<4x16xf32> -> tensor<4x1xf32>
    %v = graph.add %ms, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
    %r = graph.sqrt %v : tensor<4x1xf32>
    %i = graph.reciprocal %r : tensor<4x1xf32>
    %n = graph.mul %x, %i : (tensor<4x16xf32>, tensor<4x1xf32>) -> tensor<4x16xf32>
    %y = graph.mul %w, %n : (tensor<16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
    // after
    %y = graph.rmsnorm %x, %w epsilon = 1.000000e-06 : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
    ```
    """

    name = "graph-canonicalize"

    unrepeat_kv: bool = True
    """Rewrite grouped-query attention into the grouped shape (see `attention`)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        canonicalize(op, self.unrepeat_kv)
