"""
Elementwise ONNX ops: arithmetic, activations and variadic reductions (Sum, Mean, ...).

Activations without a `graph` op of their own are exact rewrites into existing ops where
one exists (LeakyRelu and PRelu from relu, Elu and Selu from relu and exp).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from xdsl.ir import Operation, SSAValue

from plmr.dialects import graph
from plmr.frontend.onnx.core import (
    ELEMENT_KINDS,
    Handler,
    Importer,
    Node,
    fmt_shape,
    handles,
    kind_of_dtype,
    numpy_dtype_of,
    onnx_type_name,
    shape_of,
)

BinaryBuilder = Callable[[SSAValue, SSAValue], graph.BinaryElementwiseOp]


# ---------------------------------------------------------------------------------------
# Arithmetic
# ---------------------------------------------------------------------------------------


def scale_operands(
    imp: Importer, node: Node, data: int, scalar: int
) -> tuple[SSAValue, float] | None:
    """
    `(x, c)` if input `scalar` is a one-element float constant `c` and input `data`
    a float tensor `x` of the same type that alone determines the output shape
    (so that `x op c` is a `graph.scale`); None otherwise.
    """
    c = imp.consts.get(node.input(scalar))
    if c is None or c.size != 1 or imp.is_const(node, data):
        return None
    kind = kind_of_dtype(c.dtype)
    x = imp.tensor(node, data)
    elt = graph.element_type(x)
    if kind is None or kind.mlir != elt or not graph.is_float_type(elt):
        return None
    shape = shape_of(x)
    if graph.broadcast_shapes(shape, tuple(c.shape)) != shape:
        return None
    return x, float(c.reshape(-1)[0])


def binary(imp: Importer, node: Node, op: BinaryBuilder) -> None:
    a, b = imp.tensor(node, 0), imp.tensor(node, 1)
    imp.result(node, op(a, b))


@handles("Add")
def op_add(imp: Importer, node: Node) -> None:
    binary(imp, node, graph.AddOp)


@handles("Sub")
def op_sub(imp: Importer, node: Node) -> None:
    binary(imp, node, graph.SubOp)


@handles("Mul")
def op_mul(imp: Importer, node: Node) -> None:
    """Product; by a scalar constant (either side) it is a `graph.scale`."""
    for data, scalar in ((0, 1), (1, 0)):
        operands = scale_operands(imp, node, data, scalar)
        if operands is not None:
            imp.result(node, graph.ScaleOp(*operands))
            return
    binary(imp, node, graph.MulOp)


@handles("Div")
def op_div(imp: Importer, node: Node) -> None:
    """Division; by a scalar constant it is a `graph.scale` by the reciprocal."""
    operands = scale_operands(imp, node, 0, 1)
    if operands is None or operands[1] == 0.0:
        binary(imp, node, graph.DivOp)
        return
    x, c = operands
    imp.result(node, graph.ScaleOp(x, 1.0 / c))


@handles("Pow")
def op_pow(imp: Importer, node: Node) -> None:
    """`x^e` for a constant `e`: 2 is a mul, 0.5 a sqrt, 1 the identity, else `graph.pow`."""
    if not imp.is_const(node, 1):
        raise node.error(
            f"its exponent (input 1, '{node.input(1)}') is computed at run time; plmr "
            "imports Pow only with a constant exponent (graph.pow). Make the exponent an "
            "initializer, or write x^y as Exp(Mul(y, Log(x))) for positive x"
        )
    exponent = imp.const(node, 1, "exponent")
    distinct = set(np.asarray(exponent, dtype=np.float64).reshape(-1).tolist())
    if len(distinct) != 1:
        raise node.error(
            f"the exponent must hold one value (it holds {len(distinct)} distinct "
            "values); plmr supports Pow only with a constant scalar exponent"
        )
    e = float(distinct.pop())
    x = imp.tensor(node, 0)
    shape = shape_of(x)
    if graph.broadcast_shapes(shape, tuple(exponent.shape)) != shape:
        raise node.error(
            f"the exponent of shape {fmt_shape(exponent.shape)} would broadcast the "
            f"base of shape {fmt_shape(shape)}; plmr supports only exponents that "
            "keep the base's shape"
        )
    if e != 1.0 and not graph.is_float_type(graph.element_type(x)):
        raise node.error(
            f"the base is a {graph.element_type(x)} tensor; plmr supports Pow of "
            "floating-point tensors only (or an exponent of 1)"
        )
    imp.result(node, power(imp, x, e))


def power(imp: Importer, x: SSAValue, e: float) -> SSAValue:
    """`x^e`: a mul for 2, a sqrt for 0.5, `x` for 1, else a `graph.pow`."""
    if e == 2.0:
        return imp.emit(graph.MulOp(x, x))
    if e == 0.5:
        return imp.emit(graph.SqrtOp(x))
    if e == 1.0:
        return x
    return imp.emit(graph.PowOp(x, e))


def _variadic(imp: Importer, node: Node, op: BinaryBuilder) -> SSAValue:
    """The inputs of `node` combined left to right with `op`."""
    names = [n for n in node.proto.input if n]
    if not names:
        raise node.error(f"{node.op_type} needs at least one input; fix the model")
    acc = imp.value(names[0], node.where)
    for name in names[1:]:
        acc = imp.emit(op(acc, imp.value(name, node.where)))
    return acc


@handles("Sum")
def op_sum(imp: Importer, node: Node) -> None:
    """Variadic sum: a chain of `graph.add`."""
    imp.result(node, _variadic(imp, node, graph.AddOp))


def _extreme(op: BinaryBuilder) -> Handler:
    """A variadic Max / Min: a chain of `graph.maximum` / `graph.minimum`."""

    def handle(imp: Importer, node: Node) -> None:
        imp.result(node, _variadic(imp, node, op))

    return handle


handles("Max")(_extreme(graph.MaximumOp))
handles("Min")(_extreme(graph.MinimumOp))


@handles("Mean")
def op_mean(imp: Importer, node: Node) -> None:
    """Variadic mean: a chain of `graph.add`, divided by the number of inputs."""
    total = _variadic(imp, node, graph.AddOp)
    n = len([n for n in node.proto.input if n])
    if n == 1:
        imp.result(node, total)
        return
    count = imp.constant_like(total, float(n), "count", node.where)
    imp.result(node, graph.DivOp(total, count))


# ---------------------------------------------------------------------------------------
# Activations
# ---------------------------------------------------------------------------------------


def _unary(op: Callable[[SSAValue], Operation]) -> Handler:
    """A handler for an elementwise unary ONNX op that maps to one `graph` op."""

    def handle(imp: Importer, node: Node) -> None:
        imp.result(node, op(imp.tensor(node, 0)))

    return handle


UNARY_OPS: dict[str, type[graph.UnaryElementwiseOp]] = {
    "Abs": graph.AbsOp,
    "Ceil": graph.CeilOp,
    "Cos": graph.CosOp,
    "Cosh": graph.CoshOp,
    "Erf": graph.ErfOp,
    "Exp": graph.ExpOp,
    "Floor": graph.FloorOp,
    "Log": graph.LogOp,
    "Not": graph.NotOp,
    "Reciprocal": graph.ReciprocalOp,
    "Neg": graph.NegOp,
    "Relu": graph.ReluOp,
    "Sigmoid": graph.SigmoidOp,
    "Sin": graph.SinOp,
    "Sinh": graph.SinhOp,
    "Sqrt": graph.SqrtOp,
    "Tanh": graph.TanhOp,
}
"""The elementwise unary ONNX ops that map to one `graph` op each."""

for _name, _op in UNARY_OPS.items():
    handles(_name)(_unary(_op))


@handles("Gelu")
def op_gelu(imp: Importer, node: Node) -> None:
    """Gelu (opset 20), exact or with the tanh approximation."""
    approximate = node.str_attr("approximate", "none")
    if approximate not in ("none", "tanh"):
        raise node.unsupported_attr("approximate", f"'{approximate}'", "'none' or 'tanh'")
    x = imp.tensor(node, 0)
    imp.result(node, graph.GeluOp(x, tanh=approximate == "tanh"))


def _negative_part(imp: Importer, x: SSAValue) -> SSAValue:
    """`min(x, 0)` as `-relu(-x)` (exact)."""
    return imp.emit(graph.NegOp(imp.emit(graph.ReluOp(imp.emit(graph.NegOp(x))))))


def _float_input(imp: Importer, node: Node) -> SSAValue:
    x = imp.tensor(node, 0)
    if not graph.is_float_type(graph.element_type(x)):
        raise node.error(
            f"{node.op_type} needs a floating-point input, got "
            f"{graph.element_type(x)}; fix the model"
        )
    return x


@handles("LeakyRelu")
def op_leaky_relu(imp: Importer, node: Node) -> None:
    """`relu(x) + alpha·min(x, 0)` (exact: one of the terms is zero)."""
    x = _float_input(imp, node)
    alpha = node.float_attr("alpha", 0.01)
    neg = imp.emit(graph.ScaleOp(_negative_part(imp, x), alpha))
    imp.result(node, graph.AddOp(imp.emit(graph.ReluOp(x)), neg))


@handles("PRelu")
def op_prelu(imp: Importer, node: Node) -> None:
    """`relu(x) + slope·min(x, 0)` with a broadcast slope (exact)."""
    x = _float_input(imp, node)
    slope = imp.tensor(node, 1)
    shape = shape_of(x)
    slope_shape = shape_of(slope)
    if imp.source_opset < 7 and len(shape) > 2 and slope_shape == (shape[1],):
        # Before opset 7 a vector slope holds one value per channel (axis 1).
        slope = imp.emit(graph.ReshapeOp(slope, (shape[1],) + (1,) * (len(shape) - 2)))
    if graph.broadcast_shapes(shape, shape_of(slope)) != shape:
        raise node.error(
            f"the slope of shape {fmt_shape(shape_of(slope))} does not broadcast to the "
            f"input of shape {fmt_shape(shape)}; fix the model"
        )
    neg = imp.emit(graph.MulOp(_negative_part(imp, x), slope))
    imp.result(node, graph.AddOp(imp.emit(graph.ReluOp(x)), neg))


def _elu(imp: Importer, node: Node, x: SSAValue, alpha: float) -> SSAValue:
    """`relu(x) + alpha·(exp(min(x, 0)) - 1)`."""
    one = imp.constant_like(x, 1.0, "one", node.where)
    em1 = imp.emit(graph.SubOp(imp.emit(graph.ExpOp(_negative_part(imp, x))), one))
    return imp.emit(
        graph.AddOp(imp.emit(graph.ReluOp(x)), imp.emit(graph.ScaleOp(em1, alpha)))
    )


@handles("Elu")
def op_elu(imp: Importer, node: Node) -> None:
    """`x` if positive, else `alpha·(exp(x) - 1)`, from relu and exp."""
    x = _float_input(imp, node)
    imp.result(node, _elu(imp, node, x, node.float_attr("alpha", 1.0)))


@handles("Selu")
def op_selu(imp: Importer, node: Node) -> None:
    """`gamma·elu_alpha(x)`, from relu and exp."""
    x = _float_input(imp, node)
    alpha = node.float_attr("alpha", 1.67326319217681884765625)
    gamma = node.float_attr("gamma", 1.05070102214813232421875)
    imp.result(node, graph.ScaleOp(_elu(imp, node, x, alpha), gamma))


# ---------------------------------------------------------------------------------------
# Pass-through
# ---------------------------------------------------------------------------------------


@handles("Identity")
def op_identity(imp: Importer, node: Node) -> None:
    """Binds the output name to the input's value."""
    name = node.input(0)
    if name in imp.consts:
        imp.define_const(node.output(0), imp.consts[name])
        return
    imp.result(node, imp.tensor(node, 0))


