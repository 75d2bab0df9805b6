"""
The mesh runtime (runtime/mesh_machine.py): exact results of every kernel in functional
mode, placement (scatter / gather) of every layout kind, hand-written point-to-point
programs and their errors (deadlock, SRAM overflow, route limit), and the timing model's
expected behaviour (monotonic in work and grid size, deterministic, the same in both
modes, short links for MeshGEMM's rings, K-tree GEMV ahead of the pipeline).

Timing assertions are relations (orderings, growth rates) rather than cycle counts, so
that they hold for any calibration of the device parameters.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plmr.dialects import mesh
from plmr.dialects.context import parse_module
from plmr.errors import PlmrError
from plmr.lowering.kernels import Kernel, gemm, gemv
from plmr.runtime.mesh_machine import gather_array, run_mesh, scatter_array
from plmr.runtime.report import Report
from plmr.target.collectives import ring_order
from plmr.target.device import get_device

Array = npt.NDArray[Any]

RTOL = 1e-4


def inputs_of(kernel: Kernel, seed: int = 0) -> list[Array]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(np.float32) for s in kernel.inputs]


def assert_close(got: Array, want: Array) -> None:
    """Equal to numpy up to RTOL, relative to the largest magnitude of the result."""
    assert got.shape == want.shape
    scale = float(np.abs(want).max()) or 1.0
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=RTOL * scale)


def reference(kernel: Kernel, inputs: list[Array]) -> Array:
    a, b = (x.astype(np.float64) for x in inputs)
    if kernel.name == "gemm_t":
        return a @ b.T
    return a @ b


def run_functional(kernel: Kernel, device: str = "wse2") -> tuple[Array, Report]:
    inputs = inputs_of(kernel)
    outputs, report = run_mesh(kernel.module, inputs, device=device)
    assert len(outputs) == 1
    assert_close(outputs[0].astype(np.float64), reference(kernel, inputs))
    return outputs[0], report


def timing(kernel: Kernel, device: str = "wse2", relay: bool = False) -> Report:
    inputs = [np.zeros(s, dtype=np.float32) for s in kernel.inputs]
    _, report = run_mesh(kernel.module, inputs, device=device, mode="timing", relay=relay)
    return report


# ---------------------------------------------------------------------------------------
# Exact results of every kernel
# ---------------------------------------------------------------------------------------

SQUARE_GRIDS = [1, 2, 3, 4, 5, 7]
GEMM_SHAPES = [(16, 16, 16), (13, 11, 9), (7, 20, 5)]
"""(M, K, N): divisible by some grids, not by others (blocks are padded)."""


@pytest.mark.parametrize("shape", GEMM_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("p", SQUARE_GRIDS)
@pytest.mark.parametrize("algorithm", ["meshgemm", "cannon", "gemm_t"])
def test_square_grid_gemm_is_exact(algorithm: str, p: int, shape: tuple[int, int, int]):
    m, k, n = shape
    run_functional(gemm(algorithm, m, k, n, (p, p), "wse2"))


SUMMA_GRIDS = [(1, 1), (2, 2), (3, 3), (5, 5), (7, 7), (2, 3), (3, 5), (4, 8), (8, 4)]


@pytest.mark.parametrize(
    "mn", [(16, 16), (13, 9), (5, 23)], ids=lambda s: "x".join(map(str, s))
)
@pytest.mark.parametrize("grid", SUMMA_GRIDS, ids=lambda g: f"{g[0]}x{g[1]}")
def test_summa_is_exact(grid: tuple[int, int], mn: tuple[int, int]):
    # SUMMA needs K in whole panels: a multiple of lcm(P, Q).
    k = 2 * math.lcm(*grid)
    run_functional(gemm("summa", mn[0], k, mn[1], grid, "wse2"))


def test_summa_rejects_a_k_that_is_not_whole_panels():
    with pytest.raises(PlmrError) as info:
        gemm("summa", 8, 10, 8, (2, 3), "wse2")
    assert str(info.value) == (
        "summa needs K = 10 divisible into 6 equal panels on a 2x3 grid (K a multiple of 6)"
    )


GEMV_GRIDS = [
    (1, 1),
    (2, 2),
    (3, 3),
    (5, 5),
    (7, 7),
    (2, 3),
    (3, 5),
    (4, 8),
    (8, 4),
    (9, 2),
]
GEMV_VARIANTS: dict[str, dict[str, Any]] = {
    "ktree": {"algorithm": "ktree"},
    "ktree-k1": {"algorithm": "ktree", "k": 1},
    "ktree-k3": {"algorithm": "ktree", "k": 3},
    "ktree-g2": {"algorithm": "ktree", "groups": 2},
    "ktree-gP": {"algorithm": "ktree", "groups": -1},  # one group per PE
    "ktree-k3-g3": {"algorithm": "ktree", "k": 3, "groups": 3},
    "pipeline": {"algorithm": "pipeline"},
    "ring": {"algorithm": "ring"},
}


@pytest.mark.parametrize(
    "mn", [(16, 16), (13, 9), (5, 30)], ids=lambda s: "x".join(map(str, s))
)
@pytest.mark.parametrize("grid", GEMV_GRIDS, ids=lambda g: f"{g[0]}x{g[1]}")
@pytest.mark.parametrize("variant", GEMV_VARIANTS)
def test_gemv_is_exact(variant: str, grid: tuple[int, int], mn: tuple[int, int]):
    options = dict(GEMV_VARIANTS[variant])
    algorithm = options.pop("algorithm")
    if options.get("groups") == -1:
        options["groups"] = grid[0]
    if options.get("groups", 1) > grid[0]:
        pytest.skip("more groups than PEs along y")
    run_functional(gemv(algorithm, mn[0], mn[1], grid, "wse2", **options))


@pytest.mark.parametrize("algorithm", ["meshgemm", "cannon", "gemm_t"])
@pytest.mark.parametrize("grid", [(2, 3), (3, 5), (4, 6), (5, 3), (1, 4), (3, 2)])
def test_cannon_kernels_on_non_square_grids_are_exact(
    algorithm: str, grid: tuple[int, int]
):
    chunks = math.lcm(*grid)
    run_functional(gemm(algorithm, 13, 2 * chunks, 11, grid, "wse2"))


@pytest.mark.parametrize(
    "build, message",
    [
        (
            # Non-square grids cut K into lcm(P, Q) chunks.
            lambda: gemm("meshgemm", 8, 8, 8, (2, 3), "wse2"),
            "on a 2x3 grid K must be a multiple of lcm(2, 3) = 6, got 8",
        ),
        (
            lambda: gemm("gemm_t", 8, 8, 8, (3, 2), "wse2"),
            "on a 3x2 grid K must be a multiple of lcm(3, 2) = 6, got 8",
        ),
        (
            lambda: gemm("strassen", 8, 8, 8, (2, 2), "wse2"),
            "unknown GEMM algorithm 'strassen' (meshgemm, cannon, summa, gemm_t)",
        ),
        (
            lambda: gemv("tree", 8, 8, (2, 2), "wse2"),
            "unknown GEMV algorithm 'tree' (ktree, pipeline, ring)",
        ),
        (
            lambda: gemv("pipeline", 8, 8, (2, 2), "wse2", groups=2),
            "--groups applies to the ktree algorithm only",
        ),
        (
            lambda: gemv("ktree", 8, 8, (4, 2), "wse2", groups=5),
            "groups must be between 1 and the 4 PEs along y, got 5",
        ),
        (lambda: gemm("summa", 8, 8, 8, (0, 2), "wse2"), "grid must be positive, got 0x2"),
    ],
)
def test_kernel_builders_reject_bad_options(build: Callable[[], Kernel], message: str):
    with pytest.raises(PlmrError) as info:
        build()
    assert str(info.value) == message


def test_a_wrong_result_would_be_noticed():
    """The exactness check is not vacuous: a kernel of the wrong product fails it."""
    kernel = gemm("meshgemm", 8, 8, 8, (4, 4), "wse2")
    wrong = dataclasses.replace(kernel, name="gemm_t")  # compared against A·Bᵀ
    with pytest.raises(AssertionError):
        run_functional(wrong)


# ---------------------------------------------------------------------------------------
# Placement: scatter / gather
# ---------------------------------------------------------------------------------------


def logical_positions(ring: str, n: int) -> tuple[list[int], list[int]]:
    """(ord, L): the positions in ring order, and each position's index on the ring."""
    order = ring_order(ring, n) if ring == "interleaved" and n >= 3 else list(range(n))
    index = [0] * n
    for r, p in enumerate(order):
        index[p] = r
    return order, index


