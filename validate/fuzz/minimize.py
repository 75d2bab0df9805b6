"""
Delta debugging of a failing fuzz program: drop results, ops and arguments while the
program still fails the same way (same outcome, same pass; for a crash, the same
exception type).

Dropping an op replaces its results by new function arguments of the same types, so
every candidate is a valid program; ops left without uses are then erased.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from xdsl.dialects import func
from xdsl.dialects.builtin import FunctionType, ModuleOp
from xdsl.ir import Operation
from xdsl.transforms.dead_code_elimination import region_dce

from plmr.dialects import graph
from plmr.dialects.context import parse_module
from plmr.dialects.narrow import terminator
from plmr.dialects.printing import module_text
from plmr.validate.fuzz.driver import Case, Config, Outcome, run_case


def _main(module: ModuleOp) -> func.FuncOp:
    return next(op for op in module.ops if isinstance(op, func.FuncOp))


def _retype(fn: func.FuncOp) -> None:
    block = fn.body.block
    ret = terminator(block, func.ReturnOp)
    fn.function_type = FunctionType.from_lists(
        [a.type for a in block.args], [v.type for v in ret.operands]
    )
    fn.arg_attrs = None
    fn.res_attrs = None


def _drop_result(text: str, i: int) -> str | None:
    module = parse_module(text, "<minimize>")
    fn = _main(module)
    ret = terminator(fn.body.block, func.ReturnOp)
    if len(ret.operands) <= 1:
        return None
    values = [v for j, v in enumerate(ret.operands) if j != i]
    new = func.ReturnOp(*values)
    fn.body.block.insert_op_before(new, ret)
    ret.detach()
    ret.erase()
    region_dce(fn.body)
    _retype(fn)
    return module_text(module)


def _return_op(text: str, i: int) -> str | None:
    """Returns only the results of the `i`-th op (what comes after it becomes dead)."""
    module = parse_module(text, "<minimize>")
    fn = _main(module)
    block = fn.body.block
    ops = [op for op in block.ops if not isinstance(op, func.ReturnOp)]
    ret = terminator(block, func.ReturnOp)
    if i >= len(ops) or isinstance(ops[i], graph.ConstantOp) or not ops[i].results:
        return None
    new = func.ReturnOp(*ops[i].results)
    block.insert_op_before(new, ret)
    ret.detach()
    ret.erase()
    region_dce(fn.body)
    _retype(fn)
    return module_text(module)


def _drop_op(text: str, i: int) -> str | None:
    """Replaces the results of the `i`-th op by new arguments."""
    module = parse_module(text, "<minimize>")
    fn = _main(module)
    block = fn.body.block
    ops = [op for op in block.ops if not isinstance(op, func.ReturnOp)]
    if i >= len(ops):
        return None
    op: Operation = ops[i]
    if isinstance(op, graph.ConstantOp) and not op.results[0].uses:
        return None
    for r in op.results:
        if not r.uses:
            continue
        arg = block.insert_arg(r.type, len(block.args))
        r.replace_all_uses_with(arg)
    op.detach()
    op.erase()
    region_dce(fn.body)
    _retype(fn)
    return module_text(module)


def _drop_arg(text: str, i: int) -> str | None:
    module = parse_module(text, "<minimize>")
    fn = _main(module)
    block = fn.body.block
    if i >= len(block.args) or block.args[i].uses:
        return None
    block.erase_arg(block.args[i])
    _retype(fn)
    return module_text(module)


def _count(text: str) -> tuple[int, int, int]:
    module = parse_module(text, "<minimize>")
    block = _main(module).body.block
    ret = block.last_op
    assert ret is not None
    return len(ret.operands), len(list(block.ops)) - 1, len(block.args)


def minimize(
    text: str,
    config: Config,
    outcome: Outcome,
    tolerance: float,
    budget: float = 120.0,
    fails: Callable[[str], bool] | None = None,
) -> tuple[str, Outcome]:
    """The smallest program found that still fails like `outcome`, and its outcome."""
    deadline = time.monotonic() + budget
    best, best_outcome = text, outcome

    def still_fails(candidate: str) -> Outcome | None:
        if fails is not None:
            return outcome if fails(candidate) else None
        got = run_case(candidate, config, tolerance)
        return got if outcome.same_failure(got) else None

    reductions: tuple[Callable[[str, int], str | None], ...] = (
        _drop_result,
        _return_op,
        _drop_op,
        _drop_arg,
    )
    progress = True
    while progress and time.monotonic() < deadline:
        progress = False
        for reduce in reductions:
            results, ops, args = _count(best)
            n = {_drop_result: results, _drop_arg: args}.get(reduce, ops)
            # Returning an early op first (big cuts), otherwise from the end.
            order = range(n) if reduce is _return_op else reversed(range(n))
            for i in order:
                if time.monotonic() >= deadline:
                    break
                try:
                    candidate = reduce(best, i)
                except Exception:
                    candidate = None
                if candidate is None or candidate == best:
                    continue
                got = still_fails(candidate)
                if got is not None:
                    best, best_outcome = candidate, got
                    progress = True
    return best, best_outcome


def minimize_task(case: Case, outcome: Outcome, tolerance: float, budget: float) -> object:
    """`minimize` as a worker task."""
    return minimize(case.text, case.config, outcome, tolerance, budget)


__all__ = ["minimize", "minimize_task"]
