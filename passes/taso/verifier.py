"""
Checking graph substitution rules: exact-integer random tests and Z3 proofs.

- **Random tests** (every rule): both sides are built as `graph` functions at random sizes
  for the rule's symbols (including 1), run with plmr's reference semantics on random
  integers held exactly in float64 (avg-pooling inputs are multiples of 9 per pool), and
  compared bit for bit.
- **Z3 proofs** (where they finish): both sides are evaluated symbolically at small
  concrete sizes, every input element an integer variable (a real one when a side
  averages) and the scalar a variable too; relu and max-pooling are `If` terms. A rule is
  proved when no output element can differ (`unsat`), refuted with a counterexample when
  one can (`sat`), and `unknown` on a timeout.
- **Mutants**: rules with the operands of a non-commutative op swapped or an axis changed,
  which both checks must reject.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt
from xdsl.dialects.builtin import Float64Type, ModuleOp
from xdsl.utils.exceptions import VerifyException

from plmr.passes.taso.ops import COMMUTATIVE, param_int, param_ints
from plmr.passes.taso.rules import (
    INPUT,
    PatOp,
    Pattern,
    Ref,
    Rule,
    identity_array,
    map_params,
    map_shape,
    rule_functions,
)
from plmr.passes.taso.semantics import conv_same
from plmr.runtime.reference import evaluate_function

Array = npt.NDArray[Any]

EXACT_LIMIT = 2.0**52
"""Largest magnitude float64 holds every integer below exactly."""


@dataclass(frozen=True)
class RandomResult:
    ok: bool
    shapes: int
    """Number of size assignments tested."""
    detail: str = ""


def _sizes(rule: Rule, rng: np.random.Generator, trial: int) -> dict[int, int]:
    symbols = sorted(rule.symbols)
    if trial == 0:
        return {s: 3 + i % 3 for i, s in enumerate(symbols)}
    low = 1 if trial % 2 == 1 else 2
    return {s: int(rng.integers(low, 6)) for s in symbols}


def _pointwise_shape(rng: np.random.Generator, trial: int) -> tuple[int, ...]:
    rank = 1 + trial % 3
    return tuple(int(d) for d in rng.integers(1, 5, size=rank))


def _avg_pools(rule: Rule) -> int:
    return sum(
        1
        for side in rule.sides()
        for op in side.ops
        if op.kind == "pool" and op.params[0] == "avg"
    )


def random_test(rule: Rule, trials: int = 3, seed: int = 0) -> RandomResult:
    """Runs both sides on random exact integers at `trials` size assignments."""
    rng = np.random.default_rng(seed)
    pool_scale = 9.0 ** _avg_pools(rule)
    tested = 0
    for trial in range(trials):
        factor = float(rng.choice(np.array([-3.0, -2.0, 2.0, 3.0, 5.0])))
        if rule.pointwise:
            shape = _pointwise_shape(rng, trial)
            dims: dict[int, int] = {}
            shapes = [shape] * len(rule.inputs)
            funcs = _pointwise_functions(rule, shape, factor)
        else:
            dims = _sizes(rule, rng, trial)
            shapes = [map_shape(s, dims, rule.symbols) for s in rule.inputs]
            try:
                funcs = rule_functions(rule, dims, Float64Type(), factor)
            except VerifyException as e:
                return RandomResult(False, tested, f"invalid at sizes {dims}: {e}")
        module = ModuleOp(list(funcs))
        for magnitude in (4, 2, 1):
            args = [
                rng.integers(-magnitude, magnitude + 1, size=s).astype(np.float64)
                * pool_scale
                for s in shapes
            ]
            src = evaluate_function(module, funcs[0].sym_name.data, args)
            dst = evaluate_function(module, funcs[1].sym_name.data, args)
            if all(np.abs(a).max(initial=0) < EXACT_LIMIT for a in src + dst):
                break
        else:
            return RandomResult(False, tested, "values too large to compare exactly")
        tested += 1
        for i, (a, b) in enumerate(zip(src, dst, strict=True)):
            if a.shape != b.shape or not np.array_equal(a, b):
                where = f"sizes {dims}" if dims else f"shape {shapes[0]}"
                return RandomResult(False, tested, f"output {i} differs at {where}")
    return RandomResult(True, tested)


def _pointwise_functions(rule: Rule, shape: tuple[int, ...], factor: float) -> Any:
    """A pointwise rule's functions with every input of one (any-rank) shape."""
    from xdsl.dialects import func
    from xdsl.dialects.builtin import TensorType
    from xdsl.ir import Block, Region

    from plmr.passes.taso.rules import build_pattern_ops

    t = TensorType(Float64Type(), shape)
    out: list[func.FuncOp] = []
    for side, pattern in (("src", rule.src), ("dst", rule.dst)):
        block = Block(arg_types=[t] * len(rule.inputs))
        ops, outs = build_pattern_ops(pattern, block.args, {}, rule.symbols, factor)
        block.add_ops([*ops, func.ReturnOp(*outs)])
        out.append(
            func.FuncOp(
                f"{rule.name}_{side}",
                ([t] * len(rule.inputs), [v.type for v in outs]),
                Region(block),
            )
        )
    return tuple(out)