def reference_blocks(
    x: Array, layout: mesh.LayoutAttr, grid: tuple[int, int], pad: float
) -> Array:
    """Per-PE blocks computed element by element from the layout's definition."""
    rows, cols = grid
    block = mesh.block_shape(x.shape, layout, grid)
    padded_shape = [
        d if a == "-" else b * mesh.axis_size(a, grid)
        for d, b, a in zip(x.shape, block, layout.axes, strict=True)
    ]
    padded = np.full(padded_shape, pad, dtype=x.dtype)
    padded[tuple(slice(0, d) for d in x.shape)] = x
    out = np.empty((rows, cols, *block), dtype=x.dtype)
    skew, ring = layout.skew.data, layout.ring.data
    ord_y, pos_y = logical_positions(ring, rows)
    ord_x, pos_x = logical_positions(ring, cols)
    for i in range(rows):
        for j in range(cols):
            si, sj = i, j
            if skew == "x":
                sj = ord_x[(pos_x[j] + pos_y[i]) % cols]
            elif skew == "y":
                si = ord_y[(pos_y[i] + pos_x[j]) % rows]
            index: list[list[int]] = []
            for d, a in enumerate(layout.axes):
                if a == "-":
                    index.append(list(range(x.shape[d])))
                    continue
                n, p, b = (rows, si, block[d]) if a == "y" else (cols, sj, block[d])
                if layout.mode.data == "interleaved":
                    index.append(list(range(p, b * n, n)))
                else:
                    index.append(list(range(p * b, (p + 1) * b)))
            out[i, j] = padded[np.ix_(*index)] if index else padded
    return out