@handles("Dropout")
def op_dropout(imp: Importer, node: Node) -> None:
    """Inference Dropout is the identity; a used mask or training mode is refused."""
    imp.check_unused(node, 1, "the dropout mask")
    training = node.input(2)
    if training:
        mode = imp.const(node, 2, "training_mode")
        if bool(np.asarray(mode).reshape(-1)[0]):
            raise node.error(
                "training_mode is true; plmr imports inference graphs only: export the "
                "model in eval mode"
            )
    op_identity(imp, node)


# ---------------------------------------------------------------------------------------
# More activations
# ---------------------------------------------------------------------------------------


@handles("Softplus")
def op_softplus(imp: Importer, node: Node) -> None:
    """`log(exp(x) + 1)`."""
    x = _float_input(imp, node)
    one = imp.constant_like(x, 1.0, "one", node.where)
    imp.result(node, graph.LogOp(imp.emit(graph.AddOp(imp.emit(graph.ExpOp(x)), one))))


@handles("Softsign")
def op_softsign(imp: Importer, node: Node) -> None:
    """`x / (1 + |x|)`."""
    x = _float_input(imp, node)
    one = imp.constant_like(x, 1.0, "one", node.where)
    imp.result(node, graph.DivOp(x, imp.emit(graph.AddOp(one, imp.emit(graph.AbsOp(x))))))


