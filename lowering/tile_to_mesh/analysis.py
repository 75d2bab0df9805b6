"""
Nest analysis for `convert-tile-to-mesh`: the options, and what one top-level tile nest
reads, writes and loops over (`analyze_nest`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from xdsl.dialects import arith, tensor
from xdsl.dialects.builtin import (
    IntegerAttr,
    TensorType,
)
from xdsl.ir import Block, BlockArgument, Operation, SSAValue

from plmr.dialects import tile
from plmr.target.device import Device
from plmr.target.op_cost import op_work

GEMM_CHOICES = ("meshgemm", "cannon", "summa")
GEMV_CHOICES = ("ktree", "pipeline", "ring", "auto")
"""`auto`: a K-tree whose K (2 or 3) each allreduce takes from the runtime's timing of
one line (`segments.allreduce_choice`)."""

Layout = tuple[str, ...]
"""
Per tensor dim: `y`, `x` or `-` (whole); in a banded layout (`#mesh.layout<..., band a
W>`) `a/W` for the dim split over the bands of W PEs along `a` and `a%W` for the dim
blocked within each band (`band_entry`).
"""


def band_entry(axis: str, width: int, inner: bool) -> str:
    """The layout entry of a dim over the bands (`y/52`) or within them (`y%52`)."""
    return f"{axis}{'%' if inner else '/'}{width}"


def entry_axis(entry: str) -> str:
    """The mesh axis of a layout entry (`-` for a whole dim)."""
    return entry[0]


def entry_band(entry: str) -> tuple[int, bool] | None:
    """The band width of a banded entry and whether it is the inner dim; else None."""
    if len(entry) < 2:
        return None
    return int(entry[2:]), entry[1] == "%"


def entry_parts(entry: str, grid: Sequence[int]) -> int:
    """
    How many blocks a layout entry cuts its dim into on a `[rows, cols]` grid: 1 whole,
    the axis's PEs split, the band count over the bands, the band width within them.
    """
    if entry == "-":
        return 1
    n = grid[0] if entry[0] == "y" else grid[1]
    band = entry_band(entry)
    if band is None:
        return n
    width, inner = band
    return width if inner else max(1, n // width)


def layout_band(layout: Sequence[str]) -> tuple[str, int] | None:
    """The banded axis and band width of a layout, if any."""
    for e in layout:
        band = entry_band(e)
        if band is not None:
            return e[0], band[0]
    return None


def plain_axes(layout: Sequence[str]) -> list[str]:
    """The layout's entries as `#mesh.layout` spells them (the band apart)."""
    return [e if e == "-" else e[0] for e in layout]


def layout_from_attr(dims: Sequence[str], band: tuple[str, int] | None) -> Layout:
    """The planner's layout of a `#mesh.layout` (its dims and band)."""
    if band is None:
        return tuple(dims)
    on = [j for j, d in enumerate(dims) if d == band[0]]
    return tuple(
        band_entry(d, band[1], j != on[0]) if j in on else d for j, d in enumerate(dims)
    )


# ---------------------------------------------------------------------------------------
# Options
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Options:
    grid: tuple[int, int]
    device: Device
    device_spec: str
    gemm: str = "meshgemm"
    gemv: str = "ktree"
    k: int = 2
    groups: int = 0
    """K-tree groups of the first phase (0: the default, about √n)."""
    fit_tiles: bool = False
    """Rotations may also cut the reduction into padded chunks and split their parallel
    loops unevenly (`plmr compile --fit-tiles`); without it they split evenly."""
    rest_weights: bool = False
    """A layer's own weight (an argument the function lists in `plmr.weight_args`: a
    layer body compiled once) that a nest reads replicated along an axis is placed split
    along it, over its longest dimension the layout keeps whole, and gathered at the head
    of the nest's spmd: a stage's layers keep their weights in their share of the grid's
    SRAM, not an axis's length of copies each (`plmr compile` on grids of more than 64
    PEs). The planner chooses the mapping as without it (its estimate leaves the gather
    out); the emitted program, and so the simulated step, has it. A nest no mapping of
    which fits with its gathers is refused (`RestRefusal`) unless `rest_copies`."""
    rest_copies: bool = False
    """With `rest_weights`: a nest whose gathers fit under no mapping reads copies of its
    weights (the blocking search lowers with it only when no blocking fits at rest)."""

    def n(self, axis: str) -> int:
        """PEs along `axis` (or along the axis of a banded layout entry)."""
        return self.grid[0] if axis[:1] == "y" else self.grid[1]