@st.composite
def placements(draw: st.DrawFn) -> tuple[Array, mesh.LayoutAttr, tuple[int, int], float]:
    grid = (draw(st.integers(1, 5)), draw(st.integers(1, 5)))
    rank = draw(st.integers(1, 3))
    shape = tuple(draw(st.lists(st.integers(1, 11), min_size=rank, max_size=rank)))
    axes = draw(st.permutations(["x", "y", *["-"] * rank]))[:rank]
    mode = draw(st.sampled_from(["blocked", "interleaved"]))
    used = [a for a in axes if a != "-"]
    skew, ring = "", ""
    if mode == "blocked" and used and draw(st.booleans()):
        skew = draw(st.sampled_from(used))
        ring = draw(st.sampled_from(["torus", "interleaved"]))
    layout = mesh.LayoutAttr(axes, mode, skew, ring)
    x = np.arange(math.prod(shape), dtype=np.float32).reshape(shape) + 1
    pad = draw(st.sampled_from([0.0, -1.5]))
    return x, layout, grid, pad


@given(placements())
@settings(max_examples=400, deadline=None)
def test_scatter_places_and_gather_restores(
    case: tuple[Array, mesh.LayoutAttr, tuple[int, int], float],
):
    x, layout, grid, pad = case
    blocks = scatter_array(x, layout, grid, pad)
    np.testing.assert_array_equal(blocks, reference_blocks(x, layout, grid, pad))
    np.testing.assert_array_equal(gather_array(blocks, layout, x.shape, grid), x)


@pytest.mark.parametrize(
    "axes, mode, skew, ring",
    [
        (["y", "x"], "blocked", "", ""),
        (["x", "y"], "interleaved", "", ""),
        (["-", "y"], "blocked", "", ""),
        (["x", "-"], "interleaved", "", ""),
        (["-", "-"], "blocked", "", ""),
        (["y", "x"], "blocked", "x", "interleaved"),
        (["y", "x"], "blocked", "y", "torus"),
        (["x", "y"], "blocked", "x", "torus"),
    ],
)
@pytest.mark.parametrize("grid", [(3, 4), (5, 5), (1, 6), (7, 2)])
def test_scatter_gather_every_layout_kind(
    axes: list[str], mode: str, skew: str, ring: str, grid: tuple[int, int]
):
    layout = mesh.LayoutAttr(axes, mode, skew, ring)
    x = np.random.default_rng(1).standard_normal((11, 13)).astype(np.float32)
    blocks = scatter_array(x, layout, grid)
    np.testing.assert_array_equal(blocks, reference_blocks(x, layout, grid, 0.0))
    np.testing.assert_array_equal(gather_array(blocks, layout, x.shape, grid), x)


def test_skewed_placement_by_hand():
    """Cannon's alignment: PE (i, j) holds block (i, ord[(L(j) + L(i)) mod n])."""
    x = np.arange(25, dtype=np.float32).reshape(5, 5)
    # Torus: L is the identity, row i is rotated by i.
    layout = mesh.LayoutAttr(["y", "x"], skew="x", ring="torus")
    blocks = scatter_array(x, layout, (5, 5))[:, :, 0, 0]
    assert blocks[1].tolist() == [6, 7, 8, 9, 5]
    assert blocks[3].tolist() == [18, 19, 15, 16, 17]
    # Interleaved ring 0 -> 2 -> 4 -> 3 -> 1: row 1 is at ring index 4, so PE (1, j)
    # holds the block 4 ring steps after j: columns 1, 3, 0, 4, 2.
    layout = mesh.LayoutAttr(["y", "x"], skew="x", ring="interleaved")
    blocks = scatter_array(x, layout, (5, 5))[:, :, 0, 0]
    assert blocks[1].tolist() == [6, 8, 5, 9, 7]
    assert blocks[0].tolist() == [0, 1, 2, 3, 4]
    # skew y rotates the rows of each column by the column's ring index instead.
    layout = mesh.LayoutAttr(["y", "x"], skew="y", ring="interleaved")
    blocks = scatter_array(x, layout, (5, 5))[:, :, 0, 0]
    assert blocks[:, 1].tolist() == [6, 16, 1, 21, 11]


# ---------------------------------------------------------------------------------------
# Hand-written programs: point to point, deadlocks, SRAM, routes
# ---------------------------------------------------------------------------------------