# ---------------------------------------------------------------------------------------
# Z3
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProofResult:
    status: str
    """`proved`, `refuted`, `unknown` (timeout) or `skipped`."""
    seconds: float
    detail: str = ""


def _z3() -> Any:
    return importlib.import_module("z3")


def _symbolic_eval(
    pattern: Pattern,
    args: Sequence[Array],
    rule: Rule,
    dims: dict[int, int],
    factor: Any,
    z3: Any,
) -> list[Array]:
    values: list[list[Array]] = []

    def get(ref: Ref) -> Array:
        return args[ref[1]] if ref[0] == INPUT else values[ref[0]][ref[1]]

    def relu(e: Any) -> Any:
        return z3.If(e > 0, e, 0)

    def vmax(a: Any, b: Any) -> Any:
        return z3.If(a >= b, a, b)

    for op in pattern.ops:
        params = map_params(op, dims, rule.symbols, 0.0)
        xs = [get(r) for r in op.operands]
        k = op.kind
        if k == "matmul":
            out = [np.dot(xs[0], xs[1])]
        elif k == "add":
            out = [xs[0] + xs[1]]
        elif k == "mul":
            out = [xs[0] * xs[1]]
        elif k == "scale":
            out = [xs[0] * factor]
        elif k == "relu":
            out = [np.vectorize(relu, otypes=[object])(xs[0])]
        elif k == "transpose":
            perm = param_ints(k, params, 0, "perm")
            out = [np.transpose(xs[0], perm)]
        elif k == "concat":
            axis = param_int(k, params, 0, "axis")
            out = [np.concatenate(xs, axis=axis)]
        elif k == "split":
            axis = param_int(k, params, 0, "axis")
            sizes = param_ints(k, params, 1, "sizes")
            out = np.split(xs[0], [sizes[0]], axis=axis)
        elif k == "conv2d":
            out = [conv_same(xs[0], xs[1])]
        elif k == "pool":
            x = xs[0]
            if params[0] == "max":
                n, c, h, w = x.shape
                res = np.empty(x.shape, dtype=object)
                for idx in np.ndindex(n, c, h, w):
                    best: Any = None
                    for i in range(idx[2] - 1, idx[2] + 2):
                        for j in range(idx[3] - 1, idx[3] + 2):
                            if 0 <= i < h and 0 <= j < w:
                                v = x[idx[0], idx[1], i, j]
                                best = v if best is None else vmax(best, v)
                    res[idx] = best
                out = [res]
            else:
                padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=0)
                total = sum(
                    padded[:, :, i : i + x.shape[2], j : j + x.shape[3]]
                    for i in range(3)
                    for j in range(3)
                )
                out = [np.asarray(total) / z3.RealVal(9)]
        elif k == "const":
            shape = param_ints(k, params, 1, "shape")
            out = [identity_array(shape, dtype=np.int64).astype(object)]
        else:
            raise AssertionError(f"no symbolic semantics for '{k}'")
        values.append(list(out))
    return [get(r) for r in pattern.outputs]


