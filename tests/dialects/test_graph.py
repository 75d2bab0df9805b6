"""Tests of the `graph` dialect: builders, verifiers, the dialect's op list, docstrings."""

from __future__ import annotations

import inspect
import re
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    Builtin,
    BytesAttr,
    DenseIntOrFPElementsAttr,
    Float64Type,
    FloatAttr,
    IntegerAttr,
    ModuleOp,
    TensorType,
    UnitAttr,
    f16,
    f32,
    i1,
    i32,
    i64,
)
from xdsl.dialects.func import Func, FuncOp
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.parser import Parser
from xdsl.utils.exceptions import ParseError, VerifyException
from xdsl.utils.test_value import create_ssa_value

from plmr.dialects import (
    graph,
    graph_base,
    graph_constants,
    graph_contractions,
    graph_elementwise,
    graph_movement,
    graph_reductions,
    graph_shapes,
    graph_weights,
)
from plmr.dialects.graph import (
    AbsOp,
    AddOp,
    AndOp,
    CastOp,
    CeilOp,
    CmpOp,
    CmpPredicate,
    CmpPredicateAttr,
    ConcatOp,
    ConstantOp,
    Conv2dOp,
    CosOp,
    DivOp,
    ErfOp,
    ExpandOp,
    ExpOp,
    FloorOp,
    GatherElementsOp,
    GatherOp,
    GeluOp,
    Graph,
    GraphOp,
    LayerNormOp,
    LogOp,
    MatmulOp,
    MaximumOp,
    MinimumOp,
    MulOp,
    NegOp,
    NotOp,
    OrOp,
    PadMode,
    PadModeAttr,
    PadOp,
    PoolKind,
    PoolKindAttr,
    PoolOp,
    PowOp,
    ReciprocalOp,
    ReduceKind,
    ReduceKindAttr,
    ReduceOp,
    ReluOp,
    ReshapeOp,
    RmsNormOp,
    ScaleOp,
    SigmoidOp,
    SiluOp,
    SinOp,
    SliceOp,
    SoftmaxOp,
    SplitOp,
    SqrtOp,
    SubOp,
    TanhOp,
    TransposeOp,
    WhereOp,
    XorOp,
)
from plmr.runtime.reference import GRAPH_IMPLS, evaluate_function
from plmr.values import tensor_dtype
from plmr.weight_io import SafetensorsWriter

from .conftest import raise_lines

INVALID_MLIR = (
    Path(__file__).parents[1] / "filecheck" / "dialects" / "graph" / "invalid.mlir"
)


def tensor(shape: Sequence[int], elt: Attribute = f32) -> SSAValue:
    """A fresh SSA value of type `tensor<shape x elt>`."""
    return create_ssa_value(TensorType(elt, shape))


def shape_of(value: SSAValue | Attribute) -> tuple[int, ...]:
    return graph.static_shape(value, "value")


def make_context() -> Context:
    ctx = Context()
    ctx.load_dialect(Builtin)
    ctx.load_dialect(Func)
    ctx.load_dialect(Graph)
    return ctx


def raises(message: str) -> Any:
    """`pytest.raises(VerifyException)` matching the whole message literally."""
    return pytest.raises(VerifyException, match=f"^{re.escape(message)}$")


# ---------------------------------------------------------------------------------------
# The dialect
# ---------------------------------------------------------------------------------------

ALL_OPS = {
    "graph.matmul",
    "graph.add",
    "graph.sub",
    "graph.mul",
    "graph.div",
    "graph.scale",
    "graph.relu",
    "graph.sinh",
    "graph.cosh",
    "graph.gelu",
    "graph.silu",
    "graph.sigmoid",
    "graph.tanh",
    "graph.exp",
    "graph.erf",
    "graph.sqrt",
    "graph.neg",
    "graph.transpose",
    "graph.reshape",
    "graph.reduce",
    "graph.softmax",
    "graph.layernorm",
    "graph.rmsnorm",
    "graph.concat",
    "graph.split",
    "graph.conv2d",
    "graph.pool",
    "graph.constant",
    "graph.gather",
    "graph.where",
    "graph.cmp",
    "graph.not",
    "graph.and",
    "graph.or",
    "graph.xor",
    "graph.cast",
    "graph.abs",
    "graph.log",
    "graph.cos",
    "graph.sin",
    "graph.floor",
    "graph.ceil",
    "graph.reciprocal",
    "graph.pow",
    "graph.maximum",
    "graph.minimum",
    "graph.slice",
    "graph.expand",
    "graph.pad",
    "graph.gather_elements",
    "graph.weight",
}


def test_dialect_lists_every_op():
    names = [op.name for op in Graph.operations]
    assert len(names) == len(set(names)) == 51
    assert set(names) == ALL_OPS
    assert Graph.name == "graph"


def test_dialect_lists_every_op_class_of_the_module():
    defined = {
        cls
        for cls in vars(graph).values()
        if inspect.isclass(cls)
        and issubclass(cls, GraphOp)
        and isinstance(cls.__dict__.get("name"), str)
    }
    assert defined == set(Graph.operations)


def test_dialect_lists_its_attributes():
    assert set(Graph.attributes) == {
        ReduceKindAttr,
        PoolKindAttr,
        CmpPredicateAttr,
        PadModeAttr,
    }
    assert ReduceKindAttr.name == "graph.reduce_kind"
    assert PoolKindAttr.name == "graph.pool_kind"
    assert CmpPredicateAttr.name == "graph.cmp_predicate"
    assert PadModeAttr.name == "graph.pad_mode"


def test_every_op_has_reference_semantics():
    assert set(GRAPH_IMPLS) == set(Graph.operations)


def test_every_op_is_a_pure_graph_op():
    for op in Graph.operations:
        assert issubclass(op, GraphOp), op.name
        assert op.has_trait(graph.Pure), op.name


