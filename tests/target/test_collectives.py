"""
Structural properties of the collective plans (target/collectives.py).

The plans are simulated on numpy data (every stage's transfers read the values at the
start of the stage; `combine` receivers add, the others replace) and compared with what
the collective means: a shift rolls the blocks along the logical ring, a broadcast copies
the root's block, a reduction sums into the root, an allreduce sums everywhere. The data
are one-hot rows, so a value that is lost or counted twice shows up exactly.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
import pytest

from plmr.errors import PlmrError
from plmr.target.collectives import (
    Plan,
    Transfer,
    allreduce_plan,
    broadcast_plan,
    interleave,
    ktree_levels,
    reduce_plan,
    reduce_root,
    ring_allreduce_plan,
    ring_order,
    ring_successors,
    shift_plan,
)

Array = npt.NDArray[np.float64]

SIZES = [1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 16, 31, 32, 33, 64, 80, 100]
"""Line lengths the data-movement tests run on (small, odd, even, powers of two)."""


def one_hot(n: int) -> Array:
    """Row p is e_p: a sum of rows shows exactly which positions contributed."""
    return np.eye(n)


# ---------------------------------------------------------------------------------------
# Plan simulation
# ---------------------------------------------------------------------------------------


def simulate(plan: Plan, data: Array, move: bool = False) -> Array:
    """
    Runs a plan's transfers on `data` (one row per position). All transfers of a stage
    read the values of the start of the stage; `combine` receivers add what they
    receive, the others replace their value. With `move` (shifts), a position that
    receives nothing in a stage ends it with zeros (its block moved on).
    """
    cur = data.copy()
    for stage in plan.stages:
        start = cur.copy()
        nxt = np.zeros_like(cur) if move else cur.copy()
        replaced: set[int] = set()
        for t in stage.transfers:
            for d in t.dsts:
                assert 0 <= d < plan.n
                assert 0 <= t.src < plan.n
                if t.combine:
                    nxt[d] += start[t.src]
                else:
                    assert d not in replaced, f"{d} receives two blocks in one stage"
                    replaced.add(d)
                    nxt[d] = start[t.src]
        cur = nxt
    return cur


def ring_allreduce_simulate(plan: Plan, data: Array) -> Array:
    """
    Ring allreduce on chunks: the block of each position is split into n chunks; in
    reduce-scatter step s, the position at logical ring index r sends chunk (r - s) mod n
    to its successor (which adds it), in allgather step s chunk (r + 1 - s) mod n (which
    replaces it). Checks that the plan's transfers are exactly the ring's links.
    """
    n = plan.n
    ring = "interleaved" if n >= 3 else "torus"
    succ = ring_successors(ring, n)
    order = ring_order(ring, n)
    index = {p: r for r, p in enumerate(order)}
    chunks = data.reshape(n, n, -1).copy()  # (position, chunk, elements)
    assert len(plan.stages) == 2 * (n - 1)
    for step, stage in enumerate(plan.stages):
        assert stage.fraction == pytest.approx(1 / n)
        links = {(t.src, t.dsts) for t in stage.transfers}
        assert links == {(p, (succ[p],)) for p in range(n)}
        combine = step < n - 1
        assert all(t.combine == combine for t in stage.transfers)
        s = step if combine else step - (n - 1)
        start = chunks.copy()
        for p in range(n):
            q = succ[p]
            assert q is not None
            c = (index[p] - s) % n if combine else (index[p] + 1 - s) % n
            if combine:
                chunks[q, c] += start[p, c]
            else:
                chunks[q, c] = start[p, c]
    return chunks.reshape(n, -1)


def ring_roll(data: Array, ring: str, distance: int) -> Array:
    """The intended result of a shift: the block at ring index r moves to r + distance."""
    n = data.shape[0]
    out = np.zeros_like(data)
    if ring == "linear":
        for p in range(n):
            q = p + distance
            if 0 <= q < n:
                out[q] = data[p]
        return out
    order = ring_order(ring, n)
    assert sorted(order) == list(range(n))
    for r, p in enumerate(order):
        out[order[(r + distance) % n]] = data[p]
    return out


# ---------------------------------------------------------------------------------------
# INTERLEAVE
# ---------------------------------------------------------------------------------------


def waferllm_assign(position: int, n: int) -> tuple[int, int]:
    """
    WaferLLM's reference formulation of INTERLEAVE (`assignId` of its MeshGEMM launcher,
    1-based internally): (send-to, receive-from) of a 0-based position on a line of n.
    """
    pc = position + 1
    if pc % 2 == 0:
        send, recv = pc - 2, pc + 2
    else:
        send, recv = pc + 2, pc - 2
    if pc == 1:
        send, recv = 3, 2
    if pc == 2:
        send, recv = 1, min(recv, n)
    if n % 2 == 0:
        if pc == n - 1:
            send, recv = n, n - 3
        if pc == n:
            send, recv = n - 2, n - 1
    else:
        if pc == n - 1:
            send, recv = max(send, 1), n
        if pc == n:
            send, recv = n - 1, n - 2
    return send - 1, recv - 1


@pytest.mark.parametrize("n", range(3, 201))
def test_interleave_is_one_ring_of_short_links(n: int):
    succ = [interleave(i, n)[0] for i in range(n)]
    pred = [interleave(i, n)[1] for i in range(n)]
    assert sorted(succ) == list(range(n)), "send-to is a permutation"
    for i in range(n):
        assert 1 <= abs(succ[i] - i) <= 2, f"link {i} -> {succ[i]} is longer than 2 hops"
        assert pred[succ[i]] == i, "receive-from inverts send-to"
    # One cycle through every position.
    seen, p = [0], succ[0]
    while p != 0:
        seen.append(p)
        p = succ[p]
    assert sorted(seen) == list(range(n))
    assert ring_order("interleaved", n) == seen
    assert ring_successors("interleaved", n) == succ
    assert [waferllm_assign(i, n) for i in range(n)] == [interleave(i, n) for i in range(n)]


@pytest.mark.parametrize("n", [5, 6])
def test_interleave_small_rings_by_hand(n: int):
    # 0 -> 2 -> 4 -> ... east on the even positions, back west on the odd ones.
    expected = {5: [0, 2, 4, 3, 1], 6: [0, 2, 4, 5, 3, 1]}[n]
    assert ring_order("interleaved", n) == expected


@pytest.mark.parametrize("n", [0, 1, 2])
def test_interleave_needs_three_positions(n: int):
    with pytest.raises(
        PlmrError, match=rf"^an interleaved ring needs at least 3 PEs, got {n}$"
    ):
        interleave(0, n)


@pytest.mark.parametrize("ring", ["torus", "interleaved"])
@pytest.mark.parametrize("n", [1, 2, *range(3, 70)])
def test_closed_rings_are_permutations(ring: str, n: int):
    succ = ring_successors(ring, n)
    assert all(s is not None for s in succ)
    assert sorted(s for s in succ if s is not None) == list(range(n))
    assert sorted(ring_order(ring, n)) == list(range(n))


@pytest.mark.parametrize("n", [1, 2, 3, 7])
def test_linear_ring_drops_the_last_block(n: int):
    succ = ring_successors("linear", n)
    assert succ == [*range(1, n), None]


def test_unknown_ring_is_an_error():
    with pytest.raises(
        PlmrError, match=r"^unknown ring 'mobius' \(linear, torus or interleaved\)$"
    ):
        ring_successors("mobius", 5)


# ---------------------------------------------------------------------------------------
# Shift
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("ring", ["linear", "torus", "interleaved"])
@pytest.mark.parametrize("n", [n for n in SIZES if n > 1])
@pytest.mark.parametrize("distance", [1, 2, 3, -1, -2, 5])
def test_shift_rolls_along_the_ring(ring: str, n: int, distance: int):
    plan = shift_plan(ring, n, distance)
    data = one_hot(n)
    np.testing.assert_array_equal(
        simulate(plan, data, move=True), ring_roll(data, ring, distance)
    )
    assert len(plan.stages) == abs(distance)
    if ring == "interleaved":
        assert plan.max_hops() <= 2
    elif ring == "torus" and n > 2:
        assert plan.max_hops() == n - 1  # the wrap-around crosses the line
    else:
        assert plan.max_hops() == 1


@pytest.mark.parametrize("ring", ["torus", "interleaved"])
def test_shift_on_one_pe_is_the_identity(ring: str):
    plan = shift_plan(ring, 1, 1)
    assert plan.stages == []


def test_linear_shift_on_one_pe_gives_zeros():
    data = one_hot(1)
    np.testing.assert_array_equal(
        simulate(shift_plan("linear", 1, 1), data, move=True), np.zeros_like(data)
    )


# ---------------------------------------------------------------------------------------
# Broadcast
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", SIZES)
def test_broadcast_copies_the_root_everywhere(n: int):
    for root in sorted({0, n // 2, n - 1}):
        plan = broadcast_plan(n, root)
        out = simulate(plan, one_hot(n))
        np.testing.assert_array_equal(out, np.tile(one_hot(n)[root], (n, 1)))
        assert len(plan.stages) == (1 if n > 1 else 0)
        assert plan.max_hops() == max(root, n - 1 - root)


@pytest.mark.parametrize("root", [-1, 4])
def test_broadcast_root_outside_the_axis(root: int):
    with pytest.raises(
        PlmrError, match=rf"^broadcast root {root} is outside the 4 PEs of the axis$"
    ):
        broadcast_plan(4, root)


# ---------------------------------------------------------------------------------------
# Reductions
# ---------------------------------------------------------------------------------------

KTREE_CASES = [
    (n, k, g)
    for n in SIZES
    for k in (1, 2, 3, 4)
    for g in [None, *sorted({1, 2, 3, max(1, n // 2), n})]
    if (g is None or g <= n) and not (k == 1 and g is not None and g > 1)
]
"""(n, K, groups); K = 1 with several groups is rejected (see below)."""


def no_send_and_combine_in_one_stage(plan: Plan) -> None:
    """Reductions never read and write a position in the same stage (order-free)."""
    for stage in plan.stages:
        if not any(t.combine for t in stage.transfers):
            continue
        senders = {t.src for t in stage.transfers}
        receivers = {d for t in stage.transfers for d in t.dsts}
        assert not senders & receivers


@pytest.mark.parametrize("n, k, groups", KTREE_CASES)
def test_ktree_allreduce_sums_everywhere(n: int, k: int, groups: int | None):
    plan = allreduce_plan(n, "ktree", k, groups)
    out = simulate(plan, one_hot(n))
    np.testing.assert_array_equal(out, np.ones((n, n)))
    no_send_and_combine_in_one_stage(plan)


@pytest.mark.parametrize("n, k, groups", KTREE_CASES)
def test_ktree_reduce_sums_at_the_root(n: int, k: int, groups: int | None):
    for root in sorted({0, n // 3, n - 1}):
        plan = reduce_plan(n, "ktree", k, groups, root)
        out = simulate(plan, one_hot(n))
        np.testing.assert_array_equal(out[root], np.ones(n))
        no_send_and_combine_in_one_stage(plan)
    # Without a root, the result stays where the multicast of the allreduce starts.
    plan = reduce_plan(n, "ktree", k, groups)
    out = simulate(plan, one_hot(n))
    np.testing.assert_array_equal(out[reduce_root(n, "ktree", k, groups)], np.ones(n))


@pytest.mark.parametrize("n", SIZES)
def test_pipeline_allreduce_and_reduce(n: int):
    plan = allreduce_plan(n, "pipeline")
    np.testing.assert_array_equal(simulate(plan, one_hot(n)), np.ones((n, n)))
    # n - 1 chain stages of one hop each, then one multicast from the last PE.
    assert len(plan.stages) == (n if n > 1 else 0)
    chain = plan.stages[:-1]
    assert all(
        s.transfers == (Transfer(i, (i + 1,), combine=True),) for i, s in enumerate(chain)
    )
    assert reduce_root(n, "pipeline") == n - 1
    for root in sorted({0, n // 2, n - 1}):
        red = reduce_plan(n, "pipeline", root=root)
        np.testing.assert_array_equal(simulate(red, one_hot(n))[root], np.ones(n))
        # Chains from both sides meet at the root: max(root, n - 1 - root) stages.
        assert len(red.stages) == max(root, n - 1 - root)
        no_send_and_combine_in_one_stage(red)


@pytest.mark.parametrize("n", SIZES)
def test_ring_allreduce(n: int):
    plan = ring_allreduce_plan(n)
    assert allreduce_plan(n, "ring").stages == plan.stages
    if n == 1:
        assert plan.stages == []
        return
    rng = np.random.default_rng(n)
    data = rng.integers(-8, 8, size=(n, n * 3)).astype(np.float64)
    out = ring_allreduce_simulate(plan, data)
    np.testing.assert_array_equal(out, np.tile(data.sum(axis=0), (n, 1)))
    assert plan.max_hops() <= 2


def test_unknown_reduction_algorithm():
    with pytest.raises(
        PlmrError, match=r"^unknown reduction algorithm 'tree' \(ktree, pipeline, ring\)$"
    ):
        reduce_plan(4, "tree")


# ---------------------------------------------------------------------------------------
# K-tree structure
# ---------------------------------------------------------------------------------------


def expected_ktree_stages(levels: list[list[list[int]]]) -> int:
    """Each phase chains every group into its middle member: len // 2 stages."""
    return sum(max(len(c) // 2 for c in chunks) for chunks in levels)


@pytest.mark.parametrize("n, k, groups", KTREE_CASES)
def test_ktree_levels_partition_and_stage_counts(n: int, k: int, groups: int | None):
    levels = ktree_levels(n, k, groups)
    assert len(levels) <= k
    members = list(range(n))
    for chunks in levels:
        assert [m for c in chunks for m in c] == members, (
            "each level partitions its members"
        )
        members = [c[len(c) // 2] for c in chunks]
    assert len(members) == 1, "the last phase leaves one root"
    if groups is not None and levels:
        size = math.ceil(n / groups)
        assert all(len(c) <= size for c in levels[0])
        assert len(levels[0]) <= groups
        if n % groups == 0:
            assert len(levels[0]) == groups
    plan = reduce_plan(n, "ktree", k, groups)
    assert len(plan.stages) == expected_ktree_stages(levels)
    assert all(s.streamed for s in plan.stages)
    full = allreduce_plan(n, "ktree", k, groups)
    assert len(full.stages) == len(plan.stages) + (1 if n > 1 else 0)


@pytest.mark.parametrize(
    "n, k, groups, phases, stages",
    [
        # K = 2 on 256: 16 groups of 16, then the 16 group roots: 8 + 8 chain stages.
        (256, 2, None, [16, 1], 16),
        # The groups sweep of the GEMV benchmark on 80 PEs.
        (80, 2, 2, [2, 1], 20 + 1),
        (80, 2, 4, [4, 1], 10 + 2),
        (80, 2, 8, [8, 1], 5 + 4),
        # K = 3 on 64: groups of 4, 4, 4.
        (64, 3, None, [16, 4, 1], 2 + 2 + 2),
        # K = 1 is one chain to the middle: 32 stages on 64 PEs.
        (64, 1, None, [1], 32),
    ],
)
def test_ktree_phases_by_hand(
    n: int, k: int, groups: int | None, phases: list[int], stages: int
):
    levels = ktree_levels(n, k, groups)
    assert [len(chunks) for chunks in levels] == phases
    assert len(reduce_plan(n, "ktree", k, groups).stages) == stages
    assert len(allreduce_plan(n, "ktree", k, groups).stages) == stages + 1


@pytest.mark.parametrize("n, groups", [(2, 2), (8, 2), (9, 3)])
def test_ktree_with_one_phase_and_several_groups_is_rejected(n: int, groups: int):
    """One phase cannot combine several group roots: no plan rather than a partial sum."""
    message = rf"^groups = {groups} needs K >= 2 \(with K = 1 there is a single group\)$"
    with pytest.raises(PlmrError, match=message):
        ktree_levels(n, 1, groups)
    with pytest.raises(PlmrError, match=message):
        allreduce_plan(n, "ktree", 1, groups)
    with pytest.raises(PlmrError, match=message):
        reduce_plan(n, "ktree", 1, groups, root=0)
    with pytest.raises(PlmrError, match=message):
        reduce_root(n, "ktree", 1, groups)
    # One group is the plain single phase.
    plan = allreduce_plan(n, "ktree", 1, 1)
    np.testing.assert_array_equal(simulate(plan, one_hot(n)), np.ones((n, n)))


@pytest.mark.parametrize("k", [0, -1])
def test_ktree_needs_a_phase(k: int):
    with pytest.raises(PlmrError, match=rf"^a K-tree needs K >= 1 phases, got {k}$"):
        ktree_levels(8, k, None)
    with pytest.raises(PlmrError, match=rf"^a K-tree needs K >= 1 phases, got {k}$"):
        allreduce_plan(8, "ktree", k)


def test_ktree_beats_pipeline_in_stages_at_scale():
    for n in (64, 256, 1024):
        ktree = len(allreduce_plan(n, "ktree").stages)
        pipeline = len(allreduce_plan(n, "pipeline").stages)
        assert pipeline == n
        assert ktree <= 2 * math.isqrt(n) + 2
