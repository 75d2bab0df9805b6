"""
Structural keys of IR fragments: two fragments get equal keys when they are the same ops
with the same attributes and types, wired the same way, and read outside values that
look the same to the caller (`outside`). Values are numbered by position, so the names
a fragment's values print with, and which objects they are, do not matter.

The lowering searches memoise per-nest decisions under such keys
(`tile_to_mesh.memo`): a blocking trial that leaves a nest as it was finds the nest's
decision instead of making it again.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence

from xdsl.ir import Operation, SSAValue

Key = tuple[Hashable, ...]


class Structure:
    """
    Builds the key of a sequence of ops (each with its regions): `outside(value)`
    describes a value defined outside the fragment; the external values are listed in
    first-use order (`externals`) and referred to by that position.
    """

    def __init__(self, outside: Callable[[SSAValue], Hashable]):
        self.outside = outside
        self.numbers: dict[SSAValue, int] = {}
        self.externals: list[SSAValue] = []
        self._external_index: dict[SSAValue, int] = {}
        self.ops: list[Operation] = []
        """Every op of the fragment, in the order of the key (pre-order)."""

    def key(self, ops: Iterable[Operation]) -> Key:
        parts: list[Hashable] = []
        for op in ops:
            self._op(op, parts)
        return tuple(parts)

    def _value(self, value: SSAValue) -> Hashable:
        n = self.numbers.get(value)
        if n is not None:
            return n
        e = self._external_index.get(value)
        if e is None:
            e = len(self.externals)
            self._external_index[value] = e
            self.externals.append(value)
            return ("ext", e, self.outside(value))
        return ("ext", e)

    def _define(self, values: Sequence[SSAValue]) -> tuple[Hashable, ...]:
        for v in values:
            self.numbers[v] = len(self.numbers)
        return tuple(v.type for v in values)

    def _op(self, op: Operation, parts: list[Hashable]) -> None:
        self.ops.append(op)
        parts.append(
            (
                op.name,
                tuple(self._value(v) for v in op.operands),
                tuple(sorted(op.properties.items())),
                tuple(sorted(op.attributes.items())),
                self._define(op.results),
                tuple(
                    tuple(len(block.ops) for block in region.blocks)
                    for region in op.regions
                ),
            )
        )
        for region in op.regions:
            for block in region.blocks:
                parts.append(self._define(block.args))
                for inner in block.ops:
                    self._op(inner, parts)


__all__ = ["Key", "Structure"]
