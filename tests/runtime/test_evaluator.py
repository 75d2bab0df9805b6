"""
The evaluator engine on xDSL's interpreter framework: semantics are `InterpreterFunctions`
(an `@impl` per op, overridable per evaluator), observers are `Interpreter.Listener`s, and
xDSL's own interpreter runs the scalar `arith` / `math` ops with the same numpy semantics.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects import arith
from xdsl.dialects.arith import Arith
from xdsl.dialects.builtin import Builtin, ModuleOp
from xdsl.dialects.func import Func
from xdsl.dialects.math import Math
from xdsl.interpreter import (
    Interpreter,
    InterpreterFunctions,
    PythonValues,
    impl,
    register_impls,
)
from xdsl.interpreters.arith import ArithFunctions
from xdsl.interpreters.func import FuncFunctions
from xdsl.ir import Operation
from xdsl.parser import Parser

from plmr.errors import PlmrError
from plmr.runtime.reference import ReferenceEvaluator
from plmr.runtime.xdsl_interp import PlmrScalarFunctions


def parse(source: str) -> ModuleOp:
    ctx = Context()
    for dialect in (Builtin, Func, Arith, Math):
        ctx.load_dialect(dialect)
    module = Parser(ctx, source).parse_module()
    module.verify()
    return module


SOURCE = """
func.func @f(%a: f32, %b: f32) -> (f32, f32) {
  %s = arith.addf %a, %b : f32
  %p = arith.mulf %s, %a : f32
  func.return %s, %p : f32, f32
}
func.func @g(%a: f32, %b: f32) -> f32 {
  %s, %p = func.call @f(%a, %b) : (f32, f32) -> (f32, f32)
  %d = arith.subf %p, %s : f32
  func.return %d : f32
}
"""


def test_listeners_see_every_op_with_checked_results() -> None:
    seen: list[tuple[str, list[Any], list[Any]]] = []

    class Trace(Interpreter.Listener):
        def will_interpret_op(self, op: Operation, args: PythonValues) -> None:
            seen.append((f"will {op.name}", list(args), []))

        def did_interpret_op(self, op: Operation, results: PythonValues) -> None:
            seen.append((f"did {op.name}", [], list(results)))

    module = parse(SOURCE)
    ev = ReferenceEvaluator(module, listeners=[Trace()])
    (d,) = ev.run(ev.function("g"), [np.float32(2.0), np.float32(3.0)])
    assert float(d) == (2 + 3) * 2 - (2 + 3)
    names = [name for name, _, _ in seen]
    # Terminators are not ops the listeners see: their owner interprets them.
    assert names == [
        "will func.call",
        "will arith.addf",
        "did arith.addf",
        "will arith.mulf",
        "did arith.mulf",
        "did func.call",
        "will arith.subf",
        "did arith.subf",
    ]
    # Results are numpy values of the op's result type.
    assert all(
        isinstance(r, np.ndarray) and r.dtype == np.float32 for _, _, rs in seen for r in rs
    )


def test_functions_override_the_default_semantics() -> None:
    @register_impls
    class Swapped(InterpreterFunctions):
        @impl(arith.AddfOp)
        def run_addf(
            self, interpreter: Interpreter, op: arith.AddfOp, args: PythonValues
        ) -> PythonValues:
            return (args[0] - args[1],)

    module = parse(SOURCE)
    ev = ReferenceEvaluator(module, [Swapped()])
    s, p = ev.run(ev.function("f"), [np.float32(2.0), np.float32(3.0)])
    assert (float(s), float(p)) == (-1.0, -2.0)
    assert ev.implements(arith.AddfOp)
    assert not ev.implements(arith.BitcastOp)


def test_an_op_without_semantics_is_one_clear_error() -> None:
    module = parse(
        """
        func.func @f(%a: i32) -> f32 {
          %b = arith.bitcast %a : i32 to f32
          func.return %b : f32
        }
        """
    )
    ev = ReferenceEvaluator(module)
    with pytest.raises(PlmrError, match=r"'arith.bitcast'.*in @f: no reference semantics"):
        ev.run(ev.function("f"), [np.int32(1)])


def test_xdsl_interpreter_runs_the_shared_scalar_semantics() -> None:
    module = parse(
        """
        func.func @f(%a: f32, %b: f32, %i: i64, %j: i64) -> (f32, f32, i64, i64, f32, f32) {
          %d = arith.divf %a, %b : f32
          %n = arith.negf %a : f32
          %u = arith.divui %i, %j : i64
          %r = arith.remui %i, %j : i64
          %e = math.exp %a : f32
          %c = arith.sitofp %i : i64 to f32
          func.return %d, %n, %u, %r, %e, %c : f32, f32, i64, i64, f32, f32
        }
        """
    )
    interpreter = Interpreter(module)
    interpreter.register_implementations(ArithFunctions())
    interpreter.register_implementations(FuncFunctions())
    interpreter.register_implementations(PlmrScalarFunctions(), override=True)
    d, n, u, r, e, c = interpreter.call_op("f", (1.5, 0.0, -4, 3))
    assert d == math.inf
    assert n == -1.5
    # divui / remui read the signless operands as unsigned.
    assert (u, r) == ((2**64 - 4) // 3, (2**64 - 4) % 3)
    assert e == pytest.approx(math.exp(1.5))
    assert c == -4.0
    assert all(type(v) in (int, float) for v in (d, n, u, r, e, c))
