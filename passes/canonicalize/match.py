"""Matching helpers shared by the `graph-canonicalize` patterns."""

from __future__ import annotations

from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
from xdsl.ir import Attribute, Operation, SSAValue

from plmr.dialects import graph
from plmr.values import constant_attr, dense_to_numpy

Array = npt.NDArray[Any]
OpT = TypeVar("OpT", bound=Operation)


def owner_of(value: SSAValue, kind: type[OpT]) -> OpT | None:
    """The op of type `kind` that defines `value`, if any."""
    owner = value.owner
    return owner if isinstance(owner, kind) else None


def shape_of(value: SSAValue) -> tuple[int, ...]:
    return graph.static_shape(value, "value")


def elt_of(value: SSAValue) -> Attribute:
    return graph.element_type(value)


def const_array(value: SSAValue) -> Array | None:
    """The value of `value` if a `graph.constant` defines it."""
    c = owner_of(value, graph.ConstantOp)
    return None if c is None else dense_to_numpy(c.value)


def scalar_const(value: SSAValue) -> float | None:
    """
    The common value of a constant whose elements are all equal (a splat), if any; a
    float as the shortest decimal that rounds to it in its own precision (`1e-06`, not
    the `9.99999997e-07` an f32 holds), so it prints as written and rounds back.
    """
    array = const_array(value)
    if array is None or array.size == 0:
        return None
    first = array.reshape(-1)[0]
    if not bool(np.all(array == first)):
        return None
    return float(str(first)) if array.dtype.kind == "f" else float(first)


def commuted(op: Operation) -> tuple[tuple[SSAValue, SSAValue], ...]:
    """The operand orders in which a binary op can be read: both if commutative."""
    lhs, rhs = op.operands[0], op.operands[1]
    if isinstance(op, graph.AddOp | graph.MulOp):
        return ((lhs, rhs), (rhs, lhs))
    return ((lhs, rhs),)


def constant_op(array: Array, elt: Attribute) -> graph.ConstantOp:
    """A `graph.constant` of element type `elt` holding `array`."""
    return graph.ConstantOp(constant_attr(np.asarray(array), elt))


def trailing_axes(axes: tuple[int, ...], rank: int) -> int | None:
    """The first axis if `axes` (normalised) are exactly the last few dimensions."""
    if not axes or tuple(sorted(axes)) != tuple(range(rank - len(axes), rank)):
        return None
    return rank - len(axes)
