"""
The equality-saturation engine of `taso-substitute` (`engine=eqsat`).

A search graph is encoded as egglog facts, the rule set as egglog rules (`encode`), and the
e-graph is grown under limits on work only (e-nodes, iterations, stages, egglog's
back-off scheduler), never on time, so the graph chosen depends on the program and the
options alone, not on the machine or its load: rules whose matched side joins several
patterns (two matmuls of one input, ...) run in the first `multi_rounds` iterations only,
as Tensat's `k_multi`, since they pair every new node with every old one. Then the
cheapest graph under the wafer cost model is extracted, greedily and exactly by ILP
(within a number of branch-and-bound nodes); the cheaper graph as priced by `CostModel`
wins and is returned only if it is cheaper than the input. Stages repeat from the
extracted graph while its cost improves.
"""

from __future__ import annotations

import math
import time  # the seconds spent, reported only: no limit of the search is a time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from egglog.bindings import EggSmolError, EGraph

from plmr.errors import PlmrError
from plmr.passes.taso.cost import CostModel
from plmr.passes.taso.dag import Dag, Node, Val
from plmr.passes.taso.eqsat.egraph import (
    Classes,
    Priced,
    node_costs,
    node_kind,
    read_egraph,
)
from plmr.passes.taso.eqsat.encode import (
    PRELUDE,
    EncodeError,
    Keys,
    RuleSet,
    Signature,
    Untranslated,
    encode_graph,
    graph_signatures,
    translate_rules,
)
from plmr.passes.taso.eqsat.extract import Choice, acyclic, greedy, ilp
from plmr.passes.taso.ops import Params, Shape
from plmr.passes.taso.rules import Rule, identity_array

IDENTITY_CHECK_LIMIT = 1 << 16
"""Constants with more elements are never identities for the rules (not inspected)."""


@dataclass(frozen=True)
class EqsatOptions:
    """Limits of one saturation and extraction."""

    node_limit: int = 20_000
    """Stop growing a stage's e-graph once it holds this many e-nodes (or
    `nodes_per_op` times the graph's op count, if more)."""
    nodes_per_op: int = 20
    """The node limit scaled to the program: e-nodes per op of the input graph."""
    iterations: int = 2
    """Iterations per stage (few: the next stage starts from the extracted graph, so
    the e-graph, and the ILP over it, stay small)."""
    stages: int = 8
    """Saturations at most: each stage starts from the graph the last one extracted."""
    multi_rounds: int = 2
    """Iterations in which multi-pattern rules run."""
    multi_every: int = 1
    """Multi-pattern rules run every this many iterations (the others let single-pattern
    rules build the terms the next round can merge)."""
    chunk: int = 3
    """Iterations per egglog schedule (the limits are checked between schedules)."""
    ilp_nodes: int = 1_000
    """Branch-and-bound nodes of each ILP solve (HiGHS's `node_limit`; 0: greedy
    extraction only). A solve stopped there keeps its best integer solution."""
    polish_trials: int = 400
    """Graphs built and priced whole while putting input nodes back into an extracted
    graph where that is cheaper as a whole, per candidate (0: none)."""
    ilp_node_limit: int = 30_000
    """Skip the ILP on larger (reachable) e-graphs."""
    match_limit: int = 1_000
    """A rule matching more often in one iteration (or 4x the op count, if more) sits
    that iteration out (egglog's back-off scheduler), so that associativity does not
    flood the e-graph."""


@dataclass(frozen=True)
class EqsatResult:
    """The outcome of one saturation (costs in cycles of the device)."""

    best: Dag
    initial_cost: float
    best_cost: float
    applied: tuple[str, ...]
    explored: int
    """Iterations run."""
    enodes: int
    classes: int
    stop: str
    """Why saturation stopped: saturated, node limit, iteration limit."""
    extraction: str
    """Which extraction won: ilp, greedy, input (neither was cheaper), or none."""
    greedy_cost: float
    ilp_cost: float
    ilp_status: str
    seconds: float
    saturate_seconds: float
    extract_seconds: float
    untranslated: tuple[Untranslated, ...] = field(default=())
    declined: str = ""
    """Why the graph was left alone (an op the encoding does not hold), if it was."""
    limits: tuple[str, ...] = ()
    """The work limits some stage hit (`saturation`: the node limit, `extraction`: the
    ILP's branch-and-bound nodes, `polish`: its trials): the search stopped short of
    saturation or of an optimal extraction there (the result is deterministic
    either way)."""


