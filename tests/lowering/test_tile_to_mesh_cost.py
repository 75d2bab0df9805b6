"""
The planner's estimates (`lowering/tile_to_mesh/cost.py`) against the simulated cycles: the
allreduces of a nest and the all-gathers of a re-layout are timed as the runtime times
them (`segments.line_cycles_of`), not as a tree of whole-tensor messages.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

from plmr.dialects.context import make_context, parse_module
from plmr.lowering.tile_to_mesh import NestPlan, memo, parse_options
from plmr.lowering.tile_to_mesh.cost import CostModel
from plmr.models.explain import explain
from plmr.models.llama import ProgramBuilder, get_config
from plmr.models.nests import count_ops
from plmr.passes.pipeline import CompileOptions, compile_module
from plmr.runtime.mesh_machine import run_mesh
from plmr.runtime.running import random_inputs, run_function, select_function
from plmr.target.device import get_device


def _estimated_and_simulated(grid: tuple[int, int], tokens: int) -> tuple[float, float]:
    config = get_config("tiny")
    text = ProgramBuilder(config, None).decode(tokens=tokens)
    opts = CompileOptions(grid=grid, substitute=False, fit_tiles=True, decode_rows=tokens)
    plans: list = []  # pyright: ignore[reportMissingTypeArgument, reportUnknownVariableType]
    module = compile_module(make_context(), parse_module(text), opts, plans)
    rows = [r for r in explain(module, plans, get_device("wse2")) if r.estimate]
    return sum(r.estimate or 0.0 for r in rows), sum(r.cycles for r in rows)


def test_estimate_of_a_k_token_step_follows_the_simulation():
    """
    The 2-token decode step of `tiny` re-lays its rows between nests (its residual,
    `[2, 64]`, split over both axes, read whole): the planner's total is within 30 % of
    the simulated total (the whole-tensor tree estimate was 2.6x it on 16x16).
    """
    estimated, simulated = _estimated_and_simulated((16, 16), 2)
    assert 0.7 * simulated <= estimated <= 1.3 * simulated, (estimated, simulated)


SHORT_SPLITS = (
    Path(__file__).parents[1]
    / "filecheck"
    / "lowering"
    / "convert-tile-to-mesh-short-splits.mlir"
)


def _compile_short_splits() -> tuple[ModuleOp, ModuleOp, list[NestPlan]]:
    module = parse_module(SHORT_SPLITS.read_text())
    opts = CompileOptions(grid=(4, 4), tile_sizes=(16, 16), substitute=False)
    plans: list[NestPlan] = []
    compiled = compile_module(make_context(), module.clone(), opts, plans)
    return module, compiled, plans


def _simulated(compiled: ModuleOp, plans: list[NestPlan]) -> float:
    return sum(r.cycles for r in explain(compiled, plans, get_device("wse2")))


@pytest.mark.parametrize("seed", [0, 1])
def test_a_short_dim_kept_whole_computes_the_same(seed: int):
    """The two heads' attention, compiled, against the graph program on random inputs."""
    module, compiled, _ = _compile_short_splits()
    fn = select_function(module, None)
    inputs = random_inputs(fn, seed)
    want = run_function(module, fn, inputs)
    got, _ = run_mesh(compiled, inputs, mode="functional")
    np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-5)


def test_ranking_by_the_readers_gathers_is_faster(monkeypatch: pytest.MonkeyPatch):
    """
    The heads split over y by the softmax's nests (their readers' gathers left out of
    the ranking) against the heads kept whole: more collectives and more simulated cycles.
    """
    with memo.disabled():
        _, kept, kept_plans = _compile_short_splits()
        monkeypatch.setattr(CostModel, "reader_gathers", lambda self, m: 0.0)  # pyright: ignore[reportUnknownLambdaType, reportUnknownArgumentType]
        _, split, split_plans = _compile_short_splits()
    kept_ops, split_ops = count_ops(kept), count_ops(split)
    assert (
        kept_ops.allreduces + kept_ops.allgathers
        < split_ops.allreduces + split_ops.allgathers
    )
    assert _simulated(kept, kept_plans) < _simulated(split, split_plans)


@pytest.mark.parametrize(
    ("rows", "fit", "moves"), [(24, False, True), (26, False, False), (26, True, True)]
)
def test_a_diagonal_move_takes_an_uneven_split_with_fit_tiles(
    rows: int, fit: bool, moves: bool
):
    """
    Rows split over x, wanted over y, on 6x6: each PE's block is on the diagonal of its
    line. With `fit_tiles` 26 rows split unevenly too (both axes cut them in blocks of
    5, the last PEs' padded), without it only an even split moves so.
    """
    from xdsl.dialects.builtin import Float32Type, TensorType
    from xdsl.utils.test_value import create_ssa_value

    from plmr.lowering.tile_to_mesh.cost import diagonal_move

    src = create_ssa_value(TensorType(Float32Type(), [rows, 64]))
    opts = parse_options((6, 6), "wse2", "meshgemm", "ktree", 2, fit_tiles=fit)
    assert diagonal_move(("x", "-"), ("y", "-"), 0, opts, src) == moves
