"""
`mesh-shape-trees`: the first-phase groups of every K-tree allreduce, chosen per line.

A K-tree allreduce without `groups` reduces in groups of about the K-th root of the
axis: on 420 PEs with K = 3, chains of 8 PEs, then chains over 53 roots, then over 7. The
chains of the upper phases walk back and forth over the line, and the tree's root lands
off the middle, so the multicast goes further than half the axis. Longer first chains
leave fewer roots above them: on 420 PEs, 10 values per PE, 25 groups (chains of 17)
take 1,112 cycles against 1,147; on 480 PEs, 80 groups take 1,214 against 1,404.

Routes are per pattern: the collectives along one axis with the same plan share their
colors, and a second tree shape on the same line takes colors of its own. So the pass
chooses one shape per line: for the allreduces of each `mesh.program` with the same axis,
segment and K (and no `groups` of their own), the groups among the default and
`ceil(span / size)` for each size of `GROUP_SIZES` whose summed cycles on one line (the
runtime's timing, `line_cycles`, with each allreduce's combine and block) are the
fewest; the default wins ties. With `check-routes` (the default) a line's new shape is
kept only if the program's collectives still route within the device's colors.

With `phases` (the pipeline passes `gemv = auto`'s K choices, 2 and 3) the allreduces
of a line are grouped whatever their K and may all take one K among them with its best
groups: where the colors left by the lowering's choice (one K-tree for all when the
chosen trees did not route) allow a deeper tree on one line, that line takes it. At most
`TRIES` shapes are tried per line, fastest first.

What every PE computes is unchanged: a K-tree with any groups combines every block of
the line once (`plmr.target.collectives.ktree_levels`).

```mlir
// before (grid 420x420)
%r = mesh.allreduce sum %p axis y k = 3 : tensor<10xf32>
// after
%r = mesh.allreduce sum %p axis y k = 3 groups = 25 : tensor<10xf32>
```
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import IntegerAttr, ModuleOp
from xdsl.passes import ModulePass

from plmr.dialects import mesh
from plmr.dialects.graph import static_shape
from plmr.errors import PassOptionError, PlmrError
from plmr.target.collective_stages import line_cycles
from plmr.target.collectives import allreduce_plan, segmented_plan
from plmr.target.device import Device, get_device

GROUP_SIZES = (4, 6, 8, 11, 14, 17, 20, 24, 32)
"""First-phase chain lengths a line's K-tree shape is chosen from (besides the default)."""


@dataclass(frozen=True)
class TreeShape:
    """The shape chosen for the K-trees of one line of a program."""

    axis: str
    span: int
    """PEs of the tree (the segment's, if segmented)."""
    k: int
    """The trees' K (0: the line's allreduces kept K's of their own, not all alike)."""
    groups: int | None
    """The chosen first-phase groups (None: the default kept)."""
    allreduces: int
    default_cycles: float
    """The line's allreduces' summed cycles with the default groups."""
    cycles: float
    """... with the chosen groups (the default's if it was kept)."""
    routed: bool = True
    """False: the shape was faster but did not route within the colors (default kept)."""


