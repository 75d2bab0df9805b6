"""
`plmr bench decode|prefill` (`plmr.models.bench`): the step is assembled from compiled
and simulated programs, and for the two-layer `tiny` model it is exactly the whole
model's decode program plus its KV appends; the CLI prints one JSON object or one
clean error; `benchmarks/llm.py --quick` writes its table. Models come from presets or
Hugging Face configs (`models/hf_config.py`); a layer's nests and allreduces are counted
and timed (`models/nests.py`); the hand-composed reference layer is built from the
kernel library and its parts are the kernels simulated on their own
(`models/reference_layer.py`).
"""

from __future__ import annotations

import dataclasses
import json
import math
import runpy
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import cast

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

from plmr.errors import PlmrError
from plmr.lowering.kernels import (
    Kernel,
    cannon_gemm,
    gemm_t,
    gemv,
    sum_of_squares,
    vector_allreduce,
)
from plmr.models.bench import (
    LlmBench,
    _timed,  # pyright: ignore[reportPrivateUsage]
    bench_config,
    bench_llm,
    default_options,
    grid_block,
    runtime_options,
)
from plmr.models.hf_config import load_hf_config, to_hf
from plmr.models.llama import LlamaConfig, ProgramBuilder, get_config
from plmr.models.nests import OpCounts, count_ops, critical_path, layer_window, run_nests
from plmr.models.reference_layer import (
    compute_floor,
    hand_composed_layer,
    head_tiles,
    layer_macs,
)
from plmr.runtime.mesh_machine import find_program, run_mesh
from plmr.target.device import get_device
from plmr.tools.cli import main as plmr_main

pytestmark = pytest.mark.usefixtures("cached_bench_compiles")

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "llm.py"


def test_tiny_decode_is_the_whole_model_plus_its_appends():
    result = bench_llm("decode", "tiny", (4, 4))
    config = bench_config("tiny", (4, 4), result.tokens)
    dev = get_device("wse2")
    whole = _timed(
        ProgramBuilder(config, None).decode(), default_options("tiny", (4, 4), "wse2"), dev
    ).report
    assert result.n_layers == 2
    assert result.stages == 1
    assert result.kv_append_cycles > 0
    want = float(whole.cycles) + 2 * result.kv_append_cycles
    assert result.step_cycles == pytest.approx(want, rel=1e-9)
    assert result.tokens_per_second == pytest.approx(dev.clock_hz / result.step_cycles)
    assert result.first_cycles + result.layer_cycles == pytest.approx(float(whole.cycles))
    assert 0 < result.sram_bytes_per_core <= result.sram_capacity
    assert 0 < result.routes_per_router <= result.route_capacity
    assert 0.0 < result.layer_compute_fraction <= 1.0


def test_tiny_prefill_counts_the_prompt():
    result = bench_llm("prefill", "tiny", (2, 2), tokens=4)
    dev = get_device("wse2")
    assert result.tokens == 4
    assert result.kv_append_cycles == 0.0
    assert result.tokens_per_second == pytest.approx(4 * dev.clock_hz / result.step_cycles)
    assert result.to_json()["ttft_ms"] == pytest.approx(result.step_seconds * 1e3)


def test_models_are_padded_to_the_grid():
    config = bench_config("llama3-8b", (420, 420), 4096)
    assert (config.dim, config.ffn_dim, config.vocab, config.max_seq) == (
        4200,
        14700,
        128520,
        4200,
    )
    assert config.head_dim == 128
    assert bench_config("tiny", (4, 4), 32) == bench_config("tiny", (2, 2), 32)


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = plmr_main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_prints_one_json_object(capsys: pytest.CaptureFixture[str]):
    code, out, _ = run(
        ["bench", "decode", "--model", "tiny", "--grid", "2x2", "--json"], capsys
    )
    assert code == 0
    lines = out.strip().splitlines()
    assert len(lines) == 1
    data = json.loads(lines[0])
    for key in ("layer_cycles", "step_cycles", "tokens_per_second", "tpot_ms", "stages"):
        assert key in data
    assert data["waferllm"]["tokens_per_second"] == 2700.0


