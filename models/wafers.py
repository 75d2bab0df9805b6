"""
A step's cycles across the wafers of a system's pipeline stages.

The stages (`plmr.lowering.kv_cache.kv_capacity`) are placed on the wafers and priced
hop by hop by the machine model (`plmr.target.stages`: `place_stages`, `hops`, re-exported
here). `WaferStep` splits a step's cycles into each wafer's layers, the hops on the
wafers, the links, and the first layer's input with the LM head.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from plmr.target.stages import Hop, Placement, Region, hops, place_stages


@dataclass(frozen=True)
class WaferStep:
    """
    A step's cycles across the wafers of a placement: each wafer's layers (and KV
    appends), the hops on each wafer, the links between wafers, and the first layer's
    input with the LM head (`first − layer`, on the first and the last stage).
    """

    layers: tuple[float, ...]
    """Per wafer: its stages' layers × (layer + KV append) cycles."""
    fabric: tuple[float, ...]
    """Per wafer: the hops between its stages."""
    links: tuple[float, ...]
    """Per link between wafers, in order."""
    head: float
    """The first layer's input from the host and the LM head: `first − layer`."""

    @property
    def total(self) -> float:
        return sum(self.layers) + sum(self.fabric) + sum(self.links) + self.head

    def to_json(self) -> dict[str, Any]:
        return {
            "layers_cycles": list(self.layers),
            "fabric_hop_cycles": list(self.fabric),
            "link_cycles": list(self.links),
            "head_cycles": self.head,
            "total_cycles": self.total,
        }

    def summary(self) -> list[str]:
        total = max(self.total, 1.0)
        layers, fabric, links = sum(self.layers), sum(self.fabric), sum(self.links)
        lines = [
            f"  time goes   layers {layers:,.0f} ({layers / total:.1%}), hops on the "
            f"wafers {fabric:,.0f} ({fabric / total:.1%}), links between wafers "
            f"{links:,.0f} ({links / total:.1%}), first layer's input and LM head "
            f"{self.head:,.0f} ({self.head / total:.1%}) cycles"
        ]
        if len(self.layers) > 1:
            per = ", ".join(
                f"{i}: {lay + fab:,.0f}"
                for i, (lay, fab) in enumerate(zip(self.layers, self.fabric, strict=True))
            )
            lines.append(
                f"  per wafer   {per} cycles (its layers and hops; the LM head apart)"
            )
        return lines


def wafer_step(
    placement: Placement,
    stage_hops: list[Hop],
    layer_cycles: float,
    append_cycles: float,
    first_cycles: float,
) -> WaferStep:
    """Sums a step over the wafers of `placement` (see `WaferStep`)."""
    n = placement.wafers
    layers = [0.0] * n
    fabric = [0.0] * n
    links: list[float] = []
    for region in placement.regions:
        layers[region.wafer] += region.layers * (layer_cycles + append_cycles)
    for hop in stage_hops:
        if hop.kind == "link":
            links.append(hop.cycles)
        else:
            fabric[placement.regions[hop.src].wafer] += hop.cycles
    return WaferStep(
        tuple(layers), tuple(fabric), tuple(links), first_cycles - layer_cycles
    )


__all__ = [
    "Hop",
    "Placement",
    "Region",
    "WaferStep",
    "hops",
    "place_stages",
    "wafer_step",
]
