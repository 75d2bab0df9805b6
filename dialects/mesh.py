"""
The `mesh` dialect: programs for a 2D mesh of processing elements (PEs).

A `mesh.program` names its device (`#mesh.device<"wse2">`) and a grid of `[rows, cols]`
PEs. Host tensors enter with `mesh.scatter`, which places them under a layout
(`#mesh.layout<[y, x]>`: tensor dim 0 is split over the mesh's y axis, dim 1 over x;
`-` keeps a dim whole; axes no dim uses hold replicas; `band x W` puts two dims on one
axis, the first over bands of W PEs and the second within each band), and leave with
`mesh.gather`.
`mesh.spmd` is the per-core program: its block receives the core's coordinates and its
local blocks, computes with `tile` ops, and communicates with collectives —
`mesh.shift` (on a linear, torus or interleaved ring), `mesh.broadcast`, `mesh.reduce`,
`mesh.allreduce` (K-tree, pipeline or ring; the last three also within segments of
consecutive PEs) — or point to point with `mesh.send` /
`mesh.recv` on a color. `mesh-route` lowers collectives to colors and explicit route
rules (`mesh.route`): which routers forward which color from which port to which ports.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import (
    I64,
    ArrayAttr,
    DenseArrayBase,
    Float64Type,
    FloatAttr,
    FunctionType,
    IndexType,
    IntAttr,
    IntegerAttr,
    IntegerType,
    StringAttr,
    SymbolNameConstraint,
    TensorType,
    i1,
    i64,
)
from xdsl.dialects.utils import EnumAttribute
from xdsl.ir import (
    Attribute,
    Block,
    Dialect,
    Operation,
    ParametrizedAttribute,
    Region,
    SpacedOpaqueSyntaxAttribute,
    SSAValue,
    TypeAttribute,
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
from xdsl.parser import AttrParser, Parser
from xdsl.printer import Printer
from xdsl.traits import (
    HasAncestor,
    HasParent,
    IsolatedFromAbove,
    IsTerminator,
    Pure,
    SymbolOpInterface,
)
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum

from plmr.dialects.graph import tensor_type

# ---------------------------------------------------------------------------------------
# Enums
# ---------------------------------------------------------------------------------------


class Axis(StrEnum):
    """A mesh axis: `x` runs along a row (columns), `y` along a column (rows)."""

    X = "x"
    Y = "y"


@irdl_attr_definition
class AxisAttr(EnumAttribute[Axis], SpacedOpaqueSyntaxAttribute):
    """`x` or `y`."""

    name = "mesh.axis"


class Ring(StrEnum):
    """How a cyclic shift embeds its logical ring in a line of PEs."""

    LINEAR = "linear"
    """No wrap-around: the last PE's block falls off, the first receives zeros."""
    TORUS = "torus"
    """Neighbour to neighbour, and the last PE sends back to the first across the line."""
    INTERLEAVED = "interleaved"
    """WaferLLM's interleaving: every logical neighbour is at most 2 hops away."""


@irdl_attr_definition
class RingAttr(EnumAttribute[Ring], SpacedOpaqueSyntaxAttribute):
    """`linear`, `torus` or `interleaved`."""

    name = "mesh.ring"


class CombineKind(StrEnum):
    """The combiner of a reduction."""

    SUM = "sum"
    MAX = "max"
    MIN = "min"


@irdl_attr_definition
class CombineKindAttr(EnumAttribute[CombineKind], SpacedOpaqueSyntaxAttribute):
    """`sum`, `max` or `min`."""

    name = "mesh.combine"


class Algorithm(StrEnum):
    """The algorithm of a reduction or allreduce along one axis."""

    KTREE = "ktree"
    """WaferLLM's K-tree: K phases of grouped chain reductions, then a multicast."""
    PIPELINE = "pipeline"
    """A chain to the root, then a chain back (the Cerebras GEMV default)."""
    RING = "ring"
    """Reduce-scatter then allgather around a ring (the GPU-pod default)."""


@irdl_attr_definition
class AlgorithmAttr(EnumAttribute[Algorithm], SpacedOpaqueSyntaxAttribute):
    """`ktree`, `pipeline` or `ring`."""

    name = "mesh.algorithm"


class Port(StrEnum):
    """A router port."""

    RAMP = "ramp"
    NORTH = "north"
    SOUTH = "south"
    EAST = "east"
    WEST = "west"


