"""
`plmr compile` of a decoder whose layers repeat: one layer program, run once per layer
with that layer's weights, equal to the reference semantics; the IR does not grow with
depth but by the weights' references; timing runs the layer program once.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from xdsl.dialects import arith, func
from xdsl.dialects.builtin import ModuleOp

from plmr.dialects import mesh
from plmr.dialects.context import make_context, parse_module
from plmr.dialects.graph_weights import weight_ref
from plmr.errors import PassOptionError, PlmrError
from plmr.models.llama_onnx import LlamaOnnxConfig, write_llama_onnx
from plmr.passes.pipeline import CompileOptions, compile_module
from plmr.runtime.running import random_inputs, run_entry, run_function, select_entry

OPTIONS = CompileOptions(
    grid=(2, 2), outline_layers=True, substitute=False, tile_sizes=(8, 8), fit_tiles=True
)


def width32(layers: int) -> LlamaOnnxConfig:
    """A LLaMA decoder of `layers` layers, width 32."""
    return LlamaOnnxConfig(
        hidden=32, heads=4, kv_heads=2, ffn=64, vocab=64, seq=8, layers=layers, seed=layers
    )


def runs(module: ModuleOp) -> list[mesh.RunOp]:
    return [op for op in module.walk() if isinstance(op, mesh.RunOp)]


def programs(module: ModuleOp) -> dict[str, mesh.ProgramOp]:
    return {p.sym_name.data: p for p in module.ops if isinstance(p, mesh.ProgramOp)}


@pytest.fixture(scope="module")
def compiled(
    tmp_path_factory: pytest.TempPathFactory, llama_export: Any
) -> dict[int, tuple[ModuleOp, ModuleOp]]:
    """Source and compiled module of the 2- and 4-layer exports."""
    out: dict[int, tuple[ModuleOp, ModuleOp]] = {}
    for layers in (2, 4):
        tmp = tmp_path_factory.mktemp(f"l{layers}")
        source = llama_export(tmp, width32(layers))
        out[layers] = (source, compile_module(make_context(), source.clone(), OPTIONS))
    return out


@pytest.mark.parametrize("layers", [2, 4])
def test_compiled_layers_equal_the_reference(
    compiled: dict[int, tuple[ModuleOp, ModuleOp]], layers: int
):
    source, module = compiled[layers]
    assert set(programs(module)) == {"main.pre", "main.layer", "main.post"}
    assert [r.callee.string_value() for r in runs(module)] == [
        "main.pre",
        *["main.layer"] * layers,
        "main.post",
    ]
    assert [int(r.attributes["plmr.layer"].value.data) for r in runs(module)[1:-1]] == list(
        range(layers)
    )
    src_fn = select_entry(source, None)
    fn = select_entry(module, None)
    assert isinstance(src_fn, func.FuncOp)
    assert isinstance(fn, func.FuncOp)
    for seed in range(2):
        inputs = random_inputs(src_fn, seed)
        want = run_function(source, src_fn, inputs)
        got, report = run_entry(module, fn, inputs)
        assert report is not None
        assert report.cycles > 0
        scale = float(np.abs(want[0]).max())
        assert float(np.abs(got[0] - want[0]).max()) <= 1e-5 * scale


@pytest.mark.parametrize("layers", [2, 4])
def test_layered_equals_the_unlayered_compile(
    compiled: dict[int, tuple[ModuleOp, ModuleOp]], layers: int
):
    """Differential: the layer programs give the whole program's outputs."""
    source, module = compiled[layers]
    whole = compile_module(
        make_context(),
        source.clone(),
        CompileOptions(grid=(2, 2), substitute=False, tile_sizes=(8, 8), fit_tiles=True),
    )
    assert not runs(whole)
    fn, whole_fn = select_entry(module, None), select_entry(whole, None)
    for seed in (3, 4):
        inputs = random_inputs(fn, seed)
        got, layered = run_entry(module, fn, inputs)
        want, one = run_entry(whole, whole_fn, inputs)
        assert layered is not None
        assert one is not None
        scale = float(np.abs(want[0]).max())
        assert float(np.abs(got[0] - want[0]).max()) <= 1e-5 * scale
        # The same host traffic: the hidden state never leaves the wafer.
        assert layered.host_out_bytes == one.host_out_bytes
        assert layered.host_in_bytes == one.host_in_bytes


