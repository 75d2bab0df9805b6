"""
The `tile` ops with a body: `map` (an elementwise function of blocks, a named kind or a
scalar `arith`/`math` body), `for` (a counted loop carrying blocks) and the `yield` that
ends both. Part of the `Tile` dialect (`plmr.dialects.tile`).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    I64,
    IndexType,
    IntegerAttr,
    StringAttr,
    TensorType,
)
from xdsl.dialects.utils import EnumAttribute
from xdsl.ir import (
    Attribute,
    Block,
    BlockArgument,
    Operation,
    Region,
    SpacedOpaqueSyntaxAttribute,
    SSAValue,
)
from xdsl.irdl import (
    IRDLOperation,
    irdl_attr_definition,
    irdl_op_definition,
    lazy_traits_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.printer import Printer
from xdsl.traits import HasParent, IsTerminator, Pure, RecursiveMemoryEffect
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum

from plmr.dialects.graph_shapes import (
    broadcast_shapes,
    element_type,
    fmt_shape,
    static_shape,
    tensor_type,
)
from plmr.dialects.graph_shapes import i64_attr as _i64
from plmr.dialects.tile_base import TileOp

UNARY_KINDS: tuple[str, ...] = (
    "exp",
    "log",
    "cos",
    "sin",
    "neg",
    "abs",
    "relu",
    "sigmoid",
    "tanh",
    "erf",
    "sqrt",
    "rsqrt",
    "recip",
    "gelu",
    "gelu_tanh",
    "silu",
)
"""Named elementwise functions of one operand."""


BINARY_KINDS: tuple[str, ...] = ("add", "sub", "mul", "div", "max", "min")
"""Named elementwise functions of two operands (numpy broadcasting)."""


@irdl_op_definition
class MapOp(TileOp):
    """
    Elementwise function of one or more blocks (numpy broadcasting): a named `kind`
    (`exp`, `add`, `max`, `silu`, ...) or a body on scalars in `arith` / `math` that ends
    in `tile.yield`.

    ```mlir
    %e = tile.map exp %x : (tensor<16x64xf32>) -> tensor<16x64xf32>
    %d = tile.map sub %x, %m : (tensor<16x64xf32>, tensor<16x1xf32>) -> tensor<16x64xf32>
    %s = tile.map %x : (tensor<16x64xf32>) -> tensor<16x64xf32> {
    ^bb0(%v: f32):
      %c = arith.constant 1.250000e-01 : f32
      %r = arith.mulf %v, %c : f32
      tile.yield %r : f32
    }
    ```
    """

    name = "tile.map"

    inputs = var_operand_def(TensorType)
    kind = opt_prop_def(StringAttr)
    result = result_def(TensorType)
    body = region_def()

    traits = traits_def(Pure(), RecursiveMemoryEffect())

    def __init__(
        self,
        inputs: Sequence[SSAValue | Operation],
        kind: str | None = None,
        body: Region | None = None,
        result_type: Attribute | None = None,
    ):
        values = [SSAValue.get(v) for v in inputs]
        if result_type is None:
            shape = static_shape(values[0], "input 0")
            for i, v in enumerate(values[1:], 1):
                shape = broadcast_shapes(shape, static_shape(v, f"input {i}"))
            result_type = TensorType(element_type(values[0]), shape)
        super().__init__(
            operands=[values],
            result_types=[result_type],
            properties={} if kind is None else {"kind": StringAttr(kind)},
            regions=[Region() if body is None else body],
        )

    @property
    def kind_name(self) -> str | None:
        return None if self.kind is None else self.kind.data

    def verify_(self) -> None:
        values = list(self.inputs)
        if not values:
            raise VerifyException("tile.map needs at least one input")
        shape = static_shape(values[0], "input 0")
        for i, v in enumerate(values[1:], 1):
            shape = broadcast_shapes(shape, static_shape(v, f"input {i}"))
        res = tensor_type(self.result, "result")
        if res.get_shape() != shape:
            raise VerifyException(
                f"result shape {fmt_shape(res.get_shape())} is not the broadcast shape "
                f"{fmt_shape(shape)} of the inputs"
            )
        has_body = bool(self.body.blocks)
        if self.kind is not None and has_body:
            raise VerifyException("tile.map has both a kind and a body; give one")
        if self.kind is None and not has_body:
            raise VerifyException("tile.map needs a kind (e.g. exp) or a body")
        if self.kind is not None:
            self._verify_kind(self.kind.data, len(values))
            return
        self._verify_body(values, res)

    def _verify_kind(self, kind: str, arity: int) -> None:
        if kind in UNARY_KINDS:
            if arity != 1:
                raise VerifyException(f"tile.map {kind} takes 1 input, got {arity}")
            return
        if kind in BINARY_KINDS:
            if arity != 2:
                raise VerifyException(f"tile.map {kind} takes 2 inputs, got {arity}")
            return
        raise VerifyException(
            f"unknown tile.map kind '{kind}' (unary: {', '.join(UNARY_KINDS)}; "
            f"binary: {', '.join(BINARY_KINDS)})"
        )

    def _verify_body(self, values: Sequence[SSAValue], res: TensorType[Attribute]) -> None:
        if len(self.body.blocks) != 1:
            raise VerifyException("tile.map body must have exactly one block")
        block = self.body.block
        want = [element_type(v) for v in values]
        got = list(block.arg_types)
        if got != want:
            raise VerifyException(
                f"tile.map body arguments {[str(t) for t in got]} must be the input "
                f"element types {[str(t) for t in want]}"
            )
        last = block.last_op
        if not isinstance(last, YieldOp):
            raise VerifyException("tile.map body must end with tile.yield")
        if list(last.values.types) != [res.element_type]:
            raise VerifyException(
                f"tile.map body must yield one {res.element_type}, got "
                f"{[str(t) for t in last.values.types]}"
            )

    def print(self, printer: Printer) -> None:
        if self.kind_name is not None:
            printer.print_string(f" {self.kind_name}")
        printer.print_string(" ")
        printer.print_list(self.inputs, printer.print_operand)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : (")
        printer.print_list(self.inputs.types, printer.print_attribute)
        printer.print_string(") -> ")
        printer.print_attribute(self.result.type)
        if self.body.blocks:
            printer.print_string(" ")
            printer.print_region(self.body, print_entry_block_args=True)

    @classmethod
    def parse(cls, parser: Parser) -> MapOp:
        kind = parser.parse_optional_identifier()
        operands: list[UnresolvedOperand] = parser.parse_comma_separated_list(
            Parser.Delimiter.NONE, parser.parse_unresolved_operand
        )
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        pos = parser.pos
        types = parser.parse_comma_separated_list(Parser.Delimiter.PAREN, parser.parse_type)
        parser.parse_punctuation("->")
        result_type = parser.parse_type()
        inputs = parser.resolve_operands(operands, types, pos)
        body = parser.parse_optional_region()
        op = cls(inputs, kind, body, result_type)
        op.attributes |= attrs
        return op


@irdl_op_definition
class YieldOp(IRDLOperation):
    """
    Ends a `tile.map` body (one scalar) or a `tile.for` body (the carried values).

    ```mlir
    tile.yield %acc : tensor<16x16xf32>
    ```
    """

    name = "tile.yield"

    values = var_operand_def()

    traits = lazy_traits_def(lambda: (IsTerminator(), HasParent(MapOp, ForOp), Pure()))

    assembly_format = "($values^ `:` type($values))? attr-dict"

    def __init__(self, *values: SSAValue | Operation):
        super().__init__(operands=[values])


class LoopKind(StrEnum):
    """Whether the iterations of a `tile.for` are independent or combine."""

    PARALLEL = "parallel"
    REDUCTION = "reduction"


@irdl_attr_definition
class LoopKindAttr(EnumAttribute[LoopKind], SpacedOpaqueSyntaxAttribute):
    """`parallel` or `reduction`."""

    name = "tile.loop_kind"


@irdl_op_definition
class ForOp(TileOp):
    """
    A counted loop with static bounds, `for (i = lb; i < ub; i += step)`, whose body
    receives the index and the carried values and yields their next values. `parallel`
    marks independent iterations (e.g. one output block each), `reduction` iterations
    that combine into the carried values.

    ```mlir
    %acc = tile.for %k = 0 to 64 step 16 iter_args(%c = %zero) -> (tensor<16x16xf32>) reduction {
      %a = tile.load %A[%i, %k] : tensor<64x64xf32> -> tensor<16x16xf32>
      %b = tile.load %B[%k, %j] : tensor<64x64xf32> -> tensor<16x16xf32>
      %c2 = tile.dot %a, %b, %c : (tensor<16x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32>
      tile.yield %c2 : tensor<16x16xf32>
    }
    ```
    """

    name = "tile.for"

    lb = prop_def(IntegerAttr[I64])
    ub = prop_def(IntegerAttr[I64])
    step = prop_def(IntegerAttr[I64])
    kind = prop_def(LoopKindAttr)
    iter_args = var_operand_def()
    res = var_result_def()
    body = region_def("single_block")

    traits = traits_def(RecursiveMemoryEffect())

    def __init__(
        self,
        lb: int,
        ub: int,
        step: int,
        kind: LoopKind | str,
        iter_args: Sequence[SSAValue | Operation],
        body: Region | Block,
    ):
        if isinstance(body, Block):
            body = Region(body)
        super().__init__(
            operands=[iter_args],
            result_types=[[SSAValue.get(a).type for a in iter_args]],
            regions=[body],
            properties={
                "lb": _i64(lb),
                "ub": _i64(ub),
                "step": _i64(step),
                "kind": LoopKindAttr(LoopKind(kind)),
            },
        )

    @property
    def trip_count(self) -> int:
        lb, ub, step = self.lb.value.data, self.ub.value.data, self.step.value.data
        return max(0, -(-(ub - lb) // step))

    @property
    def induction_var(self) -> SSAValue:
        return self.body.block.args[0]

    def verify_(self) -> None:
        if self.step.value.data <= 0:
            raise VerifyException(f"step must be positive, got {self.step.value.data}")
        block = self.body.block
        if not block.args or not isinstance(block.args[0].type, IndexType):
            raise VerifyException("the body's first argument must be the index (index)")
        carried = list(block.args[1:])
        if [a.type for a in carried] != list(self.iter_args.types):
            raise VerifyException(
                "the body's arguments after the index must match the iter_args types"
            )
        if list(self.res.types) != list(self.iter_args.types):
            raise VerifyException("results must match the iter_args types")
        last = block.last_op
        if not isinstance(last, YieldOp):
            raise VerifyException("tile.for body must end with tile.yield")
        if list(last.values.types) != list(self.iter_args.types):
            raise VerifyException(
                f"tile.yield types {[str(t) for t in last.values.types]} must match the "
                f"iter_args types {[str(t) for t in self.iter_args.types]}"
            )

    def print(self, printer: Printer) -> None:
        index, *carried = self.body.block.args
        printer.print_string(" ")
        printer.print_ssa_value(index)
        printer.print_string(
            f" = {self.lb.value.data} to {self.ub.value.data} step {self.step.value.data}"
        )
        if carried:
            printer.print_string(" iter_args(")

            def assign(pair: tuple[SSAValue, SSAValue]) -> None:
                printer.print_ssa_value(pair[0])
                printer.print_string(" = ")
                printer.print_ssa_value(pair[1])

            printer.print_list(zip(carried, self.iter_args, strict=True), assign)
            printer.print_string(") -> (")
            printer.print_list(self.iter_args.types, printer.print_attribute)
            printer.print_string(")")
        printer.print_string(f" {self.kind.data} ")
        printer.print_region(self.body, print_entry_block_args=False)
        printer.print_op_attributes(self.attributes)

    @classmethod
    def parse(cls, parser: Parser) -> ForOp:
        index = parser.parse_argument(expect_type=False)
        parser.parse_punctuation("=")
        lb = parser.parse_integer()
        parser.parse_keyword("to")
        ub = parser.parse_integer()
        parser.parse_keyword("step")
        step = parser.parse_integer()
        carried: list[Parser.UnresolvedArgument] = []
        inits: list[UnresolvedOperand] = []
        types: list[Attribute] = []
        pos = parser.pos
        if parser.parse_optional_keyword("iter_args"):

            def parse_assign() -> None:
                carried.append(parser.parse_argument(expect_type=False))
                parser.parse_punctuation("=")
                inits.append(parser.parse_unresolved_operand())

            parser.parse_comma_separated_list(Parser.Delimiter.PAREN, parse_assign)
            parser.parse_punctuation("->")
            types = parser.parse_comma_separated_list(
                Parser.Delimiter.PAREN, parser.parse_type
            )
            if len(types) != len(inits):
                parser.raise_error(
                    f"expected {len(inits)} iter_args types, got {len(types)}", pos
                )
        init_values = parser.resolve_operands(inits, types, pos)
        kind = parser.parse_str_enum(LoopKind)
        args = [index.resolve(IndexType())]
        args += [c.resolve(t) for c, t in zip(carried, types, strict=True)]
        body = parser.parse_region(args)
        attrs = parser.parse_optional_attr_dict()
        op = cls(lb, ub, step, kind, init_values, body)
        op.attributes |= attrs
        return op


def free_values(op: Operation) -> list[SSAValue]:
    """
    The values `op` and the ops in its regions read that are defined outside `op` (its
    operands, and what its bodies capture), in order of first use.
    """
    inside = {id(o) for o in op.walk()}
    seen: dict[SSAValue, None] = {}
    for o in op.walk():
        for v in o.operands:
            if isinstance(v, BlockArgument):
                parent = v.owner.parent_op()
                if parent is not None and id(parent) in inside:
                    continue
            elif id(v.owner) in inside:
                continue
            seen.setdefault(v, None)
    return list(seen)
