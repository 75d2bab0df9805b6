"""The tuner and the performance database together, and `plmr tune` / `compile --db`."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from plmr.dialects.context import load_module
from plmr.dialects.printing import module_text
from plmr.errors import PlmrError
from plmr.schedule.db import PerfDB, program_hash
from plmr.schedule.transforms import (
    Compound,
    Fuse,
    Partition,
    Tile,
    choice,
    default_schedule,
    int_range,
)
from plmr.schedule.trials import Measurement, check_functional, evaluate
from plmr.schedule.tuner import tune
from plmr.tools.cli import main as plmr_main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
MLP = EXAMPLES / "onnx" / "mlp.mlir"


@pytest.fixture(scope="module")
def mlp_text() -> str:
    return module_text(load_module(MLP))


def _space(grid: tuple[int, int] = (2, 4)) -> Compound:
    # Parallel blocks of 4 and 8 do not divide the 10 logits: those candidates are
    # infeasible and must be skipped with a reason.
    return Compound(
        [
            Fuse("auto"),
            Tile(parallel=choice(2, 4, 8, 32), reduction=choice(4, 16)),
            Partition(
                grid=list(grid),
                gemm=choice("meshgemm", "cannon", "summa"),
                gemv=choice("ktree", "pipeline"),
                k=int_range(2, 3),
            ),
        ]
    )


def _default(grid: tuple[int, int] = (2, 4)) -> Compound:
    return default_schedule(grid).without("substitute")


def test_tuning_is_reproducible_and_never_worse(mlp_text: str, tmp_path: Path):
    runs: list[tuple[dict[str, object], float | None, list[str]]] = []
    for i, workers in enumerate((1, 2)):
        with PerfDB(tmp_path / f"run{i}.sqlite") as db:
            result = tune(
                mlp_text,
                "mlp.mlir",
                _space(),
                trials=10,
                db=db,
                seed=7,
                workers=workers,
                default=_default(),
            )
            records = db.trials()
        # The DB holds the default and every trial, feasible or not.
        assert len(records) == 11
        assert [r.source for r in records] == ["default"] + ["tuned"] * 10
        assert {r.program_hash for r in records} == {program_hash(mlp_text)}
        assert result.best.cycles is not None
        assert result.default.cycles is not None
        assert result.best.cycles <= result.default.cycles
        infeasible = [r for r in records if r.status == "infeasible"]
        assert infeasible
        assert all("does not divide" in r.reason for r in infeasible)
        runs.append(
            (
                result.best.values,
                result.best.cycles,
                [json.dumps(m.values) for m in result.trials],
            )
        )
    # Same seed: the same candidates, the same measurements, the same winner.
    assert runs[0] == runs[1]


def test_infeasible_candidates_are_skipped_with_reasons(mlp_text: str):
    m = evaluate(mlp_text, _space().to_json(), {"tile.parallel": 8, "tile.reduction": 4})
    assert m.status == "infeasible"
    assert m.reason == "tile: 8 does not divide the extent 10 of a parallel loop of %logits"
    too_small = Compound(
        [Fuse("auto"), Tile(), Partition(grid=[1, 1], device="wse2:sram_kib=1")]
    )
    m = evaluate(mlp_text, too_small.to_json(), {})
    assert m.status == "infeasible"
    assert "SRAM" in m.reason


def test_grid_sampler_walks_the_space_in_order(mlp_text: str):
    space = Compound(
        [Fuse("auto"), Tile(parallel=choice(2, 32), reduction=16), Partition(grid=[2, 2])]
    )
    result = tune(
        mlp_text, "mlp", space, trials=5, sampler="grid", default=_default((2, 2))
    )
    assert [m.values for m in result.trials] == [
        {"tile.parallel": 2},
        {"tile.parallel": 32},
    ]


def test_resume_starts_from_the_best_known(mlp_text: str, tmp_path: Path):
    seen: list[Measurement] = []
    with PerfDB(tmp_path / "db.sqlite") as db:
        first = tune(mlp_text, "mlp", _space(), trials=6, db=db, seed=1, default=_default())
        again = tune(
            mlp_text,
            "mlp",
            _space(),
            trials=0,
            db=db,
            resume=True,
            default=_default(),
            progress=seen.append,
        )
        assert len(db.trials()) == 7 + 2
    assert len(seen) == 2  # the default, then the best known
    assert again.best.cycles == first.best.cycles


def test_winner_is_correct(mlp_text: str):
    best = _space().bind({"tile.parallel": 2, "partition.gemm": "summa"})
    assert check_functional(mlp_text, best, seed=3) < 1e-5


def test_bad_tuner_arguments(mlp_text: str):
    with pytest.raises(PlmrError, match="unknown sampler"):
        tune(mlp_text, "mlp", _space(), trials=1, sampler="anneal")
    with pytest.raises(PlmrError, match="--workers must be >= 1"):
        tune(mlp_text, "mlp", _space(), trials=1, workers=0)


@pytest.mark.skipif(importlib.util.find_spec("optuna") is None, reason="needs optuna")
def test_tpe_sampler(mlp_text: str):
    result = tune(
        mlp_text, "mlp", _space(), trials=6, sampler="tpe", seed=2, default=_default()
    )
    assert len(result.trials) == 6
    assert result.best.cycles is not None


def test_tpe_without_optuna_is_a_clear_error(
    mlp_text: str, monkeypatch: pytest.MonkeyPatch
):
    import builtins

    real_import = builtins.__import__

    def no_optuna(name: str, *args: object, **kwargs: object) -> object:
        if name == "optuna":
            raise ImportError("no optuna")
        return real_import(name, *args, **kwargs)  # pyright: ignore[reportArgumentType]

    monkeypatch.setattr(builtins, "__import__", no_optuna)
    with pytest.raises(PlmrError, match=r"needs Optuna: .*\[tune\]"):
        tune(mlp_text, "mlp", _space(), trials=1, sampler="tpe", default=_default())


def test_plmr_tune_and_compile_with_schedule(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    db = tmp_path / "perf.sqlite"
    out = tmp_path / "best.json"
    space = tmp_path / "space.json"
    space.write_text(_space((2, 2)).dumps())
    code = plmr_main(
        [
            "tune",
            str(MLP),
            "--schedule",
            str(space),
            "--trials",
            "4",
            "--db",
            str(db),
            "--seed",
            "3",
            "--no-progress",
            "-o",
            str(out),
        ]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "best:" in captured.out
    assert "functional check: max error" in captured.out
    best = Compound.loads(out.read_text())
    assert best.knobs() == {}
    # A hand-written (here: the tuned) schedule compiles and is recorded as manual.
    mesh_out = tmp_path / "mlp_mesh.mlir"
    code = plmr_main(
        ["compile", str(MLP), "--schedule", str(out), "--db", str(db), "-o", str(mesh_out)]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "recorded trial" in captured.err
    assert "mesh.program" in mesh_out.read_text()
    with PerfDB(db) as perf:
        sources = [r.source for r in perf.trials()]
    assert sources.count("default") == 1
    assert sources.count("tuned") == 4
    assert sources[-1] == "manual"
    code = plmr_main(["db", "best", "--db", str(db)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert json.loads(captured.out)["plmr_schedule"] == 1


def test_bad_schedule_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    bad = tmp_path / "bad.json"
    bad.write_text('{"steps": [{"transform": "unroll"}]}')
    code = plmr_main(["compile", str(MLP), "--schedule", str(bad)])
    err = capsys.readouterr().err
    assert code == 1
    assert err.count("\n") == 1
    assert err.startswith("error: unknown transform 'unroll'")


def test_bad_parameter_values_are_infeasible_not_crashes(mlp_text: str):
    for step in (
        {"transform": "tile", "parallel": "x", "reduction": 16, "nests": {}},
        {"transform": "tile", "parallel": "auto", "reduction": "auto", "nests": {"o": 16}},
        {"transform": "partition", "grid": [2, 2], "k": "a"},
        {"transform": "substitute", "enabled": True, "alpha": "x", "budget": 5},
    ):
        schedule = {"plmr_schedule": 1, "steps": [step]}
        m = evaluate(mlp_text, schedule, {})
        assert m.status == "infeasible"
        assert "must be" in m.reason or "needs [P, R]" in m.reason


def test_random_sampler_stops_when_the_space_is_exhausted(mlp_text: str):
    space = Compound(
        [Fuse("auto"), Tile(parallel=choice(2, 32), reduction=16), Partition(grid=[2, 2])]
    )
    result = tune(mlp_text, "mlp", space, trials=10, default=_default((2, 2)))
    assert len(result.trials) == 2
    with pytest.raises(PlmrError, match="values must differ"):
        choice(2, 2)