def test_each_layer_runs_with_its_own_weights(
    compiled: dict[int, tuple[ModuleOp, ModuleOp]],
):
    _, module = compiled[4]
    layer_runs = runs(module)[1:-1]
    refs: list[set[str]] = []
    for run in layer_runs:
        owners = [v.owner for v in run.arguments if isinstance(v.owner, arith.ConstantOp)]
        names = {ref.name for o in owners if (ref := weight_ref(o)) is not None}
        # Q, K, V and the rotated Q and K are one merged reference, gate and up another,
        # o and down: the weight rewrites run before the layers are outlined.
        assert len(names) == 4
        refs.append(names)
    for i, names in enumerate(refs):
        assert all(f"layers.{i}." in n for n in names)


def test_the_mesh_ir_holds_the_body_once(compiled: dict[int, tuple[ModuleOp, ModuleOp]]):
    two, four = compiled[2][1], compiled[4][1]
    # The layer program is the same text whatever the depth.
    assert str(programs(two)["main.layer"]) == str(programs(four)["main.layer"])
    body = len(str(programs(two)["main.layer"]))
    per_layer = (len(str(four)) - len(str(two))) / 2
    # A layer more costs its weights' references and one mesh.run, not a body.
    assert 0 < per_layer < 0.1 * body
    assert per_layer < 3000


def test_timing_simulates_the_layer_program_per_input_layout(
    compiled: dict[int, tuple[ModuleOp, ModuleOp]],
):
    _, module = compiled[4]
    fn = select_entry(module, None)
    assert isinstance(fn, func.FuncOp)
    inputs = random_inputs(fn, 0)
    _, functional = run_entry(module, fn, inputs)
    _, timing = run_entry(module, fn, inputs, mode="timing")
    assert functional is not None
    assert timing is not None
    # The first layer reads the embedding, the others the layer before: two layouts.
    assert timing.simulated_layers == 2
    assert timing.extrapolated_layers == 2
    assert timing.cycles == pytest.approx(functional.cycles, rel=1e-9)
    # Each further layer takes the same time: the step is the parts' sum.
    _, two = run_entry(compiled[2][1], select_entry(compiled[2][1], None), inputs[:1])
    assert two is not None
    layer = (functional.cycles - two.cycles) / 2
    assert layer > 0
    assert functional.cycles == pytest.approx(two.cycles + 2 * layer, rel=1e-9)


def test_the_hidden_state_stays_on_the_wafer(
    compiled: dict[int, tuple[ModuleOp, ModuleOp]],
):
    """Host bytes per step do not grow with depth; the hand-off is re-laid out in place."""
    hosts: set[tuple[float, float, float]] = set()
    for layers in (2, 4):
        _, module = compiled[layers]
        fn = select_entry(module, None)
        assert isinstance(fn, func.FuncOp)
        layer = programs(module)["main.layer"]
        handoff = layer.attributes["plmr.state_args"]
        assert str(handoff) == '["main.handoff0", "", "", "", ""]'
        assert str(layer.attributes["plmr.state_results"]) == '["main.handoff0"]'
        assert "plmr.weight_args" in layer.attributes
        for mode in ("functional", "timing"):
            _, report = run_entry(module, fn, random_inputs(fn, 1), mode=mode)
            assert report is not None
            hosts.add(
                (report.host_in_bytes, report.host_lookup_bytes, report.host_out_bytes)
            )
            # The embedding's rows in, the logits out: nothing per layer.
            assert report.host_out_bytes == 8 * 64 * 4
            assert report.host_lookup_bytes == 8 * 32 * 4
            assert report.host_in_bytes == 0
            # Each layer's output is split over x; the next layer's norm reads it over
            # y: moved on the wafer (its bytes and its allreduces' cycles).
            assert report.state_moved_bytes == (layers) * 8 * 32 * 4
            scatter = next(o for o in report.ops if o.name == "mesh.scatter")
            assert scatter.cycles > 0
    assert len(hosts) == 1


