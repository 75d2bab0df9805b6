"""Schedules as data: knobs, transforms, composition, JSON, pipelines and constraints."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from xdsl.passes import PassPipeline

from plmr.dialects import tile
from plmr.dialects.context import load_module, make_context
from plmr.dialects.printing import module_text
from plmr.errors import PlmrError
from plmr.passes import get_all_passes
from plmr.passes.pipeline import CompileOptions, PlmrCompilePass, compile_module
from plmr.runtime.mesh_machine import run_mesh
from plmr.runtime.running import random_inputs, run_function, select_function
from plmr.schedule.transforms import (
    Compound,
    EliminateTransposes,
    Fuse,
    Knob,
    Partition,
    ProgramInfo,
    Substitute,
    Tile,
    choice,
    default_schedule,
    int_range,
    pow2,
    tunable_schedule,
)
from plmr.schedule.trials import compile_schedule

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_knob_domains():
    assert choice("a", "b").domain() == ["a", "b"]
    assert int_range(2, 4).domain() == [2, 3, 4]
    assert pow2(2, 32).domain() == [2, 4, 8, 16, 32]
    assert pow2(2, 32, default=8).initial == 8
    assert choice(3, 1).initial == 3


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: pow2(3, 16), "powers of two"),
        (lambda: int_range(5, 2), "lo <= hi"),
        (lambda: choice(), "at least one value"),
        (lambda: choice(1, 2, default=3), "not in its domain"),
        (lambda: Knob("float"), "unknown knob kind"),
    ],
)
def test_bad_knobs(make, message: str):  # pyright: ignore[reportMissingParameterType, reportUnknownParameterType]
    with pytest.raises(PlmrError, match=message):
        make()


def test_json_round_trip_with_knobs():
    s = Compound(
        [
            EliminateTransposes(),
            Substitute(budget=20),
            Fuse(choice("auto", "rolling")),
            Tile(
                parallel=pow2(2, 32, default=8),
                reduction=16,
                nests={"o": [int_range(2, 4), 8]},
            ),
            Partition(grid=[2, 4], gemm=choice("meshgemm", "cannon"), k=int_range(2, 3)),
        ]
    )
    data = json.loads(json.dumps(s.to_json()))
    t = Compound.from_json(data)
    assert t == s
    assert t.to_json() == s.to_json()
    assert set(t.knobs()) == {
        "fuse.strategy",
        "tile.parallel",
        "tile.nests.o.0",
        "partition.gemm",
        "partition.k",
    }
    assert Compound.loads(s.dumps()) == s


def test_compounds_flatten_and_edit_piecewise():
    tiling = Compound([Tile(parallel=8, reduction=4), Fuse("rolling")])
    s = Compound([tiling, Partition(grid=[4, 4])])
    assert [t.kind for t in s.steps] == ["tile", "fuse", "partition"]
    swapped = s.replace(Partition(grid=[8, 8], gemm="summa"))
    # The partition changed; the tiling and fusion did not.
    assert swapped.get("tile") == s.get("tile")
    assert swapped.get("fuse") == s.get("fuse")
    assert swapped.compile_options().grid == (8, 8)
    assert swapped.compile_options().tile_sizes == (8, 4)
    with pytest.raises(PlmrError, match="repeated: tile"):
        Compound([Tile(), Tile()])


def test_bind_and_domains():
    s = tunable_schedule((2, 2))
    bound = s.bind({"tile.parallel": 8, "partition.gemm": "summa"})
    assert bound.knobs() == {}
    opts = bound.compile_options()
    assert opts.tile_sizes == (8, 16)
    assert opts.gemm == "summa"
    with pytest.raises(PlmrError, match="outside its domain"):
        s.bind({"tile.parallel": 7})
    with pytest.raises(PlmrError, match="no knob"):
        s.bind({"tile.nothing": 1})


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], "JSON object"),
        ({"plmr_schedule": 9, "steps": []}, "not supported"),
        ({"steps": [{"transform": "unroll"}]}, "unknown transform 'unroll'"),
        ({"steps": [{"transform": "tile", "size": 4}]}, "unknown parameter"),
        (
            {"steps": [{"transform": "fuse", "strategy": {"knob": "choice"}}]},
            "list of values",
        ),
    ],
)
def test_bad_schedules(data: object, message: str):
    with pytest.raises(PlmrError, match=message):
        Compound.from_json(data)


def test_constraints_give_reasons():
    info = ProgramInfo({"h": ((4, 32), (16,)), "logits": ((4, 10), (32,))})
    assert Tile(parallel=2, reduction=16).check(info) is None
    assert "does not divide the extent 10" in (
        Tile(parallel=4, reduction=16).check(info) or ""
    )
    assert Tile(parallel=2, reduction=2, nests={"h": [2, 32]}).check(info) is None
    reason = Tile(parallel=2, reduction=2, nests={"h": [2, 3]}).check(info)
    assert reason == "tile: 3 does not divide the reduction extent 16 of %h"
    missing = Tile(nests={"attn": [4, 4]}).check(info)
    assert missing == "tile: no nest computes %attn here (nests: h, logits)"
    assert "does not fit wse2" in (Partition(grid=[800, 800]).check(info) or "")
    assert "unknown gemm" in (Partition(gemm="fast").check(info) or "")


def test_pipeline_spec_runs_like_compile():
    """to_pipeline() is a pass pipeline that plmr-opt / xdsl-opt can run."""
    schedule = Compound(
        [Fuse("auto"), Tile(parallel=2, reduction=4), Partition(grid=[2, 4], gemm="cannon")]
    )
    spec = schedule.to_pipeline()
    assert "taso-substitute" not in spec
    assert "convert-loop-to-tile{tile-sizes=2,4}" in spec
    ctx = make_context()
    module = load_module(EXAMPLES / "onnx/mlp.mlir", ctx)
    text = module_text(module)
    fn = select_function(module, None)
    inputs = random_inputs(fn, 3)
    want = run_function(module, fn, inputs)
    PassPipeline.parse_spec(get_all_passes(), spec).apply(ctx, module)
    got, _ = run_mesh(module, inputs, mode="functional")
    np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-5)
    # The same schedule through the compile driver gives the same program.
    direct = compile_schedule(text, schedule)
    assert module_text(direct) == module_text(module)


def test_default_schedule_is_plmr_compile():
    module = load_module(EXAMPLES / "onnx/mlp.mlir")
    text = module_text(module)
    schedule = default_schedule((2, 2)).replace(Substitute(enabled=False))
    # The defaults are plmr compile's defaults.
    assert schedule.compile_options() == CompileOptions(grid=(2, 2), substitute=False)
    spec = schedule.to_pipeline()
    (compile_pass,) = PassPipeline.parse_spec(get_all_passes(), spec).passes
    assert isinstance(compile_pass, PlmrCompilePass)
    assert compile_pass.options() == schedule.compile_options()
    # Per-nest blocks survive into the spec.
    tiled = schedule.replace(Tile(nests={"logits": [2, 8]}))
    (tiled_pass,) = PassPipeline.parse_spec(get_all_passes(), tiled.to_pipeline()).passes
    assert isinstance(tiled_pass, PlmrCompilePass)
    assert tiled_pass.options().nest_tile_sizes == (("logits", 2, 8),)
    ours = compile_schedule(text, schedule)
    theirs = compile_module(make_context(), module, schedule.compile_options())
    assert module_text(ours) == module_text(theirs)


def test_per_nest_tiles_by_name_survive_other_edits():
    """A per-nest blocking names the tensor, so swapping the partition keeps it valid."""
    module = load_module(EXAMPLES / "onnx/mlp.mlir")
    text = module_text(module)
    schedule = Compound(
        [
            Fuse("auto"),
            Tile(parallel=2, reduction=4, nests={"MatMul_3_out": [2, 8]}),
            Partition(grid=[2, 2]),
        ]
    )
    for grid in ([2, 2], [4, 2]):
        compiled = compile_schedule(text, schedule.replace(Partition(grid=grid)))
        steps = {
            op.step.value.data
            for op in compiled.walk()
            if isinstance(op, tile.ForOp) and op.kind.data == tile.LoopKind.REDUCTION
        }
        # %MatMul_3_out reduces in blocks of 8, the other nests in blocks of 4.
        assert {4, 8} <= steps, steps
    bad = schedule.replace(Tile(parallel=2, reduction=4, nests={"gone": [2, 8]}))
    with pytest.raises(PlmrError, match="no nest computes %gone"):
        compile_schedule(text, bad)


def test_tuned_transformer_block_example_is_correct():
    """The tuned schedule in examples/ loads, has no knobs left and computes correctly."""
    from plmr.schedule.trials import check_functional

    schedule = Compound.loads(
        (EXAMPLES / "schedules/transformer_block.tuned.json").read_text()
    )
    assert schedule.knobs() == {}
    text = module_text(load_module(EXAMPLES / "onnx/transformer_block.mlir"))
    assert check_functional(text, schedule, seed=5) < 1e-4
