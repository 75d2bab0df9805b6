"""
Rotations over padded chunks or a padded last block (`fit_tiles`): a GEMM whose sizes
divide neither the grid nor the lcm of its sides, on PEs too small for anything but a
rotation, runs equal to the reference; without `fit_tiles` the same program is refused
as before.
"""

from __future__ import annotations

import numpy as np
import pytest

from plmr.dialects.context import make_context, parse_module
from plmr.errors import PlmrError
from plmr.lowering.tile_to_mesh import NestPlan
from plmr.passes.pipeline import CompileOptions, compile_module
from plmr.runtime.mesh_machine import run_mesh
from plmr.runtime.running import random_inputs, run_function, select_function


def _gemm(m: int, k: int, n: int, exp: bool) -> str:
    a, b, c = f"tensor<{m}x{k}xf32>", f"tensor<{k}x{n}xf32>", f"tensor<{m}x{n}xf32>"
    if not exp:
        return f"""
        func.func @main(%a: {a}, %b: {b}) -> {c} {{
          %c = graph.matmul %a, %b : ({a}, {b}) -> {c}
          func.return %c : {c}
        }}"""
    # exp of both operands runs inside the rotation: a padded block would add 1·1.
    return f"""
    func.func @main(%a: {a}, %b: {b}) -> {c} {{
      %ea = graph.exp %a : {a}
      %eb = graph.exp %b : {b}
      %c = graph.matmul %ea, %eb : ({a}, {b}) -> {c}
      func.return %c : {c}
    }}"""


CASES = [
    # (M, K, N), grid, SRAM KiB, gemm, exp
    ((40, 148, 44), (3, 3), 13, "meshgemm", True),
    ((40, 148, 44), (3, 3), 13, "cannon", False),
    ((40, 148, 44), (3, 3), 13, "summa", True),
    ((42, 79, 120), (2, 4), 16, "meshgemm", True),
    ((42, 79, 120), (2, 4), 16, "summa", False),
]


@pytest.mark.parametrize(
    ("sizes", "grid", "kib", "gemm", "exp"),
    CASES,
    ids=[f"{'x'.join(map(str, c[0]))}-{c[1][0]}x{c[1][1]}-{c[3]}" for c in CASES],
)
def test_padded_rotation_matches_reference(
    sizes: tuple[int, int, int], grid: tuple[int, int], kib: int, gemm: str, exp: bool
):
    module = parse_module(_gemm(*sizes, exp))
    fn = select_function(module, None)
    inputs = random_inputs(fn, 3)
    want = run_function(module, fn, inputs)
    opts = CompileOptions(
        grid=grid,
        device=f"wse2:sram_kib={kib}",
        substitute=False,
        fit_tiles=True,
        gemm=gemm,
    )
    plans: list[NestPlan] = []
    compiled = compile_module(make_context(), module.clone(), opts, plans=plans)
    (plan,) = [p for p in plans if p.name == "c"]
    assert plan.mode == "rotate"
    # The reduction's blocks do not divide into lcm(P, Q) chunks (the last chunks are
    # padded), or its blocks do not divide it (the last block is padded, its loads
    # limited in each step's chunk).
    chunks, blocks = int(np.lcm(*grid)), plan.loops[-1][1]
    assert blocks % chunks != 0 or sizes[1] % blocks != 0
    got, _ = run_mesh(compiled, inputs, mode="functional")
    scale = max(1.0, float(np.max(np.abs(want[0]))))
    np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-5 * scale)


def test_without_fit_tiles_the_rotation_is_refused():
    module = parse_module(_gemm(40, 148, 44, False))
    opts = CompileOptions(grid=(3, 3), device="wse2:sram_kib=13", substitute=False)
    with pytest.raises(PlmrError, match="does not fit a 3x3 grid"):
        compile_module(make_context(), module, opts)
