"""The options of `plmr compile` and of the `plmr-compile` pass (`passes/pipeline.py`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CompileOptions:
    """What `plmr compile` and the `plmr-compile` pass take."""

    grid: tuple[int, int] = (4, 4)
    device: str = "wse2"
    gemm: str = "meshgemm"
    gemv: str = "ktree"
    k: int = 2
    groups: int = 0
    tile_sizes: tuple[int, int] | None = None
    nest_tile_sizes: tuple[tuple[str, int, int], ...] = ()
    """Per-nest blockings (result name, P, R), applied over `tile_sizes`."""
    fit_tiles: bool = False
    """Shrink blocks to the largest divisor of a dimension instead of failing."""
    substitute: bool = True
    alpha: float = 1.05
    eliminate_transposes: bool = True
    defer_norm_scale: bool = True
    """Scale by each RMSNorm's inverse RMS after the matmul that reads it (graph-defer-norm-scale)."""
    fold_rotate_half: bool = True
    """Fold RoPE's rotate_half of a projection into its weights (graph-fold-rotate-half)."""
    fold_repeat_kv: bool = True
    """GQA's queries regrouped against the un-repeated K/V heads (graph-fold-repeat-kv)."""
    fold_heads: bool = True
    """A one-row projection split into heads computes them with a weight per head
    (graph-fold-heads)."""
    decode_rows: int = 1
    """Queries and norms of at most this many rows per head are compiled as a decode
    step's: GQA's groups regrouped (graph-fold-repeat-kv) and the norms' scales deferred
    (graph-defer-norm-scale). A k-token decode step (speculative decoding's verification)
    sets k; a prefill's many rows are blocked better without them."""
    merge_matmuls: bool = True
    """One matmul for the projections of one input (graph-merge-matmuls), of products of
    at least `MERGE_MIN_ROWS` rows."""
    chunks: int = 4
    budget: int = 100
    engine: str = "eqsat"
    """The search of taso-substitute: `backtrack` (TASO) or `eqsat` (equality saturation)."""
    saturation_nodes: int = 20_000
    """`eqsat`: e-nodes at which a stage's saturation stops (limits on work, never on
    time: the graph chosen does not depend on the machine)."""
    extraction_nodes: int = 1_000
    """`eqsat`: branch-and-bound nodes of each ILP extraction (0: greedy only)."""
    fuse: str = "auto"
    route: bool = True
    relay: bool = False
    pack_allreduces: bool = True
    """One allreduce for independent sibling nests (mesh-pack-allreduces)."""
    fuse_softmax: bool = True
    """One softmax allreduce for a split-K softmax's max and sums (mesh-fuse-softmax)."""
    shape_trees: bool = True
    """With `gemv = auto`: each line's K-trees take the first-phase groups that time
    fastest on it, within the colors (mesh-shape-trees)."""
    outline_layers: bool = False
    """Compile repeated layers once (graph-outline-layers, `passes/layer_programs.py`):
    the result is a sequence of program runs (`mesh.run`) when layers repeat."""
    layers: int = 0
    """The number of repeated layers required (0: whatever repeats)."""
    layer_min_ops: int = 8
    """The smallest repeated subgraph compiled once."""
    kv_state: bool = False
    """Keep a decode step's KV caches on the wafer (graph-kv-state): its past/present
    pairs, found by name or given in `state`, become state; the step is then compiled
    whole (its layers are not outlined: each layer keeps caches of its own)."""
    state: str = ""
    """`IN=OUT,IN=OUT`: the caches of `kv_state` (default: found by name)."""
    position: str = "position_ids"
    """`kv_state`: the decode step's position input."""
    mask: str = "attention_mask"
    """`kv_state`: the attention mask input, computed on the wafer from the position."""
    rest_weights: bool | None = None
    """Model weights a nest reads replicated along an axis are placed split along it and
    gathered in the nest (`convert-tile-to-mesh{rest-weights}`); None: on grids of more
    than `LARGE_GRID_PES` PEs."""


__all__ = ["CompileOptions"]
