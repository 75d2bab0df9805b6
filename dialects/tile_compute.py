"""
The `tile` ops that compute on blocks in SRAM, besides the elementwise `tile.map`: `dot`
(a block product, optionally accumulating), `reduce` (one axis), `cast` and `select` (a
whole block by a scalar condition). Part of the `Tile` dialect (`plmr.dialects.tile`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import (
    I64,
    IntegerAttr,
    IntegerType,
    TensorType,
    UnitAttr,
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

from plmr.dialects.graph_shapes import (
    element_type,
    fmt_shape,
    normalize_axis,
    static_shape,
)
from plmr.dialects.graph_shapes import i64_attr as _i64
from plmr.dialects.tile_base import TileOp


class ReduceKind(StrEnum):
    """The combiner of a `tile.reduce`."""

    SUM = "sum"
    MAX = "max"
    MIN = "min"


@irdl_attr_definition
class ReduceKindAttr(EnumAttribute[ReduceKind], SpacedOpaqueSyntaxAttribute):
    """`sum`, `max` or `min`."""

    name = "tile.reduce_kind"


def dot_shape(
    lhs: Sequence[int], rhs: Sequence[int], ta: bool, tb: bool
) -> tuple[int, ...]:
    """Result shape of `tile.dot`: equal leading (batch) dims, then an M×N block."""
    if len(lhs) < 2 or len(lhs) != len(rhs):
        raise VerifyException(
            f"dot operands must have the same rank >= 2, got {fmt_shape(lhs)} and "
            f"{fmt_shape(rhs)}"
        )
    if tuple(lhs[:-2]) != tuple(rhs[:-2]):
        raise VerifyException(
            f"dot batch dimensions differ: {fmt_shape(lhs[:-2])} vs {fmt_shape(rhs[:-2])}"
        )
    m, k = (lhs[-1], lhs[-2]) if ta else (lhs[-2], lhs[-1])
    k2, n = (rhs[-1], rhs[-2]) if tb else (rhs[-2], rhs[-1])
    if k != k2:
        raise VerifyException(f"dot contraction dimensions differ: {k} vs {k2}")
    return (*lhs[:-2], m, n)


@irdl_op_definition
class DotOp(TileOp):
    """
    Block matrix product, optionally accumulating: `acc + op(lhs) · op(rhs)`, where `op`
    transposes the last two dimensions when `transpose_a` / `transpose_b` is set.
    Leading dimensions are batch dimensions and must agree.

    ```mlir
    %c = tile.dot %a, %b, %acc transpose_b : (tensor<16x8xf32>, tensor<32x8xf32>, tensor<16x32xf32>) -> tensor<16x32xf32>
    ```
    """

    name = "tile.dot"

    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    acc = opt_operand_def(TensorType)
    transpose_a = opt_prop_def(UnitAttr)
    transpose_b = opt_prop_def(UnitAttr)
    result = result_def(TensorType)

    traits = traits_def(Pure())

    assembly_format = (
        "$lhs `,` $rhs (`,` $acc^)? (`transpose_a` $transpose_a^)? "
        "(`transpose_b` $transpose_b^)? attr-dict `:` `(` type($lhs) `,` type($rhs) "
        "(`,` type($acc)^)? `)` `->` type($result)"
    )

    def __init__(
        self,
        lhs: SSAValue | Operation,
        rhs: SSAValue | Operation,
        acc: SSAValue | Operation | None = None,
        *,
        transpose_a: bool = False,
        transpose_b: bool = False,
    ):
        a, b = SSAValue.get(lhs), SSAValue.get(rhs)
        shape = dot_shape(
            static_shape(a, "lhs"), static_shape(b, "rhs"), transpose_a, transpose_b
        )
        props: dict[str, Attribute] = {}
        if transpose_a:
            props["transpose_a"] = UnitAttr()
        if transpose_b:
            props["transpose_b"] = UnitAttr()
        super().__init__(
            operands=[a, b, [] if acc is None else [acc]],
            result_types=[TensorType(element_type(a), shape)],
            properties=props,
        )

    def verify_(self) -> None:
        shape = dot_shape(
            static_shape(self.lhs, "lhs"),
            static_shape(self.rhs, "rhs"),
            self.transpose_a is not None,
            self.transpose_b is not None,
        )
        want = TensorType(element_type(self.lhs), shape)
        if element_type(self.rhs) != element_type(self.lhs):
            raise VerifyException("dot operands must have the same element type")
        if self.acc is not None and self.acc.type != want:
            raise VerifyException(f"accumulator type {self.acc.type} must be {want}")
        if self.result.type != want:
            raise VerifyException(
                f"result type {self.result.type} does not match the inferred type {want}"
            )


@irdl_op_definition
class ReduceOp(TileOp):
    """
    Reduces one axis of a block with `sum`, `max` or `min`, keeping it as a size-1
    dimension (so the result broadcasts against the input).

    ```mlir
    %m = tile.reduce max %s axis = 1 : tensor<16x64xf32> -> tensor<16x1xf32>
    ```
    """

    name = "tile.reduce"

    kind = prop_def(ReduceKindAttr)
    input = operand_def(TensorType)
    axis = prop_def(IntegerAttr[I64])
    result = result_def(TensorType)

    traits = traits_def(Pure())

    assembly_format = (
        "$kind $input `axis` `=` $axis attr-dict `:` type($input) `->` type($result)"
    )

    def __init__(self, kind: ReduceKind | str, input: SSAValue | Operation, axis: int):
        x = SSAValue.get(input)
        shape = list(static_shape(x, "input"))
        shape[normalize_axis(axis, len(shape))] = 1
        super().__init__(
            operands=[x],
            result_types=[TensorType(element_type(x), shape)],
            properties={"kind": ReduceKindAttr(ReduceKind(kind)), "axis": _i64(axis)},
        )

    def verify_(self) -> None:
        shape = list(static_shape(self.input, "input"))
        shape[normalize_axis(self.axis.value.data, len(shape))] = 1
        want = TensorType(element_type(self.input), shape)
        if self.result.type != want:
            raise VerifyException(
                f"result type {self.result.type} does not match the inferred type {want}"
            )


@irdl_op_definition
class CastOp(TileOp):
    """
    Converts the element type of a block (e.g. f32 accumulators to f16).

    ```mlir
    %h = tile.cast %x : tensor<16x16xf32> -> tensor<16x16xf16>
    ```
    """

    name = "tile.cast"

    input = operand_def(TensorType)
    result = result_def(TensorType)

    traits = traits_def(Pure())

    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue | Operation, element: Attribute):
        x = SSAValue.get(input)
        super().__init__(
            operands=[x], result_types=[TensorType(element, static_shape(x, "input"))]
        )

    def verify_(self) -> None:
        if static_shape(self.input, "input") != static_shape(self.result, "result"):
            raise VerifyException("cast cannot change the shape")


@irdl_op_definition
class SelectOp(TileOp):
    """
    Chooses a whole block by a scalar condition: `cond ? on_true : on_false`. Inside a
    `mesh.spmd` body the condition may differ between PEs (e.g. derived from their
    coordinates), so each PE keeps one of the two blocks.

    ```mlir
    %c = tile.select %is_owner, %new, %old : tensor<16x16xf32>
    ```
    """

    name = "tile.select"

    T: ClassVar = VarConstraint("T", base(TensorType))

    cond = operand_def(IntegerType(1))
    on_true = operand_def(T)
    on_false = operand_def(T)
    result = result_def(T)

    traits = traits_def(Pure())

    assembly_format = "$cond `,` $on_true `,` $on_false attr-dict `:` type($result)"

    def __init__(
        self,
        cond: SSAValue | Operation,
        on_true: SSAValue | Operation,
        on_false: SSAValue | Operation,
    ):
        a = SSAValue.get(on_true)
        super().__init__(operands=[cond, a, on_false], result_types=[a.type])
