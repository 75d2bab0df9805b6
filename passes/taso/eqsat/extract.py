"""
Extracting a graph from a saturated e-graph: greedy (tree cost) and exact (ILP).

Greedy extraction picks, bottom-up, the node of least tree cost in every class (Knuth's
generalization of Dijkstra's algorithm, so the choice is acyclic). A tree cost counts a
shared sub-term once per use, so greedy cannot see that one merged matmul serves two
outputs; the ILP (`scipy.optimize.milp`, HiGHS) counts every chosen node once, as the
graph runs it. Both choices are then priced exactly as graphs and the cheaper one wins.
The ILP is Tensat's: a 0/1 variable per node, a chosen node needs a chosen node in each
child class, every output class needs one, and an order variable per class forbids
cycles (only inside strongly connected parts of the e-graph, where cycles can occur).
"""

from __future__ import annotations

import heapq
import importlib
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from plmr.passes.taso.eqsat.egraph import Classes, Priced

Choice = dict[int, int]
"""Class -> chosen node."""


def greedy(g: Classes, priced: Priced) -> Choice:
    """The least-tree-cost node of every class reachable bottom-up."""
    parents: dict[int, list[int]] = {}
    pending: list[int] = []
    heap: list[tuple[float, int]] = []
    for n, node in enumerate(g.nodes):
        kids = set(node.children)
        pending.append(len(kids))
        if math.isinf(priced.cost[n]):
            continue
        for ch in kids:
            parents.setdefault(ch, []).append(n)
        if not kids:
            heapq.heappush(heap, (priced.cost[n], n))
    best: dict[int, float] = {}
    choice: Choice = {}
    while heap:
        cost, n = heapq.heappop(heap)
        c = g.node_class[n]
        if c in choice:
            continue
        choice[c] = n
        best[c] = cost
        for p in parents.get(c, ()):
            pending[p] -= 1
            if pending[p] == 0:
                total = priced.cost[p] + sum(best[ch] for ch in set(g.nodes[p].children))
                heapq.heappush(heap, (total, p))
    return choice


def _members(
    g: Classes, priced: Priced, c: int, fixed: Choice, banned: frozenset[int] = frozenset()
) -> list[int]:
    """The usable nodes of a class (only the fixed one, if it has one)."""
    if c in fixed:
        return [fixed[c]]
    return [
        n for n in g.members.get(c, ()) if math.isfinite(priced.cost[n]) and n not in banned
    ]


def cycle_breakers(
    g: Classes,
    priced: Priced,
    roots: Sequence[int],
    fixed: Choice,
    keep: Choice | None = None,
) -> frozenset[int]:
    """
    Nodes whose removal leaves the reachable e-graph acyclic, none of them a node of
    `keep` (the input graph's choice, acyclic) where that can be helped, so that the
    input graph stays a solution. Rounds of: the strongly connected parts of the class
    graph; a depth-first walk in each that, for every cycle it closes, drops the closing
    node or, if the input graph holds it, the nearest node on the cycle it does not.
    """
    kept = set((keep or {}).values()) | set(fixed.values())
    banned: set[int] = set()
    for _ in range(64):
        classes = reachable(g, priced, roots, fixed, frozenset(banned))
        edges: dict[int, set[int]] = {}
        for c in classes:
            for n in _members(g, priced, c, fixed, frozenset(banned)):
                edges.setdefault(c, set()).update(g.nodes[n].children)
        comp = _sccs(classes, edges)
        sizes: dict[int, int] = {}
        for c in classes:
            sizes[comp[c]] = sizes.get(comp[c], 0) + 1
        cyclic = {c for c in classes if sizes[comp[c]] > 1 or c in edges.get(c, set())}
        if not cyclic:
            break
        state: dict[int, int] = {}
        for start in sorted(cyclic):
            if start in state:
                continue
            _break_cycles(g, priced, start, comp, fixed, keep or {}, kept, banned, state)
    return frozenset(banned)


