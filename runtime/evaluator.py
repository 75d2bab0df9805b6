"""
The engine of the reference interpreters: runs `func.func` bodies op by op on numpy
values, dispatching each op to the implementation registered for its class.

The implementations live with their dialects' semantics (`reference` for `graph`,
`loop_ops`, `tile_ops`) and are registered by `plmr.runtime.reference`, which is where
`ReferenceEvaluator` is imported from; this module imports none of them, so they can all
import it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar, cast

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    ModuleOp,
    TensorType,
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
        # The evaluator dispatches on `type(op)`, so `fn` only ever receives a `cls`.
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


_OP_IMPLS: dict[type[Operation], OpImpl] = {}
_EVAL_IMPLS: dict[type[Operation], EvalImpl] = {}


def register_op_impls(impls: Mapping[type[Operation], OpImpl]) -> None:
    """Makes `impls` the default implementation of their ops in every new evaluator."""
    _OP_IMPLS.update(impls)


def register_eval_impls(impls: Mapping[type[Operation], EvalImpl]) -> None:
    """Like `register_op_impls`, for implementations that need the evaluator."""
    _EVAL_IMPLS.update(impls)


def _location(op: Operation) -> str:
    parent = op.parent_op()
    while parent is not None and not isinstance(parent, func.FuncOp):
        parent = parent.parent_op()
    where = f"in @{parent.sym_name.data}" if parent is not None else ""
    names = ", ".join(f"%{r.name_hint}" for r in op.results if r.name_hint)
    return f"'{op.name}'{f' ({names})' if names else ''} {where}".strip()


class ReferenceEvaluator:
    """
    Runs `func.func` bodies on numpy arrays: `graph` ops, `loop` nests, `tile` ops (with
    their regions), the `arith` / `math` ops that index computations and `tile.map`
    bodies use, and `func.call` between functions.

    `lead` is a shape prepended to every value: with `lead = (H, W)` one evaluation runs
    the same program on H×W cores at once (the mesh runtime's SPMD mode); tensors then
    have shape `lead + type shape` and indices shape `lead` (or are uniform scalars).
    Subclasses observe every op through `observe` (costs, memory traffic, timing).
    """

    def __init__(
        self,
        module: ModuleOp | None = None,
        impls: dict[type[Operation], OpImpl] | None = None,
        *,
        lead: tuple[int, ...] = (),
    ):
        if not _OP_IMPLS:
            raise PlmrError(
                "no op semantics are registered: import ReferenceEvaluator from "
                "plmr.runtime.reference"
            )
        self.module = module
        self.lead = lead
        self.impls: dict[type[Operation], OpImpl] = dict(_OP_IMPLS)
        if impls is not None:
            self.impls.update(impls)
        self.eval_impls: dict[type[Operation], EvalImpl] = dict(_EVAL_IMPLS)
        self.env_stack: list[dict[SSAValue, Any]] = []
        self.owned_buffers: set[int] = set()
        """Ids of arrays this evaluator created and may update in place."""

    def function(self, name: str) -> func.FuncOp:
        if self.module is None:
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
        """Runs a block; returns the operands of its terminator (return or yield)."""
        env: dict[SSAValue, Any] = dict(zip(block.args, args, strict=True))
        self.env_stack.append(env)
        try:
            for op in block.ops:
                operands = [self.lookup(v) for v in op.operands]
                if op.has_trait(IsTerminator):
                    return operands
                results = self.run_op(op, operands)
                for value, result in zip(op.results, results, strict=True):
                    env[value] = result
        finally:
            self.env_stack.pop()
        raise PlmrError("a block ended without a terminator")

    def lookup(self, value: SSAValue) -> Any:
        for env in reversed(self.env_stack):
            if value in env:
                return env[value]
        raise PlmrError(f"value %{value.name_hint or '?'} used before it was computed")

    def observe(self, op: Operation, operands: list[Any], results: list[Any]) -> None:
        """Called after every op; subclasses count costs here."""

    def run_op(self, op: Operation, operands: list[Any]) -> list[Any]:
        if isinstance(op, func.CallOp):
            return self.run(self.function(op.callee.string_value()), operands)
        eval_impl = self.eval_impls.get(type(op))
        impl = self.impls.get(type(op))
        if eval_impl is None and impl is None:
            raise PlmrError(
                f"{_location(op)}: no reference semantics for '{op.name}' "
                "(lower it or run the program at a level plmr can execute)"
            )
        try:
            if eval_impl is not None:
                results = eval_impl(self, op, operands)
            else:
                assert impl is not None
                if self.lead:
                    raise PlmrError(f"'{op.name}' cannot run inside a per-core program")
                results = impl(op, operands)
        except PlmrError as e:
            raise PlmrError(f"{_location(op)}: {e}") from e
        out: list[Any] = []
        for result, value in zip(results, op.results, strict=True):
            out.append(self._check_result(op, value, result))
        self.observe(op, operands, out)
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