P2P = """
mesh.program @p2p(%a: tensor<2x12xf32>) -> tensor<2x12xf32> device "test-small" grid [2, 3] {
  %d = mesh.scatter %a : tensor<2x12xf32> -> !mesh.dist<tensor<2x12xf32>, #mesh.layout<[y, x]>>
  %e = mesh.spmd(%d) : (!mesh.dist<tensor<2x12xf32>, #mesh.layout<[y, x]>>) -> !mesh.dist<tensor<2x12xf32>, #mesh.layout<[y, x]>> {
  ^bb0(%y: index, %x: index, %b: tensor<1x4xf32>):
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %first_col = arith.cmpi eq, %x, %c0 : index
    %other_col = arith.cmpi ne, %x, %c0 : index
    %top = arith.cmpi eq, %y, %c0 : index
    %bottom = arith.cmpi eq, %y, %c1 : index
    mesh.send %b color 5 if %first_col : tensor<1x4xf32>
    mesh.send %b color 6 if %bottom : tensor<1x4xf32>
    %r5 = mesh.recv color 5 if %other_col : tensor<1x4xf32>
    %r6 = mesh.recv color 6 if %top : tensor<1x4xf32>
    %s = tile.map add %r5, %r6 : (tensor<1x4xf32>, tensor<1x4xf32>) -> tensor<1x4xf32>
    mesh.yield %s : tensor<1x4xf32>
  }
  %o = mesh.gather %e : !mesh.dist<tensor<2x12xf32>, #mesh.layout<[y, x]>> -> tensor<2x12xf32>
  mesh.route color 5 rows [0, 2, 1] cols [0, 1, 1] from ramp to ["east"]
  mesh.route color 5 rows [0, 2, 1] cols [1, 2, 1] from west to ["ramp", "east"]
  mesh.route color 5 rows [0, 2, 1] cols [2, 3, 1] from west to ["ramp"]
  mesh.route color 6 rows [1, 2, 1] cols [0, 3, 1] from ramp to ["north"]
  mesh.route color 6 rows [0, 1, 1] cols [0, 3, 1] from south to ["ramp"]
  mesh.return %o : tensor<2x12xf32>
}
"""


def p2p_variant(**replace: str) -> str:
    text = P2P
    for old, new in replace.items():
        assert old in text
        text = text.replace(old, new)
    return text


SEND5 = "    mesh.send %b color 5 if %first_col : tensor<1x4xf32>\n"
RECV5 = "    %r5 = mesh.recv color 5 if %other_col : tensor<1x4xf32>\n"


def test_point_to_point_program_runs():
    x = np.arange(24, dtype=np.float32).reshape(2, 12)
    (out,), report = run_mesh(parse_module(P2P), [x])
    blocks = x.reshape(2, 3, 4)
    want = np.zeros_like(blocks)
    want[:, 1:] += blocks[:, :1]  # color 5: column 0 multicast east to columns 1 and 2
    want[0] += blocks[1]  # color 6: row 1 north to row 0
    np.testing.assert_array_equal(out, want.reshape(2, 12))
    assert report.max_routes == 2
    assert report.bytes_moved > 0
    # The multicast's far end waits longest: PE (0, 2) gets both messages.
    assert report.cycles > 0
    assert report.finish is not None
    assert report.finish[0, 2] >= report.finish[0, 1]


def test_recv_without_send_is_a_deadlock():
    text = p2p_variant(**{SEND5: ""})
    with pytest.raises(PlmrError) as info:
        run_mesh(parse_module(text), [np.zeros((2, 12), np.float32)])
    assert str(info.value) == (
        "'mesh.recv' (%r5): deadlock: PEs (0, 1), (0, 2), (1, 1), (1, 2) wait on color 5 at "
        "`%r5 = mesh.recv color 5 if %other_col : tensor<1x4xf32>`, but no message on "
        "that color is in flight (a send is missing, comes later, or is routed elsewhere)"
    )


def test_recv_before_its_send_is_a_deadlock():
    text = p2p_variant(**{SEND5: "", RECV5: RECV5 + SEND5})
    with pytest.raises(
        PlmrError,
        match=r"^'mesh.recv' \(%r5\): deadlock: PEs \(0, 1\), \(0, 2\), \(1, 1\), \(1, 2\) wait on color 5 at ",
    ):
        run_mesh(parse_module(text), [np.zeros((2, 12), np.float32)])


def test_recv_where_the_routes_deliver_nothing_is_a_deadlock():
    text = p2p_variant(
        **{"%r5 = mesh.recv color 5 if %other_col": "%r5 = mesh.recv color 5"}
    )
    with pytest.raises(PlmrError) as info:
        run_mesh(parse_module(text), [np.zeros((2, 12), np.float32)])
    assert str(info.value) == (
        "'mesh.recv' (%r5): deadlock: PEs (0, 0), (1, 0) wait on color 5, but the routes deliver nothing to "
        "them"
    )


def test_send_without_recv_is_reported():
    text = p2p_variant(**{RECV5: "    %r5 = tile.fill 0.0 : tensor<1x4xf32>\n"})
    with pytest.raises(PlmrError) as info:
        run_mesh(parse_module(text), [np.zeros((2, 12), np.float32)])
    assert str(info.value) == (
        "messages on color 5 were sent but never received (a mesh.recv is missing)"
    )


def test_send_with_no_route():
    text = p2p_variant(
        **{
            'mesh.route color 5 rows [0, 2, 1] cols [2, 3, 1] from west to ["ramp"]\n': "",
        }
    )
    with pytest.raises(PlmrError) as info:
        run_mesh(parse_module(text), [np.zeros((2, 12), np.float32)])
    assert str(info.value) == (
        "'mesh.send': no route for color 5 at router (0, 2) from west (message from PE (0, 0)); add a "
        "mesh.route rule or run mesh-route"
    )


