"""
The elementwise `graph` ops of ONNX models beyond arithmetic: selection (`where`),
comparison (`cmp`, an `i1` result), logic on `i1` (`not`, `and`, `or`, `xor`), casts,
`abs`, `log`, `cos`, `sin`, `sinh`, `cosh`, `floor`, `ceil`, `reciprocal`, `pow` by a
constant, `maximum` and `minimum`. Binary ones broadcast like numpy. Part of the `Graph` dialect
(`plmr.dialects.graph`).
"""

from __future__ import annotations

import math
from abc import ABC
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
from xdsl.dialects import arith
from xdsl.dialects import math as mathd
from xdsl.dialects.builtin import (
    Float64Type,
    FloatAttr,
    IntegerType,
    TensorType,
    UnitAttr,
    i1,
)
from xdsl.dialects.utils import EnumAttribute
from xdsl.ir import Attribute, Operation, SpacedOpaqueSyntaxAttribute, SSAValue
from xdsl.irdl import (
    VarConstraint,
    base,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.traits import Commutative, Pure
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum

from plmr.dialects.graph_base import (
    BinaryElementwiseOp,
    Domain,
    GraphOp,
    UnaryElementwiseOp,
    UnaryMeaning,
    float_constant,
)
from plmr.dialects.graph_shapes import (
    broadcast_shapes,
    check_same_element_type,
    element_type,
    fmt_shape,
    is_bool_type,
    is_float_type,
    is_integer_type,
    static_shape,
    tensor_type,
    where_shape,
)


class CmpPredicate(StrEnum):
    """The relation tested by a `graph.cmp`."""

    EQ = "eq"
    NE = "ne"
    LT = "lt"
    LE = "le"
    GT = "gt"
    GE = "ge"


@irdl_attr_definition
class CmpPredicateAttr(EnumAttribute[CmpPredicate], SpacedOpaqueSyntaxAttribute):
    """`eq`, `ne`, `lt`, `le`, `gt` or `ge`."""

    name = "graph.cmp_predicate"


# ---------------------------------------------------------------------------------------
# Selection, comparison and logic
# ---------------------------------------------------------------------------------------


def _check_bool(value: SSAValue, what: str, op: str) -> TensorType[Attribute]:
    t = tensor_type(value, what)
    if not is_bool_type(t.element_type):
        raise VerifyException(f"'{op}' needs an i1 {what}, got {t}")
    return t


@irdl_op_definition
class WhereOp(GraphOp):
    """
    ONNX Where: picks `lhs` where `condition` holds and `rhs` elsewhere, with numpy
    broadcasting of all three operands.

    ```mlir
    %w = graph.where %c, %a, %b : (tensor<4x1xi1>, tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
    ```
    """

    name = "graph.where"

    condition = operand_def(TensorType)
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def(TensorType)

    traits = traits_def(Pure())

    assembly_format = (
        "$condition `,` $lhs `,` $rhs attr-dict `:` `(` type($condition) `,` type($lhs) "
        "`,` type($rhs) `)` `->` type($result)"
    )

    def __init__(
        self,
        condition: SSAValue | Operation,
        lhs: SSAValue | Operation,
        rhs: SSAValue | Operation,
    ):
        c, a, b = SSAValue.get(condition), SSAValue.get(lhs), SSAValue.get(rhs)
        shape = where_shape(
            static_shape(c, "condition"), static_shape(a, "lhs"), static_shape(b, "rhs")
        )
        super().__init__(
            operands=[c, a, b], result_types=[TensorType(element_type(a), shape)]
        )

    def infer_result_types(self) -> Sequence[Attribute]:
        _check_bool(self.condition, "condition", self.name)
        check_same_element_type([self.lhs, self.rhs], ["lhs", "rhs"])
        shape = where_shape(
            static_shape(self.condition, "condition"),
            static_shape(self.lhs, "lhs"),
            static_shape(self.rhs, "rhs"),
        )
        return [TensorType(element_type(self.lhs), shape)]


@irdl_op_definition
class CmpOp(GraphOp):
    """
    Elementwise comparison with numpy broadcasting (ONNX Equal, Less, LessOrEqual,
    Greater, GreaterOrEqual); the result is an `i1` tensor.

    ```mlir
    %m = graph.cmp lt %a, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xi1>
    ```
    """

    name = "graph.cmp"

    predicate = prop_def(CmpPredicateAttr)
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def(TensorType)

    traits = traits_def(Pure())

    assembly_format = (
        "$predicate $lhs `,` $rhs attr-dict `:` `(` type($lhs) `,` type($rhs) `)` `->` "
        "type($result)"
    )

    def __init__(
        self,
        predicate: CmpPredicate | str,
        lhs: SSAValue | Operation,
        rhs: SSAValue | Operation,
    ):
        a, b = SSAValue.get(lhs), SSAValue.get(rhs)
        shape = broadcast_shapes(static_shape(a, "lhs"), static_shape(b, "rhs"))
        super().__init__(
            operands=[a, b],
            result_types=[TensorType(i1, shape)],
            properties={"predicate": CmpPredicateAttr(CmpPredicate(predicate))},
        )

    def infer_result_types(self) -> Sequence[Attribute]:
        check_same_element_type([self.lhs, self.rhs], ["lhs", "rhs"])
        shape = broadcast_shapes(
            static_shape(self.lhs, "lhs"), static_shape(self.rhs, "rhs")
        )
        return [TensorType(i1, shape)]


@irdl_op_definition
class NotOp(UnaryElementwiseOp):
    """
    Logical negation of an `i1` tensor, elementwise.

    ```mlir
    %n = graph.not %m : tensor<4x8xi1>
    ```
    """

    name = "graph.not"

    def infer_result_types(self) -> Sequence[Attribute]:
        return [_check_bool(self.input, "input", self.name)]


class LogicalBinaryOp(BinaryElementwiseOp, ABC):
    """Elementwise logic on `i1` tensors with numpy broadcasting."""

    traits = traits_def(Pure(), Commutative())

    def infer_result_types(self) -> Sequence[Attribute]:
        _check_bool(self.lhs, "lhs", self.name)
        return super().infer_result_types()


@irdl_op_definition
class AndOp(LogicalBinaryOp):
    """
    Elementwise logical and of `i1` tensors with numpy broadcasting.

    ```mlir
    %r = graph.and %a, %b : (tensor<4x8xi1>, tensor<8xi1>) -> tensor<4x8xi1>
    ```
    """

    name = "graph.and"


@irdl_op_definition
class OrOp(LogicalBinaryOp):
    """
    Elementwise logical or of `i1` tensors with numpy broadcasting.

    ```mlir
    %r = graph.or %a, %b : (tensor<4x8xi1>, tensor<4x1xi1>) -> tensor<4x8xi1>
    ```
    """

    name = "graph.or"


@irdl_op_definition
class XorOp(LogicalBinaryOp):
    """
    Elementwise exclusive or of `i1` tensors with numpy broadcasting.

    ```mlir
    %r = graph.xor %a, %b : (tensor<4x8xi1>, tensor<4x8xi1>) -> tensor<4x8xi1>
    ```
    """

    name = "graph.xor"


@irdl_op_definition
class MaximumOp(BinaryElementwiseOp):
    """
    Elementwise maximum with numpy broadcasting (ONNX Max of two inputs).

    ```mlir
    %m = graph.maximum %a, %b : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
    ```
    """

    name = "graph.maximum"

    traits = traits_def(Pure(), Commutative())


@irdl_op_definition
class MinimumOp(BinaryElementwiseOp):
    """
    Elementwise minimum with numpy broadcasting (ONNX Min of two inputs).

    ```mlir
    %m = graph.minimum %a, %b : (tensor<4x8xi64>, tensor<8xi64>) -> tensor<4x8xi64>
    ```
    """

    name = "graph.minimum"

    traits = traits_def(Pure(), Commutative())


# ---------------------------------------------------------------------------------------
# Casts and more elementwise arithmetic
# ---------------------------------------------------------------------------------------


@irdl_op_definition
class CastOp(GraphOp):
    """
    Converts the elements to another element type (ONNX Cast): floats to integers
    truncate toward zero, anything to `i1` tests `x != 0`, `i1` converts to 0 or 1.

    ```mlir
    %c = graph.cast %a : tensor<4x8xf32> -> tensor<4x8xi64>
    ```
    """

    name = "graph.cast"

    input = operand_def(TensorType)
    result = result_def(TensorType)

    traits = traits_def(Pure())

    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue | Operation, element_type: Attribute):
        value = SSAValue.get(input)
        super().__init__(
            operands=[value],
            result_types=[TensorType(element_type, static_shape(value, "input"))],
        )

    def infer_result_types(self) -> Sequence[Attribute]:
        src = tensor_type(self.input, "input")
        dst = tensor_type(self.result, "result")
        for what, t in (("input", src), ("result", dst)):
            elt = t.element_type
            if not (is_float_type(elt) or isinstance(elt, IntegerType)):
                raise VerifyException(
                    f"'graph.cast' converts between float and integer tensors, but its "
                    f"{what} is {t}"
                )
        if src.get_shape() != dst.get_shape():
            raise VerifyException(
                f"'graph.cast' cannot change the shape ({fmt_shape(src.get_shape())} to "
                f"{fmt_shape(dst.get_shape())})"
            )
        return [dst]


