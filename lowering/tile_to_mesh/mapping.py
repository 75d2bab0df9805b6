"""
The mapping of one nest on the grid for `convert-tile-to-mesh`: which loop each mesh axis
splits, how the reduction runs, the operands' layouts and what it costs (what `planning`
ranks, `cost` estimates and `emit` emits).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.ir import SSAValue

from plmr.dialects import tile
from plmr.lowering.tile_to_mesh.analysis import Layout, Options


@dataclass(frozen=True)
class Band:
    """
    Two loops on one axis: `outer` over bands of `width` PEs (one block of it per band,
    the PEs past the last band on padding), `inner` (or none: every PE of a band holds
    its band's blocks) blocked within each band. PE `p` of the axis is at position
    `p % width` of band `p // width`.
    """

    outer: tile.ForOp
    inner: tile.ForOp | None
    width: int


@dataclass
class Mapping:
    """How one nest runs on the grid."""

    axes: dict[str, tile.ForOp]
    """Mesh axis -> the loop split over it (a parallel loop, or the reduction loop); for
    a banded axis, the loop over its bands."""
    mode: str
    """
    `local`, `allreduce` (reduction split over a free axis), `merge` (a rolling update
    split over a free axis, the PEs' partial results merged: `rolling_merge`) or `rotate`.
    """
    paths: dict[SSAValue, str] = field(default_factory=lambda: {})
    """Rotation: operand tensor -> the axis its chunks circulate on."""
    chunks: int = 0
    layouts: dict[SSAValue, Layout] = field(default_factory=lambda: {})
    """Required layout of every global operand (unskewed part)."""
    outputs: list[Layout] = field(default_factory=lambda: [])
    cost: float = 0.0
    readers: float = 0.0
    """What the readers of the outputs are expected to pay for their layouts
    (`CostModel.reader_gathers`): ranked by with `cost`, not part of the estimate."""
    sram: int = 0
    deferred: list[str] | None = None
    """Allreduce: the combine of each output when one allreduce of each output block at
    the end of the nest replaces one per local block (`batching.deferrable`)."""
    bands: dict[str, Band] = field(default_factory=lambda: {})
    """Banded axes (their `axes` entry is the band's outer loop)."""
    copies: bool = False
    """With `Options.rest_weights`: the weights it reads replicated are placed as copies
    (with their gathers at rest the nest did not fit a PE's SRAM)."""

    def axis_of(self, loop: tile.ForOp) -> str | None:
        for a, lp in self.axes.items():
            if lp is loop:
                return a
        for a, band in self.bands.items():
            if band.inner is loop:
                return a
        return None

    def band_of(self, loop: tile.ForOp) -> tuple[Band, bool] | None:
        """The band `loop` belongs to and whether it is the inner loop."""
        for band in self.bands.values():
            if band.outer is loop or band.inner is loop:
                return band, band.inner is loop
        return None

    def parts(self, loop: tile.ForOp, opts: Options) -> int:
        """How many parts the grid splits `loop` into (1 if it is not split)."""
        axis = self.axis_of(loop)
        if axis is None:
            return 1
        found = self.band_of(loop)
        if found is None:
            return opts.n(axis)
        band, inner = found
        return band.width if inner else opts.n(axis) // band.width

    def loops(self) -> list[tile.ForOp]:
        """Every split loop."""
        out = list(self.axes.values())
        out += [b.inner for b in self.bands.values() if b.inner is not None]
        return out
