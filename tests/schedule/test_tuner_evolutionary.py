"""`tune(..., sampler="evolutionary")` on real programs: start point, constraints, transfer."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from plmr.dialects.context import load_module
from plmr.dialects.printing import module_text
from plmr.schedule.db import PerfDB
from plmr.schedule.transforms import (
    Compound,
    Fuse,
    Partition,
    Tile,
    choice,
    default_schedule,
    int_range,
)
from plmr.schedule.trials import estimate
from plmr.schedule.tuner import tune

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "onnx"


def _text(name: str) -> str:
    return module_text(load_module(EXAMPLES / name))


def space(grid: tuple[int, int] = (2, 4)) -> Compound:
    # Parallel blocks of 4 and 8 do not divide the 10 logits, 3 does not divide 32.
    return Compound(
        [
            Fuse("auto"),
            Tile(
                parallel=choice(2, 4, 8, 32),
                reduction=choice(4, 16),
                nests={"MatMul_3_out": [choice(2, 3, 4, 8), choice(4, 8, 16)]},
            ),
            Partition(
                grid=list(grid),
                gemm=choice("meshgemm", "cannon", "summa"),
                gemv=choice("ktree", "pipeline"),
                k=int_range(2, 3),
            ),
        ]
    )


def default(grid: tuple[int, int] = (2, 4)) -> Compound:
    return default_schedule(grid).without("substitute")


def test_evolutionary_starts_analytic_and_never_breaks_constraints(tmp_path: Path):
    text = _text("mlp.mlir")
    with PerfDB(tmp_path / "db.sqlite") as db:
        result = tune(
            text,
            "mlp",
            space(),
            trials=12,
            db=db,
            sampler="evolutionary",
            default=default(),
        )
        records = db.trials()
    # The planner's pick first, then the analytic generator's blocks (unless the same).
    assert result.planned is not None
    assert result.planned.status == "ok"
    assert records[1].source == "tuned"
    assert records[1].schedule == result.planned.schedule
    assert result.generated is not None
    assert result.generated.status == "ok"
    if result.generated.values != result.planned.values:
        # Measured in the first round (a round measures its sources in turn).
        assert "generated" in [r.source for r in records[2:10]]
    # The analytic start chose blocks the constraints allow.
    assert result.generated.values["tile.parallel"] in (2, 32)
    assert len(result.trials) == 12
    for m in result.trials:
        assert m.values["tile.parallel"] in (2, 32)
        assert m.values["tile.nests.MatMul_3_out.0"] != 3
    infeasible = [m for m in result.trials if m.status != "ok"]
    assert len(infeasible) <= 1
    assert result.best.cycles is not None
    assert result.default.cycles is not None
    assert result.best.cycles <= result.default.cycles
    assert {t.name for t in result.tasks} == {"global", "nest:MatMul_3_out"}
    assert sum(t.trials for t in result.tasks) <= 12


def test_transfer_from_another_program_is_used(tmp_path: Path):
    with PerfDB(tmp_path / "db.sqlite") as db:
        # Another program (and grid) first: its trials and features go into the DB.
        tune(
            _text("mlp.mlir"),
            "mlp",
            space((2, 2)),
            trials=8,
            db=db,
            sampler="evolutionary",
            default=default((2, 2)),
        )
        assert len(db.features()) == 1
        text = _text("mlp.mlir") + "\n// the same model, another file\n"
        cold = tune(
            text,
            "mlp2",
            space(),
            trials=8,
            sampler="evolutionary",
            default=default(),
            seed=1,
            transfer=False,
            db=None,
        )
        warm = tune(
            text,
            "mlp2",
            space(),
            trials=8,
            db=db,
            sampler="evolutionary",
            default=default(),
            seed=1,
        )
    assert cold.transferred == 0
    assert warm.transferred >= 4
    # The first round's random candidates are ranked by the transferred model.
    assert [m.values for m in warm.trials] != [m.values for m in cold.trials]
    assert warm.rank_correlation is not None


def test_measurement_cache_reuses_trials(tmp_path: Path):
    text = _text("mlp.mlir")
    with PerfDB(tmp_path / "cache.sqlite") as cache:
        first = tune(text, "mlp", space(), trials=6, cache=cache, seed=2, default=default())
        n = len(cache.trials())
        again = tune(text, "mlp", space(), trials=6, cache=cache, seed=2, default=default())
        assert len(cache.trials()) == n  # nothing measured again
    assert [m.cycles for m in again.trials] == [m.cycles for m in first.trials]
    assert [m.status for m in again.trials] == [m.status for m in first.trials]


def test_bad_executor():
    from plmr.errors import PlmrError
    from plmr.schedule.executors import make_executor

    with pytest.raises(PlmrError, match="unknown executor"):
        make_executor("mpi")
    with pytest.raises(PlmrError, match="--address needs --executor ray"):
        make_executor("process", 1, "ray://x:1")


def test_plmr_tune_evolutionary_reports_start_model_and_tasks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    from plmr.tools.cli import main as plmr_main

    schedule = tmp_path / "space.json"
    schedule.write_text(space((2, 2)).dumps())
    code = plmr_main(
        [
            "tune",
            str(EXAMPLES / "mlp.mlir"),
            "--schedule",
            str(schedule),
            "--trials",
            "16",
            "--db",
            str(tmp_path / "perf.sqlite"),
            "--sampler",
            "evolutionary",
            "--no-progress",
            "-o",
            str(tmp_path / "best.json"),
        ]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "analytic start:" in captured.out
    # The planner's pick is measured first: trial 1, with its cycles.
    planned = re.search(
        r"planner's start: trial (\d+) of 16, ([\d,]+) cycles", captured.out
    )
    assert planned is not None, captured.out
    assert planned.group(1) == "1"
    assert float(planned.group(2).replace(",", "")) > 0
    assert "cost model: rank correlation" in captured.out
    assert "task nest:MatMul_3_out:" in captured.out
    assert "task global:" in captured.out


def test_plmr_tune_ray_without_a_cluster_is_one_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    from plmr.tools.cli import main as plmr_main

    code = plmr_main(
        [
            "tune",
            str(EXAMPLES / "mlp.mlir"),
            "--trials",
            "1",
            "--db",
            str(tmp_path / "perf.sqlite"),
            "--address",
            "ray://x:1",
        ]
    )
    captured = capsys.readouterr()
    assert code != 0
    assert "--address needs --executor ray" in captured.err


def test_planner_pick_is_the_uniform_blocking_the_planner_estimates_fastest(
    tmp_path: Path,
):
    from plmr.schedule.analytic import uniform_blocks

    text = _text("mlp.mlir")
    schedule = space()
    with PerfDB(tmp_path / "db.sqlite") as db:
        result = tune(
            text,
            "mlp",
            schedule,
            trials=2,
            db=db,
            sampler="evolutionary",
            default=default(),
        )
    assert result.planned is not None
    costs: dict[str, float] = {}
    for v in uniform_blocks(schedule):
        full = {k: v.get(k, knob.initial) for k, knob in schedule.knobs().items()}
        costs[repr(sorted(full.items()))] = estimate(text, schedule.to_json(), full)
    # 4 and 8 do not divide the 10 logits: those blockings do not compile.
    assert sum(c == float("inf") for c in costs.values()) >= 4
    picked = costs[repr(sorted(result.planned.values.items()))]
    assert picked == min(costs.values())
    # The nest's block follows the global one: its own domain's nearest value.
    nearest = {2: 2, 32: 8}[result.planned.values["tile.parallel"]]
    assert result.planned.values["tile.nests.MatMul_3_out.0"] == nearest
