"""
The base classes of the `graph` ops: `GraphOp` (verification re-infers the result types)
and the elementwise unary and binary ops.

A unary elementwise op that expands to existing `arith` / `math` ops carries its whole
meaning in `MEANING` (a `UnaryMeaning`): its numpy semantics, its scalar body and the
inputs it is defined on. The reference interpreter, `convert-graph-to-loop`, the cost of
graph substitutions and the program fuzzer derive their entries for the op from it, so
such an op is its class, its place in the dialect and (for an ONNX op) one importer entry.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, ClassVar, cast

import numpy.typing as npt
from xdsl.dialects import arith
from xdsl.dialects.builtin import (
    AnyFloat,
    FloatAttr,
    TensorType,
)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    VarConstraint,
    base,
    operand_def,
    result_def,
    traits_def,
)
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from plmr.dialects.graph_shapes import (
    broadcast_shapes,
    check_same_element_type,
    element_type,
    is_float_type,
    static_shape,
    tensor_type,
)


class GraphOp(IRDLOperation, ABC):
    """
    Base of all `graph` ops: verification re-infers the result types from the operands
    and properties and compares them with the declared ones.
    """

    @abstractmethod
    def infer_result_types(self) -> Sequence[Attribute]:
        """The result types implied by the operands and properties (raises if none)."""

    def verify_(self) -> None:
        inferred = list(self.infer_result_types())
        declared = [r.type for r in self.results]
        if len(inferred) != len(declared):
            raise VerifyException(f"expected {len(inferred)} results, got {len(declared)}")
        for i, (want, got) in enumerate(zip(inferred, declared, strict=True)):
            if want != got:
                which = "result" if len(declared) == 1 else f"result {i}"
                raise VerifyException(
                    f"{which} type {got} does not match the inferred type {want}"
                )


class BinaryElementwiseOp(GraphOp, ABC):
    """Elementwise binary op with numpy broadcasting."""

    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def(TensorType)

    traits = traits_def(Pure())

    assembly_format = (
        "$lhs `,` $rhs attr-dict `:` `(` type($lhs) `,` type($rhs) `)` `->` type($result)"
    )

    def __init__(self, lhs: SSAValue | Operation, rhs: SSAValue | Operation):
        lhs_v, rhs_v = SSAValue.get(lhs), SSAValue.get(rhs)
        shape = broadcast_shapes(static_shape(lhs_v, "lhs"), static_shape(rhs_v, "rhs"))
        super().__init__(
            operands=[lhs_v, rhs_v],
            result_types=[TensorType(element_type(lhs_v), shape)],
        )

    def infer_result_types(self) -> Sequence[Attribute]:
        check_same_element_type([self.lhs, self.rhs], ["lhs", "rhs"])
        shape = broadcast_shapes(
            static_shape(self.lhs, "lhs"), static_shape(self.rhs, "rhs")
        )
        return [TensorType(element_type(self.lhs), shape)]


class Domain(Enum):
    """The inputs on which a unary function is defined and well conditioned in f32."""

    ANY = "any"
    """Every finite input."""
    POSITIVE = "positive"
    """Positive inputs only (`log`, `sqrt`)."""
    SQUASHED = "squashed"
    """Inputs of moderate size (`exp` and its kin overflow on large ones)."""


@dataclass(frozen=True)
class UnaryMeaning:
    """
    What a unary elementwise op computes, in one place:

    - `numpy`: its semantics on arrays (the reference interpreter runs it);
    - `body`: builds its scalar body from existing `arith` / `math` ops at the current
      insertion point (the loop nest of `convert-graph-to-loop`); it must compute what
      `numpy` computes, which the differential tests check;
    - `domain` and `bound`: the inputs it is defined on and a bound of |result| given a
      bound of |input| (the fuzzer draws operands and tracks magnitudes with them).
    """

    numpy: Callable[[npt.NDArray[Any]], npt.NDArray[Any]]
    body: Callable[[SSAValue], SSAValue]
    domain: Domain
    bound: Callable[[float], float]


def float_constant(value: float, like: SSAValue) -> SSAValue:
    """A scalar `arith.constant` of `value` with the (float) type of `like`."""
    return arith.ConstantOp(FloatAttr(value, cast(AnyFloat, like.type))).result


class UnaryElementwiseOp(GraphOp, ABC):
    """Elementwise unary op; the result has the operand's type."""

    T: ClassVar = VarConstraint("T", base(TensorType))

    input = operand_def(T)
    result = result_def(T)

    traits = traits_def(Pure())

    FLOAT_ONLY: ClassVar[bool] = True

    MEANING: ClassVar[UnaryMeaning | None] = None
    """The op's semantics, scalar body and domain, when it expands to `arith` / `math`;
    None for ops whose entries are registered by hand in each table."""

    assembly_format = "$input attr-dict `:` type($result)"

    def __init__(self, input: SSAValue | Operation):
        value = SSAValue.get(input)
        super().__init__(operands=[value], result_types=[value.type])

    def infer_result_types(self) -> Sequence[Attribute]:
        t = tensor_type(self.input, "input")
        if self.FLOAT_ONLY and not is_float_type(t.element_type):
            raise VerifyException(f"'{self.name}' needs a floating-point tensor, got {t}")
        return [t]