def other_axis(axis: str) -> str:
    return "x" if axis == "y" else "y"


# ---------------------------------------------------------------------------------------
# Nest analysis
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Composite:
    """An index `outer · scale + inner` (a split-K chunk and the position inside it)."""

    outer: SSAValue
    scale: int
    inner: SSAValue


@dataclass
class Load:
    op: tile.LoadOp
    source: SSAValue
    indices: tuple[SSAValue | Composite | None, ...]
    """Per dim: the loop variable indexing it directly, a composite, or None."""


@dataclass
class Nest:
    """One top-level tile nest and what it reads and writes."""

    top: tile.ForOp
    chain: list[tile.ForOp]
    reduction: tile.ForOp | None
    loads: list[Load]
    stores: dict[int, list[tile.StoreOp]]
    """Output index -> the stores writing it (in the innermost parallel body)."""
    flops: float
    globals: list[SSAValue]
    """Func-level tensors the nest reads (loads and non-empty output inits)."""
    wholes: list[SSAValue] = field(default_factory=lambda: [])
    """Func-level tensors used whole inside the nest (not through tile.load)."""

    @property
    def reduction_var(self) -> SSAValue | None:
        return None if self.reduction is None else self.reduction.induction_var

    @property
    def outputs(self) -> Sequence[SSAValue]:
        return list(self.top.res)


def is_global(value: SSAValue, fn_block: Block) -> bool:
    if isinstance(value, BlockArgument):
        return value.owner is fn_block
    return value.owner.parent_block() is fn_block


def _root_of(value: SSAValue, chain: Sequence[tile.ForOp]) -> int | None:
    """The output index whose iter_arg chain `value` belongs to, if any."""
    for loop in chain:
        block = loop.body.block
        if isinstance(value, BlockArgument) and value.owner is block and value.index >= 1:
            return value.index - 1
    return None


def _trip_flops(op: Operation) -> float:
    total = 0.0
    for inner in op.walk():
        if isinstance(inner, tile.TileOp) and not isinstance(inner, tile.ForOp):
            trips = 1
            parent = inner.parent_op()
            while parent is not None and parent is not op.parent_op():
                if isinstance(parent, tile.ForOp):
                    trips *= parent.trip_count
                parent = parent.parent_op()
            total += op_work(inner).flops * trips
    return total


def _constant_index(value: SSAValue) -> int | None:
    owner = value.owner
    if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
        return owner.value.value.data
    return None


def composite(value: SSAValue, loops: dict[SSAValue, tile.ForOp]) -> Composite | None:
    """Recognises `addi(muli(outer, C), inner)` with `inner` ranging over [0, C)."""
    add = value.owner
    if not isinstance(add, arith.AddiOp):
        return None
    for mul_v, inner in ((add.lhs, add.rhs), (add.rhs, add.lhs)):
        mul = mul_v.owner
        if inner not in loops or not isinstance(mul, arith.MuliOp):
            continue
        for outer, c in ((mul.lhs, mul.rhs), (mul.rhs, mul.lhs)):
            scale = _constant_index(c)
            if outer not in loops or scale is None:
                continue
            lp_in, lp_out = loops[inner], loops[outer]
            if (
                lp_in.lb.value.data == 0
                and lp_in.ub.value.data == scale
                and lp_out.step.value.data == 1
            ):
                return Composite(outer, scale, inner)
    return None