LINEAR_ON_ONE_PE = """
mesh.program @s(%a: tensor<2x3xf32>) -> tensor<2x3xf32> device "wse2" grid [2, 1] {
  %d = mesh.scatter %a : tensor<2x3xf32> -> !mesh.dist<tensor<2x3xf32>, #mesh.layout<[y, x]>>
  %e = mesh.spmd(%d) : (!mesh.dist<tensor<2x3xf32>, #mesh.layout<[y, x]>>) -> !mesh.dist<tensor<2x3xf32>, #mesh.layout<[y, x]>> {
  ^bb0(%y: index, %x: index, %b: tensor<1x3xf32>):
    %s = mesh.shift %b axis AXIS ring linear : tensor<1x3xf32>
    mesh.yield %s : tensor<1x3xf32>
  }
  %r = mesh.gather %e : !mesh.dist<tensor<2x3xf32>, #mesh.layout<[y, x]>> -> tensor<2x3xf32>
  mesh.return %r : tensor<2x3xf32>
}
"""


def test_linear_shift_drops_the_last_block():
    x = np.arange(6, dtype=np.float32).reshape(2, 3) + 1
    (out,), _ = run_mesh(parse_module(LINEAR_ON_ONE_PE.replace("AXIS", "y")), [x])
    np.testing.assert_array_equal(out, [[0, 0, 0], [1, 2, 3]])


def test_linear_shift_on_one_pe_gives_zeros():
    x = np.arange(6, dtype=np.float32).reshape(2, 3) + 1
    (out,), _ = run_mesh(parse_module(LINEAR_ON_ONE_PE.replace("AXIS", "x")), [x])
    np.testing.assert_array_equal(out, np.zeros_like(x))


OVERFLOW = """
mesh.program @over(%a: tensor<4x4096xf32>) -> tensor<4x4096xf32> device "test-tiny" grid [4, 4] {
  %d = mesh.scatter %a : tensor<4x4096xf32> -> !mesh.dist<tensor<4x4096xf32>, #mesh.layout<[y, x]>>
  %e = mesh.spmd(%d) : (!mesh.dist<tensor<4x4096xf32>, #mesh.layout<[y, x]>>) -> !mesh.dist<tensor<4x4096xf32>, #mesh.layout<[y, x]>> {
  ^bb0(%y: index, %x: index, %b: tensor<1xBxf32>):
    %s = mesh.shift %b axis x ring torus : tensor<1xBxf32>
    mesh.yield %s : tensor<1xBxf32>
  }
  %r = mesh.gather %e : !mesh.dist<tensor<4x4096xf32>, #mesh.layout<[y, x]>> -> tensor<4x4096xf32>
  mesh.return %r : tensor<4x4096xf32>
}
"""


def test_sram_overflow_on_test_tiny():
    module = parse_module(OVERFLOW.replace("xB", "x1024"))
    with pytest.raises(PlmrError) as info:
        run_mesh(module, [np.zeros((4, 4096), np.float32)])
    assert str(info.value) == (
        "SRAM overflow in @over: every PE (e.g. PE (0, 0)) needs 6144 B at "
        "`%s = mesh.shift %b axis x ring torus : tensor<1x1024xf32>`, but test-tiny has "
        "4096 B per PE; live: %b (2048 B), %s (2048 B), receive buffer of mesh.shift "
        "(2048 B). Use a larger grid or smaller blocks"
    )
    # The same program fits a device with more SRAM, and reports its peak.
    x = np.random.default_rng(0).standard_normal((4, 4096)).astype(np.float32)
    (out,), report = run_mesh(module, [x], device="test-tiny:sram_kib=6")
    assert report.max_sram_bytes == 6144
    np.testing.assert_array_equal(
        out, np.roll(x.reshape(4, 4, 1024), 1, axis=1).reshape(4, 4096)
    )


COLORS = """
mesh.program @colors(%a: tensor<4x8xf32>) -> tensor<4x8xf32> device "test-small" grid [1, 4] {
  %d = mesh.scatter %a : tensor<4x8xf32> -> !mesh.dist<tensor<4x8xf32>, #mesh.layout<[-, x]>>
  %e = mesh.spmd(%d) : (!mesh.dist<tensor<4x8xf32>, #mesh.layout<[-, x]>>) -> !mesh.dist<tensor<4x8xf32>, #mesh.layout<[-, x]>> {
  ^bb0(%y: index, %x: index, %b: tensor<4x2xf32>):
    %s = mesh.shift %b axis x ring interleaved : tensor<4x2xf32>
    %t = mesh.shift %s axis x ring interleaved distance -1 : tensor<4x2xf32>
    %u = mesh.shift %t axis x ring torus : tensor<4x2xf32>
    mesh.yield %u : tensor<4x2xf32>
  }
  %r = mesh.gather %e : !mesh.dist<tensor<4x8xf32>, #mesh.layout<[-, x]>> -> tensor<4x8xf32>
  mesh.return %r : tensor<4x8xf32>
}
"""


COLORS_DEVICE = "test-small:colors=4,reserved_colors=2"
"""Two usable colors: the COLORS program needs three."""


def colors_input() -> tuple[Array, Array]:
    x = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)
    # Shift forward, backward, then one torus step: a torus roll by one block.
    return x, np.roll(x.reshape(4, 4, 2), 1, axis=1).reshape(4, 8)