@irdl_attr_definition
class PortAttr(EnumAttribute[Port], SpacedOpaqueSyntaxAttribute):
    """`ramp`, `north`, `south`, `east` or `west`."""

    name = "mesh.port"


# ---------------------------------------------------------------------------------------
# Attributes and types
# ---------------------------------------------------------------------------------------


@irdl_attr_definition
class DeviceAttr(ParametrizedAttribute):
    """
    The target device: a preset name with optional parameter overrides, as accepted by
    `--device` (e.g. `"wse2"`, `"wse3:colors=16"`).
    """

    name = "mesh.device"

    spec: StringAttr

    def __init__(self, spec: str | StringAttr):
        super().__init__(StringAttr(spec) if isinstance(spec, str) else spec)

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            return (StringAttr(parser.parse_str_literal()),)

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_string_literal(self.spec.data)


LAYOUT_MODES = ("blocked", "interleaved")
SKEW_RINGS = ("torus", "interleaved")


@irdl_attr_definition
class LayoutAttr(ParametrizedAttribute):
    """
    How a tensor is placed on the grid: for each tensor dimension, the mesh axis it is
    split over (`x`, `y`) or `-` (kept whole). Axes no dimension uses hold replicas.
    `blocked` gives each PE a contiguous block (the last may be padded); `interleaved`
    deals elements out round-robin.

    `skew x <ring>` (Cannon's alignment, done at placement): the block index of the dim
    split over x is rotated by the PE's position on the y ring — PE (i, j) holds block
    `ord[(L(j) + L(i)) mod n]`, where `L` is a PE's position on the logical ring
    (`torus` or `interleaved`) and `ord` its inverse; `skew y` likewise for the dim split
    over y. With `chunks C` (non-square grids, C = lcm(rows, cols)) the skewed dim is cut
    into C chunks, C/n per PE, and PE (i, j)'s chunk u is chunk
    `(L(j)·C/nx + u + L(i)·C/ny) mod C` for `skew x` (symmetrically for `skew y`).

    `band <axis> W` (bands of W PEs): the axis is cut into `B = n // W` bands of W
    consecutive PEs (the PEs past the last band hold padding). The first tensor dim on
    the axis is split over the bands (blocks of `ceil(d / B)`, band `j` holding block
    `j`); a second dim on the same axis is blocked within each band (blocks of
    `ceil(d / W)`, the PE at position `i` of its band holding block `i`); with one dim,
    every PE of a band holds its band's block. A head and its head dimension on one
    axis: `[x, -, -, x], band x 52` gives each of 8 heads 52 PEs of a 420-PE axis.

    `#mesh.layout<[y, x]>`, `#mesh.layout<[-, y]>`, `#mesh.layout<[y, x], skew x interleaved>`,
    `#mesh.layout<[x, y, x], band x 52>`
    """

    name = "mesh.layout"

    dims: ArrayAttr[StringAttr]
    mode: StringAttr
    skew: StringAttr
    ring: StringAttr
    chunks: IntAttr
    band_axis: StringAttr
    band_width: IntAttr

    def __init__(
        self,
        dims: Sequence[str],
        mode: str = "blocked",
        skew: str = "",
        ring: str = "",
        chunks: int = 0,
        band: tuple[str, int] | None = None,
    ):
        super().__init__(
            ArrayAttr([StringAttr(d) for d in dims]),
            StringAttr(mode),
            StringAttr(skew),
            StringAttr(ring if skew else ""),
            IntAttr(chunks if skew else 0),
            StringAttr(band[0] if band else ""),
            IntAttr(band[1] if band else 0),
        )

    @property
    def band(self) -> tuple[str, int] | None:
        """The banded axis and its band width, if any."""
        if not self.band_axis.data:
            return None
        return self.band_axis.data, self.band_width.data

    def banded_dims(self) -> tuple[int, ...]:
        """The dims on the banded axis: (outer,) or (outer, inner); () without bands."""
        if not self.band_axis.data:
            return ()
        return tuple(i for i, d in enumerate(self.axes) if d == self.band_axis.data)

    @property
    def axes(self) -> tuple[str, ...]:
        return tuple(d.data for d in self.dims.data)

    def dim_of(self, axis: str) -> int | None:
        """The tensor dimension split over `axis`, if any."""
        for i, d in enumerate(self.axes):
            if d == axis:
                return i
        return None

    def verify(self) -> None:
        seen: set[str] = set()
        band = self.band_axis.data
        if band:
            self._verify_band(band)
        for d in self.axes:
            if d not in ("x", "y", "-"):
                raise VerifyException(f"layout entries must be x, y or -, got '{d}'")
            if d != "-" and d in seen and d != band:
                raise VerifyException(
                    f"layout uses mesh axis {d} twice (two dims share an axis only in "
                    f"bands: add 'band {d} <PEs per band>')"
                )
            seen.add(d)
        if self.mode.data not in LAYOUT_MODES:
            raise VerifyException(
                f"layout mode must be blocked or interleaved, got '{self.mode.data}'"
            )
        if not self.skew.data:
            return
        if self.skew.data not in ("x", "y"):
            raise VerifyException(f"skew must be x or y, got '{self.skew.data}'")
        if self.skew.data not in seen:
            raise VerifyException(
                f"skew {self.skew.data} needs a dim split over {self.skew.data}"
            )
        if self.mode.data != "blocked":
            raise VerifyException("skewed layouts must be blocked")
        if self.ring.data not in SKEW_RINGS:
            raise VerifyException(
                f"skew ring must be torus or interleaved, got '{self.ring.data}'"
            )
        if self.chunks.data < 0:
            raise VerifyException(f"chunks must be >= 0, got {self.chunks.data}")

    def _verify_band(self, band: str) -> None:
        if band not in ("x", "y"):
            raise VerifyException(f"band axis must be x or y, got '{band}'")
        on = self.axes.count(band)
        if not 1 <= on <= 2:
            raise VerifyException(
                f"band {band} needs one or two dims split over {band}, got {on}"
            )
        if self.band_width.data < 1:
            raise VerifyException(
                f"band width must be at least 1 PE, got {self.band_width.data}"
            )
        if self.mode.data != "blocked" or self.skew.data:
            raise VerifyException("banded layouts must be blocked and unskewed")

    def verify_grid(self, grid: Sequence[int]) -> None:
        """The layout on a `[rows, cols]` grid: a band fits its axis."""
        band = self.band
        if band is None:
            return
        n = axis_size(band[0], grid)
        if band[1] > n:
            raise VerifyException(
                f"bands of {band[1]} PEs do not fit the {n} PEs along {band[0]} "
                f"(band count x band width must be at most the axis size)"
            )

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        def entry() -> str:
            if parser.parse_optional_punctuation("-") is not None:
                return "-"
            return parser.parse_identifier()

        mode, skew, ring, chunks = "blocked", "", "", 0
        band_axis, band_width = "", 0
        with parser.in_angle_brackets():
            dims = parser.parse_comma_separated_list(parser.Delimiter.SQUARE, entry)
            while parser.parse_optional_punctuation(",") is not None:
                word = parser.parse_identifier()
                if word == "band":
                    band_axis = parser.parse_identifier()
                    band_width = parser.parse_integer(allow_negative=False)
                elif word == "skew":
                    skew = parser.parse_identifier()
                    ring = parser.parse_identifier()
                    if parser.parse_optional_keyword("chunks") is not None:
                        chunks = parser.parse_integer(allow_negative=False)
                else:
                    mode = word
        return (
            ArrayAttr([StringAttr(d) for d in dims]),
            StringAttr(mode),
            StringAttr(skew),
            StringAttr(ring),
            IntAttr(chunks),
            StringAttr(band_axis),
            IntAttr(band_width),
        )

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_string("[" + ", ".join(self.axes) + "]")
            if self.mode.data != "blocked":
                printer.print_string(f", {self.mode.data}")
            if self.skew.data:
                printer.print_string(f", skew {self.skew.data} {self.ring.data}")
                if self.chunks.data:
                    printer.print_string(f" chunks {self.chunks.data}")
            if self.band_axis.data:
                printer.print_string(f", band {self.band_axis.data} {self.band_width.data}")


