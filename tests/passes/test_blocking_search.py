"""
The blocking search of `plmr compile` (`passes/blocking_search.py`) with bounded, priced
trials: a trial is priced without emitting the nests the memo knows
(`lower_module(price_only=True)`), stops once its nests cost what the cheapest trial so
far costs (`lower_module(bound=...)`), and the search keeps the blocking, program and
plans that lowering every trial in full keeps (`_search_each`).
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import pytest
from xdsl.dialects.builtin import ModuleOp

from plmr.dialects.context import load_module, make_context
from plmr.dialects.printing import module_text
from plmr.errors import PlmrError
from plmr.lowering import tile_to_mesh
from plmr.lowering.loop_to_tile import ConvertLoopToTilePass
from plmr.lowering.tile_to_mesh import OverBound, lower_module, memo, parse_options
from plmr.passes import blocking_search
from plmr.passes.blocking_search import (
    _search_each,  # pyright: ignore[reportPrivateUsage]
    blocking_trials,
    search_blocking,
    spread_choices,
)
from plmr.passes.pipeline import (
    CompileOptions,
    _check_options,  # pyright: ignore[reportPrivateUsage]
    default_gemv,
    to_loop_level,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

CASES = [
    ("attention/decode_gqa.mlir", (4, 4)),
    ("onnx/attention.mlir", (4, 4)),
    ("onnx/mlp.mlir", (4, 4)),
]


def _loop_level(example: str, grid: tuple[int, int]) -> tuple[ModuleOp, CompileOptions]:
    ctx = make_context()
    module = load_module(EXAMPLES / example, ctx)
    assert isinstance(module, ModuleOp)
    opts = CompileOptions(grid=grid, substitute=False)
    to_loop_level(ctx, module, opts)
    return module, opts


def _record_stops(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Makes the search's `lower_module` record the cost at which a trial stops."""
    stopped: list[float] = []

    def counting(*args: object, **kwargs: object) -> float:
        try:
            return lower_module(*args, **kwargs)  # pyright: ignore[reportArgumentType]
        except OverBound as e:
            stopped.append(e.args[0])
            raise

    monkeypatch.setattr(tile_to_mesh, "lower_module", counting)
    return stopped