def find_identities(dag: Dag) -> set[int]:
    out: set[int] = set()
    for nid, node in dag.nodes.items():
        if node.kind != "const":
            continue
        shape = node.shapes[0]
        if math.prod(shape) > IDENTITY_CHECK_LIMIT:
            continue
        if dag.ctx.is_identity(dag, nid):
            out.add(nid)
    return out


def _size(eg: EGraph) -> int:
    (report,) = eg.run_program(*eg.parse_program("(print-size)"))
    sizes: Any = getattr(report, "sizes", None)
    if sizes is None:
        sizes = report.__getattribute__("_0") if hasattr(report, "_0") else []
    return sum(n for name, n in sizes if name[:1].isupper())


def _run(eg: EGraph, rulesets: Sequence[Sequence[str]], match_limit: int) -> bool:
    """
    Iterations of the rulesets in one schedule (one list per iteration); a rule with
    more matches than the limit in an iteration sits it out (egglog's back-off
    scheduler). Whether anything changed.
    """
    steps = " ".join(f"(run-with bo {name})" for names in rulesets for name in names)
    program = (
        f"(run-schedule (let-scheduler bo (back-off :match-limit {match_limit})) "
        f"(seq {steps}))"
    )
    (out,) = eg.run_program(*eg.parse_program(program))
    return bool(getattr(out, "report").updated)


def _load(eg: EGraph, texts: Sequence[str], chunk: int = 64) -> None:
    """Runs egglog commands in small pieces (egglog parses one long text slowly)."""
    for i in range(0, len(texts), chunk):
        eg.run_program(*eg.parse_program("\n".join(texts[i : i + chunk])))


class _Builder:
    """Builds the `Dag` of an extraction, reusing the input graph's nodes where chosen."""

    def __init__(self, dag: Dag, g: Classes, keys: Keys, names: dict[int, str]):
        self.dag, self.g, self.keys = dag, g, keys
        self.names = names
        self.orig: dict[tuple[int, tuple[Any, ...]], int] = {}
        self.klass: dict[int, int] = {}
        for nid, node in dag.nodes.items():
            c = g.globals.get(names[nid])
            if c is None:
                continue
            self.klass[nid] = c
        for nid, node in dag.nodes.items():
            if nid not in self.klass:
                continue
            kids = tuple(self._class_of(o) for o in node.operands)
            self.orig[(self.klass[nid], (node.kind, node.params, kids))] = nid
        self.elt = next(iter(dag.nodes.values())).elt
        self.names = names
        self.new_classes: set[int] = set()
        """Classes of the last extraction whose node is not one of the input graph's."""

    def original_choice(self) -> Choice:
        """Class -> the e-node of the input graph's node in it."""
        g, keys = self.g, self.keys
        out: Choice = {}
        results: dict[int, tuple[int, int]] = {}
        for nid, node in self.dag.nodes.items():
            if len(node.shapes) > 1 and nid in self.klass:
                for r in range(len(node.shapes)):
                    results[self._class_of((nid, r))] = (self.klass[nid], r)
        for n, node in enumerate(g.nodes):
            c = g.node_class[n]
            if node.op in ("Arg", "Const", "Ident"):
                out.setdefault(c, n)
            elif node.op == "Res":
                if results.get(c) == (node.children[0], node.fields[0]):
                    out[c] = n
            elif (c, (*node_kind(node, keys), node.children)) in self.orig:
                out[c] = n
        return out

    def _class_of(self, v: Val) -> int:
        nid, r = v
        if len(self.dag.nodes[nid].shapes) == 1:
            return self.klass[nid]
        return self.g.globals[f"{self.names[nid]}_{r}"]

    def build(self, choice: Choice, shapes: list[tuple[Shape, ...]]) -> Dag:
        dag, g, ctx = self.dag, self.g, self.dag.ctx
        nodes: dict[int, Node] = {nid: n for nid, n in dag.nodes.items() if n.kind == "arg"}
        value: dict[int, Val] = {}
        tuples: dict[int, int] = {}
        self.new_classes = set()

        def visit(c: int) -> None:
            """Creates the node of class `c` (children first, iteratively)."""
            stack: list[tuple[int, bool]] = [(c, False)]
            while stack:
                cls, ready = stack.pop()
                if cls in value or cls in tuples:
                    continue
                n = choice[cls]
                node = g.nodes[n]
                if not ready:
                    stack.append((cls, True))
                    for ch in node.children:
                        if ch not in value and ch not in tuples:
                            stack.append((ch, False))
                    continue
                self._make(cls, n, nodes, value, tuples, shapes)

        for v in dag.outputs:
            visit(self._class_of(v))
        outputs = tuple(value[self._class_of(v)] for v in dag.outputs)
        del ctx
        return Dag(dag.ctx, nodes, outputs)

    def _make(
        self,
        cls: int,
        n: int,
        nodes: dict[int, Node],
        value: dict[int, Val],
        tuples: dict[int, int],
        shapes: list[tuple[Shape, ...]],
    ) -> None:
        g, keys, ctx = self.g, self.keys, self.dag.ctx
        node = g.nodes[n]
        if node.op == "Res":
            value[cls] = (tuples[node.children[0]], node.fields[0])
            return
        if node.op == "Arg":
            nid = next(
                i
                for i, x in self.dag.nodes.items()
                if x.kind == "arg" and x.params[0] == node.fields[0]
            )
            value[cls] = (nid, 0)
            return
        if node.op == "Const":
            nid = next(
                i
                for i, x in self.dag.nodes.items()
                if x.kind == "const" and x.params[1] == node.fields[0]
            )
            nodes[nid] = self.dag.nodes[nid]
            value[cls] = (nid, 0)
            return
        operands = tuple(value[ch] for ch in node.children)
        if node.op == "Ident":
            shape = node.fields
            ctx.constants.append(identity_array(shape, "float64"))
            kind: str = "const"
            params: Params = ("value", len(ctx.constants) - 1)
            out_shapes: tuple[Shape, ...] = (shape,)
        else:
            kind, params = node_kind(node, keys)
            out_shapes = shapes[n]
        kids = tuple(node.children)
        nid = self.orig.get((cls, (kind, params, kids)))
        if nid is None or nid in nodes:
            elt = nodes[operands[0][0]].elt if operands else self.elt
            nid = ctx.fresh()
            nodes[nid] = Node(kind, params, operands, out_shapes, elt)
            self.new_classes.add(cls)
        else:
            orig = self.dag.nodes[nid]
            nodes[nid] = Node(orig.kind, orig.params, operands, orig.shapes, orig.elt)
        if len(out_shapes) == 1 and node.op != "Split":
            value[cls] = (nid, 0)
        else:
            tuples[cls] = nid


