"""
`spmd_sram` (a sweep over the live intervals' ends) against the definition it computes
over the same intervals (`live_intervals`): at every op, the bytes of every value live
there plus the op's receive buffer; the peak is the first op where the most is live. Compared on the spmd bodies of compiled
examples and of the mesh kernels (peak, where, and the live set).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from xdsl.dialects.builtin import ModuleOp

from plmr.dialects import mesh
from plmr.dialects.context import make_context, parse_module
from plmr.lowering.kernels import gemm, gemv
from plmr.passes.pipeline import CompileOptions
from plmr.target import sram
from plmr.target.device import Device, get_device
from plmr.target.sram import SramReport, device_bytes, spmd_sram

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def reference_sram(spmd: mesh.SpmdOp, device: Device) -> SramReport:
    """The live set at every op, summed op by op (quadratic)."""
    intervals, events, _ = sram.live_intervals(spmd, device)
    report = SramReport()
    for point, op in events:
        live = [(v, s) for (b, e, v, s) in intervals if b <= point <= e]
        extra = 0
        if isinstance(op, mesh.CommOp) and op.results:
            extra = device_bytes(op.results[0], device)
        total = sum(s for _, s in live) + extra
        if total > report.peak_bytes:
            report.peak_bytes = total
            report.at = str(op).splitlines()[0].strip() if not op.regions else op.name
            names = ((sram._name(v), s) for v, s in live)  # pyright: ignore[reportPrivateUsage]
            report.live = sorted(names, key=lambda t: -t[1])
            if extra:
                report.live.append((f"receive buffer of {op.name}", extra))
    return report


def compiled(cache: Any, name: str, options: CompileOptions) -> ModuleOp:
    """`name` compiled with `options`, once per test session (the `compile_cache`)."""
    module = parse_module((EXAMPLES / name).read_text())
    return cache.compile(make_context(), module, options)


TINY_OPTIONS = CompileOptions(grid=(4, 4), tile_sizes=(8, 8))

PROGRAMS: dict[str, Callable[[Any], ModuleOp]] = {
    "meshgemm": lambda _: gemm("meshgemm", 12, 12, 12, (6, 6), "wse2").module,
    "summa": lambda _: gemm("summa", 12, 12, 12, (3, 4), "wse2").module,
    "gemv-ktree": lambda _: gemv("ktree", 16, 16, (8, 4), "wse2", k=3).module,
    # The decode step with TASO's fused projections and the prefill with its GEMMs,
    # compiled as test_steady's tiny LLaMA programs are (fixed blocks: one compile for
    # both tests in a session).
    "tiny-decode": lambda cache: compiled(cache, "llama/tiny_decode.mlir", TINY_OPTIONS),
    "tiny-prefill": lambda cache: compiled(cache, "llama/tiny_prefill.mlir", TINY_OPTIONS),
}


@pytest.mark.parametrize("name", PROGRAMS)
def test_sweep_equals_the_live_set_op_by_op(name: str, compile_cache: Any):
    module = PROGRAMS[name](compile_cache)
    spmds = [op for op in module.walk() if isinstance(op, mesh.SpmdOp)]
    assert spmds
    for device in (get_device("wse2"), get_device("wse2:elem_bytes=4")):
        for spmd in spmds:
            got, want = spmd_sram(spmd, device), reference_sram(spmd, device)
            assert want.peak_bytes > 0
            assert (got.peak_bytes, got.at, got.live) == (
                want.peak_bytes,
                want.at,
                want.live,
            )
