"""
Programs `plmr fuzz` found failing, minimised, each compiled with every pass checked
(they must now compile and keep their results, or be refused cleanly).
"""

import pytest

from plmr.validate.fuzz.driver import Config, run_case

SCALAR_GATHER = """
func.func @main(%i: tensor<i32>, %x: tensor<4xf32>) -> tensor<f32> {
  %g = graph.gather %x, %i axis = -1 : (tensor<4xf32>, tensor<i32>) -> tensor<f32>
  func.return %g : tensor<f32>
}
"""

SCALAR_SUM = """
func.func @main(%x: tensor<4xf32>) -> tensor<f32> {
  %s = graph.reduce sum %x axes = [0] : tensor<4xf32> -> tensor<f32>
  func.return %s : tensor<f32>
}
"""

VECTOR_ROTATION = """
func.func @main(%x: tensor<5xf32>) -> tensor<6xf32> {
  %a, %b = graph.split %x axis = 0 sizes = [3, 2] : tensor<5xf32> -> (tensor<3xf32>, tensor<2xf32>)
  %n = graph.neg %b : tensor<2xf32>
  %c = graph.concat %n, %a, %a axis = 0 : (tensor<2xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<8xf32>
  %s = graph.slice %c starts = [0] ends = [6] steps = [1] : tensor<8xf32> -> tensor<6xf32>
  func.return %s : tensor<6xf32>
}
"""

MASKED_POOL = """
func.func @main(%0: tensor<1x4x5x2xf32>) -> tensor<5x6x4x2xf32> {
  %1 = graph.pad %0 pads = [2, 2, 0, 0, 2, 0, 1, 2] mode = constant value = 0xfff0000000000000 : tensor<1x4x5x2xf32> -> tensor<5x6x6x4xf32>
  %2 = graph.pool max %1 kernel = [3, 3] : tensor<5x6x6x4xf32> -> tensor<5x6x4x2xf32>
  func.return %2 : tensor<5x6x4x2xf32>
}
"""

CONCAT_GATHER = """
func.func @main(%x: tensor<4x3x2xf32>, %c: tensor<2x3x2xf32>) -> tensor<1x2x2xf32> {
  %j = graph.concat %c, %x axis = 0 : (tensor<2x3x2xf32>, tensor<4x3x2xf32>) -> tensor<6x3x2xf32>
  %i = graph.constant dense<[[[-1, 0], [-1, -1]]]> : tensor<1x2x2xi64>
  %g = graph.gather_elements %j, %i axis = 2 : (tensor<6x3x2xf32>, tensor<1x2x2xi64>) -> tensor<1x2x2xf32>
  func.return %g : tensor<1x2x2xf32>
}
"""

SLICES_OF_TWO_SIZES = """
builtin.module {
  func.func @main(%x0: tensor<3x2xf32>) -> (tensor<4x8xf32>, tensor<3x8xf32>) {
    %n1 = loop.nest (%i0, %i1) to (2, 2) [parallel, parallel] -> tensor<2x2xf32> {
      %c1 = arith.constant 2 : index
      %r2 = loop.read %x0[%c1, %i1] : tensor<3x2xf32>
      %c4 = arith.constant 2 : index
      %c5 = arith.constant 1 : index
      %k6 = arith.constant 5.000000e-01 : f32
      %a7 = math.absf %k6 : f32
      %one8 = arith.constant 1.000000e+00 : f32
      %d9 = arith.addf %a7, %one8 : f32
      %v3 = arith.divf %r2, %d9 : f32
      %c11 = arith.constant 0 : index
      %r12 = loop.read %x0[%c11, %i1] : tensor<3x2xf32>
      %c14 = arith.constant 0 : index
      %r15 = loop.read %x0[%c14, %i0] : tensor<3x2xf32>
      %v13 = arith.minimumf %r12, %r15 : f32
      %v10 = arith.addf %v3, %v13 : f32
      loop.yield %v10 : f32
    }
    %n2 = loop.nest (%i0_1, %i1_1) to (4, 8) [parallel, parallel] -> tensor<4x8xf32> {
      %c1_1 = arith.constant 1 : index
      %c2 = arith.constant 0 : index
      %c3 = arith.constant 0 : index
      %c4_1 = arith.constant 1 : index
      %r5 = loop.read %n1[%c3, %c4_1] : tensor<2x2xf32>
      loop.yield %r5 : f32
    }
    %z4 = arith.constant 0.000000e+00 : f32
    %n3 = loop.nest (%i0_2, %i1_2, %k) to (3, 8, 4) [parallel, parallel, reduction] init(%acc = %z4 : f32) -> tensor<3x8xf32> {
      %c1_2 = arith.constant 0 : index
      %r2_1 = loop.read %x0[%i0_2, %c1_2] : tensor<3x2xf32>
      %v3_1 = arith.negf %r2_1 : f32
      %v4 = arith.negf %v3_1 : f32
      %s6 = arith.addf %acc, %v4 : f32
      loop.yield %s6 : f32
    }
    func.return %n2, %n3 : tensor<4x8xf32>, tensor<3x8xf32>
  }
}
"""

