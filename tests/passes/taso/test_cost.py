"""The analytic wafer cost model."""

import pytest

from plmr.dialects.context import parse_module
from plmr.errors import PlmrError
from plmr.passes.taso.cost import CostModel
from plmr.passes.taso.dag import DagContext, import_function
from plmr.target.device import get_device


@pytest.fixture(scope="module")
def wse2():
    return CostModel(get_device("wse2"))


def test_every_op_pays_a_launch_so_merging_matmuls_pays(wse2):
    two = 2 * wse2.matmul(1, 64, 256, 256)
    merged = wse2.matmul(1, 64, 256, 512) + wse2.move(64 * 512)
    assert merged < two
    assert wse2.launch(1) > 0


def test_matmul_cost_grows_with_work(wse2):
    assert wse2.matmul(1, 64, 64, 64) < wse2.matmul(1, 512, 512, 512)
    assert wse2.matmul(1, 64, 64, 64) < wse2.matmul(8, 64, 64, 64)


def test_wider_simd_is_no_slower():
    # A 16-wide block row is SRAM-bound on both (the runtime's dot); elementwise
    # work is not.
    big = (1, 2048, 2048, 2048)
    wse3, wse2 = CostModel(get_device("wse3")), CostModel(get_device("wse2"))
    assert wse3.matmul(*big) <= wse2.matmul(*big)
    assert wse3.elementwise(1 << 24, 1.0) < wse2.elementwise(1 << 24, 1.0)


@pytest.mark.parametrize(("rows", "k", "n"), [(4, 16, 8), (16, 16, 16), (2, 8, 4)])
def test_a_block_product_is_the_runtimes_dot(rows: int, k: int, n: int):
    from xdsl.dialects.builtin import TensorType, f16
    from xdsl.ir import Block

    from plmr.dialects import tile
    from plmr.target.op_cost import op_cycles

    dev = get_device("wse2")
    block = Block(arg_types=[TensorType(f16, [rows, k]), TensorType(f16, [k, n])])
    dot = tile.DotOp(block.args[0], block.args[1])
    assert CostModel(dev, (4, 4)).block_product(rows, k, n) == op_cycles(dev, dot)


def test_once_every_pe_has_a_block_more_blocks_cost_in_proportion():
    model = CostModel(get_device("wse2"), (1, 2))
    # 16 row blocks of 16 over 2 PEs: 8 per PE; twice the rows, twice the blocks.
    one = model.matmul(1, 256, 16, 16) - model.launch(2)
    two = model.matmul(1, 512, 16, 16) - model.launch(2)
    assert two == pytest.approx(2 * one)


def test_a_split_reduction_pays_the_allreduce():
    model = CostModel(get_device("wse2"), (1, 4))
    # One output block, a long reduction: split over the 4 columns with an allreduce.
    split = model.matmul(1, 16, 4096, 16)
    alone = model.block_product(16, 16, 16) * (4096 // 16) + model.launch(1)
    assert split < alone
    assert split > alone / 4


def test_a_small_mesh_is_slower_for_big_matmuls():
    assert CostModel(get_device("test-small")).matmul(1, 512, 512, 512) > CostModel(
        get_device("wse2")
    ).matmul(1, 512, 512, 512)


def test_transpose_costs_corner_to_corner_traffic(wse2):
    assert wse2.transpose(1024 * 1024) > wse2.transpose(64 * 64) > wse2.launch(1)


def _dag(text: str):
    module = parse_module(text)
    fn = next(iter(module.ops))
    dag = import_function(fn, DagContext())
    assert dag is not None
    return dag


def test_context_rules(wse2):
    dag = _dag(
        """
        func.func @f(%x: tensor<64x64xf32>, %w: tensor<64x64xf32>) -> (tensor<64x64xf32>, tensor<64x64xf32>) {
          %c = graph.constant dense<1.0> : tensor<64x64xf32>
          %ct = graph.transpose %c perm = [1, 0] : tensor<64x64xf32> -> tensor<64x64xf32>
          %m = graph.matmul %x, %w transpose_b : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
          %r = graph.relu %m : tensor<64x64xf32>
          %a = graph.add %r, %ct : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
          %s = graph.relu %a : tensor<64x64xf32>
          func.return %s, %a : tensor<64x64xf32>, tensor<64x64xf32>
        }
        """
    )
    folded = wse2.folded_nodes(dag)
    costs = {dag.nodes[n].kind: [] for n in dag.nodes}
    for n in dag.order():
        costs[dag.nodes[n].kind].append(wse2.node_cost(dag, n, folded))
    # The weight transpose is folded at compile time, the transpose_b flag is free.
    assert costs["transpose"] == [0.0, 0.0]
    # The relu right after the matmul runs in its epilogue, the later one in the nest the
    # loop level's map fusion puts it in: compute only, both.
    epilogue, fused = costs["relu"]
    assert 0 < epilogue == fused
    assert wse2.graph_cost(dag) == pytest.approx(sum(sum(v) for v in costs.values()))


def test_an_elementwise_op_of_arguments_only_pays_a_launch(wse2):
    dag = _dag(
        """
        func.func @f(%x: tensor<64x64xf32>, %y: tensor<64x64xf32>) -> tensor<64x64xf32> {
          %a = graph.add %x, %y : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
          %b = graph.add %a, %y : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
          func.return %b : tensor<64x64xf32>
        }
        """
    )
    folded = wse2.folded_nodes(dag)
    first, second = (wse2.node_cost(dag, n, folded) for n in dag.order()[-2:])
    assert first - second == pytest.approx(wse2.launch(64 * 64))


def test_the_grid_bounds_the_cores():
    small = CostModel(get_device("wse2"), (4, 4))
    assert small.cores == 16
    assert small.matmul(1, 256, 256, 256) > CostModel(get_device("wse2")).matmul(
        1, 256, 256, 256
    )
    with pytest.raises(PlmrError, match="at least 1x1"):
        CostModel(get_device("wse2"), (0, 4))


def test_an_op_that_carries_its_meaning_costs_its_scalar_body(wse2):
    """`graph.sinh` is `(e^x - e^-x) / 2`: two exps, a negation, a subtraction, a product."""
    from plmr.passes.taso.cost import ELEMENT_WORK
    from plmr.target.op_cost import TRANSCENDENTAL_COST

    sinh = ELEMENT_WORK["opaque:graph.sinh"]
    assert sinh == ELEMENT_WORK["opaque:graph.cosh"] == 2 * TRANSCENDENTAL_COST + 3
    unit = wse2.op_cost("opaque:graph.sinh", (), [(64, 64)], [(64, 64)])
    default = wse2.op_cost("opaque:graph.unknown", (), [(64, 64)], [(64, 64)])
    assert unit > default
