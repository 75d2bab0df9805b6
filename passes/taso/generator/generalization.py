"""
Shape generalization for TASO's substitution generator: a rule's concrete sizes unified
into symbols, so that the verifier can re-test it at several sizes.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from plmr.passes.taso.generator.enumeration import Bounds, InputSpec, propagate_bounds
from plmr.passes.taso.generator.pruning import pair_key as _pair_key
from plmr.passes.taso.ops import (
    IDENTITY,
    POINTWISE,
    Params,
    Shape,
    infer_shapes,
    param_int,
    param_ints,
)
from plmr.passes.taso.rules import INPUT, PatOp, Pattern, Ref, Rule

Expr = tuple[int, tuple[int, ...]]
"""A dimension: a literal plus a sum of symbols (sorted atom ids)."""


class Unifier:
    """Unification of positive dimension expressions (sums of symbols and literals)."""

    def __init__(self) -> None:
        self.binding: dict[int, Expr] = {}
        self.count = 0

    def fresh(self) -> Expr:
        self.count += 1
        return (0, (self.count - 1,))

    def resolve(self, e: Expr) -> Expr:
        lit, atoms = e
        out: list[int] = []
        for a in atoms:
            bound = self.binding.get(a)
            if bound is None:
                out.append(a)
            else:
                l2, a2 = self.resolve(bound)
                lit += l2
                out.extend(a2)
        return (lit, tuple(sorted(out)))

    def unify(self, e1: Expr, e2: Expr) -> bool:
        r1, r2 = self.resolve(e1), self.resolve(e2)
        if r1 == r2:
            return True
        rest1, rest2 = list(r1[1]), list(r2[1])
        for a in r1[1]:
            if a in rest2:
                rest1.remove(a)
                rest2.remove(a)
        if len(rest1) < len(r1[1]):
            return self.unify((r1[0], tuple(rest1)), (r2[0], tuple(rest2)))
        for a, b in ((r1, r2), (r2, r1)):
            if a[0] == 0 and len(a[1]) == 1 and (b[1] or b[0] > 0):
                self.binding[a[1][0]] = b
                return True
        return False


def _add(a: Expr, b: Expr) -> Expr:
    return (a[0] + b[0], tuple(sorted(a[1] + b[1])))


def _sub(a: Expr, b: Expr) -> Expr | None:
    rest = list(a[1])
    for x in b[1]:
        if x not in rest:
            return None
        rest.remove(x)
    out = (a[0] - b[0], tuple(rest))
    return out if out[1] or out[0] > 0 else None


REP_VALUES = (2, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22)
"""Representative sizes for symbols (never 1 or 3, the literal kernel sizes)."""


class GeneralizeError(Exception):
    pass


@dataclass
class _Sym:
    """A tensor during generalization: symbolic and generation-time shape and bounds."""

    shape: list[Expr]
    bounds: list[Expr | None]
    num_shape: Shape
    num_bounds: Bounds


def _merge_bounds(uni: Unifier, a: _Sym, b: _Sym, num: Bounds) -> list[Expr | None]:
    out: list[Expr | None] = []
    for x, y, n in zip(a.bounds, b.bounds, num, strict=True):
        if n is None or x is None or y is None:
            out.append(None)
        else:
            if not uni.unify(x, y):
                raise GeneralizeError("concat boundaries")
            out.append(x)
    return out


def generalize(src: Pattern, dst: Pattern, inputs: Sequence[InputSpec], name: str) -> Rule:
    """
    The rule with symbolic sizes: every input dimension becomes a symbol, the ops' shape
    constraints unify them, and the survivors get distinct representative sizes.
    """
    used = sorted(src.used_inputs() | dst.used_inputs())
    index = {v: i for i, v in enumerate(used)}
    uni = Unifier()
    var_shapes = {v: [uni.fresh() for _ in inputs[v].shape] for v in used}
    split_sizes: dict[tuple[int, int], list[Expr]] = {}
    const_shapes: dict[tuple[int, int], list[Expr]] = {}
    out_shapes: list[list[list[Expr]]] = []

    def need(ok: bool, why: str) -> None:
        if not ok:
            raise GeneralizeError(why)

    for side_no, pattern in enumerate((src, dst)):
        vals: dict[Ref, _Sym] = {
            (INPUT, v): _Sym(
                var_shapes[v],
                [None] * len(var_shapes[v]),
                inputs[v].shape,
                (None,) * len(inputs[v].shape),
            )
            for v in used
        }
        for i, op in enumerate(pattern.ops):
            a = [vals[r] for r in op.operands]
            k = op.kind
            if k == "const":
                const_shape = param_ints(k, op.params, 1, "shape")
                num_shapes: list[Shape] = [const_shape]
            else:
                num_shapes = infer_shapes(k, op.params, [x.num_shape for x in a])
            num_bounds = propagate_bounds(
                k,
                op.params,
                [x.num_bounds for x in a],
                [x.num_shape for x in a],
                [len(s) for s in num_shapes],
            )
            shapes: list[list[Expr]]
            bounds: list[list[Expr | None]]
            if k == "matmul":
                need(uni.unify(a[0].shape[1], a[1].shape[0]), "matmul contraction")
                shapes = [[a[0].shape[0], a[1].shape[1]]]
                bounds = [[a[0].bounds[0], a[1].bounds[1]]]
            elif k in ("add", "mul"):
                for x, y in zip(a[0].shape, a[1].shape, strict=True):
                    need(uni.unify(x, y), "elementwise shapes")
                shapes, bounds = (
                    [a[0].shape],
                    [_merge_bounds(uni, a[0], a[1], num_bounds[0])],
                )
            elif k in ("scale", "relu", "pool"):
                shapes, bounds = [a[0].shape], [a[0].bounds]
            elif k == "transpose":
                shapes = [[a[0].shape[1], a[0].shape[0]]]
                bounds = [[a[0].bounds[1], a[0].bounds[0]]]
            elif k == "concat":
                axis = param_int(k, op.params, 0, "axis")
                for d, (x, y) in enumerate(zip(a[0].shape, a[1].shape, strict=True)):
                    if d != axis:
                        need(uni.unify(x, y), "concat shapes")
                shape = list(a[0].shape)
                shape[axis] = _add(a[0].shape[axis], a[1].shape[axis])
                merged = _merge_bounds(uni, a[0], a[1], num_bounds[0])
                merged[axis] = a[0].shape[axis]
                shapes, bounds = [shape], [merged]
            elif k == "split":
                axis = param_int(k, op.params, 0, "axis")
                first = a[0].bounds[axis]
                need(first is not None, "split without a boundary")
                assert first is not None
                second = _sub(uni.resolve(a[0].shape[axis]), uni.resolve(first))
                need(second is not None, "split sizes")
                assert second is not None
                split_sizes[(side_no, i)] = [first, second]
                o1, o2 = list(a[0].shape), list(a[0].shape)
                o1[axis], o2[axis] = first, second
                b = list(a[0].bounds)
                b[axis] = None
                shapes, bounds = [o1, o2], [b, list(b)]
            elif k == "conv2d":
                pads = param_ints(k, op.params, 1, "pads")
                need(uni.unify(a[0].shape[1], a[1].shape[1]), "conv channels")
                need(uni.unify(a[1].shape[2], (2 * pads[0] + 1, ())), "kernel height")
                need(uni.unify(a[1].shape[3], (2 * pads[1] + 1, ())), "kernel width")
                shapes = [[a[0].shape[0], a[1].shape[0], a[0].shape[2], a[0].shape[3]]]
                bounds = [[a[0].bounds[0], a[1].bounds[0], None, None]]
            elif k == "const":
                shape_param = param_ints(k, op.params, 1, "shape")
                n = uni.fresh()
                const: list[Expr] = [n, n]
                if len(shape_param) == 4:
                    const += [(shape_param[2], ()), (shape_param[3], ())]
                const_shapes[(side_no, i)] = const
                shapes, bounds = [const], [[None] * len(const)]
            else:
                raise GeneralizeError(f"unknown op {k}")
            for r, (s, b) in enumerate(zip(shapes, bounds, strict=True)):
                vals[(i, r)] = _Sym(s, b, num_shapes[r], num_bounds[r])
        out_shapes.append([vals[r].shape for r in pattern.outputs])
    for s, d in zip(out_shapes[0], out_shapes[1], strict=True):
        need(len(s) == len(d), "output ranks")
        for x, y in zip(s, d, strict=True):
            need(uni.unify(x, y), "output shapes")

    values: dict[int, int] = {}

    def value(e: Expr) -> int:
        r = uni.resolve(e)
        need(len(r[1]) <= 1 and (r[0] == 0 or not r[1]), "a size is a sum of symbols")
        if not r[1]:
            return r[0]
        atom = r[1][0]
        if atom not in values:
            need(len(values) < len(REP_VALUES), "too many symbols")
            values[atom] = REP_VALUES[len(values)]
        return values[atom]

    pointwise = all(k in POINTWISE for p in (src, dst) for k in p.kinds())
    if pointwise:
        rep_inputs = tuple((2, 4) for _ in used)
    else:
        rep_inputs = tuple(tuple(value(e) for e in var_shapes[v]) for v in used)

    def rebuild(side_no: int, pattern: Pattern) -> Pattern:
        ops: list[PatOp] = []
        for i, op in enumerate(pattern.ops):
            params = op.params
            if (side_no, i) in split_sizes:
                params = (op.params[0], tuple(value(e) for e in split_sizes[(side_no, i)]))
            if (side_no, i) in const_shapes:
                params = (IDENTITY, tuple(value(e) for e in const_shapes[(side_no, i)]))
            operands = tuple(
                (INPUT, index[r[1]]) if r[0] == INPUT else r for r in op.operands
            )
            ops.append(PatOp(op.kind, params, operands, op.num_results))
        outputs = tuple(
            (INPUT, index[r[1]]) if r[0] == INPUT else r for r in pattern.outputs
        )
        return Pattern(tuple(ops), outputs)

    new_src, new_dst = rebuild(0, src), rebuild(1, dst)
    symbols = frozenset({2, 4}) if pointwise else frozenset(values.values())
    return Rule(name, rep_inputs, new_src, new_dst, symbols, pointwise)


def generalized_key(rule: Rule) -> str:
    """A renaming-invariant key of a generalized rule (sizes renamed in order of use)."""
    n = len(rule.inputs)
    perms: Iterator[tuple[int, ...]] = (
        itertools.permutations(range(n)) if n <= 6 else iter([tuple(range(n))])
    )
    best: str | None = None
    for perm in perms:
        order = sorted(range(n), key=lambda i: perm[i])
        sizes: dict[int, str] = {}
        shape_parts: list[str] = []
        for i in order:
            dims = [
                sizes.setdefault(d, f"s{len(sizes)}") if d in rule.symbols else str(d)
                for d in rule.inputs[i]
            ]
            shape_parts.append("x".join(dims))

        def canon(p: Pattern) -> Pattern:
            return Pattern(
                tuple(
                    PatOp(
                        o.kind,
                        _size_names(o, sizes, rule.symbols),
                        o.operands,
                        o.num_results,
                    )
                    for o in p.ops
                ),
                p.outputs,
            )

        key = (
            ";".join(shape_parts)
            + "::"
            + _pair_key(
                canon(rule.src), canon(rule.dst), lambda v, perm=perm: f"v{perm[v]}"
            )
        )
        if best is None or key < best:
            best = key
    assert best is not None
    return best


def _size_names(op: PatOp, sizes: dict[int, str], symbols: frozenset[int]) -> Params:
    if op.kind not in ("split", "const"):
        return op.params
    raw = param_ints(op.kind, op.params, 1, "sizes")
    names = "x".join(sizes.get(s, str(s)) if s in symbols else str(s) for s in raw)
    return (op.params[0], names)