def test_asking_for_the_layers_the_model_has(tmp_path: Path, llama_export: Any):
    source = llama_export(tmp_path, width32(2))
    module = compile_module(make_context(), source, dataclasses.replace(OPTIONS, layers=2))
    assert [r.callee.string_value() for r in runs(module)].count("main.layer") == 2


def test_asking_for_layers_the_model_lacks_is_one_error(tmp_path: Path, llama_export: Any):
    source = llama_export(tmp_path, width32(2))
    with pytest.raises(PlmrError, match="layers=3 was asked"):
        compile_module(
            make_context(),
            source,
            CompileOptions(grid=(2, 2), outline_layers=True, layers=3),
        )
    with pytest.raises(PassOptionError, match="layers must be 0"):
        compile_module(
            make_context(),
            source,
            CompileOptions(grid=(2, 2), outline_layers=True, layers=1),
        )
    with pytest.raises(PassOptionError, match="compiles every layer"):
        compile_module(make_context(), source, CompileOptions(grid=(2, 2), layers=2))


def test_a_run_of_a_missing_program_is_refused():
    text = """
    func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
      %y = mesh.run @nowhere(%x) : (tensor<4xf32>) -> tensor<4xf32>
      func.return %y : tensor<4xf32>
    }
    """
    with pytest.raises(
        PlmrError, match=r"runs @nowhere, but the module has no mesh\.program"
    ):
        parse_module(text)


def compile_refused(
    tmp_path: Path, layers: int, options: list[str], capsys: pytest.CaptureFixture[str]
) -> str:
    """`plmr compile` of a `layers`-layer export with `options`: refused, its stderr."""
    from plmr.tools.cli import main as plmr_main

    model = tmp_path / "m.onnx"
    if not model.exists():
        write_llama_onnx(model, width32(layers))
    out = tmp_path / "m.mesh.mlir"
    base = ["--grid", "2x2", "--no-substitute", "--tile-sizes", "8,8", "--fit-tiles"]
    assert plmr_main(["compile", str(model), *base, *options, "-o", str(out)]) != 0
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert not out.exists()
    return err


def test_plmr_compile_refuses_a_layer_count_the_model_lacks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    err = compile_refused(tmp_path, 2, ["--layers", "3"], capsys)
    assert "layers=3 was asked, but the function holds no 3 consecutive copies" in err
    err = compile_refused(tmp_path, 2, ["--layers", "1"], capsys)
    assert "layers must be 0 (whatever repeats) or >= 2, got 1" in err


TINY = dataclasses.replace(OPTIONS, device="test-tiny")
"""A grid whose PEs hold 4 KiB: the layer body's attention sum does not fit."""


def test_a_nest_the_layer_body_refuses_is_one_error_naming_the_layer(
    tmp_path: Path, llama_export: Any, monkeypatch: pytest.MonkeyPatch
):
    """Fail fast: the body's refusal is raised at once, the function not compiled whole."""
    import plmr.passes.pipeline as pipeline

    lowered: list[int] = []
    to_loop = pipeline.to_loop_level

    def counted(*args: Any) -> None:
        lowered.append(sum(1 for _ in args[1].walk()))
        to_loop(*args)

    monkeypatch.setattr(pipeline, "to_loop_level", counted)
    source = llama_export(tmp_path, width32(4))
    with pytest.raises(PlmrError) as refused:
        compile_module(make_context(), source, TINY)
    message = str(refused.value)
    assert message.startswith(
        "plmr compile: in the layer body @main.layer, compiled once for its 4 layers "
        "(layers 0-3 run it with their own weights): convert-tile-to-mesh: the nest "
        "computing %sum_unscaled does not fit a 2x2 grid of test-tiny"
    )
    assert "use a larger grid" in message
    # Only the layer body was lowered: not the parts after it, not the whole function.
    assert len(lowered) == 1