def test_more_colors_than_the_device_routes():
    module = parse_module(COLORS.replace('"test-small"', f'"{COLORS_DEVICE}"'))
    x, want = colors_input()
    with pytest.raises(PlmrError) as info:
        run_mesh(module, [x])
    assert str(info.value) == (
        "'mesh.shift' along x needs more than the 2 usable colors of test-small at some "
        "router (colors 0..1 are taken); use fewer concurrent collectives, a smaller K, or "
        "relay mode (mesh-route{relay=true} / --relay)"
    )
    (out,), relayed = run_mesh(module, [x], relay=True)
    np.testing.assert_array_equal(out, want)
    assert relayed.max_routes <= get_device(COLORS_DEVICE).usable_colors
    # Relaying through software costs β per hop: slower than with enough colors.
    (out2,), routed = run_mesh(parse_module(COLORS), [x])
    np.testing.assert_array_equal(out2, want)
    # One route per color, greedy: the rings take colors 0-2 and 3-5, the torus steps
    # 3, 6, 1 and 7; routers 1 and 2 hold all 8.
    assert routed.max_routes == 8
    assert relayed.cycles > routed.cycles


def test_more_colors_than_an_overriding_device_routes():
    """`run_mesh(device=...)` (`plmr run --device`) checks the budget of that device."""
    x, _ = colors_input()
    with pytest.raises(PlmrError) as info:
        run_mesh(parse_module(COLORS), [x], device=get_device(COLORS_DEVICE))
    # Colors are assigned against that device's budget, so the first shift (3 colors on
    # a line) already runs out.
    assert str(info.value) == (
        "'mesh.shift' along x needs more than the 2 usable colors of test-small at some "
        "router (colors 0..1 are taken); use fewer concurrent collectives, a smaller K, or "
        "relay mode (mesh-route{relay=true} / --relay)"
    )


def test_relay_on_an_overriding_device():
    x, want = colors_input()
    small = get_device(COLORS_DEVICE)
    (out,), relayed = run_mesh(parse_module(COLORS), [x], device=small, relay=True)
    np.testing.assert_array_equal(out, want)
    assert relayed.max_routes <= small.usable_colors
    # Each of the three shifts has a transfer that finds no free color among 2.
    assert relayed.relayed_collectives == 3
    # The same as relaying on a program declared for that device, and slower than
    # routing everything on the program's own device.
    declared = parse_module(COLORS.replace('"test-small"', f'"{COLORS_DEVICE}"'))
    (_,), same = run_mesh(declared, [x], relay=True)
    assert (same.max_routes, same.cycles) == (relayed.max_routes, relayed.cycles)
    (_,), routed = run_mesh(parse_module(COLORS), [x])
    assert routed.relayed_collectives == 0
    assert relayed.cycles > routed.cycles


def test_explicit_routes_beyond_the_color_budget():
    text = """
mesh.program @manual() -> () device "test-small" grid [2, 2] {
  mesh.route color 0 rows [0, 1, 1] cols [0, 1, 1] from ramp to ["east"]
  mesh.route color 1 rows [0, 1, 1] cols [0, 2, 1] from ramp to ["south"]
  mesh.route color 7 rows [0, 2, 1] cols [0, 1, 1] from west to ["ramp"]
  mesh.return
}
"""
    module = parse_module(text)
    small = get_device("test-small:colors=4,reserved_colors=2")
    with pytest.raises(PlmrError) as info:
        run_mesh(module, [], device=small)
    assert str(info.value) == (
        "router (0, 0) of @manual needs 3 colors, but test-small routes at most 2 (use "
        "relay mode or fewer routes)"
    )
    _, report = run_mesh(module, [], device=small, relay=True)
    assert report.max_routes == 3


def test_grid_larger_than_the_device():
    kernel = gemm("meshgemm", 8, 8, 8, (5, 5), "test-tiny")
    with pytest.raises(PlmrError) as info:
        run_mesh(kernel.module, inputs_of(kernel))
    assert str(info.value) == "@meshgemm needs a 5x5 grid, but test-tiny has 4x4 PEs"


def test_inputs_are_checked():
    kernel = gemm("meshgemm", 9, 9, 9, (3, 3), "wse2")
    with pytest.raises(PlmrError, match=r"^@meshgemm takes 2 host inputs, got 1$"):
        run_mesh(kernel.module, inputs_of(kernel)[:1])
    with pytest.raises(
        PlmrError, match=r"^input %.* has shape \(8, 7\), expected \(9, 9\)$"
    ):
        run_mesh(kernel.module, [np.zeros((9, 9)), np.zeros((8, 7))])
    with pytest.raises(PlmrError, match=r"^unknown mode 'fast' \(functional or timing\)$"):
        run_mesh(kernel.module, inputs_of(kernel), mode="fast")


# ---------------------------------------------------------------------------------------
# Timing
# ---------------------------------------------------------------------------------------

GEMM_ALGORITHMS = ["meshgemm", "cannon", "summa", "gemm_t"]


@pytest.mark.parametrize("dim", ["m", "k", "n"])
@pytest.mark.parametrize("algorithm", GEMM_ALGORITHMS)
def test_more_gemm_work_never_takes_fewer_cycles(algorithm: str, dim: str):
    base = {"m": 32, "k": 32, "n": 32}
    previous = None
    for size in (8, 16, 24, 32, 48, 64, 96):
        shape = {**base, dim: size}
        report = timing(gemm(algorithm, shape["m"], shape["k"], shape["n"], (4, 4), "wse2"))
        if previous is not None:
            assert report.cycles >= previous.cycles, f"{dim} = {size}"
            assert report.compute_cycles >= previous.compute_cycles
        previous = report


