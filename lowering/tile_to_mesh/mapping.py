"""
The mapping of one nest on the grid for `convert-tile-to-mesh`: which loop each mesh axis
splits, how the reduction runs, the operands' layouts and what it costs (what `planning`
ranks, `cost` estimates and `emit` emits).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.ir import SSAValue

from plmr.dialects import tile
from plmr.lowering.tile_to_mesh.analysis import Layout


@dataclass
class Mapping:
    """How one nest runs on the grid."""

    axes: dict[str, tile.ForOp]
    """Mesh axis -> the loop split over it (a parallel loop, or the reduction loop)."""
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
    sram: int = 0
    deferred: list[str] | None = None
    """Allreduce: the combine of each output when one allreduce of each output block at
    the end of the nest replaces one per local block (`batching.deferrable`)."""

    def axis_of(self, loop: tile.ForOp) -> str | None:
        for a, lp in self.axes.items():
            if lp is loop:
                return a
        return None