@pytest.mark.parametrize(("example", "grid"), CASES)
def test_bounded_trials_keep_the_blocking_of_full_trials(
    example: str, grid: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    module, opts = _loop_level(example, grid)
    ctx, mesh_opts = make_context(), _check_options(opts)
    stopped = _record_stops(monkeypatch)
    memo.clear()
    bounded = search_blocking(ctx, module, opts, mesh_opts)

    def unbounded(*args: object, bound: float = math.inf, **kwargs: object) -> float:
        return lower_module(*args, **kwargs)  # pyright: ignore[reportArgumentType]

    monkeypatch.setattr(tile_to_mesh, "lower_module", unbounded)
    memo.clear()
    full = search_blocking(ctx, module, opts, mesh_opts)
    assert (bounded.sizes, bounded.bands, bounded.spread) == (
        full.sizes,
        full.bands,
        full.spread,
    )
    assert bounded.cost == full.cost
    assert module_text(bounded.module) == module_text(full.module)
    assert [(p.name, p.mapping(), p.estimate) for p in bounded.plans] == [
        (p.name, p.mapping(), p.estimate) for p in full.plans
    ]
    # Every stopped trial had cost at least the kept one's when it stopped.
    assert all(cost >= full.cost for cost in stopped)


@pytest.mark.parametrize(("example", "grid"), CASES)
def test_priced_trials_keep_what_full_lowerings_keep(
    example: str, grid: tuple[int, int]
) -> None:
    module, opts = _loop_level(example, grid)
    ctx, mesh_opts = make_context(), _check_options(opts)
    memo.clear()
    priced = search_blocking(ctx, module, opts, mesh_opts)
    memo.clear()
    trials = blocking_trials(module, opts)
    full = _search_each(ctx, module, opts, mesh_opts, trials, spread_choices(opts))
    assert (priced.sizes, priced.bands, priced.spread, priced.cost) == (
        full.sizes,
        full.bands,
        full.spread,
        full.cost,
    )
    assert module_text(priced.module) == module_text(full.module)
    assert [(p.name, p.mapping(), p.estimate) for p in priced.plans] == [
        (p.name, p.mapping(), p.estimate) for p in full.plans
    ]


def test_a_cheapest_trial_that_does_not_route_falls_back_to_full_trials(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    module, opts = _loop_level("onnx/attention.mlir", (4, 4))
    ctx, mesh_opts = make_context(), _check_options(opts)
    cheapest = search_blocking(ctx, module, opts, mesh_opts)
    route = blocking_search.route
    refused: list[str] = []

    def refuse_cheapest(ctx: Any, trial: ModuleOp, opts: CompileOptions) -> None:
        # The first program routed is the cheapest blocking's: it (and every trial
        # that lowers to it again) needs more colors than the device routes.
        text = module_text(trial)
        if not refused or text == refused[0]:
            refused.append(text)
            raise PlmrError("mesh-route: no colors left (a test's refusal)")
        route(ctx, trial, opts)

    monkeypatch.setattr(blocking_search, "route", refuse_cheapest)
    kept = search_blocking(ctx, module, opts, mesh_opts)
    assert len(refused) >= 2  # priced, then again in the full trials
    assert (kept.sizes, kept.bands) != (cheapest.sizes, cheapest.bands)
    assert kept.cost >= cheapest.cost
    full = _search_each(
        ctx, module, opts, mesh_opts, blocking_trials(module, opts), spread_choices(opts)
    )
    assert (kept.sizes, kept.bands, kept.cost) == (full.sizes, full.bands, full.cost)


def test_some_trials_stop_at_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    stopped = _record_stops(monkeypatch)
    module, opts = _loop_level("onnx/attention.mlir", (4, 4))
    search_blocking(make_context(), module, opts, _check_options(opts))
    assert stopped


def test_a_bounded_lowering_stops_only_at_the_bound() -> None:
    module, _ = _loop_level("graph/decoder_block.mlir", (2, 2))
    ctx = make_context()
    options = parse_options((2, 2), "wse2", "meshgemm", "ktree", 2)
    tiled = module.clone()
    ConvertLoopToTilePass(tile_sizes=(8, 8)).apply(ctx, tiled)
    full = lower_module(tiled.clone(), options)
    assert math.isfinite(full)
    assert full > 0
    # A bound above the estimate changes nothing; at or below it, the lowering stops
    # with what the nests lowered so far cost, at least the bound.
    above = tiled.clone()
    assert lower_module(above, options, bound=full * 1.01) == full
    assert module_text(above).count("mesh.program") >= 1
    for bound in (full, full / 2, 0.0):
        with pytest.raises(OverBound) as info:
            lower_module(tiled.clone(), options, bound=bound)
        assert bound <= info.value.args[0] <= full
    # A refusal is still the refusal, not a stop.
    assert not issubclass(OverBound, PlmrError)


def test_auto_allreduces_keep_the_blocking_ranked_with_k_trees() -> None:
    """
    `gemv = auto`: the blockings are ranked with K-trees of K = 2, and the one kept is
    lowered with each line's K-tree, which prices no higher (the default is one of the
    trees it times).
    """
    module, opts = _loop_level("attention/decode_gqa.mlir", (9, 9))
    ctx = make_context()
    ktree = search_blocking(ctx, module, opts, _check_options(opts))
    auto_opts = dataclasses.replace(opts, gemv="auto")
    auto = search_blocking(ctx, module, auto_opts, _check_options(auto_opts))
    assert (auto.sizes, auto.bands, auto.spread) == (ktree.sizes, ktree.bands, ktree.spread)
    assert auto.cost <= ktree.cost
    fixed = dataclasses.replace(auto_opts, tile_sizes=auto.sizes)
    alone = search_blocking(ctx, module, fixed, _check_options(fixed))
    assert module_text(alone.module) == module_text(auto.module)


def test_large_grids_take_auto_allreduces_by_default() -> None:
    assert default_gemv((8, 8)) == "ktree"
    assert default_gemv((4, 17)) == "auto"
    assert default_gemv((420, 420)) == "auto"


def test_auto_falls_back_to_the_ranked_blocking_when_its_trees_do_not_lower(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each line's K-trees failing (SRAM, colors), the K = 2 blocking stands."""
    module, opts = _loop_level("attention/decode_gqa.mlir", (9, 9))
    ctx = make_context()
    search = blocking_search._search  # pyright: ignore[reportPrivateUsage]

    def failing_auto(*args: Any, **kwargs: Any) -> Any:
        if args[3].gemv == "auto":
            raise PlmrError("each line's K-trees need more colors than the device has")
        return search(*args, **kwargs)

    monkeypatch.setattr(blocking_search, "_search", failing_auto)
    auto_opts = dataclasses.replace(opts, gemv="auto")
    kept = search_blocking(ctx, module, auto_opts, _check_options(auto_opts))
    ktree = search_blocking(ctx, module, opts, _check_options(opts))
    assert (kept.sizes, kept.bands, kept.cost) == (ktree.sizes, ktree.bands, ktree.cost)


@pytest.mark.parametrize(
    ("example", "fit"),
    [
        ("onnx/attention.mlir", False),
        ("onnx/attention.mlir", True),
        ("onnx/mlp.mlir", True),
    ],
)
def test_a_trial_blocked_as_an_earlier_one_is_priced_once(
    example: str, fit: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # On 6x6 with `fit_tiles` most (P, R) trials clamp to the same blocks.
    ctx = make_context()
    module = load_module(EXAMPLES / example, ctx)
    assert isinstance(module, ModuleOp)
    opts = CompileOptions(grid=(6, 6), substitute=False, fit_tiles=fit)
    to_loop_level(ctx, module, opts)
    ctx, mesh_opts = make_context(), _check_options(opts)
    texts: set[str] = set()
    for sizes, bands in blocking_trials(module, opts):
        trial = module.clone()
        try:
            blocking_search.loop_to_tile_pass(opts, sizes, bands).apply(ctx, trial)
        except PlmrError:
            continue  # a block that does not divide: not priced
        texts.add(module_text(trial))
    priced: list[str] = []

    def recording(trial: ModuleOp, *args: Any, **kwargs: Any) -> float:
        if kwargs.get("price_only"):
            priced.append(module_text(trial))
        return lower_module(trial, *args, **kwargs)

    monkeypatch.setattr(tile_to_mesh, "lower_module", recording)
    memo.clear()
    search_blocking(ctx, module, opts, mesh_opts)
    # Every distinct tile program is priced once, none twice.
    assert len(priced) == len(set(priced)) == len(texts)
    if fit:
        assert len(texts) < len(blocking_trials(module, opts))


def test_a_fallback_for_a_route_out_of_sram_goes_on_to_uneven_spreads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Every trial blocked with dimensions kept whole is refused by the limits check for
    # SRAM: the exhaustive search goes on to the uneven spreads, and so does the priced
    # search's fallback.
    module, opts = _loop_level("onnx/mlp.mlir", (4, 4))
    opts = dataclasses.replace(opts, fit_tiles=True)
    ctx, mesh_opts = make_context(), _check_options(opts)
    state = {"spread": False}
    make_pass, route = blocking_search.loop_to_tile_pass, blocking_search.route

    def tracking(
        opts: CompileOptions, sizes: Any, bands: bool, spread: bool = False
    ) -> Any:
        state["spread"] = spread
        return make_pass(opts, sizes, bands, spread)

    def refuse_whole(ctx: Any, trial: ModuleOp, opts: CompileOptions) -> None:
        if not state["spread"]:
            raise PlmrError("mesh-check-limits: a PE needs 99999 B of SRAM (a test's)")
        route(ctx, trial, opts)

    monkeypatch.setattr(blocking_search, "loop_to_tile_pass", tracking)
    monkeypatch.setattr(blocking_search, "route", refuse_whole)
    trials = blocking_trials(module, opts)
    memo.clear()
    full = _search_each(ctx, module, opts, mesh_opts, trials, spread_choices(opts))
    memo.clear()
    kept = search_blocking(ctx, module, opts, mesh_opts)
    assert full.spread
    assert (kept.sizes, kept.bands, kept.spread, kept.cost) == (
        full.sizes,
        full.bands,
        full.spread,
        full.cost,
    )
