"""
The `graph` dialect: plmr's tensor-graph level (the TASO level).

One op per ONNX-like operator, on builtin ranked `tensor` types with static shapes and ONNX
semantics (numpy broadcasting for elementwise ops, NCHW convolution and pooling). Every op
infers its result types from its operands and properties; the verifier checks that the
declared result types equal the inferred ones, so a malformed graph is rejected with a
message naming the offending dimension. The numpy reference semantics of every op lives in
`plmr.runtime.reference`; it is the oracle all later levels are checked against.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar, cast

from xdsl.dialects.builtin import (
    I64,
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    Float64Type,
    FloatAttr,
    IntegerAttr,
    TensorType,
    UnitAttr,
    i64,
)
from xdsl.dialects.utils import EnumAttribute
from xdsl.ir import (
    Attribute,
    Dialect,
    Operation,
    SpacedOpaqueSyntaxAttribute,
    SSAValue,
)
from xdsl.irdl import (
    VarConstraint,
    base,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import Commutative, ConstantLike, Pure
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum

from plmr.dialects.graph_base import BinaryElementwiseOp, GraphOp, UnaryElementwiseOp
from plmr.dialects.graph_elementwise import (
    AbsOp,
    AndOp,
    CastOp,
    CeilOp,
    CmpOp,
    CmpPredicate,
    CmpPredicateAttr,
    CosOp,
    FloorOp,
    LogicalBinaryOp,
    LogOp,
    MaximumOp,
    MinimumOp,
    NotOp,
    OrOp,
    PowOp,
    ReciprocalOp,
    SinOp,
    WhereOp,
    XorOp,
)
from plmr.dialects.graph_movement import (
    ExpandOp,
    GatherElementsOp,
    PadMode,
    PadModeAttr,
    PadOp,
    SliceOp,
)
from plmr.dialects.graph_shapes import (
    Shape,
    broadcast_shapes,
    check_same_element_type,
    concat_shape,
    conv2d_shape,
    element_type,
    expand_shape,
    fmt_shape,
    gather_elements_shape,
    gather_shape,
    is_bool_type,
    is_float_type,
    is_integer_type,
    matmul_shape,
    normalize_axes,
    normalize_axis,
    pad_shape,
    pool_shape,
    reduce_shape,
    slice_shape,
    split_shapes,
    static_shape,
    tensor_type,
    transpose_shape,
    where_shape,
)
from plmr.dialects.graph_shapes import i64_array as _i64_array
from plmr.dialects.graph_shapes import i64_attr as _i64
from plmr.dialects.graph_shapes import ints as _ints
from plmr.dialects.graph_weights import WeightOp

# ---------------------------------------------------------------------------------------
# Enums
# ---------------------------------------------------------------------------------------


class ReduceKind(StrEnum):
    """The combiner of a `graph.reduce`."""

    SUM = "sum"
    MAX = "max"
    MIN = "min"
    MEAN = "mean"


@irdl_attr_definition
class ReduceKindAttr(EnumAttribute[ReduceKind], SpacedOpaqueSyntaxAttribute):
    """`sum`, `max`, `min` or `mean`."""

    name = "graph.reduce_kind"


class PoolKind(StrEnum):
    """The window function of a `graph.pool`."""

    MAX = "max"
    AVG = "avg"


@irdl_attr_definition
class PoolKindAttr(EnumAttribute[PoolKind], SpacedOpaqueSyntaxAttribute):
    """`max` or `avg`."""

    name = "graph.pool_kind"


# ---------------------------------------------------------------------------------------
# Ops
# ---------------------------------------------------------------------------------------


@irdl_op_definition
class MatmulOp(GraphOp):
    """
    Batched matrix product with numpy broadcasting of the batch dimensions.

    `transpose_a` / `transpose_b` swap the last two dimensions of an operand before the
    product, so `Q·Kᵀ` needs no separate transpose.

    ```mlir
    %c = graph.matmul %a, %b transpose_b : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
    ```
    """

    name = "graph.matmul"

    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    transpose_a = opt_prop_def(UnitAttr)
    transpose_b = opt_prop_def(UnitAttr)
    result = result_def(TensorType)

    traits = traits_def(Pure())

    assembly_format = (
        "$lhs `,` $rhs (`transpose_a` $transpose_a^)? (`transpose_b` $transpose_b^)? "
        "attr-dict `:` `(` type($lhs) `,` type($rhs) `)` `->` type($result)"
    )

    def __init__(
        self,
        lhs: SSAValue | Operation,
        rhs: SSAValue | Operation,
        transpose_a: bool = False,
        transpose_b: bool = False,
    ):
        lhs_v, rhs_v = SSAValue.get(lhs), SSAValue.get(rhs)
        shape = matmul_shape(
            static_shape(lhs_v, "lhs"), static_shape(rhs_v, "rhs"), transpose_a, transpose_b
        )
        props: dict[str, Attribute] = {}
        if transpose_a:
            props["transpose_a"] = UnitAttr()
        if transpose_b:
            props["transpose_b"] = UnitAttr()
        super().__init__(
            operands=[lhs_v, rhs_v],
            result_types=[TensorType(element_type(lhs_v), shape)],
            properties=props,
        )

    def infer_result_types(self) -> Sequence[Attribute]:
        check_same_element_type([self.lhs, self.rhs], ["lhs", "rhs"])
        shape = matmul_shape(
            static_shape(self.lhs, "lhs"),
            static_shape(self.rhs, "rhs"),
            self.transpose_a is not None,
            self.transpose_b is not None,
        )
        return [TensorType(element_type(self.lhs), shape)]


@irdl_op_definition
class AddOp(BinaryElementwiseOp):
    """
    Elementwise sum with numpy broadcasting.

    ```mlir
    %c = graph.add %a, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    ```
    """

    name = "graph.add"

    traits = traits_def(Pure(), Commutative())


@irdl_op_definition
class SubOp(BinaryElementwiseOp):
    """
    Elementwise difference with numpy broadcasting.

    ```mlir
    %c = graph.sub %a, %b : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
    ```
    """

    name = "graph.sub"


@irdl_op_definition
class MulOp(BinaryElementwiseOp):
    """
    Elementwise product with numpy broadcasting.

    ```mlir
    %c = graph.mul %a, %b : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    ```
    """

    name = "graph.mul"

    traits = traits_def(Pure(), Commutative())


@irdl_op_definition
class DivOp(BinaryElementwiseOp):
    """
    Elementwise quotient with numpy broadcasting.

    ```mlir
    %c = graph.div %a, %b : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
    ```
    """

    name = "graph.div"


@irdl_op_definition
class ScaleOp(GraphOp):
    """
    Multiplies every element by a scalar constant.

    ```mlir
    %s = graph.scale %a by 1.250000e-01 : tensor<4x8xf32>
    ```
    """

    name = "graph.scale"

    T: ClassVar = VarConstraint("T", base(TensorType))

    input = operand_def(T)
    factor = prop_def(FloatAttr[Float64Type])
    result = result_def(T)

    traits = traits_def(Pure())

    assembly_format = "$input `by` $factor attr-dict `:` type($result)"

    def __init__(self, input: SSAValue | Operation, factor: float | FloatAttr[Float64Type]):
        value = SSAValue.get(input)
        if not isinstance(factor, FloatAttr):
            factor = FloatAttr(float(factor), Float64Type())
        super().__init__(
            operands=[value], result_types=[value.type], properties={"factor": factor}
        )

    def infer_result_types(self) -> Sequence[Attribute]:
        t = tensor_type(self.input, "input")
        factor = self.factor.value.data
        if is_integer_type(t.element_type) and not float(factor).is_integer():
            raise VerifyException(
                f"'graph.scale' of an integer tensor needs an integral factor, got {factor}"
            )
        return [t]


@irdl_op_definition
class ReluOp(UnaryElementwiseOp):
    """
    `max(x, 0)`, elementwise.

    ```mlir
    %r = graph.relu %a : tensor<4x8xf32>
    ```
    """

    name = "graph.relu"

    FLOAT_ONLY: ClassVar[bool] = False


@irdl_op_definition
class GeluOp(GraphOp):
    """
    Gaussian error linear unit, `x·Φ(x)`; with `tanh`, the tanh approximation.

    ```mlir
    %g = graph.gelu %a : tensor<4x8xf32>
    %h = graph.gelu %a tanh : tensor<4x8xf32>
    ```
    """

    name = "graph.gelu"

    T: ClassVar = VarConstraint("T", base(TensorType))

    input = operand_def(T)
    tanh = opt_prop_def(UnitAttr)
    result = result_def(T)

    traits = traits_def(Pure())

    assembly_format = "$input (`tanh` $tanh^)? attr-dict `:` type($result)"

    def __init__(self, input: SSAValue | Operation, tanh: bool = False):
        value = SSAValue.get(input)
        super().__init__(
            operands=[value],
            result_types=[value.type],
            properties={"tanh": UnitAttr()} if tanh else {},
        )

    def infer_result_types(self) -> Sequence[Attribute]:
        t = tensor_type(self.input, "input")
        if not is_float_type(t.element_type):
            raise VerifyException(f"'graph.gelu' needs a floating-point tensor, got {t}")
        return [t]


@irdl_op_definition
class SiluOp(UnaryElementwiseOp):
    """
    `x·sigmoid(x)` (swish), elementwise.

    ```mlir
    %s = graph.silu %a : tensor<4x8xf32>
    ```
    """

    name = "graph.silu"


@irdl_op_definition
class SigmoidOp(UnaryElementwiseOp):
    """
    `1 / (1 + exp(-x))`, elementwise.

    ```mlir
    %s = graph.sigmoid %a : tensor<4x8xf32>
    ```
    """

    name = "graph.sigmoid"


@irdl_op_definition
class TanhOp(UnaryElementwiseOp):
    """
    Hyperbolic tangent, elementwise.

    ```mlir
    %t = graph.tanh %a : tensor<4x8xf32>
    ```
    """

    name = "graph.tanh"


@irdl_op_definition
class ExpOp(UnaryElementwiseOp):
    """
    `e^x`, elementwise.

    ```mlir
    %e = graph.exp %a : tensor<4x8xf32>
    ```
    """

    name = "graph.exp"


@irdl_op_definition
class ErfOp(UnaryElementwiseOp):
    """
    The Gauss error function, elementwise.

    ```mlir
    %e = graph.erf %a : tensor<4x8xf32>
    ```
    """

    name = "graph.erf"


@irdl_op_definition
class SqrtOp(UnaryElementwiseOp):
    """
    Square root, elementwise.

    ```mlir
    %s = graph.sqrt %a : tensor<4x8xf32>
    ```
    """

    name = "graph.sqrt"


@irdl_op_definition
class NegOp(UnaryElementwiseOp):
    """
    `-x`, elementwise.

    ```mlir
    %n = graph.neg %a : tensor<4x8xf32>
    ```
    """

    name = "graph.neg"

    FLOAT_ONLY: ClassVar[bool] = False


@irdl_op_definition
class TransposeOp(GraphOp):
    """
    Permutes the dimensions: result dim `i` is input dim `perm[i]`.

    ```mlir
    %t = graph.transpose %a perm = [0, 2, 1] : tensor<2x4x8xf32> -> tensor<2x8x4xf32>
    ```
    """

    name = "graph.transpose"

    input = operand_def(TensorType)
    perm = prop_def(DenseArrayBase.constr(I64))
    result = result_def(TensorType)

    traits = traits_def(Pure())

    assembly_format = (
        "$input `perm` `=` $perm attr-dict `:` type($input) `->` type($result)"
    )

    def __init__(self, input: SSAValue | Operation, perm: Sequence[int]):
        value = SSAValue.get(input)
        shape = transpose_shape(static_shape(value, "input"), perm)
        super().__init__(
            operands=[value],
            result_types=[TensorType(element_type(value), shape)],
            properties={"perm": _i64_array(perm)},
        )

    def infer_result_types(self) -> Sequence[Attribute]:
        shape = transpose_shape(static_shape(self.input, "input"), _ints(self.perm))
        return [TensorType(element_type(self.input), shape)]


@irdl_op_definition
class ReshapeOp(GraphOp):
    """
    Reinterprets the elements (row-major) under a new shape with the same element count.

    ```mlir
    %r = graph.reshape %a : tensor<2x4x8xf32> -> tensor<8x8xf32>
    ```
    """

    name = "graph.reshape"

    input = operand_def(TensorType)
    result = result_def(TensorType)

    traits = traits_def(Pure())

    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue | Operation, shape: Sequence[int]):
        value = SSAValue.get(input)
        super().__init__(
            operands=[value], result_types=[TensorType(element_type(value), shape)]
        )

    def infer_result_types(self) -> Sequence[Attribute]:
        src = tensor_type(self.input, "input")
        dst = tensor_type(self.result, "result")
        if src.element_type != dst.element_type:
            raise VerifyException(
                f"reshape cannot change the element type ({src.element_type} to "
                f"{dst.element_type})"
            )
        n_src, n_dst = math.prod(src.get_shape()), math.prod(dst.get_shape())
        if n_src != n_dst:
            raise VerifyException(
                f"reshape from {fmt_shape(src.get_shape())} ({n_src} elements) to "
                f"{fmt_shape(dst.get_shape())} ({n_dst} elements) changes the element count"
            )
        return [dst]


@irdl_op_definition
class ReduceOp(GraphOp):
    """
    Reduces the given axes with `sum`, `max`, `min` or `mean`; `keepdims` keeps them as
    size-1 dimensions.

    ```mlir
    %s = graph.reduce sum %a axes = [1] : tensor<4x8xf32> -> tensor<4xf32>
    %m = graph.reduce max %a axes = [-1] keepdims : tensor<4x8xf32> -> tensor<4x1xf32>
    ```
    """

    name = "graph.reduce"

    kind = prop_def(ReduceKindAttr)
    input = operand_def(TensorType)
    axes = prop_def(DenseArrayBase.constr(I64))
    keepdims = opt_prop_def(UnitAttr)
    result = result_def(TensorType)

    traits = traits_def(Pure())

    assembly_format = (
        "$kind $input `axes` `=` $axes (`keepdims` $keepdims^)? attr-dict `:` "
        "type($input) `->` type($result)"
    )

    def __init__(
        self,
        kind: ReduceKind | str,
        input: SSAValue | Operation,
        axes: Sequence[int],
        keepdims: bool = False,
    ):
        value = SSAValue.get(input)
        shape = reduce_shape(static_shape(value, "input"), axes, keepdims)
        props: dict[str, Attribute] = {
            "kind": ReduceKindAttr(ReduceKind(kind)),
            "axes": _i64_array(axes),
        }
        if keepdims:
            props["keepdims"] = UnitAttr()
        super().__init__(
            operands=[value],
            result_types=[TensorType(element_type(value), shape)],
            properties=props,
        )

    def normalized_axes(self) -> tuple[int, ...]:
        return normalize_axes(_ints(self.axes), len(static_shape(self.input, "input")))

    def infer_result_types(self) -> Sequence[Attribute]:
        shape = reduce_shape(
            static_shape(self.input, "input"), _ints(self.axes), self.keepdims is not None
        )
        return [TensorType(element_type(self.input), shape)]


@irdl_op_definition
class SoftmaxOp(GraphOp):
    """
    `exp(x - max) / sum(exp(x - max))` along `axis` (default: the last).

    ```mlir
    %p = graph.softmax %s : tensor<4x8xf32>
    %q = graph.softmax %s axis = 0 : tensor<4x8xf32>
    ```
    """

    name = "graph.softmax"

    T: ClassVar = VarConstraint("T", base(TensorType))

    input = operand_def(T)
    axis = prop_def(IntegerAttr[I64], default_value=IntegerAttr(-1, i64))
    result = result_def(T)

    traits = traits_def(Pure())

    assembly_format = "$input (`axis` `=` $axis^)? attr-dict `:` type($result)"

    def __init__(self, input: SSAValue | Operation, axis: int = -1):
        value = SSAValue.get(input)
        super().__init__(
            operands=[value], result_types=[value.type], properties={"axis": _i64(axis)}
        )

    def infer_result_types(self) -> Sequence[Attribute]:
        t = tensor_type(self.input, "input")
        if not is_float_type(t.element_type):
            raise VerifyException(f"'graph.softmax' needs a floating-point tensor, got {t}")
        normalize_axis(self.axis.value.data, len(t.get_shape()))
        return [t]


def _check_norm_param(param: Shape, norm: Shape, what: str) -> None:
    try:
        ok = broadcast_shapes(norm, param) == norm
    except VerifyException:
        ok = False
    if not ok:
        raise VerifyException(
            f"{what} of shape {fmt_shape(param)} does not broadcast to the normalized "
            f"shape {fmt_shape(norm)}"
        )


@irdl_op_definition
class LayerNormOp(GraphOp):
    """
    Layer normalization over the dimensions from `axis` on (ONNX LayerNormalization):
    `(x - mean) / sqrt(var + epsilon) * scale + bias`. `bias` is optional.

    ```mlir
    %y = graph.layernorm %x, %g, %b : (tensor<4x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
    %z = graph.layernorm %x, %g axis = 1 epsilon = 1.000000e-06 : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
    ```
    """

    name = "graph.layernorm"

    input = operand_def(TensorType)
    scale = operand_def(TensorType)
    bias = opt_operand_def(TensorType)
    axis = prop_def(IntegerAttr[I64], default_value=IntegerAttr(-1, i64))
    epsilon = prop_def(FloatAttr[Float64Type], default_value=FloatAttr(1e-5, Float64Type()))
    result = result_def(TensorType)

    traits = traits_def(Pure())

    assembly_format = (
        "$input `,` $scale (`,` $bias^)? (`axis` `=` $axis^)? (`epsilon` `=` $epsilon^)? "
        "attr-dict `:` `(` type($input) `,` type($scale) (`,` type($bias)^)? `)` `->` "
        "type($result)"
    )

    def __init__(
        self,
        input: SSAValue | Operation,
        scale: SSAValue | Operation,
        bias: SSAValue | Operation | None = None,
        axis: int = -1,
        epsilon: float = 1e-5,
    ):
        value = SSAValue.get(input)
        super().__init__(
            operands=[value, scale, [] if bias is None else [bias]],
            result_types=[value.type],
            properties={"axis": _i64(axis), "epsilon": FloatAttr(epsilon, Float64Type())},
        )

    def infer_result_types(self) -> Sequence[Attribute]:
        t = tensor_type(self.input, "input")
        if not is_float_type(t.element_type):
            raise VerifyException(
                f"'graph.layernorm' needs a floating-point tensor, got {t}"
            )
        shape = t.get_shape()
        ax = normalize_axis(self.axis.value.data, len(shape))
        norm = shape[ax:]
        params = [self.input, self.scale]
        names = ["input", "scale"]
        _check_norm_param(static_shape(self.scale, "scale"), norm, "scale")
        if self.bias is not None:
            _check_norm_param(static_shape(self.bias, "bias"), norm, "bias")
            params.append(self.bias)
            names.append("bias")
        check_same_element_type(params, names)
        return [t]


@irdl_op_definition
class RmsNormOp(GraphOp):
    """
    RMS normalization over the dimensions from `axis` on:
    `x / sqrt(mean(x²) + epsilon) * weight`.

    ```mlir
    %y = graph.rmsnorm %x, %w epsilon = 1.000000e-06 : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
    ```
    """

    name = "graph.rmsnorm"

    input = operand_def(TensorType)
    weight = operand_def(TensorType)
    axis = prop_def(IntegerAttr[I64], default_value=IntegerAttr(-1, i64))
    epsilon = prop_def(FloatAttr[Float64Type], default_value=FloatAttr(1e-5, Float64Type()))
    result = result_def(TensorType)

    traits = traits_def(Pure())

    assembly_format = (
        "$input `,` $weight (`axis` `=` $axis^)? (`epsilon` `=` $epsilon^)? attr-dict "
        "`:` `(` type($input) `,` type($weight) `)` `->` type($result)"
    )

    def __init__(
        self,
        input: SSAValue | Operation,
        weight: SSAValue | Operation,
        axis: int = -1,
        epsilon: float = 1e-5,
    ):
        value = SSAValue.get(input)
        super().__init__(
            operands=[value, weight],
            result_types=[value.type],
            properties={"axis": _i64(axis), "epsilon": FloatAttr(epsilon, Float64Type())},
        )

    def infer_result_types(self) -> Sequence[Attribute]:
        t = tensor_type(self.input, "input")
        if not is_float_type(t.element_type):
            raise VerifyException(f"'graph.rmsnorm' needs a floating-point tensor, got {t}")
        shape = t.get_shape()
        ax = normalize_axis(self.axis.value.data, len(shape))
        _check_norm_param(static_shape(self.weight, "weight"), shape[ax:], "weight")
        check_same_element_type([self.input, self.weight], ["input", "weight"])
        return [t]


@irdl_op_definition
class ConcatOp(GraphOp):
    """
    Concatenates tensors along `axis`; all other dimensions must agree.

    ```mlir
    %c = graph.concat %a, %b axis = 1 : (tensor<4x8xf32>, tensor<4x2xf32>) -> tensor<4x10xf32>
    ```
    """

    name = "graph.concat"

    inputs = var_operand_def(TensorType)
    axis = prop_def(IntegerAttr[I64])
    result = result_def(TensorType)

    traits = traits_def(Pure())

    assembly_format = (
        "$inputs `axis` `=` $axis attr-dict `:` `(` type($inputs) `)` `->` type($result)"
    )

    def __init__(self, inputs: Sequence[SSAValue | Operation], axis: int):
        values = [SSAValue.get(v) for v in inputs]
        shape = concat_shape([static_shape(v, "input") for v in values], axis)
        super().__init__(
            operands=[values],
            result_types=[TensorType(element_type(values[0]), shape)],
            properties={"axis": _i64(axis)},
        )

    def infer_result_types(self) -> Sequence[Attribute]:
        values = list(self.inputs)
        if not values:
            raise VerifyException("concat needs at least one input")
        check_same_element_type(values, [f"input {i}" for i in range(len(values))])
        shape = concat_shape(
            [static_shape(v, f"input {i}") for i, v in enumerate(values)],
            self.axis.value.data,
        )
        return [TensorType(element_type(values[0]), shape)]


@irdl_op_definition
class SplitOp(GraphOp):
    """
    Splits a tensor along `axis` into pieces of the given `sizes`.

    ```mlir
    %q, %k, %v = graph.split %qkv axis = 1 sizes = [8, 8, 8] : tensor<4x24xf32> -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>)
    ```
    """

    name = "graph.split"

    input = operand_def(TensorType)
    axis = prop_def(IntegerAttr[I64])
    sizes = prop_def(DenseArrayBase.constr(I64))
    outputs = var_result_def(TensorType)

    traits = traits_def(Pure())

    assembly_format = (
        "$input `axis` `=` $axis `sizes` `=` $sizes attr-dict `:` type($input) `->` "
        "`(` type($outputs) `)`"
    )

    def __init__(self, input: SSAValue | Operation, axis: int, sizes: Sequence[int]):
        value = SSAValue.get(input)
        shapes = split_shapes(static_shape(value, "input"), axis, sizes)
        elt = element_type(value)
        super().__init__(
            operands=[value],
            result_types=[[TensorType(elt, s) for s in shapes]],
            properties={"axis": _i64(axis), "sizes": _i64_array(sizes)},
        )

    def infer_result_types(self) -> Sequence[Attribute]:
        elt = element_type(self.input)
        shapes = split_shapes(
            static_shape(self.input, "input"), self.axis.value.data, _ints(self.sizes)
        )
        return [TensorType(elt, s) for s in shapes]


@irdl_op_definition
class Conv2dOp(GraphOp):
    """
    2-D convolution in NCHW layout with an MCkHkW weight (ONNX Conv): `pads` are
    `[top, left, bottom, right]`; `bias` (shape `[M]`) is optional. Attributes equal to
    their defaults (strides 1, no padding, dilation 1, one group) are not printed.

    ```mlir
    %y = graph.conv2d %x, %w, %b pads = [1, 1, 1, 1] : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<1x4x8x8xf32>
    ```
    """

    name = "graph.conv2d"

    input = operand_def(TensorType)
    weight = operand_def(TensorType)
    bias = opt_operand_def(TensorType)
    strides = prop_def(
        DenseArrayBase.constr(I64), default_value=DenseArrayBase.from_list(i64, [1, 1])
    )
    pads = prop_def(
        DenseArrayBase.constr(I64),
        default_value=DenseArrayBase.from_list(i64, [0, 0, 0, 0]),
    )
    dilations = prop_def(
        DenseArrayBase.constr(I64), default_value=DenseArrayBase.from_list(i64, [1, 1])
    )
    groups = prop_def(IntegerAttr[I64], default_value=IntegerAttr(1, i64))
    result = result_def(TensorType)

    traits = traits_def(Pure())

    assembly_format = (
        "$input `,` $weight (`,` $bias^)? (`strides` `=` $strides^)? "
        "(`pads` `=` $pads^)? (`dilations` `=` $dilations^)? (`groups` `=` $groups^)? "
        "attr-dict `:` `(` type($input) `,` type($weight) (`,` type($bias)^)? `)` `->` "
        "type($result)"
    )

    def __init__(
        self,
        input: SSAValue | Operation,
        weight: SSAValue | Operation,
        bias: SSAValue | Operation | None = None,
        *,
        strides: Sequence[int] = (1, 1),
        pads: Sequence[int] = (0, 0, 0, 0),
        dilations: Sequence[int] = (1, 1),
        groups: int = 1,
    ):
        x, w = SSAValue.get(input), SSAValue.get(weight)
        shape = conv2d_shape(
            static_shape(x, "input"),
            static_shape(w, "weight"),
            strides,
            pads,
            dilations,
            groups,
        )
        super().__init__(
            operands=[x, w, [] if bias is None else [bias]],
            result_types=[TensorType(element_type(x), shape)],
            properties={
                "strides": _i64_array(strides),
                "pads": _i64_array(pads),
                "dilations": _i64_array(dilations),
                "groups": _i64(groups),
            },
        )

    def infer_result_types(self) -> Sequence[Attribute]:
        shape = conv2d_shape(
            static_shape(self.input, "input"),
            static_shape(self.weight, "weight"),
            _ints(self.strides),
            _ints(self.pads),
            _ints(self.dilations),
            self.groups.value.data,
        )
        values = [self.input, self.weight]
        names = ["input", "weight"]
        if self.bias is not None:
            bias_shape = static_shape(self.bias, "bias")
            if bias_shape != (shape[1],):
                raise VerifyException(
                    f"conv2d bias must have shape {shape[1]} (one per output channel), "
                    f"got {fmt_shape(bias_shape)}"
                )
            values.append(self.bias)
            names.append("bias")
        check_same_element_type(values, names)
        return [TensorType(element_type(self.input), shape)]


@irdl_op_definition
class PoolOp(GraphOp):
    """
    2-D max or average pooling in NCHW layout (ONNX MaxPool / AveragePool). `pads` are
    `[top, left, bottom, right]`; padded positions are ignored by `max` and, unless
    `count_include_pad` is set, by `avg`. `strides` default to 1.

    ```mlir
    %p = graph.pool max %x kernel = [2, 2] strides = [2, 2] : tensor<1x4x8x8xf32> -> tensor<1x4x4x4xf32>
    ```
    """

    name = "graph.pool"

    kind = prop_def(PoolKindAttr)
    input = operand_def(TensorType)
    kernel = prop_def(DenseArrayBase.constr(I64))
    strides = prop_def(
        DenseArrayBase.constr(I64), default_value=DenseArrayBase.from_list(i64, [1, 1])
    )
    pads = prop_def(
        DenseArrayBase.constr(I64),
        default_value=DenseArrayBase.from_list(i64, [0, 0, 0, 0]),
    )
    count_include_pad = opt_prop_def(UnitAttr)
    result = result_def(TensorType)

    traits = traits_def(Pure())

    assembly_format = (
        "$kind $input `kernel` `=` $kernel (`strides` `=` $strides^)? "
        "(`pads` `=` $pads^)? (`count_include_pad` $count_include_pad^)? attr-dict `:` "
        "type($input) `->` type($result)"
    )

    def __init__(
        self,
        kind: PoolKind | str,
        input: SSAValue | Operation,
        kernel: Sequence[int],
        *,
        strides: Sequence[int] = (1, 1),
        pads: Sequence[int] = (0, 0, 0, 0),
        count_include_pad: bool = False,
    ):
        x = SSAValue.get(input)
        shape = pool_shape(static_shape(x, "input"), kernel, strides, pads)
        props: dict[str, Attribute] = {
            "kind": PoolKindAttr(PoolKind(kind)),
            "kernel": _i64_array(kernel),
            "strides": _i64_array(strides),
            "pads": _i64_array(pads),
        }
        if count_include_pad:
            props["count_include_pad"] = UnitAttr()
        super().__init__(
            operands=[x],
            result_types=[TensorType(element_type(x), shape)],
            properties=props,
        )

    def infer_result_types(self) -> Sequence[Attribute]:
        shape = pool_shape(
            static_shape(self.input, "input"),
            _ints(self.kernel),
            _ints(self.strides),
            _ints(self.pads),
        )
        if self.count_include_pad is not None and self.kind.data != PoolKind.AVG:
            raise VerifyException("count_include_pad only applies to avg pooling")
        return [TensorType(element_type(self.input), shape)]


@irdl_op_definition
class ConstantOp(GraphOp):
    """
    A tensor constant (weights, masks, scalars).

    ```mlir
    %c = graph.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
    ```
    """

    name = "graph.constant"

    value = prop_def(DenseIntOrFPElementsAttr)
    result = result_def(TensorType)

    traits = traits_def(Pure(), ConstantLike())

    def __init__(self, value: DenseIntOrFPElementsAttr[Any]):
        super().__init__(result_types=[value.get_type()], properties={"value": value})

    def infer_result_types(self) -> Sequence[Attribute]:
        t = tensor_type(self.value.get_type(), "constant value")
        n = len(self.value)
        size = math.prod(t.get_shape())
        if n not in (1, size):
            raise VerifyException(
                f"constant holds {n} values but its type {t} needs {size}"
            )
        return [t]

    @classmethod
    def parse(cls, parser: Parser) -> ConstantOp:
        pos = parser.pos
        attrs = parser.parse_optional_attr_dict()
        value = parser.parse_attribute()
        if not isinstance(value, DenseIntOrFPElementsAttr):
            parser.raise_error(
                "expected a dense elements attribute, e.g. dense<1.0> : tensor<4xf32>",
                pos,
                parser.pos,
            )
        op = cls(cast(DenseIntOrFPElementsAttr[Any], value))
        op.attributes |= attrs
        return op

    def print(self, printer: Printer) -> None:
        printer.print_op_attributes(self.attributes)
        printer.print_string(" ")
        printer.print_attribute(self.value)


@irdl_op_definition
class GatherOp(GraphOp):
    """
    ONNX Gather: selects slices of `data` along `axis` at integer `indices` (negative
    indices count from the end); the result shape is
    `data.shape[:axis] + indices.shape + data.shape[axis + 1:]`. An embedding lookup is
    a gather on axis 0.

    ```mlir
    %e = graph.gather %table, %ids axis = 0 : (tensor<100x16xf32>, tensor<1x8xi64>) -> tensor<1x8x16xf32>
    ```
    """

    name = "graph.gather"

    data = operand_def(TensorType)
    indices = operand_def(TensorType)
    axis = prop_def(IntegerAttr[I64], default_value=IntegerAttr(0, i64))
    result = result_def(TensorType)

    traits = traits_def(Pure())

    assembly_format = (
        "$data `,` $indices (`axis` `=` $axis^)? attr-dict `:` `(` type($data) `,` "
        "type($indices) `)` `->` type($result)"
    )

    def __init__(
        self, data: SSAValue | Operation, indices: SSAValue | Operation, axis: int = 0
    ):
        d, i = SSAValue.get(data), SSAValue.get(indices)
        shape = gather_shape(static_shape(d, "data"), static_shape(i, "indices"), axis)
        super().__init__(
            operands=[d, i],
            result_types=[TensorType(element_type(d), shape)],
            properties={"axis": _i64(axis)},
        )

    def infer_result_types(self) -> Sequence[Attribute]:
        if not is_integer_type(element_type(self.indices)):
            raise VerifyException(
                f"gather indices must be integers, got {self.indices.type}"
            )
        shape = gather_shape(
            static_shape(self.data, "data"),
            static_shape(self.indices, "indices"),
            self.axis.value.data,
        )
        return [TensorType(element_type(self.data), shape)]


Graph = Dialect(
    "graph",
    [
        MatmulOp,
        AddOp,
        SubOp,
        MulOp,
        DivOp,
        ScaleOp,
        ReluOp,
        GeluOp,
        SiluOp,
        SigmoidOp,
        TanhOp,
        ExpOp,
        ErfOp,
        SqrtOp,
        NegOp,
        TransposeOp,
        ReshapeOp,
        ReduceOp,
        SoftmaxOp,
        LayerNormOp,
        RmsNormOp,
        ConcatOp,
        SplitOp,
        Conv2dOp,
        PoolOp,
        ConstantOp,
        GatherOp,
        WhereOp,
        CmpOp,
        NotOp,
        AndOp,
        OrOp,
        XorOp,
        CastOp,
        AbsOp,
        LogOp,
        CosOp,
        SinOp,
        FloorOp,
        CeilOp,
        ReciprocalOp,
        PowOp,
        MaximumOp,
        MinimumOp,
        SliceOp,
        ExpandOp,
        PadOp,
        GatherElementsOp,
        WeightOp,
    ],
    [ReduceKindAttr, PoolKindAttr, CmpPredicateAttr, PadModeAttr],
)

__all__ = [
    "AbsOp",
    "AddOp",
    "AndOp",
    "BinaryElementwiseOp",
    "CastOp",
    "CeilOp",
    "CmpOp",
    "CmpPredicate",
    "CmpPredicateAttr",
    "Commutative",
    "ConcatOp",
    "ConstantLike",
    "ConstantOp",
    "Conv2dOp",
    "CosOp",
    "DivOp",
    "ErfOp",
    "ExpOp",
    "ExpandOp",
    "FloorOp",
    "GatherElementsOp",
    "GatherOp",
    "GeluOp",
    "Graph",
    "GraphOp",
    "LayerNormOp",
    "LogOp",
    "LogicalBinaryOp",
    "MatmulOp",
    "MaximumOp",
    "MinimumOp",
    "MulOp",
    "NegOp",
    "NotOp",
    "OrOp",
    "PadMode",
    "PadModeAttr",
    "PadOp",
    "PoolKind",
    "PoolKindAttr",
    "PoolOp",
    "PowOp",
    "Pure",
    "ReciprocalOp",
    "ReduceKind",
    "ReduceKindAttr",
    "ReduceOp",
    "ReluOp",
    "ReshapeOp",
    "RmsNormOp",
    "ScaleOp",
    "Shape",
    "SigmoidOp",
    "SiluOp",
    "SinOp",
    "SliceOp",
    "SoftmaxOp",
    "SplitOp",
    "SqrtOp",
    "SubOp",
    "TanhOp",
    "TransposeOp",
    "UnaryElementwiseOp",
    "WeightOp",
    "WhereOp",
    "XorOp",
    "broadcast_shapes",
    "check_same_element_type",
    "concat_shape",
    "conv2d_shape",
    "element_type",
    "expand_shape",
    "fmt_shape",
    "gather_elements_shape",
    "gather_shape",
    "is_bool_type",
    "is_float_type",
    "is_integer_type",
    "matmul_shape",
    "normalize_axes",
    "normalize_axis",
    "pad_shape",
    "pool_shape",
    "reduce_shape",
    "slice_shape",
    "split_shapes",
    "static_shape",
    "tensor_type",
    "transpose_shape",
    "where_shape",
]
