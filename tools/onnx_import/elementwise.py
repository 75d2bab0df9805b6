"""
Elementwise ONNX ops: arithmetic, activations and variadic reductions (Sum, Mean, ...).

Activations without a `graph` op of their own are exact rewrites into existing ops where
one exists (LeakyRelu and PRelu from relu, Elu and Selu from relu and exp).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from xdsl.ir import Operation, SSAValue

from plmr.dialects import graph
from plmr.tools.onnx_import.core import (
    Handler,
    Importer,
    Node,
    fmt_shape,
    handles,
    kind_of_dtype,
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


@handles("Reciprocal")
def op_reciprocal(imp: Importer, node: Node) -> None:
    """`1 / x` as a division of a constant 1 (exact)."""
    x = imp.tensor(node, 0)
    one = imp.constant_like(x, 1.0, "one", node.where)
    imp.result(node, graph.DivOp(one, x))


@handles("Pow")
def op_pow(imp: Importer, node: Node) -> None:
    """`x^e` for a constant `e` of 2 (mul), 0.5 (sqrt) or 1 (identity)."""
    exponent = imp.const(node, 1, "exponent")
    distinct = set(np.asarray(exponent, dtype=np.float64).reshape(-1).tolist())
    if len(distinct) != 1:
        raise node.error(
            f"the exponent must hold one value (it holds {len(distinct)} distinct "
            "values); plmr supports Pow only with a constant exponent 0.5, 1 or 2"
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
    if e == 2.0:
        imp.result(node, graph.MulOp(x, x))
    elif e == 0.5:
        imp.result(node, graph.SqrtOp(x))
    elif e == 1.0:
        imp.result(node, x)
    else:
        raise node.error(
            f"exponent {e:g} is not supported (only 0.5, 1 and 2); rewrite x^{e:g} "
            "with Mul, Sqrt, Exp or other supported ops"
        )


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


for _name, _op in (
    ("Erf", graph.ErfOp),
    ("Exp", graph.ExpOp),
    ("Neg", graph.NegOp),
    ("Relu", graph.ReluOp),
    ("Sigmoid", graph.SigmoidOp),
    ("Sqrt", graph.SqrtOp),
    ("Tanh", graph.TanhOp),
):
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