def _clamp(
    imp: Importer, x: SSAValue, lo: SSAValue | None, hi: SSAValue | None
) -> SSAValue:
    if lo is not None:
        x = imp.emit(graph.MaximumOp(x, lo))
    if hi is not None:
        x = imp.emit(graph.MinimumOp(x, hi))
    return x


def _hard_sigmoid(
    imp: Importer, node: Node, x: SSAValue, alpha: float, beta: float
) -> SSAValue:
    """`max(0, min(1, alpha·x + beta))`."""
    beta_c = imp.constant_like(x, beta, "beta", node.where)
    y = imp.emit(graph.AddOp(imp.emit(graph.ScaleOp(x, alpha)), beta_c))
    zero = imp.constant_like(x, 0.0, "zero", node.where)
    one = imp.constant_like(x, 1.0, "one", node.where)
    return _clamp(imp, y, zero, one)


@handles("HardSigmoid")
def op_hard_sigmoid(imp: Importer, node: Node) -> None:
    x = _float_input(imp, node)
    alpha, beta = node.float_attr("alpha", 0.2), node.float_attr("beta", 0.5)
    imp.result(node, _hard_sigmoid(imp, node, x, alpha, beta))


@handles("HardSwish")
def op_hard_swish(imp: Importer, node: Node) -> None:
    """`x · hard_sigmoid(x)` with alpha 1/6, beta 0.5."""
    x = _float_input(imp, node)
    imp.result(node, graph.MulOp(x, _hard_sigmoid(imp, node, x, 1.0 / 6.0, 0.5)))