@irdl_op_definition
class AbsOp(UnaryElementwiseOp):
    """
    `|x|`, elementwise (floats and integers).

    ```mlir
    %r = graph.abs %a : tensor<4x8xf32>
    ```
    """

    name = "graph.abs"

    FLOAT_ONLY: ClassVar[bool] = False


@irdl_op_definition
class LogOp(UnaryElementwiseOp):
    """
    Natural logarithm, elementwise.

    ```mlir
    %r = graph.log %a : tensor<4x8xf32>
    ```
    """

    name = "graph.log"


@irdl_op_definition
class CosOp(UnaryElementwiseOp):
    """
    Cosine (of radians), elementwise: RoPE's table of a run-time position.

    ```mlir
    %r = graph.cos %a : tensor<1x8x16xf32>
    ```
    """

    name = "graph.cos"


@irdl_op_definition
class SinOp(UnaryElementwiseOp):
    """
    Sine (of radians), elementwise: RoPE's table of a run-time position.

    ```mlir
    %r = graph.sin %a : tensor<1x8x16xf32>
    ```
    """

    name = "graph.sin"


def _exp_pair(x: SSAValue, combine: type[arith.AddfOp | arith.SubfOp]) -> SSAValue:
    """`(e^x ± e^-x) / 2` in `arith` / `math`."""
    pos = mathd.ExpOp(x).result
    neg = mathd.ExpOp(arith.NegfOp(x).result).result
    return arith.MulfOp(combine(pos, neg).result, float_constant(0.5, x)).result


