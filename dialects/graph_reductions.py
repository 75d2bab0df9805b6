"""
The reductions of the `graph` dialect: `reduce` (sum, mean, max, ... over axes),
`softmax`, `layer_norm`, `rms_norm` and `pool` (max or average over NCHW windows). Part of
the `Graph` dialect (`plmr.dialects.graph`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import (
    I64,
    DenseArrayBase,
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
)
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum

from plmr.dialects.graph_base import GraphOp
from plmr.dialects.graph_shapes import (
    Shape,
    broadcast_shapes,
    check_same_element_type,
    element_type,
    fmt_shape,
    is_float_type,
    normalize_axes,
    normalize_axis,
    pool_shape,
    reduce_shape,
    static_shape,
    tensor_type,
)
from plmr.dialects.graph_shapes import i64_array as _i64_array
from plmr.dialects.graph_shapes import i64_attr as _i64
from plmr.dialects.graph_shapes import ints as _ints


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
