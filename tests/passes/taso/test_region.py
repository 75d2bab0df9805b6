"""The changed region of a substitution, and the mesh guard that prices it."""

import math
from pathlib import Path

import pytest
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp

from plmr.dialects import graph
from plmr.dialects.context import load_module, parse_module
from plmr.passes.taso.guard import (
    BLOCKINGS,
    CLOSE,
    best_blocking,
    guard_prices,
    mesh_estimate,
)
from plmr.passes.taso.region import changed_regions
from plmr.passes.taso.substitute import cleanup, substitute_module

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"

CHAIN = """
func.func @main(%x: tensor<8x16xf32>, %w: tensor<16x16xf32>) -> tensor<8x16xf32> {
  %wb = graph.constant dense<0.25> : tensor<16x16xf32>
  %wc = graph.constant dense<0.5> : tensor<16x16xf32>
  %h = graph.relu %x : tensor<8x16xf32>
  %b = graph.matmul %h, %wb : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %c = graph.matmul %h, %wc : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %bc = graph.add %b, %c : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %s = graph.sigmoid %bc : tensor<8x16xf32>
  %y = graph.matmul %s, %w : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %z = graph.tanh %y : tensor<8x16xf32>
  func.return %z : tensor<8x16xf32>
}
"""


def names(module) -> list[str]:
    (fn,) = [op for op in module.ops if isinstance(op, func.FuncOp)]
    return [op.name for op in fn.body.block.ops]


def rewritten(module, grid=(4, 4)):
    """(the input, cleaned up as the guard sees it; the unguarded rewrite)."""
    before = module.clone()
    reports = substitute_module(
        module, budget=100, concats="constant", grid=grid, guard="none"
    )
    assert any(r.applied for r in reports)
    cleanup(before)
    return before, module


def test_the_region_is_the_changed_ops_with_their_neighbours():
    before = parse_module(CHAIN)
    after = before.clone()
    # b + c = h @ (wb + wc): one matmul on a folded weight.
    (fn,) = [op for op in after.ops if isinstance(op, func.FuncOp)]
    ops = list(fn.body.block.ops)
    h, b, c, bc = ops[2], ops[3], ops[4], ops[5]
    assert isinstance(bc, graph.AddOp)
    w = graph.ConstantOp(ops[1].value)  # any constant stands in for wb + wc
    m = graph.MatmulOp(h.results[0], w.results[0])
    fn.body.block.insert_ops_before([w, m], bc)
    bc.results[0].replace_all_uses_with(m.results[0])
    for op in (bc, c, b):
        op.detach()
        op.erase()
    regions = changed_regions(before, after, margin=1)
    assert regions is not None
    # The changed ops, the relu producing their input and the sigmoid reading their
    # output; neither the last matmul nor the tanh, which the rewrite leaves as they were.
    assert names(regions[0]) == [
        "graph.constant",
        "graph.relu",
        "graph.matmul",
        "graph.constant",
        "graph.matmul",
        "graph.add",
        "graph.sigmoid",
        "func.return",
    ]
    # (`%wb`, no longer read, is the twin of a producer of the changed ops.)
    assert names(regions[1]) == [
        "graph.constant",
        "graph.relu",
        "graph.constant",
        "graph.matmul",
        "graph.sigmoid",
        "func.return",
    ]
    for region in regions:
        region.verify()
        (fn,) = [op for op in region.ops if isinstance(op, func.FuncOp)]
        assert [str(t) for t in fn.function_type.inputs] == ["tensor<8x16xf32>"]
    # Two steps of context reach the last matmul (reading the sigmoid), not the tanh.
    wider = changed_regions(before, after, margin=2)
    assert wider is not None
    assert names(wider[0])[-3:] == ["graph.sigmoid", "graph.matmul", "func.return"]
    assert names(wider[1])[-3:] == ["graph.sigmoid", "graph.matmul", "func.return"]


def test_an_unchanged_program_has_no_region_and_unpairable_ones_are_refused():
    before = parse_module(CHAIN)
    empty = changed_regions(before, before.clone())
    assert empty is not None
    assert [list(m.ops) for m in empty] == [[], []]
    other = parse_module(CHAIN.replace("@main", "@other"))
    assert changed_regions(before, other) is None


@pytest.fixture(
    scope="module",
    # The guard refuses rnn_cell's merged gates and keeps attention's fused projections
    # (tests/passes/taso/test_search.py).
    params=["rnn_cell", "attention"],
)
def guarded(
    request: pytest.FixtureRequest,
) -> tuple[ModuleOp, ModuleOp, tuple[float, float]]:
    """
    An example before and after its unguarded rewrite, and the region guard's prices of
    both: rewritten and priced once for the two tests below.
    """
    before, after = rewritten(load_module(EXAMPLES / "onnx" / f"{request.param}.mlir"))
    return before, after, guard_prices(before, after, (4, 4), "wse2")


def test_the_region_guard_decides_as_the_whole_program_guard(guarded):
    before, after, region = guarded
    regions = changed_regions(before, after)
    assert regions is not None
    whole = (mesh_estimate(before, (4, 4), "wse2"), mesh_estimate(after, (4, 4), "wse2"))
    # Priced on the region (fewer ops than the program), with the same decision.
    assert sum(1 for _ in regions[0].walk()) < sum(1 for _ in before.walk())
    assert region != whole
    assert (region[1] < region[0]) == (whole[1] < whole[0])


def exhaustive_guard(before, after, grid=(4, 4)) -> bool:
    """The guard's decision from every blocking of both versions priced (the reference)."""
    regions = changed_regions(before, after)
    if regions is not None:
        old = mesh_estimate(regions[0], grid, "wse2")
        new = mesh_estimate(regions[1], grid, "wse2")
        if (
            math.isfinite(old)
            and math.isfinite(new)
            and abs(new - old) > CLOSE * max(old, new)
        ):
            return new < old
    return mesh_estimate(after, grid, "wse2") < mesh_estimate(before, grid, "wse2")


def test_the_guard_stopping_early_decides_as_pricing_every_blocking(guarded):
    before, after, priced = guarded
    assert (priced[1] < priced[0]) == exhaustive_guard(before, after)


def test_a_blocking_search_started_from_the_winner_stops_at_it():
    module = load_module(EXAMPLES / "onnx" / "attention.mlir")
    full = best_blocking(module, (4, 4), "wse2")
    assert full.blocking in BLOCKINGS
    assert math.isfinite(full.cycles)
    assert full.cycles == mesh_estimate(module, (4, 4), "wse2")
    # Any estimate stops the search: the first blocking tried is the one given.
    for first in (full.blocking, BLOCKINGS[-1]):
        one = best_blocking(module, (4, 4), "wse2", first, math.inf)
        assert one.blocking == first
        assert one.cycles >= full.cycles
    # Never below the best: the search runs through every blocking and finds it.
    assert best_blocking(module, (4, 4), "wse2", BLOCKINGS[-1], 0.0).cycles == full.cycles
