"""
Tests of `convert-graph-to-loop`: every `graph` op lowers to loop nests that compute what
the graph reference semantics computes (differential, random inputs), with the nest
structure the level promises (softmax: 4 nests, layernorm: 3, conv2d: a 7-deep nest).
"""

from pathlib import Path

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects import func

from plmr.dialects import graph
from plmr.dialects.context import parse_module
from plmr.dialects.graph_weights import weight_ops
from plmr.dialects.loop import NestOp
from plmr.lowering.graph_to_loop import ConvertGraphToLoopPass, reshape_groups
from plmr.runtime.reference import evaluate_function
from plmr.runtime.running import random_inputs
from plmr.weight_io import SafetensorsWriter


def t(*shape: int) -> str:
    return f"tensor<{'x'.join(map(str, shape))}xf32>" if shape else "tensor<f32>"


def unary(op: str, extra: str = "") -> str:
    return f"%y = graph.{op} %a{extra} : {t(3, 4)}"


CASES: dict[str, tuple[str, str]] = {
    "matmul": (
        f"%a: {t(2, 3, 4)}, %b: {t(5, 4)}",
        f"%y = graph.matmul %a, %b transpose_b : ({t(2, 3, 4)}, {t(5, 4)}) -> {t(2, 3, 5)}",
    ),
    "matmul_ta": (
        f"%a: {t(4, 3)}, %b: {t(1, 4, 5)}",
        f"%y = graph.matmul %a, %b transpose_a : ({t(4, 3)}, {t(1, 4, 5)}) -> {t(1, 3, 5)}",
    ),
    "add": (
        f"%a: {t(3, 4)}, %b: {t(4)}",
        f"%y = graph.add %a, %b : ({t(3, 4)}, {t(4)}) -> {t(3, 4)}",
    ),
    "sub": (
        f"%a: {t(3, 1)}, %b: {t(1, 4)}",
        f"%y = graph.sub %a, %b : ({t(3, 1)}, {t(1, 4)}) -> {t(3, 4)}",
    ),
    "mul": (
        f"%a: {t(3, 4)}, %b: {t()}",
        f"%y = graph.mul %a, %b : ({t(3, 4)}, {t()}) -> {t(3, 4)}",
    ),
    "div": (
        f"%a: {t(3, 4)}, %b: {t(3, 4)}",
        f"%y = graph.div %a, %b : ({t(3, 4)}, {t(3, 4)}) -> {t(3, 4)}",
    ),
    "scale": (f"%a: {t(3, 4)}", f"%y = graph.scale %a by 2.5 : {t(3, 4)}"),
    "relu": (f"%a: {t(3, 4)}", unary("relu")),
    "gelu": (f"%a: {t(3, 4)}", unary("gelu")),
    "gelu_tanh": (f"%a: {t(3, 4)}", f"%y = graph.gelu %a tanh : {t(3, 4)}"),
    "silu": (f"%a: {t(3, 4)}", unary("silu")),
    "sigmoid": (f"%a: {t(3, 4)}", unary("sigmoid")),
    "tanh": (f"%a: {t(3, 4)}", unary("tanh")),
    "exp": (f"%a: {t(3, 4)}", unary("exp")),
    "cos": (f"%a: {t(3, 4)}", unary("cos")),
    "sin": (f"%a: {t(3, 4)}", unary("sin")),
    "erf": (f"%a: {t(3, 4)}", unary("erf")),
    "neg": (f"%a: {t(3, 4)}", unary("neg")),
    "sqrt": (f"%a: {t(3, 4)}", unary("sqrt")),
    "transpose": (
        f"%a: {t(2, 3, 4)}",
        f"%y = graph.transpose %a perm = [2, 0, 1] : {t(2, 3, 4)} -> {t(4, 2, 3)}",
    ),
    "reshape_split": (
        f"%a: {t(2, 12)}",
        f"%y = graph.reshape %a : {t(2, 12)} -> {t(2, 3, 4)}",
    ),
    "reshape_merge": (
        f"%a: {t(2, 3, 4)}",
        f"%y = graph.reshape %a : {t(2, 3, 4)} -> {t(6, 4)}",
    ),
    "reshape_mixed": (f"%a: {t(4, 6)}", f"%y = graph.reshape %a : {t(4, 6)} -> {t(3, 8)}"),
    "reduce_sum": (
        f"%a: {t(2, 3, 4)}",
        f"%y = graph.reduce sum %a axes = [0, 2] : {t(2, 3, 4)} -> {t(3)}",
    ),
    "reduce_max_keep": (
        f"%a: {t(2, 3, 4)}",
        f"%y = graph.reduce max %a axes = [-1] keepdims : {t(2, 3, 4)} -> {t(2, 3, 1)}",
    ),
    "reduce_min_all": (
        f"%a: {t(2, 3)}",
        f"%y = graph.reduce min %a axes = [0, 1] : {t(2, 3)} -> {t()}",
    ),
    "reduce_mean": (
        f"%a: {t(2, 3, 4)}",
        f"%y = graph.reduce mean %a axes = [1] : {t(2, 3, 4)} -> {t(2, 4)}",
    ),
    "softmax": (f"%a: {t(3, 5)}", f"%y = graph.softmax %a axis = 0 : {t(3, 5)}"),
    "layernorm": (
        f"%a: {t(2, 3, 4)}, %g: {t(3, 4)}, %b: {t(4)}",
        f"%y = graph.layernorm %a, %g, %b axis = 1 : ({t(2, 3, 4)}, {t(3, 4)}, {t(4)}) -> {t(2, 3, 4)}",
    ),
    "rmsnorm": (
        f"%a: {t(3, 8)}, %w: {t(8)}",
        f"%y = graph.rmsnorm %a, %w : ({t(3, 8)}, {t(8)}) -> {t(3, 8)}",
    ),
    "concat": (
        f"%a: {t(2, 3)}, %b: {t(2, 1)}, %c: {t(2, 2)}",
        f"%y = graph.concat %a, %b, %c axis = 1 : ({t(2, 3)}, {t(2, 1)}, {t(2, 2)}) -> {t(2, 6)}",
    ),
    "conv2d": (
        f"%x: {t(1, 4, 7, 7)}, %w: {t(6, 2, 3, 3)}, %b: {t(6)}",
        f"%y = graph.conv2d %x, %w, %b strides = [2, 1] pads = [1, 0, 1, 2] dilations = [1, 2] groups = 2 : ({t(1, 4, 7, 7)}, {t(6, 2, 3, 3)}, {t(6)}) -> {t(1, 6, 4, 5)}",
    ),
    "pool_max": (
        f"%x: {t(1, 2, 6, 6)}",
        f"%y = graph.pool max %x kernel = [3, 3] strides = [2, 2] pads = [1, 1, 1, 1] : {t(1, 2, 6, 6)} -> {t(1, 2, 3, 3)}",
    ),
    "pool_avg": (
        f"%x: {t(1, 2, 6, 6)}",
        f"%y = graph.pool avg %x kernel = [3, 3] strides = [2, 2] pads = [1, 1, 1, 1] : {t(1, 2, 6, 6)} -> {t(1, 2, 3, 3)}",
    ),
    "pool_avg_pad": (
        f"%x: {t(1, 2, 6, 6)}",
        f"%y = graph.pool avg %x kernel = [2, 2] pads = [1, 1, 0, 0] count_include_pad : {t(1, 2, 6, 6)} -> {t(1, 2, 6, 6)}",
    ),
    "constant": (
        f"%a: {t(2, 2)}",
        f"%c = graph.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : {t(2, 2)}\n  %y = graph.add %a, %c : ({t(2, 2)}, {t(2, 2)}) -> {t(2, 2)}",
    ),
    "gather": (
        f"%a: {t(5, 3)}, %i: tensor<2x2xi64>",
        f"%y = graph.gather %a, %i axis = 0 : ({t(5, 3)}, tensor<2x2xi64>) -> {t(2, 2, 3)}",
    ),
    "where": (
        f"%c: tensor<3x1xi1>, %a: {t(3, 4)}, %b: {t(4)}",
        f"%y = graph.where %c, %a, %b : (tensor<3x1xi1>, {t(3, 4)}, {t(4)}) -> {t(3, 4)}",
    ),
    "cmp_lt": (
        f"%a: {t(3, 4)}, %b: {t(4)}",
        f"%y = graph.cmp lt %a, %b : ({t(3, 4)}, {t(4)}) -> tensor<3x4xi1>",
    ),
    "cmp_ne_int": (
        "%a: tensor<3x4xi64>, %b: tensor<3x1xi64>",
        "%y = graph.cmp ne %a, %b : (tensor<3x4xi64>, tensor<3x1xi64>) -> tensor<3x4xi1>",
    ),
    "cmp_ge_bool": (
        "%a: tensor<3x4xi1>, %b: tensor<4xi1>",
        "%y = graph.cmp ge %a, %b : (tensor<3x4xi1>, tensor<4xi1>) -> tensor<3x4xi1>",
    ),
    "not": ("%a: tensor<3x4xi1>", "%y = graph.not %a : tensor<3x4xi1>"),
    "and": (
        "%a: tensor<3x4xi1>, %b: tensor<4xi1>",
        "%y = graph.and %a, %b : (tensor<3x4xi1>, tensor<4xi1>) -> tensor<3x4xi1>",
    ),
    "or": (
        "%a: tensor<3x1xi1>, %b: tensor<4xi1>",
        "%y = graph.or %a, %b : (tensor<3x1xi1>, tensor<4xi1>) -> tensor<3x4xi1>",
    ),
    "xor": (
        "%a: tensor<3x4xi1>, %b: tensor<3x4xi1>",
        "%y = graph.xor %a, %b : (tensor<3x4xi1>, tensor<3x4xi1>) -> tensor<3x4xi1>",
    ),
    "cast_f32_i64": (
        f"%a: {t(3, 4)}",
        f"%y = graph.cast %a : {t(3, 4)} -> tensor<3x4xi64>",
    ),
    "cast_i64_f32": (
        "%a: tensor<3x4xi64>",
        f"%y = graph.cast %a : tensor<3x4xi64> -> {t(3, 4)}",
    ),
    "cast_f32_i1": (f"%a: {t(3, 4)}", f"%y = graph.cast %a : {t(3, 4)} -> tensor<3x4xi1>"),
    "cast_i64_i1": (
        "%a: tensor<3x4xi64>",
        "%y = graph.cast %a : tensor<3x4xi64> -> tensor<3x4xi1>",
    ),
    "cast_i1_f32": (
        "%a: tensor<3x4xi1>",
        f"%y = graph.cast %a : tensor<3x4xi1> -> {t(3, 4)}",
    ),
    "cast_i1_i64": (
        "%a: tensor<3x4xi1>",
        "%y = graph.cast %a : tensor<3x4xi1> -> tensor<3x4xi64>",
    ),
    "cast_i32_i64": (
        "%a: tensor<3x4xi32>",
        "%y = graph.cast %a : tensor<3x4xi32> -> tensor<3x4xi64>",
    ),
    "cast_i64_i32": (
        "%a: tensor<3x4xi64>",
        "%y = graph.cast %a : tensor<3x4xi64> -> tensor<3x4xi32>",
    ),
    "cast_f32_f64": (
        f"%a: {t(3, 4)}",
        f"%y = graph.cast %a : {t(3, 4)} -> tensor<3x4xf64>",
    ),
    "cast_f32_f32": (f"%a: {t(3, 4)}", f"%y = graph.cast %a : {t(3, 4)} -> {t(3, 4)}"),
    "abs": (f"%a: {t(3, 4)}", unary("abs")),
    "abs_int": ("%a: tensor<3x4xi32>", "%y = graph.abs %a : tensor<3x4xi32>"),
    "log": (f"%a: {t(3, 4)}", unary("log")),
    "floor": (f"%a: {t(3, 4)}", unary("floor")),
    "ceil": (f"%a: {t(3, 4)}", unary("ceil")),
    "reciprocal": (f"%a: {t(3, 4)}", unary("reciprocal")),
    "sinh": (f"%a: {t(3, 4)}", unary("sinh")),
    "cosh": (f"%a: {t(3, 4)}", unary("cosh")),
    "pow": (f"%a: {t(3, 4)}", f"%y = graph.pow %a by 1.5 : {t(3, 4)}"),
    "maximum": (
        f"%a: {t(3, 1)}, %b: {t(4)}",
        f"%y = graph.maximum %a, %b : ({t(3, 1)}, {t(4)}) -> {t(3, 4)}",
    ),
    "minimum_int": (
        "%a: tensor<3x4xi64>, %b: tensor<i64>",
        "%y = graph.minimum %a, %b : (tensor<3x4xi64>, tensor<i64>) -> tensor<3x4xi64>",
    ),
    "slice": (
        f"%a: {t(5, 6)}",
        f"%y = graph.slice %a starts = [1, 2] ends = [4, 6] steps = [1, 1] : {t(5, 6)} -> {t(3, 4)}",
    ),
    "slice_strided": (
        f"%a: {t(5, 6, 2)}",
        f"%y = graph.slice %a starts = [4, 0, 1] ends = [-1, 6, -1] steps = [-2, 4, -1] : {t(5, 6, 2)} -> {t(3, 2, 2)}",
    ),
    "slice_empty": (
        f"%a: {t(5, 6)}",
        f"%y = graph.slice %a starts = [1, 2] ends = [1, 6] steps = [1, 1] : {t(5, 6)} -> {t(0, 4)}",
    ),
    "expand": (
        f"%a: {t(3, 1)}",
        f"%y = graph.expand %a : {t(3, 1)} -> {t(2, 3, 4)}",
    ),
    "pad_constant": (
        f"%a: {t(3, 4)}",
        f"%y = graph.pad %a pads = [1, 0, 2, 3] mode = constant value = 2.5 : {t(3, 4)} -> {t(6, 7)}",
    ),
    "pad_reflect": (
        f"%a: {t(3, 4)}",
        f"%y = graph.pad %a pads = [2, 3, 1, 0] mode = reflect value = 0.0 : {t(3, 4)} -> {t(6, 7)}",
    ),
    "pad_edge": (
        "%a: tensor<3x4xi64>",
        "%y = graph.pad %a pads = [0, 2, 4, 1] mode = edge value = 0.0 : tensor<3x4xi64> -> tensor<7x7xi64>",
    ),
    "gather_elements": (
        f"%a: {t(5, 3)}, %i: tensor<2x3xi64>",
        f"%y = graph.gather_elements %a, %i axis = 0 : ({t(5, 3)}, tensor<2x3xi64>) -> {t(2, 3)}",
    ),
}


