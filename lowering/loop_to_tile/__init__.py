"""
`convert-loop-to-tile`: blocks `loop` nests into `tile` programs.

Every top-level nest becomes `tile.for` loops over blocks of its iteration space: the
parallel dimensions outside (`parallel` loops, one output block per iteration), the
reduction dimensions inside (a `reduction` loop carrying the accumulators as blocks).
The body is evaluated once per block: a `loop.read` of a tensor becomes a `tile.load` of
the block it touches, a scalar op a `tile.map` on blocks (broadcasting along the
dimensions a value does not depend on), and the combining op of a reduction sums (or
maxes) the block along the reduction dimensions — with `tile.dot` when the term is a
product that contracts (`q·kᵀ`, `p·v`). Results are stored into fresh tensors
(`tensor.empty`) in global memory.

Which dimensions are blocked (`tile-sizes = P,R`):

- the innermost reduction dimension gets `R`;
- a parallel dimension gets `P` when some large tensor the nest reads does not depend
  on it (blocking it reuses that tensor: the query rows of attention, both output
  dimensions of a matmul); a nest without such a dimension blocks its innermost one
  (two, without reductions);
- with `fit` and a grid (`fit-grid`), a dimension that occupies fewer than an eighth of
  every axis is kept whole (8 KV heads on 420 PEs); with `bands` the outermost such
  parallel dimension is cut in blocks of 1 instead when an axis has at least 4 PEs per
  block (a loop the mesh partitioner can put over bands of PEs, its head dimension
  within each band); `plmr compile` blocks both ways and keeps the lower estimate;
- dimensions of nested nests (a head dimension) are kept whole;
- a dimension an index uses other than as `dim + offset` is not blocked; a padded read
  at such an index (a strided or dilated convolution window) is then a padded load of
  one element at the computed offset along that axis, and a padded window along the
  axes its other indices shift (`d - 8`: the second part of a concatenation, the
  features partial rotary embeddings pass through, read at a KV head `h / 2`);
- a block offset known at compile time is a constant (a nest of one-element dimensions
  has no loops, and its loads are straight-line code at the function's top).

A block size larger than the extent is clamped; one that does not divide the extent is
an error. A fused nest whose accumulators are updated as `h(acc, r, r') ⊕ g` (Neptune's
rolling update) is blocked along its reduction only after proving, with sympy, that `h`
composes and distributes over `⊕` (`repair.check_laws`); the block update is then
`acc' = h(acc, r, r'_block) ⊕ Σ_block g` — FlashAttention's per-KV-block update.
Otherwise its reduction runs one element at a time. Over reduction dimensions of one
element the body runs once from the initial value, so any yield is a map of it (a rank-0
map is such a nest, its body ignoring the accumulator). A consumer map nest that reads only
one nest's results at its own points (attention's final division) is computed in that
nest's epilogue, and the results nobody else reads are never stored. A nest the blocker
cannot express (data-dependent indices) stays a `loop.nest`, with a
`loop.remark` saying why.

The package, by role: `blocks` (dimensions, blocks, the plan of a nest), `analysis` (what
is blocked, and how reductions combine), `codegen` (the tile program of a nest), `program`
(the pass).
"""

from plmr.lowering.loop_to_tile.analysis import WHOLE_BLOCKS
from plmr.lowering.loop_to_tile.blocks import Blk, Dim, Untileable
from plmr.lowering.loop_to_tile.program import (
    ConvertLoopToTilePass,
    lower_function,
    may_band,
    parse_nest_sizes,
)

__all__ = [
    "WHOLE_BLOCKS",
    "Blk",
    "ConvertLoopToTilePass",
    "Dim",
    "Untileable",
    "lower_function",
    "may_band",
    "parse_nest_sizes",
]
