"""
TASO's substitution generator, in Python.

1. **Enumerate** every graph of up to `max_ops` ops over the substitution op set, on small
   input tensors (2-D `x1..x3: 2x4`, `w1..w3: 4x4`; 4-D `i1, i2: 2x4x5x5`, conv kernels
   `k1, k2: 4x4x3x3`, `k3, k4: 4x4x1x1`), depth first. An op whose result equals a tensor the
   graph already has, or that repeats an op, ends the branch (as in TASO); independent
   ops are only added in one canonical order.
2. **Fingerprint** each graph: the hash of the multiset of its unused results' hashes,
   computed on random 64-bit integers (wrapping arithmetic is exact arithmetic modulo
   2^64). ReLU is replaced by the polynomial `x*(x+1)+1` while fingerprinting, as TASO
   does, and avg-pooling divides by 9 through its inverse modulo 2^64.
3. **Candidates**: every graph whose fingerprint an earlier graph already has is paired with
   that graph.
4. **Prune**, counting what each step removes: a re-test with the real semantics on fresh
   exact integers; input renaming; common subgraphs and supergraphs; degenerate rules (a
   tensor used as both conv input and kernel, disconnected sides, a scalar only one side
   uses, unused inputs); then the sides' shapes are generalized to symbols and the rules
   re-tested at several sizes by the verifier.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from plmr.errors import PlmrError
from plmr.passes.taso.ops import (
    COMMUTATIVE,
    IDENTITY,
    POINTWISE,
    SUBSTITUTION_KINDS,
    Params,
    Shape,
    conv_params,
    infer_shapes,
    pool_params,
)
from plmr.passes.taso.rules import INPUT, PatOp, Pattern, Ref, Rule
from plmr.passes.taso.semantics import ArrayOps, FingerprintOps, eval_pattern

Array = npt.NDArray[Any]

MAX_SIZE = 512
"""Largest tensor (elements) the enumeration creates (TASO's MAX_SIZE)."""


@dataclass(frozen=True)
class InputSpec:
    name: str
    shape: Shape
    weight: bool


INPUTS_2D = (
    InputSpec("x1", (2, 4), False),
    InputSpec("x2", (2, 4), False),
    InputSpec("x3", (2, 4), False),
    InputSpec("w1", (4, 4), True),
    InputSpec("w2", (4, 4), True),
    InputSpec("w3", (4, 4), True),
)
INPUTS_4D = (
    InputSpec("i1", (2, 4, 5, 5), False),
    InputSpec("i2", (2, 4, 5, 5), False),
    InputSpec("k1", (4, 4, 3, 3), True),
    InputSpec("k2", (4, 4, 3, 3), True),
    InputSpec("k3", (4, 4, 1, 1), True),
    InputSpec("k4", (4, 4, 1, 1), True),
)


@dataclass(frozen=True)
class Template:
    """An op the enumeration can add: a key with its arity and number of results."""

    tid: int
    kind: str
    params: Params
    arity: int
    results: int = 1
    const_shape: Shape = ()


def make_templates(kinds: Sequence[str]) -> list[Template]:
    out: list[Template] = []

    def add(kind: str, params: Params, arity: int, results: int = 1, shape: Shape = ()):
        if kind in kinds:
            out.append(Template(len(out), kind, params, arity, results, shape))

    add("matmul", (False, False), 2)
    add("add", (), 2)
    add("mul", (), 2)
    add("scale", (2.0,), 1)
    add("relu", (), 1)
    add("transpose", ((1, 0),), 1)
    add("concat", (0,), 2)
    add("concat", (1,), 2)
    add("split", (0,), 1, 2)
    add("split", (1,), 1, 2)
    add("conv2d", conv_params((3, 3)), 2)
    add("conv2d", conv_params((1, 1)), 2)
    add("pool", pool_params("avg"), 1)
    add("pool", pool_params("max"), 1)
    add("const", (IDENTITY, (4, 4)), 0, 1, (4, 4))
    if "conv2d" in kinds:
        add("const", (IDENTITY, (4, 4, 3, 3)), 0, 1, (4, 4, 3, 3))
    return out


def _vhash(a: Array) -> int:
    return hash((a.shape, a.tobytes()))


Bounds = tuple[int | None, ...]


def propagate_bounds(
    kind: str,
    params: Params,
    bounds: Sequence[Bounds],
    shapes: Sequence[Shape],
    out_ranks: Sequence[int],
) -> list[Bounds]:
    """
    Concat boundaries of an op's results (TASO's SplitInfo): `split` may only cut a tensor
    where a concat joined it, on an axis where that boundary survived.
    """
    if kind == "concat":
        axis = params[0]
        assert isinstance(axis, int)
        merged = [x if x == y else None for x, y in zip(bounds[0], bounds[1], strict=True)]
        merged[axis] = shapes[0][axis]
        return [tuple(merged)]
    if kind in COMMUTATIVE:
        return [tuple(x if x == y else None for x, y in zip(*bounds, strict=True))]
    if kind in ("scale", "relu", "pool"):
        return [bounds[0]]
    if kind == "transpose":
        return [(bounds[0][1], bounds[0][0])]
    if kind == "matmul":
        return [(bounds[0][0], bounds[1][1])]
    if kind == "conv2d":
        return [(bounds[0][0], bounds[1][0], None, None)]
    if kind == "split":
        axis = params[0]
        assert isinstance(axis, int)
        b = list(bounds[0])
        b[axis] = None
        return [tuple(b), tuple(b)]
    return [(None,) * r for r in out_ranks]


def split_params(axis: int, bound: int, size: int) -> Params:
    """The key parameters of a split at a concat boundary."""
    return (axis, (bound, size - bound))


# ---------------------------------------------------------------------------------------
# Enumeration
# ---------------------------------------------------------------------------------------

GraphOps = tuple[tuple[int, tuple[int, ...]], ...]
"""A graph: ops as (template id, operand tensor indices); inputs come first."""


@dataclass
class _Tensor:
    value: Array
    vhash: int
    term: int
    weight: bool
    bounds: Bounds
    uses: int = 0


@dataclass
class EnumerationResult:
    graphs: int = 0
    groups: int = 0
    candidates: list[tuple[GraphOps, GraphOps]] = field(
        default_factory=lambda: list[tuple[GraphOps, GraphOps]]()
    )
    seconds: float = 0.0


def inputs_for(kinds: Sequence[str]) -> tuple[InputSpec, ...]:
    """The enumeration's inputs: 4-D tensors and kernels only when 4-D ops are chosen."""
    return INPUTS_2D + (INPUTS_4D if "conv2d" in kinds or "pool" in kinds else ())


class Enumerator:
    """Depth-first enumeration of graphs with fingerprint grouping (TASO's `dfs`)."""

    def __init__(
        self,
        kinds: Sequence[str],
        max_ops: int,
        seed: int = 0,
        inputs: Sequence[InputSpec] | None = None,
    ):
        self.templates = make_templates(kinds)
        self.max_ops = max_ops
        self.inputs = inputs_for(kinds) if inputs is None else tuple(inputs)
        rng = np.random.default_rng(seed)
        self.ops_sem = FingerprintOps(np.int64(rng.integers(-(2**62), 2**62) | 1))
        self.input_values = [
            rng.integers(-(2**62), 2**62, size=s.shape, dtype=np.int64) for s in self.inputs
        ]
        self.terms: dict[tuple[Any, ...], int] = {}
        self.table: dict[int, GraphOps] = {}
        self.result = EnumerationResult()
        self.tensors: list[_Tensor] = []
        self.ops: list[tuple[int, tuple[int, ...]]] = []
        self.op_keys: set[tuple[int, tuple[int, ...]]] = set()
        self.vhashes: set[int] = set()

    def _term(self, key: tuple[Any, ...]) -> int:
        found = self.terms.get(key)
        if found is None:
            found = len(self.terms)
            self.terms[key] = found
        return found

    def run(self) -> EnumerationResult:
        start = time.perf_counter()
        for i, (spec, value) in enumerate(zip(self.inputs, self.input_values, strict=True)):
            t = _Tensor(
                value,
                _vhash(value),
                self._term(("in", i)),
                spec.weight,
                (None,) * value.ndim,
            )
            self.tensors.append(t)
            self.vhashes.add(t.vhash)
        self._dfs(0, None, ())
        self.result.groups = len({first for first, _ in self.result.candidates})
        self.result.seconds = time.perf_counter() - start
        return self.result

    def _operands(self, t: Template) -> Iterator[tuple[int, ...]]:
        """Operand tuples of the current tensors that `t` accepts (shapes, roles)."""
        ts = self.tensors
        n = len(ts)
        k = t.kind
        if t.arity == 0:
            yield ()
            return
        if t.arity == 1:
            for j in range(n):
                x = ts[j].value
                if (k == "transpose" and x.ndim != 2) or (k == "pool" and x.ndim != 4):
                    continue
                if k == "split":
                    axis = t.params[0]
                    assert isinstance(axis, int)
                    if axis >= x.ndim or ts[j].bounds[axis] is None:
                        continue
                yield (j,)
            return
        kernel = (3, 3) if t.kind == "conv2d" and t.params[1] == (1, 1, 1, 1) else (1, 1)
        for j in range(n):
            a = ts[j].value
            for m in range(j + 1 if k in COMMUTATIVE else 0, n):
                if m == j and k != "matmul":
                    continue
                b = ts[m].value
                if k == "matmul":
                    ok = a.ndim == 2 and b.ndim == 2 and a.shape[1] == b.shape[0]
                elif k in COMMUTATIVE:
                    ok = a.shape == b.shape
                elif k == "concat":
                    axis = t.params[0]
                    assert isinstance(axis, int)
                    ok = (
                        a.ndim == b.ndim
                        and axis < a.ndim
                        and a.shape[:axis] == b.shape[:axis]
                        and a.shape[axis + 1 :] == b.shape[axis + 1 :]
                    )
                else:  # conv2d: the kernel must come from weights
                    ok = (
                        a.ndim == 4
                        and b.ndim == 4
                        and ts[m].weight
                        and a.shape[1] == b.shape[1]
                        and b.shape[2:] == kernel
                    )
                if ok:
                    yield (j, m)

    def _register(self) -> None:
        produced = range(len(self.inputs), len(self.tensors))
        outs = sorted(self.tensors[i].vhash for i in produced if self.tensors[i].uses == 0)
        key = hash(tuple(outs))
        self.result.graphs += 1
        graph_ops = tuple(self.ops)
        first = self.table.get(key)
        if first is None:
            self.table[key] = graph_ops
        else:
            self.result.candidates.append((first, graph_ops))

    def _dfs(
        self,
        depth: int,
        last: tuple[int, tuple[int, ...]] | None,
        last_outputs: tuple[int, ...],
    ) -> None:
        if depth > 0:
            self._register()
        if depth >= self.max_ops:
            return
        ts = self.tensors
        for t in self.templates:
            if last is not None and t.tid < last[0] and t.arity == 0:
                continue
            for operands in self._operands(t):
                key = (t.tid, tuple(ts[j].term for j in operands))
                # Independent ops are added in increasing key order only.
                if (
                    last is not None
                    and key <= last
                    and not any(j in last_outputs for j in operands)
                ):
                    continue
                if key in self.op_keys:
                    continue
                args = [ts[j].value for j in operands]
                params = t.params
                if t.kind == "split":
                    axis = t.params[0]
                    assert isinstance(axis, int)
                    bound = ts[operands[0]].bounds[axis]
                    assert bound is not None
                    params = split_params(axis, bound, args[0].shape[axis])
                outs = self.ops_sem.apply(t.kind, params, args)
                if any(o.size > MAX_SIZE for o in outs):
                    continue
                hashes = [_vhash(o) for o in outs]
                if any(h in self.vhashes for h in hashes) or len(set(hashes)) < len(hashes):
                    continue  # a tensor the graph already has: redundant
                bounds = propagate_bounds(
                    t.kind,
                    params,
                    [ts[j].bounds for j in operands],
                    [a.shape for a in args],
                    [o.ndim for o in outs],
                )
                weight = all(ts[j].weight for j in operands)
                first_new = len(ts)
                for r, (o, h, b) in enumerate(zip(outs, hashes, bounds, strict=True)):
                    ts.append(_Tensor(o, h, self._term(("op", key, r)), weight, b))
                    self.vhashes.add(h)
                for j in operands:
                    ts[j].uses += 1
                self.ops.append((t.tid, operands))
                self.op_keys.add(key)
                self._dfs(depth + 1, key, tuple(range(first_new, len(ts))))
                self.op_keys.discard(key)
                self.ops.pop()
                for j in operands:
                    ts[j].uses -= 1
                for h in hashes:
                    self.vhashes.discard(h)
                del ts[first_new:]


# ---------------------------------------------------------------------------------------
# From candidate pairs to rule sides
# ---------------------------------------------------------------------------------------


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
            axis = t.params[0]
            assert isinstance(axis, int)
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


def _pair_key(src: Pattern, dst: Pattern, name: Callable[[int], str]) -> str:
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
        key = _pair_key(src, dst, names.__getitem__)
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


def _abstract_constants(
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
                shape = op.params[1]
                assert isinstance(shape, tuple)
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


# ---------------------------------------------------------------------------------------
# Shape generalization
# ---------------------------------------------------------------------------------------

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
                const_shape = op.params[1]
                assert isinstance(const_shape, tuple)
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
                axis = op.params[0]
                assert isinstance(axis, int)
                for d, (x, y) in enumerate(zip(a[0].shape, a[1].shape, strict=True)):
                    if d != axis:
                        need(uni.unify(x, y), "concat shapes")
                shape = list(a[0].shape)
                shape[axis] = _add(a[0].shape[axis], a[1].shape[axis])
                merged = _merge_bounds(uni, a[0], a[1], num_bounds[0])
                merged[axis] = a[0].shape[axis]
                shapes, bounds = [shape], [merged]
            elif k == "split":
                axis = op.params[0]
                assert isinstance(axis, int)
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
                pads = op.params[1]
                assert isinstance(pads, tuple)
                need(uni.unify(a[0].shape[1], a[1].shape[1]), "conv channels")
                need(uni.unify(a[1].shape[2], (2 * pads[0] + 1, ())), "kernel height")
                need(uni.unify(a[1].shape[3], (2 * pads[1] + 1, ())), "kernel width")
                shapes = [[a[0].shape[0], a[1].shape[0], a[0].shape[2], a[0].shape[3]]]
                bounds = [[a[0].bounds[0], a[1].bounds[0], None, None]]
            elif k == "const":
                shape_param = op.params[1]
                assert isinstance(shape_param, tuple)
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
    raw = op.params[1]
    assert isinstance(raw, tuple)
    names = "x".join(sizes.get(s, str(s)) if s in symbols else str(s) for s in raw)
    return (op.params[0], names)


# ---------------------------------------------------------------------------------------
# The pipeline
# ---------------------------------------------------------------------------------------


@dataclass
class GenerationReport:
    """What a generation run did: counts after each step, times and the rules."""

    kinds: tuple[str, ...]
    max_ops: int
    counts: list[tuple[str, int]] = field(default_factory=lambda: list[tuple[str, int]]())
    times: list[tuple[str, float]] = field(
        default_factory=lambda: list[tuple[str, float]]()
    )
    rules: list[Rule] = field(default_factory=lambda: list[Rule]())

    def lines(self) -> list[str]:
        out = [
            f"rule generation: ops {', '.join(self.kinds)}; graphs of up to {self.max_ops} ops"
        ]
        width = max(len(name) for name, _ in self.counts)
        for name, count in self.counts:
            out.append(f"  {name:<{width}}  {count:>9}")
        out.append(
            "  time: "
            + ", ".join(f"{name} {seconds:.1f} s" for name, seconds in self.times)
            + f"; total {sum(s for _, s in self.times):.1f} s"
        )
        return out


def _exact_inputs(
    shapes: Sequence[Shape], rng: np.random.Generator, scale: int
) -> list[Array]:
    choices = np.array([-3, -2, -1, 1, 2, 3])
    return [rng.choice(choices, size=s).astype(np.float64) * scale for s in shapes]


def _exact_outputs(pattern: Pattern, args: Sequence[Array]) -> list[Array]:
    out = eval_pattern(pattern, args, ArrayOps(3.0))
    if all(np.abs(a).max(initial=0) < 2.0**50 for a in out):
        return out
    return eval_pattern(
        pattern, [a.astype(np.int64).astype(object) for a in args], ArrayOps(3, object)
    )


def _avg_pools(*patterns: Pattern) -> int:
    return sum(
        1 for p in patterns for op in p.ops if op.kind == "pool" and op.params[0] == "avg"
    )


class ExactTrials:
    """Fixed random exact-integer inputs for re-tests (multiples of 9^k for k avg-pools)."""

    def __init__(self, shapes: Sequence[Shape], rng: np.random.Generator, trials: int = 2):
        self.shapes = list(shapes)
        self.rng = rng
        self.trials = trials
        self._cache: dict[tuple[int, int], list[list[Array]]] = {}

    def inputs(self, scale: int, extra: Sequence[Shape] = ()) -> list[list[Array]]:
        key = (scale, len(extra))
        if key not in self._cache or extra:
            sets = [
                _exact_inputs([*self.shapes, *extra], self.rng, scale)
                for _ in range(self.trials)
            ]
            if extra:
                return sets
            self._cache[key] = sets
        return self._cache[key]


def same_outputs(
    a: Pattern, b: Pattern, trials: ExactTrials, extra: Sequence[Shape] = ()
) -> list[int] | None:
    """For each output of `a`, the equal output of `b` on exact random inputs (or None)."""
    if len(a.outputs) != len(b.outputs):
        return None
    mapping: list[int] | None = None
    for args in trials.inputs(9 ** _avg_pools(a, b), extra):
        oa, ob = _exact_outputs(a, args), _exact_outputs(b, args)
        found: list[int] = []
        free = list(range(len(ob)))
        for x in oa:
            j = next(
                (j for j in free if ob[j].shape == x.shape and np.array_equal(ob[j], x)),
                None,
            )
            if j is None:
                return None
            free.remove(j)
            found.append(j)
        if mapping is not None and found != mapping:
            return None
        mapping = found
    return mapping


def _reorder(p: Pattern, mapping: Sequence[int]) -> Pattern:
    return Pattern(p.ops, tuple(p.outputs[j] for j in mapping))


def _quiet(_: str) -> None:
    pass


def generate_rules(
    max_ops: int = 3,
    kinds: Sequence[str] = SUBSTITUTION_KINDS,
    seed: int = 0,
    verify_trials: int = 3,
    progress: Callable[[str], None] | None = None,
    inputs: Sequence[InputSpec] | None = None,
) -> GenerationReport:
    """
    Runs the whole generator and returns the verified, pruned, generalized rules
    (`inputs` replaces the enumeration's input tensors, e.g. to make a small run).
    """
    from plmr.passes.taso.verifier import random_test

    unknown = sorted(set(kinds) - set(SUBSTITUTION_KINDS))
    if unknown:
        raise PlmrError(
            f"unknown op(s) {', '.join(unknown)} for rule generation; choose from "
            f"{', '.join(SUBSTITUTION_KINDS)}"
        )
    if not kinds:
        raise PlmrError("rule generation needs at least one op")
    if not 1 <= max_ops <= 3:
        raise PlmrError(
            f"the number of ops per graph must be between 1 and 3, got {max_ops} "
            "(3 already enumerates over a million graphs; TASO's generator stops there)"
        )
    kinds = tuple(k for k in SUBSTITUTION_KINDS if k in kinds)
    report = GenerationReport(kinds, max_ops)
    say = progress if progress is not None else _quiet

    clock = time.perf_counter()
    enum = Enumerator(kinds, max_ops, seed, inputs)
    result = enum.run()
    report.counts.append(("graphs enumerated", result.graphs))
    report.counts.append(("fingerprint groups (>1 graph)", result.groups))
    report.counts.append(("candidate substitutions", len(result.candidates)))
    report.times.append(("enumeration", time.perf_counter() - clock))
    say(f"enumerated {result.graphs} graphs in {result.seconds:.1f} s")

    clock = time.perf_counter()
    templates, specs = enum.templates, enum.inputs
    trials = ExactTrials([s.shape for s in specs], np.random.default_rng(seed + 1))
    tested: list[tuple[Pattern, Pattern]] = []
    sides: dict[GraphOps, Pattern] = {}
    for a, b in result.candidates:
        pa = sides.get(a)
        if pa is None:
            pa = sides[a] = to_pattern(templates, specs, a)
        pb = to_pattern(templates, specs, b)
        mapping = same_outputs(pa, pb, trials)
        if mapping is None:
            continue
        pb = _reorder(pb, mapping)
        tested.append((pa, pb) if len(pa.ops) >= len(pb.ops) else (pb, pa))
    del sides
    report.counts.append(("pass exact re-test (real relu/max)", len(tested)))
    report.times.append(("re-test", time.perf_counter() - clock))
    say(f"{len(tested)} candidates pass the exact re-test")

    clock = time.perf_counter()
    classes = [(s.shape, s.weight) for s in specs]
    seen: set[str] = set()
    unique: list[tuple[str, Pattern, Pattern]] = []
    for src, dst in tested:
        key = renaming_key(src, dst, classes)
        if key not in seen:
            seen.add(key)
            unique.append((key, src, dst))
    derivable: set[str] = set()
    for _, src, dst in unique:
        for s2, d2 in merged_instances(src, dst, classes):
            derivable.add(renaming_key(s2, d2, classes))
    renamed = [(s, d) for key, s, d in unique if key not in derivable]
    report.counts.append(("after input renaming", len(renamed)))

    common = [
        (s, d)
        for s, d in renamed
        if not has_common_subgraph(s, d) and not has_common_supergraph(s, d)
    ]
    report.counts.append(("after common sub/supergraph", len(common)))

    weights = frozenset(i for i, spec in enumerate(specs) if spec.weight)
    sound: list[tuple[Pattern, Pattern]] = []
    for s, d in common:
        if degenerate_reason(s, d, weights) is not None:
            continue
        abstract = _abstract_constants(s, d, len(specs))
        if abstract is not None:
            s2, d2, extra = abstract
            if same_outputs(s2, d2, trials, extra) is not None:
                continue  # the constants are plain operands: a rule with inputs covers it
        sound.append((s, d))
    report.counts.append(("after degenerate rules", len(sound)))

    general: list[Rule] = []
    seen = set()
    for s, d in sound:
        try:
            rule = generalize(s, d, specs, "rule")
        except GeneralizeError:
            continue
        key = generalized_key(rule)
        if key not in seen:
            seen.add(key)
            general.append(rule)
    report.counts.append(("after shape generalization", len(general)))
    report.times.append(("pruning", time.perf_counter() - clock))

    clock = time.perf_counter()
    verified = [r for r in general if random_test(r, trials=verify_trials, seed=seed).ok]
    report.counts.append(("verified at several sizes", len(verified)))
    report.times.append(("verification", time.perf_counter() - clock))

    verified.sort(
        key=lambda r: (
            len(r.src.outputs),
            len(r.src.ops) + len(r.dst.ops),
            [*r.src.kinds(), "|", *r.dst.kinds()],
            generalized_key(r),
        )
    )
    report.rules = [
        Rule(f"rule_{i + 1}", r.inputs, r.src, r.dst, r.symbols, r.pointwise)
        for i, r in enumerate(verified)
    ]
    return report
