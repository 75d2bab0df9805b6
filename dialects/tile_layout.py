"""
The `tile` ops that rearrange a block in SRAM: `broadcast`, `transpose` and `reshape`.
Part of the `Tile` dialect (`plmr.dialects.tile`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from xdsl.dialects.builtin import (
    I64,
    DenseArrayBase,
    TensorType,
    i64,
)
from xdsl.ir import (
    Operation,
    SSAValue,
)
from xdsl.irdl import (
    irdl_op_definition,
    operand_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from plmr.dialects.graph_shapes import (
    broadcast_shapes,
    element_type,
    fmt_shape,
    static_shape,
    transpose_shape,
)
from plmr.dialects.graph_shapes import ints as _ints
from plmr.dialects.tile_base import TileOp


@irdl_op_definition
class BroadcastOp(TileOp):
    """
    Expands size-1 (or missing leading) dimensions of a block (numpy broadcasting).

    ```mlir
    %b = tile.broadcast %m : tensor<16x1xf32> -> tensor<16x64xf32>
    ```
    """

    name = "tile.broadcast"

    input = operand_def(TensorType)
    result = result_def(TensorType)

    traits = traits_def(Pure())

    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue | Operation, shape: Sequence[int]):
        x = SSAValue.get(input)
        super().__init__(operands=[x], result_types=[TensorType(element_type(x), shape)])

    def verify_(self) -> None:
        src = static_shape(self.input, "input")
        dst = static_shape(self.result, "result")
        if element_type(self.input) != element_type(self.result):
            raise VerifyException("broadcast cannot change the element type")
        try:
            ok = broadcast_shapes(src, dst) == dst
        except VerifyException:
            ok = False
        if not ok:
            raise VerifyException(f"cannot broadcast {fmt_shape(src)} to {fmt_shape(dst)}")


@irdl_op_definition
class TransposeOp(TileOp):
    """
    Permutes the dimensions of a block in SRAM (a local copy, no communication).

    ```mlir
    %t = tile.transpose %x perm = [1, 0] : tensor<16x8xf32> -> tensor<8x16xf32>
    ```
    """

    name = "tile.transpose"

    input = operand_def(TensorType)
    perm = prop_def(DenseArrayBase.constr(I64))
    result = result_def(TensorType)

    traits = traits_def(Pure())

    assembly_format = (
        "$input `perm` `=` $perm attr-dict `:` type($input) `->` type($result)"
    )

    def __init__(self, input: SSAValue | Operation, perm: Sequence[int]):
        x = SSAValue.get(input)
        shape = transpose_shape(static_shape(x, "input"), perm)
        super().__init__(
            operands=[x],
            result_types=[TensorType(element_type(x), shape)],
            properties={"perm": DenseArrayBase.from_list(i64, list(perm))},
        )

    def verify_(self) -> None:
        shape = transpose_shape(static_shape(self.input, "input"), _ints(self.perm))
        want = TensorType(element_type(self.input), shape)
        if self.result.type != want:
            raise VerifyException(
                f"result type {self.result.type} does not match the inferred type {want}"
            )


@irdl_op_definition
class ReshapeOp(TileOp):
    """
    Reinterprets a block under a new shape with the same element count (no data moves).

    ```mlir
    %r = tile.reshape %x : tensor<4x16xf32> -> tensor<64xf32>
    ```
    """

    name = "tile.reshape"

    input = operand_def(TensorType)
    result = result_def(TensorType)

    traits = traits_def(Pure())

    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue | Operation, shape: Sequence[int]):
        x = SSAValue.get(input)
        super().__init__(operands=[x], result_types=[TensorType(element_type(x), shape)])

    def verify_(self) -> None:
        a, b = static_shape(self.input, "input"), static_shape(self.result, "result")
        if math.prod(a) != math.prod(b):
            raise VerifyException(
                f"reshape from {fmt_shape(a)} to {fmt_shape(b)} changes the element count"
            )
        if element_type(self.input) != element_type(self.result):
            raise VerifyException("reshape cannot change the element type")