def _sinh_body(x: SSAValue) -> SSAValue:
    return _exp_pair(x, arith.SubfOp)


def _cosh_body(x: SSAValue) -> SSAValue:
    return _exp_pair(x, arith.AddfOp)


def _sinh(x: npt.NDArray[Any]) -> npt.NDArray[Any]:
    return np.sinh(x)


def _cosh(x: npt.NDArray[Any]) -> npt.NDArray[Any]:
    return np.cosh(x)


@irdl_op_definition
class SinhOp(UnaryElementwiseOp):
    """
    Hyperbolic sine, elementwise: `(e^x - e^-x) / 2`.

    ```mlir
    %r = graph.sinh %a : tensor<4x8xf32>
    ```
    """

    name = "graph.sinh"

    MEANING: ClassVar[UnaryMeaning | None] = UnaryMeaning(
        numpy=_sinh, body=_sinh_body, domain=Domain.SQUASHED, bound=math.sinh
    )


@irdl_op_definition
class CoshOp(UnaryElementwiseOp):
    """
    Hyperbolic cosine, elementwise: `(e^x + e^-x) / 2`.

    ```mlir
    %r = graph.cosh %a : tensor<4x8xf32>
    ```
    """

    name = "graph.cosh"

    MEANING: ClassVar[UnaryMeaning | None] = UnaryMeaning(
        numpy=_cosh, body=_cosh_body, domain=Domain.SQUASHED, bound=math.cosh
    )


@irdl_op_definition
class FloorOp(UnaryElementwiseOp):
    """
    Rounds down to an integral value, elementwise.

    ```mlir
    %r = graph.floor %a : tensor<4x8xf32>
    ```
    """

    name = "graph.floor"


@irdl_op_definition
class CeilOp(UnaryElementwiseOp):
    """
    Rounds up to an integral value, elementwise.

    ```mlir
    %r = graph.ceil %a : tensor<4x8xf32>
    ```
    """

    name = "graph.ceil"


@irdl_op_definition
class ReciprocalOp(UnaryElementwiseOp):
    """
    `1 / x`, elementwise.

    ```mlir
    %r = graph.reciprocal %a : tensor<4x8xf32>
    ```
    """

    name = "graph.reciprocal"


@irdl_op_definition
class PowOp(GraphOp):
    """
    Raises every element to a constant exponent (ONNX Pow with a scalar constant
    exponent).

    ```mlir
    %p = graph.pow %a by 3.000000e+00 : tensor<4x8xf32>
    ```
    """

    name = "graph.pow"

    T: ClassVar = VarConstraint("T", base(TensorType))

    input = operand_def(T)
    exponent = prop_def(FloatAttr[Float64Type])
    result = result_def(T)

    traits = traits_def(Pure())

    assembly_format = "$input `by` $exponent attr-dict `:` type($result)"

    def __init__(
        self, input: SSAValue | Operation, exponent: float | FloatAttr[Float64Type]
    ):
        value = SSAValue.get(input)
        if not isinstance(exponent, FloatAttr):
            exponent = FloatAttr(float(exponent), Float64Type())
        super().__init__(
            operands=[value], result_types=[value.type], properties={"exponent": exponent}
        )

    def infer_result_types(self) -> Sequence[Attribute]:
        t = tensor_type(self.input, "input")
        if not is_float_type(t.element_type):
            raise VerifyException(f"'graph.pow' needs a floating-point tensor, got {t}")
        return [t]


# ---------------------------------------------------------------------------------------
# Arithmetic, activations and math of one operand
# ---------------------------------------------------------------------------------------


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