def analyze_nest(top: tile.ForOp, fn_block: Block) -> Nest:
    if top.kind.data == tile.LoopKind.REDUCTION:
        # A whole-tensor reduction (e.g. a norm's sum of squares): no parallel loop.
        return _finish_nest(top, [], top, fn_block)
    chain = [top]
    while True:
        inner = [
            o
            for o in chain[-1].body.block.ops
            if isinstance(o, tile.ForOp) and o.kind.data == tile.LoopKind.PARALLEL
        ]
        if len(inner) != 1:
            break
        chain.append(inner[0])
    body = chain[-1].body.block
    reductions = [
        o
        for o in body.ops
        if isinstance(o, tile.ForOp) and o.kind.data == tile.LoopKind.REDUCTION
    ]
    reduction = max(reductions, key=_trip_flops) if reductions else None
    return _finish_nest(top, chain, reduction, fn_block)


def _finish_nest(
    top: tile.ForOp, chain: list[tile.ForOp], reduction: tile.ForOp | None, fn_block: Block
) -> Nest:
    loads: list[Load] = []
    stores: dict[int, list[tile.StoreOp]] = {}
    globals_: list[SSAValue] = []
    loops = {
        loop.induction_var: loop for loop in top.walk() if isinstance(loop, tile.ForOp)
    }
    wholes: list[SSAValue] = []
    for op in top.walk():
        for operand in op.operands:
            if (
                isinstance(operand.type, TensorType)
                and is_global(operand, fn_block)
                and not isinstance(op, tile.ForOp)
                and not (isinstance(op, tile.LoadOp) and operand is op.source)
                and not isinstance(operand.owner, tensor.EmptyOp)
            ):
                # A small tensor used whole (e.g. a scalar): every PE holds all of it.
                if operand not in wholes:
                    wholes.append(operand)
                if operand not in globals_:
                    globals_.append(operand)
        if isinstance(op, tile.LoadOp) and is_global(op.source, fn_block):
            idx = tuple(v if v in loops else composite(v, loops) for v in op.offsets)
            loads.append(Load(op, op.source, idx))
            if op.source not in globals_:
                globals_.append(op.source)
        if isinstance(op, tile.StoreOp):
            dest: SSAValue = op.dest
            while isinstance(dest.owner, tile.StoreOp):
                dest = dest.owner.dest
            root = _root_of(dest, chain)
            if root is None:
                continue
            stores.setdefault(root, []).append(op)
    for init in top.iter_args:
        if not isinstance(init.owner, tensor.EmptyOp) and init not in globals_:
            if initial_fill(init, top) is None:
                globals_.append(init)
    return Nest(top, chain, reduction, loads, stores, _trip_flops(top), globals_, wholes)


def initial_fill(init: SSAValue, top: tile.ForOp) -> tile.FillOp | None:
    """
    The function-level `tile.fill` that only starts the accumulator `init` of the nest
    `top`: the nest's `mesh.spmd` fills it itself (no operand, no spmd of its own).
    """
    fill = init.owner
    if not isinstance(fill, tile.FillOp) or fill.parent_op() is not top.parent_op():
        return None
    if any(use.operation is not top for use in init.uses):
        return None
    return fill


def loop_name(loop: tile.ForOp) -> str:
    return loop.induction_var.name_hint or "?"


def splits_unevenly(loop: tile.ForOp, n: int) -> bool:
    """Whether splitting `loop` over `n` PEs leaves some PEs blocks of padding."""
    return loop.trip_count % n != 0


def depends_on(value: SSAValue, targets: set[SSAValue]) -> bool:
    """Whether `value` is computed from any of `targets` (through operands, transitively)."""
    seen: set[SSAValue] = set()
    stack = [value]
    while stack:
        v = stack.pop()
        if v in targets:
            return True
        if v in seen:
            continue
        seen.add(v)
        if isinstance(v.owner, Operation):
            stack.extend(v.owner.operands)
    return False
