"""`mesh-fuse-softmax`: one softmax allreduce computes what the max and sum allreduces did."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects.builtin import DenseArrayBase, ModuleOp, i64

from plmr.dialects import mesh
from plmr.dialects.context import make_context, parse_module
from plmr.dialects.printing import module_text
from plmr.errors import PlmrError
from plmr.models.nests import count_ops
from plmr.passes.mesh_softmax import fuse_softmax, match_chain, saved_cycles
from plmr.passes.pipeline import CompileOptions, compile_module
from plmr.runtime.mesh_machine import find_program, run_mesh
from plmr.runtime.running import random_inputs
from plmr.target.device import get_device

HAND_WRITTEN = Path(__file__).parents[1] / "filecheck" / "passes" / "mesh-fuse-softmax.mlir"

ATTENTION = """
func.func @main(%q: tensor<1x1x48x16xf32>, %k: tensor<1x1x48x16xf32>, %v: tensor<1x1x48x16xf32>, %mask: tensor<48x48xf32>) -> tensor<1x1x48x16xf32> {
  %s = graph.matmul %q, %k transpose_b : (tensor<1x1x48x16xf32>, tensor<1x1x48x16xf32>) -> tensor<1x1x48x48xf32>
  %ss = graph.scale %s by 0.25 : tensor<1x1x48x48xf32>
  %sm = graph.add %ss, %mask : (tensor<1x1x48x48xf32>, tensor<48x48xf32>) -> tensor<1x1x48x48xf32>
  %p = graph.softmax %sm : tensor<1x1x48x48xf32>
  %o = graph.matmul %p, %v : (tensor<1x1x48x48xf32>, tensor<1x1x48x16xf32>) -> tensor<1x1x48x16xf32>
  func.return %o : tensor<1x1x48x16xf32>
}
"""


def _programs(module: ModuleOp) -> list[str]:
    return [op.sym_name.data for op in module.ops if isinstance(op, mesh.ProgramOp)]


def _run(module: ModuleOp, name: str, seed: int, scale: float = 1.0) -> list[np.ndarray]:
    program = find_program(module, name)
    inputs = [x * scale for x in random_inputs(program, seed)]
    out, _ = run_mesh(module, inputs, name=name)
    return out


@pytest.mark.parametrize(("seed", "scale"), [(0, 1.0), (1, 1.0), (2, 30.0)])
def test_hand_written_programs_compute_the_same(seed: int, scale: float):
    # scale 30: scores far apart, so the PEs' maxima differ and the rescaling matters.
    text = HAND_WRITTEN.read_text()
    before, after = parse_module(text), parse_module(text)
    # 4 PEs: @split (k = 3) is slower fused by the runtime's timing, @unweighted not.
    assert fuse_softmax(after) == 1
    assert fuse_softmax(after, always=True) == 1  # then @split; @ring is refused
    after.verify()
    for name in _programs(before):
        want, got = _run(before, name, seed, scale), _run(after, name, seed, scale)
        for w, g in zip(want, got, strict=True):
            np.testing.assert_allclose(g, w, rtol=2e-6, atol=1e-6)
    assert count_ops(before).allreduces == 8
    assert count_ops(after).allreduces == 5  # @split 3 -> 1, @ring 2, @unweighted 3 -> 2


def test_running_twice_changes_nothing_more():
    module = parse_module(HAND_WRITTEN.read_text())
    fuse_softmax(module, always=True)
    once = module_text(module)
    assert fuse_softmax(module, always=True) == 0
    assert module_text(module) == once


@pytest.mark.parametrize(("grid", "tiles"), [((3, 3), (8, 8)), ((2, 4), (4, 4))])
def test_compiled_attention_is_unchanged_and_not_slower(
    grid: tuple[int, int], tiles: tuple[int, int]
):
    # The split-K repair of a rolling softmax (keys over y): off vs on, same inputs.
    results: list[tuple[list[np.ndarray], float, int]] = []
    for fuse in (False, True):
        module = parse_module(ATTENTION)
        opts = CompileOptions(
            grid=grid, tile_sizes=tiles, substitute=False, fuse_softmax=fuse
        )
        compile_module(make_context(), module, opts)
        program = find_program(module, "main")
        out, report = run_mesh(module, random_inputs(program, 3), name="main")
        results.append((out, report.cycles, count_ops(module).allreduces))
    (want, off_cycles, off_count), (got, on_cycles, on_count) = results
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6)
    # On 2 or 3 PEs per line the timing keeps the three allreduces.
    assert on_count == off_count
    assert on_cycles <= off_cycles


def test_the_timing_fuses_where_the_line_is_long():
    # The chain of the hand-written @split (4 rows, [m, l, o] of 5 values) on 4 PEs
    # and, re-planned, on 420: fused it is slower on the short line, faster on the long.
    module = parse_module(HAND_WRITTEN.read_text())
    chains = [
        c
        for op in module.walk()
        if isinstance(op, mesh.AllreduceOp)
        for c in [match_chain(op)]
        if c is not None
    ]
    dev = get_device("wse2")
    assert saved_cycles(chains[0], dev) < 0
    program = chains[0].maximum.parent_op()
    while not isinstance(program, mesh.ProgramOp):
        assert program is not None
        program = program.parent_op()
    program.grid = DenseArrayBase.from_list(i64, [1, 420])
    assert saved_cycles(chains[0], dev) > 200


def test_a_softmax_allreduce_needs_rows_and_no_ring():
    def program(body: str, shape: str) -> str:
        return f"""
mesh.program @p(%a: tensor<{shape}xf32>) -> tensor<{shape}xf32> device "test-small" grid [1, 4] {{
  %d = mesh.scatter %a : tensor<{shape}xf32> -> !mesh.dist<tensor<{shape}xf32>, #mesh.layout<[-, -]>>
  %r = mesh.spmd(%d) : (!mesh.dist<tensor<{shape}xf32>, #mesh.layout<[-, -]>>) -> !mesh.dist<tensor<{shape}xf32>, #mesh.layout<[-, -]>> {{
  ^bb0(%y: index, %x: index, %b: tensor<{shape}xf32>):
    %s = {body} : tensor<{shape}xf32>
    mesh.yield %s : tensor<{shape}xf32>
  }}
  %o = mesh.gather %r : !mesh.dist<tensor<{shape}xf32>, #mesh.layout<[-, -]>> -> tensor<{shape}xf32>
  mesh.return %o : tensor<{shape}xf32>
}}
"""

    parse_module(program("mesh.allreduce softmax %b axis x", "4x3")).verify()
    with pytest.raises(PlmrError, match=r"rows \[m, l, o...\].*got shape \[4, 1\]"):
        parse_module(program("mesh.allreduce softmax %b axis x", "4x1"))
    with pytest.raises(PlmrError, match="cannot use the ring algorithm"):
        parse_module(program("mesh.allreduce softmax %b axis x algorithm ring", "4x3"))
