"""
The mapping decision of a nest, memoised by content for `convert-tile-to-mesh`.

Which mapping a nest gets (`planning.Planner.ranked`, then the first whose emitted spmd
fits SRAM) depends on the nest's ops, the straight-line ops after it (which its spmd
absorbs: `batching.epilogue`), the values it reads — their types, where each comes from
and the layout an earlier nest left it in — and the options (grid, device, collectives).
Under that key (`nest_key`) the memo keeps the chosen mapping, with loops and operands
named by position, so a nest met again (in another blocking trial of `plmr compile`, or
in the mesh guard of `taso-substitute`) is emitted under its mapping at once: no
candidates are enumerated and priced, and no rejected mapping is emitted again. A nest
that fits no mapping keeps its error.

`disabled()` turns the memo off (a test compares the memoised lowering with the plain
one); `stats()` counts hits and misses (`plmr compile --profile`).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from xdsl.dialects import arith, tensor
from xdsl.dialects.builtin import TensorType
from xdsl.ir import Attribute, BlockArgument, Operation, SSAValue

from plmr.dialects import tile
from plmr.errors import PlmrError
from plmr.lowering.memo_switch import MemoSwitch
from plmr.lowering.structure import Key, Structure
from plmr.lowering.tile_to_mesh.analysis import Layout, Nest, Options, initial_fill
from plmr.lowering.tile_to_mesh.mapping import Band, Mapping

CAPACITY = 20_000
"""Decisions kept (least recently used dropped first)."""


@dataclass(frozen=True)
class Decision:
    """
    A chosen mapping with its loops (pre-order index among the nest's `tile.for`s)
    and operands (index in `Nest.globals`) named by position."""

    axes: tuple[tuple[str, int], ...]
    mode: str
    paths: tuple[tuple[int, str], ...]
    chunks: int
    layouts: tuple[tuple[int, Layout], ...]
    outputs: tuple[Layout, ...]
    cost: float
    sram: int
    deferred: tuple[str, ...] | None
    bands: tuple[tuple[str, int, int, int], ...]
    """(axis, outer loop, inner loop or -1, width)."""
    copies: bool


_MEMO: OrderedDict[Key, Decision] = OrderedDict()
_ERRORS: OrderedDict[tuple[Key, Hashable], tuple[type[PlmrError], str]] = OrderedDict()
_SWITCH = MemoSwitch((_MEMO, _ERRORS))
disabled = _SWITCH.disabled
enabled = _SWITCH.is_enabled
clear = _SWITCH.clear
stats = _SWITCH.stats


def _options_key(opts: Options) -> Hashable:
    return (
        opts.grid,
        opts.device_spec,
        opts.gemm,
        opts.gemv,
        opts.k,
        opts.groups,
        opts.rest_weights,
        opts.rest_copies,
    )


def _epilogue_candidates(top: tile.ForOp) -> list[Operation]:
    """The ops after `top` that `batching.epilogue` may absorb, whatever the layouts."""
    out: list[Operation] = []
    op = top.next_op
    while op is not None:
        if isinstance(op, tile.ForOp) or not isinstance(
            op, tile.TileOp | arith.ConstantOp | tensor.EmptyOp
        ):
            break
        out.append(op)
        op = op.next_op
    return out


def nest_key(
    top: tile.ForOp,
    opts: Options,
    placed: dict[SSAValue, Layout],
    slices: dict[SSAValue, tuple[SSAValue, tuple[int, ...]]],
    weights: AbstractSet[SSAValue] = frozenset(),
) -> tuple[Key, Structure]:
    """
    The memo key of the nest `top` (see the module docstring) and its structure;
    `weights`: the arguments placed at rest (`Options.rest_weights`).
    """

    def outside(value: SSAValue) -> Hashable:
        layout = placed.get(value)
        owner = value.owner
        typ: Attribute = value.type
        if layout is not None:
            return ("placed", value.type, layout)
        if value in slices:
            src, offsets = slices[value]
            return ("slice", value.type, src.type, tuple(offsets), src in weights)
        if isinstance(value, BlockArgument):
            return ("arg", value.type, value in weights)
        if isinstance(owner, tensor.EmptyOp):
            return ("empty", value.type)
        if isinstance(owner, arith.ConstantOp):
            if isinstance(value.type, TensorType):
                return ("constant", typ)
            return ("constant", owner.value)
        if isinstance(owner, tile.FillOp):
            fill = initial_fill(value, top) is not None
            return ("fill", value.type, fill, tuple(sorted(owner.properties.items())))
        return ("value", typ, owner.name if isinstance(owner, Operation) else "")

    structure = Structure(outside)
    body = structure.key([top])
    after = structure.key(_epilogue_candidates(top))
    return (_options_key(opts), body, after), structure


def _loops(nest: Nest) -> list[tile.ForOp]:
    return [op for op in nest.top.walk() if isinstance(op, tile.ForOp)]


def record(key: Key, nest: Nest, m: Mapping) -> None:
    """Keeps `m`, the mapping chosen for `nest`, under `key`."""
    if not enabled():
        return
    loops = {id(lp): i for i, lp in enumerate(_loops(nest))}
    values = {v: i for i, v in enumerate(nest.globals)}
    decision = Decision(
        tuple((a, loops[id(lp)]) for a, lp in m.axes.items()),
        m.mode,
        tuple((values[v], a) for v, a in m.paths.items()),
        m.chunks,
        tuple((values[v], lay) for v, lay in m.layouts.items()),
        tuple(m.outputs),
        m.cost,
        m.sram,
        None if m.deferred is None else tuple(m.deferred),
        tuple(
            (
                a,
                loops[id(b.outer)],
                -1 if b.inner is None else loops[id(b.inner)],
                b.width,
            )
            for a, b in m.bands.items()
        ),
        m.copies,
    )
    _put(key, decision)


def record_error(key: Key, names: Hashable, error: PlmrError) -> None:
    """Keeps the error of a nest that fits no mapping (its message names its values)."""
    if enabled():
        _ERRORS[(key, names)] = (type(error), str(error))
        while len(_ERRORS) > CAPACITY:
            _ERRORS.popitem(last=False)


def _put(key: Key, value: Decision) -> None:
    _MEMO[key] = value
    _MEMO.move_to_end(key)
    while len(_MEMO) > CAPACITY:
        _MEMO.popitem(last=False)


def lookup(key: Key, nest: Nest, names: Hashable) -> Mapping | PlmrError | None:
    """The mapping kept for `key`, rebuilt on `nest`; the error it raised; or None."""
    if not enabled():
        return None
    found = _MEMO.get(key)
    if found is None:
        error = _ERRORS.get((key, names))
        if error is None:
            _SWITCH.misses += 1
            return None
        _SWITCH.hits += 1
        kind, message = error
        return kind(message)
    _SWITCH.hits += 1
    _MEMO.move_to_end(key)
    loops = _loops(nest)
    values = nest.globals
    return Mapping(
        {a: loops[i] for a, i in found.axes},
        found.mode,
        paths={values[i]: a for i, a in found.paths},
        chunks=found.chunks,
        layouts={values[i]: lay for i, lay in found.layouts},
        outputs=list(found.outputs),
        cost=found.cost,
        sram=found.sram,
        deferred=None if found.deferred is None else list(found.deferred),
        bands={
            a: Band(loops[o], None if i < 0 else loops[i], w) for a, o, i, w in found.bands
        },
        copies=found.copies,
    )


__all__ = ["Decision", "clear", "disabled", "lookup", "nest_key", "record", "stats"]
