"""
Typed access to IR whose kind a verified program fixes: a block's terminator, a value's type.

A verified program already guarantees that a `tile.for` body ends in `tile.yield` or that a
distributed value has a `!mesh.dist` type; these helpers give that fact a static type. On a
program that breaks it they raise one `PlmrError` naming what was expected, what was
found and where, instead of failing later on a missing attribute.
"""

from __future__ import annotations

from typing import TypeVar

from xdsl.ir import Attribute, Block, Operation, SSAValue

from plmr.errors import PlmrError

OpT = TypeVar("OpT", bound=Operation)
AttrT = TypeVar("AttrT", bound=Attribute)
T = TypeVar("T")


def _where(block: Block) -> str:
    parent = block.parent_op()
    return "a detached block" if parent is None else f"the body of '{parent.name}'"


def terminator(block: Block, kind: type[OpT]) -> OpT:
    """The last op of `block` as a `kind`; PlmrError naming the parent op otherwise."""
    last = block.last_op
    if not isinstance(last, kind):
        found = "nothing" if last is None else f"'{last.name}'"
        raise PlmrError(
            f"{_where(block)} ends in {found}, expected '{kind.name}' as its terminator; "
            "run the verifier on the program (xdsl-opt) to find where it was built"
        )
    return last


def type_of(value: SSAValue, kind: type[AttrT]) -> AttrT:
    """The type of `value` as a `kind` (e.g. `TensorType`); PlmrError otherwise."""
    t = value.type
    if not isinstance(t, kind):
        owner = value.owner
        at = f"'{owner.name}'" if isinstance(owner, Operation) else _where(owner)
        raise PlmrError(
            f"a value of {at} has type {t}, expected a {kind.name}; "
            "the program was not verified at this level"
        )
    return t


def expect(obj: object, kind: type[T], what: str) -> T:
    """`obj` as a `kind`; PlmrError naming `what` it is otherwise."""
    if not isinstance(obj, kind):
        raise PlmrError(f"{what} is a {type(obj).__name__}, expected a {kind.__name__}")
    return obj
