"""
The tile program of a nest, memoised by content for `convert-loop-to-tile`.

What a nest becomes (`lower_function`: the analysis, the epilogue it absorbs, the
emitted tile ops, the remark of a nest left at the loop level, or the error of sizes
that do not divide it) depends on the nest's ops, the map nest that reads its results
(the candidate epilogue), the values they read from outside (their types, a constant's
value, whether an outside value of the epilogue is defined before the nest) and the
blocks the analysis starts from (`Analysis.top_blocks`, which folds the `P,R` sizes,
`fit`, the grid and `bands` into one block per dimension); not on the names its values
print with, which only name the loops it emits. Under that key (`fragment_key`, the
blocks, the options) the memo keeps the emitted ops in a detached block whose arguments
stand for the outside values, so a nest met again with the same blocks (in another
blocking trial of `plmr compile`: a map nest does not depend on `R`, nor a nest on a
block size its dimensions clamp alike; or the same nest of another layer, under its own
names) is a clone of its tile program, its loops renamed after its own dimensions
(`renaming`): no analysis, no sympy proof of its combines, no codegen. A remark or an
error names the nest, so it is kept under the names too.
Whether a nest's reduction takes a padded block (`padded`) is kept under its structure
alone, for every trial's blocks; `traced()` collects a lowering's keys (equal keys,
equal tile programs).

`disabled()` turns the memo off (a test compares the memoised lowering with the plain
one); `stats()` counts hits and misses (`plmr compile --profile`).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Generator, Hashable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from xdsl.dialects import arith
from xdsl.ir import Block, Operation, SSAValue

from plmr.dialects.loop import NestOp
from plmr.lowering.memo_switch import MemoSwitch
from plmr.lowering.structure import Key, Structure

CAPACITY = 4_000
"""Tile programs kept (least recently used dropped first)."""


Names = tuple[str | None, ...]
"""The names of a fragment's own values (`Structure.numbers` order)."""


@dataclass(frozen=True)
class Program:
    """
    The tile ops emitted for a nest, in `body` (its arguments are the fragment's outside
    values, by position in `Structure.externals`), and what they replace: `stored[i]`
    is (0 for the nest or 1 for its epilogue, result index), replaced by `finals[i]`
    (index of the op in `body`, result index). `names`: the names of the fragment's
    values it was emitted from (its loops are named after its dimensions).
    """

    body: Block
    stored: tuple[tuple[int, int], ...]
    finals: tuple[tuple[int, int], ...]
    epilogue: bool
    names: Names = ()


@dataclass(frozen=True)
class Refusal:
    """The error of a nest the sizes cannot block (a block that does not divide)."""

    message: str


_MEMO: OrderedDict[Key, Program | Refusal | str] = OrderedDict()
_PADDED: OrderedDict[tuple[Key, bool], bool] = OrderedDict()
"""Whether a nest's reduction takes a padded last block (`Analysis.padding`), by its
fragment's structure and `fit`: the same in every blocking trial."""


_SWITCH = MemoSwitch((_MEMO, _PADDED))
disabled = _SWITCH.disabled
enabled = _SWITCH.is_enabled
clear = _SWITCH.clear
stats = _SWITCH.stats


def candidate_epilogue(nest: NestOp) -> NestOp | None:
    """The one map nest reading `nest`'s results, if one alone reads them."""
    block = nest.parent_block()
    users: set[Operation] = set()
    for r in nest.res:
        for use in r.uses:
            op = use.operation
            while op.parent_block() is not block:
                parent = op.parent_op()
                if parent is None:
                    return None
                op = parent
            users.add(op)
    if len(users) != 1:
        return None
    (user,) = users
    if not isinstance(user, NestOp) or user.is_reduction:
        return None
    return user


_TRACE: list[list[Key | None]] = []


@contextmanager
def traced() -> Generator[list[Key | None]]:
    """
    Collects the key of every nest `convert-loop-to-tile` meets inside the block, in
    order (None for a nest it cannot key). Two lowerings of the same module whose keys
    are all known and equal emit the same tile program: `plmr compile`'s blocking search
    prices one trial of each (`passes/pipeline.py`).
    """
    keys: list[Key | None] = []
    _TRACE.append(keys)
    try:
        yield keys
    finally:
        _TRACE.pop()


def trace(key: Key | None) -> None:
    """Records `key` for the innermost `traced()` block, if any."""
    if _TRACE:
        _TRACE[-1].append(key)


def fragment_key(nest: NestOp, epilogue: NestOp | None) -> tuple[Key, Names, Structure]:
    """
    The structure of `nest` with its candidate `epilogue` (names left out: the same
    nest of another head or layer has the same key) and their values' names: with the
    blocks and the options, the memo key (`program._key`).
    """

    # What lies between the nest and its epilogue: an outside value of the epilogue
    # defined there is not defined before the nest (every other one is: it dominates
    # its use).
    between: set[Operation] = {nest} if epilogue is not None else set()
    op = nest.next_op
    while epilogue is not None and op is not None and op is not epilogue:
        between.add(op)
        op = op.next_op

    def outside(value: SSAValue) -> Hashable:
        owner = value.owner
        const = owner.value if isinstance(owner, arith.ConstantOp) else None
        before = not (isinstance(owner, Operation) and owner in between)
        return (value.type, const, before)

    structure = Structure(outside)
    body = structure.key([nest] if epilogue is None else [nest, epilogue])
    names = tuple(v.name_hint for v in structure.numbers)
    return body, names, structure


