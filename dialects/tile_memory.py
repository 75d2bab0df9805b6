"""
The `tile` ops that make a block or move one between global memory and SRAM: `fill`,
`load`, `store`, and `lookup` (rows of a host tensor, on the host). Part of the `Tile`
dialect (`plmr.dialects.tile`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import (
    I64,
    Float64Type,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    TensorType,
    UnitAttr,
)
from xdsl.ir import (
    Attribute,
    Operation,
    SSAValue,
)
from xdsl.irdl import (
    AttrSizedOperandSegments,
    VarConstraint,
    base,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from plmr.dialects.float_text import parse_float_literal
from plmr.dialects.graph_shapes import (
    element_type,
    fmt_shape,
    normalize_axis,
    static_shape,
    tensor_type,
)
from plmr.dialects.graph_shapes import i64_attr as _i64
from plmr.dialects.tile_base import TileOp


@irdl_op_definition
class FillOp(TileOp):
    """
    A block in SRAM with every element equal to `value`.

    ```mlir
    %z = tile.fill 0.000000e+00 : tensor<16x16xf32>
    ```
    """

    name = "tile.fill"

    value = prop_def(FloatAttr[Float64Type])
    result = result_def(TensorType)

    traits = traits_def(Pure())

    def __init__(self, value: float, result_type: Attribute):
        super().__init__(
            result_types=[result_type],
            properties={"value": FloatAttr(float(value), Float64Type())},
        )

    def verify_(self) -> None:
        tensor_type(self.result, "result")

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        self.value.print_without_type(printer)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.result.type)

    @classmethod
    def parse(cls, parser: Parser) -> FillOp:
        value = parse_float_literal(parser, Float64Type())
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        op = cls(float(value), parser.parse_type())
        op.attributes |= attrs
        return op


def _check_offsets(source: Sequence[int], block: Sequence[int], n_offsets: int) -> None:
    if len(block) != len(source):
        raise VerifyException(
            f"block {fmt_shape(block)} must have the rank of the tensor {fmt_shape(source)}"
        )
    if n_offsets != len(source):
        raise VerifyException(
            f"expected {len(source)} offsets (one per dimension), got {n_offsets}"
        )
    for i, (b, s) in enumerate(zip(block, source, strict=True)):
        if b > s:
            raise VerifyException(
                f"block {fmt_shape(block)} is larger than the tensor {fmt_shape(source)} "
                f"in dimension {i}"
            )


@irdl_op_definition
class LoadOp(TileOp):
    """
    Copies the block of `source` that starts at the given offsets into SRAM. The block
    shape is the result type; the block must lie inside the tensor (checked at run time),
    unless a `padding` value is given: then the elements outside the tensor are that
    value (the border of a padded tensor). With `limits` (one index per dimension, and a
    padding), the elements at or past a limit are padding too: in a `mesh.spmd` body, a
    PE's share of a dimension split unevenly may end past the tensor's end, and the
    limit is where the tensor ends in it (`extent - the global index of the share's
    first element`), so that its padding reads as padding whatever the share holds.

    ```mlir
    %b = tile.load %a[%i, %k] : tensor<64x64xf32> -> tensor<16x16xf32>
    %p = tile.load %a[%i, %k] padding 0.000000e+00 : tensor<64x64xf32> -> tensor<16x16xf32>
    %l = tile.load %s[%i, %k] limits[%rows, %n] padding 0.000000e+00 : tensor<64x10xf32> -> tensor<16x10xf32>
    ```
    """

    name = "tile.load"

    source = operand_def(TensorType)
    offsets = var_operand_def(IndexType)
    limits = var_operand_def(IndexType)
    padding = opt_prop_def(FloatAttr[Float64Type])
    result = result_def(TensorType)

    traits = traits_def(Pure())
    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    assembly_format = (
        "$source `[` $offsets `]` (`limits` `[` $limits^ `]`)? (`padding` $padding^)? "
        "attr-dict `:` type($source) `->` type($result)"
    )

    def __init__(
        self,
        source: SSAValue | Operation,
        offsets: Sequence[SSAValue | Operation],
        block_shape: Sequence[int],
        padding: float | None = None,
        limits: Sequence[SSAValue | Operation] = (),
    ):
        src = SSAValue.get(source)
        props: dict[str, Attribute] = {}
        if padding is not None:
            props["padding"] = FloatAttr(float(padding), Float64Type())
        super().__init__(
            operands=[src, offsets, limits],
            result_types=[TensorType(element_type(src), block_shape)],
            properties=props,
        )

    def verify_(self) -> None:
        src = tensor_type(self.source, "source")
        blk = tensor_type(self.result, "result")
        if src.element_type != blk.element_type:
            raise VerifyException(
                f"block element type {blk.element_type} differs from the tensor's "
                f"{src.element_type}"
            )
        if self.limits and len(self.limits) != len(src.get_shape()):
            raise VerifyException(
                f"expected one limit per dimension of the tensor ({len(src.get_shape())}), "
                f"got {len(self.limits)}"
            )
        if self.limits and self.padding is None:
            raise VerifyException("a load with limits needs a padding value")
        # A padded block may be larger than the tensor (a whole padded dimension).
        source = src.get_shape()
        if self.padding is not None and len(source) == len(blk.get_shape()):
            source = tuple(max(s, b) for s, b in zip(source, blk.get_shape(), strict=True))
        _check_offsets(source, blk.get_shape(), len(self.offsets))


@irdl_op_definition
class StoreOp(TileOp):
    """
    Writes a block into `dest` at the given offsets; the result is the updated tensor.
    The block must lie inside the tensor (checked at run time), unless `clip` is given:
    then the elements of the block outside the tensor, before its start or past its end,
    are dropped (the padding of the last block of a dimension its blocks do not divide;
    the counterpart of a padded `tile.load`).

    ```mlir
    %c2 = tile.store %blk, %c[%i, %j] : tensor<16x16xf32> -> tensor<64x64xf32>
    %d2 = tile.store %blk, %d[%i, %j] clip : tensor<16x16xf32> -> tensor<60x64xf32>
    ```
    """

    name = "tile.store"

    T: ClassVar = VarConstraint("T", base(TensorType))

    block = operand_def(TensorType)
    dest = operand_def(T)
    offsets = var_operand_def(IndexType)
    clip = opt_prop_def(UnitAttr)
    result = result_def(T)

    traits = traits_def(Pure())

    assembly_format = (
        "$block `,` $dest `[` $offsets `]` (`clip` $clip^)? attr-dict `:` type($block) "
        "`->` type($dest)"
    )

    def __init__(
        self,
        block: SSAValue | Operation,
        dest: SSAValue | Operation,
        offsets: Sequence[SSAValue | Operation],
        clip: bool = False,
    ):
        d = SSAValue.get(dest)
        props: dict[str, Attribute] = {"clip": UnitAttr()} if clip else {}
        super().__init__(
            operands=[block, d, offsets], result_types=[d.type], properties=props
        )

    def verify_(self) -> None:
        dst = tensor_type(self.dest, "dest")
        blk = tensor_type(self.block, "block")
        if dst.element_type != blk.element_type:
            raise VerifyException(
                f"block element type {blk.element_type} differs from the tensor's "
                f"{dst.element_type}"
            )
        _check_offsets(dst.get_shape(), blk.get_shape(), len(self.offsets))


@irdl_op_definition
class LookupOp(TileOp):
    """
    Rows of a host tensor selected by host indices, looked up on the host: the result
    is `table` gathered along `axis` by `ids` (negative ids count from the end), of
    shape `table.shape[:axis] + ids.shape + table.shape[axis+1:]`. Both operands are
    host tensors (function arguments or constants); only the selected rows reach the
    wafer, streamed in like any input (a token embedding by `input_ids`: one row of
    the table per token instead of a one-hot product over the vocabulary).

    ```mlir
    %e = tile.lookup %table[%ids] axis = 0 : (tensor<16x8xf32>, tensor<1x4xi64>) -> tensor<1x4x8xf32>
    ```
    """

    name = "tile.lookup"

    table = operand_def(TensorType)
    ids = operand_def(TensorType)
    axis = prop_def(IntegerAttr[I64])
    result = result_def(TensorType)

    traits = traits_def(Pure())

    assembly_format = (
        "$table `[` $ids `]` `axis` `=` $axis attr-dict `:` `(` type($table) `,` "
        "type($ids) `)` `->` type($result)"
    )

    def __init__(self, table: SSAValue | Operation, ids: SSAValue | Operation, axis: int):
        t, i = SSAValue.get(table), SSAValue.get(ids)
        super().__init__(
            operands=[t, i],
            result_types=[TensorType(element_type(t), lookup_shape(t, i, axis))],
            properties={"axis": _i64(axis)},
        )

    def verify_(self) -> None:
        if not isinstance(element_type(self.ids), IntegerType):
            raise VerifyException(f"tile.lookup ids must be integers, got {self.ids.type}")
        want = TensorType(
            element_type(self.table),
            lookup_shape(self.table, self.ids, self.axis.value.data),
        )
        if self.result.type != want:
            raise VerifyException(
                f"result type {self.result.type} does not match the inferred type {want}"
            )


def lookup_shape(table: SSAValue, ids: SSAValue, axis: int) -> list[int]:
    """The shape of `tile.lookup`: the table's with its `axis` replaced by the ids'."""
    shape = list(static_shape(table, "table"))
    if not shape:
        raise VerifyException("tile.lookup needs a table of rank at least 1")
    if not -len(shape) <= axis < len(shape):
        raise VerifyException(
            f"tile.lookup axis {axis} is out of range for a table of rank {len(shape)}"
        )
    a = normalize_axis(axis, len(shape))
    return [*shape[:a], *static_shape(ids, "ids"), *shape[a + 1 :]]
