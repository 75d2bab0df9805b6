"""
Matching substitution rules on a search graph, and applying a match.

Each rule is used in both directions. A direction is compiled once into a plan: start at
the op that produces the first output, reach the other ops through their operands
(producers) or, for ops joined only through a shared input (multi-output rules such as two
matmuls of one input), through the users of a value already bound. Commutative ops match
either operand order. Shapes bind the rule's symbolic sizes; a match is only applied if
every intermediate value of the matched side is used inside the match, the new ops do not
close a cycle, and the new side's outputs have exactly the replaced values' shapes.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
from xdsl.utils.exceptions import VerifyException

from plmr.passes.taso.dag import Dag, Node, Val
from plmr.passes.taso.ops import (
    COMMUTATIVE,
    Params,
    Shape,
    infer_shapes,
    param_float,
    param_int,
    param_ints,
)
from plmr.passes.taso.rules import (
    INPUT,
    PatOp,
    Pattern,
    Ref,
    Rule,
    identity_array,
    map_params,
)


@dataclass(frozen=True)
class Step:
    """How a plan reaches pattern op `op`: as the root, a producer, or a user."""

    op: int
    how: str
    consumer: int = -1
    position: int = -1
    value: Ref = (INPUT, -1)


@dataclass(frozen=True)
class Directed:
    """
    One direction of a rule: match `frm`, replace it by `to`.

    A `liftable` rule (matmul, elementwise, transpose, concat and split only) also matches
    values with extra leading (batch) dimensions: every op then works on the trailing
    dimensions of each batch element, so the rule holds per element. `ranks` gives the
    rank of every value of both sides at the rule's own shapes.
    """

    rule: Rule
    frm: Pattern
    to: Pattern
    label: str
    plan: tuple[Step, ...]
    liftable: bool = False
    ranks: tuple[dict[Ref, int], dict[Ref, int]] = ({}, {})

    @property
    def root_kind(self) -> str:
        return self.frm.ops[self.plan[0].op].kind


def make_plan(pattern: Pattern) -> tuple[Step, ...] | None:
    """The matching order of a pattern, or None if its ops are not connected."""
    first = pattern.outputs[0]
    if first[0] == INPUT:
        return None
    steps = [Step(first[0], "root")]
    planned = {first[0]}
    bound: set[Ref] = set()
    i = 0
    while len(planned) < len(pattern.ops):
        if i < len(steps):
            c = steps[i].op
            i += 1
            op = pattern.ops[c]
            for p, ref in enumerate(op.operands):
                bound.add(ref)
                if ref[0] != INPUT and ref[0] not in planned:
                    planned.add(ref[0])
                    steps.append(Step(ref[0], "producer", consumer=c, position=p))
            for r in range(op.num_results):
                bound.add((c, r))
            continue
        found = None
        for j, op in enumerate(pattern.ops):
            if j in planned:
                continue
            ref = next((r for r in op.operands if r in bound), None)
            if ref is not None:
                found = Step(j, "user", value=ref)
                break
        if found is None:
            return None
        planned.add(found.op)
        steps.append(found)
    return tuple(steps)


LIFTABLE = frozenset(
    {"matmul", "add", "mul", "scale", "relu", "transpose", "concat", "split"}
)


def value_ranks(rule: Rule, pattern: Pattern) -> dict[Ref, int]:
    """The rank of every value of a rule side at the rule's shapes."""
    ranks: dict[Ref, int] = {(INPUT, i): len(s) for i, s in enumerate(rule.inputs)}
    for j, op in enumerate(pattern.ops):
        if op.kind == "const":
            rank = len(param_ints(op.kind, op.params, 1, "shape"))
        else:
            rank = max(ranks[r] for r in op.operands)
        for r in range(op.num_results):
            ranks[(j, r)] = rank
    return ranks


def directions(rules: Sequence[Rule]) -> list[Directed]:
    """Both directions of every rule whose matched side is connected and binds all inputs."""
    out: list[Directed] = []
    for rule in rules:
        liftable = not rule.pointwise and all(
            k in LIFTABLE for side in rule.sides() for k in side.kinds()
        )
        for frm, to, label in (
            (rule.src, rule.dst, rule.name),
            (rule.dst, rule.src, f"{rule.name}'"),
        ):
            if not to.used_inputs() <= frm.used_inputs():
                continue
            plan = make_plan(frm)
            if plan is not None:
                ranks = (value_ranks(rule, frm), value_ranks(rule, to))
                out.append(Directed(rule, frm, to, label, plan, liftable, ranks))
    return out


def lift_params(kind: str, params: Params, batch: int) -> Params:
    """A key's parameters for operands with `batch` extra leading dimensions."""
    if batch == 0:
        return params
    if kind in ("concat", "split"):
        axis = param_int(kind, params, 0, "axis")
        return (axis + batch, *params[1:])
    if kind == "transpose":
        perm = param_ints(kind, params, 0, "perm")
        return ((*range(batch), *(p + batch for p in perm)),)
    return params