def prove(rule: Rule, timeout_ms: int = 2000, size: int = 2) -> ProofResult:
    """Proves (or refutes) a rule with Z3 at sizes where every symbol is `size`."""
    z3 = _z3()
    start = time.perf_counter()
    dims = {s: size for s in rule.symbols}
    real = _avg_pools(rule) > 0
    make = z3.Real if real else z3.Int
    if rule.pointwise:
        shapes = [(size, size)] * len(rule.inputs)
    else:
        shapes = [map_shape(s, dims, rule.symbols) for s in rule.inputs]
    args: list[Array] = []
    for i, shape in enumerate(shapes):
        arr = np.empty(shape, dtype=object)
        for idx in np.ndindex(*shape):
            arr[idx] = make(f"x{i}_" + "_".join(str(d) for d in idx))
        args.append(arr)
    factor = make("s")
    try:
        src = _symbolic_eval(rule.src, args, rule, dims, factor, z3)
        dst = _symbolic_eval(rule.dst, args, rule, dims, factor, z3)
    except (ValueError, IndexError) as e:
        return ProofResult("skipped", time.perf_counter() - start, f"no symbolic form: {e}")
    differ: list[Any] = []
    for a, b in zip(src, dst, strict=True):
        if a.shape != b.shape:
            return ProofResult(
                "refuted", time.perf_counter() - start, "output shapes differ"
            )
        for x, y in zip(a.flat, b.flat, strict=True):
            raw = x - y
            if not z3.is_expr(raw):
                raw = z3.RealVal(raw) if real else z3.IntVal(int(raw))
            diff = z3.simplify(raw, som=True)
            if not (z3.is_int_value(diff) or z3.is_rational_value(diff)):
                differ.append(x != y)
            elif (diff.as_fraction() if real else diff.as_long()) != 0:
                return ProofResult(
                    "refuted", time.perf_counter() - start, "outputs differ by a constant"
                )
    if not differ:
        return ProofResult("proved", time.perf_counter() - start, "polynomial identity")
    solver = z3.Solver()
    solver.set("timeout", timeout_ms)
    solver.add(z3.Or(*differ))
    answer = solver.check()
    seconds = time.perf_counter() - start
    if answer == z3.unsat:
        return ProofResult("proved", seconds, "solver")
    if answer == z3.sat:
        return ProofResult("refuted", seconds, "counterexample found")
    return ProofResult("unknown", seconds, "timeout")


# ---------------------------------------------------------------------------------------
# Reports and mutants
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RuleCheck:
    rule: Rule
    random: RandomResult
    proof: ProofResult

    @property
    def ok(self) -> bool:
        return self.random.ok and self.proof.status != "refuted"

    def line(self) -> str:
        rnd = (
            f"random: ok ({self.random.shapes} sizes)"
            if self.random.ok
            else f"random: FAILED ({self.random.detail})"
        )
        proof = f"z3: {self.proof.status}"
        if self.proof.status in ("proved", "refuted", "unknown"):
            proof += f" ({self.proof.detail}, {self.proof.seconds:.2f} s)"
        elif self.proof.detail:
            proof += f" ({self.proof.detail})"
        return f"{self.rule.name:<10} {'ok  ' if self.ok else 'FAIL'}  {rnd}; {proof}"


def check_rules(
    rules: Sequence[Rule],
    trials: int = 3,
    use_z3: bool = True,
    timeout_ms: int = 2000,
    seed: int = 0,
    progress: Callable[[RuleCheck], None] | None = None,
) -> list[RuleCheck]:
    """Random-tests every rule and, unless `use_z3` is off, tries a Z3 proof."""
    out: list[RuleCheck] = []
    for rule in rules:
        rnd = random_test(rule, trials, seed)
        proof = prove(rule, timeout_ms) if use_z3 else ProofResult("skipped", 0.0)
        check = RuleCheck(rule, rnd, proof)
        if progress is not None:
            progress(check)
        out.append(check)
    return out


def mutants(rule: Rule) -> list[tuple[str, Rule]]:
    """
    Wrong variants of a rule's `dst` side that still type-check at its sizes: swapped
    operands of a non-commutative op, a changed concat/split axis or transpose.
    """
    out: list[tuple[str, Rule]] = []

    def with_op(i: int, op: PatOp) -> Rule:
        ops = list(rule.dst.ops)
        ops[i] = op
        return replace(rule, dst=Pattern(tuple(ops), rule.dst.outputs))

    for i, op in enumerate(rule.dst.ops):
        candidates: list[tuple[str, PatOp]] = []
        if (
            len(op.operands) == 2
            and op.kind not in COMMUTATIVE
            and op.operands[0] != op.operands[1]
        ):
            candidates.append(
                (
                    f"swap operands of {op.kind} #{i}",
                    replace(op, operands=op.operands[::-1]),
                )
            )
        if op.kind in ("concat", "split"):
            axis = param_int(op.kind, op.params, 0, "axis")
            for other in (0, 1, 2, 3):
                if other != axis:
                    candidates.append(
                        (
                            f"axis {other} for {op.kind} #{i}",
                            replace(op, params=(other, *op.params[1:])),
                        )
                    )
        for what, new in candidates:
            mutant = with_op(i, new)
            try:
                rule_functions(mutant)
            except (VerifyException, IndexError, ValueError):
                continue
            out.append((what, mutant))
    return out