@dataclass
class _Loaded:
    """Translated rules, their keys, and an e-graph holding the prelude and the rules."""

    ruleset: RuleSet
    keys: Keys
    egraph: EGraph


_RULE_CACHE: dict[
    tuple[tuple[int, ...], frozenset[int], frozenset[Signature]], _Loaded
] = {}
"""Per process: loading the rules into egglog costs about a millisecond a rule, so the
e-graph that holds them is kept, and every stage pushes its graph and pops it."""


def _rules_for(
    rules: Sequence[Rule], ranks: frozenset[int], sigs: frozenset[Signature]
) -> tuple[RuleSet, Keys, EGraph]:
    """
    Translated rules, a copy of their keys, and an e-graph with the rules loaded (cached
    per rules, graph ranks and ops: only the directions whose matched side can occur in
    the graph).
    """
    cache_key = (tuple(map(id, rules)), ranks, sigs)
    found = _RULE_CACHE.get(cache_key)
    if found is None:
        keys = Keys()
        ruleset = translate_rules(rules, keys, set(ranks), set(sigs))
        eg = EGraph()
        try:
            _load(eg, [PRELUDE], 1)
            _load(eg, ruleset.rules, 1)
        except EggSmolError as e:  # pragma: no cover - a translation defect
            raise PlmrError(
                f"taso-substitute (eqsat): egglog rejected the program: {e}"
            ) from e
        if len(_RULE_CACHE) >= 4:
            _RULE_CACHE.pop(next(iter(_RULE_CACHE)))
        found = _RULE_CACHE[cache_key] = _Loaded(ruleset, keys, eg)
    keys = found.keys
    copy = Keys(
        list(keys.keys), dict(keys.index), list(keys.factors), dict(keys.factor_index)
    )
    return found.ruleset, copy, found.egraph