FEW_COLORS = """
func.func @main(%w: tensor<3x1x1xf32>, %x: tensor<8x3x1x1xf32>) -> tensor<8x3x1x1xf32> {
  %s = graph.softmax %x axis = -2 : tensor<8x3x1x1xf32>
  %r = graph.rmsnorm %s, %w axis = 0 : (tensor<8x3x1x1xf32>, tensor<3x1x1xf32>) -> tensor<8x3x1x1xf32>
  func.return %r : tensor<8x3x1x1xf32>
}
"""

EQSAT_CONCAT = """
func.func @main(%x0: tensor<5x2x2x5xf32>) -> tensor<5x2x4x5xf32> {
  %0 = graph.exp %x0 : tensor<5x2x2x5xf32>
  %1 = graph.softmax %x0 axis = -4 : tensor<5x2x2x5xf32>
  %2 = graph.concat %1, %0 axis = 2 : (tensor<5x2x2x5xf32>, tensor<5x2x2x5xf32>) -> tensor<5x2x4x5xf32>
  func.return %2 : tensor<5x2x4x5xf32>
}
"""


def test_eqsat_extraction_with_an_unusable_output_is_not_a_crash():
    """
    taso-substitute{engine=eqsat} gave scipy's ILP no variable for an output class
    without a usable node: "`c` must be a one-dimensional array of finite numbers".
    """
    config = Config(
        grid=(4, 1),
        device="wse2:sram_kib=8,colors=8",
        gemv="pipeline",
        k=1,
        tile_sizes=(2, 4),
        substitute=True,
        budget=1,
        relay=True,
    )
    outcome = run_case(EQSAT_CONCAT, config, tolerance=1e-4)
    assert outcome.kind in ("ok", "refused"), outcome.message
    assert not outcome.stage.startswith("taso-substitute"), outcome.message


@pytest.mark.parametrize(
    ("program", "config"),
    [
        # The mesh runtime gathered a rank-0 result as shape (1,) (np.ascontiguousarray).
        (
            SCALAR_GATHER,
            Config(grid=(2, 3), gemm="summa", gemv="ring", k=1, tile_sizes=(1, 4)),
        ),
        (SCALAR_SUM, Config(grid=(2, 2), tile_sizes=(4, 4))),
        # graph-canonicalize's rotate-half pattern built a matmul of a vector (a crash).
        (VECTOR_ROTATION, Config(grid=(1, 3), tile_sizes=(1, 1))),
        # convert-graph-to-loop started a max-pool from the lowest finite value: a
        # window of -inf padding gave -3.4e38 instead of -inf.
        (MASKED_POOL, Config(grid=(2, 2), tile_sizes=(1, 1), through_text=True)),
        # convert-tile-to-mesh sliced the host tensor for a padded load at row -2 (the
        # concatenation's other part): a mesh.scatter at offsets [-2, 0, 0].
        (CONCAT_GATHER, Config(grid=(1, 2), tile_sizes=(4, 1), through_text=True)),
        # convert-tile-to-mesh took one slice of %x for x[0, 0] and for the column
        # x[:, 0] (same offsets): the column's loads read past the 1x1 slice.
        (
            SLICES_OF_TWO_SIZES,
            Config(
                grid=(1, 4),
                device="wse3",
                gemv="pipeline",
                k=3,
                tile_sizes=(2, 4),
                fuse="split-k",
                through_text=True,
            ),
        ),
    ],
    ids=[
        "scalar-gather",
        "scalar-sum",
        "vector-rotation",
        "masked-pool",
        "concat-gather",
        "slices-of-two-sizes",
    ],
)
def test_compiles_and_keeps_its_results(program: str, config: Config):
    outcome = run_case(program, config, tolerance=1e-4)
    assert outcome.kind == "ok", outcome.message