@handles("Clip")
def op_clip(imp: Importer, node: Node) -> None:
    """`min(max(x, lo), hi)` with optional bounds (inputs 1 and 2)."""
    x = imp.tensor(node, 0)
    bounds: list[SSAValue | None] = []
    for i, what in ((1, "min"), (2, "max")):
        if not node.input(i):
            bounds.append(None)
            continue
        if imp.is_const(node, i):
            arr = imp.consts[node.input(i)]
            if arr.size != 1:
                raise node.error(f"the {what} bound must be a scalar; fix the model")
            bounds.append(imp.constant_like(x, arr.reshape(()), node.input(i), node.where))
        else:
            bounds.append(imp.tensor(node, i))
    imp.result(node, _clamp(imp, x, bounds[0], bounds[1]))


@handles("Sign")
def op_sign(imp: Importer, node: Node) -> None:
    """`1` where positive, `-1` where negative, else `x` (zeros and NaN stay)."""
    x = imp.tensor(node, 0)
    zero = imp.constant_like(x, 0, "zero", node.where)
    one = imp.constant_like(x, 1, "one", node.where)
    minus = imp.constant_like(x, -1, "minus_one", node.where)
    neg = imp.emit(graph.WhereOp(imp.emit(graph.CmpOp("lt", x, zero)), minus, x))
    imp.result(node, graph.WhereOp(imp.emit(graph.CmpOp("gt", x, zero)), one, neg))


