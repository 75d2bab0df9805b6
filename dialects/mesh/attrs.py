"""
The `mesh` dialect's enums, attributes and types: devices, layouts, distributed tensors.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    ArrayAttr,
    IntAttr,
    IntegerAttr,
    IntegerType,
    StringAttr,
    TensorType,
    i64,
)
from xdsl.dialects.utils import EnumAttribute
from xdsl.ir import (
    Attribute,
    ParametrizedAttribute,
    SpacedOpaqueSyntaxAttribute,
    TypeAttribute,
)
from xdsl.irdl import (
    irdl_attr_definition,
)
from xdsl.parser import AttrParser
from xdsl.printer import Printer
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
    SOFTMAX = "softmax"
    """
    Split-K softmax (flash-decoding's combine): along the last axis a block holds
    `[m, l, o...]` per row (a partial maximum, the partial sum of `exp(s - m)` and
    partial outputs weighted by it); two blocks combine as `M = max(m1, m2)`,
    `[l, o] = [l1, o1]·exp(m1 - M) + [l2, o2]·exp(m2 - M)`.
    """


@irdl_attr_definition
class CombineKindAttr(EnumAttribute[CombineKind], SpacedOpaqueSyntaxAttribute):
    """`sum`, `max`, `min` or `softmax`."""

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


def i64_attr(value: int) -> IntegerAttr[IntegerType]:
    """An i64 integer attribute (the properties of the mesh ops)."""
    return IntegerAttr(value, i64)