def _break_cycles(
    g: Classes,
    priced: Priced,
    start: int,
    comp: dict[int, int],
    fixed: Choice,
    keep: Choice,
    kept: set[int],
    banned: set[int],
    state: dict[int, int],
) -> None:
    """
    A depth-first walk inside one strongly connected part, breaking the cycles it
    closes (see `cycle_breakers`)."""
    part = comp[start]
    state[start] = 1
    # (class, its remaining (node, child) edges, the node being walked)
    stack: list[tuple[int, list[tuple[int, int]], list[int]]] = [
        (start, _edges_of(g, priced, start, fixed, keep), [-1])
    ]
    depth: dict[int, int] = {start: 0}
    while stack:
        c, todo, current = stack[-1]
        if not todo:
            state[c] = 2
            depth.pop(c, None)
            stack.pop()
            continue
        n, ch = todo.pop()
        if n in banned or comp.get(ch) != part:
            continue
        current[0] = n
        s = state.get(ch)
        if s == 1:
            if n in kept:
                path = [entry[2][0] for entry in stack[depth[ch] :]]
                n = next((m for m in reversed(path) if m not in kept), n)
            banned.add(n)
        elif s is None:
            state[ch] = 1
            depth[ch] = len(stack)
            stack.append((ch, _edges_of(g, priced, ch, fixed, keep), [-1]))


def _edges_of(
    g: Classes, priced: Priced, c: int, fixed: Choice, keep: Choice
) -> list[tuple[int, int]]:
    """
    (node, child class) pairs of a class, the kept then the cheapest node first
    (popped from the end)."""
    first = keep.get(c)
    nodes = sorted(
        _members(g, priced, c, fixed), key=lambda n: (n == first, -priced.cost[n])
    )
    return [(n, ch) for n in nodes for ch in reversed(g.nodes[n].children)]


def reachable(
    g: Classes,
    priced: Priced,
    roots: Sequence[int],
    fixed: Choice | None = None,
    banned: frozenset[int] = frozenset(),
) -> set[int]:
    """Classes reachable from the roots through usable nodes."""
    seen: set[int] = set()
    stack = list(roots)
    while stack:
        c = stack.pop()
        if c in seen:
            continue
        seen.add(c)
        for n in _members(g, priced, c, fixed or {}, banned):
            stack.extend(g.nodes[n].children)
    return seen