def group_options(span: int) -> list[int | None]:
    """The first-phase groups tried for a tree over `span` PEs, the default first."""
    options: list[int | None] = [None]
    for size in GROUP_SIZES:
        groups = -(-span // size)
        if 1 < groups < span and groups not in options:
            options.append(groups)
    return options


def allreduce_cycles(
    op: mesh.AllreduceOp,
    groups: int | None,
    grid: tuple[int, int],
    device: Device,
    k: int | None = None,
) -> float:
    """One line's timing of the K-tree `op` (or with `k` phases) with `groups`."""
    n = mesh.axis_size(op.axis.data, grid)
    span = mesh.segment_of(op, grid)
    plan = allreduce_plan(span, "ktree", op.k.value.data if k is None else k, groups)
    if span != n:
        plan = segmented_plan(plan, n)
    shape = static_shape(op.result, "value")
    elems = math.prod(shape)
    kind = op.kind.data
    width = shape[-1] if kind == "softmax" and shape else 1
    return float(line_cycles(plan, elems, device, kind=kind, width=width).max())


def _set_tree(ops: list[mesh.AllreduceOp], k: int, groups: int | None) -> None:
    for op in ops:
        op.properties["k"] = IntegerAttr(k, 64)
        if groups is None:
            op.properties.pop("groups", None)
        else:
            op.properties["groups"] = IntegerAttr(groups, 64)


TRIES = 3
"""Shapes tried per line, fastest first, before the line keeps its trees (each try
routes the program once)."""


def shape_program(
    program: mesh.ProgramOp,
    routes: Callable[[mesh.ProgramOp], bool] | None,
    phases: tuple[int, ...] = (),
) -> list[TreeShape]:
    """
    Chooses the shape of each line's K-trees in `program` (see the module doc); with
    `phases`, a line's allreduces may also take one K among them (the planner's choice
    under `gemv = auto`), else each keeps its K.
    """
    grid = program.grid_shape
    device = get_device(program.device.spec.data)
    lines: dict[tuple[str, int, int], list[mesh.AllreduceOp]] = {}
    for op in program.walk():
        if not isinstance(op, mesh.AllreduceOp) or op.groups is not None:
            continue
        if op.algorithm.data != "ktree" or op.k.value.data < 2:
            continue
        k = 0 if phases else op.k.value.data
        key = (op.axis.data, mesh.segment_of(op, grid), k)
        lines.setdefault(key, []).append(op)
    shapes: list[TreeShape] = []
    for (axis, span, k), ops in lines.items():
        own = [op.k.value.data for op in ops]
        default = sum(
            allreduce_cycles(op, None, grid, device, j)
            for op, j in zip(ops, own, strict=True)
        )

        def total(
            choice: tuple[int, int | None], ops: list[mesh.AllreduceOp] = ops
        ) -> float:
            return sum(
                allreduce_cycles(op, choice[1], grid, device, choice[0]) for op in ops
            )

        ks = phases or (k,)
        options = [(j, g) for j in ks for g in group_options(span)]
        faster = sorted(
            (c for c in options if total(c) < default), key=lambda c: (total(c), c[0])
        )
        chosen: tuple[int, int | None] | None = None
        tried = 0
        for choice in faster[:TRIES]:
            tried += 1
            _set_tree(ops, *choice)
            if routes is None or routes(program):
                chosen = choice
                break
            for op, j in zip(ops, own, strict=True):
                _set_tree([op], j, None)
        if chosen is None:
            k_kept = own[0] if len(set(own)) == 1 else 0
            shapes.append(
                TreeShape(axis, span, k_kept, None, len(ops), default, default, tried == 0)
            )
            continue
        shapes.append(
            TreeShape(axis, span, chosen[0], chosen[1], len(ops), default, total(chosen))
        )
    return shapes


def fits_colors(program: mesh.ProgramOp) -> bool:
    """Whether the collectives of `program` route within its device's colors."""
    from plmr.target.route_plan import route_program

    try:
        route_program(program)
    except PlmrError as e:
        if "colors" not in str(e):
            raise
        return False
    return True


def shape_trees(
    module: ModuleOp, check_routes: bool = True, phases: tuple[int, ...] = ()
) -> list[TreeShape]:
    """`shape_program` for every `mesh.program` of `module`."""
    if any(k < 2 for k in phases):
        raise PassOptionError(
            f"mesh-shape-trees: phases must be at least 2, got {list(phases)}"
        )
    shapes: list[TreeShape] = []
    for program in module.walk():
        if isinstance(program, mesh.ProgramOp):
            check = fits_colors if check_routes else None
            shapes += shape_program(program, check, phases)
    return shapes


@dataclass(frozen=True)
class MeshShapeTreesPass(ModulePass):
    """
    Gives the K-tree allreduces of each line of a mesh program the first-phase groups
    that time fastest on that line (see the module doc); `check-routes` keeps a shape
    only if the program still routes within the device's colors; `phases` (e.g. `2,3`)
    lets a line's allreduces also take one K among them.
    """

    name = "mesh-shape-trees"

    check_routes: bool = True
    phases: tuple[int, ...] = ()

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        shape_trees(op, self.check_routes, self.phases)


__all__ = ["GROUP_SIZES", "MeshShapeTreesPass", "TreeShape", "shape_trees"]
