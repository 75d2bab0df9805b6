"""
The `tile` dialect: what one core runs (Neptune's tile IR).

Values are static-shape builtin `tensor`s. A tensor that a function receives lives in
global memory (the host, or the rest of the wafer); `tile.load` copies a block of it into
the core's SRAM and `tile.store` writes a block back. Everything else computes on blocks
in SRAM: `tile.dot`, `tile.reduce`, elementwise `tile.map` (a named kind, or an
`arith`/`math` body on scalars), `tile.broadcast`, `tile.cast`, `tile.transpose`,
`tile.reshape` and `tile.fill`. `tile.for` is a counted loop with static bounds whose
iteration arguments carry blocks from one iteration to the next; it is marked `parallel`
(iterations independent, e.g. one output block each) or `reduction` (iterations combine
into the carried values, e.g. a K loop of a matmul or a KV loop of attention).

`tile.lookup` runs on the host, not on a core: the rows of a host tensor selected by host
ids (a token embedding), of which only the rows reach the wafer.

Every op has a `cost()` (flops and SRAM bytes read and written), which the mesh runtime
turns into cycles with the device's SIMD widths.
"""

from __future__ import annotations

import math
from abc import ABC
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, cast

from xdsl.dialects.builtin import (
    I64,
    AnyFloat,
    DenseArrayBase,
    Float64Type,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    StringAttr,
    TensorType,
    UnitAttr,
    i64,
)
from xdsl.dialects.utils import EnumAttribute
from xdsl.ir import (
    Attribute,
    Block,
    Dialect,
    Operation,
    Region,
    SpacedOpaqueSyntaxAttribute,
    SSAValue,
)
from xdsl.irdl import (
    IRDLOperation,
    VarConstraint,
    base,
    irdl_attr_definition,
    irdl_op_definition,
    lazy_traits_def,
    operand_def,
    opt_operand_def,
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

from plmr.dialects.float_text import parse_float_literal
from plmr.dialects.graph import (
    broadcast_shapes,
    element_type,
    fmt_shape,
    normalize_axis,
    static_shape,
    tensor_type,
    transpose_shape,
)

# ---------------------------------------------------------------------------------------
# Costs
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OpCost:
    """Work of one op on one core: arithmetic operations and SRAM traffic."""

    flops: int = 0
    """Arithmetic operations (a fused multiply-add counts as one)."""
    fmacs: bool = False
    """True when `flops` are multiply-accumulates (they use the FMAC SIMD width)."""
    bytes_read: int = 0
    bytes_written: int = 0

    def __add__(self, other: OpCost) -> OpCost:
        return OpCost(
            self.flops + other.flops,
            self.fmacs or other.fmacs,
            self.bytes_read + other.bytes_read,
            self.bytes_written + other.bytes_written,
        )


def nbytes(t: Attribute) -> int:
    """Bytes of a static-shape tensor (or a scalar type)."""
    if not isinstance(t, TensorType):
        return _elt_bytes(t)
    tt = tensor_type(cast(Attribute, t), "value")
    return math.prod(tt.get_shape()) * _elt_bytes(tt.element_type)


def _elt_bytes(elt: Attribute) -> int:
    if isinstance(elt, AnyFloat):
        return max(1, elt.bitwidth // 8)
    if isinstance(elt, IntegerType):
        width = cast(IntegerType, elt).width.data
        return max(1, width // 8)
    if isinstance(elt, IndexType):
        return 8
    return 4


def nelems(value: SSAValue) -> int:
    return math.prod(static_shape(value, "value"))


# ---------------------------------------------------------------------------------------
# Enums
# ---------------------------------------------------------------------------------------


class LoopKind(StrEnum):
    """Whether the iterations of a `tile.for` are independent or combine."""

    PARALLEL = "parallel"
    REDUCTION = "reduction"


@irdl_attr_definition
class LoopKindAttr(EnumAttribute[LoopKind], SpacedOpaqueSyntaxAttribute):
    """`parallel` or `reduction`."""

    name = "tile.loop_kind"


class ReduceKind(StrEnum):
    """The combiner of a `tile.reduce`."""

    SUM = "sum"
    MAX = "max"
    MIN = "min"


@irdl_attr_definition
class ReduceKindAttr(EnumAttribute[ReduceKind], SpacedOpaqueSyntaxAttribute):
    """`sum`, `max` or `min`."""

    name = "tile.reduce_kind"


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

TRANSCENDENTAL_COST = 8
"""Flops charged per element for exp/log/erf/tanh/sigmoid-like functions."""

_CHEAP_KINDS = {"neg", "abs", "relu", "add", "sub", "mul", "max", "min"}

_CHEAP_MATH = {"math.absf", "math.absi", "math.floor", "math.ceil"}
"""`math` ops of a map body that cost one flop per element, like `arith`."""


def body_op_cost(name: str) -> int:
    """Flops per element of one op of a `tile.map` body."""
    if name.startswith("arith.") or name in _CHEAP_MATH:
        return 1
    return TRANSCENDENTAL_COST


def map_kind_cost(kind: str) -> int:
    return 1 if kind in _CHEAP_KINDS else TRANSCENDENTAL_COST


# ---------------------------------------------------------------------------------------
# Ops
# ---------------------------------------------------------------------------------------


class TileOp(IRDLOperation, ABC):
    """Base of the `tile` ops with a cost."""

    def cost(self) -> OpCost:
        """The work of this op on one core (zero for pure data movement by default)."""
        return OpCost()


def _i64(value: int) -> IntegerAttr[IntegerType]:
    return IntegerAttr(value, i64)


def _ints(attr: DenseArrayBase[IntegerType]) -> tuple[int, ...]:
    return attr.get_values()


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

    def cost(self) -> OpCost:
        return OpCost(bytes_written=nbytes(self.result.type))


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
    value (the border of a padded tensor).

    ```mlir
    %b = tile.load %a[%i, %k] : tensor<64x64xf32> -> tensor<16x16xf32>
    %p = tile.load %a[%i, %k] padding 0.000000e+00 : tensor<64x64xf32> -> tensor<16x16xf32>
    ```
    """

    name = "tile.load"

    source = operand_def(TensorType)
    offsets = var_operand_def(IndexType)
    padding = opt_prop_def(FloatAttr[Float64Type])
    result = result_def(TensorType)

    traits = traits_def(Pure())

    assembly_format = (
        "$source `[` $offsets `]` (`padding` $padding^)? attr-dict `:` type($source) "
        "`->` type($result)"
    )

    def __init__(
        self,
        source: SSAValue | Operation,
        offsets: Sequence[SSAValue | Operation],
        block_shape: Sequence[int],
        padding: float | None = None,
    ):
        src = SSAValue.get(source)
        props: dict[str, Attribute] = {}
        if padding is not None:
            props["padding"] = FloatAttr(float(padding), Float64Type())
        super().__init__(
            operands=[src, offsets],
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
        # A padded block may be larger than the tensor (a whole padded dimension).
        source = src.get_shape()
        if self.padding is not None and len(source) == len(blk.get_shape()):
            source = tuple(max(s, b) for s, b in zip(source, blk.get_shape(), strict=True))
        _check_offsets(source, blk.get_shape(), len(self.offsets))

    def cost(self) -> OpCost:
        return OpCost(bytes_written=nbytes(self.result.type))


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

    def cost(self) -> OpCost:
        return OpCost(bytes_read=nbytes(self.block.type))


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

    def cost(self) -> OpCost:
        lhs, out = static_shape(self.lhs, "lhs"), static_shape(self.result, "result")
        k = lhs[-2] if self.transpose_a is not None else lhs[-1]
        macs = math.prod(out) * k
        read = nbytes(self.lhs.type) + nbytes(self.rhs.type)
        if self.acc is not None:
            read += nbytes(self.acc.type)
        return OpCost(
            flops=macs, fmacs=True, bytes_read=read, bytes_written=nbytes(self.result.type)
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

    def cost(self) -> OpCost:
        return OpCost(
            flops=nelems(self.input),
            bytes_read=nbytes(self.input.type),
            bytes_written=nbytes(self.result.type),
        )


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

    def cost(self) -> OpCost:
        n = nelems(self.result)
        if self.kind_name is not None:
            per = map_kind_cost(self.kind_name)
        else:
            per = sum(
                body_op_cost(op.name)
                for op in self.body.block.ops
                if not isinstance(op, YieldOp) and op.name != "arith.constant"
            )
        read = sum(nbytes(v.type) for v in self.inputs)
        return OpCost(
            flops=n * max(per, 1), bytes_read=read, bytes_written=nbytes(self.result.type)
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

    def cost(self) -> OpCost:
        return OpCost(
            bytes_read=nbytes(self.input.type), bytes_written=nbytes(self.result.type)
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

    def cost(self) -> OpCost:
        return OpCost(
            flops=nelems(self.input),
            bytes_read=nbytes(self.input.type),
            bytes_written=nbytes(self.result.type),
        )


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

    def cost(self) -> OpCost:
        return OpCost(
            bytes_read=nbytes(self.input.type), bytes_written=nbytes(self.result.type)
        )


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

    def cost(self) -> OpCost:
        return OpCost(
            flops=nelems(self.result),
            bytes_read=nbytes(self.on_true.type),
            bytes_written=nbytes(self.result.type),
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

    def cost(self) -> OpCost:
        # Host work: the selected rows are copied once, nothing runs on a PE.
        return OpCost(flops=0, bytes_read=0, bytes_written=0)


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


Tile = Dialect(
    "tile",
    [
        FillOp,
        LoadOp,
        StoreOp,
        DotOp,
        ReduceOp,
        MapOp,
        YieldOp,
        BroadcastOp,
        CastOp,
        TransposeOp,
        SelectOp,
        ReshapeOp,
        ForOp,
        LookupOp,
    ],
    [LoopKindAttr, ReduceKindAttr],
)