@handles("Shrink")
def op_shrink(imp: Importer, node: Node) -> None:
    """`x - bias` above `lambd`, `x + bias` below `-lambd`, else 0."""
    x = _float_input(imp, node)
    lambd, bias = node.float_attr("lambd", 0.5), node.float_attr("bias", 0.0)
    lam = imp.constant_like(x, lambd, "lambd", node.where)
    neg_lam = imp.constant_like(x, -lambd, "neg_lambd", node.where)
    b = imp.constant_like(x, bias, "bias", node.where)
    zero = imp.constant_like(x, 0.0, "zero", node.where)
    low = imp.emit(
        graph.WhereOp(
            imp.emit(graph.CmpOp("lt", x, neg_lam)), imp.emit(graph.AddOp(x, b)), zero
        )
    )
    high = graph.WhereOp(
        imp.emit(graph.CmpOp("gt", x, lam)), imp.emit(graph.SubOp(x, b)), low
    )
    imp.result(node, high)


# ---------------------------------------------------------------------------------------
# Comparisons, logic, selection and casts
# ---------------------------------------------------------------------------------------


def _compare(predicate: str) -> Handler:
    def handle(imp: Importer, node: Node) -> None:
        a, b = imp.tensor(node, 0), imp.tensor(node, 1)
        imp.result(node, graph.CmpOp(predicate, a, b))

    return handle


for _name, _pred in (
    ("Equal", "eq"),
    ("Less", "lt"),
    ("LessOrEqual", "le"),
    ("Greater", "gt"),
    ("GreaterOrEqual", "ge"),
):
    handles(_name)(_compare(_pred))

handles("And")(lambda imp, node: binary(imp, node, graph.AndOp))
handles("Or")(lambda imp, node: binary(imp, node, graph.OrOp))
handles("Xor")(lambda imp, node: binary(imp, node, graph.XorOp))


@handles("IsNaN")
def op_is_nan(imp: Importer, node: Node) -> None:
    """`x != x` (true exactly for NaN)."""
    x = _float_input(imp, node)
    imp.result(node, graph.CmpOp("ne", x, x))


@handles("IsInf")
def op_is_inf(imp: Importer, node: Node) -> None:
    """`x == +inf` and / or `x == -inf`, as `detect_positive` / `detect_negative` say."""
    x = _float_input(imp, node)
    tests: list[SSAValue] = []
    for attr, value in (("detect_positive", np.inf), ("detect_negative", -np.inf)):
        if node.int_attr(attr, 1):
            inf = imp.constant_like(x, value, attr, node.where)
            tests.append(imp.emit(graph.CmpOp("eq", x, inf)))
    if not tests:
        false = np.zeros(shape_of(x), dtype=np.bool_)
        imp.result(node, imp.materialize(false, node.output(0), node.where))
        return
    imp.result(node, tests[0] if len(tests) == 1 else imp.emit(graph.OrOp(*tests)))


@handles("Where")
def op_where(imp: Importer, node: Node) -> None:
    c, a, b = imp.tensor(node, 0), imp.tensor(node, 1), imp.tensor(node, 2)
    imp.result(node, graph.WhereOp(c, a, b))


def cast_to(imp: Importer, node: Node, x: SSAValue, to: int) -> SSAValue:
    """`x` converted to the ONNX element type `to` (itself if it already has it)."""
    kind = ELEMENT_KINDS.get(to)
    if kind is None:
        raise node.error(
            f"cast to {onnx_type_name(to)} is not supported (supported: "
            f"{', '.join(k.name for k in ELEMENT_KINDS.values())}); fix the model"
        )
    if graph.element_type(x) == kind.mlir:
        return x
    return imp.emit(graph.CastOp(x, kind.mlir))


@handles("Cast")
def op_cast(imp: Importer, node: Node) -> None:
    if node.attr("to") is None:
        raise node.error("the required attribute 'to' is missing; fix the model")
    imp.result(node, cast_to(imp, node, imp.tensor(node, 0), node.int_attr("to", 0)))


@handles("CastLike")
def op_cast_like(imp: Importer, node: Node) -> None:
    target = kind_of_dtype(numpy_dtype_of_input(imp, node, 1))
    if target is None:
        raise node.error("the target type of CastLike is not supported; fix the model")
    to = next(k for k, v in ELEMENT_KINDS.items() if v == target)
    imp.result(node, cast_to(imp, node, imp.tensor(node, 0), to))


def numpy_dtype_of_input(imp: Importer, node: Node, i: int) -> np.dtype[Any]:
    arr = imp.consts.get(node.input(i))
    if arr is not None:
        return arr.dtype
    return numpy_dtype_of(imp.tensor(node, i))
