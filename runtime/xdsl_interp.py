"""
Running plmr's `scf` / `memref` output on xDSL's own interpreter.

xDSL's interpreter has no implementation of some `arith` / `math` ops plmr emits
(`arith.divf`, `arith.negf`, `arith.maxsi`, `math.tanh`, `math.erf`, ...);
`PlmrScalarFunctions` registers for them the numpy semantics the reference evaluator
uses (`tile_ops.ELEMENTWISE`, `tile_ops.convert_to`), applied to the interpreter's Python
scalars. `run_with_xdsl` calls a function of a module with numpy arrays (as memrefs) and
returns its results as numpy arrays.
"""

from __future__ import annotations

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

from plmr.runtime.tile_ops import ELEMENTWISE, convert_to
from plmr.values import Array

Impl = Callable[[Any, Interpreter, Operation, PythonValues], PythonValues]


def _scalar(cls: type[Operation]) -> Impl:
    """The `ELEMENTWISE` semantics of `cls` on Python scalars (IEEE: x/0 is ±inf)."""
    fn = ELEMENTWISE[cls]

    def run(
        self: Any, interpreter: Interpreter, op: Operation, args: PythonValues
    ) -> PythonValues:
        with np.errstate(all="ignore"):
            return (np.asarray(fn(*args)).item(),)

    return run


def _convert(
    self: Any, interpreter: Interpreter, op: Operation, args: PythonValues
) -> PythonValues:
    return (convert_to(args[0], op.results[0].type).item(),)


@register_impls
class PlmrScalarFunctions(InterpreterFunctions):
    """The scalar `arith` / `math` ops plmr emits that xDSL's interpreter lacks."""

    run_divf = impl(arith.DivfOp)(_scalar(arith.DivfOp))
    run_negf = impl(arith.NegfOp)(_scalar(arith.NegfOp))
    run_maxsi = impl(arith.MaxSIOp)(_scalar(arith.MaxSIOp))
    run_minsi = impl(arith.MinSIOp)(_scalar(arith.MinSIOp))
    run_divui = impl(arith.DivUIOp)(_scalar(arith.DivUIOp))
    run_remui = impl(arith.RemUIOp)(_scalar(arith.RemUIOp))
    run_sitofp = impl(arith.SIToFPOp)(_convert)
    run_tanh = impl(mathd.TanhOp)(_scalar(mathd.TanhOp))
    run_erf = impl(mathd.ErfOp)(_scalar(mathd.ErfOp))
    run_exp = impl(mathd.ExpOp)(_scalar(mathd.ExpOp))


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