def test_cli_prints_a_report(capsys: pytest.CaptureFixture[str]):
    code, out, _ = run(["bench", "prefill", "--model", "tiny", "--grid", "2x2"], capsys)
    assert code == 0
    assert "tokens/s" in out
    assert "WaferLLM" in out
    assert "stages" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--model", "gpt5"], "unknown model 'gpt5'"),
        (["--grid", "2000x2000"], "does not fit wse2"),
        (["--tokens", "0"], "Invalid value for '--tokens': expected a positive integer"),
        (["--tile-sizes", "a,b"], "bad --tile-sizes"),
    ],
)
def test_cli_errors(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]):
    code, out, err = run(["bench", "decode", "--grid", "2x2", *argv], capsys)
    assert code != 0
    assert out == ""
    assert message in err
    assert "Traceback" not in err


def test_benchmark_quick_table(capsys: pytest.CaptureFixture[str]):
    namespace = runpy.run_path(str(SCRIPT), run_name="llm_bench")
    main = cast(Callable[[Sequence[str]], int], namespace["main"])
    assert main(["--quick", "--jobs", "1"]) == 0
    text = capsys.readouterr().out
    rows = [line for line in text.splitlines() if line.startswith("| tiny")]
    assert [r.split("|")[1].strip() for r in rows] == ["tiny decode", "tiny prefill"]
    header = [c.strip() for c in text.splitlines()[0].split("|")]
    for column in (
        "hand-composed cycles / layer",
        "compute floor",
        "compiled / hand-composed",
    ):
        assert column in header
    for row in rows:
        cells = [c.strip() for c in row.split("|")]
        layer = float(cells[header.index("cycles / layer")].replace(",", ""))
        hand = float(cells[header.index("hand-composed cycles / layer")].replace(",", ""))
        ratio = cells[header.index("compiled / hand-composed")]
        assert ratio == f"{layer / hand:,.2f}×"
        # One 4x4 region on one WSE-2 (994x750 PEs hold 248x187 of them).
        assert cells[header.index("wafers")] == "1"
        assert cells[header.index("placement")] == "1 × 4² (248×187 per wafer)"


def test_benchmark_reference_rows():
    namespace = runpy.run_path(str(SCRIPT), run_name="llm_bench")
    job = namespace["Job"]("decode", "tiny", 4, tokens=32)
    result = namespace["reference"](job)
    want = hand_composed_layer("decode", get_config("tiny"), (4, 4), "wse2", 32)
    assert result[1]["cycles"] == want.cycles
    lines = namespace["reference_section"]([result])
    cells = [c.strip() for c in lines[2].split("|")]
    assert cells[1:6] == ["tiny decode", "4²", "32", f"{want.cycles:,.0f}", "640"]
    # tokens/s of the layers alone: the clock over n_layers hand-composed layers.
    assert cells[6] == f"{1.1e9 / (2 * want.cycles):,.0f}"


def test_odd_grids_pad_the_model():
    result = bench_llm("prefill", "tiny", (3, 3), tokens=4)
    assert result.padded == {
        "dim": 66,
        "ffn_dim": 129,
        "vocab": 258,
        "tokens": 6,
        "padded": 1,
    }
    dev = get_device("wse2")
    # Throughput counts the prompt's tokens, not the padding.
    assert result.tokens_per_second == pytest.approx(4 * dev.clock_hz / result.step_cycles)


# ---------------------------------------------------------------------------------------
# Model configs (`--config`, models/hf_config.py) and presets
# ---------------------------------------------------------------------------------------

CONFIGS = Path(__file__).resolve().parents[2] / "examples" / "configs"

