"""
Pipeline stages over regions of a wafer: how many layers each holds, where the regions
lie, and the cost of moving the activations from one stage to the next.

A model whose layers do not all fit one P×Q grid is split into pipeline stages, each a
P×Q region of PEs holding a contiguous group of layers. `split_stages` gives the fewest
stages whose layers, split as evenly as possible (the larger groups first), fit a PE's
SRAM beside what every stage keeps anyway (`plmr compile` of a layered program: the
layer body's peak; `plmr bench`: `plmr.lowering.kv_cache.kv_capacity` with its KV
cache). `place_stages` puts the stages on the physical grid of the device (its height ×
width): a wafer holds `⌊height/P⌋ × ⌊width/Q⌋` regions in rows and columns, filled in
snake order (left to right on even rows, right to left on odd ones) so that consecutive
stages are neighbours, and the stages that do not fit one wafer continue on the next.
The device's `wafers` bounds the system (0: as many as the stages need); a placement
that needs more is refused with the SRAM the stages occupy.

One sequence goes through the stages one after another, so each boundary adds a
transfer of the activations (`tokens × dim`: one token in decode, the prompt in
prefill) and no compute (`hops`):

- **on a wafer** (`Hop`, kind `fabric`): the activations, spread over the region, cross
  the boundary between two neighbouring regions, P rows (side by side) or Q columns
  (one above the other) of links, and travel the distance between the regions' origins
  (Q or P hops): `distance · α + send + receive + ⌈tokens·dim / links⌉ · bytes / link`.
- **between wafers** (kind `link`): the region's activations travel to the nearest edge
  of its wafer, over the system's link (`link_latency_us`, `link_gbps`: 12 × 100 GbE,
  1.2 Tb/s, per CS-2 or CS-3 system) and from the edge of the next wafer to its first
  region: `(edge hops) · α + send + receive + latency + tokens·dim·bytes / bandwidth`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from plmr.errors import PlmrError
from plmr.target.device import Device


def even_groups(n: int, parts: int) -> tuple[int, ...]:
    """`n` items in `parts` groups as even as possible, the larger groups first."""
    base, extra = divmod(n, parts)
    return tuple(base + 1 if i < extra else base for i in range(parts))


def split_stages(
    n_layers: int, layer_bytes: int, reserved_bytes: int, sram_bytes: int, what: str
) -> tuple[int, ...]:
    """
    The layers of each pipeline stage: the fewest stages whose layers, split as evenly
    as possible (the larger groups first), fit `sram_bytes` per PE at `layer_bytes` each
    beside `reserved_bytes`. Raises a PlmrError naming `what` if one layer does not fit.
    """
    if n_layers < 1:
        raise PlmrError(f"{what}: a pipeline needs at least one layer, got {n_layers}")
    free = sram_bytes - reserved_bytes
    if free < max(layer_bytes, 0):
        raise PlmrError(
            f"{what}: one layer's weights need {layer_bytes} B per PE beside "
            f"{reserved_bytes} B of working set, {layer_bytes + reserved_bytes} B, but "
            f"the device has {sram_bytes} B per PE; use a larger grid or a device with "
            "more SRAM"
        )
    per_stage = n_layers if layer_bytes <= 0 else min(n_layers, free // layer_bytes)
    return even_groups(n_layers, -(-n_layers // per_stage))


@dataclass(frozen=True)
class Region:
    """One pipeline stage: a P×Q region of one wafer."""

    stage: int
    wafer: int
    origin: tuple[int, int]
    """(row, column) of its top-left PE on its wafer."""
    shape: tuple[int, int]
    layers: int
    """Transformer layers of the stage (0: the LM head's own stage)."""
    head: bool
    """The stage holds the LM head."""

    def to_json(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "wafer": self.wafer,
            "origin": list(self.origin),
            "shape": list(self.shape),
            "layers": self.layers,
            "head": self.head,
        }


@dataclass(frozen=True)
class Hop:
    """The activations moving from one stage to the next."""

    src: int
    dst: int
    kind: str
    """`fabric` (neighbouring regions of one wafer) or `link` (between wafers)."""
    distance: int
    """PE hops on the wafer(s): between the regions' origins, or to and from the edges."""
    cycles: float

    def to_json(self) -> dict[str, Any]:
        return {
            "src": self.src,
            "dst": self.dst,
            "kind": self.kind,
            "distance": self.distance,
            "cycles": self.cycles,
        }


@dataclass(frozen=True)
class Placement:
    """Pipeline stages on the wafers of a system (`place_stages`)."""

    device: str
    wafer_shape: tuple[int, int]
    """(height, width) of one wafer in PEs."""
    grid: tuple[int, int]
    per_wafer: tuple[int, int]
    """Rows and columns of regions one wafer holds."""
    regions: tuple[Region, ...]
    system_wafers: int
    """The system's wafers (0: as many as needed)."""
    stage_bytes_per_pe: tuple[int, ...]
    """SRAM each stage uses on one PE."""

    @property
    def wafers(self) -> int:
        """Wafers used."""
        return self.regions[-1].wafer + 1

    @property
    def pes_used(self) -> int:
        p, q = self.grid
        return len(self.regions) * p * q

    @property
    def sram_bytes_used(self) -> int:
        """SRAM the stages occupy: each stage's bytes per PE times its PEs."""
        p, q = self.grid
        return sum(self.stage_bytes_per_pe) * p * q

    def wafer_regions(self, wafer: int) -> list[Region]:
        return [r for r in self.regions if r.wafer == wafer]

    def to_json(self) -> dict[str, Any]:
        h, w = self.wafer_shape
        return {
            "device": self.device,
            "wafer_shape": [h, w],
            "grid": list(self.grid),
            "regions_per_wafer": list(self.per_wafer),
            "wafers": self.wafers,
            "system_wafers": self.system_wafers,
            "pes_used": self.pes_used,
            "pes_per_wafer": h * w,
            "sram_bytes_used": self.sram_bytes_used,
            "stages": [
                {**r.to_json(), "sram_bytes_per_pe": b}
                for r, b in zip(self.regions, self.stage_bytes_per_pe, strict=True)
            ],
        }

    def summary(self) -> list[str]:
        """One line: stages, regions, PEs and wafers used."""
        h, w = self.wafer_shape
        p, q = self.grid
        rows, cols = self.per_wafer
        n = len(self.regions)
        share = self.pes_used / (self.wafers * h * w)
        return [
            f"  placement   {n} stage(s) of {p}x{q} on {self.wafers} wafer(s) of "
            f"{self.device} ({h}x{w} PEs, {rows}x{cols} regions each): "
            f"{self.pes_used:,} PEs used ({share:.0%} of the wafers), "
            f"{_bytes(self.sram_bytes_used)} of SRAM"
        ]

    def ascii_map(self, max_wafers: int = 4, cells: int = 12) -> list[str]:
        """
        A picture of the wafers, side by side (at most `max_wafers`, then a count of the
        rest): each wafer `cells` characters wide, every region labelled with its stage
        (0-9, then a-z, A-Z; `H` marks the LM head's stage when it has no layers) and
        `.` for unused PEs.
        """
        h, w = self.wafer_shape
        p, q = self.grid
        ccols = max(cells, 1)
        crows = max(1, round(ccols * h / w / 2))
        shown = min(self.wafers, max_wafers)
        pictures: list[list[str]] = []
        for wafer in range(shown):
            canvas = [["."] * ccols for _ in range(crows)]
            for r in self.wafer_regions(wafer):
                y0, x0 = r.origin
                rows = range(
                    y0 * crows // h, max(y0 * crows // h + 1, (y0 + p) * crows // h)
                )
                cols = range(
                    x0 * ccols // w, max(x0 * ccols // w + 1, (x0 + q) * ccols // w)
                )
                mark = _label(r)
                for y in rows:
                    for x in cols:
                        canvas[y][x] = mark
            pictures.append(["|" + "".join(row) + "|" for row in canvas])
        titles = [f" wafer {i}".ljust(ccols + 2) for i in range(shown)]
        lines = ["  " + " ".join(titles).rstrip()]
        for y in range(crows):
            lines.append("  " + " ".join(pic[y] for pic in pictures))
        if self.wafers > shown:
            lines.append(f"  ... and {self.wafers - shown} more wafer(s)")
        return lines


def _bytes(n: int) -> str:
    """A byte count in GB, MB or kB."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:,.2f} {unit}"
    return f"{n} B"


_MARKS = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _label(region: Region) -> str:
    if region.layers == 0 and region.head:
        return "H"
    return _MARKS[region.stage % len(_MARKS)]


def place_stages(
    stage_layers: tuple[int, ...] | list[int],
    grid: tuple[int, int],
    dev: Device,
    stage_bytes_per_pe: tuple[int, ...] | list[int] | None = None,
    what: str = "the model",
) -> Placement:
    """
    Places one P×Q region per stage (`stage_layers`: layers of each stage; the last
    stage holds the LM head) on the wafers of `dev` (see the module docstring). Raises a
    PlmrError if a region does not fit a wafer, or if the stages need more wafers than
    the system's `wafers` (naming the SRAM they occupy and the wafers they need).
    """
    p, q = grid
    h, w = dev.height, dev.width
    if p <= 0 or q <= 0:
        raise PlmrError(f"grid must be positive, got {p}x{q}")
    if not stage_layers:
        raise PlmrError("a placement needs at least one stage")
    if p > h or q > w:
        raise PlmrError(
            f"a {p}x{q} region does not fit a wafer of {dev.name} ({h}x{w} PEs); use a "
            "smaller grid"
        )
    rows, cols = h // p, w // q
    per = rows * cols
    n = len(stage_layers)
    needed = -(-n // per)
    sizes = tuple(stage_bytes_per_pe) if stage_bytes_per_pe is not None else (0,) * n
    if len(sizes) != n:
        raise PlmrError(f"{n} stages but {len(sizes)} SRAM figures")
    if dev.wafers and needed > dev.wafers:
        sram = sum(sizes) * p * q
        raise PlmrError(
            f"{what} needs {n} pipeline stages of {p}x{q} PEs ({_bytes(sram)} of "
            f"SRAM for its weights, workspace and KV cache), {needed} wafers of "
            f"{dev.name} at {per} region(s) each, but the system has {dev.wafers}; use "
            f"--device {dev.name}:wafers={needed}"
        )
    regions: list[Region] = []
    for stage, layers in enumerate(stage_layers):
        wafer, i = divmod(stage, per)
        r, c = divmod(i, cols)
        if r % 2:
            c = cols - 1 - c
        regions.append(
            Region(stage, wafer, (r * p, c * q), (p, q), int(layers), stage == n - 1)
        )
    return Placement(
        dev.name, (h, w), (p, q), (rows, cols), tuple(regions), dev.wafers, sizes
    )


def _edge_distance(region: Region, wafer_shape: tuple[int, int]) -> int:
    """PE hops from a region's nearest side to the nearest edge of its wafer."""
    (y, x), (p, q) = region.origin, region.shape
    h, w = wafer_shape
    return min(y, x, h - (y + p), w - (x + q))


def hops(placement: Placement, dev: Device, elements: int) -> list[Hop]:
    """
    The transfer of `elements` activations (tokens × dim) between consecutive stages of
    `placement`, each on the fabric or over a link between wafers (module docstring).
    """
    p, q = placement.grid
    per_byte = 1.0 / dev.link_bytes_per_cycle
    software = dev.send_overhead_cycles + dev.recv_overhead_cycles
    out: list[Hop] = []
    for a, b in zip(placement.regions, placement.regions[1:], strict=False):
        if a.wafer == b.wafer:
            dy, dx = abs(a.origin[0] - b.origin[0]), abs(a.origin[1] - b.origin[1])
            links = q if dx == 0 else p
            words = math.ceil(elements / links)
            cycles = (
                (dy + dx) * dev.hop_cycles + software + words * dev.elem_bytes * per_byte
            )
            out.append(Hop(a.stage, b.stage, "fabric", dy + dx, cycles))
            continue
        edges = _edge_distance(a, placement.wafer_shape) + _edge_distance(
            b, placement.wafer_shape
        )
        cycles = (
            edges * dev.hop_cycles
            + software
            + dev.link_latency_cycles
            + elements * dev.elem_bytes * dev.link_cycles_per_byte
        )
        out.append(Hop(a.stage, b.stage, "link", edges, cycles))
    return out


__all__ = ["Hop", "Placement", "Region", "hops", "place_stages", "split_stages"]
