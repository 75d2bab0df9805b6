"""The analytic start: blocks from a communication lower bound."""

from __future__ import annotations

import math

import numpy as np

from plmr.schedule.analytic import (
    communication_bound,
    footprint,
    gemv_bound,
    generate,
    nest_bound,
    reuse,
    uniform_blocks,
)
from plmr.schedule.cost_model import spearman
from plmr.schedule.features import NestInfo
from plmr.schedule.transforms import Compound, Partition, ProgramInfo, Tile, choice

# A 64x64 output with a reduction of 256 (a GEMM), and a 10-row one.
GEMM = NestInfo("o", (64, 64), (256,), 4 * 2 * 64 * 256, 4 * 64 * 64, 2.0 * 64 * 64 * 256)
ODD = NestInfo("logits", (10,), (32,), 4 * 10 * 32, 40, 640.0)
# A batched matrix-vector product: 128 outputs of 64-long dot products (each weight read
# once), as a decode step's projections.
GEMV = NestInfo(
    "mm", (2, 4, 1, 16), (64,), 4 * 128 * 64 + 4 * 2 * 64, 4 * 128, 2 * 128 * 64
)


def test_bound_rejects_blocks_that_do_not_divide_or_fit():
    assert communication_bound(ODD, 4, 32, (2, 2), 48 * 1024) == math.inf
    assert communication_bound(ODD, 2, 32, (2, 2), 48 * 1024) < math.inf
    assert communication_bound(GEMM, 16, 24, (4, 4), 48 * 1024) == math.inf
    assert footprint(GEMM, 64, 256) > 24 * 1024
    assert communication_bound(GEMM, 64, 256, (4, 4), 48 * 1024) == math.inf


def test_bound_trades_reuse_against_occupancy():
    sram, grid = 48 * 1024, (4, 4)
    q = {p: communication_bound(GEMM, p, 32, grid, sram) for p in (2, 4, 8, 16, 32)}
    # Larger blocks reuse more while 16 PEs stay busy (64/16 = 4 blocks a side) ...
    assert q[2] > q[4] > q[8] > q[16]
    # ... past that, fewer blocks than PEs: the reduction is split and partial sums move.
    assert q[32] > q[16]
    # Larger reduction chunks: fewer messages.
    assert communication_bound(GEMM, 16, 64, grid, sram) < communication_bound(
        GEMM, 16, 8, grid, sram
    )


def test_generate_sets_every_block_knob_from_the_bound():
    schedule = Compound(
        [
            Tile(
                parallel=choice(2, 4, 8, 32),
                reduction=choice(4, 16, 32),
                nests={"o": [choice(2, 4, 8, 16, 32), choice(8, 64)]},
            ),
            Partition(grid=[4, 4], gemm=choice("meshgemm", "cannon")),
        ]
    )
    values = generate(schedule, [GEMM, ODD], (4, 4), 48 * 1024)
    # The 10x32 logits are a matrix-vector product: one block, whose reduction is not
    # split, needs no allreduce (`gemv_bound`); 2-row blocks would need five.
    assert values == {
        "tile.nests.o.0": 16,
        "tile.nests.o.1": 64,
        "tile.parallel": 32,
        "tile.reduction": 32,
    }
    # The start point satisfies the schedule's constraints.
    info = ProgramInfo({"o": ((64, 64), (256,)), "logits": ((10,), (32,))})
    assert schedule.bind(values).check(info) is None


def test_uniform_blocks_pair_the_global_domains_and_follow_them_per_nest():
    schedule = Compound(
        [
            Tile(
                parallel=choice(2, 8, 32),
                reduction=choice(4, 16),
                nests={"h": [choice(2, 4, 16), choice(8, 16)]},
            )
        ]
    )
    got = uniform_blocks(schedule)
    assert [(v["tile.parallel"], v["tile.reduction"]) for v in got] == [
        (2, 4),
        (2, 16),
        (8, 4),
        (8, 16),
        (32, 4),
        (32, 16),
    ]
    # Per nest: the nearest size of its own domain (log2), ties to the earlier value.
    assert [(v["tile.nests.h.0"], v["tile.nests.h.1"]) for v in got] == [
        (2, 8),
        (2, 16),
        (4, 8),
        (4, 16),
        (16, 8),
        (16, 16),
    ]
    assert uniform_blocks(Compound([Tile(parallel=8, reduction=4)])) == []


def test_gemv_bound_prefers_few_allreduces_to_small_blocks():
    sram, grid = 48 * 1024, (4, 4)
    assert reuse(GEMV) < 2 < reuse(GEMM)
    assert nest_bound(GEMM, 16, 32, grid, sram) == communication_bound(
        GEMM, 16, 32, grid, sram
    )
    t = {p: gemv_bound(GEMV, p, 16, grid, sram) for p in (1, 2, 4, 8, 16)}
    # No reuse to gain: the bytes bound prefers the smallest blocks (most PEs busy),
    # but each block pays its own allreduce of partial sums (a latency floor of
    # 2*log2(4) messages): the matrix-vector form prefers few, larger blocks.
    q = {p: communication_bound(GEMV, p, 16, grid, sram) for p in (1, 2, 4, 8, 16)}
    assert min(q, key=lambda p: q[p]) == 2
    assert t[1] > t[2] > t[4]
    assert min(t, key=lambda p: t[p]) >= 4
    # 8 chunks over 8 columns: one chunk per PE and one allreduce, of 3 stages; over 4
    # columns, two chunks per PE and two allreduces of 2 stages.
    assert gemv_bound(GEMV, 16, 8, (4, 8), sram) < gemv_bound(GEMV, 16, 8, (4, 4), sram)


def test_gemv_bound_ranks_blockings_of_a_decode_step_as_the_planner_does():
    # The tiny LLaMA decode step (matrix-vector products) on 4x4, blocked alike: the
    # bound ranks the parallel blocks as the planner's estimates do, and picks the
    # planner's; the bytes bound alone ranks them the other way round.
    from pathlib import Path

    from plmr.dialects.context import load_module
    from plmr.dialects.printing import module_text
    from plmr.schedule.transforms import default_schedule
    from plmr.schedule.trials import estimate, front

    root = Path(__file__).resolve().parents[2]
    text = module_text(load_module(root / "examples/llama/tiny_decode.mlir"))
    grid, sram = (4, 4), 48 * 1024
    _, table = front(text, default_schedule(grid))
    reducing = [n for n in table if n.reduction]
    schedule = Compound([Tile(parallel=choice(16, 2, 4, 8), reduction=16)])
    sizes = (2, 4, 8, 16)
    bound = np.array(
        [sum(nest_bound(n, p, 16, grid, sram) for n in reducing) for p in sizes]
    )
    old = [sum(communication_bound(n, p, 16, grid, sram) for n in reducing) for p in sizes]
    planner = np.array(
        [estimate(text, schedule.to_json(), {"tile.parallel": p}) for p in sizes]
    )
    assert spearman(bound, planner) > 0.99
    assert spearman(np.array(old), planner) < 0
    assert generate(schedule, table, grid, sram) == {"tile.parallel": 16}
    assert sizes[int(np.argmin(planner))] == 16
