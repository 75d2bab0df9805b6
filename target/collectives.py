"""
Collectives as stages of point-to-point transfers along one mesh axis.

Every collective runs the same pattern on every line of the grid (every row for axis x,
every column for axis y), so a plan describes one line of `n` PEs: a list of stages, each
a list of transfers `src -> dsts` (several destinations: a multicast). The same plan
gives the route rules (`mesh-route`), the timing (the runtime), and, in tests, the data
movement, so the three cannot disagree.

Algorithms:
- shift on a `linear`, `torus` or `interleaved` ring (WaferLLM's INTERLEAVE: every
  logical neighbour ≤ 2 hops);
- broadcast: one multicast from the root;
- allgather: an allreduce's transfers, the receivers appending instead of combining;
- reduce / allreduce with `ktree` (K phases of chain reductions inside groups, the
  group roots reducing in the next phase, then a multicast), `pipeline` (one chain to the
  last PE, then a multicast back), or `ring` (reduce-scatter then allgather on the
  interleaved ring, each step moving 1/n of the block).

Plans are pure functions of their arguments and are cached: a program asks for the same
plan once per collective op, several times (routing, verification, simulation). A plan
returned by these functions is shared: never modify it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from plmr.dialects.mesh import Port
from plmr.errors import PlmrError


@dataclass(frozen=True)
class Transfer:
    """Position `src` sends its current value to `dsts` (one route, possibly multicast)."""

    src: int
    dsts: tuple[int, ...]
    combine: bool = False
    """Receivers combine the value into theirs (reduce) instead of replacing it."""

    def hops(self, dst: int) -> int:
        return abs(dst - self.src)


@dataclass(frozen=True)
class Stage:
    """Transfers that happen together; receivers wait for their message."""

    transfers: tuple[Transfer, ...]
    fraction: float = 1.0
    """Share of the block each message carries (1/n for ring steps)."""
    streamed: bool = False
    """Part of a chain that forwards data as it arrives: pays latency, not bandwidth."""


@dataclass
class Plan:
    """The stages of one collective on a line of `n` PEs."""

    n: int
    stages: list[Stage] = field(default_factory=list[Stage])
    description: str = ""

    def max_hops(self) -> int:
        return max(
            (t.hops(d) for s in self.stages for t in s.transfers for d in t.dsts), default=0
        )


# ---------------------------------------------------------------------------------------
# Rings
# ---------------------------------------------------------------------------------------


def interleave(i: int, n: int) -> tuple[int, int]:
    """
    WaferLLM's INTERLEAVE for position `i` of `n >= 3`: (send-to, receive-from). Even
    positions carry the ring east 0→2→4→…, odd positions carry it back west …→3→1, and
    1→0 closes it; every link is 1 or 2 hops.
    """
    if n < 3:
        raise PlmrError(f"an interleaved ring needs at least 3 PEs, got {n}")
    last_even = n - 1 if (n - 1) % 2 == 0 else n - 2
    last_odd = n - 1 if (n - 1) % 2 == 1 else n - 2
    if i % 2 == 0:
        send = i + 2 if i + 2 <= last_even else last_odd
        recv = i - 2 if i >= 2 else 1
    else:
        send = i - 2 if i >= 3 else 0
        recv = i + 2 if i + 2 <= last_odd else last_even
    return send, recv


def ring_successors(ring: str, n: int) -> list[int | None]:
    """succ[p]: where position p's block goes in one shift step (None: it falls off)."""
    if n == 1:
        return [0] if ring != "linear" else [None]
    if ring == "linear":
        return [p + 1 if p + 1 < n else None for p in range(n)]
    if ring == "torus" or n == 2:
        return [(p + 1) % n for p in range(n)]
    if ring == "interleaved":
        return [interleave(p, n)[0] for p in range(n)]
    raise PlmrError(f"unknown ring '{ring}' (linear, torus or interleaved)")


def ring_order(ring: str, n: int) -> list[int]:
    """The positions in logical ring order starting at 0 (for rings that close)."""
    succ = ring_successors(ring, n)
    order = [0]
    while len(order) < n:
        nxt = succ[order[-1]]
        if nxt is None or nxt == 0:
            break
        order.append(nxt)
    return order


@lru_cache(maxsize=4096)
def shift_plan(ring: str, n: int, distance: int) -> Plan:
    """`|distance|` shift steps; a negative distance runs the ring backwards."""
    succ = ring_successors(ring, n)
    if distance < 0:
        pred: list[int | None] = [None] * n
        for p, s in enumerate(succ):
            if s is not None:
                pred[s] = p
        succ = pred
    stage = Stage(
        tuple(Transfer(p, (s,)) for p, s in enumerate(succ) if s is not None and s != p)
    )
    plan = Plan(n, description=f"shift {ring} ring, distance {distance}")
    if stage.transfers or ring == "linear":
        # A linear shift on one PE still replaces the block (with zeros).
        plan.stages = [stage] * abs(distance)
    return plan