PUBLISHED = {
    # name: (hidden, heads, KV heads, FFN, layers, vocabulary)
    "llama3-8b": (4096, 32, 8, 14336, 32, 128256),
    "llama2-13b": (5120, 40, 40, 13824, 40, 32000),
    "qwen2-72b": (8192, 64, 8, 29568, 80, 152064),
    "llama3.1-70b": (8192, 64, 8, 28672, 80, 128256),
    "llama3.1-405b": (16384, 128, 8, 53248, 126, 128256),
}


def sizes(config: LlamaConfig) -> tuple[int, ...]:
    c = config
    return (c.dim, c.n_heads, c.n_kv_heads, c.ffn_dim, c.n_layers, c.vocab)


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_presets_have_the_published_sizes_and_agree_with_their_json(name: str):
    preset = get_config(name)
    assert sizes(preset) == PUBLISHED[name]
    assert preset.head_dim == 128
    loaded = load_hf_config(CONFIGS / f"{name}.json")
    assert loaded == preset


def write(tmp_path: Path, data: object, name: str = "model.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


SMALL: dict[str, object] = {
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 64,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "vocab_size": 256,
    "max_position_embeddings": 32,
    "rope_theta": 500000.0,
    "rms_norm_eps": 1e-5,
    "torch_dtype": "bfloat16",
    "rope_scaling": None,
}


def test_config_reads_the_hf_keys_and_ignores_the_others(tmp_path: Path):
    config = load_hf_config(write(tmp_path, SMALL, "small.json"))
    assert config == dataclasses.replace(get_config("tiny"), name="small")
    assert to_hf(config) == {
        k: v
        for k, v in SMALL.items()
        if k not in ("architectures", "torch_dtype", "rope_scaling")
    }


def test_config_defaults_and_head_dim(tmp_path: Path):
    data = {
        k: SMALL[k]
        for k in (
            "hidden_size",
            "num_attention_heads",
            "intermediate_size",
            "num_hidden_layers",
            "vocab_size",
        )
    }
    config = load_hf_config(write(tmp_path, {**data, "head_dim": 32}, "config.json"))
    assert config.name == tmp_path.name
    assert config.n_kv_heads == config.n_heads == 4
    assert config.head_dim == 32
    assert (config.rope_theta, config.norm_eps, config.max_seq) == (10000.0, 1e-6, 4096)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"hidden_size": None}, "missing key 'hidden_size'"),
        (
            {"vocab_size": None, "num_hidden_layers": None},
            "missing keys 'num_hidden_layers'",
        ),
        ({"num_attention_heads": 5}, "'hidden_size' 64 is not a multiple of"),
        ({"num_key_value_heads": 3}, "'num_attention_heads' 4 is not a multiple of"),
        ({"hidden_size": 12, "num_attention_heads": 4}, "head dimension 3 is odd"),
        ({"intermediate_size": "128"}, "'intermediate_size' must be a positive integer"),
        ({"num_hidden_layers": 0}, "'num_hidden_layers' must be a positive integer"),
        ({"rope_theta": -1}, "'rope_theta' must be a positive number"),
    ],
)
def test_config_errors_name_the_key_and_the_file(
    tmp_path: Path, change: dict[str, object], message: str
):
    data = {k: v for k, v in {**SMALL, **change}.items() if v is not None}
    path = write(tmp_path, data)
    with pytest.raises(PlmrError) as info:
        load_hf_config(path)
    assert message in str(info.value)
    assert str(path) in str(info.value)


def test_config_bad_json_and_missing_file(tmp_path: Path):
    path = tmp_path / "broken.json"
    path.write_text('{"hidden_size": 64,\n')
    with pytest.raises(PlmrError, match=r"broken\.json: not valid JSON \(line 2"):
        load_hf_config(path)
    with pytest.raises(PlmrError, match="expected a JSON object"):
        load_hf_config(write(tmp_path, [1, 2]))
    with pytest.raises(PlmrError, match="cannot read the model config"):
        load_hf_config(tmp_path / "absent.json")


