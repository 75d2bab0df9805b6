"""
The pass `convert-loop-to-tile`: every top-level nest of a function analysed, blocked and
replaced by its tile program (with the epilogue nest it absorbs), or left with a remark.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import count

from xdsl.builder import Builder
from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    ModuleOp,
    StringAttr,
)
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from plmr.dialects.loop import (
    REMARK_ATTR,
    NestOp,
    ReadOp,
    value_shape,
)
from plmr.errors import PassOptionError, PlmrError
from plmr.lowering.loop_to_tile import memo
from plmr.lowering.loop_to_tile.analysis import BAND_MIN_WIDTH, SPLIT_FRACTION
from plmr.lowering.loop_to_tile.analysis import Analysis as _Analysis
from plmr.lowering.loop_to_tile.blocks import Dim, Untileable
from plmr.lowering.loop_to_tile.blocks import Plan as _Plan
from plmr.lowering.loop_to_tile.blocks import is_const as _is_const
from plmr.lowering.loop_to_tile.blocks import nests_in as _nests_in
from plmr.lowering.loop_to_tile.blocks import top_op as _top
from plmr.lowering.loop_to_tile.bounds import check_read_bounds
from plmr.lowering.loop_to_tile.codegen import Codegen as _Codegen
from plmr.lowering.structure import Key, Structure
from plmr.passes.neptune import nests as N


def _epilogue_of(nest: NestOp, analysis: _Analysis) -> NestOp | None:
    """
    A map nest reading `nest`'s results only at its own points, whose other reads block
    like `nest`'s dims; its dims are bound to `nest`'s (and fresh whole dims).
    """
    block = nest.parent_block()
    users = {_top(u.operation, block) for r in nest.res for u in r.uses}
    maps = [u for u in users if isinstance(u, NestOp) and not u.is_reduction]
    if len(users) != 1 or len(maps) != 1:
        return None
    (epi,) = maps
    par = list(nest.parallel_dims)
    if tuple(epi.extents[: len(par)]) != nest.parallel_extents:
        return None
    # The epilogue's other dims must be the value axes of the results (kept whole).
    value_rank = max(len(value_shape(t)) for t in nest.yield_op.values.types)
    if len(epi.extents) != len(par) + value_rank:
        return None
    for op in epi.walk():
        if not isinstance(op, ReadOp) or op.source not in nest.res:
            continue
        k = _position(nest.res, op.source)
        nv = len(value_shape(nest.yield_op.values.types[k]))
        want = list(epi.dims[: len(par) + nv])
        if op.parent_op() is not epi or len(op.indices) != len(want):
            return None
        extents = epi.extents
        if any(
            i is not w and not (extents[a] == 1 and _is_const(i, 0))
            for a, (i, w) in enumerate(zip(op.indices, want, strict=True))
        ):
            return None
    outside = N.external_values(epi) - set(nest.res)
    if not all(N.defined_before(v, nest) for v in outside):
        return None
    dims = analysis.dims
    added: list[SSAValue] = []
    for i, (arg, e) in enumerate(zip(epi.dims, epi.extents, strict=True)):
        if i < len(par):
            dims[arg] = dims[nest.dims[par[i]]]
        else:
            dims[arg] = Dim(arg.name_hint or "e", e, e, next(analysis.order), False)
        added.append(arg)
    reads_ok = len(_nests_in(epi)) == 1 and all(
        analysis.read_problem(op) is None
        for op in epi.walk()
        if isinstance(op, ReadOp) and op.source not in nest.res
    )
    if not reads_ok:
        for arg in added:
            del dims[arg]
        return None
    return epi


def _position(values: Sequence[SSAValue], v: SSAValue) -> int:
    """The index of `v` among `values`."""
    return [x for x in values].index(v)


@dataclass(frozen=True)
class ConvertLoopToTilePass(ModulePass):
    """
    Blocks `loop` nests into `tile` programs: `tile-sizes = P,R` are the block of
    the reused parallel dimensions and of the innermost reduction dimension;
    `nest-tile-sizes = "name=P,R;..."` overrides them for the nests computing the named
    tensors (names as printed, without `%`).
    """

    name = "convert-loop-to-tile"

    tile_sizes: tuple[int, ...] = (16, 16)
    """`P,R`: the block size of blocked parallel dimensions and of the reduction."""

    nest_tile_sizes: str = ""
    """Per-nest overrides `name=P,R;name=P,R`, addressed by the nest's result names."""

    fit: bool = False
    """Shrink a block that does not divide its dimension to the largest divisor that does
    (instead of reporting an error)."""

    fit_grid: tuple[int, ...] = ()
    """With `fit`: the mesh the program is for (`P,Q`); blocks are then shrunk to a
    divisor whose block count an axis divides, or kept whole when no axis can split the
    dimension (see `WHOLE_BLOCKS`)."""

    bands: bool = False
    """With `fit-grid`: the outermost parallel dimension too short for an axis (8 KV
    heads on 420 PEs) is cut in blocks of 1 instead of kept whole, a loop the mesh
    partitioner can put over bands of PEs (`analysis.BAND_MIN_WIDTH`)."""

    spread: bool = False
    """With `fit-grid`: a dimension at least as long as an axis that no axis divides is
    split unevenly over it (each PE's share a block of the padded layout) rather than
    kept whole (`WHOLE_BLOCKS`): for a nest that does not fit a PE whole."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        sizes = _sizes(self.tile_sizes, "tile-sizes")
        overrides = parse_nest_sizes(self.nest_tile_sizes)
        if any(n <= 0 for n in self.fit_grid):
            raise PassOptionError(
                f"convert-loop-to-tile: fit-grid sizes must be positive, got "
                f"{list(self.fit_grid)}"
            )
        check_read_bounds(op, self.name)
        for fn in op.ops:
            if isinstance(fn, func.FuncOp) and fn.body.blocks:
                lower_function(
                    fn,
                    sizes,
                    overrides,
                    self.fit,
                    self.fit_grid,
                    bands=self.bands,
                    spread=self.spread,
                )


def may_band(module: ModuleOp, grid: Sequence[int]) -> bool:
    """
    Whether `bands` changes the blocking of some nest of `module` on `grid`: a parallel
    dimension too short for every axis (`Analysis._too_small`) with room for bands of
    `BAND_MIN_WIDTH` PEs on one.
    """
    axes = [n for n in grid if n > 1]
    if not axes:
        return False
    for op in module.walk():
        if not isinstance(op, NestOp) or isinstance(op.parent_op(), NestOp):
            continue
        for i in op.parallel_dims:
            e = op.extents[i]
            if e <= 1 or any(e % n == 0 or e * SPLIT_FRACTION >= n for n in axes):
                continue
            if any(n // e >= BAND_MIN_WIDTH for n in axes):
                return True
    return False


def _sizes(values: Sequence[int], what: str) -> tuple[int, int]:
    if len(values) == 1:
        values = (values[0], values[0])
    if len(values) != 2 or any(s <= 0 for s in values):
        raise PassOptionError(
            f"convert-loop-to-tile: {what} must be one or two positive sizes "
            f"(parallel, reduction), got {list(values)}"
        )
    return (values[0], values[1])


def parse_nest_sizes(text: str) -> dict[str, tuple[int, int]]:
    """`"h=8,8;o=4"` -> {"h": (8, 8), "o": (4, 4)}."""
    out: dict[str, tuple[int, int]] = {}
    for item in filter(None, (t.strip() for t in text.split(";"))):
        name, eq, rest = item.partition("=")
        name = name.strip().lstrip("%")
        try:
            values = [int(v) for v in rest.split(",")] if eq else []
        except ValueError:
            values = []
        if not name or not values:
            raise PassOptionError(
                f"convert-loop-to-tile: bad nest-tile-sizes entry '{item}': expected "
                "name=P,R (e.g. attn=16,8)"
            )
        out[name] = _sizes(values, f"the sizes of nest '{name}'")
    return out


def lower_function(
    fn: func.FuncOp,
    sizes: tuple[int, int],
    overrides: dict[str, tuple[int, int]] | None = None,
    fit: bool = False,
    grid: Sequence[int] = (),
    bands: bool = False,
    spread: bool = False,
) -> None:
    """Replaces every top-level nest of `fn` that can be blocked by its tile program."""
    block = fn.body.block
    N.hoist_constants(block)
    order = count()
    for nest in N.top_nests(block):
        if nest.parent is None:
            continue
        chosen = sizes
        for result in nest.results:
            if overrides and result.name_hint in overrides:
                chosen = overrides[result.name_hint]
                break
        analysis = _Analysis(
            nest, chosen, order, fit=fit, grid=grid, bands=bands, spread=spread
        )
        keyed = _key(nest, analysis) if memo.enabled() else None
        memo.trace(None if keyed is None else keyed.program)
        # A remark or an error names the nest: kept under its names too.
        found = None if keyed is None else memo.lookup(keyed.named, keyed.program)
        if isinstance(found, str):
            nest.attributes[REMARK_ATTR] = StringAttr(found)
            continue
        if isinstance(found, memo.Refusal):
            raise PlmrError(found.message)
        if isinstance(found, memo.Program):
            assert keyed is not None
            if _reuse(nest, found, keyed):
                continue
        try:
            plan = analysis.run()
            epilogue = _epilogue_of(nest, analysis)
            _replace(nest, plan, epilogue, order, keyed)
        except Untileable as e:
            remark = f"convert-loop-to-tile: left at the loop level: {e}"
            nest.attributes[REMARK_ATTR] = StringAttr(remark)
            if keyed is not None:
                memo.record_remark(keyed.named, remark)
        except PlmrError as e:
            if keyed is not None:
                memo.record_refusal(keyed.named, str(e))
            raise
    N.dce(block)


@dataclass(frozen=True)
class _Keyed:
    """
    A nest's memo keys: of its tile program (names left out) and of its remark or
    error (which name it), with its structure and names."""

    program: Key
    named: Key
    structure: Structure
    names: memo.Names


def _key(nest: NestOp, analysis: _Analysis) -> _Keyed | None:
    """The memo keys of `nest` (None when its blocks cannot be chosen)."""
    body, names, structure = memo.fragment_key(nest, memo.candidate_epilogue(nest))
    analysis.padded = memo.padded(
        body, analysis.fit, lambda: analysis.padding() is not None
    )
    try:
        blocks = analysis.top_blocks()
    except Untileable:
        return None
    options = (analysis.fit, analysis.grid, analysis.bands, analysis.spread)
    return _Keyed(
        ("program", body, tuple(blocks), options),
        ("named", body, names, tuple(blocks), options),
        structure,
        names,
    )


def _reuse(nest: NestOp, found: memo.Program, keyed: _Keyed) -> bool:
    """
    Replaces `nest` (and its epilogue) by a copy of the tile program kept for it, its
    loops renamed after this nest's dimensions; False (nothing done) when its names do
    not map one to one.
    """
    copy = memo.instantiate(found, keyed.structure, keyed.names)
    if copy is None:
        return False
    ops, finals = copy
    epilogue = memo.candidate_epilogue(nest) if found.epilogue else None
    owners = [nest] if epilogue is None else [nest, epilogue]
    _insert(nest, ops, [(owners[o], k) for o, k in found.stored], finals, epilogue)
    return True


def _replace(
    nest: NestOp,
    plan: _Plan,
    epilogue: NestOp | None,
    order: Iterator[int],
    keyed: _Keyed | None = None,
) -> None:
    """Emits the tile program of `nest` before it and replaces its results."""
    scratch = Block()
    gen = _Codegen(nest, plan, epilogue, order)
    try:
        finals = gen.emit(Builder(InsertPoint.at_end(scratch)))
    except Untileable:
        _drop(scratch)
        raise
    stored = gen.stored()
    ops = list(scratch.ops)
    for op in ops:
        op.detach()
    if keyed is not None:
        where = [(0 if owner is nest else 1, k) for owner, k in stored]
        memo.record(
            keyed.program,
            keyed.structure,
            ops,
            where,
            finals,
            epilogue is not None,
            keyed.names,
        )
    _insert(nest, ops, stored, finals, epilogue)


def _insert(
    nest: NestOp,
    ops: Sequence[Operation],
    stored: Sequence[tuple[NestOp, int]],
    finals: Sequence[SSAValue],
    epilogue: NestOp | None,
) -> None:
    """Inserts the tile `ops` before `nest`, `finals` replacing the `stored` results."""
    for op in ops:
        Builder(InsertPoint.before(nest)).insert(op)
    for (owner, k), value in zip(stored, finals, strict=True):
        old = owner.res[k]
        value.name_hint = old.name_hint
        old.replace_all_uses_with(value)
    for owner in [*([epilogue] if epilogue is not None else []), nest]:
        Rewriter.erase_op(owner)


def _drop(block: Block) -> None:
    """Erases a detached block's ops, dropping their uses of values outside it."""
    for op in reversed(list(block.ops)):
        block.detach_op(op)
        op.erase(safe_erase=False)
