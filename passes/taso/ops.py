"""
The ops that graph substitutions reason about, as plain `(kind, params)` keys.

Rules, the search graph and the generator all describe an op by a short `kind` (`matmul`,
`add`, `concat`, ...) and a tuple of normalized parameters (axes made non-negative, unit
attributes as booleans). This module maps `graph` ops to keys and back, and infers result
shapes from a key and operand shapes with the dialect's own shape functions, so a rule
instantiated at new shapes is checked exactly like the verifier checks a program.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import DenseArrayBase, IntegerType
from xdsl.ir import Operation, SSAValue
from xdsl.utils.exceptions import VerifyException

from plmr.dialects import graph
from plmr.errors import PlmrError

Shape = tuple[int, ...]
Param = bool | int | float | str | tuple[int, ...]
Params = tuple[Param, ...]

SUBSTITUTION_KINDS = (
    "matmul",
    "add",
    "mul",
    "scale",
    "relu",
    "transpose",
    "concat",
    "split",
    "conv2d",
    "pool",
    "const",
)
"""The op set of the rule generator (`const`: identity matrices and conv kernels)."""

COMMUTATIVE = frozenset({"add", "mul"})
POINTWISE = frozenset({"add", "mul", "scale", "relu"})
"""Ops whose rules hold for any shapes (elementwise polynomials and relu)."""

UNARY_KINDS: dict[str, type[graph.UnaryElementwiseOp]] = {
    "relu": graph.ReluOp,
    "silu": graph.SiluOp,
    "sigmoid": graph.SigmoidOp,
    "tanh": graph.TanhOp,
    "exp": graph.ExpOp,
    "erf": graph.ErfOp,
    "sqrt": graph.SqrtOp,
    "neg": graph.NegOp,
}
BINARY_KINDS: dict[str, type[graph.BinaryElementwiseOp]] = {
    "add": graph.AddOp,
    "sub": graph.SubOp,
    "mul": graph.MulOp,
    "div": graph.DivOp,
}

IDENTITY = "identity"
"""The `const` parameter of an identity matrix or identity conv kernel in a rule."""


def _ints(attr: DenseArrayBase[IntegerType]) -> tuple[int, ...]:
    return tuple(attr.get_values())


def op_key(op: Operation) -> tuple[str, Params] | None:
    """The `(kind, params)` key of a `graph` op the substitutions understand, else None."""
    if isinstance(op, graph.MatmulOp):
        return "matmul", (op.transpose_a is not None, op.transpose_b is not None)
    for kind, cls in BINARY_KINDS.items():
        if type(op) is cls:
            return kind, ()
    for kind, cls in UNARY_KINDS.items():
        if type(op) is cls:
            return kind, ()
    if isinstance(op, graph.ScaleOp):
        return "scale", (float(op.factor.value.data),)
    if isinstance(op, graph.GeluOp):
        return "gelu", (op.tanh is not None,)
    if isinstance(op, graph.TransposeOp):
        return "transpose", (_ints(op.perm),)
    if isinstance(op, graph.ConcatOp):
        rank = len(graph.static_shape(op.result, "result"))
        return "concat", (op.axis.value.data % rank,)
    if isinstance(op, graph.SplitOp):
        rank = len(graph.static_shape(op.input, "input"))
        return "split", (op.axis.value.data % rank, _ints(op.sizes))
    if isinstance(op, graph.Conv2dOp):
        return "conv2d", (
            _ints(op.strides),
            _ints(op.pads),
            _ints(op.dilations),
            op.groups.value.data,
            op.bias is not None,
        )
    if isinstance(op, graph.PoolOp):
        return "pool", (
            str(op.kind.data),
            _ints(op.kernel),
            _ints(op.strides),
            _ints(op.pads),
            op.count_include_pad is not None,
        )
    return None


def _param(kind: str, params: Params, index: int, name: str) -> Param:
    if index >= len(params):
        raise PlmrError(
            f"substitution op {kind!r} has no parameter {name!r} (position {index}) in "
            f"{params!r}; the rule or search graph that built it is malformed"
        )
    return params[index]


def _bad_param(kind: str, name: str, value: object, expected: str) -> PlmrError:
    return PlmrError(
        f"substitution op {kind!r}: parameter {name!r} is {value!r}, expected {expected}; "
        "the rule or search graph that built it is malformed"
    )


def param_int(kind: str, params: Params, index: int, name: str) -> int:
    """Parameter `index` (called `name`) of a `kind` op as an int; PlmrError otherwise."""
    value = _param(kind, params, index, name)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _bad_param(kind, name, value, "an int")
    return value


def param_ints(kind: str, params: Params, index: int, name: str) -> tuple[int, ...]:
    """Parameter `index` (called `name`) of a `kind` op as a tuple of ints (a shape, axes)."""
    value = _param(kind, params, index, name)
    if not isinstance(value, tuple):
        raise _bad_param(kind, name, value, "a tuple of ints")
    return value


def param_float(kind: str, params: Params, index: int, name: str) -> float:
    """Parameter `index` (called `name`) of a `kind` op as a float (a scale factor)."""
    value = _param(kind, params, index, name)
    if not isinstance(value, float):
        raise _bad_param(kind, name, value, "a float")
    return value


def param_str(kind: str, params: Params, index: int, name: str) -> str:
    """Parameter `index` (called `name`) of a `kind` op as a string (a pool kind)."""
    value = _param(kind, params, index, name)
    if not isinstance(value, str):
        raise _bad_param(kind, name, value, "a string")
    return value


def infer_shapes(kind: str, params: Params, shapes: Sequence[Shape]) -> list[Shape]:
    """Result shapes of `(kind, params)` on operands of `shapes`; VerifyException if invalid."""
    if kind == "matmul":
        return [graph.matmul_shape(shapes[0], shapes[1], bool(params[0]), bool(params[1]))]
    if kind in BINARY_KINDS:
        return [graph.broadcast_shapes(shapes[0], shapes[1])]
    if kind in UNARY_KINDS or kind in ("scale", "gelu"):
        return [shapes[0]]
    if kind == "transpose":
        return [graph.transpose_shape(shapes[0], param_ints(kind, params, 0, "perm"))]
    if kind == "concat":
        return [graph.concat_shape(list(shapes), param_int(kind, params, 0, "axis"))]
    if kind == "split":
        return graph.split_shapes(
            shapes[0],
            param_int(kind, params, 0, "axis"),
            param_ints(kind, params, 1, "sizes"),
        )
    if kind == "conv2d":
        return [
            graph.conv2d_shape(
                shapes[0],
                shapes[1],
                param_ints(kind, params, 0, "strides"),
                param_ints(kind, params, 1, "pads"),
                param_ints(kind, params, 2, "dilations"),
                param_int(kind, params, 3, "groups"),
            )
        ]
    if kind == "pool":
        return [
            graph.pool_shape(
                shapes[0],
                param_ints(kind, params, 1, "kernel"),
                param_ints(kind, params, 2, "strides"),
                param_ints(kind, params, 3, "pads"),
            )
        ]
    raise VerifyException(f"no shape rule for '{kind}'")


def build_op(kind: str, params: Params, operands: Sequence[SSAValue]) -> Operation:
    """A `graph` op for a key (the inverse of `op_key`), with inferred result types."""
    if kind == "matmul":
        return graph.MatmulOp(operands[0], operands[1], bool(params[0]), bool(params[1]))
    if kind in BINARY_KINDS:
        return BINARY_KINDS[kind](operands[0], operands[1])
    if kind in UNARY_KINDS:
        return UNARY_KINDS[kind](operands[0])
    if kind == "scale":
        return graph.ScaleOp(operands[0], param_float(kind, params, 0, "factor"))
    if kind == "gelu":
        return graph.GeluOp(operands[0], bool(params[0]))
    if kind == "transpose":
        return graph.TransposeOp(operands[0], param_ints(kind, params, 0, "perm"))
    if kind == "concat":
        return graph.ConcatOp(list(operands), param_int(kind, params, 0, "axis"))
    if kind == "split":
        return graph.SplitOp(
            operands[0],
            param_int(kind, params, 0, "axis"),
            param_ints(kind, params, 1, "sizes"),
        )
    if kind == "conv2d":
        return graph.Conv2dOp(
            operands[0],
            operands[1],
            operands[2] if params[4] else None,
            strides=param_ints(kind, params, 0, "strides"),
            pads=param_ints(kind, params, 1, "pads"),
            dilations=param_ints(kind, params, 2, "dilations"),
            groups=param_int(kind, params, 3, "groups"),
        )
    if kind == "pool":
        return graph.PoolOp(
            param_str(kind, params, 0, "pool kind"),
            operands[0],
            param_ints(kind, params, 1, "kernel"),
            strides=param_ints(kind, params, 2, "strides"),
            pads=param_ints(kind, params, 3, "pads"),
            count_include_pad=bool(params[4]),
        )
    raise VerifyException(f"cannot build an op of kind '{kind}'")


def same_padding(kernel: Sequence[int]) -> tuple[int, int, int, int]:
    """`[top, left, bottom, right]` pads that keep an odd-kernel, stride-1 window's size."""
    return (kernel[0] // 2, kernel[1] // 2, kernel[0] // 2, kernel[1] // 2)


def conv_params(kernel: Sequence[int]) -> Params:
    """The key parameters of a stride-1, SAME-padded, ungrouped conv without bias."""
    return ((1, 1), same_padding(kernel), (1, 1), 1, False)


def pool_params(kind: str) -> Params:
    """The key parameters of a 3x3, stride-1, SAME-padded pool (avg counts the padding)."""
    return (kind, (3, 3), (1, 1), (1, 1, 1, 1), kind == "avg")


def describe(kind: str, params: Params) -> str:
    """A compact spelling of a key for rule listings, e.g. `concat[1]`, `split[0]`."""
    if kind in ("concat", "split"):
        return f"{kind}[{params[0]}]"
    if kind == "transpose":
        return f"transpose[{','.join(str(p) for p in param_ints(kind, params, 0, 'perm'))}]"
    if kind == "matmul":
        flags = [name for name, on in zip(("ta", "tb"), params, strict=True) if on]
        return f"matmul[{','.join(flags)}]" if flags else "matmul"
    if kind == "conv2d":
        strides = param_ints(kind, params, 0, "strides")
        pads = param_ints(kind, params, 1, "pads")
        extra = "" if strides == (1, 1) else f" s{strides[0]}"
        return f"conv2d[p{pads[0]}{pads[1]}{extra}]"
    if kind == "pool":
        return f"pool_{params[0]}"
    if kind == "const":
        return str(params[0])
    return kind