@pytest.mark.parametrize("dim", ["m", "n"])
@pytest.mark.parametrize("variant", ["ktree", "ktree-k3", "ktree-g2", "pipeline", "ring"])
def test_more_gemv_work_never_takes_fewer_cycles(variant: str, dim: str):
    options = dict(GEMV_VARIANTS[variant])
    algorithm = options.pop("algorithm")
    previous = None
    for size in (8, 16, 32, 48, 64, 128, 256):
        m, n = (size, 64) if dim == "m" else (64, size)
        report = timing(gemv(algorithm, m, n, (8, 8), "wse2", **options))
        if previous is not None:
            assert report.cycles >= previous.cycles, f"{dim} = {size}"
        previous = report


@pytest.mark.parametrize("algorithm", GEMM_ALGORITHMS)
def test_a_larger_grid_computes_less_per_pe(algorithm: str):
    # SUMMA needs a route per broadcast root: beyond 8x8 it relays in software.
    relay = algorithm == "summa"
    reports = [
        timing(gemm(algorithm, 128, 128, 128, (p, p), "wse2"), relay=relay)
        for p in (4, 8, 16, 32)
    ]
    compute = [r.compute_cycles for r in reports]
    assert compute == sorted(compute, reverse=True)
    assert len(set(compute)) == len(compute), compute
    # Doubling P quarters the block products; per-op overheads keep a 2x saving at least
    # while the blocks are large.
    assert compute[1] < compute[0] / 2
    cycles = [r.cycles for r in reports]
    if algorithm == "gemm_t":
        # Its per-step allreduce grows with P: at 128³ it is communication-bound from
        # 16x16 on, so only the compute-bound part shrinks.
        cycles = cycles[:3]
    if algorithm == "summa":
        # From 16x16 on its broadcasts are relayed (β per hop), which costs more than
        # the smaller blocks save: only the routed grids get faster.
        cycles = cycles[:2]
    assert cycles == sorted(cycles, reverse=True)
    assert len(set(cycles)) == len(cycles), cycles


def test_a_larger_grid_computes_less_per_pe_for_gemv():
    reports = [timing(gemv("ktree", 512, 512, (p, p), "wse2")) for p in (4, 8, 16, 32)]
    compute = [r.compute_cycles for r in reports]
    assert compute == sorted(compute, reverse=True)
    assert len(set(compute)) == len(compute), compute
    cycles = [r.cycles for r in reports]
    assert cycles == sorted(cycles, reverse=True)


DETERMINISM_KERNELS = {
    "meshgemm": lambda: gemm("meshgemm", 24, 20, 16, (4, 4), "wse2"),
    "cannon": lambda: gemm("cannon", 24, 20, 16, (5, 5), "wse2"),
    "summa": lambda: gemm("summa", 24, 12, 16, (2, 3), "wse2"),
    "gemm_t": lambda: gemm("gemm_t", 24, 20, 16, (3, 3), "wse2"),
    "gemv-ktree": lambda: gemv("ktree", 40, 24, (5, 3), "wse2", groups=2),
    "gemv-pipeline": lambda: gemv("pipeline", 40, 24, (4, 8), "wse2"),
    "gemv-ring": lambda: gemv("ring", 40, 24, (7, 7), "wse2"),
}


def comparable(report: Report) -> dict[str, Any]:
    data = report.to_json()
    data.pop("simulation_seconds")
    data.pop("mode")
    return data


@pytest.mark.parametrize("name", DETERMINISM_KERNELS)
def test_timing_is_deterministic_and_the_same_in_both_modes(name: str):
    kernel = DETERMINISM_KERNELS[name]()
    inputs = inputs_of(kernel)
    _, functional = run_mesh(kernel.module, inputs)
    _, again = run_mesh(kernel.module, inputs_of(kernel, seed=7))
    # Stepped like functional mode (extrapolation is compared in test_steady.py).
    _, timed = run_mesh(kernel.module, inputs, mode="timing", exact=True)
    assert functional.cycles > 0
    assert comparable(functional) == comparable(again)
    assert comparable(functional) == comparable(timed)
    assert functional.finish is not None
    assert timed.finish is not None
    np.testing.assert_array_equal(functional.finish, timed.finish)
    assert timed.mode == "timing"
    # A fresh build of the same kernel gives the same report.
    again_timed = run_mesh(
        DETERMINISM_KERNELS[name]().module, inputs, mode="timing", exact=True
    )[1]
    assert comparable(again_timed) == comparable(timed)


def shift_program(n: int, ring: str) -> str:
    """One shift of a one-element block along a line of n PEs."""
    t = f"tensor<1x{n}xf32>"
    d = f"!mesh.dist<{t}, #mesh.layout<[y, x]>>"
    return f"""
mesh.program @shift(%a: {t}) -> {t} device "wse2" grid [1, {n}] {{
  %d = mesh.scatter %a : {t} -> {d}
  %e = mesh.spmd(%d) : ({d}) -> {d} {{
  ^bb0(%y: index, %x: index, %b: tensor<1x1xf32>):
    %s = mesh.shift %b axis x ring {ring} : tensor<1x1xf32>
    mesh.yield %s : tensor<1x1xf32>
  }}
  %r = mesh.gather %e : {d} -> {t}
  mesh.return %r : {t}
}}
"""


