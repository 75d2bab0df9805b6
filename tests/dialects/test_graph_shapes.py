"""
Property tests of the shape inference of the ops of ONNX models (`plmr.dialects.
graph_shapes`): random shapes and parameters against what numpy computes, and every
invalid case rejected with a `VerifyException` (never another exception).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from xdsl.utils.exceptions import VerifyException

from plmr.dialects.graph_shapes import (
    expand_shape,
    gather_elements_shape,
    pad_shape,
    slice_shape,
    where_shape,
)

Shape = tuple[int, ...]

FAST = settings(max_examples=200, deadline=None)


def shapes(min_rank: int = 0, max_rank: int = 4, min_dim: int = 0, max_dim: int = 5) -> Any:
    return st.lists(
        st.integers(min_dim, max_dim), min_size=min_rank, max_size=max_rank
    ).map(tuple)


@st.composite
def slices(draw: st.DrawFn) -> tuple[Shape, list[int], list[int], list[int]]:
    """A shape and per-dimension start, end and step, mostly (not always) normalised."""
    shape = draw(shapes(1, 3))
    starts: list[int] = []
    ends: list[int] = []
    steps: list[int] = []
    for d in shape:
        steps.append(draw(st.sampled_from([-3, -2, -1, 0, 1, 2, 3])))
        starts.append(draw(st.integers(-1, d)))
        ends.append(draw(st.integers(-2, d + 1)))
    return shape, starts, ends, steps


def _valid_slice(
    shape: Shape, starts: list[int], ends: list[int], steps: list[int]
) -> bool:
    for d, s, e, st_ in zip(shape, starts, ends, steps, strict=True):
        if st_ == 0:
            return False
        if d == 0:
            if s != 0 or e != 0:
                return False
            continue
        low = 0 if st_ > 0 else -1
        if not (0 <= s < d and low <= e <= d):
            return False
    return True


@FAST
@given(slices())
def test_slice_shape_is_numpys_slicing(case: tuple[Shape, list[int], list[int], list[int]]):
    shape, starts, ends, steps = case
    if not _valid_slice(shape, starts, ends, steps):
        with pytest.raises(VerifyException):
            slice_shape(shape, starts, ends, steps)
        return
    got = slice_shape(shape, starts, ends, steps)
    index = tuple(
        slice(s, e if e >= 0 else None, st_)
        for s, e, st_ in zip(starts, ends, steps, strict=True)
    )
    assert got == np.zeros(shape)[index].shape


@FAST
@given(shapes(0, 3, 1, 4), st.data())
def test_slice_rejects_a_wrong_number_of_entries(shape: Shape, data: st.DataObject):
    n = data.draw(st.integers(0, 4).filter(lambda k: k != len(shape)))
    with pytest.raises(VerifyException, match="give one per dimension"):
        slice_shape(shape, [0] * n, [1] * len(shape), [1] * len(shape))


@FAST
@given(shapes(0, 3, 1, 4), shapes(0, 4, 1, 4))
def test_expand_shape_is_numpys_broadcast_to(shape: Shape, target: Shape):
    try:
        want = np.broadcast_shapes(shape, target)
    except ValueError:
        with pytest.raises(VerifyException, match="not broadcast-compatible"):
            expand_shape(shape, target)
        return
    assert expand_shape(shape, target) == want
    assert np.broadcast_to(np.zeros(shape), want).shape == want


@FAST
@given(shapes(0, 3, 0, 4), shapes(0, 3, 0, 4), shapes(0, 3, 0, 4))
def test_where_shape_is_numpys_three_way_broadcast(c: Shape, a: Shape, b: Shape):
    try:
        want = np.broadcast_shapes(c, a, b)
    except ValueError:
        with pytest.raises(VerifyException):
            where_shape(c, a, b)
        return
    assert where_shape(c, a, b) == want


@FAST
@given(shapes(0, 3, 0, 4), st.data(), st.sampled_from(["constant", "reflect", "edge"]))
def test_pad_shape_is_numpys_pad(shape: Shape, data: st.DataObject, mode: str):
    rank = len(shape)
    pads = data.draw(st.lists(st.integers(-1, 4), min_size=2 * rank, max_size=2 * rank))
    widths = [(pads[i], pads[i + rank]) for i in range(rank)]
    bad = any(p < 0 for p in pads)
    bad = bad or (
        mode == "reflect" and any(max(w) >= d for w, d in zip(widths, shape, strict=True))
    )
    bad = bad or (
        mode == "edge"
        and any(max(w) > 0 and d == 0 for w, d in zip(widths, shape, strict=True))
    )
    if bad:
        with pytest.raises(VerifyException):
            pad_shape(shape, pads, mode)
        return
    got = pad_shape(shape, pads, mode)
    if not shape:
        assert got == ()
        return
    x = np.zeros(shape)
    if mode == "constant":
        assert got == np.pad(x, widths).shape
    else:
        assert got == np.pad(x, widths, mode=mode).shape


@FAST
@given(shapes(0, 3, 1, 4), shapes(0, 3, 1, 5), st.integers(-3, 3))
def test_gather_elements_shape(data: Shape, indices: Shape, axis: int):
    rank = len(data)
    bad = rank == 0 or len(indices) != rank or not -rank <= axis < rank
    if not bad:
        ax = axis % rank
        bad = any(
            n > d for i, (d, n) in enumerate(zip(data, indices, strict=True)) if i != ax
        )
    if bad:
        with pytest.raises(VerifyException):
            gather_elements_shape(data, indices, axis)
        return
    assert gather_elements_shape(data, indices, axis) == indices
    # Every in-range index tensor of that shape selects valid elements.
    rng = np.random.default_rng(0)
    ax = axis % rank
    idx = rng.integers(0, data[ax], indices)
    where = list(np.indices(indices, sparse=True))
    where[ax] = idx
    assert np.zeros(data)[tuple(where)].shape == indices
