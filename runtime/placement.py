"""
Placement of host arrays on the grid and back for the mesh runtime: a tensor cut into
per-PE blocks under a `#mesh.layout` (padded, chunked, skewed on rings) and reassembled.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from plmr.dialects import mesh
from plmr.values import Array


def scatter_array(
    x: Array, layout: mesh.LayoutAttr, grid: tuple[int, int], pad: float = 0.0
) -> Array:
    """Host tensor -> per-PE blocks of shape `(rows, cols, *block)`."""
    if layout.band is not None:
        return _scatter_banded(x, layout, grid, pad)
    shape = x.shape
    block = mesh.block_shape(shape, layout, grid)
    pads = [
        (0, 0) if a == "-" else (0, b * mesh.axis_size(a, grid) - s)
        for s, b, a in zip(shape, block, layout.axes, strict=True)
    ]
    if any(p[1] for p in pads):
        x = np.pad(x, pads, constant_values=pad)
    split: list[int] = []
    axis_pos: dict[str, int] = {}
    for s, b, a in zip(x.shape, block, layout.axes, strict=True):
        if a == "-":
            split.append(s)
            continue
        n = mesh.axis_size(a, grid)
        if layout.mode.data == "interleaved":
            split += [b, n]
            axis_pos[a] = len(split) - 1
        else:
            split += [n, b]
            axis_pos[a] = len(split) - 2
    y = x.reshape(split)
    block_axes = [i for i in range(len(split)) if i not in axis_pos.values()]
    lead: list[int] = []
    for a in ("y", "x"):
        if a in axis_pos:
            lead.append(axis_pos[a])
    y = np.transpose(y, [*lead, *block_axes])
    for i, a in enumerate(("y", "x")):
        if a not in axis_pos:
            y = np.expand_dims(y, i)
    out = np.ascontiguousarray(np.broadcast_to(y, (grid[0], grid[1], *block)))
    if layout.skew.data and layout.chunks.data:
        dim = layout.dim_of(layout.skew.data)
        assert dim is not None
        rows, cols, units = chunk_index(layout, grid)
        moved = _chunked(out, dim, layout.chunks.data, grid, layout.skew.data)
        picked = moved[rows, cols, units]
        return _unchunked(picked, dim, out.shape)
    if layout.skew.data:
        rows, cols = skew_index(layout, grid)
        out = np.ascontiguousarray(out[rows, cols])
    return out


def _chunked(
    blocks: Array, dim: int, chunks: int, grid: tuple[int, int], axis: str
) -> Array:
    """(H, W, ..., S, ...) -> (H, W, per-PE chunks, ..., chunk size, ...)."""
    n = grid[1] if axis == "x" else grid[0]
    per = chunks // n
    size = blocks.shape[2 + dim] // per
    shape = (*blocks.shape[: 2 + dim], per, size, *blocks.shape[3 + dim :])
    return np.moveaxis(blocks.reshape(shape), 2 + dim, 2)


def _unchunked(moved: Array, dim: int, shape: Sequence[int]) -> Array:
    return np.ascontiguousarray(np.moveaxis(moved, 2, 2 + dim).reshape(shape))


def chunk_index(
    layout: mesh.LayoutAttr, grid: tuple[int, int]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """For a chunked skew: (row, col, local chunk) of the standard placement per chunk."""
    from plmr.target.collectives import ring_order

    ny, nx = grid
    ring = layout.ring.data
    chunks = layout.chunks.data
    ord_y = np.asarray(ring_order(ring, ny) if ny >= 3 or ring == "torus" else range(ny))
    ord_x = np.asarray(ring_order(ring, nx) if nx >= 3 or ring == "torus" else range(nx))
    pos_y, pos_x = np.argsort(ord_y), np.argsort(ord_x)
    per_x, per_y = chunks // nx, chunks // ny
    if layout.skew.data == "x":
        yy, xx, uu = np.indices((ny, nx, per_x), dtype=np.int64)
        c = (pos_x[xx] * per_x + uu + pos_y[yy] * per_y) % chunks
        return yy, c // per_x, c % per_x
    yy, xx, uu = np.indices((ny, nx, per_y), dtype=np.int64)
    c = (pos_y[yy] * per_y + uu + pos_x[xx] * per_x) % chunks
    return c // per_y, xx, c % per_y


def skew_index(
    layout: mesh.LayoutAttr, grid: tuple[int, int]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """For a skewed layout: the standard-placement PE whose block each PE holds."""
    from plmr.target.collectives import ring_order

    ny, nx = grid
    ring = layout.ring.data
    ord_y = np.asarray(ring_order(ring, ny) if ny >= 3 or ring == "torus" else range(ny))
    ord_x = np.asarray(ring_order(ring, nx) if nx >= 3 or ring == "torus" else range(nx))
    pos_y = np.argsort(ord_y)
    pos_x = np.argsort(ord_x)
    yy, xx = np.indices(grid, dtype=np.int64)
    if layout.skew.data == "x":
        return yy, ord_x[(pos_x[xx] + pos_y[yy]) % nx]
    return ord_y[(pos_y[yy] + pos_x[xx]) % ny], xx


def gather_array(
    blocks: Array, layout: mesh.LayoutAttr, shape: Sequence[int], grid: tuple[int, int]
) -> Array:
    """Per-PE blocks -> host tensor (replicas from the first PE of replicated axes)."""
    if layout.band is not None:
        return _gather_banded(blocks, layout, shape, grid)
    block = list(blocks.shape[2:])
    arr = blocks
    if layout.skew.data and layout.chunks.data:
        dim = layout.dim_of(layout.skew.data)
        assert dim is not None
        rows, cols, units = chunk_index(layout, grid)
        moved = _chunked(arr, dim, layout.chunks.data, grid, layout.skew.data)
        standard = np.empty_like(moved)
        standard[rows, cols, units] = moved
        arr = _unchunked(standard, dim, arr.shape)
    elif layout.skew.data:
        rows, cols = skew_index(layout, grid)
        unskewed = np.empty_like(arr)
        unskewed[rows, cols] = arr
        arr = unskewed
    if layout.dim_of("x") is None:
        arr = arr[:, :1]
    if layout.dim_of("y") is None:
        arr = arr[:1]
    # arr: (ny, nx, *block) with ny/nx = 1 when replicated.
    out = arr
    rank = len(block)
    # Move each mesh axis next to the tensor dim it splits, then merge.
    order: list[int] = []
    merged: list[int] = []
    for d in range(rank):
        a = layout.axes[d]
        if a == "-":
            order.append(2 + d)
            merged.append(block[d])
            continue
        lead_axis = 0 if a == "y" else 1
        n = out.shape[lead_axis]
        if layout.mode.data == "interleaved":
            order += [2 + d, lead_axis]
        else:
            order += [lead_axis, 2 + d]
        merged.append(n * block[d])
    rest = [i for i in (0, 1) if i not in order]
    out = np.transpose(out, [*order, *rest]).reshape(merged)
    # `reshape`: ascontiguousarray makes a rank-0 tensor (a numpy scalar here) rank 1.
    return np.ascontiguousarray(out[tuple(slice(0, s) for s in shape)]).reshape(shape)


def band_indices(
    shape: Sequence[int], layout: mesh.LayoutAttr, grid: tuple[int, int]
) -> tuple[npt.NDArray[np.int64], ...]:
    """
    For a banded layout: per tensor dim, the index of every element of every PE's block
    into the tensor (the dim's size where the PE holds padding), broadcastable to
    `(rows, cols, *block)`. Position `p` of the banded axis is PE `p % W` of band `p // W`;
    the positions past the last whole band hold padding.
    """
    band = layout.band
    assert band is not None
    block = mesh.block_shape(shape, layout, grid)
    banded = layout.banded_dims()
    rank = len(shape)
    out: list[npt.NDArray[np.int64]] = []
    for d, (size, b, a) in enumerate(zip(shape, block, layout.axes, strict=True)):
        k = np.arange(b, dtype=np.int64)
        if a == "-":
            idx = k[None, :]
        else:
            p = np.arange(mesh.axis_size(a, grid), dtype=np.int64)
            if a != band[0]:
                start = p * b
            else:
                width = band[1]
                start = (p // width if d == banded[0] else p % width) * b
                start[p >= (len(p) // width) * width] = size
            idx = start[:, None] + k[None, :]
        idx = np.minimum(idx, size)
        lead = (len(idx), 1) if a == "y" else (1, len(idx)) if a == "x" else (1, 1)
        full = [1] * rank
        full[d] = b
        out.append(idx.reshape(*lead, *full))
    return tuple(out)


def _scatter_banded(
    x: Array, layout: mesh.LayoutAttr, grid: tuple[int, int], pad: float
) -> Array:
    index = band_indices(x.shape, layout, grid)
    padded = np.pad(x, [(0, 1)] * x.ndim, constant_values=pad)
    block = mesh.block_shape(x.shape, layout, grid)
    out = padded[index]
    return np.ascontiguousarray(np.broadcast_to(out, (grid[0], grid[1], *block)))


def _gather_banded(
    blocks: Array, layout: mesh.LayoutAttr, shape: Sequence[int], grid: tuple[int, int]
) -> Array:
    index = band_indices(shape, layout, grid)
    out = np.zeros([s + 1 for s in shape], dtype=blocks.dtype)
    # Replicas along an axis no dim uses: from the first PE. Within a band, replicas hold
    # the same values: every PE writes its block (padding lands past the end of each dim
    # and is cut off).
    if layout.dim_of("x") is None:
        blocks = blocks[:, :1]
    if layout.dim_of("y") is None:
        blocks = blocks[:1]
    out[index] = np.broadcast_to(blocks, np.broadcast_shapes(*(i.shape for i in index)))
    return np.ascontiguousarray(out[tuple(slice(0, s) for s in shape)])