@dataclass
class _State:
    ops: dict[int, int]
    perms: dict[int, tuple[int, ...]]
    vars: dict[int, Val]
    dims: dict[int, int]
    factor: float | None

    def copy(self) -> _State:
        return _State(
            dict(self.ops), dict(self.perms), dict(self.vars), dict(self.dims), self.factor
        )


@dataclass(frozen=True)
class Match:
    directed: Directed
    ops: dict[int, int]
    vars: dict[int, Val]
    dims: dict[int, int]
    factor: float


def _bind_dim(state: _State, rep: int, actual: int, symbols: frozenset[int]) -> bool:
    if rep not in symbols:
        return rep == actual
    have = state.dims.get(rep)
    if have is None:
        state.dims[rep] = actual
        return True
    return have == actual


def _bind_shape(
    state: _State, rep: Shape, actual: Shape, rule: Rule, liftable: bool = False
) -> bool:
    if rule.pointwise:
        return True
    if liftable and len(actual) > len(rep):
        actual = actual[len(actual) - len(rep) :]
    if len(rep) != len(actual):
        return False
    return all(
        _bind_dim(state, r, a, rule.symbols) for r, a in zip(rep, actual, strict=True)
    )


def _params_match(
    state: _State, pat: PatOp, node: Node, nid: int, dag: Dag, d: Directed, j: int
) -> bool:
    rule = d.rule
    k = pat.kind
    batch = 0
    if pat.operands and not rule.pointwise:
        batch = len(dag.shape(node.operands[0])) - d.ranks[0][pat.operands[0]]
        if batch < 0 or (batch > 0 and not d.liftable):
            return False
    del j
    if k == "scale":
        factor = param_float(k, node.params, 0, "factor")
        if state.factor is None:
            state.factor = factor
            return True
        return state.factor == factor
    if k == "split":
        if node.params[0] != lift_params(k, pat.params, batch)[0]:
            return False
        rep = param_ints(k, pat.params, 1, "sizes")
        actual = param_ints(k, node.params, 1, "sizes")
        return len(rep) == len(actual) and all(
            _bind_dim(state, r, a, rule.symbols) for r, a in zip(rep, actual, strict=True)
        )
    if k == "const":
        shape = param_ints(k, pat.params, 1, "shape")
        return (
            node.params[0] == "value"
            and _bind_shape(state, shape, node.shapes[0], rule)
            and dag.ctx.is_identity(dag, nid)
        )
    return node.params == lift_params(k, pat.params, batch)


def _try_op(dag: Dag, d: Directed, state: _State, j: int, nid: int) -> Iterator[_State]:
    """States extending `state` with pattern op `j` matched to node `nid`."""
    if nid in state.ops.values():
        return
    pat = d.frm.ops[j]
    node = dag.nodes[nid]
    if node.kind != pat.kind or len(node.operands) != len(pat.operands):
        return
    if len(node.shapes) != pat.num_results:
        return
    base = state.copy()
    if not _params_match(base, pat, node, nid, dag, d, j):
        return
    perms: list[tuple[int, ...]] = [tuple(range(len(pat.operands)))]
    if pat.kind in COMMUTATIVE:
        perms.append((1, 0))
    for perm in perms:
        st = base.copy()
        ok = True
        for p, ref in enumerate(pat.operands):
            actual = node.operands[perm[p]]
            if ref[0] == INPUT:
                have = st.vars.get(ref[1])
                if have is None:
                    if actual in st.vars.values():
                        ok = False
                        break
                    st.vars[ref[1]] = actual
                    rep = d.rule.inputs[ref[1]]
                    if not _bind_shape(st, rep, dag.shape(actual), d.rule, d.liftable):
                        ok = False
                        break
                elif have != actual:
                    ok = False
                    break
            elif ref[0] in st.ops:
                if (st.ops[ref[0]], ref[1]) != actual:
                    ok = False
                    break
        if ok:
            st.ops[j] = nid
            st.perms[j] = perm
            yield st


def _edges_agree(dag: Dag, d: Directed, state: _State) -> bool:
    """Every operand edge between matched ops holds (ops can be matched before producers)."""
    for c, nid in state.ops.items():
        node = dag.nodes[nid]
        perm = state.perms[c]
        for p, ref in enumerate(d.frm.ops[c].operands):
            if ref[0] != INPUT and node.operands[perm[p]] != (state.ops[ref[0]], ref[1]):
                return False
    return True