def test_the_whole_function_refuses_the_same_nest(tmp_path: Path, llama_export: Any):
    """What makes failing fast right: compiled whole, the same nest is refused."""
    source = llama_export(tmp_path, width32(2))
    with pytest.raises(PlmrError, match="the nest computing %sum_unscaled does not fit"):
        compile_module(
            make_context(), source, dataclasses.replace(TINY, outline_layers=False)
        )


def test_a_part_refused_for_its_cut_falls_back_to_the_whole_function(
    tmp_path: Path, llama_export: Any
):
    """Any other refusal of a part: `compile_layered` leaves the module to compile whole."""
    from plmr.passes.layer_programs import compile_layered

    source = llama_export(tmp_path, width32(2))
    text = str(source)
    parts: list[str] = []

    def refuse(part: ModuleOp, fit: bool) -> ModuleOp:
        fn = next(op for op in part.ops if isinstance(op, func.FuncOp))
        parts.append(fn.sym_name.data)
        raise PlmrError("a refusal the cut makes")

    assert not compile_layered(source, refuse)
    assert parts == ["main.layer"]
    assert str(source) == text

    def refuse_nest(part: ModuleOp, fit: bool) -> ModuleOp:
        fn = next(op for op in part.ops if isinstance(op, func.FuncOp))
        if fn.sym_name.data == "main.layer":
            return part
        raise PlmrError("the nest computing %logits does not fit a 2x2 grid")

    with pytest.raises(PlmrError, match=r"in @main\.(pre|post), the ops (before|after)"):
        compile_layered(source, refuse_nest)
    assert str(source) == text


def test_plmr_compile_reports_the_layer_body_refusal_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    err = compile_refused(tmp_path, 4, ["--device", "test-tiny"], capsys)
    assert err.count("does not fit") == 1
    assert "in the layer body @main.layer, compiled once for its 4 layers" in err


STAGED = dataclasses.replace(OPTIONS, device="wse2:width=4,height=4,sram_kib=20")
"""A 4x4 wafer whose PEs hold 20 KiB: two layers of `width32` per 2x2 region."""


@pytest.fixture(scope="module")
def staged(
    tmp_path_factory: pytest.TempPathFactory, llama_export: Any
) -> tuple[ModuleOp, ModuleOp]:
    """Source and compiled module of the 4-layer export on the `STAGED` device."""
    source = llama_export(tmp_path_factory.mktemp("staged"), width32(4))
    return source, compile_module(make_context(), source.clone(), STAGED)


def staged_entries(
    staged: tuple[ModuleOp, ModuleOp],
) -> tuple[ModuleOp, func.FuncOp, ModuleOp, func.FuncOp]:
    """The source and its entry, the compiled module and its entry."""
    source, module = staged
    src_fn = select_entry(source, None)
    fn = select_entry(module, None)
    assert isinstance(src_fn, func.FuncOp)
    assert isinstance(fn, func.FuncOp)
    return source, src_fn, module, fn


