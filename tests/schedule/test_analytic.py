"""The analytic start: blocks from a communication lower bound."""

from __future__ import annotations

import math

from plmr.schedule.analytic import (
    communication_bound,
    footprint,
    generate,
    uniform_blocks,
)
from plmr.schedule.features import NestInfo
from plmr.schedule.transforms import Compound, Partition, ProgramInfo, Tile, choice

# A 64x64 output with a reduction of 256 (a GEMM), and a 10-row one.
GEMM = NestInfo("o", (64, 64), (256,), 4 * 2 * 64 * 256, 4 * 64 * 64, 2.0 * 64 * 64 * 256)
ODD = NestInfo("logits", (10,), (32,), 4 * 10 * 32, 40, 640.0)


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
    assert values == {
        "tile.nests.o.0": 16,
        "tile.nests.o.1": 64,
        "tile.parallel": 2,
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