POSITIVE = {"sqrt", "div", "log", "reciprocal", "pow"}
"""Cases whose float inputs are made positive."""


def program(name: str) -> str:
    args, body = CASES[name]
    result = (
        body.rsplit("-> ", 1)[-1]
        if "->" in body.splitlines()[-1]
        else body.rsplit(": ", 1)[-1]
    )
    return f"func.func @main({args}) -> {result} {{\n  {body}\n  func.return %y : {result}\n}}\n"


def test_every_graph_op_has_a_case():
    covered = {
        part.split()[0] for _, body in CASES.values() for part in body.split("graph.")[1:]
    }
    names = {op.name.split(".")[1] for op in graph.Graph.operations}
    # split has several results, a weight needs its file: their own tests
    assert names - covered == {"split", "weight"}


@pytest.mark.parametrize("name", sorted(CASES))
def test_lowering_matches_the_reference(name: str):
    module = parse_module(program(name))
    fn = next(op for op in module.ops if isinstance(op, func.FuncOp))
    args = random_inputs(fn, 0)
    args = [
        np.abs(a) + 0.1 if name in POSITIVE and a.dtype.kind == "f" else a for a in args
    ]
    (want,) = evaluate_function(module, "main", args)
    ConvertGraphToLoopPass().apply(Context(), module)
    module.verify()
    assert not [op for op in module.walk() if op.dialect_name() == "graph"]
    (got,) = evaluate_function(module, "main", args)
    assert got.dtype == want.dtype
    if want.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    else:
        np.testing.assert_array_equal(got, want)


