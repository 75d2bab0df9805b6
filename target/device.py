"""
Device models: the parameters of a wafer-scale machine that plmr compiles for and simulates.

A device is a 2D mesh of processing elements (PEs). Each PE has a compute engine with SIMD
units, a private SRAM, and a router with a handful of static routes ("colors"). Messages
move one 32-bit wavelet per cycle per link; a hop through a router that forwards by a
pre-configured route costs `hop_cycles` (α); a relay through a core's software costs
`relay_cycles` (β). Presets follow the published WSE-2 / WSE-3 figures; every parameter
can be overridden (`Device.with_overrides`, or `--device wse2:colors=16,sram_kib=24` on
the command line).

The software and latency parameters (hop, send/receive overheads, the block product's
per-row and per-instruction costs) were fitted by `benchmarks/calibrate.py` on real WSE-3
cycle counts of WaferLLM's MeshGEMM and MeshGEMV (mean error 1.7%, max 3.7% over 14
points; leave-one-out in `benchmarks/README.md`); WSE-2 shares them and differs in SIMD
width. A block product costs ≈42 cycles per row of its left block (one `@map` over the
row, with its own DSD setup) and, per scalar of it, ≈1.4 plus the row's streaming time,
bounded by SRAM bandwidth (`target/op_cost.py`): most of a small block's cost is per
row, not per instruction.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from plmr.errors import PlmrError


@dataclass(frozen=True)
class Device:
    """A 2D-mesh device. Sizes are in PEs, bytes and cycles unless the name says otherwise."""

    name: str
    width: int
    """PEs along x (columns)."""
    height: int
    """PEs along y (rows)."""
    sram_bytes: int
    """SRAM per PE."""
    clock_hz: float
    fmac_fp16: int
    """fp16 fused multiply-accumulates per cycle per PE (SIMD width of `@fmach`)."""
    simd_fp16: int
    """Other fp16 elementwise ops (add, mul, mov) per cycle per PE."""
    simd_fp32: int
    """fp32 elementwise ops per cycle per PE."""
    link_bytes_per_cycle: int = 4
    """One 32-bit wavelet per cycle per link and direction."""
    colors: int = 24
    """Routable colors (static routes) per router."""
    reserved_colors: int = 3
    """Colors the host I/O framework keeps for itself."""
    hop_cycles: float = 1.98
    """α: latency of a pass-through router hop (calibrated on WSE-3 data)."""
    ramp_cycles: float = 2.0
    """T_R: latency between a PE's compute engine and its router, each way."""
    relay_cycles: float = 30.0
    """β: a software relay at an intermediate PE (when routes run out)."""
    send_overhead_cycles: float = 58.81
    """Software cost to start one message (task activation, DSD setup) on the sender."""
    recv_overhead_cycles: float = 32.24
    """Software cost on the receiver when a message completes (data-task activation)."""
    op_overhead_cycles: float = 5.32
    """Fixed cost of one compute op (loop and DSD setup)."""
    row_overhead_cycles: float = 42.40
    """Per row of a block product (one `@map` over the row's scalars)."""
    dsd_overhead_cycles: float = 1.36
    """Per vector instruction (DSD op) of a block product: one per scalar of the left
    operand, each an FMAC over a row of the right operand."""
    step_overhead_cycles: float = 0.0
    """Software cost of each stage after the first of a multi-stage collective."""
    elem_bytes: int = 2
    """Bytes per element of the device's native datatype (fp16)."""
    wafers: int = 0
    """Wafers of the system, each one of this device; 0: as many as a model's pipeline
    stages need (`plmr.target.stages.place_stages`)."""
    link_gbps: float = 1200.0
    """Bandwidth of the link between two wafers, Gb/s per direction: a CS-2's or CS-3's
    system I/O, 12 × 100 Gigabit Ethernet = 1.2 Tb/s (Cerebras's published specification)."""
    link_latency_us: float = 2.0
    """Latency of one message between two wafers, µs: a 100 GbE hop through a switch and
    the system's I/O (not published by Cerebras; an assumption, override it)."""

    @property
    def cores(self) -> int:
        return self.width * self.height

    @property
    def usable_colors(self) -> int:
        return self.colors - self.reserved_colors

    @property
    def seconds_per_cycle(self) -> float:
        return 1.0 / self.clock_hz

    @property
    def link_cycles_per_byte(self) -> float:
        """Cycles of this device's clock per byte over the link between two wafers."""
        return self.clock_hz * 8 / (self.link_gbps * 1e9)

    @property
    def link_latency_cycles(self) -> float:
        """The link's latency in cycles of this device's clock."""
        return self.link_latency_us * 1e-6 * self.clock_hz

    def message_cycles(self, elements: float, hops: float = 1.0) -> float:
        """
        The estimate of one message of `elements` values between PEs `hops` apart:
        send and receive overheads, the ramps at both ends, the hops, the payload.
        """
        latency = (
            self.send_overhead_cycles + self.recv_overhead_cycles + 2 * self.ramp_cycles
        )
        return (
            latency
            + hops * self.hop_cycles
            + elements * self.elem_bytes / self.link_bytes_per_cycle
        )

    def with_overrides(self, **overrides: Any) -> Device:
        """A copy with some parameters changed; unknown names are an error."""
        fields = {f.name: f for f in dataclasses.fields(self)}
        unknown = sorted(set(overrides) - set(fields))
        if unknown:
            raise PlmrError(
                f"unknown device parameter(s) {', '.join(unknown)}; known: "
                f"{', '.join(fields)}"
            )
        typed: dict[str, Any] = {}
        for key, value in overrides.items():
            current: object = getattr(self, key)
            kind: type[Any] = type(current)
            try:
                typed[key] = kind(value)
            except (TypeError, ValueError) as e:
                raise PlmrError(
                    f"device parameter {key} must be a {kind.__name__}, got {value!r}"
                ) from e
        device = dataclasses.replace(self, **typed)
        device.check()
        return device

    def check(self) -> None:
        """Raises a PlmrError if a parameter is out of range."""
        for name in (
            "width",
            "height",
            "sram_bytes",
            "fmac_fp16",
            "simd_fp16",
            "simd_fp32",
        ):
            if getattr(self, name) <= 0:
                raise PlmrError(f"device {self.name}: {name} must be positive")
        # The runtime's clocks never go back (`plmr.runtime.spmd.Clocks`).
        for f in dataclasses.fields(self):
            if f.name.endswith("_cycles") and getattr(self, f.name) < 0:
                raise PlmrError(f"device {self.name}: {f.name} must be >= 0")
        if self.wafers < 0 or self.link_gbps <= 0 or self.link_latency_us < 0:
            raise PlmrError(
                f"device {self.name}: wafers and link_latency_us must be >= 0 and "
                "link_gbps positive"
            )
        if self.clock_hz <= 0 or self.link_bytes_per_cycle <= 0:
            raise PlmrError(
                f"device {self.name}: clock and link bandwidth must be positive"
            )
        if not 0 <= self.reserved_colors < self.colors:
            raise PlmrError(
                f"device {self.name}: reserved_colors ({self.reserved_colors}) must be "
                f"below colors ({self.colors})"
            )