@irdl_attr_definition
class DistType(ParametrizedAttribute, TypeAttribute):
    """
    A tensor distributed over the grid under a layout.

    `!mesh.dist<tensor<64x64xf32>, #mesh.layout<[y, x]>>`
    """

    name = "mesh.dist"

    tensor: TensorType[Attribute]
    layout: LayoutAttr

    def __init__(self, tensor: TensorType[Attribute], layout: LayoutAttr):
        super().__init__(tensor, layout)

    def verify(self) -> None:
        shape = tensor_type(self.tensor, "distributed tensor").get_shape()
        if len(self.layout.axes) != len(shape):
            raise VerifyException(
                f"layout {list(self.layout.axes)} has {len(self.layout.axes)} entries but "
                f"the tensor has rank {len(shape)}"
            )

    def block_shape(self, grid: Sequence[int]) -> tuple[int, ...]:
        """The shape of one PE's block on a `[rows, cols]` grid."""
        return block_shape(self.tensor.get_shape(), self.layout, grid)


def axis_size(axis: str, grid: Sequence[int]) -> int:
    """PEs along a mesh axis of a `[rows, cols]` grid."""
    return grid[0] if axis == "y" else grid[1]


def split_counts(layout: LayoutAttr, grid: Sequence[int]) -> tuple[int, ...]:
    """
    Per tensor dim, how many blocks the grid splits it into: 1 for a whole dim, the axis
    size for a split one; with bands, the band count for the outer dim on the banded
    axis and the band width for the inner one.
    """
    counts = [1 if a == "-" else axis_size(a, grid) for a in layout.axes]
    band = layout.band
    if band is not None:
        banded = layout.banded_dims()
        counts[banded[0]] = max(1, axis_size(band[0], grid) // band[1])
        if len(banded) > 1:
            counts[banded[1]] = band[1]
    return tuple(counts)


def block_shape(
    shape: Sequence[int], layout: LayoutAttr, grid: Sequence[int]
) -> tuple[int, ...]:
    """Per-PE block shape: each split dimension is divided (rounding up) by its blocks."""
    return tuple(-(-d // c) for d, c in zip(shape, split_counts(layout, grid), strict=True))


# ---------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------


def _i64(value: int) -> IntegerAttr[IntegerType]:
    return IntegerAttr(value, i64)


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


# ---------------------------------------------------------------------------------------
# Communication
# ---------------------------------------------------------------------------------------


class CommOp(IRDLOperation):
    """Base of communication ops: they run inside a `mesh.spmd`."""

    def grid(self) -> tuple[int, int]:
        grid = grid_of(self)
        if grid is None:
            raise VerifyException(f"'{self.name}' must be inside a mesh.program")
        return grid


def _verify_segment(op: CommOp, segment: IntegerAttr[IntegerType] | None) -> int:
    """
    The PEs of one segment along the op's axis (the whole axis without `segment`):
    between 1 and the axis size; the positions past the last whole segment idle.
    """
    axis: AxisAttr = getattr(op, "axis")
    n = axis_size(axis.data, op.grid())
    if segment is None:
        return n
    s = segment.value.data
    if not 1 <= s <= n:
        raise VerifyException(
            f"segment must be between 1 and the {n} PEs along {axis.data}, got {s}"
        )
    return s


_COMM_TRAITS = lazy_traits_def(lambda: (HasAncestor(SpmdOp),))


@irdl_op_definition
class ShiftOp(CommOp):
    """
    Cyclic shift along a mesh axis: every PE sends its block to its successor on the ring
    and receives its predecessor's, `distance` times over (a negative distance runs the
    ring backwards). `linear` has no wrap-around
    (the first PE receives zeros); `torus` wraps from the last PE to the first across the
    whole line; `interleaved` folds the ring onto the line so every step is ≤ 2 hops.

    ```mlir
    %a2 = mesh.shift %a axis x ring interleaved : tensor<16x16xf32>
    ```
    """

    name = "mesh.shift"

    T: ClassVar = VarConstraint("T", base(TensorType))

    input = operand_def(T)
    axis = prop_def(AxisAttr)
    ring = prop_def(RingAttr)
    distance = prop_def(IntegerAttr[I64], default_value=IntegerAttr(1, i64))
    result = result_def(T)

    traits = _COMM_TRAITS

    assembly_format = (
        "$input `axis` $axis `ring` $ring (`distance` $distance^)? attr-dict `:` "
        "type($result)"
    )

    def __init__(
        self,
        input: SSAValue | Operation,
        axis: Axis | str,
        ring: Ring | str,
        distance: int = 1,
    ):
        x = SSAValue.get(input)
        super().__init__(
            operands=[x],
            result_types=[x.type],
            properties={
                "axis": AxisAttr(Axis(axis)),
                "ring": RingAttr(Ring(ring)),
                "distance": _i64(distance),
            },
        )

    def verify_(self) -> None:
        n = axis_size(self.axis.data, self.grid())
        d = self.distance.value.data
        if d == 0:
            raise VerifyException(
                "shift distance must not be 0 (negative runs the ring backwards)"
            )
        if self.ring.data == Ring.INTERLEAVED and n < 3 and n != 1:
            raise VerifyException(
                f"an interleaved ring needs at least 3 PEs along {self.axis.data}, got {n} "
                "(use ring torus for 2)"
            )


@irdl_op_definition
class BroadcastOp(CommOp):
    """
    Every PE along `axis` receives the block of the PE at position `root` on that axis
    (a hardware multicast along the line). With `segment = S` the axis is cut into
    consecutive segments of S PEs, each multicasting from its own position `root`
    (0 <= root < S); the PEs past the last whole segment keep their block.

    ```mlir
    %b = mesh.broadcast %a axis x root %k : tensor<16x16xf32>
    %c = mesh.broadcast %a axis y root %k segment = 4 : tensor<16x16xf32>
    ```
    """

    name = "mesh.broadcast"

    T: ClassVar = VarConstraint("T", base(TensorType))

    input = operand_def(T)
    axis = prop_def(AxisAttr)
    root = operand_def(IndexType)
    segment = opt_prop_def(IntegerAttr[I64])
    result = result_def(T)

    traits = _COMM_TRAITS

    assembly_format = (
        "$input `axis` $axis `root` $root (`segment` `=` $segment^)? attr-dict "
        "`:` type($result)"
    )

    def __init__(
        self,
        input: SSAValue | Operation,
        axis: Axis | str,
        root: SSAValue | Operation,
        segment: int | None = None,
    ):
        x = SSAValue.get(input)
        props: dict[str, Attribute] = {"axis": AxisAttr(Axis(axis))}
        if segment is not None:
            props["segment"] = _i64(segment)
        super().__init__(operands=[x, root], result_types=[x.type], properties=props)

    def verify_(self) -> None:
        _verify_segment(self, self.segment)


class _ReductionOp(CommOp):
    T: ClassVar = VarConstraint("T", base(TensorType))

    kind = prop_def(CombineKindAttr)
    input = operand_def(T)
    axis = prop_def(AxisAttr)
    algorithm = prop_def(AlgorithmAttr, default_value=AlgorithmAttr(Algorithm.KTREE))
    k = prop_def(IntegerAttr[I64], default_value=IntegerAttr(2, i64))
    groups = opt_prop_def(IntegerAttr[I64])
    segment = opt_prop_def(IntegerAttr[I64])
    result = result_def(T)

    def verify_(self) -> None:
        n = _verify_segment(self, self.segment)
        if self.k.value.data < 1:
            raise VerifyException(f"k must be >= 1, got {self.k.value.data}")
        if self.groups is not None:
            g = self.groups.value.data
            if not 1 <= g <= n:
                where = "of a segment along" if self.segment is not None else "along"
                raise VerifyException(
                    f"groups must be between 1 and the {n} PEs {where} {self.axis.data}, "
                    f"got {g}"
                )
            if self.algorithm.data != Algorithm.KTREE:
                raise VerifyException("groups only apply to the ktree algorithm")
            if self.k.value.data < 2 and g != 1:
                raise VerifyException(
                    f"groups = {g} needs k >= 2 (with k = 1 there is a single group)"
                )


@irdl_op_definition
class AllreduceOp(_ReductionOp):
    """
    Combines the blocks of all PEs along `axis`; every PE receives the result.
    `ktree` (default, K = 2) reduces within groups, then across group roots, then
    multicasts; `groups` sets the number of groups of the first phase (default ≈ √n).
    With `segment = S` the axis is cut into consecutive segments of S PEs, each
    allreducing its own blocks (`groups` then counts a segment's groups); the PEs past
    the last whole segment keep their block.

    ```mlir
    %s = mesh.allreduce sum %p axis y algorithm ktree groups = 4 : tensor<1x16xf32>
    %m = mesh.allreduce max %p axis x algorithm pipeline : tensor<16x1xf32>
    %h = mesh.allreduce sum %p axis y segment = 52 : tensor<4x10xf32>
    ```
    """

    name = "mesh.allreduce"

    traits = _COMM_TRAITS

    assembly_format = (
        "$kind $input `axis` $axis (`algorithm` $algorithm^)? (`k` `=` $k^)? "
        "(`groups` `=` $groups^)? (`segment` `=` $segment^)? attr-dict `:` type($result)"
    )

    def __init__(
        self,
        kind: CombineKind | str,
        input: SSAValue | Operation,
        axis: Axis | str,
        algorithm: Algorithm | str = Algorithm.KTREE,
        k: int = 2,
        groups: int | None = None,
        segment: int | None = None,
    ):
        x = SSAValue.get(input)
        props: dict[str, Attribute] = {
            "kind": CombineKindAttr(CombineKind(kind)),
            "axis": AxisAttr(Axis(axis)),
            "algorithm": AlgorithmAttr(Algorithm(algorithm)),
            "k": _i64(k),
        }
        if groups is not None:
            props["groups"] = _i64(groups)
        if segment is not None:
            props["segment"] = _i64(segment)
        super().__init__(operands=[x], result_types=[x.type], properties=props)


@irdl_op_definition
class ReduceOp(_ReductionOp):
    """
    Combines the blocks of all PEs along `axis` into the PE at position `root`; the
    other PEs' results are zero. With `segment = S` every segment of S consecutive PEs
    reduces into its own position `root` (0 <= root < S); the PEs past the last whole
    segment take no part (their result is zero).

    ```mlir
    %s = mesh.reduce sum %p axis y root %r : tensor<1x16xf32>
    %t = mesh.reduce sum %p axis y root %r segment = 8 : tensor<1x16xf32>
    ```
    """

    name = "mesh.reduce"

    root = operand_def(IndexType)

    traits = _COMM_TRAITS

    assembly_format = (
        "$kind $input `axis` $axis `root` $root (`algorithm` $algorithm^)? "
        "(`k` `=` $k^)? (`groups` `=` $groups^)? (`segment` `=` $segment^)? attr-dict "
        "`:` type($result)"
    )

    def __init__(
        self,
        kind: CombineKind | str,
        input: SSAValue | Operation,
        axis: Axis | str,
        root: SSAValue | Operation,
        algorithm: Algorithm | str = Algorithm.KTREE,
        k: int = 2,
        segment: int | None = None,
    ):
        x = SSAValue.get(input)
        props: dict[str, Attribute] = {
            "kind": CombineKindAttr(CombineKind(kind)),
            "axis": AxisAttr(Axis(axis)),
            "algorithm": AlgorithmAttr(Algorithm(algorithm)),
            "k": _i64(k),
        }
        if segment is not None:
            props["segment"] = _i64(segment)
        super().__init__(operands=[root, x], result_types=[x.type], properties=props)


def segment_of(op: Operation, grid: Sequence[int]) -> int:
    """PEs per segment of a collective along its axis (the axis size if unsegmented)."""
    if isinstance(op, BroadcastOp | AllreduceOp | ReduceOp) and op.segment is not None:
        return op.segment.value.data
    axis: AxisAttr = getattr(op, "axis")
    return axis_size(axis.data, grid)


@irdl_op_definition
class SendOp(CommOp):
    """
    Sends the PE's block on a color: the routers' rules for that color decide where it
    goes. With `if %p`, only the PEs where `%p` holds send.

    ```mlir
    mesh.send %a color 3 : tensor<16x16xf32>
    mesh.send %a color 4 if %first : tensor<16x16xf32>
    ```
    """

    name = "mesh.send"

    input = operand_def(TensorType)
    color = prop_def(IntegerAttr[I64])
    mask = opt_operand_def(i1)

    traits = _COMM_TRAITS

    assembly_format = "$input `color` $color (`if` $mask^)? attr-dict `:` type($input)"

    def __init__(
        self,
        input: SSAValue | Operation,
        color: int,
        mask: SSAValue | Operation | None = None,
    ):
        super().__init__(
            operands=[input, [] if mask is None else [mask]],
            properties={"color": _i64(color)},
        )

    def verify_(self) -> None:
        if self.color.value.data < 0:
            raise VerifyException(f"color must be >= 0, got {self.color.value.data}")
        self.grid()


@irdl_op_definition
class RecvOp(CommOp):
    """
    Receives a block arriving on a color at the PE's ramp. With `if %p`, only the PEs
    where `%p` holds receive (the others' results are zero). A receive that no send can
    reach is a deadlock.

    ```mlir
    %b = mesh.recv color 3 : tensor<16x16xf32>
    ```
    """

    name = "mesh.recv"

    color = prop_def(IntegerAttr[I64])
    mask = opt_operand_def(i1)
    result = result_def(TensorType)

    traits = _COMM_TRAITS

    assembly_format = "`color` $color (`if` $mask^)? attr-dict `:` type($result)"

    def __init__(
        self, result_type: Attribute, color: int, mask: SSAValue | Operation | None = None
    ):
        super().__init__(
            operands=[[] if mask is None else [mask]],
            result_types=[result_type],
            properties={"color": _i64(color)},
        )

    def verify_(self) -> None:
        if self.color.value.data < 0:
            raise VerifyException(f"color must be >= 0, got {self.color.value.data}")
        self.grid()


@irdl_op_definition
class RouteOp(IRDLOperation):
    """
    A static route rule: the routers in rows `rows = [start, stop, step]` and columns
    `cols = [start, stop, step]` forward `color` arriving from port `from` to the ports
    `to` (several ports: a multicast; `ramp`: deliver to the PE).

    ```mlir
    mesh.route color 3 rows [0, 4, 1] cols [0, 3, 1] from ramp to ["east"]
    ```
    """

    name = "mesh.route"

    color = prop_def(IntegerAttr[I64])
    rows = prop_def(DenseArrayBase.constr(I64))
    cols = prop_def(DenseArrayBase.constr(I64))
    rx = prop_def(PortAttr, prop_name="from")
    tx = prop_def(ArrayAttr[StringAttr], prop_name="to")

    traits = traits_def(HasParent(ProgramOp))

    assembly_format = (
        "`color` $color `rows` $rows `cols` $cols `from` $from `to` $to attr-dict"
    )

    def __init__(
        self,
        color: int,
        rows: tuple[int, int, int],
        cols: tuple[int, int, int],
        rx: Port | str,
        tx: Sequence[Port | str],
    ):
        super().__init__(
            properties={
                "color": _i64(color),
                "rows": DenseArrayBase.from_list(i64, list(rows)),
                "cols": DenseArrayBase.from_list(i64, list(cols)),
                "from": PortAttr(Port(rx)),
                "to": ArrayAttr([StringAttr(Port(t).value) for t in tx]),
            }
        )

    @property
    def tx_ports(self) -> tuple[Port, ...]:
        return tuple(Port(t.data) for t in self.tx.data)

    def verify_(self) -> None:
        for name, r in (("rows", self.rows), ("cols", self.cols)):
            v = r.get_values()
            if len(v) != 3 or v[2] <= 0 or v[0] < 0 or v[1] < v[0]:
                raise VerifyException(
                    f"{name} must be [start, stop, step] with 0 <= start <= stop and "
                    f"step > 0, got {list(v)}"
                )
        ports = [t.data for t in self.tx.data]
        for p in ports:
            if p not in {q.value for q in Port}:
                raise VerifyException(
                    f"unknown port '{p}' (ports: ramp, north, south, east, west)"
                )
        if not ports:
            raise VerifyException("a route needs at least one output port")
        if len(set(ports)) != len(ports):
            raise VerifyException(f"output ports {ports} repeat a port")
        if self.rx.data.value in ports and self.rx.data != Port.RAMP:
            raise VerifyException(
                f"a route cannot send {self.rx.data} back where it came from"
            )
        grid = grid_of(self)
        if grid is not None:
            rows, cols = self.rows.get_values(), self.cols.get_values()
            if rows[1] > grid[0] or cols[1] > grid[1]:
                raise VerifyException(
                    f"route covers rows {list(rows)} cols {list(cols)} outside the "
                    f"{grid[0]}x{grid[1]} grid"
                )


Mesh = Dialect(
    "mesh",
    [
        ProgramOp,
        ReturnOp,
        ScatterOp,
        GatherOp,
        SpmdOp,
        YieldOp,
        ShiftOp,
        BroadcastOp,
        AllreduceOp,
        ReduceOp,
        SendOp,
        RecvOp,
        RouteOp,
    ],
    [
        AxisAttr,
        RingAttr,
        CombineKindAttr,
        AlgorithmAttr,
        PortAttr,
        DeviceAttr,
        LayoutAttr,
        DistType,
    ],
)
