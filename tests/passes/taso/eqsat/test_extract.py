"""Extraction from an e-graph: cycle breaking keeps the input graph a solution."""

import math

import numpy as np
import pytest

from plmr.passes.taso.eqsat.egraph import Classes, ENode, Priced
from plmr.passes.taso.eqsat.extract import (
    Choice,
    acyclic,
    cycle_breakers,
    ilp,
    reachable,
)


def random_egraph(seed: int, classes: int = 30) -> tuple[Classes, Priced, Choice]:
    """Classes with a leaf-ward node each (the kept choice, acyclic) and random others."""
    rng = np.random.default_rng(seed)
    g = Classes()
    keep: Choice = {}
    costs: list[float] = []

    def add(c: int, children: tuple[int, ...], cost: float) -> int:
        g.nodes.append(ENode("N1" if children else "Arg", (c,), children))
        g.node_class.append(c)
        g.members.setdefault(c, []).append(len(g.nodes) - 1)
        costs.append(cost)
        return len(g.nodes) - 1

    for c in range(classes):
        below = tuple(int(x) for x in rng.integers(0, c, size=min(c, 2)))
        keep[c] = add(c, below, 10.0)
        for _ in range(int(rng.integers(0, 3))):
            kids = tuple(int(x) for x in rng.integers(0, classes, size=2))
            add(c, kids, float(rng.uniform(0.0, 20.0)))
    priced = Priced(costs, [() for _ in costs], set())
    return g, priced, keep


def class_graph_is_acyclic(g: Classes, priced: Priced, roots: list[int], banned) -> bool:
    classes = reachable(g, priced, roots, {}, banned)
    state: dict[int, int] = {}

    def visit(c: int) -> bool:
        state[c] = 1
        for n in g.members[c]:
            if n in banned:
                continue
            for ch in g.nodes[n].children:
                s = state.get(ch)
                if s == 1 or (s is None and not visit(ch)):
                    return False
        state[c] = 2
        return True

    return all(state.get(c) == 2 or visit(c) for c in classes)


@pytest.mark.parametrize("seed", range(8))
def test_cycle_breakers_leave_no_cycle_and_keep_the_input(seed: int):
    g, priced, keep = random_egraph(seed)
    roots = [len(keep) - 1]
    banned = cycle_breakers(g, priced, roots, {}, keep)
    assert class_graph_is_acyclic(g, priced, roots, banned)
    assert not banned & set(keep.values())
    assert acyclic(g, keep, roots)


def test_ilp_never_does_worse_than_the_input():
    for seed in range(4):
        g, priced, keep = random_egraph(seed)
        roots = [len(keep) - 1]
        found = ilp(g, priced, roots, 1_000, {}, keep)
        assert found.choice is not None
        assert acyclic(g, found.choice, roots)

        def cost(choice: Choice) -> float:
            seen: set[int] = set()
            stack = list(roots)
            while stack:
                c = stack.pop()
                if c not in seen:
                    seen.add(c)
                    stack.extend(g.nodes[choice[c]].children)
            return sum(priced.cost[choice[c]] for c in seen)

        assert cost(found.choice) <= cost(keep) + 1e-9
        assert not math.isinf(cost(found.choice))


@pytest.mark.parametrize("root_cost", [math.inf, math.nan])
def test_ilp_of_an_output_without_a_usable_node_is_infeasible_not_a_crash(
    root_cost: float,
):
    """
    An output class whose every node is unpriceable (or has a NaN cost) left the ILP
    without variables: scipy's milp raised "`c` must be a one-dimensional array of
    finite numbers with at least one element" (`plmr fuzz`, taso-substitute{engine=
    eqsat} on a 4x1 grid with 8 KiB of SRAM).
    """
    g = Classes()
    g.nodes.append(ENode("Arg", (0,), ()))
    g.node_class.append(0)
    g.members[0] = [0]
    g.nodes.append(ENode("N1", (1,), (0,)))
    g.node_class.append(1)
    g.members[1] = [1]
    priced = Priced([0.0, root_cost], [(), ()], set())
    found = ilp(g, priced, [1], 1_000, {}, {})
    assert found.choice is None
    assert found.status == "infeasible"