def test_a_config_file_benches_like_its_preset(tmp_path: Path):
    path = write(tmp_path, to_hf(get_config("tiny")), "tiny-copy.json")
    from_file = bench_llm(
        "prefill", load_hf_config(path), (2, 2), tokens=4, reference=False
    )
    preset = bench_llm("prefill", "tiny", (2, 2), tokens=4, reference=False)
    assert from_file.model == "tiny-copy"
    assert from_file.layer_cycles == preset.layer_cycles
    assert from_file.step_cycles == preset.step_cycles


# ---------------------------------------------------------------------------------------
# What a layer is made of: counts and nests (models/nests.py)
# ---------------------------------------------------------------------------------------


def test_count_ops_counts_nests_and_allreduces_in_the_ir():
    # By construction: a GEMV (one nest, one allreduce), a sum of squares (one nest, one
    # allreduce), MeshGEMM (one nest, shifts only) and dist-GEMM-T (one nest whose
    # allreduce sits in a tile.for: one op in the IR, however often it runs).
    kernels = [
        gemv("ktree", 16, 8, (4, 4), "wse2"),
        sum_of_squares(1, 16, (4, 4), "wse2"),
        cannon_gemm(8, 8, 8, (4, 4), "wse2", "interleaved"),
        gemm_t(8, 8, 8, (4, 4), "wse2"),
    ]
    programs = [find_program(k.module, None).clone() for k in kernels]
    assert count_ops(ModuleOp(programs)) == OpCounts(spmds=4, allreduces=3)
    assert count_ops(kernels[2].module) == OpCounts(spmds=1, allreduces=0)


def test_critical_path_counts_what_each_nest_adds():
    assert critical_path([10.0, 5.0, 30.0, 25.0, 31.0]) == [10.0, 0.0, 20.0, 0.0, 1.0]
    assert sum(critical_path([3.0, 9.0, 4.0])) == 9.0


def test_layer_window_finds_the_inserted_layer():
    one = [("in",), ("a",), ("b",), ("head",)]
    two = [("in",), ("a",), ("b",), ("a",), ("b",), ("head",)]
    assert layer_window(one, two) == range(3, 5)
    # No insertion point fits: the nests after the common prefix.
    assert layer_window([("x",), ("y",)], [("x",), ("p",), ("q",), ("z",)]) == range(1, 3)
    assert layer_window(one, one) == range(0)


def test_run_nests_times_like_the_runtime():
    kernel = gemv("ktree", 64, 32, (4, 4), "wse2")
    zeros = [np.zeros(s, np.float32) for s in kernel.inputs]
    dev = get_device("wse2")
    _, plain = run_mesh(kernel.module, zeros, device=dev, mode="timing")
    report, nests = run_nests(kernel.module, zeros, dev)
    assert report.cycles == plain.cycles
    assert len(nests) == 1
    assert nests[0].cycles == pytest.approx(report.cycles)
    assert nests[0].what.startswith("dot, allreduce y -> 1x32")


@pytest.fixture(scope="module")
def tiny_decode() -> LlmBench:
    return bench_llm("decode", "tiny", (4, 4))


def test_bench_counts_a_layer_from_the_two_programs(tiny_decode: LlmBench):
    r = tiny_decode
    config = bench_config("tiny", (4, 4), r.tokens)
    options = default_options("tiny", (4, 4), "wse2")
    dev = get_device("wse2")
    builder = ProgramBuilder(config, None)
    one = _timed(builder.decode(layers=[0]), options, dev)
    two = _timed(builder.decode(layers=[0, 1]), options, dev)
    assert r.spmds_per_layer == two.spmds - one.spmds > 0
    assert r.allreduces_per_layer == two.allreduces - one.allreduces > 0
    assert len(r.layer_nests) == r.spmds_per_layer
    # The layer's nests cover its time: their critical-path cycles add up to it.
    total = sum(n.cycles for n in r.layer_nests)
    assert total == pytest.approx(r.layer_cycles, rel=0.05)
    assert sum(n.cycles for n in one.nests) == pytest.approx(float(one.report.cycles))


