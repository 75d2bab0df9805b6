"""
Running plmr's `scf` / `memref` output on xDSL's own interpreter.

xDSL's interpreter has no implementation of some `arith` / `math` ops plmr emits
(`arith.divf`, `arith.negf`, `arith.maxsi`, `math.tanh`, `math.erf`, ...);
`PlmrScalarFunctions` adds them. `run_with_xdsl` calls a function of a module with numpy
arrays (as memrefs) and returns its results as numpy arrays.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, cast

import numpy as np
from xdsl.dialects import arith
from xdsl.dialects import math as mathd
from xdsl.dialects.builtin import ModuleOp
from xdsl.interpreter import (
    Interpreter,
    InterpreterFunctions,
    PythonValues,
    impl,
    register_impls,
)
from xdsl.interpreters.arith import ArithFunctions
from xdsl.interpreters.func import FuncFunctions
from xdsl.interpreters.math import MathFunctions
from xdsl.interpreters.memref import MemRefFunctions
from xdsl.interpreters.scf import ScfFunctions
from xdsl.interpreters.shaped_array import ShapedArray
from xdsl.interpreters.utils.ptr import TypedPtr
from xdsl.ir import Operation

from plmr.values import Array

Impl = Callable[[Any, Interpreter, Operation, PythonValues], PythonValues]


def _op(fn: Callable[..., float | int]) -> Impl:
    def run(
        self: Any, interpreter: Interpreter, op: Operation, args: PythonValues
    ) -> PythonValues:
        return (fn(*args),)

    return run


def _divf(a: float, b: float) -> float:
    if b == 0:
        return math.nan if a == 0 else math.copysign(math.inf, a) * math.copysign(1.0, b)
    return a / b


def _exp(a: float) -> float:
    return math.exp(a) if a < 709.0 else math.inf


def _neg(a: float) -> float:
    return -a


def _floordiv(a: int, b: int) -> int:
    return a // b


def _mod(a: int, b: int) -> int:
    return a % b


@register_impls
class PlmrScalarFunctions(InterpreterFunctions):
    """The scalar `arith` / `math` ops plmr emits that xDSL's interpreter lacks."""

    run_divf = impl(arith.DivfOp)(_op(_divf))
    run_negf = impl(arith.NegfOp)(_op(_neg))
    run_maxsi = impl(arith.MaxSIOp)(_op(max))
    run_minsi = impl(arith.MinSIOp)(_op(min))
    run_divui = impl(arith.DivUIOp)(_op(_floordiv))
    run_remui = impl(arith.RemUIOp)(_op(_mod))
    run_sitofp = impl(arith.SIToFPOp)(_op(float))
    run_tanh = impl(mathd.TanhOp)(_op(math.tanh))
    run_erf = impl(mathd.ErfOp)(_op(math.erf))
    run_exp = impl(mathd.ExpOp)(_op(_exp))


def to_memref(array: Array) -> ShapedArray[float]:
    """A float32 numpy array as an xDSL interpreter memref."""
    flat = [float(x) for x in np.asarray(array, dtype=np.float32).reshape(-1)]
    return ShapedArray(TypedPtr.new_float32(flat), list(np.shape(array)))


def run_with_xdsl(module: ModuleOp, name: str, args: Sequence[Array]) -> list[Array]:
    """Calls `@name` with xDSL's interpreter (memref arguments and results)."""
    interpreter = Interpreter(module)
    for functions in (
        ArithFunctions(),
        ScfFunctions(),
        MemRefFunctions(),
        MathFunctions(),
        FuncFunctions(),
    ):
        interpreter.register_implementations(functions)
    interpreter.register_implementations(PlmrScalarFunctions(), override=True)
    results = interpreter.call_op(name, tuple(to_memref(a) for a in args))
    out: list[Array] = []
    for r in results:
        shaped = cast(ShapedArray[float], r)
        out.append(np.array(shaped.data, dtype=np.float32).reshape(shaped.shape))
    return out
