"""`taso-substitute`: matching, applying and searching, on small graphs and examples."""

from pathlib import Path

import numpy as np
import pytest

from plmr.dialects import graph
from plmr.dialects.context import load_module, make_context, parse_module
from plmr.errors import PlmrError
from plmr.passes.taso.dag import DagContext, import_function
from plmr.passes.taso.matcher import apply_match, directions, find_matches
from plmr.passes.taso.rules import load_rules
from plmr.passes.taso.substitute import TasoSubstitutePass, substitute_module
from plmr.runtime.reference import evaluate_function
from plmr.runtime.running import random_inputs, select_function

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def count(module, cls) -> int:
    return sum(1 for op in module.walk() if isinstance(op, cls))


def run_and_compare(module, **options):
    fn = select_function(module, None)
    args = random_inputs(fn, 0)
    before = evaluate_function(module, fn.sym_name.data, args)
    reports = substitute_module(module, **options)
    module.verify()
    after = evaluate_function(module, fn.sym_name.data, args)
    for a, b in zip(before, after, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    return reports


def test_rnn_cell_matmul_count_drops():
    module = load_module(EXAMPLES / "onnx" / "rnn_cell.mlir")
    assert count(module, graph.MatmulOp) == 6
    (report,) = run_and_compare(module, budget=60)
    assert count(module, graph.MatmulOp) <= 3
    assert report.best_cost < report.initial_cost
    assert report.applied


def test_qkv_projections_are_fused():
    module = load_module(EXAMPLES / "onnx" / "attention.mlir")
    assert count(module, graph.MatmulOp) == 6
    run_and_compare(module, budget=40)
    # Q, K and V become one matmul of the shared input; scores and output stay.
    assert count(module, graph.MatmulOp) == 4
    assert count(module, graph.SplitOp) >= 1


SCALED = """
func.func @main(%x: tensor<8x16xf32>) -> tensor<8x32xf32> {
  %w = graph.constant dense<0.5> : tensor<16x32xf32>
  %m = graph.matmul %x, %w : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %s = graph.scale %m by 0.125 : tensor<8x32xf32>
  func.return %s : tensor<8x32xf32>
}
"""


def test_scale_is_distributed_into_constant_weights():
    module = parse_module(SCALED)
    run_and_compare(module, budget=20)
    assert count(module, graph.ScaleOp) == 0
    const = next(op for op in module.walk() if isinstance(op, graph.ConstantOp))
    assert const.value.get_values()[0] == 0.0625


def test_budget_zero_changes_nothing():
    module = parse_module(SCALED)
    (report,) = substitute_module(module, budget=0)
    assert report.explored == 0
    assert report.applied == ()
    assert count(module, graph.ScaleOp) == 1


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"alpha": 0.0}, "alpha must be positive"),
        ({"budget": -1}, "budget must be >= 0"),
        ({"device": "gpu"}, "unknown device 'gpu'"),
        ({"rules": "/nonexistent.mlir"}, "no such rule file"),
        ({"concats": "some"}, "unknown concats 'some'"),
    ],
)
def test_bad_options_are_user_errors(options, message):
    with pytest.raises(PlmrError, match=message):
        substitute_module(parse_module(SCALED), **options)


def test_pass_options_parse():
    from xdsl.passes import PassPipeline

    from plmr.passes import get_all_passes

    pipeline = PassPipeline.parse_spec(
        {name: f for name, f in get_all_passes().items()},
        'taso-substitute{alpha=1.1 budget=5 device="wse3"}',
    )
    (p,) = pipeline.passes
    assert p == TasoSubstitutePass(alpha=1.1, budget=5, device="wse3")
    module = parse_module(SCALED)
    p.apply(make_context(), module)
    assert count(module, graph.ScaleOp) == 0


CYCLE = """
func.func @main(%x: tensor<4x4xf32>, %w: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %a = graph.matmul %x, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %r = graph.relu %a : tensor<4x4xf32>
  %b = graph.matmul %x, %r : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %c = graph.add %a, %b : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  func.return %c : tensor<4x4xf32>
}
"""


def test_a_match_that_would_close_a_cycle_is_not_applied():
    module = parse_module(CYCLE)
    fn = next(iter(module.ops))
    dag = import_function(fn, DagContext())
    assert dag is not None
    dag.graph_hash()
    merge = [
        d
        for d in directions(load_rules())
        if d.frm.kinds() == ["matmul", "matmul"] and d.to.kinds()[-1] == "split"
    ]
    assert merge
    matches = [m for d in merge for m in find_matches(dag, d)]
    # matmul(x, w) and matmul(x, relu(matmul(x, w))) share x, but merging them would
    # make the concatenated weights depend on the merged matmul itself.
    assert matches
    assert all(apply_match(dag, m) is None for m in matches)


