"""
WaferLLM's shift-based KV cache: a capacity model and the mesh program of one append.

Layout (WaferLLM decode, §4.2–4.3). A pipeline stage is a P×Q grid of PEs that holds a
contiguous group of transformer layers. Every weight matrix of those layers is
partitioned over both mesh axes (each PE keeps a ⌈rows/P⌉×⌈cols/Q⌉ block, fp16). The KV
cache of a layer is a `tokens × kv_dim` matrix per K and per V: **tokens are distributed
over the P rows** of PEs and **kv_dim over the Q columns**, the orientation of WaferLLM's
decode, where `scores = q·Kᵀ` reduces the head dimension along x. A token therefore costs
`layers_in_stage × 2 (K and V) × ⌈kv_dim/Q⌉ × 2 bytes` on each PE of the row holding it.
Whatever SRAM a PE has left after its weights and a small activation workspace holds
`slots = ⌊free / bytes_per_token⌋` tokens.

- `concat` (PagedAttention-style): every new token is appended to the last row of PEs,
  so the decode stops when that row is full: `slots` tokens.
- `shift`: when a token arrives, rows pass their oldest entry one row up (1 hop, all rows
  in parallel) and the new one enters at the bottom row, which keeps the per-row counts
  within 1 of each other: the decode stops only when every row is full, `P × slots`
  tokens.

Pipelining. A model whose weights exceed the grid's SRAM is split into the fewest
pipeline stages (WaferLLM pipelines layers for lack of SRAM) whose layers, split as
evenly as possible, fit with room for at least one token (`plmr.target.stages.
split_stages`, the rule `plmr compile` splits a layered program by); each stage is its own P×Q grid
and keeps the KV cache of its own layers, so the capacity is that of the fullest stage.
The LM head (`vocab × dim`, plus the final norm) sits on the last stage, or on a stage of
its own (no KV cache) if it does not fit there; the token embedding is a lookup done by
the host and takes no SRAM. The prompt's own KV entries are not counted (the capacity is
the longest decode output after an empty context), and transient buffers other than the
activation workspace (e.g. a layer's attention scores) are neglected.

`kv_append` builds the mesh program of one append of a K (or V) row to one layer's
distributed cache: see its docstring.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.builder import ImplicitBuilder
from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType, IntegerAttr, ModuleOp, TensorType, f32
from xdsl.ir import Attribute, Block, Region

from plmr.dialects import mesh, tile
from plmr.errors import PlmrError
from plmr.lowering.kernels import Kernel
from plmr.target.device import Device, get_device
from plmr.target.stages import even_groups, split_stages

SCHEMES = ("shift", "concat")

FP16_BYTES = 2


@dataclass(frozen=True)
class ModelConfig:
    """The sizes of a decoder-only transformer (LLaMA family)."""

    name: str
    dim: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    ffn_dim: int
    vocab: int

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_heads

    @property
    def kv_dim(self) -> int:
        """Width of one token's K (or V) vector: all KV heads of a layer."""
        return self.n_kv_heads * self.head_dim

    def check(self) -> None:
        """Raises a PlmrError if a size is not positive or the heads do not divide."""
        for field in ("dim", "n_layers", "n_heads", "n_kv_heads", "ffn_dim", "vocab"):
            if getattr(self, field) <= 0:
                raise PlmrError(f"model {self.name}: {field} must be positive")
        if self.dim % self.n_heads or self.n_heads % self.n_kv_heads:
            raise PlmrError(
                f"model {self.name}: n_heads ({self.n_heads}) must divide dim "
                f"({self.dim}) and be a multiple of n_kv_heads ({self.n_kv_heads})"
            )


LLAMA3_8B = ModelConfig("llama3-8b", 4096, 32, 32, 8, 14336, 128256)
LLAMA2_13B = ModelConfig("llama2-13b", 5120, 40, 40, 40, 13824, 32000)

MODELS: dict[str, ModelConfig] = {m.name: m for m in (LLAMA3_8B, LLAMA2_13B)}


def get_model(name: str) -> ModelConfig:
    """A model preset by name (`llama3-8b`, `llama2-13b`)."""
    model = MODELS.get(name.strip().lower())
    if model is None:
        raise PlmrError(f"unknown model '{name}'; presets: {', '.join(MODELS)}")
    return model