def saturate(
    dag: Dag,
    rules: Sequence[Rule],
    model: CostModel,
    options: EqsatOptions = EqsatOptions(),
    accept: Callable[[Dag], bool] | None = None,
    constant_concats_only: bool = False,
) -> EqsatResult:
    """
    Saturates, extracts and returns the cheapest graph equal to `dag` that was found.

    Stages: while a stage's extracted graph is cheaper than its input, it seeds a fresh
    e-graph (the multi-pattern rules then merge what the last stage merged: two matmuls
    into one, that one with a third, ...), at most `options.stages` of them.
    """
    start = time.perf_counter()
    ranks = frozenset(len(s) for n in dag.nodes.values() for s in n.shapes)
    sigs = frozenset(graph_signatures(dag, find_identities(dag)))
    # The rules of the input graph's ops hold every op a rewrite can bring in: later
    # stages use them too, in the same e-graph (facts pushed and popped per stage).
    ruleset, keys, eg = _rules_for(rules, ranks, sigs)
    session = _Session(eg, ruleset, keys, model, options, accept, constant_concats_only)
    first = session.stage(dag)
    result = first
    applied = list(first.applied)
    iterations, enodes = first.explored, first.enodes
    limits = set(first.limits)
    for _ in range(options.stages - 1):
        if result.best_cost >= result.initial_cost:
            break
        nxt = session.stage(result.best)
        limits.update(nxt.limits)
        iterations += nxt.explored
        enodes = max(enodes, nxt.enodes)
        if nxt.best_cost >= result.best_cost - 1e-9:
            break
        applied += [a for a in nxt.applied if a != "eqsat"]
        result = nxt
    seconds = time.perf_counter() - start
    return replace(
        result,
        initial_cost=first.initial_cost,
        applied=tuple(sorted(set(applied))),
        explored=iterations,
        enodes=enodes,
        seconds=seconds,
        untranslated=first.untranslated,
        declined=first.declined,
        limits=tuple(sorted(limits)),
    )


@dataclass
class _Session:
    """An e-graph holding the translated rules, and what every stage extracts with."""

    eg: EGraph
    ruleset: RuleSet
    keys: Keys
    model: CostModel
    options: EqsatOptions
    accept: Callable[[Dag], bool] | None
    constant_concats_only: bool

    def stage(self, dag: Dag) -> EqsatResult:
        """One saturation and extraction from `dag`."""
        self.eg.run_program(*self.eg.parse_program("(push)"))
        try:
            return _stage(dag, self)
        finally:
            self.eg.run_program(*self.eg.parse_program("(pop)"))