def test_bench_json_and_summary_have_the_layer_and_the_reference(tiny_decode: LlmBench):
    data = tiny_decode.to_json()
    json.dumps(data)
    assert data["spmds_per_layer"] == tiny_decode.spmds_per_layer
    assert data["allreduces_per_layer"] == tiny_decode.allreduces_per_layer
    assert len(data["layer_nests"]) == tiny_decode.spmds_per_layer
    assert {"index", "name", "what", "cycles"} <= set(data["layer_nests"][0])
    ref = tiny_decode.hand_composed
    assert ref is not None
    assert data["hand_composed_cycles"] == ref.cycles
    assert data["compute_floor_cycles"] == ref.floor_cycles
    assert data["compiled_over_hand_composed"] == pytest.approx(
        tiny_decode.layer_cycles / ref.cycles
    )
    text = "\n".join(tiny_decode.summary())
    assert f"{tiny_decode.spmds_per_layer} mesh.spmd" in text
    assert "hand-composed" in text
    assert "compute floor" in text


# ---------------------------------------------------------------------------------------
# The hand-composed reference layer (models/reference_layer.py)
# ---------------------------------------------------------------------------------------

DECODE_PARTS = [
    "attention norm",
    "QKV",
    "scores",
    "softmax max",
    "softmax sum",
    "PV",
    "O",
    "FFN norm",
    "up + gate",
    "down",
]


def simulate(kernel: Kernel) -> float:
    zeros = [np.zeros(s, np.float32) for s in kernel.inputs]
    return float(run_mesh(kernel.module, zeros, device="wse2", mode="timing")[1].cycles)


def test_hand_composed_decode_of_tiny():
    ref = hand_composed_layer("decode", get_config("tiny"), (4, 4), "wse2", 32)
    parts = {p.name: p for p in ref.parts}
    assert [p.name for p in ref.parts] == DECODE_PARTS
    assert ref.cycles == pytest.approx(sum(p.count * p.cycles for p in ref.parts))
    # Sizes: dim 64, 4 heads of 16 (2 KV heads), FFN 128, a 32-token cache.
    want = {
        "QKV": gemv("ktree", 64, 128, (4, 4), "wse2"),
        "scores": gemv("ktree", 16, 32, (1, 4), "wse2"),
        "PV": gemv("ktree", 32, 64, (4, 4), "wse2"),
        "O": gemv("ktree", 64, 64, (4, 4), "wse2"),
        "up + gate": gemv("ktree", 64, 256, (4, 4), "wse2"),
        "down": gemv("ktree", 128, 64, (4, 4), "wse2"),
        "attention norm": sum_of_squares(1, 64, (4, 4), "wse2"),
        "softmax max": vector_allreduce(1, (4, 4), "wse2", "y", "max"),
    }
    for name, kernel in want.items():
        assert parts[name].kernel == kernel.description
        assert parts[name].cycles == simulate(kernel), name
    assert parts["scores"].grid == (1, 4)
    assert all(p.count == 1 for p in ref.parts)
    # Ten allreduces, one per part.
    assert len(ref.parts) == 10


def test_hand_composed_prefill_of_tiny():
    ref = hand_composed_layer("prefill", get_config("tiny"), (4, 4), "wse2", 8)
    parts = {p.name: p for p in ref.parts}
    assert [p.name for p in ref.parts] == DECODE_PARTS
    assert (
        parts["QKV"].kernel
        == cannon_gemm(8, 64, 128, (4, 4), "wse2", "interleaved").description
    )
    # Four heads on 2x2 tiles at once; QK^T and PV of one head each.
    assert parts["scores"].grid == parts["PV"].grid == (2, 2)
    assert parts["scores"].cycles == simulate(
        cannon_gemm(8, 16, 8, (2, 2), "wse2", "interleaved")
    )
    assert parts["softmax sum"].cycles == simulate(vector_allreduce(4, (2, 2), "wse2", "x"))
    assert ref.cycles == pytest.approx(sum(p.total for p in ref.parts))
    assert sum(p.macs for p in ref.parts) == ref.macs