def padded(body: Key, fit: bool, find: Callable[[], bool]) -> bool:
    """`find()` (the nest's reduction takes a padded block), kept under `body, fit`."""
    if not enabled():
        return find()
    key = (body, fit)
    found = _PADDED.get(key)
    if found is None:
        found = _PADDED[key] = find()
        if len(_PADDED) > CAPACITY:
            _PADDED.popitem(last=False)
    return found


def lookup(*keys: Key) -> Program | Refusal | str | None:
    """
    What is kept under the first of `keys` that has an entry: a tile program, its
    error, a nest's remark; or None (one hit or miss counted).
    """
    if not enabled():
        return None
    for key in keys:
        found = _MEMO.get(key)
        if found is not None:
            _SWITCH.hits += 1
            _MEMO.move_to_end(key)
            return found
    _SWITCH.misses += 1
    return None


def record_remark(key: Key, message: str) -> None:
    """Keeps the remark of a nest left at the loop level."""
    if enabled():
        _put(key, message)


def record_refusal(key: Key, message: str) -> None:
    """Keeps the error of a nest the sizes cannot block."""
    if enabled():
        _put(key, Refusal(message))


def record(
    key: Key,
    structure: Structure,
    ops: Sequence[Operation],
    stored: Sequence[tuple[int, int]],
    finals: Sequence[SSAValue],
    epilogue: bool,
    names: Names = (),
) -> None:
    """
    Keeps a copy of the tile `ops` emitted for a nest (not yet inserted anywhere);
    nothing when they read a value outside that the nest does not.
    """
    if not enabled():
        return
    index = {v: i for i, v in enumerate(structure.externals)}
    body = Block(arg_types=[v.type for v in structure.externals])
    mapper: dict[SSAValue, SSAValue] = {v: body.args[i] for v, i in index.items()}
    defined: set[SSAValue] = set()
    for op in ops:
        for inner in op.walk():
            defined.update(inner.results)
            for region in inner.regions:
                for b in region.blocks:
                    defined.update(b.args)
    for op in ops:
        for inner in op.walk():
            if any(v not in defined and v not in index for v in inner.operands):
                return
    position: dict[SSAValue, tuple[int, int]] = {
        r: (i, k) for i, op in enumerate(ops) for k, r in enumerate(op.results)
    }
    if any(v not in position for v in finals):
        return
    for op in ops:
        body.add_op(op.clone(value_mapper=mapper))
    _put(
        key,
        Program(body, tuple(stored), tuple(position[v] for v in finals), epilogue, names),
    )


def renaming(kept: Names, names: Names) -> dict[str, str] | None:
    """
    The names of a kept program to change for a fragment named `names`, position by
    position; None when a kept name would become two names, or a name none.
    """
    seen: dict[str | None, str | None] = {}
    for old, new in zip(kept, names, strict=True):
        if seen.setdefault(old, new) != new or (old is None) != (new is None):
            return None
    return {
        old: new
        for old, new in seen.items()
        if old is not None and new is not None and new != old
    }


def instantiate(
    found: Program, structure: Structure, names: Names
) -> tuple[list[Operation], list[SSAValue]] | None:
    """
    A fresh copy of a kept tile program over this nest's outside values (ops, finals),
    its loops named as this nest's dimensions; None when the names do not map one to one.
    """
    rename = renaming(found.names, names)
    if rename is None:
        return None
    mapper: dict[SSAValue, SSAValue] = dict(
        zip(found.body.args, structure.externals, strict=True)
    )
    ops = [op.clone(value_mapper=mapper) for op in found.body.ops]
    if rename:
        for op in ops:
            for inner in op.walk():
                for value in (*inner.results, *_block_args(inner)):
                    hint = value.name_hint
                    if hint is not None and hint in rename:
                        value.name_hint = rename[hint]
    return ops, [ops[i].results[k] for i, k in found.finals]


def _block_args(op: Operation) -> list[SSAValue]:
    return [a for region in op.regions for block in region.blocks for a in block.args]


def _put(key: Key, value: Program | Refusal | str) -> None:
    _MEMO[key] = value
    _MEMO.move_to_end(key)
    while len(_MEMO) > CAPACITY:
        _MEMO.popitem(last=False)


__all__ = [
    "Program",
    "Refusal",
    "candidate_epilogue",
    "clear",
    "disabled",
    "enabled",
    "fragment_key",
    "instantiate",
    "lookup",
    "padded",
    "record",
    "record_refusal",
    "record_remark",
    "renaming",
    "stats",
    "trace",
    "traced",
]
