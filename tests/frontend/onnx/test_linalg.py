"""MatMul, Gemm and Einsum handlers of `plmr.frontend.onnx`."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from onnx import helper

from plmr.dialects import graph


@pytest.mark.parametrize(
    "shapes",
    [
        ((3, 4), (4, 5)),
        ((2, 3, 4), (4, 5)),
        ((2, 3, 4), (2, 4, 5)),
        ((2, 1, 3, 4), (3, 4, 5)),
        ((4,), (4, 5)),
        ((3, 4), (4,)),
        ((4,), (4,)),
        ((2, 3, 4), (4,)),
        ((4,), (2, 4, 5)),
    ],
)
def test_matmul(kit: Any, shapes: tuple[tuple[int, ...], tuple[int, ...]]):
    x, y = kit.rand(*shapes[0], seed=1), kit.rand(*shapes[1], seed=2)
    feeds = {"x": x, "y": y}
    kit.check(kit.model([kit.node("MatMul", ["x", "y"])], feeds, ["out"]), feeds)


def test_matmul_with_weight_initializer(kit: Any):
    x = kit.rand(2, 4)
    w = kit.rand(4, 3, seed=5)
    model = kit.model([kit.node("MatMul", ["x", "w"])], {"x": x}, ["out"], {"w": w})
    module = kit.check(model, {"x": x})
    assert kit.ops(module) == ["graph.constant", "graph.matmul"]


@pytest.mark.parametrize("trans_a", [0, 1])
@pytest.mark.parametrize("trans_b", [0, 1])
@pytest.mark.parametrize(("alpha", "beta"), [(1.0, 1.0), (0.5, 2.0), (1.5, 0.0)])
@pytest.mark.parametrize("c_kind", ["none", "const_vector", "input_matrix", "const_row"])
def test_gemm(kit: Any, trans_a: int, trans_b: int, alpha: float, beta: float, c_kind: str):
    m, k, n = 3, 4, 5
    a = kit.rand(*((k, m) if trans_a else (m, k)), seed=1)
    b = kit.rand(*((n, k) if trans_b else (k, n)), seed=2)
    feeds = {"a": a, "b": b}
    inits: dict[str, Any] = {}
    inputs = ["a", "b"]
    if c_kind == "const_vector":
        inits["c"] = kit.rand(n, seed=3)
        inputs.append("c")
    elif c_kind == "const_row":
        inits["c"] = kit.rand(1, n, seed=3)
        inputs.append("c")
    elif c_kind == "input_matrix":
        feeds["c"] = kit.rand(m, n, seed=3)
        inputs.append("c")
    node = helper.make_node(
        "Gemm", inputs, ["out"], transA=trans_a, transB=trans_b, alpha=alpha, beta=beta
    )
    module = kit.check(kit.model([node], feeds, ["out"], inits), feeds)
    matmul = next(op for op in module.walk() if isinstance(op, graph.MatmulOp))
    assert (matmul.transpose_a is not None) == bool(trans_a)
    assert (matmul.transpose_b is not None) == bool(trans_b)


def test_gemms_sharing_c_with_different_betas(kit: Any):
    a = kit.rand(2, 3)
    inits = {"b": kit.rand(3, 4, seed=1), "c": kit.rand(4, seed=2)}
    nodes = [
        helper.make_node("Gemm", ["a", "b", "c"], ["y1"], beta=2.0),
        helper.make_node("Gemm", ["a", "b", "c"], ["y2"], beta=-0.5),
        helper.make_node("Gemm", ["a", "b", "c"], ["y3"]),
    ]
    kit.check(kit.model(nodes, {"a": a}, ["y1", "y2", "y3"], inits), {"a": a})


@pytest.mark.parametrize(
    ("equation", "shapes"),
    [
        ("ij,jk->ik", [(3, 4), (4, 5)]),
        ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
        ("bhqk,bhkd->bhqd", [(2, 3, 4, 6), (2, 3, 6, 5)]),
        ("bsd,hd->bsh", [(2, 4, 5), (3, 5)]),
        ("ij,kj->ik", [(3, 4), (5, 4)]),
        ("ji,jk->ik", [(4, 3), (4, 5)]),
        ("bij,bjk->bki", [(2, 3, 4), (2, 4, 5)]),
        ("i,j->ij", [(3,), (4,)]),
        ("i,i->", [(5,), (5,)]),
        ("ij,jk", [(3, 4), (4, 5)]),
        ("abc,cd->abd", [(2, 3, 4), (4, 5)]),
        ("ijk,kj->i", [(2, 3, 4), (4, 3)]),
        ("ij->ji", [(3, 4)]),
        ("ijk->ik", [(3, 4, 5)]),
        ("ij->", [(3, 4)]),
        ("bqd,bkd->bqk", [(2, 4, 5), (2, 6, 5)]),
    ],
)
def test_einsum(kit: Any, equation: str, shapes: list[tuple[int, ...]]):
    names = ["a", "b"][: len(shapes)]
    feeds = {
        n: kit.rand(*s, seed=i) for i, (n, s) in enumerate(zip(names, shapes, strict=True))
    }
    model = kit.model([kit.node("Einsum", names, equation=equation)], feeds, ["out"])
    kit.check(model, feeds, rtol=1e-5, atol=1e-5)


def test_einsum_attention_scores_use_transpose_b(kit: Any):
    feeds = {"q": kit.rand(2, 3, 4, 5), "k": kit.rand(2, 3, 6, 5, seed=1)}
    model = kit.model(
        [kit.node("Einsum", ["q", "k"], equation="bhqd,bhkd->bhqk")], feeds, ["out"]
    )
    ops = kit.ops(kit.check(model, feeds))
    assert "graph.transpose" not in ops
    assert ops.count("graph.matmul") == 1


@pytest.mark.parametrize(
    ("equation", "shapes", "fragment"),
    [
        ("...ij,...jk->...ik", [(2, 3, 4), (2, 4, 5)], "ellipses"),
        ("ii->i", [(3, 3)], "repeated letters"),
        ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)], "one or two operands"),
    ],
)
def test_error_einsum(
    kit: Any, equation: str, shapes: list[tuple[int, ...]], fragment: str
):
    names = ["a", "b", "c"][: len(shapes)]
    feeds = {n: kit.rand(*s) for n, s in zip(names, shapes, strict=True)}
    model = kit.model([kit.node("Einsum", names, equation=equation)], feeds, ["out"])
    kit.raises(model, "(Einsum)", fragment)


def test_error_einsum_broadcast(kit: Any):
    feeds = {"a": kit.rand(1, 3, 4), "b": kit.rand(2, 4, 5)}
    model = kit.model(
        [kit.node("Einsum", ["a", "b"], equation="bij,bjk->bik")], feeds, ["out"]
    )
    kit.raises(model, "(Einsum)", "letter 'b' has sizes 1 and 2")


def test_einsum_int(kit: Any):
    feeds = {
        "a": np.arange(6, dtype=np.int64).reshape(2, 3),
        "b": np.arange(12, dtype=np.int64).reshape(3, 4),
    }
    model = kit.model(
        [kit.node("Einsum", ["a", "b"], equation="ij,jk->ik")], feeds, ["out"]
    )
    kit.check(model, feeds)
