"""
`taso-substitute`: TASO's cost-based graph substitution search on `graph` programs.

Each function of `graph` ops is turned into a search graph, optimized by the backtracking
search with the chosen rule set and the wafer cost model of the chosen device, and written
back if a cheaper graph was found. Afterwards, ops whose operands are all constants (for
example weights a substitution concatenated) are folded, and transposes are folded back
into `graph.matmul`'s flags.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint, Rewriter

from plmr.dialects import graph
from plmr.errors import PassOptionError
from plmr.passes.taso.cost import CostModel
from plmr.passes.taso.dag import DagContext, export_function, import_function
from plmr.passes.taso.eqsat.engine import EqsatOptions, saturate
from plmr.passes.taso.guard import guard_prices
from plmr.passes.taso.matcher import Directed, directions
from plmr.passes.taso.rules import load_rules
from plmr.passes.taso.search import folded_concats_only, optimize
from plmr.passes.timing import note, step
from plmr.passes.transpose_elim import (
    AbsorbIntoMatmul,
    ComposeTransposes,
    FoldConstantTranspose,
)
from plmr.runtime.reference import GRAPH_IMPLS
from plmr.target.device import get_device
from plmr.values import constant_attr, dense_to_numpy


class FoldConstantOps(RewritePattern):
    """An op whose operands are all `graph.constant` becomes constants (reference semantics)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: graph.GraphOp, rewriter: PatternRewriter, /):
        if isinstance(op, graph.ConstantOp) or not op.operands:
            return
        owners = [v.owner for v in op.operands]
        if not all(isinstance(o, graph.ConstantOp) for o in owners):
            return
        impl = GRAPH_IMPLS.get(type(op))
        if impl is None:
            return
        args = [dense_to_numpy(o.value) for o in owners if isinstance(o, graph.ConstantOp)]
        results = impl(op, args)
        new: list[Operation] = [
            graph.ConstantOp(constant_attr(r, graph.element_type(v)))
            for r, v in zip(results, op.results, strict=True)
        ]
        rewriter.replace(op, new, [n.results[0] for n in new])


class FlattenConcat(RewritePattern):
    """`concat(concat(a, b), c)` -> `concat(a, b, c)` (same axis, inner used once)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: graph.ConcatOp, rewriter: PatternRewriter, /):
        rank = len(graph.static_shape(op.result, "result"))
        axis = op.axis.value.data % rank
        inputs: list[SSAValue] = []
        changed = False
        for v in op.inputs:
            inner = v.owner
            if (
                isinstance(inner, graph.ConcatOp)
                and inner.axis.value.data % rank == axis
                and v.has_one_use()
            ):
                inputs.extend(inner.inputs)
                changed = True
            else:
                inputs.append(v)
        if changed:
            rewriter.replace(op, graph.ConcatOp(inputs, axis))


class FlattenSplit(RewritePattern):
    """`split(x) -> (a, r)`, `split(r) -> (b, c)` -> `split(x) -> (a, b, c)` (same axis)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: graph.SplitOp, rewriter: PatternRewriter, /):
        rank = len(graph.static_shape(op.input, "input"))
        axis = op.axis.value.data % rank
        sizes = list(op.sizes.get_values())
        for k, res in enumerate(op.outputs):
            if not res.has_one_use():
                continue
            inner = res.get_user_of_unique_use()
            if not isinstance(inner, graph.SplitOp) or inner.axis.value.data % rank != axis:
                continue
            new_sizes = [*sizes[:k], *inner.sizes.get_values(), *sizes[k + 1 :]]
            merged = graph.SplitOp(op.input, axis, new_sizes)
            outs = list(merged.outputs)
            n = len(inner.outputs)
            rewriter.insert(merged, InsertPoint.before(op))
            rewriter.replace(inner, [], outs[k : k + n])
            rewriter.replace(op, [], [*outs[:k], None, *outs[k + n :]])
            return


def cleanup(module: ModuleOp) -> None:
    """Folds constant subgraphs, flattens concat/split trees, restores matmul flags."""
    patterns: list[RewritePattern] = [
        FoldConstantOps(),
        FlattenConcat(),
        FlattenSplit(),
        FoldConstantTranspose(),
        ComposeTransposes(),
        AbsorbIntoMatmul(),
    ]
    PatternRewriteWalker(GreedyRewritePatternApplier(patterns)).rewrite_module(module)


