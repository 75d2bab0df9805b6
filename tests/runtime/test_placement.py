"""Placement of banded layouts (`band <axis> W`): blocks against a by-hand definition."""

import numpy as np
import pytest

from plmr.dialects import mesh
from plmr.dialects.context import parse_module
from plmr.runtime.mesh_machine import run_mesh
from plmr.runtime.placement import gather_array, scatter_array

# (shape, layout dims, band width, grid)
CASES = [
    ((8, 4, 10), ["x", "y", "x"], 3, (5, 7)),
    ((8, 4, 10), ["x", "-", "x"], 7, (2, 7)),
    ((8, 11, 1, 128), ["y", "-", "-", "y"], 52, (420, 3)),
    ((3, 6), ["y", "y"], 2, (7, 1)),
    ((5, 9), ["y", "x"], 2, (6, 4)),  # one dim: replicated within a band
    ((6, 2), ["-", "x"], 1, (1, 5)),  # bands of one PE
]


def by_hand(
    x: np.ndarray, dims: list[str], width: int, grid: tuple[int, int], pad: float
) -> np.ndarray:
    """Each PE's block, element by element (the definition the layout documents)."""
    layout = mesh.LayoutAttr(dims, band=(_banded(dims), width))
    block = mesh.block_shape(x.shape, layout, grid)
    axis = layout.band_axis.data
    banded = layout.banded_dims()
    out = np.full((*grid, *block), pad, dtype=x.dtype)
    for r in range(grid[0]):
        for c in range(grid[1]):
            p = r if axis == "y" else c
            bands = mesh.axis_size(axis, grid) // width
            for e in np.ndindex(*block):
                src: list[int] = []
                for d, (k, a) in enumerate(zip(e, dims, strict=True)):
                    if a == "-":
                        src.append(k)
                    elif a != axis:
                        src.append((r if a == "y" else c) * block[d] + k)
                    elif p >= bands * width:
                        src.append(x.shape[d])
                    elif d == banded[0]:
                        src.append((p // width) * block[d] + k)
                    else:
                        src.append((p % width) * block[d] + k)
                if all(i < s for i, s in zip(src, x.shape, strict=True)):
                    out[(r, c, *e)] = x[tuple(src)]
    return out


def _banded(dims: list[str]) -> str:
    """The banded axis of a case: the one carrying two dims, else the first dim's."""
    if dims.count("x") == 2 or dims.count("y") == 2:
        return "x" if dims.count("x") == 2 else "y"
    return next(a for a in dims if a != "-")


@pytest.mark.parametrize("shape,dims,width,grid", CASES)
def test_banded_scatter_matches_the_definition_and_gather_restores(
    shape: tuple[int, ...], dims: list[str], width: int, grid: tuple[int, int]
):
    x = np.random.default_rng(len(shape)).standard_normal(shape).astype(np.float32)
    layout = mesh.LayoutAttr(dims, band=(_banded(dims), width))
    blocks = scatter_array(x, layout, grid, pad=-7.0)
    assert blocks.shape == (*grid, *mesh.block_shape(shape, layout, grid))
    np.testing.assert_array_equal(blocks, by_hand(x, dims, width, grid, -7.0))
    np.testing.assert_array_equal(gather_array(blocks, layout, shape, grid), x)


def test_band_block_shape():
    layout = mesh.LayoutAttr(["x", "-", "-", "x"], band=("x", 52))
    # 8 bands of 52 PEs on 420: one head per band, 128 / 52 -> 3 per PE.
    assert mesh.block_shape((8, 4, 1, 128), layout, (420, 420)) == (1, 4, 1, 3)
    assert mesh.split_counts(layout, (420, 420)) == (8, 1, 1, 52)
    one = mesh.LayoutAttr(["x", "y"], band=("x", 13))
    assert mesh.block_shape((8, 40), one, (4, 420)) == (1, 10)


SCORES = """
mesh.program @scores(%q: tensor<2x3x5xf32>, %k: tensor<2x8x5xf32>) -> tensor<2x3x8xf32> device "wse2" grid [4, 7] {
  %dq = mesh.scatter %q : tensor<2x3x5xf32> -> !mesh.dist<tensor<2x3x5xf32>, #mesh.layout<[x, -, x], band x 3>>
  %dk = mesh.scatter %k : tensor<2x8x5xf32> -> !mesh.dist<tensor<2x8x5xf32>, #mesh.layout<[x, y, x], band x 3>>
  %s = mesh.spmd(%dq, %dk) : (!mesh.dist<tensor<2x3x5xf32>, #mesh.layout<[x, -, x], band x 3>>, !mesh.dist<tensor<2x8x5xf32>, #mesh.layout<[x, y, x], band x 3>>) -> !mesh.dist<tensor<2x3x8xf32>, #mesh.layout<[x, -, y], band x 3>> {
  ^bb0(%y: index, %x: index, %bq: tensor<1x3x2xf32>, %bk: tensor<1x2x2xf32>):
    %q2 = tile.reshape %bq : tensor<1x3x2xf32> -> tensor<3x2xf32>
    %k2 = tile.reshape %bk : tensor<1x2x2xf32> -> tensor<2x2xf32>
    %z = tile.fill 0.0 : tensor<3x2xf32>
    %p = tile.dot %q2, %k2, %z transpose_b : (tensor<3x2xf32>, tensor<2x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
    %p3 = tile.reshape %p : tensor<3x2xf32> -> tensor<1x3x2xf32>
    %t = mesh.allreduce sum %p3 axis x SEGMENT : tensor<1x3x2xf32>
    mesh.yield %t : tensor<1x3x2xf32>
  }
  %o = mesh.gather %s : !mesh.dist<tensor<2x3x8xf32>, #mesh.layout<[x, -, y], band x 3>> -> tensor<2x3x8xf32>
  mesh.return %o : tensor<2x3x8xf32>
}
"""


def test_scores_in_bands_reduce_the_head_dimension_within_each_band():
    rng = np.random.default_rng(0)
    q = rng.standard_normal((2, 3, 5)).astype(np.float32)
    k = rng.standard_normal((2, 8, 5)).astype(np.float32)
    want = np.einsum("hgd,htd->hgt", q, k)
    (got,), _ = run_mesh(parse_module(SCORES.replace("SEGMENT", "segment = 3")), [q, k])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    # Without the segment the allreduce mixes the two heads: a wrong result is noticed.
    (mixed,), _ = run_mesh(parse_module(SCORES.replace("SEGMENT", "")), [q, k])
    assert not np.allclose(mixed, want, atol=1e-3)
