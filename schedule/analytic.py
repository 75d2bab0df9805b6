"""
An analytic schedule generator: blocks chosen from a communication lower bound of each
nest on the device, as Matmap's tiling optimisers do, before anything is measured.

For a nest with m parallel loops (N output elements) and a reduction of extent K, cut in
blocks of P along every parallel loop and R along the reduction, on a grid of p PEs with
S bytes of SRAM each: the parallel blocks spread over u = min(p, blocks) PEs (the rest
of the PEs split the reduction, whose partial sums are then combined); every block reads,
per reduction chunk, one R-slice of its inputs per parallel side (m·P·R values, as a
GEMM's two operand panels) and its output block stays resident. The bytes a PE receives
are bounded below by

    Q(P, R) = 4·(N / (u·Pᵐ))·m·P·K   +   4·Pᵐ·log2(split)   (split reductions)

and each chunk is one message, so the generator minimises Q + α·messages over the block
sizes the schedule's knobs allow, subject to the blocks dividing their loops (the `Tile`
constraints) and a block's working set (inputs, output) fitting half the SRAM (the rest is
double buffering). Larger blocks reuse more (Q falls as P grows) until too few blocks
are left to occupy the grid or they stop fitting — the classic trade-off
(Irony–Toledo–Tiskin's bound N·K/(p·√S) for matrix products is its corner).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from plmr.schedule.features import NestInfo
from plmr.schedule.transforms import Compound, Knob
from plmr.target.device import WSE2, Device
from plmr.target.op_cost import block_product_cycles

Json = object

MESSAGE_BYTES = 64.0
"""The cost of one message in bytes moved (its start-up latency)."""


def footprint(nest: NestInfo, p: int, r: int) -> int:
    """Bytes a block of `nest` holds: input panels per parallel side and its output."""
    m = max(1, len(nest.parallel))
    out = math.prod(min(e, p) for e in nest.parallel)
    k = min(nest.reduction[-1], r) if nest.reduction else 1
    return 4 * (m * min(p, max(nest.parallel, default=1)) * k + out)


def communication_bound(
    nest: NestInfo, p: int, r: int, grid: tuple[int, int], sram: int
) -> float:
    """Q + α·messages of `nest` under blocks (p, r); inf if they do not fit or divide."""
    pes = grid[0] * grid[1]
    for e in nest.parallel:
        if e > p and e % p:
            return math.inf
    k = nest.reduction[-1] if nest.reduction else 1
    if nest.reduction and k > r and k % r:
        return math.inf
    if footprint(nest, p, r) > sram // 2:
        return math.inf
    m = max(1, len(nest.parallel))
    blocks = math.prod(math.ceil(e / min(e, p)) for e in nest.parallel)
    chunks = math.ceil(k / min(k, r)) if nest.reduction else 1
    used = min(pes, blocks)
    per_pe = math.ceil(blocks / used)
    side = min(p, max(nest.parallel, default=1))
    q = 4.0 * per_pe * m * side * k
    split = min(chunks, max(1, pes // blocks)) if nest.reduction else 1
    if split > 1:
        q += 4.0 * math.prod(min(e, p) for e in nest.parallel) * math.log2(split)
        per_pe_chunks = math.ceil(chunks / split)
    else:
        per_pe_chunks = chunks
    return q + MESSAGE_BYTES * per_pe * per_pe_chunks


REUSE_GEMV = 2.0
"""Below this many uses of each input element a nest is matrix-vector shaped."""


def reuse(nest: NestInfo) -> float:
    """Uses of each input element: iterations (4 bytes each) per input byte read."""
    iterations = math.prod(nest.parallel) * math.prod(nest.reduction or (1,))
    return 4.0 * iterations / max(1, nest.in_bytes)


def gemv_bound(
    nest: NestInfo,
    p: int,
    r: int,
    grid: tuple[int, int],
    sram: int,
    device: Device = WSE2,
) -> float:
    """
    The cycles of a matrix-vector nest on the critical PE under blocks (p, r), in the
    bytes-over-a-link unit of `communication_bound`; inf if they do not fit or divide.

    Nothing is reused (each weight is read once), so larger blocks do not save bytes;
    what they save is latency. The largest parallel loop's blocks spread over the grid's
    rows, the reduction's chunks over its columns; a PE runs `trips` (block, chunk)
    pairs — the other parallel loops' blocks, its share of the spread ones — each a
    product of a vector by a block of r rows of b outputs (the runtime's `op_cost`: op
    and row overheads, r instructions streaming b elements at the FMAC width) and, when
    the reduction is split, an allreduce of its b partial sums along the column axis:
    2·⌈log2 split⌉ messages, each at least a send, a receive and a hop (the latency
    floor) plus its bytes. Small blocks multiply the trips and so the allreduces.
    """
    if communication_bound(nest, p, r, grid, sram) == math.inf:
        return math.inf
    counts = [math.ceil(e / min(e, p)) for e in nest.parallel] or [1]
    spread = max(counts)
    rest = math.prod(counts) // spread
    k = nest.reduction[-1] if nest.reduction else 1
    chunk = min(k, r)
    chunks = math.ceil(k / chunk)
    split = min(chunks, grid[1])
    trips = rest * math.ceil(spread / grid[0]) * math.ceil(chunks / split)
    b = math.prod(min(e, p) for e in nest.parallel)
    cycles = trips * block_product_cycles(device, 1, chunk, b)
    if split > 1:
        message = device.message_cycles(b)
        cycles += trips * 2 * math.ceil(math.log2(split)) * message
    return cycles * device.link_bytes_per_cycle * 4 / device.elem_bytes


def nest_bound(
    nest: NestInfo,
    p: int,
    r: int,
    grid: tuple[int, int],
    sram: int,
    device: Device = WSE2,
) -> float:
    """
    `gemv_bound` for matrix-vector nests (`reuse` < `REUSE_GEMV`), else
    `communication_bound`.
    """
    if reuse(nest) < REUSE_GEMV:
        return gemv_bound(nest, p, r, grid, sram, device)
    return communication_bound(nest, p, r, grid, sram)


def _best(
    nests: Sequence[NestInfo],
    ps: Sequence[int],
    rs: Sequence[int],
    grid: tuple[int, int],
    sram: int,
    device: Device = WSE2,
) -> tuple[int, int] | None:
    best: tuple[float, int, int] | None = None
    for p in ps:
        for r in rs:
            cost = sum(nest_bound(n, p, r, grid, sram, device) for n in nests)
            if math.isfinite(cost) and (best is None or cost < best[0]):
                best = (cost, p, r)
    return None if best is None else (best[1], best[2])


def _ints(knob: Knob | None) -> list[int]:
    if knob is None:
        return []
    return [v for v in knob.domain() if isinstance(v, int) and not isinstance(v, bool)]


def generate(
    schedule: Compound,
    table: Sequence[NestInfo],
    grid: tuple[int, int],
    sram: int,
    device: Device = WSE2,
) -> dict[str, Json]:
    """
    Knob values for `schedule`: every block knob (global `tile.parallel` /
    `tile.reduction`, per nest `tile.nests.NAME.0` / `.1`) set from the bound; the other
    knobs stay at their initial values. Nests the bound cannot place keep the initial.
    """
    knobs = schedule.knobs()
    values: dict[str, Json] = {}
    named: dict[str, list[NestInfo]] = {}
    for n in table:
        named.setdefault(n.name, []).append(n)
    overridden: set[str] = set()
    for path in knobs:
        if not path.startswith("tile.nests.") or not path.endswith(".0"):
            continue
        name = path[len("tile.nests.") : -2]
        overridden.add(name)
        nests = [n for n in named.get(name, []) if n.reduction]
        if not nests:
            continue
        ps = _ints(knobs.get(path))
        rs = _ints(knobs.get(f"tile.nests.{name}.1")) or [_fixed_r(schedule, name)]
        chosen = _best(nests, ps, rs, grid, sram, device)
        if chosen is not None:
            values[path] = chosen[0]
            if f"tile.nests.{name}.1" in knobs:
                values[f"tile.nests.{name}.1"] = chosen[1]
    if "tile.parallel" in knobs or "tile.reduction" in knobs:
        rest = [n for n in table if n.name not in overridden]
        ps = _ints(knobs.get("tile.parallel")) or [_fixed(schedule, "parallel")]
        rs = _ints(knobs.get("tile.reduction")) or [_fixed(schedule, "reduction")]
        chosen = _best(rest, ps, rs, grid, sram, device)
        if chosen is not None:
            if "tile.parallel" in knobs:
                values["tile.parallel"] = chosen[0]
            if "tile.reduction" in knobs:
                values["tile.reduction"] = chosen[1]
    return values


def uniform_blocks(schedule: Compound) -> list[dict[str, Json]]:
    """
    Knob values that block every nest alike, as `plmr compile`'s own blocking search does:
    each pair (P, R) of the global block knobs' domains, every per-nest block knob at the
    value of its domain nearest to P or R (in log2); the other knobs at their initial
    values. Empty without integer global block knobs.
    """
    knobs = schedule.knobs()
    ps, rs = _ints(knobs.get("tile.parallel")), _ints(knobs.get("tile.reduction"))
    if not ps or not rs:
        return []
    out: list[dict[str, Json]] = []
    for p in ps:
        for r in rs:
            values: dict[str, Json] = {"tile.parallel": p, "tile.reduction": r}
            for path, knob in knobs.items():
                if not path.startswith("tile.nests."):
                    continue
                sizes = _ints(knob)
                if sizes:
                    want = p if path.endswith(".0") else r
                    values[path] = min(sizes, key=lambda v: abs(math.log2(v / want)))
            out.append(values)
    return out


def _fixed(schedule: Compound, name: str) -> int:
    tile = schedule.get("tile")
    v = tile.value(name) if tile is not None else 16
    return v if isinstance(v, int) else 16


def _fixed_r(schedule: Compound, nest: str) -> int:
    tile = schedule.get("tile")
    if tile is None:
        return 16
    nests = tile.params.get("nests")
    if isinstance(nests, Mapping):
        sizes = nests.get(nest)  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        if isinstance(sizes, list) and len(sizes) == 2 and isinstance(sizes[1], int):  # pyright: ignore[reportUnknownArgumentType]
            return int(sizes[1])  # pyright: ignore[reportUnknownArgumentType]
    return 16


__all__ = [
    "communication_bound",
    "footprint",
    "gemv_bound",
    "generate",
    "nest_bound",
    "reuse",
    "uniform_blocks",
]
