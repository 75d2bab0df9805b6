"""
Steady state over a model's layers in the mesh runtime's timing mode: a window of a
program's body that is one layer (`LayerRepeat`) is run once in program order, then
again for each further layer (`LayerRunner`); once `LAYER_WINDOW` consecutive layers
advance every clock and counter by the same increments, the remaining layers are one
jump, as `plmr.runtime.steady` does for the iterations of a loop. `chain_run` and
`chain_power` do the same for a chain of collective stages.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from xdsl.ir import Operation, SSAValue

from plmr.dialects import mesh
from plmr.errors import PlmrError
from plmr.runtime.steady import F64, LAYERS, LoopWatch, MeshRuntime

LAYER_WINDOW = 2
"""Consecutive layers whose increments must agree before a jump over layers (a layer
is long: each stepped one costs a layer's simulation)."""


@dataclass(frozen=True)
class LayerRepeat:
    """
    A window of a program's body that is one layer of a model, to be run `times` times
    in all: once in program order, then again for each further layer. On each repeat,
    the window reads in place of each `aliases` source (a value of the layer before,
    defined before the window) its own counterpart from the run before. Each run's
    collectives are fresh ops (no flow-control state from the run before), as the
    layers of a compiled model are distinct ops with the same shapes.
    """

    start: int
    """Index in the program's body of the window's first op."""
    stop: int
    """One past its last op."""
    times: int
    aliases: tuple[tuple[SSAValue, SSAValue], ...]
    """(value of the layer before, read by the window; the window's counterpart)."""

    def check(self, ops: list[Operation]) -> None:
        """Raises a PlmrError unless the window and its aliases fit the program."""
        if not 0 <= self.start < self.stop <= len(ops) or self.times < 1:
            raise PlmrError(
                f"layer window [{self.start}, {self.stop}) x{self.times} does not fit a "
                f"program of {len(ops)} ops"
            )
        window = ops[self.start : self.stop]
        defined = {r for op in window for r in op.results}
        for src, dst in self.aliases:
            if dst not in defined or src in defined:
                raise PlmrError(
                    "a layer alias must map a value defined before the window to one "
                    "defined in it"
                )
            if src.type != dst.type:
                raise PlmrError(
                    f"a layer alias maps {src.type} to {dst.type}: the layers differ"
                )


def layer_repeat(program: mesh.ProgramOp, window: range, times: int) -> LayerRepeat:
    """
    The `LayerRepeat` of a program whose `mesh.spmd` nests `window` (indices among the
    program's nests) are one layer of a model and the nests before it end with the layer
    before. A layer may begin with nests the first layer lacks (a change of layout
    between layers), so the two are matched from their ends: nest `window.stop - 1 - i`
    corresponds to nest `window.start - 1 - i`, output by output, as long as their
    output types agree. A value of the layer before that the window reads is aliased to
    its counterpart; the window must read no other value of the matched nests.
    """
    ops = list(program.body.block.ops)
    nests = [i for i, op in enumerate(ops) if isinstance(op, mesh.SpmdOp)]
    spmds = [op for op in ops if isinstance(op, mesh.SpmdOp)]
    if not window or window.start < 1 or window.stop > len(nests):
        raise PlmrError(
            f"nests {window.start}..{window.stop - 1} are not a layer after another "
            f"(the program has {len(nests)} nests)"
        )
    pairs: dict[SSAValue, SSAValue] = {}
    first = window.start
    for i in range(min(len(window), window.start)):
        a, b = spmds[window.start - 1 - i], spmds[window.stop - 1 - i]
        if [v.type for v in a.outputs] != [v.type for v in b.outputs]:
            break
        pairs.update(zip(a.outputs, b.outputs, strict=True))
        first = window.start - 1 - i
    if first == window.start:
        raise PlmrError(
            f"nest {window.stop - 1} and nest {window.start - 1} differ in their outputs: "
            "the nests before the window do not end with a layer like it"
        )
    start = nests[window.start - 1] + 1
    stop = nests[window.stop - 1] + 1
    body = ops[start:stop]
    matched = set(ops[nests[first] : start])
    defined = {r for op in body for r in op.results}
    aliases: list[tuple[SSAValue, SSAValue]] = []
    seen: set[SSAValue] = set()
    for op in body:
        for v in op.operands:
            if v in defined or v in seen:
                continue
            seen.add(v)
            if v in pairs:
                aliases.append((v, pairs[v]))
            elif v.owner in matched and isinstance(v.owner, mesh.SpmdOp):
                raise PlmrError(
                    f"the layer reads %{v.name_hint or '?'} of the layer before, which "
                    "has no counterpart in the layer"
                )
    plan = LayerRepeat(start, stop, times, tuple(aliases))
    plan.check(ops)
    return plan


class LayerRunner:
    """
    Runs a `LayerRepeat` window again for every further layer. In timing mode (not
    `exact`), the layers form a loop like `tile.for`: its state is the ready times of
    the values the next layer (or the rest of the program) reads, the compute engines'
    clocks and the finishing times; once `LAYER_WINDOW` consecutive layers advance
    every clock by the same uniform increment, the remaining layers are one jump.
    """

    def __init__(
        self,
        rt: MeshRuntime,
        program: mesh.ProgramOp,
        ops: list[Operation],
        plan: LayerRepeat,
    ):
        if rt.mode != "timing":
            raise PlmrError(
                "layers are repeated in timing mode only (a functional run needs every "
                "layer's own weights)"
            )
        plan.check(ops)
        self.rt = rt
        self.program = program
        self.plan = plan
        self.window = ops[plan.start : plan.stop]
        defined = {r for op in self.window for r in op.results}
        later = [v for op in ops[plan.stop :] for v in op.operands if v in defined]
        targets = [dst for _, dst in plan.aliases]
        self.carried = list(dict.fromkeys([*targets, *later]))
        sources = {src for src, _ in plan.aliases}
        self.externals = list(
            dict.fromkeys(
                v
                for op in self.window
                for v in op.operands
                if v not in defined and v not in sources
            )
        )
        self.comms = [
            nested
            for op in self.window
            if isinstance(op, mesh.SpmdOp)
            for nested in op.walk()
            if isinstance(nested, mesh.CommOp)
        ]
        self.watch = (
            None if rt.exact else LoopWatch(rt, [], 0.0, what=LAYERS, window=LAYER_WINDOW)
        )
        self.sources = [src for src, _ in plan.aliases]
        self.engine_at_start = float(np.max(rt.clocks.ce_free))
        """Where the compute engines stood when the window began (in program order)."""
        if self.watch is not None:
            self.watch.begin_iteration()

    def _mark(
        self, done: int, ready: dict[SSAValue, Any], values: list[SSAValue], engine: float
    ) -> None:
        clock = engine
        for v in values:
            clock = max(clock, float(np.max(ready.get(v, 0.0))))
        self.rt.extrapolation.layer_ends.append((done, clock))

    def _engine(self) -> float:
        return float(np.max(self.rt.clocks.ce_free))

    def run(self, env: dict[SSAValue, Any], ready: dict[SSAValue, Any]) -> None:
        """Called once the window ran in program order: runs the other layers."""
        rt, plan, watch = self.rt, self.plan, self.watch
        rt.extrapolation.simulated_layers += 1
        # The layer before ended when its outputs were ready (sources are not re-read
        # until the next layer).
        self._mark(0, ready, self.sources, self.engine_at_start)
        self._mark(1, ready, self.carried, self._engine())
        if watch is not None:
            watch.constants = max(
                (float(np.max(ready.get(v, 0.0))) for v in self.externals), default=0.0
            )
        for layer in range(1, plan.times):
            if watch is not None:
                carried = [ready.get(v, 0.0) for v in self.carried]
                jumped = watch.end_iteration(carried, [], plan.times - layer)
                if jumped is not None:
                    for v, r in zip(self.carried, jumped, strict=True):
                        ready[v] = r
                    self._mark(plan.times, ready, self.carried, self._engine())
                    return
            rt.on_layer(layer)
            for src, dst in plan.aliases:
                env[src] = env[dst]
                ready[src] = ready.get(dst, 0.0)
            for c in self.comms:
                rt.forget_issue(c)
            if watch is not None:
                watch.begin_iteration()
            for op in self.window:
                rt.program_op(self.program, op, env, ready)
            rt.extrapolation.simulated_layers += 1
            self._mark(layer + 1, ready, self.carried, self._engine())
        if watch is not None:
            watch.end_iteration([ready.get(v, 0.0) for v in self.carried], [], 0)


# ---------------------------------------------------------------------------------------
# Chains of identical collective stages
# ---------------------------------------------------------------------------------------

CHAIN_MIN = 4
"""Runs of identical stages from this length on are one closed-form step."""


def chain_run(stages: Sequence[Any], index: int) -> int:
    """
    How many stages from `index` on can be one closed-form step (1: step it alone):
    the same stage repeated (a ring's steps, a shift by several positions), every
    position receiving at most one message from one sender, and, for a reduction, every
    position receiving the same number (its combine cost is then the same everywhere).
    The first stage of a collective is never part of a run (it pays no step overhead).
    """
    st = stages[index]
    if index == 0 or not st.unique_dst or st.src_of is None:
        return 1
    if st.combine and (st.counts is None or np.ptp(st.counts) != 0):
        return 1
    end = index + 1
    while end < len(stages) and stages[end] is st:
        end += 1
    return end - index if end - index >= CHAIN_MIN else 1


def chain_power(
    now: Any,
    src_of: npt.NDArray[np.int64],
    delay_of: F64,
    add: float,
    m: int,
    pos_axis: int,
) -> F64:
    """
    `m` applications of one stage in which position `p` receives from `s(p) = src_of[p]`
    after `d(p) = delay_of[p]` cycles (-inf: nothing arrives) and then spends `add`:
    `x'(p) = max(x(p), x(s(p)) + d(p)) + add`. The stage is max-plus linear, so

        x_m(p) = m·add + max over 0 <= j <= m of (x(s^j(p)) + d(p) + d(s(p)) + ... + d(s^(j-1)(p)))

    — the best of staying and of receiving along the last j links. The windowed maximum
    is built by binary lifting (windows of 2^e links combined as `m`'s binary digits),
    so a chain of m stages costs O(log m) array operations instead of m. Exact up to the
    rounding order of the sums (the stepped chain adds the same terms one by one).
    """
    grid_now = np.asarray(now, dtype=np.float64)
    n = src_of.size

    def along(v: F64) -> F64:
        return v if pos_axis == 1 else v[:, None]

    def take(x: F64, index: npt.NDArray[np.int64]) -> F64:
        return np.take(x, index, axis=pos_axis)

    ident = np.arange(n, dtype=np.int64)
    acc_val, acc_anc, acc_dist = grid_now, ident, np.zeros(n)
    cur_val = np.maximum(grid_now, take(grid_now, src_of) + along(delay_of))
    cur_anc, cur_dist = src_of, np.asarray(delay_of, dtype=np.float64)
    left = m
    while left:
        if left & 1:
            acc_val = np.maximum(acc_val, along(acc_dist) + take(cur_val, acc_anc))
            acc_dist = acc_dist + cur_dist[acc_anc]
            acc_anc = cur_anc[acc_anc]
        left >>= 1
        if left:
            cur_val = np.maximum(cur_val, along(cur_dist) + take(cur_val, cur_anc))
            cur_dist = cur_dist + cur_dist[cur_anc]
            cur_anc = cur_anc[cur_anc]
    return acc_val + m * add if add else acc_val