def _stage(dag: Dag, session: _Session) -> EqsatResult:
    start = time.perf_counter()
    eg, ruleset, keys = session.eg, session.ruleset, session.keys
    model, options, accept = session.model, session.options, session.accept
    constant_concats_only = session.constant_concats_only
    initial = model.graph_cost(dag)
    identities = find_identities(dag)
    untranslated = tuple(ruleset.untranslated)

    def unchanged(reason: str, stop: str = "", iterations: int = 0) -> EqsatResult:
        seconds = time.perf_counter() - start
        return EqsatResult(
            dag, initial, initial, (), iterations, 0, 0, stop, "none", initial,
            math.inf, "", seconds, seconds, 0.0, untranslated, reason,
        )  # fmt: skip

    try:
        facts, names = encode_graph(dag, keys, identities)
    except EncodeError as e:
        return unchanged(str(e))
    try:
        _load(eg, facts.splitlines(), 256)
    except EggSmolError as e:  # pragma: no cover - a translation defect
        raise PlmrError(f"taso-substitute (eqsat): egglog rejected the graph: {e}") from e
    match_limit = max(options.match_limit, 4 * dag.op_count())
    node_limit = max(options.node_limit, options.nodes_per_op * dag.op_count())
    stop = "iteration limit"
    iterations = 0
    while iterations < options.iterations:
        # A few iterations per schedule: each schedule costs a fixed set-up.
        chunk = range(iterations, min(options.iterations, iterations + options.chunk))
        plan = [
            ["multi", "single"]
            if it % options.multi_every == 0
            and it // options.multi_every < options.multi_rounds
            and ruleset.multi
            else ["single"]
            for it in chunk
        ]
        changed = _run(eg, plan, match_limit)
        iterations += len(plan)
        if not changed:
            stop = "saturated"
            break
        if _size(eg) > node_limit:
            stop = "node limit"
            break
    saturated_at = time.perf_counter()
    g = read_egraph(eg)
    multi_shapes: dict[tuple[str, Params], tuple[Shape, ...]] = {
        (n.kind, n.params): n.shapes
        for n in dag.nodes.values()
        if len(n.shapes) > 1 and n.kind != "split"
    }
    builder = _Builder(dag, g, keys, names)
    original = builder.original_choice()
    folded = model.folded_nodes(dag)
    discounts: dict[int, tuple[bool, bool]] = {}
    for nid, node in dag.nodes.items():
        c = builder.klass.get(nid)
        if c is None or c not in original or nid in folded:
            continue
        discounts[original[c]] = (
            model.is_epilogue(dag, node, folded),
            model.is_absorbed(dag, nid, node),
        )
    priced = node_costs(g, keys, model, multi_shapes, constant_concats_only, discounts)
    roots = [builder._class_of(v) for v in dag.outputs]  # pyright: ignore[reportPrivateUsage]
    candidates: list[tuple[float, str, Dag, set[int]]] = []
    greedy_cost = ilp_cost = math.inf
    choice = greedy(g, priced)
    if all(r in choice for r in roots) and acyclic(g, choice, roots):
        best = builder.build(choice, priced.out_shapes)
        greedy_cost = model.graph_cost(best)
        candidates.append((greedy_cost, "greedy", best, builder.new_classes))
    ilp_status = "skipped"
    found_choice: Choice = {}
    if options.ilp_nodes > 0 and g.size() <= options.ilp_node_limit:
        fixed = {c: n for c, n in choice.items() if c in priced.constant}
        found = ilp(g, priced, roots, options.ilp_nodes, fixed, original)
        ilp_status = found.status
        if found.choice is not None and acyclic(g, found.choice, roots):
            found_choice = found.choice
            best = builder.build(found.choice, priced.out_shapes)
            ilp_cost = model.graph_cost(best)
            candidates.append((ilp_cost, "ilp", best, builder.new_classes))
    candidates = [c for c in candidates if accept is None or accept(c[2])]
    polish_stopped = False
    if options.polish_trials > 0 and candidates:
        # The per-node costs only estimate a node's context (epilogues, absorbed
        # transposes): put back input nodes one class at a time while the graph,
        # priced as a whole, gets cheaper.
        base = {**choice, **original}
        for cost0, name, _, _ in list(candidates):
            chosen = found_choice if name == "ilp" else choice
            polished, stopped = _polish(
                builder, {**base, **chosen}, base, cost0, roots, model, priced,
                options.polish_trials, accept,
            )  # fmt: skip
            polish_stopped |= stopped
            if polished is not None:
                candidates.append((polished[0], f"{name}+polish", polished[1], polished[2]))
    limits = ("saturation",) if stop == "node limit" else ()
    if ilp_status == "node limit":
        limits += ("extraction",)
    if polish_stopped:
        limits += ("polish",)
    winner = min(candidates, key=lambda c: (c[0], "ilp" not in c[1]), default=None)
    best_dag, best_cost, extraction = dag, initial, "input"
    applied: tuple[str, ...] = ()
    if winner is not None and winner[0] < initial:
        best_cost, extraction, best_dag, new_classes = winner
        labels = {ruleset.labels[g.via[c]] for c in new_classes if c in g.via}
        applied = tuple(sorted(labels)) or ("eqsat",)
    end = time.perf_counter()
    return EqsatResult(
        best_dag, initial, best_cost, applied, iterations, g.size(), len(g.members),
        stop, extraction, greedy_cost, ilp_cost, ilp_status, end - start,
        saturated_at - start, end - saturated_at, untranslated, limits=limits,
    )  # fmt: skip


def _polish(
    builder: _Builder,
    choice: Choice,
    original: Choice,
    cost: float,
    roots: Sequence[int],
    model: CostModel,
    priced: Priced,
    trials: int,
    accept: Callable[[Dag], bool] | None,
) -> tuple[tuple[float, Dag, set[int]] | None, bool]:
    """
    Hill-climbs from `choice` towards `original`, pricing whole graphs exactly, at most
    `trials` of them. The best graph found, and whether the trials ran out first.
    """
    g = builder.g
    best: tuple[float, Dag, set[int]] | None = None
    improved = True
    while improved:
        improved = False
        for c, n in original.items():
            if choice.get(c) == n:
                continue
            trial = dict(choice)
            trial[c] = n
            if not acyclic(g, trial, roots):
                continue
            if trials <= 0:
                return best, True
            trials -= 1
            dag = builder.build(trial, priced.out_shapes)
            k = model.graph_cost(dag)
            if k < cost - 1e-9 and (accept is None or accept(dag)):
                choice, cost = trial, k
                best = (k, dag, builder.new_classes)
                improved = True
    return best, False