@dataclass(frozen=True)
class KvCapacity:
    """The result of `kv_capacity`; byte counts are per PE of the limiting stage."""

    model: str
    grid: tuple[int, int]
    scheme: str
    max_tokens: int
    """The longest decode output (tokens) before some PE's SRAM overflows."""
    slots_per_pe: int
    """Tokens one PE row can hold (the concat capacity)."""
    stages: int
    """Pipeline stages (P×Q grids), including a separate LM-head stage if any."""
    layers_per_stage: int
    """Layers of the fullest stage, the one that limits the capacity."""
    weight_bytes_per_pe: int
    """Weights of the limiting stage on one PE."""
    workspace_bytes_per_pe: int
    """Activation buffers on one PE."""
    free_bytes_per_pe: int
    """SRAM left for KV entries on one PE of the limiting stage."""
    bytes_per_token_per_pe: int
    """K and V of one token (all layers of the stage) on one PE of its row."""
    sram_bytes: int
    stage_layers: tuple[int, ...] = ()
    """Layers of each stage in pipeline order; a last 0 is the LM head's own stage."""
    layer_weight_bytes_per_pe: int = 0
    """One layer's weights on one PE."""
    head_weight_bytes_per_pe: int = 0
    """The LM head's and the final norm's weights on one PE (on the last stage)."""
    kv_bytes_per_layer_token_per_pe: int = 0
    """K and V of one token of one layer on one PE of its row."""

    def stage_bytes_per_pe(self, tokens: int) -> list[int]:
        """
        SRAM each stage uses on one PE with a `tokens`-token cache (shift: spread over
        the P rows): weights, workspace and its layers' KV entries.
        """
        p = self.grid[0]
        per_pe = math.ceil(tokens / p) if self.scheme == "shift" else tokens
        out: list[int] = []
        for i, layers in enumerate(self.stage_layers):
            head = self.head_weight_bytes_per_pe if i == len(self.stage_layers) - 1 else 0
            out.append(
                layers * self.layer_weight_bytes_per_pe
                + head
                + self.workspace_bytes_per_pe
                + layers * per_pe * self.kv_bytes_per_layer_token_per_pe
            )
        return out


def _blk(rows: int, cols: int, grid: tuple[int, int]) -> int:
    """Elements per PE of a rows×cols matrix partitioned over a P×Q grid."""
    return math.ceil(rows / grid[0]) * math.ceil(cols / grid[1])


def layer_weight_elems(model: ModelConfig, grid: tuple[int, int]) -> int:
    """fp16 weight elements of one transformer layer on one PE (2D-partitioned)."""
    d, kv, f = model.dim, model.kv_dim, model.ffn_dim
    attention = 2 * _blk(d, d, grid) + 2 * _blk(d, kv, grid)  # W_Q, W_O; W_K, W_V
    ffn = 2 * _blk(d, f, grid) + _blk(f, d, grid)  # W_gate, W_up; W_down
    norms = 2 * math.ceil(d / grid[0])  # RMSNorm weights, replicated along x
    return attention + ffn + norms


def head_weight_elems(model: ModelConfig, grid: tuple[int, int]) -> int:
    """fp16 elements of the LM head and the final norm on one PE."""
    return _blk(model.dim, model.vocab, grid) + math.ceil(model.dim / grid[0])


def workspace_elems(model: ModelConfig, grid: tuple[int, int]) -> int:
    """
    Activation buffers of one PE: the embedding vector is split over the P rows (and
    replicated along x): x, the residual, q and the attention output (dim each), the new
    k and v (kv_dim each), gate and up (ffn each), and one PE's share of the logits.
    """
    p, q = grid
    d, kv, f = model.dim, model.kv_dim, model.ffn_dim
    return (
        4 * math.ceil(d / p)
        + 2 * math.ceil(kv / p)
        + 2 * math.ceil(f / p)
        + math.ceil(model.vocab / q)
    )


def kv_elems_per_token(model: ModelConfig, grid: tuple[int, int]) -> int:
    """fp16 elements of one token's K and V of one layer on one PE of its row."""
    return 2 * math.ceil(model.kv_dim / grid[1])


