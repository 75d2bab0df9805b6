"""
The `loop` dialect: plmr's loop-scalar level (the Neptune level).

A `loop.nest` computes one or more tensors. It has static extents (every index starts at
0), one iterator kind per dimension (`parallel` or `reduction`) and, when some dimension
is a reduction, one initial value per result. Its single-block region receives the loop
indices, then the current accumulators; the body reads tensor elements with `loop.read`
(indices are any `index` values, so `%oh * 2 + %kh` for a convolution is arith on the
indices), computes scalars with `arith` and `math`, and ends with `loop.yield`:

- without reduction dimensions, the yielded values are the elements of the results;
- with reduction dimensions, the yielded values are the next accumulators; the
  reduction dimensions run in lexicographic order, and each result holds the final
  accumulators.

A result's shape is the extents of the parallel dimensions (in order) followed by the
shape of the yielded value: a body may yield a tensor (computed by a nested `loop.nest`),
which is how a fused nest carries a row of an output as one accumulator (FlashAttention's
`acc`). A nest with no parallel dimension that yields a scalar has a scalar (or rank-0
tensor) result. Nests nest: the body of one may hold others, which read the values of
the enclosing bodies.

The reference semantics (vectorised with numpy) lives in `plmr.runtime.loop_ops`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from xdsl.builder import ImplicitBuilder
from xdsl.dialects.builtin import (
    I64,
    ArrayAttr,
    DenseArrayBase,
    Float64Type,
    FloatAttr,
    IndexType,
    TensorType,
    i64,
)
from xdsl.dialects.utils import EnumAttribute
from xdsl.ir import (
    Attribute,
    Block,
    BlockArgument,
    Dialect,
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
    operand_def,
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
from xdsl.utils.hints import isa
from xdsl.utils.str_enum import StrEnum

from plmr.dialects.float_text import float_literal, parse_float_literal
from plmr.dialects.graph import fmt_shape

REMARK_ATTR = "loop.remark"
"""Attribute on a nest holding a message for the user (e.g. why it was not fused)."""


class IteratorKind(StrEnum):
    """Whether a dimension of a `loop.nest` is independent or accumulates."""

    PARALLEL = "parallel"
    REDUCTION = "reduction"


@irdl_attr_definition
class IteratorKindAttr(EnumAttribute[IteratorKind], SpacedOpaqueSyntaxAttribute):
    """`parallel` or `reduction`."""

    name = "loop.iterator"


def value_shape(t: Attribute) -> tuple[int, ...]:
    """The shape of a body value: `()` for a scalar, the tensor shape for a tensor."""
    if isa(t, TensorType[Attribute]):
        return t.get_shape()
    return ()


def value_element(t: Attribute) -> Attribute:
    """The element type of a body value (itself for a scalar)."""
    if isa(t, TensorType[Attribute]):
        return t.element_type
    return t


def nest_result_type(
    parallel_extents: Sequence[int], yielded: Attribute, scalar_ok: bool = True
) -> Attribute:
    """The result type of a nest whose body yields `yielded` at every parallel point."""
    shape = (*parallel_extents, *value_shape(yielded))
    elt = value_element(yielded)
    if not shape and scalar_ok:
        return elt
    return TensorType(elt, shape)


def _iterators(kinds: Sequence[IteratorKind | str]) -> ArrayAttr[IteratorKindAttr]:
    return ArrayAttr([IteratorKindAttr(IteratorKind(k)) for k in kinds])


@irdl_op_definition
class NestOp(IRDLOperation):
    """
    A loop nest with static extents computing one tensor per yielded value.

    ```mlir
    %m = loop.nest (%i, %j) to (4, 8) [parallel, reduction] init(%acc = %lo : f32) -> tensor<4xf32> {
      %x = loop.read %s[%i, %j] : tensor<4x8xf32>
      %y = arith.maximumf %acc, %x : f32
      loop.yield %y : f32
    }
    ```
    """

    name = "loop.nest"

    bounds = prop_def(DenseArrayBase.constr(I64))
    iterators = prop_def(ArrayAttr[IteratorKindAttr])
    inits = var_operand_def()
    res = var_result_def()
    body = region_def("single_block")

    traits = traits_def(Pure(), RecursiveMemoryEffect())

    def __init__(
        self,
        extents: Sequence[int],
        kinds: Sequence[IteratorKind | str],
        inits: Sequence[SSAValue | Operation],
        result_types: Sequence[Attribute],
        body: Region | Block,
        attributes: dict[str, Attribute] | None = None,
    ):
        if isinstance(body, Block):
            body = Region(body)
        super().__init__(
            operands=[inits],
            result_types=[result_types],
            regions=[body],
            properties={
                "bounds": DenseArrayBase.from_list(i64, list(extents)),
                "iterators": _iterators(kinds),
            },
            attributes=attributes,
        )

    # -- accessors ------------------------------------------------------------------

    @property
    def extents(self) -> tuple[int, ...]:
        return self.bounds.get_values()

    @property
    def kinds(self) -> tuple[IteratorKind, ...]:
        return tuple(k.data for k in self.iterators.data)

    @property
    def rank(self) -> int:
        return len(self.bounds.get_values())

    @property
    def dims(self) -> tuple[BlockArgument, ...]:
        """The loop indices (the first block arguments)."""
        return tuple(self.body.block.args[: self.rank])

    @property
    def accumulators(self) -> tuple[BlockArgument, ...]:
        """The current accumulators (the block arguments after the indices)."""
        return tuple(self.body.block.args[self.rank :])

    @property
    def parallel_dims(self) -> tuple[int, ...]:
        return tuple(i for i, k in enumerate(self.kinds) if k == IteratorKind.PARALLEL)

    @property
    def reduction_dims(self) -> tuple[int, ...]:
        return tuple(i for i, k in enumerate(self.kinds) if k == IteratorKind.REDUCTION)

    @property
    def is_reduction(self) -> bool:
        return bool(self.reduction_dims)

    @property
    def parallel_extents(self) -> tuple[int, ...]:
        ext = self.extents
        return tuple(ext[i] for i in self.parallel_dims)

    @property
    def yield_op(self) -> YieldOp:
        last = self.body.block.last_op
        if not isinstance(last, YieldOp):
            raise VerifyException("loop.nest body must end with loop.yield")
        return last

    # -- verification ---------------------------------------------------------------

    def verify_(self) -> None:
        extents = self.extents
        if len(self.iterators.data) != len(extents):
            raise VerifyException(
                f"loop.nest has {len(extents)} extents but {len(self.iterators.data)} "
                "iterator kinds"
            )
        if not extents:
            raise VerifyException("loop.nest needs at least one dimension")
        for i, e in enumerate(extents):
            if e <= 0:
                raise VerifyException(f"extent {e} of dimension {i} must be positive")
        block = self.body.block
        n = len(extents)
        if len(block.args) < n or any(
            not isinstance(a.type, IndexType) for a in block.args[:n]
        ):
            raise VerifyException(
                f"the body must start with {n} index arguments (one per dimension)"
            )
        acc_types = [a.type for a in block.args[n:]]
        if self.is_reduction:
            if len(self.inits) != len(self.res):
                raise VerifyException(
                    f"a reduction nest needs one initial value per result: "
                    f"{len(self.res)} results, {len(self.inits)} initial values"
                )
            if acc_types != list(self.inits.types):
                raise VerifyException(
                    "the body's accumulator arguments must have the types of the "
                    "initial values"
                )
        elif self.inits or acc_types:
            raise VerifyException(
                "a nest without reduction dimensions takes no initial values"
            )
        last = block.last_op
        if not isinstance(last, YieldOp):
            raise VerifyException("loop.nest body must end with loop.yield")
        yielded = list(last.values.types)
        if len(yielded) != len(self.res):
            raise VerifyException(
                f"loop.yield yields {len(yielded)} values for {len(self.res)} results"
            )
        if self.is_reduction and yielded != acc_types:
            raise VerifyException(
                f"loop.yield types {[str(t) for t in yielded]} must be the accumulator "
                f"types {[str(t) for t in acc_types]}"
            )
        par = self.parallel_extents
        for i, (y, r) in enumerate(zip(yielded, self.res.types, strict=True)):
            if isa(y, TensorType[Attribute]) and any(d < 0 for d in y.get_shape()):
                raise VerifyException(f"yielded value {i} must have a static shape")
            want = nest_result_type(par, y, scalar_ok=False)
            allowed = [want]
            if not (*par, *value_shape(y)):
                allowed.append(value_element(y))
            if r not in allowed:
                raise VerifyException(
                    f"result {i} has type {r}, expected {want} (the parallel extents "
                    f"{fmt_shape(par)} followed by the shape of the yielded {y})"
                )

    # -- syntax ---------------------------------------------------------------------

    def print(self, printer: Printer) -> None:
        printer.print_string(" (")
        printer.print_list(self.dims, printer.print_ssa_value)
        printer.print_string(") to (")
        printer.print_string(", ".join(str(e) for e in self.extents))
        printer.print_string(") [")
        printer.print_string(", ".join(k.value for k in self.kinds))
        printer.print_string("]")
        if self.inits:
            printer.print_string(" init(")

            def assign(pair: tuple[SSAValue, SSAValue]) -> None:
                printer.print_ssa_value(pair[0])
                printer.print_string(" = ")
                printer.print_ssa_value(pair[1])
                printer.print_string(" : ")
                printer.print_attribute(pair[1].type)

            printer.print_list(zip(self.accumulators, self.inits, strict=True), assign)
            printer.print_string(")")
        printer.print_string(" -> ")
        if len(self.res) == 1:
            printer.print_attribute(self.res.types[0])
        else:
            printer.print_string("(")
            printer.print_list(self.res.types, printer.print_attribute)
            printer.print_string(")")
        printer.print_string(" ")
        printer.print_region(self.body, print_entry_block_args=False)
        printer.print_op_attributes(self.attributes)

    @classmethod
    def parse(cls, parser: Parser) -> NestOp:
        dims = parser.parse_comma_separated_list(
            Parser.Delimiter.PAREN, lambda: parser.parse_argument(expect_type=False)
        )
        parser.parse_keyword("to")
        pos = parser.pos
        extents = parser.parse_comma_separated_list(
            Parser.Delimiter.PAREN, parser.parse_integer
        )
        if len(extents) != len(dims):
            parser.raise_error(
                f"expected {len(dims)} extents (one per index), got {len(extents)}", pos
            )
        pos = parser.pos
        kinds = parser.parse_comma_separated_list(
            Parser.Delimiter.SQUARE, lambda: parser.parse_str_enum(IteratorKind)
        )
        if len(kinds) != len(dims):
            parser.raise_error(
                f"expected {len(dims)} iterator kinds (one per index), got {len(kinds)}",
                pos,
            )
        accs: list[Parser.UnresolvedArgument] = []
        inits: list[UnresolvedOperand] = []
        init_types: list[Attribute] = []
        if parser.parse_optional_keyword("init"):

            def parse_assign() -> None:
                accs.append(parser.parse_argument(expect_type=False))
                parser.parse_punctuation("=")
                inits.append(parser.parse_unresolved_operand())
                parser.parse_punctuation(":")
                init_types.append(parser.parse_type())

            parser.parse_comma_separated_list(Parser.Delimiter.PAREN, parse_assign)
        pos = parser.pos
        init_values = parser.resolve_operands(inits, init_types, pos)
        parser.parse_punctuation("->")
        if parser.parse_optional_punctuation("(") is not None:
            result_types = parser.parse_comma_separated_list(
                Parser.Delimiter.NONE, parser.parse_type
            )
            parser.parse_punctuation(")")
        else:
            result_types = [parser.parse_type()]
        args = [d.resolve(IndexType()) for d in dims]
        args += [a.resolve(t) for a, t in zip(accs, init_types, strict=True)]
        body = parser.parse_region(args)
        attrs = parser.parse_optional_attr_dict()
        op = cls(extents, kinds, init_values, result_types, body)
        op.attributes |= attrs
        return op


@irdl_op_definition
class ReadOp(IRDLOperation):
    """
    Reads one element of a tensor. An index outside the tensor is an error, unless a
    `padding` value is given: then such a read yields the padding (zero padding of a
    convolution, the lowest value for max pooling).

    ```mlir
    %x = loop.read %t[%i, %j] : tensor<4x8xf32>
    %y = loop.read %img[%n, %c, %h, %w] padding 0.000000e+00 : tensor<1x3x8x8xf32>
    ```
    """

    name = "loop.read"

    source = operand_def(TensorType)
    indices = var_operand_def(IndexType)
    padding = opt_prop_def(FloatAttr[Float64Type])
    result = result_def()

    traits = traits_def(Pure())

    def __init__(
        self,
        source: SSAValue | Operation,
        indices: Sequence[SSAValue | Operation],
        padding: float | None = None,
    ):
        src = SSAValue.get(source)
        if not isa(src.type, TensorType[Attribute]):
            raise VerifyException(f"loop.read needs a tensor, got {src.type}")
        props: dict[str, Attribute] = {}
        if padding is not None:
            props["padding"] = FloatAttr(float(padding), Float64Type())
        super().__init__(
            operands=[src, indices],
            result_types=[src.type.element_type],
            properties=props,
        )

    def verify_(self) -> None:
        t = self.source.type
        if not isa(t, TensorType[Attribute]):
            raise VerifyException(f"loop.read needs a tensor, got {t}")
        shape = t.get_shape()
        if any(d < 0 for d in shape):
            raise VerifyException(f"loop.read needs a static shape, got {t}")
        if len(self.indices) != len(shape):
            raise VerifyException(
                f"loop.read of a rank-{len(shape)} tensor needs {len(shape)} indices, "
                f"got {len(self.indices)}"
            )
        if self.result.type != t.element_type:
            raise VerifyException(
                f"result type {self.result.type} must be the element type "
                f"{t.element_type} of the tensor"
            )

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.source)
        printer.print_string("[")
        printer.print_list(self.indices, printer.print_ssa_value)
        printer.print_string("]")
        if self.padding is not None:
            printer.print_string(" padding ")
            printer.print_string(float_literal(self.padding.value.data, Float64Type()))
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.source.type)

    @classmethod
    def parse(cls, parser: Parser) -> ReadOp:
        source = parser.parse_unresolved_operand()
        indices = parser.parse_comma_separated_list(
            Parser.Delimiter.SQUARE, parser.parse_unresolved_operand
        )
        padding: float | None = None
        if parser.parse_optional_keyword("padding"):
            padding = parse_float_literal(parser, Float64Type())
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        pos = parser.pos
        source_type = parser.parse_type()
        (src,) = parser.resolve_operands([source], [source_type], pos)
        index_values = parser.resolve_operands(indices, [IndexType()] * len(indices), pos)
        if not isa(source_type, TensorType[Attribute]):
            parser.raise_error(f"loop.read needs a tensor type, got {source_type}", pos)
        op = cls(src, index_values, padding)
        op.attributes |= attrs
        return op


@irdl_op_definition
class YieldOp(IRDLOperation):
    """
    Ends a `loop.nest` body: the elements of its results, or its next accumulators.

    ```mlir
    loop.yield %m, %l : f32, f32
    ```
    """

    name = "loop.yield"

    values = var_operand_def()

    traits = lazy_traits_def(lambda: (IsTerminator(), HasParent(NestOp), Pure()))

    assembly_format = "($values^ `:` type($values))? attr-dict"

    def __init__(self, *values: SSAValue | Operation):
        super().__init__(operands=[values])


# ---------------------------------------------------------------------------------------
# Building
# ---------------------------------------------------------------------------------------


BodyFn = Callable[[Sequence[BlockArgument], Sequence[BlockArgument]], Sequence[SSAValue]]
"""Builds a nest body: (indices, accumulators) -> yielded values (ops go to the body)."""


def build_nest(
    extents: Sequence[int],
    kinds: Sequence[IteratorKind | str],
    inits: Sequence[SSAValue],
    body: BodyFn,
    *,
    scalar_results: bool = True,
    attributes: dict[str, Attribute] | None = None,
) -> NestOp:
    """
    Builds a `loop.nest`: `body` is called inside the new block (ops it creates are
    appended) and returns the values to yield. Result types follow from the yielded
    types; with `scalar_results=False`, a result without any dimension is a rank-0
    tensor rather than a scalar.
    """
    arg_types: list[Attribute] = [IndexType()] * len(extents)
    arg_types += [v.type for v in inits]
    block = Block(arg_types=arg_types)
    n = len(extents)
    for i, arg in enumerate(block.args):
        arg.name_hint = f"i{i}" if i < n else ("acc" if len(inits) == 1 else f"acc{i - n}")
    with ImplicitBuilder(block):
        yielded = list(body(block.args[:n], block.args[n:]))
        YieldOp(*yielded)
    par = [e for e, k in zip(extents, kinds, strict=True) if k == IteratorKind.PARALLEL]
    result_types = [nest_result_type(par, v.type, scalar_results) for v in yielded]
    return NestOp(extents, kinds, inits, result_types, block, attributes)


def nelements(t: Attribute) -> int:
    """The number of elements of a body value (1 for a scalar)."""
    return math.prod(value_shape(t))


Loop = Dialect("loop", [NestOp, ReadOp, YieldOp], [IteratorKindAttr])