# ---------------------------------------------------------------------------------------
# Broadcast and reductions
# ---------------------------------------------------------------------------------------


@lru_cache(maxsize=4096)
def broadcast_plan(n: int, root: int) -> Plan:
    if not 0 <= root < n:
        raise PlmrError(f"broadcast root {root} is outside the {n} PEs of the axis")
    dsts = tuple(p for p in range(n) if p != root)
    plan = Plan(n, description=f"broadcast from {root}")
    if dsts:
        plan.stages = [Stage((Transfer(root, dsts),), streamed=True)]
    return plan


def _chain_to(members: Sequence[int], root: int) -> list[list[Transfer]]:
    """Stages of chain reductions of `members` (sorted positions) towards `root`."""
    left = [m for m in members if m < root]
    right = [m for m in members if m > root][::-1]
    stages: list[list[Transfer]] = []
    for chain in (left, right):
        path = [*chain, root]
        for i in range(len(path) - 1):
            while len(stages) <= i:
                stages.append([])
            stages[i].append(Transfer(path[i], (path[i + 1],), combine=True))
    return stages


def _merge(into: list[list[Transfer]], more: list[list[Transfer]]) -> None:
    for i, transfers in enumerate(more):
        while len(into) <= i:
            into.append([])
        into[i].extend(transfers)