@dataclass(frozen=True)
class FunctionReport:
    """What the search did to one function (costs in cycles of the device)."""

    name: str
    initial_cost: float
    best_cost: float
    applied: tuple[str, ...]
    explored: int
    seconds: float
    extraction: str = ""
    """`eqsat`: which extraction won (greedy, ilp, +polish, input)."""
    stop: str = ""
    """`eqsat`: why saturation stopped."""
    enodes: int = 0
    """`eqsat`: e-nodes of the saturated e-graph."""
    limits: tuple[str, ...] = ()
    """`eqsat`: the work limits the search hit (`saturation`, `extraction`, `polish`)."""


CONCATS = ("any", "constant")
GUARDS = ("mesh", "none")
ENGINES = ("backtrack", "eqsat")


def check_options(
    alpha: float, budget: int, concats: str = "any", engine: str = "backtrack"
) -> None:
    if engine not in ENGINES:
        raise PassOptionError(
            f"taso-substitute: unknown engine '{engine}' (backtrack: TASO's cost-based "
            "backtracking search; eqsat: equality saturation with egglog)"
        )
    if not alpha > 0:
        raise PassOptionError(f"taso-substitute: alpha must be positive, got {alpha}")
    if budget < 0:
        raise PassOptionError(f"taso-substitute: budget must be >= 0, got {budget}")
    if concats not in CONCATS:
        raise PassOptionError(
            f"taso-substitute: unknown concats '{concats}' (any: every verified "
            "substitution; constant: only those whose concatenations fold into constants)"
        )


def substitute_module(
    module: ModuleOp,
    alpha: float = 1.05,
    budget: int = 1000,
    rules: str = "default",
    device: str = "wse2",
    functions: Sequence[str] | None = None,
    concats: str = "any",
    engine: str = "backtrack",
    eqsat: EqsatOptions | None = None,
    grid: tuple[int, int] | None = None,
    guard: str = "mesh",
) -> list[FunctionReport]:
    """
    Optimizes every function (or the named ones) of `module` in place, pricing graphs on
    the `grid` of cores the program is compiled for (default: the whole wafer). With a
    grid and `guard="mesh"`, the rewritten program is kept only if the mesh partitioner
    estimates it strictly faster than the input on that grid (`guard_prices`: the
    changed region before and after).
    """
    check_options(alpha, budget, concats, engine)
    if guard not in GUARDS:
        raise PassOptionError(
            f"taso-substitute: unknown guard '{guard}' (mesh: keep a rewrite only if the "
            "mesh partitioner estimates it faster on the grid; none: trust the cost model)"
        )
    original = module.clone() if guard == "mesh" and grid is not None else None
    accept = folded_concats_only if concats == "constant" else None
    # TASO's rule directions are the backtracking search's (the e-graph translates the
    # rules itself).
    with step("rules"):
        rule_set = load_rules(rules)
    directed: list[Directed] = directions(rule_set) if engine == "backtrack" else []
    cost = CostModel(get_device(device), grid)
    ctx = DagContext()
    reports: list[FunctionReport] = []
    for fn in [op for op in module.ops if isinstance(op, func.FuncOp)]:
        if functions is not None and fn.sym_name.data not in functions:
            continue
        dag = import_function(fn, ctx)
        if dag is None or dag.op_count() == 0:
            continue
        with step("search"):
            if engine == "eqsat":
                result = saturate(
                    dag,
                    rule_set,
                    cost,
                    eqsat or EqsatOptions(),
                    accept,
                    constant_concats_only=concats == "constant",
                )
            else:
                result = optimize(dag, directed, cost, alpha, budget, accept)
        limits: tuple[str, ...] = getattr(result, "limits", ())
        if limits:
            _note_limits(fn.sym_name.data, limits, eqsat or EqsatOptions(), dag.op_count())
        if result.best_cost < result.initial_cost and result.applied:
            export_function(result.best, fn)
        reports.append(
            FunctionReport(
                fn.sym_name.data,
                result.initial_cost,
                min(result.best_cost, result.initial_cost),
                result.applied if result.best_cost < result.initial_cost else (),
                result.explored,
                result.seconds,
                getattr(result, "extraction", ""),
                getattr(result, "stop", ""),
                getattr(result, "enodes", 0),
                limits,
            )
        )
    cleanup(module)
    if original is None or not any(r.applied for r in reports):
        return reports
    assert grid is not None
    cleanup(original)
    with step("mesh guard"):
        before, after = guard_prices(original, module, grid, device)
    if after < before:
        return reports
    # Not faster on the mesh: the input stays.
    for op in list(module.body.block.ops):
        Rewriter.erase_op(op)
    for op in list(original.body.block.ops):
        op.detach()
        module.body.block.add_op(op)
    return [
        replace(r, best_cost=r.initial_cost, applied=(), extraction="mesh guard")
        for r in reports
    ]