def test_heads_share_columns_and_tiles_when_the_grid_is_small():
    ref = hand_composed_layer("decode", get_config("tiny"), (2, 2), "wse2", 32)
    scores = next(p for p in ref.parts if p.name == "scores")
    assert (scores.count, scores.grid) == (2, (1, 2))
    assert head_tiles(32, (480, 480)) == ((80, 80), 1)
    assert head_tiles(4, (4, 4)) == ((2, 2), 1)
    assert head_tiles(65, (4, 4)) == ((1, 1), 5)


def test_compute_floor_arithmetic():
    dev = get_device("wse2")
    c = get_config("llama3-8b")
    # QKV 4096·6144, O 4096·4096, FFN 3·4096·14336, attention 2·32·128 per position.
    dense = 4096 * 6144 + 4096 * 4096 + 3 * 4096 * 14336
    assert layer_macs("decode", c, 4096) == dense + 2 * 32 * 128 * 4096 == 251_658_240
    assert layer_macs("prefill", c, 10) == 10 * dense + 2 * 32 * 128 * 100
    assert compute_floor(251_658_240, (420, 420), dev) == pytest.approx(
        251_658_240 / (420 * 420 * 4)
    )
    tiny = hand_composed_layer("decode", get_config("tiny"), (4, 4), dev, 32)
    assert tiny.macs == 64 * 128 + 64 * 64 + 3 * 64 * 128 + 2 * 4 * 16 * 32 == 40960
    assert tiny.floor_cycles == 40960 / (16 * 4)
    assert tiny.floor_cycles < tiny.cycles


def test_hand_composed_errors():
    with pytest.raises(PlmrError, match="unknown layer kind"):
        hand_composed_layer("train", get_config("tiny"), (4, 4))
    with pytest.raises(PlmrError, match="does not fit wse2"):
        hand_composed_layer("decode", get_config("tiny"), (4000, 4))


def test_exact_reaches_the_runtime():
    kernel = cannon_gemm(64, 64, 64, (8, 8), "wse2", "interleaved")
    zeros = [np.zeros(s, np.float32) for s in kernel.inputs]
    dev = get_device("wse2")
    exact, nests = run_nests(
        kernel.module, zeros, dev, runtime_options=runtime_options(True)
    )
    fast, _ = run_nests(kernel.module, zeros, dev, runtime_options=runtime_options(False))
    assert exact.exact is True
    assert fast.exact is False
    assert fast.cycles == pytest.approx(exact.cycles, rel=1e-6)
    assert sum(n.cycles for n in nests) == pytest.approx(exact.cycles)
    result = bench_llm("prefill", "tiny", (2, 2), tokens=4, reference=False, exact=True)
    assert result.exact is True
    assert result.to_json()["exact"] is True


def test_form_chooses_how_the_program_is_written():
    per_head = bench_llm(
        "prefill", "tiny", (2, 2), tokens=4, reference=False, form="per-head"
    )
    assert per_head.form == "per-head"
    assert per_head.to_json()["form"] == "per-head"
    with pytest.raises(PlmrError, match="unknown program form 'fused'"):
        bench_llm("prefill", "tiny", (2, 2), tokens=4, reference=False, form="fused")


@pytest.mark.parametrize(
    ("grid", "decode", "prefill"),
    [((420, 420), 35, 35), ((480, 480), 30, 30), ((540, 540), 27, 27), ((8, 8), 0, 0)],
)
def test_grid_block_gives_decode_one_ffn_block_per_pe(
    grid: tuple[int, int], decode: int, prefill: int
) -> None:
    # llama3-8b's FFN width 14336 pads to 14700 on 420, 14400 on 480 and 14580 on 540:
    # 35, 30 and 27 per PE, for decode's GEMVs and prefill's MeshGEMMs; small grids
    # search.
    assert grid_block("llama3-8b", grid, "decode") == decode
    assert grid_block("llama3-8b", grid, "prefill") == prefill
    assert default_options("llama3-8b", grid, "wse2", "decode").tile_sizes == (
        (decode, decode) if decode else (16, 16)
    )
    if decode:
        # Decode's attention maximum is not split into chunks; prefill's reductions are
        # split into one chunk per PE of the longer ring.
        assert default_options("llama3-8b", grid, "wse2", "decode").chunks == 1
        assert default_options("llama3-8b", grid, "wse2", "prefill").chunks == math.lcm(
            *grid
        )