def _sccs(classes: set[int], edges: dict[int, set[int]]) -> dict[int, int]:
    """Tarjan's strongly connected components (iterative): class -> component id."""
    index: dict[int, int] = {}
    low: dict[int, int] = {}
    comp: dict[int, int] = {}
    stack: list[int] = []
    on: set[int] = set()
    counter = 0
    ncomp = 0
    for start in classes:
        if start in index:
            continue
        work: list[tuple[int, list[int]]] = [(start, sorted(edges.get(start, ())))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on.add(start)
        while work:
            v, rest = work[-1]
            if rest:
                w = rest.pop()
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, sorted(edges.get(w, ()))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp[w] = ncomp
                    if w == v:
                        break
                ncomp += 1
    return comp


@dataclass(frozen=True)
class IlpResult:
    choice: Choice | None
    status: str
    """optimal, node limit (the best integer solution within the branch-and-bound
    nodes), infeasible, cyclic, empty, ..."""
    variables: int


def ilp(
    g: Classes,
    priced: Priced,
    roots: Sequence[int],
    node_limit: int,
    fixed: Choice | None = None,
    keep: Choice | None = None,
) -> IlpResult:
    """
    The least-cost acyclic choice counting shared nodes once, each solve within
    `node_limit` branch-and-bound nodes (None if a solve found no integer solution
    there): a limit on work, so the choice does not depend on the machine's speed.

    Order variables are added lazily: first without them, then for the strongly
    connected parts that hold a cycle of the previous solution, and so on. Classes in
    `fixed` keep that node (constant classes: any constant sub-graph folds to nothing,
    so the ILP need not choose among the many equal ways to build one).
    """
    fixed = fixed or {}
    banned = cycle_breakers(g, priced, roots, fixed, keep)
    ordered: set[int] = set()
    result = IlpResult(None, "not run", 0)
    for _ in range(6):
        result = _ilp(g, priced, roots, node_limit, ordered, fixed, banned)
        if result.choice is None:
            return result
        cycle = _cycle_classes(g, result.choice, roots)
        if not cycle:
            return result
        ordered |= cycle
    return IlpResult(None, "cyclic", result.variables)


def _cycle_classes(g: Classes, choice: Choice, roots: Sequence[int]) -> set[int]:
    """Classes on cycles of a choice (empty if it is acyclic)."""
    edges: dict[int, set[int]] = {}
    seen: set[int] = set()
    stack = list(roots)
    while stack:
        c = stack.pop()
        if c in seen or c not in choice:
            continue
        seen.add(c)
        kids = set(g.nodes[choice[c]].children)
        edges[c] = kids
        stack.extend(kids)
    comp = _sccs(seen, edges)
    sizes: dict[int, int] = {}
    for c in seen:
        sizes[comp[c]] = sizes.get(comp[c], 0) + 1
    return {c for c in seen if sizes[comp[c]] > 1 or c in edges.get(c, set())}


def _ilp(
    g: Classes,
    priced: Priced,
    roots: Sequence[int],
    node_limit: int,
    ordered: set[int],
    fixed: Choice,
    banned: frozenset[int] = frozenset(),
) -> IlpResult:
    # scipy ships no type stubs: use it untyped.
    optimize: Any = importlib.import_module("scipy.optimize")
    sparse: Any = importlib.import_module("scipy.sparse")

    classes = reachable(g, priced, roots, fixed, banned)
    nodes = [n for c in classes for n in _members(g, priced, c, fixed, banned)]
    var = {n: i for i, n in enumerate(nodes)}
    edges: dict[int, set[int]] = {}
    for n in nodes:
        edges.setdefault(g.node_class[n], set()).update(g.nodes[n].children)
    comp = _sccs(classes, edges)
    sizes: dict[int, int] = {}
    for c in classes:
        sizes[comp[c]] = sizes.get(comp[c], 0) + 1
    cycle_comps = {comp[c] for c in ordered if c in comp}
    cyclic = sorted(c for c in classes if sizes[comp[c]] > 1 and comp[c] in cycle_comps)
    order = {c: len(nodes) + i for i, c in enumerate(cyclic)}
    nvars = len(nodes) + len(cyclic)
    rows: list[int] = []
    cols: list[int] = []
    vals: list[float] = []
    lb: list[float] = []
    ub: list[float] = []

    def row(entries: list[tuple[int, float]], lo: float, hi: float) -> None:
        r = len(lb)
        for col, v in entries:
            rows.append(r)
            cols.append(col)
            vals.append(v)
        lb.append(lo)
        ub.append(hi)

    for c in set(roots):
        usable = _members(g, priced, c, fixed, banned)
        if not usable:
            # No node of this output can be used (unpriceable, or banned to break
            # cycles): there is no choice to optimise (the greedy one stands).
            return IlpResult(None, "infeasible", nvars)
        row([(var[n], 1.0) for n in usable], 1.0, math.inf)
    eps = 1.0 / (len(cyclic) + 1)
    for n in nodes:
        c = g.node_class[n]
        for ch in set(g.nodes[n].children):
            row(
                [(var[m], 1.0) for m in g.members.get(ch, ()) if m in var]
                + [(var[n], -1.0)],
                0.0,
                math.inf,
            )
            if c in order and ch in order and comp[c] == comp[ch]:
                row(
                    [(order[c], 1.0), (order[ch], -1.0), (var[n], -1.0)],
                    eps - 1.0,
                    math.inf,
                )
    if not lb:
        return IlpResult({}, "empty", 0)
    matrix = sparse.coo_matrix((vals, (rows, cols)), shape=(len(lb), nvars)).tocsr()
    objective = np.zeros(nvars)
    for n, i in var.items():
        objective[i] = priced.cost[n]
    integrality = np.zeros(nvars)
    integrality[: len(nodes)] = 1
    upper = np.ones(nvars)
    res: Any = optimize.milp(
        objective,
        integrality=integrality,
        bounds=(np.zeros(nvars), upper),
        constraints=optimize.LinearConstraint(matrix, np.array(lb), np.array(ub)),
        options={"node_limit": node_limit, "disp": False},
    )
    status = {0: "optimal", 1: "node limit", 2: "infeasible", 3: "unbounded"}.get(
        res.status, "failed"
    )
    if res.x is None:
        return IlpResult(None, status, nvars)
    picked: Choice = {}
    for n, i in var.items():
        if res.x[i] > 0.5:
            c = g.node_class[n]
            if c not in picked or priced.cost[n] < priced.cost[picked[c]]:
                picked[c] = n
    return IlpResult(picked, status, nvars)


def acyclic(g: Classes, choice: Choice, roots: Sequence[int]) -> bool:
    """Whether following `choice` from the roots reaches every class without a cycle."""
    state: dict[int, int] = {}
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10000))
    for root in roots:
        stack: list[tuple[int, int]] = [(root, 0)]
        while stack:
            c, i = stack.pop()
            if i == 0:
                if state.get(c) == 2:
                    continue
                if state.get(c) == 1 or c not in choice:
                    return False
                state[c] = 1
            kids = g.nodes[choice[c]].children
            if i < len(kids):
                stack.append((c, i + 1))
                if state.get(kids[i]) != 2:
                    if state.get(kids[i]) == 1:
                        return False
                    stack.append((kids[i], 0))
            else:
                state[c] = 2
    return True
