"""The evolutionary sampler's parts on a synthetic space (nothing compiled)."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

from plmr.errors import PlmrError
from plmr.schedule.evolution import (
    GLOBAL,
    Search,
    Space,
    TaskScheduler,
    key_of,
    tasks_of,
)
from plmr.schedule.features import FEATURE_COUNT, NestInfo
from plmr.schedule.transforms import Compound, Fuse, Partition, ProgramInfo, Tile, choice

TABLE = [
    NestInfo("h", (10,), (16,), 800, 40, 3200.0),
    NestInfo("logits", (10,), (16,), 800, 40, 1600.0),
]
INFO = ProgramInfo({"h": ((10,), (16,)), "logits": ((10,), (16,))})


def _space() -> Space:
    schedule = Compound(
        [
            Fuse("auto"),
            # 4 and 8 do not divide the 10 rows; nor do 3 and 4 for %h.
            Tile(
                parallel=choice(2, 4, 8, 32),
                reduction=choice(4, 16),
                nests={"h": [choice(2, 3, 4, 5), choice(4, 8)]},
            ),
            Partition(grid=[2, 4], gemm=choice("meshgemm", "cannon", "summa")),
        ]
    )
    return Space(schedule, lambda _: (INFO, TABLE), 48 * 1024, 1000.0)


@dataclass(frozen=True)
class _Outcome:
    status: str
    cycles: float | None
    reason: str = ""


def _cycles(v: dict[str, Any]) -> float:
    gemm = {"meshgemm": 1.0, "cannon": 0.8, "summa": 1.3}[v["partition.gemm"]]
    return (
        1000.0 * gemm * (1 + abs(math.log2(v["tile.nests.h.0"] / 5))) + v["tile.reduction"]
    )


def test_constraint_aware_sampling_never_proposes_infeasible_values():
    search = Search(_space(), seed=3)
    for _ in range(300):
        v = search.random_feasible()
        assert v is not None
        assert v["tile.parallel"] in (2, 32)
        assert v["tile.nests.h.0"] in (2, 5)


def test_search_measures_only_feasible_candidates_and_learns_failures():
    proposed: list[dict[str, Any]] = []

    def measure(values: list[dict[str, Any]], source: str) -> list[Any]:
        del source
        out: list[Any] = []
        for v in values:
            proposed.append(v)
            # A block that does not fit: the same blocks must not come back.
            if v["tile.nests.h.0"] == 5 and v["tile.nests.h.1"] == 8:
                out.append(_Outcome("infeasible", None, "the nest computing %h needs SRAM"))
            else:
                out.append(_Outcome("ok", _cycles(v)))
        return out

    space = _space()
    search = Search(space, seed=0)
    search.run(40, measure)
    keys = [tuple(sorted(v.items())) for v in proposed]
    assert len(keys) == len(set(keys))  # never measured twice
    for v in proposed:
        assert space.reason(v) in (None, "the same blocks did not fit before")
        assert v["tile.parallel"] in (2, 32)
        assert v["tile.nests.h.0"] in (2, 5)
    # Once %h's blocks (5, 8) did not fit, they never come back.
    assert search.infeasible == 1
    best = min(
        _cycles(v) for v in proposed if (v["tile.nests.h.0"], v["tile.nests.h.1"]) != (5, 8)
    )
    assert best == min(
        _cycles(v)
        for v in (
            {"partition.gemm": g, "tile.nests.h.0": p, "tile.reduction": r}
            for g in ("meshgemm", "cannon", "summa")
            for p in (2, 5)
            for r in (4, 16)
        )
    )
    assert search.space.vector(proposed[0]).shape == (FEATURE_COUNT + len(space.knobs),)


def test_tasks_and_their_scheduler():
    space = _space()
    tasks = tasks_of(space.knobs)
    assert tasks == {
        GLOBAL: ["tile.parallel", "tile.reduction", "partition.gemm"],
        "nest:h": ["tile.nests.h.0", "tile.nests.h.1"],
    }
    many = {GLOBAL: ["g"], "nest:a": ["a"], "nest:b": ["b"], "nest:c": ["c"]}
    s = TaskScheduler(many, {"a": 6.0, "b": 3.0, "c": 1.0}, random.Random(0))
    # Warm-up: every task once, the heaviest first.
    order: list[str] = []
    for _ in range(4):
        t = s.pick()
        order.append(t)
        s.update(t, 100.0, 100.0 if t != "nest:b" else 80.0, 8)
    assert order[:2] == [GLOBAL, "nest:a"] or order[:2] == ["nest:a", GLOBAL]
    assert order[2:] == ["nest:b", "nest:c"]
    # Then the task that gained (b: 20 % of 30 % of the time) gets the rounds.
    picks = [s.pick() for _ in range(20)]
    assert picks.count("nest:b") >= 15
    assert s.reports["nest:b"].gain == 20.0
    assert s.reports["nest:a"].share == 0.6


def test_inert_knobs_make_equivalent_candidates_one():
    # The cycles ignore the GEMM algorithm (a program without a GEMM): once a pair of
    # trials differing only in it measured the same, no two equivalent ones are measured.
    def cycles(v: dict[str, Any]) -> float:
        return (
            1000.0 * (1 + abs(math.log2(v["tile.nests.h.0"] / 5)))
            + v["tile.reduction"]
            + 10 * math.log2(v["tile.parallel"])
            + 3 * v["tile.nests.h.1"]
        )

    proposed: list[dict[str, Any]] = []

    def measure(values: list[dict[str, Any]], source: str) -> list[Any]:
        del source
        proposed.extend(values)
        return [_Outcome("ok", cycles(v)) for v in values]

    search = Search(_space(), seed=1)
    base = {
        "fuse.strategy": "auto",
        "tile.parallel": 2,
        "tile.reduction": 4,
        "tile.nests.h.0": 2,
        "tile.nests.h.1": 4,
        "partition.gemm": "meshgemm",
    }
    starts = [(base, "tuned"), ({**base, "partition.gemm": "cannon"}, "tuned")]
    search.run(24, measure, starts)
    assert search.inert == {"partition.gemm"}
    rest = [
        tuple(sorted((k, v) for k, v in p.items() if k != "partition.gemm"))
        for p in proposed
    ]
    assert len(rest) == len(set(rest)) + 1  # only the two start points coincide
    # A knob that changed the cycles once is never inert.
    active = Search(_space(), seed=1)
    pair = [(base, "tuned"), ({**base, "tile.reduction": 16}, "tuned")]
    active.run(2, measure, pair)
    assert active.inert == set()


def test_candidates_that_lower_to_one_program_are_measured_once():
    # The lowered program ignores the global parallel block (every nest has its own)
    # and the GEMM algorithm (no GEMM); the other knobs reach it. A candidate whose
    # program was measured is skipped, not measured, and maps to the one that was.
    def lowered(bound: Compound) -> str:
        tile = bound.to_json()["steps"][1]
        return repr((tile["reduction"], tile["nests"]["h"]))

    space = _space()
    space.lowered = lowered
    proposed: list[dict[str, Any]] = []

    def measure(values: list[dict[str, Any]], source: str) -> list[Any]:
        del source
        proposed.extend(values)
        return [_Outcome("ok", _cycles({**v, "partition.gemm": "cannon"})) for v in values]

    search = Search(space, seed=2)
    base = {"tile.parallel": 2, "tile.reduction": 4, "tile.nests.h.0": 2}
    starts = [(base, "tuned"), ({**base, "tile.parallel": 32}, "tuned")]
    out = search.run(12, measure, starts)
    programs = [lowered(space.schedule.bind(v)) for v in proposed]
    # Eight programs (2 reduction blocks x 2 feasible rows x 2 chunks): each is measured
    # once, then the space is exhausted.
    assert len(out) == len(proposed) == len(set(programs)) == 8
    # The second start is the first one's program: skipped, mapped to it.
    skipped = key_of(space.full({**base, "tile.parallel": 32}))
    assert search.equivalent[skipped] == key_of(space.full(base))
    assert search.duplicates >= 1
    # Without the lowered key the same run measures equal programs again.
    again = _space()
    proposed.clear()
    Search(again, seed=2).run(12, measure, starts)
    programs = [lowered(again.schedule.bind(v)) for v in proposed]
    assert len(programs) > len(set(programs))


def test_candidates_that_do_not_compile_are_not_measured():
    def lowered(bound: Compound) -> str:
        if bound.to_json()["steps"][1]["nests"]["h"] == [5, 8]:
            raise PlmrError("convert-loop-to-tile: the nest computing %h needs SRAM")
        return key_of(bound.to_json())

    space = _space()
    space.lowered = lowered
    proposed: list[dict[str, Any]] = []

    def measure(values: list[dict[str, Any]], source: str) -> list[Any]:
        del source
        proposed.extend(values)
        return [_Outcome("ok", _cycles(v)) for v in values]

    search = Search(space, seed=0)
    search.run(30, measure)
    assert not [v for v in proposed if (v["tile.nests.h.0"], v["tile.nests.h.1"]) == (5, 8)]
    assert search.infeasible == 0
    assert search.rejected >= 1
