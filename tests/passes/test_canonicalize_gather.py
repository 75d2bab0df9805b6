"""
`canonicalize.gather`: a gather by constant indices forming a range becomes a slice and
a reshape with the same semantics (random ranges, axes and index shapes, negative
indices included), other indices stay a gather, and BERT's two constant-index gathers
then compile to the mesh and match the graph reference.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plmr.dialects import graph
from plmr.dialects.context import make_context, parse_module
from plmr.passes.graph_canonicalize import GraphCanonicalizePass
from plmr.passes.pipeline import CompileOptions, compile_module
from plmr.runtime.reference import evaluate_function
from plmr.runtime.running import run_entry, select_entry


def tensor(shape: tuple[int, ...], elt: str) -> str:
    return f"tensor<{''.join(f'{d}x' for d in shape)}{elt}>"


def gather_program(shape: tuple[int, ...], axis: int, indices: np.ndarray[Any, Any]) -> str:
    """`@main(%x)`: `x` gathered along `axis` by the constant `indices`."""
    out = (*shape[:axis], *indices.shape, *shape[axis + 1 :])
    values = np.array2string(indices, separator=", ").replace("\n", "")
    it = tensor(indices.shape, "i64")
    return (
        f"func.func @main(%x: {tensor(shape, 'f32')}) -> {tensor(out, 'f32')} {{\n"
        f"  %i = graph.constant dense<{values}> : {it}\n"
        f"  %y = graph.gather %x, %i axis = {axis} : ({tensor(shape, 'f32')}, {it}) "
        f"-> {tensor(out, 'f32')}\n"
        f"  func.return %y : {tensor(out, 'f32')}\n}}\n"
    )


def canonicalized(text: str, x: np.ndarray[Any, Any]) -> tuple[Any, list[Any], list[Any]]:
    module = parse_module(text)
    before = evaluate_function(module, "main", [x])
    GraphCanonicalizePass().apply(make_context(), module)
    module.verify()
    return module, before, evaluate_function(module, "main", [x])


@st.composite
def ranges(draw: st.DrawFn) -> tuple[tuple[int, ...], int, np.ndarray[Any, Any]]:
    """A data shape, an axis and a range of indices of that axis, in some shape."""
    shape = tuple(draw(st.lists(st.integers(1, 6), min_size=1, max_size=3)))
    axis = draw(st.integers(0, len(shape) - 1))
    size = shape[axis]
    start = draw(st.integers(0, size - 1))
    step = draw(st.sampled_from([s for s in (-3, -2, -1, 1, 2, 3)]))
    most = (size - 1 - start) // step + 1 if step > 0 else start // -step + 1
    n = draw(st.integers(1, most))
    flat = start + step * np.arange(n)
    negative = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    flat = np.where(np.array(negative), flat - size, flat)  # the same index from the end
    scalar = n == 1 and draw(st.booleans())
    if scalar:
        return shape, axis, flat.reshape(())
    split = draw(st.sampled_from([d for d in (1, 2, 3) if n % d == 0]))
    return shape, axis, flat.reshape(split, n // split)


@settings(max_examples=60, deadline=None)
@given(ranges(), st.integers(0, 2**31 - 1))
def test_ranges_become_a_slice_and_a_reshape(
    case: tuple[tuple[int, ...], int, np.ndarray[Any, Any]], seed: int
):
    shape, axis, indices = case
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    module, before, after = canonicalized(gather_program(shape, axis, indices), x)
    assert not any(isinstance(op, graph.GatherOp) for op in module.walk())
    np.testing.assert_array_equal(after[0], before[0])
    flat = np.where(indices < 0, indices + shape[axis], indices)
    np.testing.assert_array_equal(before[0], np.take(x, flat, axis=axis))


@pytest.mark.parametrize(
    "indices",
    [[0, 2, 3], [1, 1], [3, 0, 1, 2], [0, 9]],
    ids=["gap", "repeat", "perm", "oob"],
)
def test_other_indices_stay_a_gather(indices: list[int]):
    text = gather_program((6, 2), 0, np.array(indices))
    module = parse_module(text)
    GraphCanonicalizePass().apply(make_context(), module)
    assert sum(isinstance(op, graph.GatherOp) for op in module.walk()) == 1


BERT_GATHERS = {
    # The attention mask's GatherND by the identity, and the pooler's first token.
    "mask": (
        "func.func @main(%m: tensor<8xf32>) -> tensor<1x1x1x8xf32> {\n"
        "  %idx = graph.constant dense<[[[[0, 1, 2, 3, 4, 5, 6, 7]]]]> : tensor<1x1x1x8xi64>\n"
        "  %g = graph.gather %m, %idx : (tensor<8xf32>, tensor<1x1x1x8xi64>) -> tensor<1x1x1x8xf32>\n"
        "  func.return %g : tensor<1x1x1x8xf32>\n}\n",
        (8,),
    ),
    "pooler": (
        "func.func @main(%h: tensor<1x8x64xf32>) -> tensor<1x64xf32> {\n"
        "  %i = graph.constant dense<0> : tensor<i64>\n"
        "  %g = graph.gather %h, %i axis = 1 : (tensor<1x8x64xf32>, tensor<i64>) -> tensor<1x64xf32>\n"
        "  func.return %g : tensor<1x64xf32>\n}\n",
        (1, 8, 64),
    ),
}


@pytest.mark.parametrize("grid", [(2, 2), (3, 3)], ids=["2x2", "3x3"])
@pytest.mark.parametrize("name", sorted(BERT_GATHERS))
def test_constant_index_gathers_compile_to_the_mesh(name: str, grid: tuple[int, int]):
    text, shape = BERT_GATHERS[name]
    module = parse_module(text)
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    (want,) = evaluate_function(module, "main", [x])
    compile_module(make_context(), module, CompileOptions(grid=grid, substitute=False))
    entry = select_entry(module, None)
    assert entry.name == "mesh.program"
    (got,), _ = run_entry(module, entry, [x])
    np.testing.assert_array_equal(got, want)