SHARED = """
func.func @main(%x: tensor<4x4xf32>, %w1: tensor<4x4xf32>, %w2: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %a = graph.matmul %x, %w1 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %b = graph.matmul %x, %w2 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %s = graph.add %a, %b : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  func.return %s, %a : tensor<4x4xf32>, tensor<4x4xf32>
}
"""


def test_intermediate_values_used_outside_block_a_rewrite():
    module = parse_module(SHARED)
    dag = import_function(next(iter(module.ops)), DagContext())
    assert dag is not None
    dag.graph_hash()
    distribute = [
        d
        for d in directions(load_rules())
        if d.frm.kinds() == ["matmul", "matmul", "add"]
        and d.to.kinds() == ["add", "matmul"]
    ]
    matches = [m for d in distribute for m in find_matches(dag, d)]
    assert matches
    # %a is also returned, so add(x·w1, x·w2) -> x·(w1 + w2) would lose it.
    assert all(apply_match(dag, m) is None for m in matches)


PROJECTIONS = """
func.func @main(%x: tensor<4x16xf32>, %wa: tensor<16x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %wb = graph.constant dense<0.25> : tensor<16x8xf32>
  %wc = graph.constant dense<0.5> : tensor<16x8xf32>
  %a = graph.matmul %x, %wa : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  %b = graph.matmul %x, %wb : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  %c = graph.matmul %x, %wc : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  %bc = graph.add %b, %c : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %a, %bc : tensor<4x8xf32>, tensor<4x8xf32>
}
"""


def test_constant_concats_fuse_weights_but_join_no_computed_values():
    """
    `concats=constant` keeps only results whose concatenations fold into constants:
    the two constant projections may fuse, the argument weight never joins them.
    """
    from plmr.passes.taso.search import folded_concats_only

    free = parse_module(PROJECTIONS)
    run_and_compare(free, budget=30)
    # Unrestricted, the search joins the argument weight with the folded constants.
    (joined,) = [op for op in free.walk() if isinstance(op, graph.ConcatOp)]
    assert any(v.name_hint == "wa" for v in joined.operands)
    module = parse_module(PROJECTIONS)
    run_and_compare(module, budget=30, concats="constant")
    assert count(module, graph.ConcatOp) == 0
    for op in module.walk():
        if isinstance(op, graph.MatmulOp):
            assert isinstance(op.rhs.owner, graph.ConstantOp) or op.rhs.name_hint == "wa"
    fn = select_function(module, None)
    dag = import_function(fn, DagContext())
    assert dag is not None
    assert folded_concats_only(dag)


def test_the_mesh_guard_keeps_the_input_unless_the_mesh_is_faster():
    from plmr.passes.taso.guard import mesh_estimate

    # rnn_cell's gates: the cost model merges their matmuls, the mesh partitioner
    # estimates the merged program slower on 4x4 (blocks of 4 columns per PE either way).
    module = load_module(EXAMPLES / "onnx" / "rnn_cell.mlir")
    before = mesh_estimate(module, (4, 4), "wse2")
    unguarded = module.clone()
    (free,) = substitute_module(
        unguarded, budget=100, concats="constant", grid=(4, 4), guard="none"
    )
    assert free.applied
    assert count(unguarded, graph.MatmulOp) < 6
    assert mesh_estimate(unguarded, (4, 4), "wse2") >= before
    (report,) = run_and_compare(module, budget=100, concats="constant", grid=(4, 4))
    assert report.applied == ()
    assert report.extraction == "mesh guard"
    assert count(module, graph.MatmulOp) == 6


def test_the_mesh_guard_keeps_a_rewrite_the_mesh_runs_faster():
    from plmr.passes.taso.guard import mesh_estimate

    module = load_module(EXAMPLES / "onnx" / "attention.mlir")
    before = mesh_estimate(module, (4, 4), "wse2")
    (report,) = run_and_compare(module, budget=100, concats="constant", grid=(4, 4))
    assert report.applied
    assert mesh_estimate(module, (4, 4), "wse2") < before


def test_an_unknown_guard_is_refused():
    with pytest.raises(PlmrError, match="unknown guard 'sim'"):
        substitute_module(parse_module(SCALED), guard="sim")