def test_commutative_ops():
    commutative = {op.name for op in Graph.operations if op.has_trait(graph.Commutative)}
    assert commutative == {
        "graph.add",
        "graph.mul",
        "graph.and",
        "graph.or",
        "graph.xor",
        "graph.maximum",
        "graph.minimum",
    }
    assert ConstantOp.has_trait(graph.ConstantLike)


# ---------------------------------------------------------------------------------------
# Docstrings: every op documents itself with an ```mlir example that parses, verifies,
# round-trips and runs under the reference semantics.
# ---------------------------------------------------------------------------------------


def _split_top_level(text: str) -> list[str]:
    """Splits at commas outside <>, () and []."""
    parts: list[str] = []
    depth = 0
    start = 0
    for i, ch in enumerate(text):
        if ch in "<([":
            depth += 1
        elif ch in ">)]" and not (ch == ">" and text[i - 1] == "-"):
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return [p for p in parts if p]


def _operand_types(line: str) -> tuple[list[str], list[str]]:
    """The operand names of one custom-syntax op line and their types."""
    _, rhs = line.split("=", 1)
    body, types = rhs.rsplit(" : ", 1)
    names = list(dict.fromkeys(re.findall(r"%[A-Za-z_][\w.$-]*", body)))
    if types.startswith("("):
        depth = 0
        for end, ch in enumerate(types):
            depth += ch == "("
            depth -= ch == ")"
            if depth == 0:
                break
        operand_types = _split_top_level(types[1:end])
    else:
        operand_types = [types.split(" -> ")[0].strip()] * len(names)
    assert len(names) == len(operand_types), line
    return names, operand_types


def docstring_example(op: type[Operation]) -> str:
    """The ```mlir example of an op's docstring, as a function of its free operands."""
    doc = inspect.getdoc(op) or ""
    blocks = re.findall(r"```mlir\n(.*?)```", doc, re.DOTALL)
    assert len(blocks) == 1, f"{op.name} needs exactly one ```mlir example"
    lines = [line.strip() for line in blocks[0].strip().splitlines() if line.strip()]
    defined: set[str] = set()
    args: dict[str, str] = {}
    for line in lines:
        assert line.split("=", 1)[1].split()[0] == op.name, line
        names, types = _operand_types(line)
        for name, t in zip(names, types, strict=True):
            if name not in defined:
                args.setdefault(name, t)
        defined.update(re.findall(r"%[\w]+", line.split("=", 1)[0]))
    signature = ", ".join(f"{n}: {t}" for n, t in args.items())
    body = "\n".join(f"  {line}" for line in lines)
    return f"func.func @doc({signature}) {{\n{body}\n  func.return\n}}"


def _sample(t: Attribute, rng: np.random.Generator) -> np.ndarray[Any, Any]:
    shape = shape_of(t)
    dtype = tensor_dtype(t)
    if dtype.kind in "iub":
        return np.zeros(shape, dtype=dtype)  # valid gather indices
    return np.abs(rng.standard_normal(shape)).astype(dtype) + dtype.type(0.5)


@pytest.mark.parametrize("op", list(Graph.operations), ids=lambda op: op.name)
def test_docstring_example_parses_verifies_and_runs(
    op: type[Operation], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    if op is graph_weights.WeightOp:
        # The example's weights files, in the directory it runs in.
        monkeypatch.chdir(tmp_path)
        writer = SafetensorsWriter(tmp_path / "mlp.safetensors")
        writer.add_array("fc.weight", np.ones((16, 32), np.float32))
        writer.write()
        (tmp_path / "mlp.onnx.data").write_bytes(bytes(2048 + 32 * 4))
        # The derived weights' parts: q (64x64) at 0 and k (64x32) at 16384.
        (tmp_path / "m.onnx.data").write_bytes(bytes(16384 + 64 * 32 * 4))
    source = docstring_example(op)
    module = Parser(make_context(), source).parse_module()
    module.verify()
    ops = [o for o in module.walk() if isinstance(o, op)]
    assert ops, source
    # The custom syntax round-trips.
    printed = str(module)
    reparsed = Parser(make_context(), printed).parse_module()
    reparsed.verify()
    assert str(reparsed) == printed
    assert reparsed.is_structurally_equivalent(module)
    # The reference semantics produce the declared types.
    fn = next(o for o in module.ops if isinstance(o, FuncOp))
    rng = np.random.default_rng(0)
    args = [_sample(t, rng) for t in fn.function_type.inputs.data]
    assert evaluate_function(module, "doc", args) == []


@pytest.mark.parametrize("op", list(Graph.operations), ids=lambda op: op.name)
def test_docstring_has_a_summary(op: type[Operation]):
    doc = inspect.getdoc(op)
    assert doc is not None
    assert len(doc.split("\n\n")[0]) > 10


# ---------------------------------------------------------------------------------------
# Builders infer result types
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "lhs, rhs, ta, tb, expected",
    [
        ((4, 8), (8, 16), False, False, (4, 16)),
        ((8, 4), (8, 16), True, False, (4, 16)),
        ((4, 8), (16, 8), False, True, (4, 16)),
        ((8, 4), (16, 8), True, True, (4, 16)),
        ((2, 4, 8), (16, 8), False, True, (2, 4, 16)),
        ((5, 4, 8), (8, 2), False, False, (5, 4, 2)),
        ((4, 8), (7, 8, 2), False, False, (7, 4, 2)),
        ((2, 1, 4, 8), (3, 8, 16), False, False, (2, 3, 4, 16)),
        ((1, 4, 8), (6, 1, 8, 3), False, False, (6, 1, 4, 3)),
        ((3, 1, 8, 4), (5, 8, 2), True, False, (3, 5, 4, 2)),
        ((1, 1), (1, 1), True, True, (1, 1)),
    ],
)
def test_matmul_builder(
    lhs: tuple[int, ...],
    rhs: tuple[int, ...],
    ta: bool,
    tb: bool,
    expected: tuple[int, ...],
):
    op = MatmulOp(tensor(lhs), tensor(rhs), transpose_a=ta, transpose_b=tb)
    assert op.result.type == TensorType(f32, expected)
    assert (op.transpose_a is not None) == ta
    assert (op.transpose_b is not None) == tb
    op.verify()