def _note_limits(
    function: str, limits: Sequence[str], options: EqsatOptions, ops: int
) -> None:
    """Says in `plmr compile --profile` which work limit the search of `function` hit."""
    work = {
        "saturation": f"{max(options.node_limit, options.nodes_per_op * ops)} e-nodes",
        "extraction": f"{options.ilp_nodes} branch-and-bound nodes",
        "polish": f"{options.polish_trials} trials",
    }
    for limit in limits:
        note(
            f"taso-substitute: @{function}: {limit} stopped at its work limit ({work[limit]})"
        )


@dataclass(frozen=True)
class TasoSubstitutePass(ModulePass):
    """
    Rewrites `graph` programs with verified substitution rules, choosing by a wafer cost
    model with TASO's backtracking search (`cost < alpha · best`, at most `budget` graphs).

    ```mlir
    // before: two projections of one input
    %a = graph.matmul %x, %wa : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
    %b = graph.matmul %x, %wb : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
    // after: one wider matmul on concatenated (constant) weights, split
    %w = graph.constant dense<...> : tensor<16x32xf32>
    %ab = graph.matmul %x, %w : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
    %a, %b = graph.split %ab axis = 1 sizes = [16, 16] : tensor<8x32xf32> -> (...)
    ```
    """

    name = "taso-substitute"

    alpha: float = 1.05
    """Keep a candidate graph if its cost is below `alpha` times the best cost."""
    budget: int = 1000
    """Stop after exploring this many graphs."""
    rules: str = "default"
    """The rule file (`default`: the rules shipped with plmr)."""
    device: str = "wse2"
    """The device whose cost model guides the search (a preset, e.g. `wse3`)."""
    concats: str = "any"
    """`constant`: only results whose concatenations join constants (weights), which
    fold away; the mesh lowering has no concatenation of computed values."""
    engine: str = "backtrack"
    """`backtrack`: TASO's search (`alpha`, `budget`); `eqsat`: equality saturation with
    egglog under limits on work (never on time), then greedy and ILP extraction."""
    node_limit: int = 20_000
    """`eqsat`: e-nodes at which a stage's saturation stops (at least 20 per op)."""
    ilp_nodes: int = 1_000
    """`eqsat`: branch-and-bound nodes of each ILP solve (0: greedy extraction only)."""
    grid: str = ""
    """The `rows x cols` grid the program is compiled for (`4x4`; empty: the whole
    wafer), on which the cost model prices the graphs."""
    guard: str = "mesh"
    """With a grid, `mesh` keeps a rewritten program only if the mesh partitioner
    estimates it strictly faster than the input on the grid; `none` trusts the cost
    model."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        grid: tuple[int, int] | None = None
        if self.grid:
            parts = self.grid.lower().split("x")
            if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
                raise PassOptionError(
                    f"taso-substitute: grid must be ROWSxCOLS (e.g. 4x4), got '{self.grid}'"
                )
            grid = (int(parts[0]), int(parts[1]))
            if min(grid) < 1:
                raise PassOptionError(
                    f"taso-substitute: grid sizes must be positive, got '{self.grid}'"
                )
        for option, value, low in (
            ("ilp-nodes", self.ilp_nodes, 0),
            ("node-limit", self.node_limit, 1),
        ):
            if value < low:
                raise PassOptionError(
                    f"taso-substitute: {option} must be an integer >= {low}, got {value}"
                )
        substitute_module(
            op,
            self.alpha,
            self.budget,
            self.rules,
            self.device,
            concats=self.concats,
            engine=self.engine,
            eqsat=EqsatOptions(
                node_limit=self.node_limit,
                ilp_nodes=self.ilp_nodes,
            ),
            grid=grid,
            guard=self.guard,
        )