def test_weights_lower_to_references_that_compute_the_same(tmp_path: Path):
    """A raw-data weight and a safetensors one: the loop program reads the same bytes."""
    rng = np.random.default_rng(0)
    w, b = rng.standard_normal((6, 5)).astype(np.float32), rng.standard_normal(5)
    writer = SafetensorsWriter(tmp_path / "w.safetensors")
    writer.add_array("w", w)
    writer.write()
    raw = tmp_path / "b.data"
    raw.write_bytes(b"\0" * 12 + b.astype(np.float32).tobytes())
    module = parse_module(
        f"""
        func.func @main(%a: {t(4, 6)}) -> {t(4, 5)} {{
          %w = graph.weight "w" in "{tmp_path / "w.safetensors"}" : {t(6, 5)}
          %b = graph.weight "b" in "{raw}" at 12 : {t(5)}
          %m = graph.matmul %a, %w : ({t(4, 6)}, {t(6, 5)}) -> {t(4, 5)}
          %y = graph.add %m, %b : ({t(4, 5)}, {t(5)}) -> {t(4, 5)}
          func.return %y : {t(4, 5)}
        }}
        """
    )
    x = rng.standard_normal((4, 6)).astype(np.float32)
    (want,) = evaluate_function(module, "main", [x])
    np.testing.assert_allclose(want, x @ w + b.astype(np.float32), rtol=1e-6, atol=1e-6)
    ConvertGraphToLoopPass().apply(Context(), module)
    module.verify()
    refs = sorted((r.name, r.offset) for _, r in weight_ops(module))
    assert refs == [("b", 12), ("w", None)]
    (got,) = evaluate_function(module, "main", [x])
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_split_lowers_to_one_nest_per_piece():
    module = parse_module(
        f"""
        func.func @main(%a: {t(4, 6)}) -> ({t(4, 2)}, {t(4, 4)}) {{
          %p, %q = graph.split %a axis = 1 sizes = [2, 4] : {t(4, 6)} -> ({t(4, 2)}, {t(4, 4)})
          func.return %p, %q : {t(4, 2)}, {t(4, 4)}
        }}
        """
    )
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    ConvertGraphToLoopPass().apply(Context(), module)
    p, q = evaluate_function(module, "main", [x])
    np.testing.assert_array_equal(p, x[:, :2])
    np.testing.assert_array_equal(q, x[:, 2:])


def nests(name: str) -> list[NestOp]:
    module = parse_module(program(name))
    ConvertGraphToLoopPass().apply(Context(), module)
    fn = next(op for op in module.ops if isinstance(op, func.FuncOp))
    return [op for op in fn.body.block.ops if isinstance(op, NestOp)]


def test_nest_structure():
    assert [n.is_reduction for n in nests("softmax")] == [True, False, True, False]
    assert len(nests("layernorm")) == 3
    conv = nests("conv2d")[0]
    assert conv.rank == 7
    assert len(conv.reduction_dims) == 3


def test_reshape_groups():
    assert reshape_groups((1, 8, 16), (1, 8, 2, 8)) == [
        ([0], [0]),
        ([1], [1]),
        ([2], [2, 3]),
    ]
    assert reshape_groups((4, 6), (3, 8)) == [([0, 1], [0, 1])]
    assert reshape_groups((), (1,)) == [([], [0])]