def test_layers_that_do_not_fit_one_region_run_in_stages(
    staged: tuple[ModuleOp, ModuleOp],
):
    from plmr.target.device import get_device
    from plmr.target.interface import stage_bytes, stage_layers
    from plmr.target.stages import hops, place_stages, split_stages

    source, src_fn, module, fn = staged_entries(staged)
    dev = get_device(STAGED.device)
    recorded = stage_bytes(fn)
    assert recorded is not None
    weights, peak = recorded
    # Each stage's layers fit beside the body's peak, and one stage fewer would not.
    assert stage_layers(fn) == (2, 2)
    assert 2 * weights + peak <= dev.sram_bytes < 4 * weights + peak
    # The rule the bench splits its stages by (`kv_capacity`), on the compiled bytes.
    assert stage_layers(fn) == split_stages(4, weights, peak, dev.sram_bytes, "m")
    for seed in range(2):
        inputs = random_inputs(src_fn, seed)
        want = run_function(source, src_fn, inputs)
        got, report = run_entry(module, fn, inputs)
        assert report is not None
        for w, g in zip(want, got, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)
        assert report.stage_layers == (2, 2)
    # The hidden state (1x8x32) hops once, priced as the machine model prices it.
    placement = place_stages((2, 2), (2, 2), dev)
    (hop,) = hops(placement, dev, 8 * 32)
    _, timed = run_entry(module, fn, random_inputs(src_fn, 0), mode="timing")
    assert timed is not None
    assert timed.stage_hop_cycles == hop.cycles > 0
    one = dataclasses.replace(timed, stage_layers=())
    assert "stages      2 regions of the wafer, layers 2+2" in "\n".join(timed.summary())
    assert timed.stage_bytes == (weights, peak)
    assert timed.to_json()["stage_bytes"] == [weights, peak]
    assert "stages" not in "\n".join(one.summary())


def test_stages_that_do_not_fit_the_run_s_device_name_the_program(
    staged: tuple[ModuleOp, ModuleOp],
):
    """Run on a one-wafer system of one 2x2 region, the two stages are one error."""
    _, src_fn, module, fn = staged_entries(staged)
    with pytest.raises(PlmrError, match=r"plmr run: @main's stages needs 2 pipeline"):
        run_entry(
            module,
            fn,
            random_inputs(src_fn, 0),
            mode="timing",
            device="wse2:width=2,height=2,sram_kib=20,wafers=1",
        )


def test_the_stage_hops_add_to_the_step(staged: tuple[ModuleOp, ModuleOp]):
    """The same program with its stages' record removed runs as one stage, hops less."""
    from plmr.target.interface import STAGE_BYTES_ATTR, STAGES_ATTR

    _, src_fn, module, fn = staged_entries(staged)
    inputs = random_inputs(src_fn, 0)
    _, staged_report = run_entry(module, fn, inputs, mode="timing")
    assert staged_report is not None
    flat = module.clone()
    flat_fn = select_entry(flat, None)
    assert isinstance(flat_fn, func.FuncOp)
    del flat_fn.attributes[STAGES_ATTR]
    del flat_fn.attributes[STAGE_BYTES_ATTR]
    _, flat_report = run_entry(flat, flat_fn, inputs, mode="timing")
    assert flat_report is not None
    assert flat_report.stage_layers == ()
    assert flat_report.stage_hop_cycles == 0
    assert staged_report.cycles == pytest.approx(
        flat_report.cycles + staged_report.stage_hop_cycles
    )


def test_a_layer_that_fits_no_region_is_one_error(tmp_path: Path, llama_export: Any):
    source = llama_export(tmp_path, width32(4))
    small = dataclasses.replace(OPTIONS, device="wse2:width=4,height=4,sram_kib=10")
    with pytest.raises(
        PlmrError,
        match=r"the layer body @main\.layer \(4 layers\): one layer's weights need \d+ B "
        r"per PE beside \d+ B of working set, \d+ B, but the device has 10240 B per PE; "
        r"use a larger grid",
    ):
        compile_module(make_context(), source, small)


def test_stages_beyond_the_system_s_wafers_are_one_error(tmp_path: Path, llama_export: Any):
    """Two 2x2 regions do not fit a 2x2 wafer of a one-wafer system."""
    source = llama_export(tmp_path, width32(4))
    one = dataclasses.replace(OPTIONS, device="wse2:width=2,height=2,sram_kib=20,wafers=1")
    with pytest.raises(
        PlmrError,
        match=r"plmr compile: @main \(4 layers\) needs 2 pipeline stages of 2x2 PEs .* but the system has 1; use --device wse2:wafers=2",
    ):
        compile_module(make_context(), source, one)


