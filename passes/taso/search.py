"""
TASO's cost-based backtracking search over graph substitutions.

A priority queue holds candidate graphs ordered by cost. Each step pops the cheapest,
applies every match of every rule direction to it, and keeps a new graph if its cost is
below `alpha` times the best cost so far (a cheaper one becomes the best at once), it has fewer than twice the original number of
ops, and its structural hash has not been seen. The search stops after `budget` pops (or
when the queue is empty) and returns the cheapest graph found.
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from plmr.passes.taso.cost import CostModel
from plmr.passes.taso.dag import Dag
from plmr.passes.taso.matcher import Directed, apply_match, find_matches


@dataclass(frozen=True)
class SearchResult:
    """The outcome of one search: the best graph, costs in cycles, and statistics."""

    best: Dag
    initial_cost: float
    best_cost: float
    explored: int
    """Graphs popped from the queue."""
    generated: int
    """New (unseen, accepted) graphs pushed."""
    seconds: float

    @property
    def applied(self) -> tuple[str, ...]:
        return self.best.applied


def folded_concats_only(dag: Dag) -> bool:
    """Whether every `concat` of `dag` joins constants only (it then folds away)."""
    nodes = dag.nodes

    def constant(nid: int) -> bool:
        node = nodes[nid]
        if node.kind == "const":
            return True
        return node.kind == "concat" and all(constant(o[0]) for o in node.operands)

    return all(constant(nid) for nid in dag.by_kind().get("concat", []))


def optimize(
    dag: Dag,
    rules: Sequence[Directed],
    cost: CostModel,
    alpha: float = 1.05,
    budget: int = 1000,
    accept: Callable[[Dag], bool] | None = None,
) -> SearchResult:
    """
    Runs the backtracking search from `dag`. With `accept`, only graphs it accepts can
    be the result (the search still explores through the others).
    """
    start = time.perf_counter()
    max_ops = 2 * dag.op_count()
    initial = cost.graph_cost(dag)
    best, best_cost = dag, initial
    seen = {dag.graph_hash()}
    counter = itertools.count()
    queue: list[tuple[float, int, Dag]] = [(initial, next(counter), dag)]
    by_kind: dict[str, list[Directed]] = {}
    for d in rules:
        by_kind.setdefault(d.root_kind, []).append(d)
    explored = generated = 0
    while queue and explored < budget:
        c, _, g = heapq.heappop(queue)
        explored += 1
        if c < best_cost and (accept is None or accept(g)):
            best, best_cost = g, c
        kinds = g.by_kind()
        for kind, directed in by_kind.items():
            if kind not in kinds:
                continue
            for d in directed:
                for m in find_matches(g, d):
                    new = apply_match(g, m)
                    if new is None:
                        continue
                    new.graph_hash()
                    new = new.simplify()
                    h = new.graph_hash()
                    if h in seen:
                        continue
                    seen.add(h)
                    if new.op_count() >= max_ops:
                        continue
                    new_cost = cost.graph_cost(new)
                    if new_cost < alpha * best_cost:
                        generated += 1
                        heapq.heappush(queue, (new_cost, next(counter), new))
                        if new_cost < best_cost and (accept is None or accept(new)):
                            best, best_cost = new, new_cost
    return SearchResult(
        best, initial, best_cost, explored, generated, time.perf_counter() - start
    )
