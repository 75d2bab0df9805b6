"""
The `mesh` dialect's program structure: `mesh.program`, host transfers and `mesh.spmd`.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    I64,
    DenseArrayBase,
    Float64Type,
    FloatAttr,
    FunctionType,
    IndexType,
    StringAttr,
    SymbolNameConstraint,
    TensorType,
    i64,
)
from xdsl.ir import (
    Attribute,
    Block,
    Operation,
    Region,
    SSAValue,
)
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import (
    HasParent,
    IsolatedFromAbove,
    IsTerminator,
    Pure,
    SymbolOpInterface,
)
from xdsl.utils.exceptions import VerifyException

from plmr.dialects.graph import tensor_type
from plmr.dialects.mesh.attrs import (
    DeviceAttr,
    DistType,
    LayoutAttr,
)

# ---------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------


def enclosing_program(op: Operation) -> ProgramOp | None:
    parent = op.parent_op()
    while parent is not None and not isinstance(parent, ProgramOp):
        parent = parent.parent_op()
    return parent


def grid_of(op: Operation) -> tuple[int, int] | None:
    program = enclosing_program(op)
    return None if program is None else program.grid_shape


def _dist(value: SSAValue | Attribute, what: str) -> DistType:
    t = value if isinstance(value, Attribute) else value.type
    if not isinstance(t, DistType):
        raise VerifyException(f"{what} must be a !mesh.dist, got {t}")
    return t


# ---------------------------------------------------------------------------------------
# Program structure
# ---------------------------------------------------------------------------------------


@irdl_op_definition
class ProgramOp(IRDLOperation):
    """
    A program for a grid of PEs on a device. Its arguments and results are host tensors.

    ```mlir
    mesh.program @scale(%a: tensor<8x8xf32>) -> tensor<8x8xf32> device "test-small" grid [2, 2] {
      %d = mesh.scatter %a : tensor<8x8xf32> -> !mesh.dist<tensor<8x8xf32>, #mesh.layout<[y, x]>>
      %e = mesh.spmd(%d) : (!mesh.dist<tensor<8x8xf32>, #mesh.layout<[y, x]>>) -> !mesh.dist<tensor<8x8xf32>, #mesh.layout<[y, x]>> {
      ^bb0(%y: index, %x: index, %blk: tensor<4x4xf32>):
        %r = tile.map neg %blk : (tensor<4x4xf32>) -> tensor<4x4xf32>
        mesh.yield %r : tensor<4x4xf32>
      }
      %r = mesh.gather %e : !mesh.dist<tensor<8x8xf32>, #mesh.layout<[y, x]>> -> tensor<8x8xf32>
      mesh.return %r : tensor<8x8xf32>
    }
    ```
    """

    name = "mesh.program"

    sym_name = prop_def(SymbolNameConstraint())
    function_type = prop_def(FunctionType)
    device = prop_def(DeviceAttr)
    grid = prop_def(DenseArrayBase.constr(I64))
    body = region_def("single_block")

    traits = traits_def(SymbolOpInterface(), IsolatedFromAbove())

    def __init__(
        self,
        name: str,
        inputs: Sequence[Attribute],
        outputs: Sequence[Attribute],
        device: str,
        grid: Sequence[int],
        body: Region | None = None,
    ):
        if body is None:
            body = Region(Block(arg_types=inputs))
        super().__init__(
            regions=[body],
            properties={
                "sym_name": StringAttr(name),
                "function_type": FunctionType.from_lists(list(inputs), list(outputs)),
                "device": DeviceAttr(device),
                "grid": DenseArrayBase.from_list(i64, list(grid)),
            },
        )

    @property
    def grid_shape(self) -> tuple[int, int]:
        values = self.grid.get_values()
        return (values[0], values[1]) if len(values) == 2 else (0, 0)

    def verify_(self) -> None:
        values = self.grid.get_values()
        if len(values) != 2 or any(v <= 0 for v in values):
            raise VerifyException(f"grid must be [rows, cols] > 0, got {list(values)}")
        block = self.body.block
        if list(block.arg_types) != list(self.function_type.inputs.data):
            raise VerifyException("block arguments must match the program's input types")
        last = block.last_op
        if not isinstance(last, ReturnOp):
            raise VerifyException("mesh.program must end with mesh.return")
        if list(last.values.types) != list(self.function_type.outputs.data):
            raise VerifyException(
                f"mesh.return types {[str(t) for t in last.values.types]} must match the "
                f"program's result types {[str(t) for t in self.function_type.outputs]}"
            )
        grid = (values[0], values[1])
        for op in block.ops:
            for t in (*op.result_types, *op.operand_types):
                if isinstance(t, DistType):
                    t.layout.verify_grid(grid)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_symbol_name(self.sym_name.data)
        printer.print_string("(")

        def arg(value: SSAValue) -> None:
            printer.print_ssa_value(value)
            printer.print_string(": ")
            printer.print_attribute(value.type)

        printer.print_list(self.body.block.args, arg)
        printer.print_string(") -> ")
        outputs = self.function_type.outputs.data
        if len(outputs) == 1:
            printer.print_attribute(outputs[0])
        else:
            printer.print_string("(")
            printer.print_list(outputs, printer.print_attribute)
            printer.print_string(")")
        printer.print_string(" device ")
        printer.print_string_literal(self.device.spec.data)
        rows, cols = self.grid_shape
        printer.print_string(f" grid [{rows}, {cols}] ")
        printer.print_region(self.body, print_entry_block_args=False)
        printer.print_op_attributes(self.attributes)

    @classmethod
    def parse(cls, parser: Parser) -> ProgramOp:
        name = parser.parse_symbol_name().data
        args = parser.parse_comma_separated_list(
            Parser.Delimiter.PAREN, lambda: parser.parse_argument(expect_type=True)
        )
        parser.parse_punctuation("->")
        if parser.parse_optional_punctuation("(") is not None:
            outputs: list[Attribute] = []
            if parser.parse_optional_punctuation(")") is None:
                outputs = parser.parse_comma_separated_list(
                    Parser.Delimiter.NONE, parser.parse_type
                )
                parser.parse_punctuation(")")
        else:
            outputs = [parser.parse_type()]
        parser.parse_keyword("device")
        device = parser.parse_str_literal()
        parser.parse_keyword("grid")
        grid = parser.parse_comma_separated_list(
            Parser.Delimiter.SQUARE, parser.parse_integer
        )
        body = parser.parse_region(args)
        attrs = parser.parse_optional_attr_dict()
        op = cls(name, [a.type for a in args], outputs, device, grid, body)
        op.attributes |= attrs
        return op


@irdl_op_definition
class ReturnOp(IRDLOperation):
    """
    Ends a `mesh.program` with its host results.

    ```mlir
    mesh.return %r : tensor<8x8xf32>
    ```
    """

    name = "mesh.return"

    values = var_operand_def(TensorType)

    traits = traits_def(IsTerminator(), HasParent(ProgramOp))

    assembly_format = "($values^ `:` type($values))? attr-dict"

    def __init__(self, *values: SSAValue | Operation):
        super().__init__(operands=[values])


@irdl_op_definition
class ScatterOp(IRDLOperation):
    """
    Places a host tensor on the grid under the result's layout. Blocks that reach past the
    tensor's edge are filled with `pad` (default 0), so that every PE holds a full block.
    With `offsets`, the placed tensor is the slice of the input starting there, of the
    result's shape (one head's weights of a weight tensor over heads).

    ```mlir
    %d = mesh.scatter %a : tensor<64x64xf32> -> !mesh.dist<tensor<64x64xf32>, #mesh.layout<[y, x]>>
    %h = mesh.scatter %w offsets [1, 0, 0] : tensor<4x64x16xf32> -> !mesh.dist<tensor<1x64x16xf32>, #mesh.layout<[-, y, x]>>
    ```
    """

    name = "mesh.scatter"

    input = operand_def(TensorType)
    offsets = opt_prop_def(DenseArrayBase.constr(I64))
    pad = opt_prop_def(FloatAttr[Float64Type])
    result = result_def(DistType)

    traits = traits_def(Pure(), HasParent(ProgramOp))

    assembly_format = (
        "$input (`offsets` $offsets^)? (`pad` $pad^)? attr-dict `:` type($input) `->` "
        "type($result)"
    )

    def __init__(
        self,
        input: SSAValue | Operation,
        layout: LayoutAttr,
        pad: float | None = None,
        *,
        offsets: Sequence[int] | None = None,
        shape: Sequence[int] | None = None,
    ):
        x = SSAValue.get(input)
        t = tensor_type(x, "input")
        props: dict[str, Attribute] = {}
        if pad is not None:
            props["pad"] = FloatAttr(pad, Float64Type())
        if offsets is not None:
            props["offsets"] = DenseArrayBase.from_list(i64, list(offsets))
            t = TensorType(t.element_type, list(shape or t.get_shape()))
        super().__init__(operands=[x], result_types=[DistType(t, layout)], properties=props)

    def verify_(self) -> None:
        d = _dist(self.result, "result")
        if self.offsets is None:
            if d.tensor != self.input.type:
                raise VerifyException(
                    f"scatter result distributes {d.tensor}, but the input is "
                    f"{self.input.type}"
                )
            return
        t = tensor_type(self.input, "input")
        whole, part = t.get_shape(), d.tensor.get_shape()
        starts = self.offsets.get_values()
        if d.tensor.element_type != t.element_type or not (
            len(whole) == len(part) == len(starts)
        ):
            raise VerifyException(
                f"scatter of a slice: offsets {list(starts)} and the result {d.tensor} "
                f"must match the rank and element type of the input {t}"
            )
        for o, n, w in zip(starts, part, whole, strict=True):
            if o < 0 or o + n > w:
                raise VerifyException(
                    f"scatter of a slice: offsets {list(starts)} with the result's shape "
                    f"{list(part)} reach past the input {t}"
                )


@irdl_op_definition
class GatherOp(IRDLOperation):
    """
    Collects a distributed tensor back to the host (replicas are read from the first PE
    along each replicated axis; padding is dropped).

    ```mlir
    %r = mesh.gather %d : !mesh.dist<tensor<64x64xf32>, #mesh.layout<[y, x]>> -> tensor<64x64xf32>
    ```
    """

    name = "mesh.gather"

    input = operand_def(DistType)
    result = result_def(TensorType)

    traits = traits_def(Pure(), HasParent(ProgramOp))

    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue | Operation):
        x = SSAValue.get(input)
        super().__init__(operands=[x], result_types=[_dist(x, "input").tensor])

    def verify_(self) -> None:
        d = _dist(self.input, "input")
        if d.tensor != self.result.type:
            raise VerifyException(f"gather of {d.tensor} cannot produce {self.result.type}")


@irdl_op_definition
class SpmdOp(IRDLOperation):
    """
    The per-PE program. The body's arguments are the PE's coordinates `(y, x)` and its
    local block of each operand; it yields its block of each result. Every PE runs the
    body at once; communication ops inside it are collective over the grid.

    ```mlir
    %e = mesh.spmd(%d) : (!mesh.dist<tensor<8x8xf32>, #mesh.layout<[y, x]>>) -> !mesh.dist<tensor<8x8xf32>, #mesh.layout<[y, x]>> {
    ^bb0(%y: index, %x: index, %blk: tensor<4x4xf32>):
      %r = tile.map neg %blk : (tensor<4x4xf32>) -> tensor<4x4xf32>
      mesh.yield %r : tensor<4x4xf32>
    }
    ```
    """

    name = "mesh.spmd"

    inputs = var_operand_def(DistType)
    outputs = var_result_def(DistType)
    body = region_def("single_block")

    traits = traits_def(HasParent(ProgramOp))

    assembly_format = (
        "`(` $inputs `)` attr-dict `:` functional-type($inputs, $outputs) $body"
    )

    def __init__(
        self,
        inputs: Sequence[SSAValue | Operation],
        output_types: Sequence[Attribute],
        body: Region,
    ):
        super().__init__(operands=[inputs], result_types=[output_types], regions=[body])

    def verify_(self) -> None:
        grid = grid_of(self)
        if grid is None:
            raise VerifyException("mesh.spmd must be inside a mesh.program")
        block = self.body.block
        args = list(block.args)
        if len(args) != 2 + len(self.inputs):
            raise VerifyException(
                f"the body takes the coordinates (y, x) and one block per input: expected "
                f"{2 + len(self.inputs)} arguments, got {len(args)}"
            )
        if not all(isinstance(a.type, IndexType) for a in args[:2]):
            raise VerifyException("the body's first two arguments (y, x) must be index")
        for i, (value, arg) in enumerate(zip(self.inputs, args[2:], strict=True)):
            d = _dist(value, f"input {i}")
            want = TensorType(d.tensor.element_type, d.block_shape(grid))
            if arg.type != want:
                raise VerifyException(
                    f"block argument {i} has type {arg.type}, but input {i} "
                    f"({d.tensor} under {d.layout} on a {grid[0]}x{grid[1]} grid) gives "
                    f"each PE a {want}"
                )
        last = block.last_op
        if not isinstance(last, YieldOp):
            raise VerifyException("mesh.spmd body must end with mesh.yield")
        if len(last.values) != len(self.outputs):
            raise VerifyException(
                f"mesh.yield gives {len(last.values)} blocks for {len(self.outputs)} results"
            )
        for i, (value, result) in enumerate(zip(last.values, self.outputs, strict=True)):
            d = _dist(result, f"result {i}")
            want = TensorType(d.tensor.element_type, d.block_shape(grid))
            if value.type != want:
                raise VerifyException(
                    f"yielded block {i} has type {value.type}, but result {i} ({d.tensor} "
                    f"under {d.layout}) needs {want} per PE"
                )


@irdl_op_definition
class YieldOp(IRDLOperation):
    """
    Ends a `mesh.spmd` body with the PE's blocks of the results.

    ```mlir
    mesh.yield %r : tensor<4x4xf32>
    ```
    """

    name = "mesh.yield"

    values = var_operand_def(TensorType)

    traits = traits_def(IsTerminator(), HasParent(SpmdOp))

    assembly_format = "($values^ `:` type($values))? attr-dict"

    def __init__(self, *values: SSAValue | Operation):
        super().__init__(operands=[values])
