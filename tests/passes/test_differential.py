"""
Differential tests of `taso-substitute` and `transpose-elim`: on random graphs (hypothesis)
and on every example, the reference semantics before and after agree (random float
inputs, relative tolerance 1e-4).
"""

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from xdsl.builder import ImplicitBuilder
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TensorType, f32
from xdsl.ir import SSAValue

from plmr.dialects import graph
from plmr.dialects.context import load_module
from plmr.passes.taso.dag import constant_attr
from plmr.passes.taso.substitute import substitute_module
from plmr.passes.transpose_elim import eliminate_transposes
from plmr.runtime.reference import evaluate_function
from plmr.runtime.running import random_inputs

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
EXAMPLE_FILES = sorted((EXAMPLES / "onnx").glob("*.mlir")) + sorted(
    (EXAMPLES / "graph").glob("*.mlir")
)

DIMS = (2, 3, 4)


def shape(v: SSAValue) -> tuple[int, ...]:
    return graph.static_shape(v, "value")


@st.composite
def programs(draw: st.DrawFn) -> ModuleOp:
    """A random function of 2-D graph ops (matmul, elementwise, transpose, concat, split)."""
    arg_shapes = [
        (draw(st.sampled_from(DIMS)), draw(st.sampled_from(DIMS)))
        for _ in range(draw(st.integers(1, 3)))
    ]
    types = [TensorType(f32, s) for s in arg_shapes]
    fn = func.FuncOp("main", (types, []))
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    with ImplicitBuilder(fn.body) as args:
        values: list[SSAValue] = list(args)
        for _ in range(draw(st.integers(2, 9))):
            kind = draw(
                st.sampled_from(
                    [
                        "matmul",
                        "weight",
                        "add",
                        "mul",
                        "scale",
                        "relu",
                        "tanh",
                        "transpose",
                        "concat",
                        "split",
                    ]
                )
            )
            a = draw(st.sampled_from(values))
            sa = shape(a)
            if kind == "weight":
                n = draw(st.sampled_from(DIMS))
                w = rng.normal(size=(sa[1], n)).astype(np.float32)
                const = graph.ConstantOp(constant_attr(w, f32))
                values.append(graph.MatmulOp(a, const).result)
            elif kind == "matmul":
                ta, tb = draw(st.booleans()), draw(st.booleans())
                k = sa[0] if ta else sa[1]
                fits = [v for v in values if shape(v)[1 if tb else 0] == k]
                if fits:
                    values.append(
                        graph.MatmulOp(a, draw(st.sampled_from(fits)), ta, tb).result
                    )
            elif kind in ("add", "mul"):
                fits = [v for v in values if shape(v) == sa]
                b = draw(st.sampled_from(fits))
                op = graph.AddOp(a, b) if kind == "add" else graph.MulOp(a, b)
                values.append(op.result)
            elif kind == "scale":
                values.append(
                    graph.ScaleOp(a, draw(st.sampled_from([0.5, -2.0, 3.0]))).result
                )
            elif kind == "relu":
                values.append(graph.ReluOp(a).result)
            elif kind == "tanh":
                values.append(graph.TanhOp(a).result)
            elif kind == "transpose":
                values.append(graph.TransposeOp(a, [1, 0]).result)
            elif kind == "concat":
                axis = draw(st.integers(0, 1))
                fits = [v for v in values if shape(v)[1 - axis] == sa[1 - axis]]
                values.append(graph.ConcatOp([a, draw(st.sampled_from(fits))], axis).result)
            elif sa[1] >= 2:
                cut = draw(st.integers(1, sa[1] - 1))
                values.extend(graph.SplitOp(a, 1, [cut, sa[1] - cut]).results)
        outs = [values[-1], *[v for v in values[len(types) : -1] if not v.uses][:2]]
        func.ReturnOp(*outs)
    fn.function_type = func.FunctionType.from_lists(types, [v.type for v in outs])
    module = ModuleOp([fn])
    module.verify()
    return module


def check_both_passes(module: ModuleOp, budget: int) -> None:
    fn = next(op for op in module.ops if isinstance(op, func.FuncOp))
    args = random_inputs(fn, 1)
    before = evaluate_function(module, fn.sym_name.data, args)
    substitute_module(module, budget=budget)
    module.verify()
    mid = evaluate_function(module, fn.sym_name.data, args)
    eliminate_transposes(module)
    module.verify()
    after = evaluate_function(module, fn.sym_name.data, args)
    for a, b, c in zip(before, mid, after, strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(c, a, rtol=1e-4, atol=1e-5)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_random_graphs_keep_their_semantics(module: ModuleOp):
    check_both_passes(module, budget=8)


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.name)
def test_examples_keep_their_semantics(path: Path):
    check_both_passes(load_module(path), budget=25)


def test_transpose_elim_alone_on_random_transposes():
    @settings(max_examples=40, deadline=None)
    @given(programs())
    def inner(module: ModuleOp):
        fn = next(op for op in module.ops if isinstance(op, func.FuncOp))
        args = random_inputs(fn, 2)
        before = evaluate_function(module, "main", args)
        eliminate_transposes(module)
        module.verify()
        for a, b in zip(before, evaluate_function(module, "main", args), strict=True):
            np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-5)

    inner()
