"""
The data-movement `graph` ops of ONNX models: `slice` (normalised starts, ends and
steps), `expand` (broadcast to a shape), `pad` (constant, reflect or edge) and
`gather_elements`. Part of the `Graph` dialect (`plmr.dialects.graph`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from xdsl.dialects.builtin import (
    I64,
    DenseArrayBase,
    Float64Type,
    FloatAttr,
    IntegerAttr,
    TensorType,
    i64,
)
from xdsl.dialects.utils import EnumAttribute
from xdsl.ir import Attribute, Operation, SpacedOpaqueSyntaxAttribute, SSAValue
from xdsl.irdl import (
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum

from plmr.dialects.graph_base import GraphOp
from plmr.dialects.graph_shapes import (
    check_same_element_type,
    concat_shape,
    element_type,
    expand_shape,
    fmt_shape,
    gather_elements_shape,
    gather_shape,
    is_integer_type,
    pad_shape,
    slice_shape,
    split_shapes,
    static_shape,
    tensor_type,
    transpose_shape,
)
from plmr.dialects.graph_shapes import i64_array as _i64_array
from plmr.dialects.graph_shapes import i64_attr as _i64
from plmr.dialects.graph_shapes import ints as _ints


class PadMode(StrEnum):
    """How a `graph.pad` fills the border (ONNX Pad modes)."""

    CONSTANT = "constant"
    REFLECT = "reflect"
    EDGE = "edge"


@irdl_attr_definition
class PadModeAttr(EnumAttribute[PadMode], SpacedOpaqueSyntaxAttribute):
    """`constant`, `reflect` or `edge`."""

    name = "graph.pad_mode"


# ---------------------------------------------------------------------------------------
# Data movement
# ---------------------------------------------------------------------------------------


@irdl_op_definition
class SliceOp(GraphOp):
    """
    A strided slice with one normalised `start`, `end` and non-zero `step` per dimension:
    result dimension `i` takes the input's indices `range(start, end, step)` (ONNX Slice
    after clamping; an `end` of -1 with a negative step runs down to index 0).

    ```mlir
    %s = graph.slice %a starts = [1, 7] ends = [3, -1] steps = [1, -2] : tensor<4x8xf32> -> tensor<2x4xf32>
    ```
    """

    name = "graph.slice"

    input = operand_def(TensorType)
    starts = prop_def(DenseArrayBase.constr(I64))
    ends = prop_def(DenseArrayBase.constr(I64))
    steps = prop_def(DenseArrayBase.constr(I64))
    result = result_def(TensorType)

    traits = traits_def(Pure())

    assembly_format = (
        "$input `starts` `=` $starts `ends` `=` $ends `steps` `=` $steps attr-dict `:` "
        "type($input) `->` type($result)"
    )

    def __init__(
        self,
        input: SSAValue | Operation,
        starts: Sequence[int],
        ends: Sequence[int],
        steps: Sequence[int],
    ):
        value = SSAValue.get(input)
        shape = slice_shape(static_shape(value, "input"), starts, ends, steps)
        super().__init__(
            operands=[value],
            result_types=[TensorType(element_type(value), shape)],
            properties={
                "starts": _i64_array(starts),
                "ends": _i64_array(ends),
                "steps": _i64_array(steps),
            },
        )

    def infer_result_types(self) -> Sequence[Attribute]:
        shape = slice_shape(
            static_shape(self.input, "input"),
            _ints(self.starts),
            _ints(self.ends),
            _ints(self.steps),
        )
        return [TensorType(element_type(self.input), shape)]


@irdl_op_definition
class ExpandOp(GraphOp):
    """
    Broadcasts the input to a larger shape (ONNX Expand): the result shape is the numpy
    broadcast of the input shape with the requested one, and the result type carries it.

    ```mlir
    %e = graph.expand %a : tensor<4x1xf32> -> tensor<2x4x8xf32>
    ```
    """

    name = "graph.expand"

    input = operand_def(TensorType)
    result = result_def(TensorType)

    traits = traits_def(Pure())

    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue | Operation, shape: Sequence[int]):
        value = SSAValue.get(input)
        out = expand_shape(static_shape(value, "input"), tuple(shape))
        super().__init__(
            operands=[value], result_types=[TensorType(element_type(value), out)]
        )

    def infer_result_types(self) -> Sequence[Attribute]:
        src = static_shape(self.input, "input")
        dst = tensor_type(self.result, "result")
        out = expand_shape(src, dst.get_shape())
        if out != dst.get_shape():
            raise VerifyException(
                f"expanding {fmt_shape(src)} to {fmt_shape(dst.get_shape())} gives "
                f"{fmt_shape(out)}; the result type must hold the broadcast shape"
            )
        return [TensorType(element_type(self.input), out)]


@irdl_op_definition
class PadOp(GraphOp):
    """
    Pads every dimension (ONNX Pad): `pads` holds the begin pads of all dimensions, then
    their end pads. `constant` fills with `value`, `reflect` mirrors the input without
    repeating the border, `edge` repeats the border.

    ```mlir
    %p = graph.pad %a pads = [0, 1, 2, 3] mode = constant value = 0.000000e+00 : tensor<4x8xf32> -> tensor<6x12xf32>
    ```
    """

    name = "graph.pad"

    input = operand_def(TensorType)
    pads = prop_def(DenseArrayBase.constr(I64))
    mode = prop_def(PadModeAttr)
    value = prop_def(FloatAttr[Float64Type])
    result = result_def(TensorType)

    traits = traits_def(Pure())

    assembly_format = (
        "$input `pads` `=` $pads `mode` `=` $mode `value` `=` $value attr-dict `:` "
        "type($input) `->` type($result)"
    )

    def __init__(
        self,
        input: SSAValue | Operation,
        pads: Sequence[int],
        mode: PadMode | str = PadMode.CONSTANT,
        value: float = 0.0,
    ):
        x = SSAValue.get(input)
        shape = pad_shape(static_shape(x, "input"), pads, PadMode(mode))
        super().__init__(
            operands=[x],
            result_types=[TensorType(element_type(x), shape)],
            properties={
                "pads": _i64_array(pads),
                "mode": PadModeAttr(PadMode(mode)),
                "value": FloatAttr(float(value), Float64Type()),
            },
        )

    def infer_result_types(self) -> Sequence[Attribute]:
        t = tensor_type(self.input, "input")
        value = self.value.value.data
        if is_integer_type(t.element_type) and not float(value).is_integer():
            raise VerifyException(
                f"'graph.pad' of an integer tensor needs an integral value, got {value}"
            )
        shape = pad_shape(t.get_shape(), _ints(self.pads), self.mode.data)
        return [TensorType(t.element_type, shape)]


@irdl_op_definition
class GatherElementsOp(GraphOp):
    """
    ONNX GatherElements: the result has the shape of `indices`, and its element at
    position `p` is `data[p with p[axis] replaced by indices[p]]` (negative indices count
    from the end).

    ```mlir
    %g = graph.gather_elements %d, %i axis = 1 : (tensor<4x8xf32>, tensor<4x3xi64>) -> tensor<4x3xf32>
    ```
    """

    name = "graph.gather_elements"

    data = operand_def(TensorType)
    indices = operand_def(TensorType)
    axis = prop_def(IntegerAttr[I64])
    result = result_def(TensorType)

    traits = traits_def(Pure())

    assembly_format = (
        "$data `,` $indices `axis` `=` $axis attr-dict `:` `(` type($data) `,` "
        "type($indices) `)` `->` type($result)"
    )

    def __init__(
        self, data: SSAValue | Operation, indices: SSAValue | Operation, axis: int = 0
    ):
        d, i = SSAValue.get(data), SSAValue.get(indices)
        shape = gather_elements_shape(
            static_shape(d, "data"), static_shape(i, "indices"), axis
        )
        super().__init__(
            operands=[d, i],
            result_types=[TensorType(element_type(d), shape)],
            properties={"axis": _i64(axis)},
        )

    def infer_result_types(self) -> Sequence[Attribute]:
        if not is_integer_type(element_type(self.indices)):
            raise VerifyException(
                f"gather_elements indices must be integers, got {self.indices.type}"
            )
        shape = gather_elements_shape(
            static_shape(self.data, "data"),
            static_shape(self.indices, "indices"),
            self.axis.value.data,
        )
        return [TensorType(element_type(self.data), shape)]


# ---------------------------------------------------------------------------------------
# Layout, joining, splitting and gathering
# ---------------------------------------------------------------------------------------


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
