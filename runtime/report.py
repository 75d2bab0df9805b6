"""
The runtime's report: time, its split, traffic, SRAM and routes of one program run.

`Report.to_json()` is what `--report FILE.json` writes and `plmr bench --json` prints;
`Report.summary()` is the human-readable table.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from plmr.target.device import Device
from plmr.target.sram import SramReport

FloatArray = npt.NDArray[np.floating[Any]]


@dataclass
class OpTime:
    """Time attributed to one kind of op at PE (0, 0) (summed over executions)."""

    name: str
    count: int = 0
    cycles: float = 0.0


@dataclass
class Report:
    """What one run of a mesh program cost on the modelled device."""

    program: str
    device: str
    grid: tuple[int, int]
    mode: str
    cycles: float
    """End-to-end: the last PE's finishing time."""
    seconds: float
    compute_cycles: float
    """Compute time of the critical (last-finishing) PE."""
    comm_cycles: float
    """Exposed communication time of the critical PE: what compute did not hide."""
    idle_cycles: float
    """Time the critical PE neither computes nor communicates (waits on others)."""
    comm_busy_cycles: float
    """Sum of the durations of its communication ops (they may overlap compute)."""
    mean_compute_cycles: float
    mean_comm_cycles: float | None
    """None on large grids, where per-PE communication durations are not kept."""
    bytes_moved: float
    hop_bytes: float
    max_sram_bytes: int
    sram_capacity: int
    sram_peak_at: str
    max_routes: int
    route_capacity: int
    critical_pe: tuple[int, int]
    ops: list[OpTime] = field(default_factory=list[OpTime])
    simulation_seconds: float = 0.0
    host_lookup_bytes: int = 0
    """Rows looked up on the host (`tile.lookup`, a token embedding) and streamed in:
    their bytes on the host link (the table never reaches the wafer)."""
    host_lookup_cycles: float = 0.0
    """Their cycles on the host link, one wavelet per cycle (not in `cycles`: like every
    input, they are placed before the step starts)."""
    relayed_collectives: int = 0
    """Collectives that ran out of colors and relay through software (β per hop)."""
    exact: bool = True
    """Every loop iteration was stepped (functional mode, or timing mode with `exact`)."""
    extrapolated_loops: int = 0
    """Loop executions whose periodic tail was extrapolated (`plmr.runtime.steady`)."""
    extrapolated_iterations: int = 0
    """Loop iterations extrapolated instead of stepped (an outer loop's counts once)."""
    extrapolated_layers: int = 0
    """Layers of a model extrapolated instead of simulated (`MeshRuntime.layers`)."""
    extrapolated_stages: int = 0
    """Collective stages extrapolated instead of stepped (periodic chains of stages)."""
    simulated_layers: int = 0
    """Runs of a model's layer window simulated (stepped) with `MeshRuntime.layers`
    (0 without)."""
    host_in_bytes: float = 0.0
    """Bytes the host sent: the program's inputs placed on the grid (its constants, the
    program image, excluded)."""
    host_out_bytes: float = 0.0
    """Bytes handed back to the host: the results not kept on the wafer as state."""
    resident_bytes: int = 0
    """Bytes of named state kept on the wafer after the run (`plmr.runtime.state`)."""
    state_moved_bytes: float = 0.0
    """State re-placed on the wafer because a program reads it in another layout."""
    stage_layers: tuple[int, ...] = ()
    """Layers of each pipeline stage of a layered program, each stage a region of the
    wafer (`plmr.target.stages`); () when the program is not split into stages."""
    stage_hop_cycles: float = 0.0
    """Cycles of the activations' hops from one stage to the next (in `cycles`)."""
    stage_bytes: tuple[int, int] = (0, 0)
    """One layer's weights and the layer body's working set, bytes per PE, from which
    the stages were split (`plmr.stage_bytes`); (0, 0) when not recorded."""
    finish: FloatArray | None = None
    """Per-PE finishing times (not serialised)."""
    compute: FloatArray | None = None

    @staticmethod
    def build(
        program: str,
        device: Device,
        grid: tuple[int, int],
        mode: str,
        now: FloatArray,
        compute: FloatArray,
        comm: FloatArray | None,
        bytes_moved: float,
        hop_bytes: float,
        sram: SramReport,
        max_routes: int,
        ops: dict[str, OpTime],
        simulation_seconds: float,
    ) -> Report:
        idx = np.unravel_index(int(np.argmax(now)), now.shape)
        y, x = int(idx[0]), int(idx[1])
        total = float(now[y, x])
        busy = float(compute[y, x])
        # Without per-PE communication durations, all non-compute time counts as comm.
        comm_busy = float(comm[y, x]) if comm is not None else total - busy
        idle = max(0.0, total - busy - comm_busy)
        return Report(
            program=program,
            device=device.name,
            grid=grid,
            mode=mode,
            cycles=total,
            seconds=total / device.clock_hz,
            compute_cycles=busy,
            comm_cycles=max(0.0, total - busy - idle),
            idle_cycles=idle,
            comm_busy_cycles=comm_busy,
            mean_compute_cycles=float(compute.mean()),
            mean_comm_cycles=float(comm.mean()) if comm is not None else None,
            bytes_moved=bytes_moved,
            hop_bytes=hop_bytes,
            max_sram_bytes=sram.peak_bytes,
            sram_capacity=device.sram_bytes,
            sram_peak_at=sram.at,
            max_routes=max_routes,
            route_capacity=device.usable_colors,
            critical_pe=(y, x),
            ops=sorted(ops.values(), key=lambda o: -o.cycles),
            simulation_seconds=simulation_seconds,
            finish=now,
            compute=compute,
        )

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("finish")
        data.pop("compute")
        data["grid"] = list(self.grid)
        data["critical_pe"] = list(self.critical_pe)
        data["stage_layers"] = list(self.stage_layers)
        data["stage_bytes"] = list(self.stage_bytes)
        data["compute_efficiency"] = self.compute_efficiency
        return data

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2)

    @property
    def compute_efficiency(self) -> float:
        """Share of the end-to-end time the critical PE spends computing."""
        return self.compute_cycles / self.cycles if self.cycles else 0.0

    def summary(self) -> list[str]:
        def pct(v: float) -> str:
            return f"{100 * v / self.cycles:5.1f}%" if self.cycles else "  -  "

        lines = [
            f"program @{self.program} on {self.device} {self.grid[0]}x{self.grid[1]} "
            f"({self.mode} mode)",
            f"  time        {self.cycles:,.0f} cycles = {self.seconds * 1e6:,.3f} us",
            f"  compute     {self.compute_cycles:,.0f} cycles {pct(self.compute_cycles)}"
            f"  (critical PE {self.critical_pe})",
            f"  comm        {self.comm_cycles:,.0f} cycles {pct(self.comm_cycles)}",
            f"  idle        {self.idle_cycles:,.0f} cycles {pct(self.idle_cycles)}",
            f"  traffic     {self.bytes_moved:,.0f} B moved, {self.hop_bytes:,.0f} B·hops",
            f"  host link   {self.host_in_bytes:,.0f} B in, {self.host_out_bytes:,.0f} B out"
            + (
                f"  (state on the wafer: {self.resident_bytes:,} B"
                + (
                    f", {self.state_moved_bytes:,.0f} B re-placed)"
                    if self.state_moved_bytes
                    else ")"
                )
                if self.resident_bytes
                else ""
            ),
            f"  SRAM peak   {self.max_sram_bytes:,} of {self.sram_capacity:,} B per PE"
            + (f"  at `{self.sram_peak_at}`" if self.sram_peak_at else ""),
            f"  routes      {self.max_routes} of {self.route_capacity} colors per router"
            + (
                f" ({self.relayed_collectives} collective(s) relayed in software)"
                if self.relayed_collectives
                else ""
            ),
        ]
        if self.host_lookup_bytes:
            lines.append(
                f"  host lookup {self.host_lookup_bytes:,} B of rows streamed in, "
                f"{self.host_lookup_cycles:,.0f} cycles on the host link (before the step)"
            )
        if self.ops:
            lines.append("  time by op (PE (0, 0)):")
            for op in self.ops[:8]:
                lines.append(f"    {op.name:<18} x{op.count:<6} {op.cycles:>12,.0f} cycles")
        if self.extrapolated_iterations:
            lines.append(
                f"  steady state {self.extrapolated_iterations:,} loop iteration(s) of "
                f"{self.extrapolated_loops:,} loop run(s) extrapolated (--exact steps them)"
            )
        elif not self.exact:
            lines.append("  steady state no loop extrapolated")
        if self.extrapolated_stages:
            lines.append(
                f"  steady state {self.extrapolated_stages:,} collective stage(s) "
                "extrapolated"
            )
        if len(self.stage_layers) > 1:
            lines.append(
                f"  stages      {len(self.stage_layers)} regions of the wafer, layers "
                f"{'+'.join(str(n) for n in self.stage_layers)}, hops between them "
                f"{self.stage_hop_cycles:,.0f} cycles {pct(self.stage_hop_cycles)}"
            )
            if any(self.stage_bytes):
                weights, working = self.stage_bytes
                lines.append(
                    f"              a layer's weights {weights:,} B per PE beside "
                    f"{working:,} B of working set"
                )
        if self.simulated_layers:
            lines.append(
                f"  layers      the layer window simulated {self.simulated_layers} time(s), "
                f"extrapolated {self.extrapolated_layers} time(s) in the steady state"
            )
        lines.append(f"  simulated in {self.simulation_seconds:.2f} s")
        return lines