def ktree_levels(n: int, k: int, groups: int | None) -> list[list[list[int]]]:
    """The groups of each of the K phases: level 0 groups positions, level i group roots."""
    if k < 1:
        raise PlmrError(f"a K-tree needs K >= 1 phases, got {k}")
    if groups is not None and k < 2 and groups != 1:
        raise PlmrError(
            f"groups = {groups} needs K >= 2 (with K = 1 there is a single group)"
        )
    members: list[int] = list(range(n))
    levels: list[list[list[int]]] = []
    for level in range(k):
        if len(members) <= 1:
            break
        remaining = k - level
        if level == 0 and groups is not None:
            size = math.ceil(len(members) / groups)
        elif remaining == 1:
            size = len(members)
        else:
            size = max(2, math.ceil(len(members) ** (1 / remaining)))
        chunks: list[list[int]] = [
            members[i : i + size] for i in range(0, len(members), size)
        ]
        levels.append(chunks)
        members = [c[len(c) // 2] for c in chunks]
    return levels


@lru_cache(maxsize=4096)
def reduce_plan(
    n: int, algorithm: str, k: int = 2, groups: int | None = None, root: int | None = None
) -> Plan:
    """The reduction phase of an (all)reduce; the result ends at the returned plan's root."""
    plan = Plan(n, description=f"{algorithm} reduce")
    if n == 1:
        return plan
    if algorithm == "pipeline":
        target = n - 1 if root is None else root
        for transfers in _chain_to(list(range(n)), target):
            plan.stages.append(Stage(tuple(transfers), streamed=True))
        return plan
    if algorithm == "ktree":
        levels = ktree_levels(n, k, groups)
        top = levels[-1][0] if levels else [0]
        top_root = top[len(top) // 2]
        for chunks in levels:
            phase: list[list[Transfer]] = []
            for chunk in chunks:
                _merge(phase, _chain_to(chunk, chunk[len(chunk) // 2]))
            plan.stages += [Stage(tuple(t), streamed=True) for t in phase]
        if root is not None and root != top_root:
            plan.stages.append(Stage((Transfer(top_root, (root,)),)))
        return plan
    raise PlmrError(f"unknown reduction algorithm '{algorithm}' (ktree, pipeline, ring)")


def reduce_root(n: int, algorithm: str, k: int = 2, groups: int | None = None) -> int:
    """Where an allreduce's reduction phase leaves the result before the multicast."""
    if n == 1:
        return 0
    if algorithm == "pipeline":
        return n - 1
    levels = ktree_levels(n, k, groups)
    top = levels[-1][0]
    return top[len(top) // 2]


@lru_cache(maxsize=4096)
def allreduce_plan(n: int, algorithm: str, k: int = 2, groups: int | None = None) -> Plan:
    if algorithm == "ring":
        return ring_allreduce_plan(n)
    reduce = reduce_plan(n, algorithm, k, groups)
    root = reduce_root(n, algorithm, k, groups)
    return Plan(
        n,
        [*reduce.stages, *broadcast_plan(n, root).stages],
        f"{algorithm} allreduce (k={k}, groups={groups})",
    )


@lru_cache(maxsize=4096)
def allgather_plan(n: int, algorithm: str, k: int = 2, groups: int | None = None) -> Plan:
    """
    The allreduce's transfers without its combines: the chains carry each position's
    block to the root, which multicasts the whole; the receivers append, not add.
    """
    if algorithm == "ring":
        raise PlmrError("an allgather runs ktree or pipeline, not ring")
    reduce = allreduce_plan(n, algorithm, k, groups)
    plain = [
        Stage(
            tuple(Transfer(t.src, t.dsts) for t in st.transfers), st.fraction, st.streamed
        )
        for st in reduce.stages
    ]
    return Plan(n, plain, f"{algorithm} allgather (k={k}, groups={groups})")


@lru_cache(maxsize=4096)
def ring_allreduce_plan(n: int) -> Plan:
    """Reduce-scatter then allgather: 2(n-1) steps, each moving 1/n of the block."""
    plan = Plan(n, description="ring allreduce")
    if n == 1:
        return plan
    ring = "interleaved" if n >= 3 else "torus"
    succ = ring_successors(ring, n)
    step_combine = Stage(
        tuple(Transfer(p, (s,), combine=True) for p, s in enumerate(succ) if s is not None),
        fraction=1 / n,
    )
    step_copy = Stage(
        tuple(Transfer(p, (s,)) for p, s in enumerate(succ) if s is not None),
        fraction=1 / n,
    )
    plan.stages = [step_combine] * (n - 1) + [step_copy] * (n - 1)
    return plan


_SEGMENTED: dict[tuple[int, int], tuple[Plan, Plan]] = {}
"""Segmented plans built so far, keyed by the segment plan's identity (kept alive)."""


def segmented_plan(plan: Plan, n: int) -> Plan:
    """
    `plan` (one segment of `plan.n` PEs) run by every whole segment of a line of `n` PEs
    at once: segment `j` holds positions `j·S .. j·S + S - 1`; the positions past the
    last whole segment take no part. Stages keep their identity (a ring's repeated steps
    stay one object), so the segmented plan times and routes like the segment's.
    """
    size = plan.n
    if not 1 <= size <= n:
        raise PlmrError(f"a segment of {size} PEs does not fit a line of {n} PEs")
    if size == n:
        return plan
    known_plan = _SEGMENTED.get((id(plan), n))
    if known_plan is not None and known_plan[0] is plan:
        return known_plan[1]
    if len(_SEGMENTED) >= 4096:
        _SEGMENTED.clear()
    offsets = range(0, (n // size) * size, size)
    out = Plan(n, description=f"{plan.description}, segments of {size}")
    built: dict[int, Stage] = {}
    for stage in plan.stages:
        known = built.get(id(stage))
        if known is None:
            transfers = tuple(
                Transfer(t.src + o, tuple(d + o for d in t.dsts), t.combine)
                for o in offsets
                for t in stage.transfers
            )
            known = Stage(transfers, stage.fraction, stage.streamed)
            built[id(stage)] = known
        out.stages.append(known)
    _SEGMENTED[(id(plan), n)] = (plan, out)
    return out


# ---------------------------------------------------------------------------------------
# Routes
# ---------------------------------------------------------------------------------------


def transfer_path(t: Transfer) -> dict[int, tuple[Port, tuple[Port, ...]]]:
    """Router entries (position -> rx, tx ports) of one transfer along an x line."""
    entries: dict[int, tuple[Port, set[Port]]] = {}

    def add(pos: int, rx: Port, tx: Port) -> None:
        if pos in entries:
            entries[pos][1].add(tx)
        else:
            entries[pos] = (rx, {tx})

    for dst in t.dsts:
        if dst == t.src:
            add(t.src, Port.RAMP, Port.RAMP)
            continue
        step = 1 if dst > t.src else -1
        fwd = Port.EAST if step == 1 else Port.WEST
        back = Port.WEST if step == 1 else Port.EAST
        add(t.src, Port.RAMP, fwd)
        for pos in range(t.src + step, dst, step):
            add(pos, back, fwd)
        add(dst, back, Port.RAMP)
    order = (Port.RAMP, Port.NORTH, Port.SOUTH, Port.EAST, Port.WEST)
    return {p: (rx, tuple(q for q in order if q in tx)) for p, (rx, tx) in entries.items()}


def along_y(port: Port) -> Port:
    """Maps a port of an x line to the same role on a y line (east -> south)."""
    return {Port.EAST: Port.SOUTH, Port.WEST: Port.NORTH}.get(port, port)
