"""
`convert-tile-to-mesh`: 2D mesh partitioning of a whole tile-level program.

Every function becomes a `mesh.program` on a P×Q grid. Each top-level tile nest (a chain
of `parallel` `tile.for` loops around a block body) becomes one `mesh.spmd`:

- **Parallel loops → mesh axes.** Up to two parallel loops are mapped to `y` and `x`; a
  loop of T blocks can go to an axis of n PEs when n divides T, and each PE then runs
  the T/n blocks of its contiguous share. The nest's outputs are distributed accordingly
  (`#mesh.layout<[y, x]>` for a row × column output), unmapped dimensions stay whole.
- **Reductions → allreduces or shifts.** The main reduction loop of the block body
  becomes either
  - an **allreduce** along a free axis (its range split over the axis, each PE reducing
    its share, then `mesh.allreduce` with the `gemv` algorithm, K-tree by default) —
    WaferLLM's MeshGEMV, possible when every accumulator is combined by a plain
    `add` / `max` / `min`; or
  - a **merge** along a free axis, for a rolling update (FlashAttention's running
    maximum and the sums it repairs by `exp(m − m')`): each PE runs the update over its
    share, then the PEs' partial results merge by Neptune's split-K repair — a `max`
    allreduce of the maxima, a rescaling by `exp(m_p − M)`, `sum` allreduces
    (`rolling_merge`). Prefill attention so splits its queries over one axis and its
    keys over the other, and no PE repeats another's work; or
  - **rotation**: the operands indexed by the reduction are cut into chunks that
    circulate on rings — along `x` for operands that follow the row loop, along `y` for
    those that follow the column loop — and every step combines one chunk (any combine,
    e.g. FlashAttention's rolling update). With both kinds present this is Cannon's
    algorithm with lcm(P, Q) chunks placed pre-aligned (skewed); `gemm = meshgemm` uses
    WaferLLM's interleaved rings (every step ≤ 2 hops), `cannon` a torus, `summa`
    broadcasts the owners' chunks instead of shifting. With `fit_tiles`
    (`plmr compile --fit-tiles`) a reduction whose blocks do not cut into the chunks
    evenly is cut into chunks of `ceil(blocks / chunks)` blocks, the last ones padded,
    and every step combines only the blocks of its chunk before the reduction's end
    (a 4,096-wide reduction on 480x480: 480 chunks of 9); the parallel loops may then
    split unevenly too.
- **Bands: two loops on one axis.** A loop of T blocks (the KV heads, blocks of 1 from
  `convert-loop-to-tile{bands}`) can go over the bands of `W = n // T` PEs of an axis
  (at least 4; `#mesh.layout<[y, -, -, y], band y 52>`), with a second loop blocked
  within each band (the head dimension, 3 elements per PE): PE `p` works on block
  `p // W` of the first and block `p % W` of the second, the PEs past the last band on
  padding (guarded like an uneven split). The second loop may be the reduction, reduced
  within each band (`mesh.allreduce ... segment = W`, no multicast: every PE of the
  band needs the result — the scores of decode attention); both may be reductions (the
  output projection over heads and head dimension), reduced along the whole axis; with
  no second loop every PE of a band holds its band's blocks (the softmax over positions
  on the other axis, when its input is banded). Layout changes from a banded value
  gather the bands first (each band's first PE, or every PE with an inner dim, puts its
  block in place and a sum along the axis delivers them).
- **Layouts.** Operands are placed at scatter time in the layout the nest reads them in,
  so weights read transposed (`tile.dot ... transpose_b`) are placed pre-transposed
  and no transpose ever runs on the mesh. When a value produced by an earlier nest is
  needed in another layout, the change is explicit at the head of the consumer: a dim
  split over one axis and wanted over the other comes from the diagonal PE of each line
  (a one-block sum); an operand Cannon needs pre-skewed, already split one chunk per PE,
  passes once round the ring and each PE keeps its chunk; otherwise an all-gather along
  the axis (an allreduce of the zero-padded blocks), then each PE takes its part; a dim
  wanted whole is gathered first when its axis is wanted by another dim, which then
  moves from the diagonal (`[y, x]` to `[x, -]` holds one line of rows, never the whole
  tensor). A tensor one nest reads indexed by different loops (FlashAttention's RoPE
  tables at the query and at the key rows, the query and key columns of merged
  projections) is read through one view per indexing (`views`), each placed on its
  own in the layout its loads need, rather than held whole by every PE. The
  mapping of each nest is chosen by a cost estimate (compute per PE,
  messages, layout changes) among the feasible ones, which is what makes consecutive
  GEMVs reduce along alternating axes, as WaferLLM does.
- **SRAM.** The blocks each PE holds for a nest must fit the device's SRAM; if no
  mapping fits, the pass fails with the bytes needed and available.

Element-wise and row-wise work (softmax, norms, activations) runs where its data lives:
it is part of a nest's block body and runs on the PE that owns the block.

The package, by role: `analysis` (options; what a nest reads, writes and loops over),
`planning` (the feasible mappings of a nest, ranked), `cost` (the planner's cycle
estimate), `emit` (one `mesh.spmd` per nest), `relayout` (layout changes at the head of
a nest), `views` (one view per indexing of a tensor a nest reads), `builders` (small IR
helpers), `program` (the pass: functions to mesh programs).
"""

from plmr.lowering.tile_to_mesh.analysis import (
    GEMM_CHOICES,
    GEMV_CHOICES,
    Layout,
    Nest,
    Options,
    analyze_nest,
)
from plmr.lowering.tile_to_mesh.mapping import Mapping
from plmr.lowering.tile_to_mesh.planning import NestPlan
from plmr.lowering.tile_to_mesh.program import (
    ConvertTileToMeshPass,
    OverBound,
    RestRefusal,
    lower_module,
    parse_options,
)

__all__ = [
    "GEMM_CHOICES",
    "GEMV_CHOICES",
    "ConvertTileToMeshPass",
    "Layout",
    "Mapping",
    "Nest",
    "NestPlan",
    "Options",
    "OverBound",
    "RestRefusal",
    "analyze_nest",
    "lower_module",
    "parse_options",
]
