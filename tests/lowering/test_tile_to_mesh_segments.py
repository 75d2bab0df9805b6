"""Allreduces within the PEs that hold data (`lowering/tile_to_mesh/segments.py`)."""

from __future__ import annotations

import numpy as np
import pytest

from plmr.dialects import mesh
from plmr.dialects.context import make_context, parse_module
from plmr.lowering.tile_to_mesh import emit
from plmr.passes.pipeline import CompileOptions, compile_module
from plmr.runtime.mesh_machine import run_mesh

GEMV = """
func.func @gemv(%x: tensor<1xKxf32>, %w: tensor<KxNxf32>) -> tensor<1xNxf32> {
  %y = graph.matmul %x, %w : (tensor<1xKxf32>, tensor<KxNxf32>) -> tensor<1xNxf32>
  func.return %y : tensor<1xNxf32>
}
"""


GEMV_64 = GEMV.replace("K", "64").replace("N", "512")


def compiled(k: int, n: int, grid: tuple[int, int], segments: bool = True):
    text = GEMV.replace("K", str(k)).replace("N", str(n))
    opts = CompileOptions(
        grid=grid, device="wse2", substitute=False, tile_sizes=(n // grid[1], 1)
    )
    if segments:
        return compile_module(make_context(), parse_module(text), opts)
    saved = emit.segment_for
    emit.segment_for = lambda *_: None  # pyright: ignore[reportAttributeAccessIssue]
    try:
        return compile_module(make_context(), parse_module(text), opts)
    finally:
        emit.segment_for = saved


def allreduces(module) -> list[mesh.AllreduceOp]:  # pyright: ignore[reportMissingParameterType, reportUnknownParameterType]
    return [op for op in module.walk() if isinstance(op, mesh.AllreduceOp)]


@pytest.mark.parametrize(
    "k,n,grid,segment",
    [
        (64, 512, (256, 2), 64),  # 256 values on 64 of 256 PEs: the segment pays
        (24, 512, (96, 2), 24),
        (24, 64, (64, 2), None),  # 32 values: the multicast's extra step does not pay
        (40, 64, (64, 2), None),
    ],
)
def test_a_reduction_on_part_of_an_axis_allreduces_within_it(
    k: int, n: int, grid: tuple[int, int], segment: int | None
):
    rng = np.random.default_rng(k)
    x = rng.standard_normal((1, k)).astype(np.float32)
    w = rng.standard_normal((k, n)).astype(np.float32)
    module = compiled(k, n, grid)
    (ar,) = allreduces(module)
    assert ar.axis.data == "y"
    assert (None if ar.segment is None else ar.segment.value.data) == segment
    (got,), _ = run_mesh(module, [x, w])
    np.testing.assert_allclose(got, x @ w, rtol=1e-4, atol=1e-4)


def test_the_segment_is_faster_than_the_whole_axis():
    zeros = [np.zeros((1, 64), np.float32), np.zeros((64, 512), np.float32)]
    _, seg = run_mesh(compiled(64, 512, (256, 2)), zeros, mode="timing")
    whole_module = compiled(64, 512, (256, 2), segments=False)
    assert allreduces(whole_module)[0].segment is None
    _, whole = run_mesh(whole_module, zeros, mode="timing")
    assert seg.cycles < 0.9 * whole.cycles


def test_gemv_auto_takes_the_k_its_line_times_fastest():
    from plmr.lowering.tile_to_mesh import parse_options
    from plmr.lowering.tile_to_mesh.segments import AUTO_K, allreduce_choice
    from plmr.lowering.tile_to_mesh.segments import line_allreduce_cycles as line

    opts = parse_options((420, 2), "wse2", "meshgemm", "auto", 2)
    for elems, segment in ((1, None), (88, None), (320, 128), (320, None)):
        algorithm, k, groups = allreduce_choice(opts, "y", elems, segment)
        assert (algorithm, groups) == ("ktree", None)
        times = {j: line("wse2", 420, elems, "ktree", j, None, segment) for j in AUTO_K}
        assert times[k] == min(times.values())
    # On 420 PEs three phases beat two (e.g. 320 values: 2,226 cycles against 2,998).
    assert allreduce_choice(opts, "y", 320)[1] == 3
    fixed = parse_options((420, 2), "wse2", "meshgemm", "ktree", 2)
    assert allreduce_choice(fixed, "y", 320) == ("ktree", 2, None)


def test_gemv_auto_computes_the_same():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 64)).astype(np.float32)
    w = rng.standard_normal((64, 512)).astype(np.float32)
    opts = CompileOptions(
        grid=(256, 2), device="wse2", substitute=False, tile_sizes=(256, 1), gemv="auto"
    )
    module = compile_module(make_context(), parse_module(GEMV_64), opts)
    (ar,) = allreduces(module)
    assert ar.k.value.data == 3
    (got,), _ = run_mesh(module, [x, w])
    np.testing.assert_allclose(got, x @ w, rtol=1e-4, atol=1e-4)


def test_gemv_auto_falls_back_to_one_k_tree_when_colors_run_out():
    from plmr.lowering.tile_to_mesh import parse_options
    from plmr.lowering.tile_to_mesh.program import routable

    # Six usable colors: the K = 3 tree of the auto choice needs 8, K = 2 needs 6.
    opts = CompileOptions(
        grid=(256, 2),
        device="wse2:colors=9",
        substitute=False,
        tile_sizes=(256, 1),
        gemv="auto",
        route=False,
    )
    module = compile_module(make_context(), parse_module(GEMV_64), opts)
    (ar,) = allreduces(module)
    assert ar.k.value.data == 2
    programs = [op for op in module.ops if isinstance(op, mesh.ProgramOp)]
    assert routable(
        programs, parse_options((256, 2), "wse2:colors=9", "meshgemm", "ktree", 2)
    )