def test_a_run_whose_stages_miss_its_layers_is_refused(
    staged: tuple[ModuleOp, ModuleOp],
):
    from xdsl.dialects.builtin import ArrayAttr, IntegerAttr, i64

    from plmr.target.interface import STAGES_ATTR

    source, module = staged
    bad = module.clone()
    fn = select_entry(bad, None)
    src_fn = select_entry(source, None)
    assert isinstance(fn, func.FuncOp)
    assert isinstance(src_fn, func.FuncOp)
    fn.attributes[STAGES_ATTR] = ArrayAttr([IntegerAttr(2, i64), IntegerAttr(1, i64)])
    with pytest.raises(PlmrError, match=r"stages of 2\+1 layers but runs 4 layers"):
        run_entry(bad, fn, random_inputs(src_fn, 0), mode="timing")


LAYER_BODY = """
mesh.program @body(%h: tensor<8x8xf32>, %w: tensor<8x8xf32>, %t: tensor<8x8xf32>) -> tensor<8x8xf32> device "wse2" grid [2, 2] {
  %dh = mesh.scatter %h : tensor<8x8xf32> -> !mesh.dist<tensor<8x8xf32>, #mesh.layout<[y, x]>>
  %dw = mesh.scatter %w : tensor<8x8xf32> -> !mesh.dist<tensor<8x8xf32>, #mesh.layout<[y, x]>>
  %e = mesh.spmd(%dh, %dw) : (!mesh.dist<tensor<8x8xf32>, #mesh.layout<[y, x]>>, !mesh.dist<tensor<8x8xf32>, #mesh.layout<[y, x]>>) -> !mesh.dist<tensor<8x8xf32>, #mesh.layout<[y, x]>> {
  ^bb0(%y: index, %x: index, %bh: tensor<4x4xf32>, %bw: tensor<4x4xf32>):
    %p = tile.dot %bh, %bw : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    mesh.yield %p : tensor<4x4xf32>
  }
  %o = mesh.gather %e : !mesh.dist<tensor<8x8xf32>, #mesh.layout<[y, x]>> -> tensor<8x8xf32>
  mesh.return %o : tensor<8x8xf32>
}
"""
"""A layer body on 2x2: `%w` is a layer's weights (a 4x4 block per PE, 32 B at wse2's
two bytes), `%h` the hidden state, `%t` an unused input."""


def test_layer_bytes_count_a_weight_block_once():
    """The body reads its weight block in place: it is in the weights, not also the peak."""
    from plmr.passes.layer_programs import layer_bytes

    module = parse_module(LAYER_BODY)
    (program,) = [p for p in module.ops if isinstance(p, mesh.ProgramOp)]
    weights, peak = layer_bytes(program, {1})
    assert weights == 4 * 4 * 2
    # The hidden block and the product (32 B each); the weight block is resident.
    assert peak == 2 * 4 * 4 * 2
    # With no weights, the weight input is the body's own, and live in its peak.
    assert layer_bytes(program, set()) == (0, 3 * 4 * 4 * 2)


def test_a_table_every_layer_shares_is_not_a_layer_weight():
    """Only inputs whose constant differs per layer are counted once per layer."""
    from plmr.passes.layer_programs import per_layer_constants

    text = """
    func.func @main(%h: tensor<8x8xf32>) -> tensor<8x8xf32> {
      %t = arith.constant dense<1.0> : tensor<8x8xf32>
      %w0 = arith.constant dense<2.0> : tensor<8x8xf32>
      %w1 = arith.constant dense<3.0> : tensor<8x8xf32>
      %h1 = mesh.run @body(%h, %w0, %t) {plmr.layer = 0 : i64} : (tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
      %h2 = mesh.run @body(%h1, %w1, %t) {plmr.layer = 1 : i64} : (tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
      func.return %h2 : tensor<8x8xf32>
    }
    """
    module = parse_module(LAYER_BODY + text)
    fn = select_entry(module, "main")
    assert isinstance(fn, func.FuncOp)
    layer_runs = [op for op in fn.body.block.ops if isinstance(op, mesh.RunOp)]
    assert per_layer_constants(layer_runs, 3) == {1}
    assert per_layer_constants(layer_runs[:1], 3) == {1, 2}
