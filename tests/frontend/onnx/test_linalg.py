"""Einsum handler of `plmr.frontend.onnx` (MatMul and Gemm: test_import.py)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest


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