def _search(dag: Dag, d: Directed, state: _State, step: int) -> Iterator[_State]:
    if step == len(d.plan):
        if _edges_agree(dag, d, state):
            yield state
        return
    s = d.plan[step]
    if s.how == "producer":
        consumer = dag.nodes[state.ops[s.consumer]]
        actual = consumer.operands[state.perms[s.consumer][s.position]]
        ref = d.frm.ops[s.consumer].operands[s.position]
        if actual[1] != ref[1]:
            return
        candidates = [actual[0]]
    else:
        ref = s.value
        val = state.vars.get(ref[1]) if ref[0] == INPUT else (state.ops[ref[0]], ref[1])
        if val is None:
            return
        candidates = [u for u, _ in dag.value_users(val)]
    for nid in candidates:
        for st in _try_op(dag, d, state, s.op, nid):
            yield from _search(dag, d, st, step + 1)


def find_matches(dag: Dag, d: Directed) -> Iterator[Match]:
    """Every complete match of one rule direction in a graph."""
    root = d.plan[0].op
    for nid in dag.by_kind().get(d.root_kind, ()):
        for st in _try_op(dag, d, _State({}, {}, {}, {}, None), root, nid):
            for full in _search(dag, d, st, 1):
                yield Match(d, full.ops, full.vars, full.dims, full.factor or 1.0)


def apply_match(dag: Dag, m: Match) -> Dag | None:
    """The graph with a match replaced, or None if the replacement is not valid here."""
    d = m.directed
    matched = set(m.ops.values())
    outputs = set(d.frm.outputs)
    # Intermediate values must not be used outside the match.
    for j, nid in m.ops.items():
        for r in range(d.frm.ops[j].num_results):
            if (j, r) in outputs:
                continue
            val = (nid, r)
            if dag.is_output(val):
                return None
            if any(u not in matched for u, _ in dag.value_users(val)):
                return None
    # The new ops read the bound inputs; none of them may depend on a replaced op.
    below = dag.descendants(matched)
    if any(v[0] in below or v[0] in matched for v in m.vars.values()):
        return None
    ctx = dag.ctx
    needed = {
        s
        for op in d.to.ops
        for s in _sizes_of(op)
        if s in d.rule.symbols and not d.rule.pointwise
    }
    if not needed <= set(m.dims):
        return None
    new_nodes: dict[int, Node] = {}
    values: list[list[Val]] = []
    elt = dag.nodes[next(iter(m.vars.values()))[0]].elt if m.vars else None
    existing = {
        (n.kind, n.params, n.operands): nid
        for nid, n in dag.nodes.items()
        if n.kind not in ("arg", "const") and not n.kind.startswith("opaque:")
    }

    def get(ref: Ref) -> Val:
        return m.vars[ref[1]] if ref[0] == INPUT else values[ref[0]][ref[1]]

    def shape_of(v: Val) -> Shape:
        node = new_nodes.get(v[0]) or dag.nodes[v[0]]
        return node.shapes[v[1]]

    for op in d.to.ops:
        params: Params = map_params(op, m.dims, d.rule.symbols, m.factor)
        operands = tuple(get(r) for r in op.operands)
        if op.kind == "const":
            shape = param_ints(op.kind, params, 1, "shape")
            assert elt is not None
            ctx.constants.append(identity_array(shape, np.float64))
            node = Node("const", ("value", len(ctx.constants) - 1), (), (shape,), elt)
        else:
            if operands and not d.rule.pointwise:
                batch = len(shape_of(operands[0])) - d.ranks[1][op.operands[0]]
                if batch < 0 or (batch > 0 and not d.liftable):
                    return None
                params = lift_params(op.kind, params, batch)
            try:
                shapes = infer_shapes(op.kind, params, [shape_of(v) for v in operands])
            except VerifyException:
                return None
            first = operands[0][0]
            node_elt = (new_nodes.get(first) or dag.nodes[first]).elt
            node = Node(op.kind, params, operands, tuple(shapes), node_elt)
        key = (node.kind, node.params, node.operands)
        reuse = existing.get(key)
        if reuse is not None and reuse not in matched and reuse not in below:
            values.append([(reuse, r) for r in range(len(node.shapes))])
            continue
        nid = ctx.fresh()
        new_nodes[nid] = node
        existing[key] = nid
        ctx.hashes[nid] = hash(
            (node.kind, node.params, tuple((ctx.hashes[o[0]], o[1]) for o in operands))
        )
        values.append([(nid, r) for r in range(len(node.shapes))])
    replace: dict[Val, Val] = {}
    for old_ref, new_ref in zip(d.frm.outputs, d.to.outputs, strict=True):
        old = (m.ops[old_ref[0]], old_ref[1])
        new = get(new_ref)
        if dag.shape(old) != shape_of(new):
            return None
        replace[old] = new
    return dag.rewrite(new_nodes, replace, d.label)


def _sizes_of(op: PatOp) -> tuple[int, ...]:
    if op.kind in ("split", "const"):
        return param_ints(op.kind, op.params, 1, "sizes")
    return ()