WSE2 = Device(
    name="wse2",
    width=750,
    height=994,
    sram_bytes=48 * 1024,
    clock_hz=1.1e9,
    fmac_fp16=4,
    simd_fp16=4,
    simd_fp32=2,
)
"""Cerebras WSE-2 (CS-2): the 750×994 program rectangle, 48 KiB per PE, 1.1 GHz."""

WSE3 = dataclasses.replace(
    WSE2, name="wse3", width=755, height=1170, fmac_fp16=8, simd_fp16=8, simd_fp32=4
)
"""
Cerebras WSE-3 (CS-3): twice the SIMD width of WSE-2. 48 KiB per PE: Cerebras's 900,000
cores hold 44.2 GB (the published 44 GB); the 755×1170 program rectangle, 883,350 PEs,
holds 43.4 GB.
"""

TEST_SMALL = dataclasses.replace(WSE2, name="test-small", width=8, height=8)
"""An 8×8 WSE-2-like mesh for tests."""

TEST_TINY = dataclasses.replace(
    WSE2, name="test-tiny", width=4, height=4, sram_bytes=4 * 1024, colors=8
)
"""A 4×4 mesh with 4 KiB per PE and 8 colors, for overflow tests."""

PRESETS: dict[str, Device] = {d.name: d for d in (WSE2, WSE3, TEST_SMALL, TEST_TINY)}


def _parse_value(text: str) -> Any:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


_UNITS = {"sram_kib": ("sram_bytes", 1024), "clock_ghz": ("clock_hz", 1e9)}


def get_device(spec: str) -> Device:
    """
    A device from a spec: a preset name, optionally with overrides, e.g.
    `wse2`, `wse3:colors=16`, `wse2:width=360,height=360,sram_kib=24`,
    `wse3:wafers=4,link_gbps=800` (a system of four wafers).
    """
    name, _, rest = spec.partition(":")
    device = PRESETS.get(name.strip())
    if device is None:
        raise PlmrError(
            f"unknown device '{name}'; presets: {', '.join(PRESETS)} "
            "(override parameters with e.g. wse2:colors=16)"
        )
    if not rest.strip():
        return device
    overrides: dict[str, Any] = {}
    for item in rest.split(","):
        key, eq, value = item.partition("=")
        if not eq:
            raise PlmrError(f"bad device override '{item}' in '{spec}': expected key=value")
        key = key.strip()
        parsed = _parse_value(value.strip())
        if key in _UNITS:
            real, scale = _UNITS[key]
            overrides[real] = parsed * scale
        else:
            overrides[key] = parsed
    return device.with_overrides(**overrides)