def test_interleaved_shift_latency_is_flat_and_torus_grows_linearly():
    sizes = (8, 32, 128)
    cycles: dict[str, list[float]] = {}
    for ring in ("interleaved", "torus"):
        cycles[ring] = []
        for n in sizes:
            _, report = run_mesh(
                parse_module(shift_program(n, ring)),
                [np.zeros((1, n), np.float32)],
                mode="timing",
            )
            cycles[ring].append(report.cycles)
    inter, torus = cycles["interleaved"], cycles["torus"]
    hop = get_device("wse2").hop_cycles
    # Interleaved: every link ≤ 2 hops whatever N.
    assert max(inter) - min(inter) <= 2 * hop
    # Torus: the wrap-around crosses the line, N - 1 hops.
    assert torus[0] >= inter[0]
    assert torus[2] - torus[0] >= 0.9 * (sizes[2] - sizes[0]) * hop
    growth = (torus[2] - torus[1]) / (torus[1] - torus[0])
    assert growth == pytest.approx((sizes[2] - sizes[1]) / (sizes[1] - sizes[0]), rel=0.1)


def test_cannon_falls_behind_meshgemm_as_the_grid_grows():
    """With 1x1 blocks (communication-bound), Cannon's torus never beats MeshGEMM."""
    gaps = []
    for p in (8, 32, 128):
        mesh_gemm = timing(gemm("meshgemm", p, p, p, (p, p), "wse2")).cycles
        cannon = timing(gemm("cannon", p, p, p, (p, p), "wse2")).cycles
        gaps.append(cannon - mesh_gemm)
    assert gaps[0] >= 0
    assert gaps == sorted(gaps)
    assert gaps[2] > gaps[0]


def test_ktree_gemv_beats_pipeline_at_scale():
    ktree = timing(gemv("ktree", 1024, 1024, (256, 256), "wse2")).cycles
    pipeline = timing(gemv("pipeline", 1024, 1024, (256, 256), "wse2")).cycles
    assert ktree * 2 < pipeline


def test_ktree_groups_sweep_at_80():
    cycles = {
        g: timing(gemv("ktree", 1280, 1280, (80, 80), "wse2", groups=g)).cycles
        for g in (2, 4, 8)
    }
    assert cycles[2] > cycles[4] > cycles[8]


def test_relayed_collectives_pay_beta_per_hop():
    """A torus shift then an interleaved shift: 6 colors, or 3 colors and a relay."""
    text = shift_program(8, "torus").replace(
        "    mesh.yield %s",
        "    %t = mesh.shift %s axis x ring interleaved : tensor<1x1xf32>\n    mesh.yield %t",
    )
    x = [np.zeros((1, 8), np.float32)]
    _, routed = run_mesh(parse_module(text), x, mode="timing")
    # One route per color and router: the torus takes colors 0-2 (even and odd eastward
    # steps, the westward wrap-around); the interleaved shift finds them configured
    # otherwise at the inner routers and adds colors 3-6 there (up to 6 at a router).
    assert routed.max_routes == 6
    assert routed.relayed_collectives == 0
    tight = parse_module(
        text.replace('device "wse2"', 'device "wse2:colors=6,reserved_colors=3"')
    )
    with pytest.raises(
        PlmrError,
        match=r"^'mesh.shift' along x needs more than the 3 usable colors of wse2",
    ):
        run_mesh(tight, x, mode="timing")
    _, relayed = run_mesh(tight, x, mode="timing", relay=True)
    # The torus keeps its 3 colors; only the interleaved shift is relayed.
    assert relayed.max_routes == 3
    assert relayed.relayed_collectives == 1
    device = get_device("wse2")
    # The interleaved step is relayed: ≥ β more on its path of 1 or 2 hops.
    assert relayed.cycles >= routed.cycles + device.relay_cycles


@pytest.mark.parametrize("grid", [(2, 3), (3, 5), (4, 6), (3, 3), (1, 4)])
@pytest.mark.parametrize("skew", ["x", "y"])
@pytest.mark.parametrize("ring", ["torus", "interleaved"])
def test_chunked_skew_round_trips_and_is_a_rotation(
    grid: tuple[int, int], skew: str, ring: str
):
    chunks = math.lcm(*grid)
    layout = mesh.LayoutAttr(["y", "x"], skew=skew, ring=ring, chunks=chunks)
    shape = (2 * grid[0], 3 * chunks) if skew == "x" else (3 * chunks, 2 * grid[1])
    x = np.arange(math.prod(shape), dtype=np.float32).reshape(shape)
    blocks = scatter_array(x, layout, grid)
    np.testing.assert_array_equal(gather_array(blocks, layout, shape, grid), x)
    # Every PE holds whole chunks, and every chunk once per line.
    dim = 1 if skew == "x" else 0
    size = shape[dim] // chunks
    seen = np.moveaxis(blocks, 2 + dim, 2)[..., ::size, :]
    assert seen.shape[2] == chunks // (grid[1] if skew == "x" else grid[0])