def test_matmul_builder_keeps_the_element_type():
    op = MatmulOp(tensor((2, 3), i32), tensor((3, 4), i32))
    assert op.result.type == TensorType(i32, (2, 4))
    op.verify()


@pytest.mark.parametrize("cls", [AddOp, SubOp, MulOp, DivOp])
@pytest.mark.parametrize(
    "lhs, rhs, expected",
    [
        ((4, 8), (8,), (4, 8)),
        ((4, 1), (8,), (4, 8)),
        ((), (2, 3), (2, 3)),
        ((2, 3), (), (2, 3)),
        ((5, 1, 3), (4, 1), (5, 4, 3)),
        ((0, 3), (1, 3), (0, 3)),
        ((1,), (0,), (0,)),
    ],
)
def test_binary_builder_broadcasts(
    cls: type[AddOp],
    lhs: tuple[int, ...],
    rhs: tuple[int, ...],
    expected: tuple[int, ...],
):
    op = cls(tensor(lhs), tensor(rhs))
    assert op.result.type == TensorType(f32, expected)
    op.verify()


@pytest.mark.parametrize(
    "x, w, strides, pads, dilations, groups, expected",
    [
        ((1, 3, 8, 8), (4, 3, 3, 3), (1, 1), (0, 0, 0, 0), (1, 1), 1, (1, 4, 6, 6)),
        ((1, 3, 8, 8), (4, 3, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1, (1, 4, 8, 8)),
        ((1, 3, 8, 8), (4, 3, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 1, (1, 4, 4, 4)),
        ((1, 3, 8, 8), (4, 3, 3, 3), (1, 1), (0, 0, 0, 0), (2, 2), 1, (1, 4, 4, 4)),
        ((1, 4, 8, 8), (6, 2, 3, 3), (1, 1), (0, 0, 0, 0), (1, 1), 2, (1, 6, 6, 6)),
        # Depthwise, everything asymmetric: H = (10 + 1 + 0 - (2·2 + 1)) // 2 + 1 = 4,
        # W = (12 + 2 + 1 - (1·4 + 1)) // 3 + 1 = 4.
        ((2, 8, 10, 12), (8, 1, 3, 5), (2, 3), (1, 2, 0, 1), (2, 1), 8, (2, 8, 4, 4)),
        ((1, 1, 5, 5), (1, 1, 2, 2), (2, 2), (0, 0, 1, 1), (1, 1), 1, (1, 1, 3, 3)),
        ((1, 1, 7, 7), (1, 1, 2, 2), (2, 2), (0, 0, 0, 0), (1, 1), 1, (1, 1, 3, 3)),
        ((3, 2, 1, 1), (5, 2, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1, (3, 5, 1, 1)),
        ((1, 2, 4, 4), (2, 2, 3, 3), (4, 4), (1, 1, 1, 1), (2, 2), 1, (1, 2, 1, 1)),
    ],
)
def test_conv2d_builder_output_size(
    x: tuple[int, ...],
    w: tuple[int, ...],
    strides: tuple[int, int],
    pads: tuple[int, int, int, int],
    dilations: tuple[int, int],
    groups: int,
    expected: tuple[int, ...],
):
    op = Conv2dOp(
        tensor(x),
        tensor(w),
        strides=strides,
        pads=pads,
        dilations=dilations,
        groups=groups,
    )
    assert op.result.type == TensorType(f32, expected)
    assert op.strides.get_values() == strides
    assert op.pads.get_values() == pads
    assert op.dilations.get_values() == dilations
    assert op.groups.value.data == groups
    assert op.bias is None
    op.verify()
    # The formula: out = (in + pad_lo + pad_hi - dilation·(k - 1) - 1) // stride + 1.
    for i, (size, k) in enumerate(zip(x[2:], w[2:], strict=True)):
        span = dilations[i] * (k - 1) + 1
        assert expected[2 + i] == (size + pads[i] + pads[i + 2] - span) // strides[i] + 1


def test_conv2d_builder_with_bias():
    op = Conv2dOp(
        tensor((1, 3, 8, 8)), tensor((4, 3, 3, 3)), tensor((4,)), pads=(1, 1, 1, 1)
    )
    assert op.bias is not None
    assert op.result.type == TensorType(f32, (1, 4, 8, 8))
    op.verify()


@pytest.mark.parametrize(
    "kind, x, kernel, strides, pads, expected",
    [
        ("max", (1, 4, 8, 8), (2, 2), (2, 2), (0, 0, 0, 0), (1, 4, 4, 4)),
        ("avg", (1, 4, 8, 8), (3, 3), (1, 1), (1, 1, 1, 1), (1, 4, 8, 8)),
        ("max", (1, 4, 8, 8), (3, 2), (2, 3), (1, 0, 2, 1), (1, 4, 5, 3)),
        ("avg", (2, 3, 7, 7), (2, 2), (2, 2), (0, 0, 0, 0), (2, 3, 3, 3)),
        ("max", (1, 1, 1, 1), (1, 1), (1, 1), (0, 0, 0, 0), (1, 1, 1, 1)),
    ],
)
def test_pool_builder(
    kind: str,
    x: tuple[int, ...],
    kernel: tuple[int, int],
    strides: tuple[int, int],
    pads: tuple[int, int, int, int],
    expected: tuple[int, ...],
):
    op = PoolOp(kind, tensor(x), kernel, strides=strides, pads=pads)
    assert op.result.type == TensorType(f32, expected)
    assert op.kind == PoolKindAttr(PoolKind(kind))
    assert op.count_include_pad is None
    op.verify()


def test_pool_builder_count_include_pad():
    op = PoolOp(
        PoolKind.AVG,
        tensor((1, 1, 4, 4)),
        (3, 3),
        pads=(1, 1, 1, 1),
        count_include_pad=True,
    )
    assert op.count_include_pad == UnitAttr()
    op.verify()
    bad = PoolOp(PoolKind.MAX, tensor((1, 1, 4, 4)), (3, 3), count_include_pad=True)
    with raises("count_include_pad only applies to avg pooling"):
        bad.verify_()


@pytest.mark.parametrize(
    "data, indices, axis, expected",
    [
        ((100, 16), (1, 8), 0, (1, 8, 16)),
        ((4, 5, 6), (2, 3), 1, (4, 2, 3, 6)),
        ((4, 5, 6), (2,), -1, (4, 5, 2)),
        ((4, 5, 6), (), 1, (4, 6)),
        ((7,), (3, 2), 0, (3, 2)),
    ],
)
def test_gather_builder(
    data: tuple[int, ...],
    indices: tuple[int, ...],
    axis: int,
    expected: tuple[int, ...],
):
    op = GatherOp(tensor(data), tensor(indices, i64), axis)
    assert op.result.type == TensorType(f32, expected)
    assert op.axis.value.data == axis
    op.verify()


@pytest.mark.parametrize(
    "shape, axis, sizes, expected",
    [
        ((4, 24), 1, (8, 8, 8), [(4, 8), (4, 8), (4, 8)]),
        ((4, 2), -2, (1, 3), [(1, 2), (3, 2)]),
        ((6,), 0, (6,), [(6,)]),
        ((2, 5), 1, (0, 5, 0), [(2, 0), (2, 5), (2, 0)]),
    ],
)
def test_split_builder(
    shape: tuple[int, ...],
    axis: int,
    sizes: tuple[int, ...],
    expected: list[tuple[int, ...]],
):
    op = SplitOp(tensor(shape), axis, sizes)
    assert [r.type for r in op.results] == [TensorType(f32, s) for s in expected]
    assert op.sizes.get_values() == sizes
    op.verify()


@pytest.mark.parametrize(
    "axes, keepdims, expected",
    [
        ((-1,), False, (2, 3)),
        ((-1, 0), True, (1, 3, 1)),
        ((-3, -2, -1), False, ()),
        ((0, 2), False, (3,)),
        ((2, 0), True, (1, 3, 1)),
        ((1,), True, (2, 1, 4)),
    ],
)
@pytest.mark.parametrize("kind", list(ReduceKind))
def test_reduce_builder(
    kind: ReduceKind, axes: tuple[int, ...], keepdims: bool, expected: tuple[int, ...]
):
    op = ReduceOp(kind, tensor((2, 3, 4)), axes, keepdims)
    assert op.result.type == TensorType(f32, expected)
    assert op.kind == ReduceKindAttr(kind)
    assert (op.keepdims is not None) == keepdims
    assert op.normalized_axes() == tuple(a % 3 for a in axes)
    op.verify()


@pytest.mark.parametrize(
    "shapes, axis, expected",
    [
        ([(2, 3), (2, 5), (2, 1)], -1, (2, 9)),
        ([(1, 4), (3, 4)], 0, (4, 4)),
        ([(2, 3, 4)], 1, (2, 3, 4)),
        ([(2, 0), (2, 3)], 1, (2, 3)),
    ],
)
def test_concat_builder(
    shapes: list[tuple[int, ...]], axis: int, expected: tuple[int, ...]
):
    op = ConcatOp([tensor(s) for s in shapes], axis)
    assert op.result.type == TensorType(f32, expected)
    assert len(op.inputs) == len(shapes)
    op.verify()


def test_transpose_builder():
    op = TransposeOp(tensor((2, 3, 4)), (2, 0, 1))
    assert op.result.type == TensorType(f32, (4, 2, 3))
    assert op.perm.get_values() == (2, 0, 1)
    op.verify()


def test_reshape_builder():
    op = ReshapeOp(tensor((2, 3, 4), f16), (6, 4))
    assert op.result.type == TensorType(f16, (6, 4))
    op.verify()
    scalar = ReshapeOp(tensor((1, 1)), ())
    assert scalar.result.type == TensorType(f32, ())
    scalar.verify()


@pytest.mark.parametrize(
    "cls", [ReluOp, SiluOp, SigmoidOp, TanhOp, ExpOp, ErfOp, SqrtOp, NegOp, GeluOp]
)
def test_unary_builders_keep_the_type(cls: type[ReluOp]):
    value = tensor((3, 5))
    op = cls(value)
    assert op.result.type == value.type
    op.verify()


def test_gelu_softmax_scale_builders():
    x = tensor((4, 8))
    assert GeluOp(x).tanh is None
    gelu = GeluOp(x, tanh=True)
    assert gelu.tanh == UnitAttr()
    gelu.verify()
    softmax = SoftmaxOp(x)
    assert softmax.axis == IntegerAttr(-1, i64)
    softmax.verify()
    assert SoftmaxOp(x, 0).axis == IntegerAttr(0, i64)
    scale = ScaleOp(x, 0.125)
    assert scale.factor == FloatAttr(0.125, Float64Type())
    assert scale.result.type == x.type
    scale.verify()
    int_scale = ScaleOp(tensor((4,), i32), 3)
    assert int_scale.factor == FloatAttr(3.0, Float64Type())
    int_scale.verify()


def test_norm_builders():
    x = tensor((2, 4, 16))
    ln = LayerNormOp(x, tensor((16,)))
    assert ln.bias is None
    assert ln.axis == IntegerAttr(-1, i64)
    assert ln.epsilon == FloatAttr(1e-5, Float64Type())
    ln.verify()
    ln2 = LayerNormOp(x, tensor((4, 16)), tensor((16,)), axis=1, epsilon=1e-6)
    assert ln2.bias is not None
    assert ln2.epsilon == FloatAttr(1e-6, Float64Type())
    assert ln2.result.type == x.type
    ln2.verify()
    rms = RmsNormOp(x, tensor((4, 16)), axis=-2, epsilon=1e-6)
    assert rms.axis == IntegerAttr(-2, i64)
    assert rms.result.type == x.type
    rms.verify()


def test_constant_builder():
    value = DenseIntOrFPElementsAttr.from_list(
        TensorType(f32, (2, 2)), [1.0, 2.0, 3.0, 4.0]
    )
    op = ConstantOp(value)
    assert op.result.type == TensorType(f32, (2, 2))
    assert op.value == value
    op.verify()
    splat = ConstantOp(DenseIntOrFPElementsAttr.from_list(TensorType(i32, (3, 5)), [7]))
    splat.verify()


def test_constant_with_infinities_and_nan_round_trips():
    # Inside a list, an infinity or NaN prints as its bit pattern, read back as one.
    values = [0.0, float("-inf"), float("inf"), float("nan"), -1.5]
    op = ConstantOp(DenseIntOrFPElementsAttr.from_list(TensorType(f32, (5,)), values))
    text = str(op)
    assert (
        "dense<[0.000000e+00, 0xff800000, 0x7f800000, 0x7fc00000, -1.500000e+00]>" in text
    )
    ctx = Context()
    ctx.load_dialect(Builtin)
    ctx.load_dialect(graph.Graph)
    parsed = Parser(ctx, text).parse_op()
    assert isinstance(parsed, ConstantOp)
    got = np.array(parsed.value.get_values(), dtype=np.float32)
    np.testing.assert_array_equal(got, np.array(values, dtype=np.float32))
    finite = ConstantOp(
        DenseIntOrFPElementsAttr.from_list(TensorType(f32, (2,)), [1.0, 2.0])
    )
    assert "dense<[1.000000e+00, 2.000000e+00]>" in str(finite)


# ---------------------------------------------------------------------------------------
# Builder and verifier errors
# ---------------------------------------------------------------------------------------


def test_matmul_builder_errors():
    with raises(
        "matmul operands must have rank >= 2, got 8 and 8x4 (reshape vectors to matrices first)"
    ):
        MatmulOp(tensor((8,)), tensor((8, 4)))
    with raises("contraction dimensions differ: lhs 4x8 has K = 8, rhs 4x16 has K = 4"):
        MatmulOp(tensor((4, 8)), tensor((4, 16)))
    with raises(
        "contraction dimensions differ: lhs 8x4 (transposed) has K = 8, "
        "rhs 16x4 (transposed) has K = 4"
    ):
        MatmulOp(tensor((8, 4)), tensor((16, 4)), transpose_a=True, transpose_b=True)
    with raises(
        "matmul batch dimensions: shapes 2x3 and 4 are not broadcast-compatible "
        "(dimension -1: 3 vs 4)"
    ):
        MatmulOp(tensor((2, 3, 4, 8)), tensor((4, 8, 16)))


def test_binary_builder_errors():
    with raises("shapes 4x8 and 4x3 are not broadcast-compatible (dimension -1: 8 vs 3)"):
        AddOp(tensor((4, 8)), tensor((4, 3)))
    with raises("lhs must be a ranked tensor, got i32"):
        AddOp(create_ssa_value(i32), tensor((4,)))
    with raises(
        "rhs must have a static shape, got tensor<?xf32> (plmr needs static shapes)"
    ):
        MulOp(tensor((4,)), tensor((DYNAMIC_INDEX,)))
    op = SubOp(tensor((4,)), tensor((4,), f16))
    with raises("lhs and rhs must have the same element type, got f32 and f16"):
        op.verify_()


def test_shape_builder_errors():
    with raises("perm [0, 0] is not a permutation of the 2 dimensions of a 2x3 tensor"):
        TransposeOp(tensor((2, 3)), (0, 0))
    with raises("reduce needs at least one axis"):
        ReduceOp("sum", tensor((2, 3)), ())
    with raises("axis 2 is out of range for a tensor of rank 2 (expected -2 <= axis < 2)"):
        ReduceOp("max", tensor((2, 3)), (2,))
    with raises("axes [0, -2] contain a repeated axis"):
        ReduceOp("min", tensor((2, 3)), (0, -2))
    with raises("concat needs at least one input"):
        ConcatOp([], 0)
    with raises(
        "concat input 1 has shape 3x3, which differs from input 0 (2x3) outside axis 1"
    ):
        ConcatOp([tensor((2, 3)), tensor((3, 3))], 1)
    with raises("split sizes [2, 2] sum to 4, but axis 1 of 3x5 has size 5"):
        SplitOp(tensor((3, 5)), 1, (2, 2))
    with raises("split sizes [-1, 6] must be non-negative"):
        SplitOp(tensor((3, 5)), -1, (-1, 6))
    with raises("axis -3 is out of range for a tensor of rank 2 (expected -2 <= axis < 2)"):
        SplitOp(tensor((3, 5)), -3, (3,))
    with raises("gather data must have rank >= 1"):
        GatherOp(tensor(()), tensor((2,), i64))
    with raises("axis 1 is out of range for a tensor of rank 1 (expected -1 <= axis < 1)"):
        GatherOp(tensor((5,)), tensor((2,), i64), 1)
    with raises("axis 0 is out of range: a rank-0 tensor has no axes"):
        graph.normalize_axis(0, 0)
    with raises("expand shape [2, -1] must be non-negative"):
        ExpandOp(tensor((2, 1)), (2, -1))


def test_reshape_builder_defers_to_the_verifier():
    with raises("expected a tensor, got i32"):
        ReshapeOp(create_ssa_value(i32), (1,))
    op = ReshapeOp(tensor((2, 3)), (4, 2))
    with raises(
        "reshape from 2x3 (6 elements) to 4x2 (8 elements) changes the element count"
    ):
        op.verify_()


@pytest.mark.parametrize(
    "x, w, kwargs, message",
    [
        ((3, 8, 8), (4, 3, 3, 3), {}, "conv2d input must be NCHW (rank 4), got 3x8x8"),
        ((1, 3, 8, 8), (4, 3, 3), {}, "conv2d weight must be MCkHkW (rank 4), got 4x3x3"),
        (
            (1, 3, 8, 8),
            (4, 3, 3, 3),
            {"strides": (1, 0)},
            "strides must be two positive integers, got [1, 0]",
        ),
        (
            (1, 3, 8, 8),
            (4, 3, 3, 3),
            {"pads": (1, 1, 1)},
            "pads must be four non-negative integers [top, left, bottom, right], got [1, 1, 1]",
        ),
        (
            (1, 3, 8, 8),
            (4, 3, 3, 3),
            {"dilations": (-1, 1)},
            "dilations must be two positive integers, got [-1, 1]",
        ),
        (
            (1, 4, 8, 8),
            (6, 2, 3, 3),
            {"groups": 4},
            "groups = 4 must be positive and divide both the 4 input channels and the 6 "
            "output channels",
        ),
        (
            (1, 4, 8, 8),
            (6, 4, 3, 3),
            {"groups": 2},
            "conv2d weight has 4 channels per group, expected 2 (4 input channels / 2 groups)",
        ),
        (
            (1, 3, 4, 8),
            (4, 3, 3, 3),
            {"dilations": (2, 1)},
            "conv2d kernel 3x3 does not fit the padded 4x8 input",
        ),
    ],
)
def test_conv2d_builder_errors(
    x: tuple[int, ...], w: tuple[int, ...], kwargs: dict[str, Any], message: str
):
    with raises(message):
        Conv2dOp(tensor(x), tensor(w), **kwargs)


def test_conv2d_bias_errors():
    op = Conv2dOp(tensor((1, 3, 8, 8)), tensor((4, 3, 3, 3)), tensor((3,)))
    with raises("conv2d bias must have shape 4 (one per output channel), got 3"):
        op.verify_()
    op = Conv2dOp(tensor((1, 3, 8, 8)), tensor((4, 3, 3, 3)), tensor((4,), f16))
    with raises("input and bias must have the same element type, got f32 and f16"):
        op.verify_()


@pytest.mark.parametrize(
    "x, kernel, kwargs, message",
    [
        ((4, 8, 8), (2, 2), {}, "pool input must be NCHW (rank 4), got 4x8x8"),
        (
            (1, 4, 8, 8),
            (2, 2, 2),
            {},
            "kernel must be two positive integers, got [2, 2, 2]",
        ),
        (
            (1, 4, 8, 8),
            (2, 2),
            {"strides": (0, 0)},
            "strides must be two positive integers, got [0, 0]",
        ),
        (
            (1, 4, 8, 8),
            (2, 2),
            {"pads": (0, 0, 0, -1)},
            "pads must be four non-negative integers [top, left, bottom, right], "
            "got [0, 0, 0, -1]",
        ),
        (
            (1, 4, 8, 8),
            (2, 3),
            {"pads": (0, 3, 0, 0)},
            "pads [0, 3, 0, 0] must be smaller than the kernel [2, 3]",
        ),
        ((1, 4, 8, 2), (2, 3), {}, "pool kernel 2x3 does not fit the padded 8x2 input"),
    ],
)
def test_pool_builder_errors(
    x: tuple[int, ...], kernel: tuple[int, ...], kwargs: dict[str, Any], message: str
):
    with raises(message):
        PoolOp("max", tensor(x), kernel, **kwargs)


@pytest.mark.parametrize(
    "make, message",
    [
        (
            lambda: ScaleOp(tensor((4,), i32), 0.5),
            "'graph.scale' of an integer tensor needs an integral factor, got 0.5",
        ),
        (
            lambda: ScaleOp(tensor((4,), i32), float("nan")),
            "'graph.scale' of an integer tensor needs an integral factor, got nan",
        ),
        (
            lambda: GeluOp(tensor((4,), i32)),
            "'graph.gelu' needs a floating-point tensor, got tensor<4xi32>",
        ),
        (
            lambda: ExpOp(tensor((4,), i64)),
            "'graph.exp' needs a floating-point tensor, got tensor<4xi64>",
        ),
        (
            lambda: SoftmaxOp(tensor((4, 8)), 2),
            "axis 2 is out of range for a tensor of rank 2 (expected -2 <= axis < 2)",
        ),
        (
            lambda: SoftmaxOp(tensor(()), -1),
            "axis -1 is out of range: a rank-0 tensor has no axes",
        ),
        (
            lambda: LayerNormOp(tensor((4, 16)), tensor((4,))),
            "scale of shape 4 does not broadcast to the normalized shape 16",
        ),
        (
            lambda: LayerNormOp(tensor((4, 16)), tensor((16,)), tensor((2, 16))),
            "bias of shape 2x16 does not broadcast to the normalized shape 16",
        ),
        (
            lambda: LayerNormOp(tensor((4, 16), i32), tensor((16,), i32)),
            "'graph.layernorm' needs a floating-point tensor, got tensor<4x16xi32>",
        ),
        (
            lambda: RmsNormOp(tensor((4, 16)), tensor((4,)), axis=0),
            "weight of shape 4 does not broadcast to the normalized shape 4x16",
        ),
        (
            lambda: RmsNormOp(tensor((4, 16)), tensor((16,), f16)),
            "input and weight must have the same element type, got f32 and f16",
        ),
        (
            lambda: GatherOp(tensor((4, 16)), tensor((2,), f32)),
            "gather indices must be integers, got tensor<2xf32>",
        ),
    ],
)
def test_verifier_errors_of_built_ops(make: Any, message: str):
    op = make()
    with raises(message):
        op.verify_()
    # `verify()` wraps the same message.
    with pytest.raises(VerifyException, match=re.escape(message)):
        op.verify()


def test_declared_result_type_must_match():
    lhs, rhs = tensor((4, 8)), tensor((8, 2))
    op = MatmulOp.create(operands=[lhs, rhs], result_types=[TensorType(f32, (4, 8))])
    with raises(
        "result type tensor<4x8xf32> does not match the inferred type tensor<4x2xf32>"
    ):
        op.verify_()
    split = SplitOp(tensor((4, 6)), 1, (2, 4))
    bad = SplitOp.create(
        operands=[split.input],
        result_types=[TensorType(f32, (4, 2)), TensorType(f32, (4, 2))],
        properties=dict(split.properties),
    )
    with raises(
        "result 1 type tensor<4x2xf32> does not match the inferred type tensor<4x4xf32>"
    ):
        bad.verify_()
    three = SplitOp.create(
        operands=[split.input],
        result_types=[TensorType(f32, (4, 2))] * 3,
        properties=dict(split.properties),
    )
    with raises("expected 2 results, got 3"):
        three.verify_()


def test_constant_with_the_wrong_number_of_values():
    # The parser rejects such literals, so only Python can build one.
    t = TensorType(f32, (3,))
    value = DenseIntOrFPElementsAttr(t, BytesAttr(struct.pack("<2f", 1.0, 2.0)))
    op = ConstantOp(value)
    with raises("constant holds 2 values but its type tensor<3xf32> needs 3"):
        op.verify_()


def test_constant_custom_syntax_rejects_non_dense_values():
    with pytest.raises(
        ParseError,
        match=re.escape(
            "expected a dense elements attribute, e.g. dense<1.0> : tensor<4xf32>"
        ),
    ):
        Parser(make_context(), "%c = graph.constant array<i64: 1, 2>").parse_module()


def test_infer_result_types_agrees_with_builders():
    ops: list[GraphOp] = [
        MatmulOp(tensor((3, 4, 5)), tensor((6, 5)), transpose_b=True),
        ConcatOp([tensor((2, 3)), tensor((2, 4))], -1),
        SplitOp(tensor((6, 2)), 0, (1, 2, 3)),
        GatherOp(tensor((5, 6)), tensor((2, 2), i32), 1),
        PoolOp("avg", tensor((1, 2, 5, 5)), (2, 2), strides=(2, 2), pads=(1, 1, 0, 0)),
    ]
    for op in ops:
        assert list(op.infer_result_types()) == [r.type for r in op.results]


# ---------------------------------------------------------------------------------------
# invalid.mlir covers every error the verifiers can raise
# ---------------------------------------------------------------------------------------


def test_a_concatenated_weight_names_no_file_of_its_own():
    # The textual form of a concatenation has no place for a file.
    part = graph_weights.WeightRef("q", "m.onnx.data", None, TensorType(f32, [4, 8]))
    ref = graph_weights.WeightRef(
        "q+q", "m.onnx.data", None, TensorType(f32, [4, 16]), parts=(part, part), axis=1
    )
    with pytest.raises(VerifyException, match="a concatenation names no file"):
        ref.check()


PYTHON_ONLY_ERRORS = [
    test_reshape_builder_defers_to_the_verifier,
    test_a_concatenated_weight_names_no_file_of_its_own,
    test_shape_builder_errors,
    test_constant_with_the_wrong_number_of_values,
]
"""The errors textual IR cannot reach (see the head of invalid.mlir)."""


GRAPH_MODULES = [
    graph_base,
    graph_constants,
    graph_contractions,
    graph_elementwise,
    graph_movement,
    graph_reductions,
    graph_shapes,
    graph_weights,
]


@pytest.fixture(scope="module")
def unreached_graph_errors(unreached: Any) -> dict[str, dict[int, str]]:
    """invalid.mlir (and the Python-only cases) run once under a line tracer."""
    return unreached([m.__file__ for m in GRAPH_MODULES], INVALID_MLIR, PYTHON_ONLY_ERRORS)


@pytest.mark.parametrize("module", GRAPH_MODULES, ids=lambda m: m.__name__)
def test_every_verifier_error_is_exercised(
    unreached_graph_errors: dict[str, dict[int, str]], module: Any
):
    """Every raise of the module is reached by invalid.mlir or a Python-only case."""
    assert raise_lines(module.__file__), f"{module.__name__} raises no errors"
    missed = unreached_graph_errors[module.__file__]
    assert missed == {}, f"errors of {module.__name__} that no test triggers"


def test_invalid_mlir_has_one_chunk_per_diagnostic():
    text = INVALID_MLIR.read_text()
    chunks = text.split("\n// -----\n")
    assert len(chunks) > 90
    for chunk in chunks:
        patterns = re.findall(r"^// CHECK(?:-NEXT)?:\s*(.*)$", chunk, re.M)
        messages = [p for p in patterns if not p.startswith("{{^}}")]
        assert len(messages) == 1, chunk


def test_module_of_all_docstring_examples_verifies():
    ctx = make_context()
    functions = [
        docstring_example(op).replace("@doc(", f"@{op.name.split('.')[1]}(")
        for op in Graph.operations
    ]
    module = Parser(ctx, "\n".join(functions)).parse_module()
    module.verify()
    assert isinstance(module, ModuleOp)
    assert len(list(module.ops)) == len(list(Graph.operations))


# ---------------------------------------------------------------------------------------
# The ops of ONNX models
# ---------------------------------------------------------------------------------------


def test_where_builder_broadcasts_three_ways():
    op = WhereOp(tensor((4, 1), i1), tensor((8,)), tensor(()))
    assert op.result.type == TensorType(f32, (4, 8))
    op = WhereOp(tensor((), i1), tensor((2, 1, 3), i64), tensor((5, 1), i64))
    assert op.result.type == TensorType(i64, (2, 5, 3))
    with raises("shapes 4x8 and 3 are not broadcast-compatible (dimension -1: 8 vs 3)"):
        # (4, 1) and (8,) broadcast to 4x8, which does not fit 3.
        WhereOp(tensor((4, 1), i1), tensor((8,)), tensor((3,)))


@pytest.mark.parametrize("predicate", list(CmpPredicate))
def test_cmp_builder_gives_i1(predicate: CmpPredicate):
    op = CmpOp(predicate, tensor((4, 8), i32), tensor((8,), i32))
    assert op.result.type == TensorType(i1, (4, 8))
    assert op.predicate == CmpPredicateAttr(predicate)
    op.verify()
    assert CmpOp(str(predicate), tensor(()), tensor((3,))).predicate.data == predicate


def test_cmp_rejects_an_unknown_predicate():
    with pytest.raises(ValueError, match="'lte' is not a valid CmpPredicate"):
        CmpOp("lte", tensor((4,)), tensor((4,)))


@pytest.mark.parametrize("cls", [AndOp, OrOp, XorOp])
def test_logical_builders(cls: type[AndOp]):
    op = cls(tensor((4, 1), i1), tensor((3,), i1))
    assert op.result.type == TensorType(i1, (4, 3))
    op.verify()
    assert op.has_trait(graph.Commutative)
    bad = cls(tensor((4,), i32), tensor((4,), i32))
    with raises(f"'{cls.name}' needs an i1 lhs, got tensor<4xi32>"):
        bad.verify_()
    mixed = cls(tensor((4,), i1), tensor((4,), i32))
    with raises("lhs and rhs must have the same element type, got i1 and i32"):
        mixed.verify_()


def test_not_builder():
    op = NotOp(tensor((2, 3), i1))
    assert op.result.type == TensorType(i1, (2, 3))
    op.verify()


@pytest.mark.parametrize("cls", [MaximumOp, MinimumOp])
@pytest.mark.parametrize("elt", [f32, i64, i32])
def test_maximum_minimum_builders(cls: type[MaximumOp], elt: Attribute):
    op = cls(tensor((4, 1), elt), tensor((5,), elt))
    assert op.result.type == TensorType(elt, (4, 5))
    op.verify()


@pytest.mark.parametrize(
    "src, dst", [(f32, i64), (i64, f32), (f32, i1), (i1, f32), (i32, i64), (f32, f16)]
)
def test_cast_builder(src: Attribute, dst: Attribute):
    op = CastOp(tensor((2, 3), src), dst)
    assert op.result.type == TensorType(dst, (2, 3))
    op.verify()


@pytest.mark.parametrize("cls", [LogOp, CosOp, SinOp, FloorOp, CeilOp, ReciprocalOp])
def test_float_unary_builders(cls: type[LogOp]):
    op = cls(tensor((2, 3)))
    assert op.result.type == TensorType(f32, (2, 3))
    op.verify()
    with raises(f"'{cls.name}' needs a floating-point tensor, got tensor<2xi64>"):
        cls(tensor((2,), i64)).verify_()


def test_abs_accepts_integers():
    AbsOp(tensor((2,), i32)).verify()
    AbsOp(tensor((2,), f16)).verify()


def test_pow_builder():
    op = PowOp(tensor((4,)), 3)
    assert op.exponent == FloatAttr(3.0, Float64Type())
    assert op.result.type == TensorType(f32, (4,))
    op.verify()


@pytest.mark.parametrize(
    "shape, starts, ends, steps, expected",
    [
        ((4, 8), (1, 7), (3, -1), (1, -2), (2, 4)),
        ((10,), (0,), (10,), (3,), (4,)),
        ((10,), (9,), (-1,), (-1,), (10,)),
        ((10,), (9,), (10,), (-1,), (0,)),
        ((10,), (5,), (5,), (1,), (0,)),
        ((0, 3), (0, 2), (0, 0), (2, -1), (0, 2)),
        ((3, 4, 5), (0, 1, 2), (3, 4, 5), (1, 1, 1), (3, 3, 3)),
    ],
)
def test_slice_builder(
    shape: tuple[int, ...],
    starts: tuple[int, ...],
    ends: tuple[int, ...],
    steps: tuple[int, ...],
    expected: tuple[int, ...],
):
    op = SliceOp(tensor(shape), starts, ends, steps)
    assert shape_of(op.result) == expected
    op.verify()
    # It is Python's (and numpy's) slicing.
    x = np.arange(max(1, int(np.prod(shape)))).reshape(-1)[: int(np.prod(shape))]
    x = x.reshape(shape)
    index = tuple(
        slice(s, e if e >= 0 else None, st)
        for s, e, st in zip(starts, ends, steps, strict=True)
    )
    assert x[index].shape == expected


@pytest.mark.parametrize(
    "shape, target, expected",
    [
        ((4, 1), (2, 4, 8), (2, 4, 8)),
        ((4, 8), (1,), (4, 8)),
        ((3, 1), (1, 5), (3, 5)),
        ((), (2, 2), (2, 2)),
        ((2, 3), (2, 3), (2, 3)),
    ],
)
def test_expand_builder(
    shape: tuple[int, ...], target: tuple[int, ...], expected: tuple[int, ...]
):
    op = ExpandOp(tensor(shape, i1), target)
    assert op.result.type == TensorType(i1, expected)
    op.verify()


@pytest.mark.parametrize("mode", list(PadMode))
def test_pad_builder(mode: PadMode):
    op = PadOp(tensor((4, 8)), (0, 1, 2, 3), mode, 2.0 if mode == "constant" else 0.0)
    assert op.result.type == TensorType(f32, (6, 12))
    assert op.mode == PadModeAttr(mode)
    op.verify()


def test_pad_builder_defaults_to_zeros():
    op = PadOp(tensor((3,), i64), (1, 2))
    assert op.mode.data == PadMode.CONSTANT
    assert op.value.value.data == 0.0
    assert shape_of(op.result) == (6,)


def test_gather_elements_builder():
    op = GatherElementsOp(tensor((4, 8)), tensor((2, 3), i64), 1)
    assert op.result.type == TensorType(f32, (2, 3))
    op.verify()
    op = GatherElementsOp(tensor((4, 8)), tensor((7, 8), i32), -2)
    assert shape_of(op.result) == (7, 8)
    op.verify()
    assert list(op.infer_result_types()) == [op.result.type]