@pytest.mark.parametrize("kind", ["prefill", "decode"])
def test_nest_ends_take_the_engines_clock_once_per_nest(
    kind: str, monkeypatch: pytest.MonkeyPatch
):
    """
    The nest timer takes the maximum of the engines' clock once per nest visit (the
    clock never goes back): the ends equal those of a timer noting it after every op.
    """
    from plmr.models.bench import (
        _compile,  # pyright: ignore[reportPrivateUsage]
        _simulate,  # pyright: ignore[reportPrivateUsage]
        default_tokens,
    )
    from plmr.models.nests import NestTimer

    base = get_config("tiny")
    grid = (4, 4)
    config = bench_config(base, grid, default_tokens(kind, base))
    builder = ProgramBuilder(config, None)
    text = (
        builder.decode(layers=[0, 1], head=True)
        if kind == "decode"
        else builder.prefill(config.max_seq, layers=[0, 1], head=True)
    )
    options = default_options(base, grid, "wse2", kind)
    compiled = _compile(text, options)
    dev = get_device("wse2")
    lazy = _simulate(compiled, options, dev, False).nests

    def eager(self: NestTimer, op: object) -> None:
        self._note(op, self.clocks.ce_free)  # pyright: ignore[reportPrivateUsage, reportArgumentType]

    monkeypatch.setattr(NestTimer, "_note_engine", eager)
    again = _simulate(compiled, options, dev, False).nests
    assert [(n.name, n.cycles, n.end) for n in lazy] == [
        (n.name, n.cycles, n.end) for n in again
    ]
    assert max(n.end for n in lazy) > 0


def test_a_k_token_decode_step_is_its_whole_program_plus_k_appends():
    """
    `--step-tokens 2`: the two-layer model's 2-token program, 2 appends per layer,
    tokens/s counts both tokens; the compute floor doubles the one-token layer's MACs."""
    two = bench_llm("decode", "tiny", (4, 4), step_tokens=2, reference=False)
    one = bench_llm("decode", "tiny", (4, 4), reference=False)
    config = bench_config("tiny", (4, 4), two.tokens)
    dev = get_device("wse2")
    # The bench compiles the k-token step as a decode step of k rows (`decode_rows`).
    opts = dataclasses.replace(default_options("tiny", (4, 4), "wse2"), decode_rows=2)
    whole = _timed(ProgramBuilder(config, None).decode(tokens=2), opts, dev).report
    assert two.step_tokens == 2
    assert two.kv_append_cycles == pytest.approx(2 * one.kv_append_cycles)
    want = float(whole.cycles) + 2 * two.kv_append_cycles
    assert two.step_cycles == pytest.approx(want, rel=1e-9)
    assert two.tokens_per_second == pytest.approx(2 * dev.clock_hz / two.step_cycles)
    assert two.floor is not None
    assert one.floor is not None
    assert two.floor.compute_cycles == pytest.approx(2 * one.floor.compute_cycles)
    assert "decode of 2 tokens over a 32-token KV cache" in "\n".join(two.summary())


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["prefill", "--step-tokens", "2"], "a prefill takes the prompt"),
        (["decode", "--tokens", "4", "--step-tokens", "8"], "do not fit a 4-token"),
        (["decode", "--form", "per-head", "--step-tokens", "2"], "heads form only"),
    ],
)
def test_step_tokens_errors(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
):
    code, out, err = run(["bench", *argv, "--grid", "2x2", "--no-reference"], capsys)
    assert code != 0
    assert out == ""
    assert message in err
    assert "Traceback" not in err
