"""
The contractions of the `graph` dialect: `matmul` (batched, with optional transposes of
either operand) and `conv2d` (NCHW, with strides, padding, dilation and groups). Part of
the `Graph` dialect (`plmr.dialects.graph`).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    I64,
    DenseArrayBase,
    IntegerAttr,
    TensorType,
    UnitAttr,
    i64,
)
from xdsl.ir import (
    Attribute,
    Operation,
    SSAValue,
)
from xdsl.irdl import (
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

from plmr.dialects.graph_base import GraphOp
from plmr.dialects.graph_shapes import (
    check_same_element_type,
    conv2d_shape,
    element_type,
    fmt_shape,
    matmul_shape,
    static_shape,
)
from plmr.dialects.graph_shapes import i64_array as _i64_array
from plmr.dialects.graph_shapes import i64_attr as _i64
from plmr.dialects.graph_shapes import ints as _ints


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