def kv_capacity(
    model: ModelConfig | str,
    grid: tuple[int, int],
    device: Device | str,
    scheme: str,
    stages: int | None = None,
) -> KvCapacity:
    """
    The longest decode (tokens in the KV cache) before some PE's SRAM overflows, for the
    `shift` or `concat` KV cache on P×Q grids of `device` (see the module docstring).

    `stages` fixes the number of pipeline stages that hold layers (default: the fewest
    that fit). Raises a PlmrError if the scheme, model, grid or stage count is bad, or if
    the layers (or the LM head alone) do not fit a PE.
    """
    if scheme not in SCHEMES:
        raise PlmrError(f"unknown KV-cache scheme '{scheme}' ({', '.join(SCHEMES)})")
    cfg = get_model(model) if isinstance(model, str) else model
    cfg.check()
    dev = get_device(device) if isinstance(device, str) else device
    p, q = grid
    if p <= 0 or q <= 0:
        raise PlmrError(f"grid must be positive, got {p}x{q}")
    if p > dev.height or q > dev.width:
        raise PlmrError(
            f"a {p}x{q} grid does not fit {dev.name} ({dev.height}x{dev.width} PEs)"
        )
    elem = FP16_BYTES
    sram = dev.sram_bytes
    layer_w = layer_weight_elems(cfg, grid) * elem
    head_w = head_weight_elems(cfg, grid) * elem
    work = workspace_elems(cfg, grid) * elem
    per_layer_token = kv_elems_per_token(cfg, grid) * elem

    def slots(layers: int, weights: int) -> int:
        return max(0, (sram - work - weights) // (layers * per_layer_token))

    if stages is not None and not 1 <= stages <= cfg.n_layers:
        raise PlmrError(
            f"{cfg.name}: stages must be between 1 and its {cfg.n_layers} layers, got "
            f"{stages}"
        )
    if stages is not None:
        n_stages = stages
    elif work + layer_w + per_layer_token <= sram:
        # The fewest stages whose largest group fits with room for a token: the rule
        # `plmr compile` splits a layered program by (`plmr.target.stages`).
        n_stages = len(
            split_stages(cfg.n_layers, layer_w + per_layer_token, work, sram, cfg.name)
        )
    else:
        n_stages = cfg.n_layers  # refused below: the LM head, or one layer
    groups = list(even_groups(cfg.n_layers, n_stages))
    # The first group is the largest; the last one also carries the LM head unless the
    # head needs a stage of its own.
    last = groups[-1]
    separate_head = slots(last, last * layer_w + head_w) < 1
    if separate_head and work + head_w > sram:
        raise PlmrError(
            f"{cfg.name}: the LM head alone needs {work + head_w} B per PE on a "
            f"{p}x{q} grid, but {dev.name} has {sram} B; use a larger grid"
        )
    candidates = [(n, n * layer_w) for n in groups[:-1]]
    candidates.append((last, last * layer_w + (0 if separate_head else head_w)))
    layers, weights = min(candidates, key=lambda c: slots(*c))
    per_pe = slots(layers, weights)
    if per_pe < 1 and stages is not None:
        raise PlmrError(
            f"{cfg.name}: {stages} pipeline stage(s) of {math.ceil(cfg.n_layers / stages)} "
            f"layers leave no room for a token on a {p}x{q} grid of {dev.name} "
            f"({sram} B per PE); use more stages or a larger grid"
        )
    if per_pe < 1:
        raise PlmrError(
            f"{cfg.name}: one layer needs {layer_w + work + per_layer_token} B per PE "
            f"(weights, workspace and one token) on a {p}x{q} grid, but {dev.name} has "
            f"{sram} B; use a larger grid"
        )
    return KvCapacity(
        model=cfg.name,
        grid=(p, q),
        scheme=scheme,
        max_tokens=per_pe * p if scheme == "shift" else per_pe,
        slots_per_pe=per_pe,
        stages=n_stages + (1 if separate_head else 0),
        layers_per_stage=layers,
        weight_bytes_per_pe=weights,
        workspace_bytes_per_pe=work,
        free_bytes_per_pe=sram - work - weights,
        bytes_per_token_per_pe=layers * per_layer_token,
        sram_bytes=sram,
        stage_layers=tuple(groups) + ((0,) if separate_head else ()),
        layer_weight_bytes_per_pe=layer_w,
        head_weight_bytes_per_pe=head_w,
        kv_bytes_per_layer_token_per_pe=per_layer_token,
    )


# ---------------------------------------------------------------------------------------
# The append program
# ---------------------------------------------------------------------------------------


def _index(value: int) -> arith.ConstantOp:
    return arith.ConstantOp(IntegerAttr(value, IndexType()))


def kv_append(
    grid: tuple[int, int],
    entries_per_pe: int,
    head_dim: int,
    device: str,
    scheme: str,
) -> Kernel:
    """
    A `mesh.program @kv_append_<scheme>(%cache, %new) -> cache` that appends ONE row
    `new[1×head_dim]` to a distributed cache `cache[(P·entries_per_pe)×head_dim]`
    (layout `[y, x]`: each PE row holds `entries_per_pe` consecutive tokens, oldest
    first, and the entry's width is split over the Q columns).

    - `shift`: every PE sends its oldest entry one row up with
      `mesh.shift axis y ring linear distance -1` (1 hop, all rows at once), moves its
      other entries one slot towards the front, and puts the received entry in its last
      slot; the bottom row puts the new entry there. The top row's oldest entry leaves
      the cache (a zero slot while the cache is not full). Read top row first, the cache
      is a window over the append order: after N ≤ P·entries_per_pe appends to an empty
      (zero) cache, its last N rows are the N entries in order.
    - `concat`: only the bottom row moves its entries one slot forward and puts the new
      entry in its last slot (no communication); it overflows after `entries_per_pe`
      appends.

    The program is the steady state of WaferLLM's rule in which every row's occupancy
    equals its neighbour's, so all rows pass an entry: the per-append worst case. The
    local move is a block copy of `entries_per_pe - 1` rows (a circular buffer on real
    hardware would avoid it); the communication is one 1-hop shift whatever P is.
    """
    if scheme not in SCHEMES:
        raise PlmrError(f"unknown KV-cache scheme '{scheme}' ({', '.join(SCHEMES)})")
    p, q = grid
    if p <= 0 or q <= 0:
        raise PlmrError(f"grid must be positive, got {p}x{q}")
    if entries_per_pe <= 0 or head_dim <= 0:
        raise PlmrError(
            f"entries_per_pe and head_dim must be positive, got {entries_per_pe} and "
            f"{head_dim}"
        )
    e = entries_per_pe
    cache_shape = (p * e, head_dim)
    cache_t: TensorType[Attribute] = TensorType(f32, cache_shape)
    new_t: TensorType[Attribute] = TensorType(f32, (1, head_dim))
    cache_d = mesh.DistType(cache_t, mesh.LayoutAttr(["y", "x"]))
    new_d = mesh.DistType(new_t, mesh.LayoutAttr(["-", "x"]))
    blk_t: TensorType[Attribute] = TensorType(f32, cache_d.block_shape(grid))
    row_t: TensorType[Attribute] = TensorType(f32, new_d.block_shape(grid))
    width = row_t.get_shape()[1]
    name = f"kv_append_{scheme}"
    program = mesh.ProgramOp(name, [cache_t, new_t], [cache_t], device, grid)

    body = Block(arg_types=[IndexType(), IndexType(), blk_t, row_t])
    with ImplicitBuilder(body) as (y, _, blk, new):
        zero = _index(0).result
        bottom = arith.CmpiOp(y, _index(p - 1).result, "eq").result
        if scheme == "shift":
            oldest = tile.LoadOp(blk, [zero, zero], (1, width)).result
            from_below = mesh.ShiftOp(oldest, "y", "linear", -1).result
            incoming = tile.SelectOp(bottom, new, from_below).result
        else:
            incoming = new
        if e > 1:
            rest = tile.LoadOp(blk, [_index(1).result, zero], (e - 1, width)).result
            moved = tile.StoreOp(rest, blk, [zero, zero]).result
            appended = tile.StoreOp(incoming, moved, [_index(e - 1).result, zero]).result
        else:
            appended = incoming
        if scheme == "concat":
            appended = tile.SelectOp(bottom, appended, blk).result
        mesh.YieldOp(appended)
    with ImplicitBuilder(program.body) as (cache_host, new_host):
        dc = mesh.ScatterOp(cache_host, cache_d.layout).result
        dn = mesh.ScatterOp(new_host, new_d.layout).result
        out = mesh.SpmdOp([dc, dn], [cache_d], Region(body)).outputs[0]
        mesh.ReturnOp(mesh.GatherOp(out).result)
    return Kernel(
        ModuleOp([program]),
        name,
        (cache_shape, (1, head_dim)),
        f"kv append ({scheme}): 1 entry of {head_dim} into {e} per PE on {p}x{q}",
    )
