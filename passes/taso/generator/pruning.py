"""
Step 4 of TASO's substitution generator, on candidate pairs: the rule sides as patterns,
and the prunings by input renaming, common subgraphs and supergraphs, and degenerate rules.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from plmr.passes.taso.generator.enumeration import (
    Bounds,
    GraphOps,
    InputSpec,
    Template,
    propagate_bounds,
    split_params,
)
from plmr.passes.taso.ops import (
    COMMUTATIVE,
    Shape,
    infer_shapes,
    param_int,
    param_ints,
)
from plmr.passes.taso.rules import INPUT, PatOp, Pattern, Ref


def to_pattern(
    templates: Sequence[Template], inputs: Sequence[InputSpec], graph_ops: GraphOps
) -> Pattern:
    """A graph as a rule side over the global inputs; its outputs are its unused results."""
    refs: list[Ref] = [(INPUT, k) for k in range(len(inputs))]
    shapes: list[Shape] = [s.shape for s in inputs]
    bounds: list[Bounds] = [(None,) * len(s.shape) for s in inputs]
    uses = [0] * len(inputs)
    ops: list[PatOp] = []
    for tid, operands in graph_ops:
        t = templates[tid]
        arg_shapes = [shapes[j] for j in operands]
        params = t.params
        if t.kind == "split":
            axis = param_int(t.kind, t.params, 0, "axis")
            bound = bounds[operands[0]][axis]
            assert bound is not None
            params = split_params(axis, bound, arg_shapes[0][axis])
        out_shapes = (
            [t.const_shape]
            if t.kind == "const"
            else infer_shapes(t.kind, params, arg_shapes)
        )
        bounds.extend(
            propagate_bounds(
                t.kind,
                params,
                [bounds[j] for j in operands],
                arg_shapes,
                [len(s) for s in out_shapes],
            )
        )
        for j in operands:
            uses[j] += 1
        index = len(ops)
        ops.append(PatOp(t.kind, params, tuple(refs[j] for j in operands), len(out_shapes)))
        refs.extend((index, r) for r in range(len(out_shapes)))
        shapes.extend(out_shapes)
        uses.extend([0] * len(out_shapes))
    outputs = tuple(refs[i] for i in range(len(inputs), len(refs)) if uses[i] == 0)
    return Pattern(tuple(ops), outputs)


def _op_term(
    pattern: Pattern, index: int, name: Callable[[int], str], memo: dict[int, str]
) -> str:
    found = memo.get(index)
    if found is not None:
        return found
    op = pattern.ops[index]
    args = [_ref_term(pattern, r, name, memo) for r in op.operands]
    if op.kind in COMMUTATIVE:
        args.sort()
    text = f"{op.kind}{list(op.params)}({','.join(args)})"
    memo[index] = text
    return text


def _ref_term(
    pattern: Pattern, ref: Ref, name: Callable[[int], str], memo: dict[int, str]
) -> str:
    if ref[0] == INPUT:
        return name(ref[1])
    text = _op_term(pattern, ref[0], name, memo)
    return f"{text}#{ref[1]}" if pattern.ops[ref[0]].num_results > 1 else text


def output_terms(pattern: Pattern, name: Callable[[int], str]) -> list[str]:
    memo: dict[int, str] = {}
    return [_ref_term(pattern, r, name, memo) for r in pattern.outputs]


def pair_key(src: Pattern, dst: Pattern, name: Callable[[int], str]) -> str:
    s, d = output_terms(src, name), output_terms(dst, name)
    forward = "|".join(sorted(f"{a}={b}" for a, b in zip(s, d, strict=True)))
    backward = "|".join(sorted(f"{b}={a}" for a, b in zip(s, d, strict=True)))
    return min(forward, backward)


def renaming_key(src: Pattern, dst: Pattern, classes: Sequence[Any]) -> str:
    """The same key for two rules that differ only by renaming inputs of one class."""
    used = sorted(src.used_inputs() | dst.used_inputs())
    by_class: dict[Any, list[int]] = {}
    for v in used:
        by_class.setdefault(classes[v], []).append(v)
    order = sorted(by_class, key=repr)
    groups = [by_class[c] for c in order]
    choices = [list(itertools.permutations(g)) for g in groups]
    if np.prod([len(c) for c in choices]) > 720:
        choices = [[tuple(g)] for g in groups]
    best: str | None = None
    for combo in itertools.product(*choices):
        names: dict[int, str] = {}
        for c, perm in zip(order, combo, strict=True):
            for slot, v in enumerate(perm):
                names[v] = f"{c}.{slot}"
        key = pair_key(src, dst, names.__getitem__)
        if best is None or key < best:
            best = key
    assert best is not None
    return best


def _substitute(pattern: Pattern, mapping: dict[int, int]) -> Pattern:
    def sub(r: Ref) -> Ref:
        return (INPUT, mapping.get(r[1], r[1])) if r[0] == INPUT else r

    ops = tuple(
        PatOp(o.kind, o.params, tuple(sub(r) for r in o.operands), o.num_results)
        for o in pattern.ops
    )
    return Pattern(ops, tuple(sub(r) for r in pattern.outputs))


def _partitions(items: Sequence[int]) -> Iterator[list[list[int]]]:
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for part in _partitions(rest):
        yield [[first], *part]
        for i in range(len(part)):
            yield [*part[:i], [first, *part[i]], *part[i + 1 :]]


def merged_instances(
    src: Pattern, dst: Pattern, classes: Sequence[Any]
) -> Iterator[tuple[Pattern, Pattern]]:
    """The rule with inputs of one class merged (its special cases, e.g. `x` for `y`)."""
    used = sorted(src.used_inputs() | dst.used_inputs())
    by_class: dict[Any, list[int]] = {}
    for v in used:
        by_class.setdefault(classes[v], []).append(v)
    per_class = [list(_partitions(vs)) for vs in by_class.values()]
    for combo in itertools.product(*per_class):
        mapping = {v: block[0] for part in combo for block in part for v in block}
        if all(k == v for k, v in mapping.items()):
            continue
        yield _substitute(src, mapping), _substitute(dst, mapping)


def _leaf_terms(pattern: Pattern) -> set[str]:
    """Terms of the non-constant ops whose operands are all inputs or constants."""
    out: set[str] = set()
    memo: dict[int, str] = {}
    for i, op in enumerate(pattern.ops):
        if op.kind == "const":
            continue
        if all(r[0] == INPUT or pattern.ops[r[0]].kind == "const" for r in op.operands):
            out.add(_op_term(pattern, i, str, memo))
    return out


def has_common_subgraph(src: Pattern, dst: Pattern) -> bool:
    """Both sides compute one op on the same inputs (so a smaller rule covers this one)."""
    return bool(_leaf_terms(src) & _leaf_terms(dst))


def has_common_supergraph(src: Pattern, dst: Pattern) -> bool:
    """
    Both outputs come from the same op whose operands differ in one place, or only by one
    pair of equal subterms (so the rule follows from a smaller one by congruence).
    """
    if len(src.outputs) != 1 or src.outputs[0][0] == INPUT or dst.outputs[0][0] == INPUT:
        return False
    a, b = src.ops[src.outputs[0][0]], dst.ops[dst.outputs[0][0]]
    if a.kind != b.kind or a.params != b.params or len(a.operands) != len(b.operands):
        return False
    ma: dict[int, str] = {}
    mb: dict[int, str] = {}
    ta = [_ref_term(src, r, str, ma) for r in a.operands]
    tb = [_ref_term(dst, r, str, mb) for r in b.operands]
    orders = [tb, tb[::-1]] if a.kind in COMMUTATIVE else [tb]
    for o in orders:
        differ = {(x, y) for x, y in zip(ta, o, strict=True) if x != y}
        if len(differ) <= 1:
            return True
    return False


def _connected(pattern: Pattern) -> bool:
    n = len(pattern.ops)
    parent = list(range(n))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    by_var: dict[int, int] = {}
    for i, op in enumerate(pattern.ops):
        for r in op.operands:
            other = by_var.setdefault(r[1], i) if r[0] == INPUT else r[0]
            parent[find(i)] = find(other)
    return len({find(i) for i in range(n)}) <= 1


def _vars_of(pattern: Pattern, ref: Ref) -> set[int]:
    if ref[0] == INPUT:
        return {ref[1]}
    out: set[int] = set()
    for r in pattern.ops[ref[0]].operands:
        out |= _vars_of(pattern, r)
    return out


def degenerate_reason(src: Pattern, dst: Pattern, weights: frozenset[int]) -> str | None:
    """Why a rule can never help on a real model (or cannot be applied), else None."""
    if not src.used_inputs():
        return "no inputs: the rule only relates constants"
    for side in (src, dst):
        memo: dict[int, str] = {}
        inputs: set[str] = set()
        kernels: set[str] = set()
        for op in side.ops:
            if op.kind == "conv2d":
                inputs.add(_ref_term(side, op.operands[0], str, memo))
                kernels.add(_ref_term(side, op.operands[1], str, memo))
                used = _vars_of(side, op.operands[0])
                if not used or used <= weights:
                    return "a conv kernel is used as a conv input"
        if inputs & kernels:
            return "a tensor is both a conv input and a conv kernel"
        if not _connected(side):
            return "a side is disconnected"
    if src.uses_scale() != dst.uses_scale():
        return "only one side uses the scalar"
    if src.used_inputs() != dst.used_inputs():
        return "an input is used by only one side"
    return None


def abstract_constants(
    src: Pattern, dst: Pattern, n_inputs: int
) -> tuple[Pattern, Pattern, list[Shape]] | None:
    """The rule with each identity constant replaced by an input (None if it has none)."""
    extra: list[Shape] = []
    by_shape: dict[Shape, int] = {}

    def rewrite(p: Pattern) -> Pattern:
        const_var: dict[int, int] = {}
        ops: list[PatOp] = []
        index: dict[int, int] = {}
        for i, op in enumerate(p.ops):
            if op.kind == "const":
                shape = param_ints(op.kind, op.params, 1, "shape")
                if shape not in by_shape:
                    by_shape[shape] = n_inputs + len(extra)
                    extra.append(shape)
                const_var[i] = by_shape[shape]
                continue
            index[i] = len(ops)
            ops.append(replace_refs(op, const_var, index))
        outs = tuple(map_ref(r, const_var, index) for r in p.outputs)
        return Pattern(tuple(ops), outs)

    s, d = rewrite(src), rewrite(dst)
    return (s, d, extra) if extra else None


def map_ref(r: Ref, const_var: dict[int, int], index: dict[int, int]) -> Ref:
    if r[0] == INPUT:
        return r
    if r[0] in const_var:
        return (INPUT, const_var[r[0]])
    return (index[r[0]], r[1])


def replace_refs(op: PatOp, const_var: dict[int, int], index: dict[int, int]) -> PatOp:
    return PatOp(
        op.kind,
        op.params,
        tuple(map_ref(r, const_var, index) for r in op.operands),
        op.num_results,
    )
