"""
The engine of the reference interpreters, on xDSL's interpreter framework: a
`ReferenceEvaluator` is an `xdsl.interpreter.Interpreter` that runs `func.func` bodies op
by op on numpy values (kept as numpy arrays, so every op stays one vectorised call).

Each level's semantics is a set of `InterpreterFunctions` (one `@impl` per op class):
`graph` in `reference`, `loop` in `loop_ops`, `tile` and the `arith` / `math` ops it uses
in `tile_ops`. They are written as typed tables (`EvalTable`, `OpTable`) next to their
numpy functions and turned into `InterpreterFunctions` by `interpreter_functions`;
`plmr.runtime.reference` registers them with `register_functions`, which is why
`ReferenceEvaluator` is imported from there. This module imports none of them, so they
can all import it.

Observers (memory traffic, op traces) are `Interpreter.Listener`s passed as `listeners`:
they see every op that is not a terminator with its operands before and its (checked)
results after it runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar, cast

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.interpreter import (
    Interpreter,
    InterpreterFunctions,
    OpImplResult,
    PythonValues,
    impl,
    impl_callable,
    register_impls,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.traits import IsTerminator

from plmr.dialects import graph
from plmr.errors import PlmrError
from plmr.values import Array, numpy_dtype, tensor_dtype

OpImpl = Callable[[Operation, list[Array]], list[Array]]
"""A pure implementation: (op, operand arrays) -> result arrays."""

EvalImpl = Callable[["ReferenceEvaluator", Operation, list[Any]], list[Any]]
"""An implementation that needs the evaluator (regions, vectorised leading dims)."""

OpT = TypeVar("OpT", bound=Operation)


class EvalTable:
    """
    Evaluator implementations by op class, each typed by the class it is registered for
    (`@TILE_IMPLS.impl(tile.LoadOp)` over `def _load(ev, op: tile.LoadOp, args)`).
    `interpreter_functions` turns the table into xDSL `InterpreterFunctions`.
    """

    def __init__(self) -> None:
        self._impls: dict[type[Operation], EvalImpl] = {}

    def add(
        self,
        cls: type[OpT],
        fn: Callable[[ReferenceEvaluator, OpT, list[Any]], list[Any]],
    ) -> None:
        """Registers `fn` for ops of exactly the class `cls`."""
        if cls in self._impls:
            raise ValueError(f"'{cls.__name__}' has two evaluator implementations")
        # The interpreter dispatches on `type(op)`, so `fn` only ever receives a `cls`.
        self._impls[cls] = cast(EvalImpl, fn)

    def impl(
        self, *classes: type[OpT]
    ) -> Callable[
        [Callable[[ReferenceEvaluator, OpT, list[Any]], list[Any]]],
        Callable[[ReferenceEvaluator, OpT, list[Any]], list[Any]],
    ]:
        """Decorator: registers the function for each of `classes`."""

        def register(
            fn: Callable[[ReferenceEvaluator, OpT, list[Any]], list[Any]],
        ) -> Callable[[ReferenceEvaluator, OpT, list[Any]], list[Any]]:
            for cls in classes:
                self.add(cls, fn)
            return fn

        return register

    def as_dict(self) -> dict[type[Operation], EvalImpl]:
        """A copy of the table as a dict from op class to implementation."""
        return dict(self._impls)


def _eval_method(fn: EvalImpl) -> Callable[..., PythonValues]:
    def run(
        self: InterpreterFunctions,
        interpreter: Interpreter,
        op: Operation,
        args: PythonValues,
    ) -> PythonValues:
        return tuple(fn(cast(ReferenceEvaluator, interpreter), op, list(args)))

    return run


def _pure_method(fn: OpImpl) -> Callable[..., PythonValues]:
    def run(
        self: InterpreterFunctions,
        interpreter: Interpreter,
        op: Operation,
        args: PythonValues,
    ) -> PythonValues:
        if cast(ReferenceEvaluator, interpreter).lead:
            raise PlmrError(f"'{op.name}' cannot run inside a per-core program")
        return tuple(fn(op, list(args)))

    return run


def interpreter_functions(
    name: str,
    evaluated: Mapping[type[Operation], EvalImpl] | None = None,
    pure: Mapping[type[Operation], OpImpl] | None = None,
) -> type[InterpreterFunctions]:
    """
    An `InterpreterFunctions` class named `name` with one `@impl` per op class of
    `evaluated` (implementations that take the evaluator) and of `pure` (implementations
    of the values alone, which run on the host only).
    """
    methods: dict[str, Any] = {}
    for cls, fn in (evaluated or {}).items():
        methods[f"run_{cls.name}"] = impl(cls)(_eval_method(fn))
    for cls, fn in (pure or {}).items():
        key = f"run_{cls.name}"
        if key in methods:
            raise ValueError(f"'{cls.__name__}' has two evaluator implementations")
        methods[key] = impl(cls)(_pure_method(fn))
    return register_impls(type(name, (InterpreterFunctions,), methods))


@register_impls
class CallFunctions(InterpreterFunctions):
    """`func.func` as a callable and `func.call` between the functions of the module."""

    @impl_callable(func.FuncOp)
    def call_func(
        self, interpreter: Interpreter, op: func.FuncOp, args: PythonValues
    ) -> PythonValues:
        return tuple(cast(ReferenceEvaluator, interpreter).run(op, list(args)))

    @impl(func.CallOp)
    def run_call(
        self, interpreter: Interpreter, op: func.CallOp, args: PythonValues
    ) -> PythonValues:
        ev = cast(ReferenceEvaluator, interpreter)
        return tuple(ev.run(ev.function(op.callee.string_value()), list(args)))


_FUNCTIONS: list[type[InterpreterFunctions]] = [CallFunctions]


def register_functions(*functions: type[InterpreterFunctions]) -> None:
    """Makes `functions` part of every new evaluator."""
    _FUNCTIONS.extend(functions)


def _location(op: Operation) -> str:
    parent = op.parent_op()
    while parent is not None and not isinstance(parent, func.FuncOp):
        parent = parent.parent_op()
    where = f"in @{parent.sym_name.data}" if parent is not None else ""
    names = ", ".join(f"%{r.name_hint}" for r in op.results if r.name_hint)
    return f"'{op.name}'{f' ({names})' if names else ''} {where}".strip()


class ReferenceEvaluator(Interpreter):
    """
    Runs `func.func` bodies on numpy arrays: `graph` ops, `loop` nests, `tile` ops (with
    their regions), the `arith` / `math` ops that index computations and `tile.map`
    bodies use, and `func.call` between functions.

    `lead` is a shape prepended to every value: with `lead = (H, W)` one evaluation runs
    the same program on H×W cores at once (the mesh runtime's SPMD mode); tensors then
    have shape `lead + type shape` and indices shape `lead` (or are uniform scalars).
    `listeners` observe every op (costs, memory traffic, traces); `functions` are
    `InterpreterFunctions` registered over the default ones (`override`).
    """

    def __init__(
        self,
        module: ModuleOp | None = None,
        functions: Iterable[InterpreterFunctions] = (),
        *,
        lead: tuple[int, ...] = (),
        listeners: Sequence[Interpreter.Listener] = (),
    ):
        if len(_FUNCTIONS) == 1:
            raise PlmrError(
                "no op semantics are registered: import ReferenceEvaluator from "
                "plmr.runtime.reference"
            )
        super().__init__(
            module if module is not None else ModuleOp([]), listeners=tuple(listeners)
        )
        self.has_module = module is not None
        self.lead = lead
        for functions_type in _FUNCTIONS:
            self.register_implementations(functions_type())
        for extra in functions:
            self.register_implementations(extra, override=True)
        self.owned_buffers: set[int] = set()
        """Ids of arrays this evaluator created and may update in place."""

    def implements(self, cls: type[Operation]) -> bool:
        """Whether ops of class `cls` have semantics in this evaluator."""
        return cls in self._dispatch()

    def _dispatch(self) -> Mapping[type[Operation], tuple[InterpreterFunctions, Any]]:
        # xDSL's own registry of `@impl`s. Ops are dispatched from it directly rather
        # than through `_InterpreterFunctionImpls.run`, which attaches a print of the
        # whole module to every error an implementation raises (plmr reports the op).
        return self._impls._impl_dict  # pyright: ignore[reportPrivateUsage]

    def call_impl(self, op: Operation, operands: list[Any]) -> list[Any]:
        """Runs the `@impl` registered for `op` alone (no result checks, no listeners)."""
        functions, run = self._dispatch()[type(op)]
        return list(run(functions, self, op, tuple(operands)).values)

    def function(self, name: str) -> func.FuncOp:
        if not self.has_module:
            raise PlmrError(f"no module to look up @{name} in")
        for op in self.module.ops:
            if isinstance(op, func.FuncOp) and op.sym_name.data == name:
                return op
        raise PlmrError(f"no function @{name} in the module")

    def run(self, fn: func.FuncOp, args: Sequence[Array]) -> list[Array]:
        inputs = fn.function_type.inputs.data
        if len(args) != len(inputs):
            raise PlmrError(
                f"@{fn.sym_name.data} takes {len(inputs)} arguments, got {len(args)}"
            )
        if not fn.body.blocks:
            raise PlmrError(f"@{fn.sym_name.data} is a declaration without a body")
        arrays = [np.asarray(a) for a in args]
        # The caller still holds its arrays: `tile.store` must never update them in place.
        self.owned_buffers.difference_update(id(a) for a in arrays)
        return self.run_block(fn.body.block, arrays)

    def run_block(self, block: Block, args: Sequence[Any]) -> list[Any]:
        """
        Runs a block in a new scope; returns the operands of its terminator (return or
        yield), which the op that owns the block interprets.
        """
        self.push_scope()
        try:
            self.set_values(zip(block.args, args, strict=True))
            for op in block.ops:
                operands = [self.lookup(v) for v in op.operands]
                if op.has_trait(IsTerminator):
                    return operands
                results = self.evaluate_op(op, operands)
                self.set_values(zip(op.results, results, strict=True))
        finally:
            self.pop_scope()
        raise PlmrError("a block ended without a terminator")

    def lookup(self, value: SSAValue) -> Any:
        try:
            return self._ctx[value]
        except KeyError:
            raise PlmrError(
                f"value %{value.name_hint or '?'} used before it was computed"
            ) from None

    def _run_op(self, op: Operation, inputs: PythonValues) -> OpImplResult:
        return OpImplResult(tuple(self.evaluate_op(op, list(inputs))), None)

    def evaluate_op(self, op: Operation, operands: list[Any]) -> list[Any]:
        """Runs `op` on its operand values with its registered `@impl`; checks results."""
        for listener in self.listeners:
            listener.will_interpret_op(op, tuple(operands))
        entry = self._dispatch().get(type(op))
        if entry is None:
            raise PlmrError(
                f"{_location(op)}: no reference semantics for '{op.name}' "
                "(lower it or run the program at a level plmr can execute)"
            )
        functions, run = entry
        try:
            results = run(functions, self, op, tuple(operands)).values
        except PlmrError as e:
            raise PlmrError(f"{_location(op)}: {e}") from e
        out: list[Any] = []
        for result, value in zip(results, op.results, strict=True):
            out.append(self._check_result(op, value, result))
        for listener in self.listeners:
            listener.did_interpret_op(op, tuple(out))
        return out

    def _check_result(self, op: Operation, value: SSAValue, result: Any) -> Any:
        t = value.type
        if not isinstance(t, TensorType):
            try:
                return np.asarray(result).astype(numpy_dtype(t), copy=False)
            except PlmrError:
                return result
        want = self.lead + graph.static_shape(value, "result")
        arr = np.asarray(result)
        if arr.shape != want:
            raise PlmrError(f"{_location(op)}: produced shape {arr.shape}, expected {want}")
        return arr.astype(tensor_dtype(cast(Attribute, t)), copy=False)