def test_too_few_colors_is_a_refusal_by_mesh_verify_not_a_crash():
    # The checker ran the unrouted program without relaying: a color shortage looked
    # like a broken pass. Now only mesh-check-limits may refuse it.
    config = Config(
        grid=(4, 4),
        device="wse3:colors=6",
        gemm="summa",
        gemv="ring",
        k=1,
        tile_sizes=(1, 1),
    )
    outcome = run_case(FEW_COLORS, config, tolerance=1e-4)
    assert outcome.kind in ("ok", "refused"), outcome.message
    if outcome.kind == "refused":
        assert outcome.stage.startswith(("mesh-route", "mesh-check-limits"))
        assert "colors" in outcome.message


EPILOGUE_LOAD = """
func.func @main(%w: tensor<1xf32>, %b: tensor<f32>, %x: tensor<1xf32>) -> (tensor<4xf32>, tensor<1xf32>) {
  %a = graph.add %x, %b : (tensor<1xf32>, tensor<f32>) -> tensor<1xf32>
  %e = graph.exp %a : tensor<1xf32>
  %p = graph.pad %e pads = [1, 2] mode = edge value = 0.000000e+00 : tensor<1xf32> -> tensor<4xf32>
  %r = graph.rmsnorm %p, %w : (tensor<4xf32>, tensor<1xf32>) -> tensor<4xf32>
  %h, %t = graph.split %p axis = 0 sizes = [1, 3] : tensor<4xf32> -> (tensor<1xf32>, tensor<3xf32>)
  func.return %r, %h : tensor<4xf32>, tensor<1xf32>
}
"""


def test_a_load_after_a_nest_of_a_value_the_nest_also_reads():
    # convert-tile-to-mesh emitted the epilogue's `tile.load` of the mean of squares
    # (held whole, and read by the nest too) as one of the nest's own loads: KeyError.
    config = Config(
        grid=(2, 3), gemm="summa", gemv="pipeline", k=3, tile_sizes=(4, 4), fuse="rolling"
    )
    outcome = run_case(EPILOGUE_LOAD, config, tolerance=1e-4)
    assert outcome.kind == "ok", outcome.message


DIAGONAL_READ = """
func.func @main(%x: tensor<4x1x8xf32>) -> tensor<4x4xf32> {
  %big = arith.constant 3.40282347e+38 : f32
  %m = loop.nest (%i, %j, %k) to (4, 4, 1) [parallel, parallel, reduction] init(%acc = %big : f32) -> tensor<4x4xf32> {
    %c2 = arith.constant 2 : index
    %a = loop.read %x[%j, %k, %c2] : tensor<4x1x8xf32>
    %s = arith.minimumf %acc, %a : f32
    loop.yield %s : f32
  }
  %n = loop.nest (%i, %j, %k) to (4, 4, 1) [parallel, parallel, reduction] init(%acc = %big : f32) -> tensor<4x4xf32> {
    %t = loop.read %m[%j, %i] : tensor<4x4xf32>
    %d = loop.read %m[%j, %j] : tensor<4x4xf32>
    %v = arith.subf %t, %d : f32
    %s = arith.minimumf %acc, %v : f32
    loop.yield %s : f32
  }
  func.return %n : tensor<4x4xf32>
}
"""


def test_a_reduction_reading_another_off_its_projection_is_not_fused():
    # neptune-fuse fused %n into %m although %n also reads %m on the diagonal: the fused
    # nest read its own unfinished result (a program that does not run).
    from plmr.dialects.context import make_context, parse_module
    from plmr.dialects.printing import module_text
    from plmr.passes.neptune.fuse import NeptuneFusePass

    module = parse_module(DIAGONAL_READ)
    NeptuneFusePass(remarks=False).apply(make_context(), module)
    text = module_text(module)
    assert "reads %m at different points" in text
    outcome = run_case(
        DIAGONAL_READ, Config(grid=(2, 1), tile_sizes=(4, 1)), tolerance=1e-4
    )
    assert outcome.kind == "ok", outcome.message
