"""
`mesh-check-limits`: the static PLMR check of mesh programs (the grid, router colors and
per-PE SRAM a program needs against its device's limits).

For every `mesh.program` it computes, without running it, the most colors any router
needs (R), the peak SRAM of one PE (M) and the longest message path in hops (L), records
them on the program as `plmr.check = {max_routes, max_sram_bytes, longest_path_hops}`,
and fails with a precise message when a device limit is exceeded.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import DictionaryAttr, IntegerAttr, ModuleOp, i64
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import DiagnosticException

from plmr.dialects import mesh
from plmr.errors import PlmrError
from plmr.passes.mesh_route import collectives_of, plan_of
from plmr.target.device import get_device
from plmr.target.route_plan import program_routing
from plmr.target.sram import spmd_sram


@dataclass(frozen=True)
class PlmrCheck:
    """The static PLMR figures of one program."""

    max_routes: int
    max_sram_bytes: int
    longest_path_hops: int
    sram_at: str


def check_program(program: mesh.ProgramOp, relay: bool = False) -> PlmrCheck:
    """Computes the figures; raises PlmrError if the program exceeds its device."""
    name = program.sym_name.data
    device = get_device(program.device.spec.data)
    rows, cols = program.grid_shape
    if rows > device.height or cols > device.width:
        raise PlmrError(
            f"@{name}: the {rows}x{cols} grid does not fit {device.name} "
            f"({device.height}x{device.width} PEs)"
        )
    # The routes mesh-route attached, checked to carry every collective (routed again
    # only if they do not).
    routing = program_routing(program, relay, device)
    counts = routing.table.colors_per_router()
    max_routes = int(counts.max()) if counts.size else 0
    if max_routes > device.usable_colors and not relay:
        raise PlmrError(
            f"@{name}: a router needs {max_routes} colors but {device.name} routes at most "
            f"{device.usable_colors}"
        )
    peak, at = 0, ""
    for spmd in [op for op in program.walk() if isinstance(op, mesh.SpmdOp)]:
        report = spmd_sram(spmd, device)
        if report.peak_bytes > peak:
            peak, at = report.peak_bytes, report.at
    if peak > device.sram_bytes:
        raise PlmrError(
            f"@{name}: every PE needs {peak} B of SRAM at `{at}`, but {device.name} has "
            f"{device.sram_bytes} B; use a larger grid or smaller blocks"
        )
    longest = 0
    for op in collectives_of(program):
        longest = max(longest, plan_of(op, program.grid_shape).max_hops())
    return PlmrCheck(max_routes, peak, longest, at)


@dataclass(frozen=True)
class MeshCheckLimitsPass(ModulePass):
    """
    Checks every `mesh.program` against its device's PLMR limits and records the figures.

    ```mlir
    mesh.program @gemm(...) -> tensor<64x64xf32> device "wse2" grid [4, 4] {...}
        {plmr.check = {longest_path_hops = 2 : i64, max_routes = 2 : i64, max_sram_bytes = 5120 : i64}}
    ```
    """

    name = "mesh-check-limits"

    relay: bool = False
    """Accept programs that need more colors than the device has (relayed in software)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for program in [p for p in op.walk() if isinstance(p, mesh.ProgramOp)]:
            try:
                check = check_program(program, self.relay)
            except PlmrError as e:
                raise DiagnosticException(f"{self.name}: {e}") from e
            program.attributes["plmr.check"] = DictionaryAttr(
                {
                    "max_routes": IntegerAttr(check.max_routes, i64),
                    "max_sram_bytes": IntegerAttr(check.max_sram_bytes, i64),
                    "longest_path_hops": IntegerAttr(check.longest_path_hops, i64),
                }
            )


@dataclass(frozen=True)
class MeshVerifyPlmrPass(MeshCheckLimitsPass):  # deprecated-alias
    """
    Deprecated: the pass under its former name, kept so existing pipelines still run.

    ```mlir
    // the same output as `plmr-opt -p mesh-check-limits`, with a DeprecationWarning
    ```
    """

    name = "mesh-verify-plmr"  # deprecated-alias

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        warnings.warn(
            "pass mesh-verify-plmr is deprecated; use mesh-check-limits",  # deprecated-alias
            DeprecationWarning,
            stacklevel=2,
        )
        super().apply(ctx, op)
