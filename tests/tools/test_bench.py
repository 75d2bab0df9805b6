"""
`plmr bench gemm|gemv` and `plmr run` on mesh programs: one JSON object with `--json`,
checked results in functional mode, reports and Chrome traces written to files, and one
clean error (non-zero exit status, no traceback) for every bad grid, algorithm or option.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from plmr.lowering.kernels import gemm
from plmr.runtime import mesh_machine
from plmr.target.device import get_device

pytestmark = pytest.mark.usefixtures("cached_bench_compiles")

REPORT_KEYS = {
    "cycles",
    "seconds",
    "compute_cycles",
    "comm_cycles",
    "max_sram_bytes",
    "max_routes",
}


# ---------------------------------------------------------------------------------------
# plmr bench --json
# ---------------------------------------------------------------------------------------

BENCH_CASES = {
    "meshgemm": ["gemm", "--algo", "meshgemm", "--m", "24", "--k", "16", "--n", "20"],
    "cannon": ["gemm", "--algo", "cannon", "--grid", "3x3", "--m", "10", "--k", "11"],
    "summa": ["gemm", "--algo", "summa", "--grid", "2x4", "--m", "12", "--k", "16"],
    "gemm_t": ["gemm", "--algo", "gemm_t", "--grid", "5x5", "--m", "13", "--n", "9"],
    "gemv-ktree": ["gemv", "--grid", "8x4", "--m", "40", "--n", "24", "--groups", "2"],
    "gemv-ktree-k3": ["gemv", "--grid", "8x8", "--k", "3"],
    "gemv-pipeline": ["gemv", "--algo", "pipeline", "--grid", "3x5"],
    "gemv-ring": ["gemv", "--algo", "ring", "--grid", "4x2", "--device", "wse3"],
}


@pytest.mark.parametrize("mode", ["timing", "functional"])
@pytest.mark.parametrize("case", BENCH_CASES)
def test_bench_json_is_one_object(case: str, mode: str, cli: Any):
    code, out, err = cli.run(["bench", *BENCH_CASES[case], "--json", "--mode", mode])
    assert code == 0, err
    data = cli.one_json_object(out)
    assert REPORT_KEYS <= set(data)
    assert data["mode"] == mode
    assert data["kernel"] == BENCH_CASES[case][0]
    assert data["cycles"] > 0
    assert data["compute_cycles"] > 0
    assert data["comm_cycles"] >= 0
    assert data["compute_cycles"] + data["comm_cycles"] <= data["cycles"] * (1 + 1e-6)
    assert data["max_sram_bytes"] > 0
    assert data["max_routes"] >= 1
    device = get_device(data["device"])
    assert data["seconds"] == pytest.approx(data["cycles"] / device.clock_hz)
    assert data["max_routes"] <= data["route_capacity"] == device.usable_colors
    assert data["max_sram_bytes"] <= data["sram_capacity"] == device.sram_bytes
    if mode == "functional":
        check = data["check"]
        assert check["passed"] is True
        assert 0 <= check["max_rel_error"] <= check["rtol"]
    else:
        assert "check" not in data


def test_bench_timing_and_functional_agree_on_cycles(cli: Any):
    args = ["bench", "gemm", "--grid", "3x3", "--m", "18", "--json"]
    _, timed, _ = cli.run([*args, "--mode", "timing"])
    _, checked, _ = cli.run([*args, "--mode", "functional", "--seed", "3"])
    t, f = json.loads(timed), json.loads(checked)
    for key in REPORT_KEYS:
        assert t[key] == f[key], key


def test_bench_records_its_options(cli: Any):
    code, out, _ = cli.run(
        [
            "bench",
            "gemv",
            "--algo",
            "ktree",
            "--grid",
            "6x3",
            "--k",
            "3",
            "--groups",
            "3",
            "--m",
            "30",
            "--n",
            "9",
            "--json",
        ]
    )
    assert code == 0
    data = cli.one_json_object(out)
    assert {k: data[k] for k in ("kernel", "algorithm", "m", "n", "k", "groups")} == {
        "kernel": "gemv",
        "algorithm": "ktree",
        "m": 30,
        "n": 9,
        "k": 3,
        "groups": 3,
    }
    assert data["grid"] == [6, 3]


def test_bench_human_readable_report(cli: Any):
    code, out, _ = cli.run(["bench", "gemm", "--mode", "functional", "--grid", "2x2"])
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("cannon: C[64x64] = A[64x64]·B[64x64] on 2x2")
    assert any(line.startswith("  time ") for line in lines)
    assert any(line.startswith("  check       equal to numpy") for line in lines)


def test_bench_functional_mismatch_is_an_error(cli: Any, monkeypatch: pytest.MonkeyPatch):
    real = mesh_machine.run_mesh

    def wrong(*args: Any, **kwargs: Any):
        outputs, report = real(*args, **kwargs)
        return [o * 1.01 for o in outputs], report

    monkeypatch.setattr(mesh_machine, "run_mesh", wrong)
    code, out, err = cli.run(
        ["bench", "gemm", "--grid", "3x3", "--mode", "functional", "--json"]
    )
    assert code == 1
    assert out == ""
    assert err.startswith(
        "error: meshgemm: C[64x64] = A[64x64]·B[64x64] on 3x3 (interleaved ring): result "
        "differs from numpy (max relative error "
    )
    assert err.rstrip().endswith("> 0.001)")
    assert "Traceback" not in err


def test_bench_writes_report_and_trace(tmp_path: Path, cli: Any):
    report, trace = tmp_path / "report.json", tmp_path / "trace.json"
    code, out, err = cli.run(
        [
            "bench",
            "gemv",
            "--grid",
            "4x4",
            "--json",
            "--report",
            str(report),
            "--trace",
            str(trace),
            "--trace-pes",
            "0,0;3,2",
        ]
    )
    assert code == 0, err
    printed = cli.one_json_object(out)
    assert json.loads(report.read_text()) == printed
    events = json.loads(trace.read_text())["traceEvents"]
    names = {e["args"]["name"] for e in events if e["ph"] == "M"}
    assert names == {"PE (0, 0)", "PE (3, 2)"}
    ops = {e["name"] for e in events if e["ph"] == "X"}
    assert {"tile.dot", "mesh.allreduce"} <= ops


# ---------------------------------------------------------------------------------------
# Clean errors
# ---------------------------------------------------------------------------------------


SIZES_256 = ["--m", "256", "--k", "256", "--n", "256"]
"""64x64 blocks on the 4x4 grid: far more than test-tiny's 4 KiB of SRAM."""


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["gemm", "--grid", "4by4"],
            "bad grid '4by4': expected ROWSxCOLS, e.g. 4x4 or 360x360",
        ),
        (["gemm", "--grid", "4x"], "bad grid '4x': expected ROWSxCOLS, e.g. 4x4"),
        (["gemv", "--grid", "0x4"], "bad grid '0x4': both sizes must be positive"),
        (["gemm", "--grid", "-2x2"], "bad grid '-2x2': both sizes must be positive"),
        (
            ["gemm", "--grid", "3x4"],
            "on a 3x4 grid K must be a multiple of lcm(3, 4) = 12, got 64",
        ),
        (
            ["gemm", "--algo", "gemm_t", "--grid", "2x4", "--k", "10"],
            "on a 2x4 grid K must be a multiple of lcm(2, 4) = 4, got 10",
        ),
        (
            ["gemm", "--algo", "summa", "--grid", "2x3", "--k", "10"],
            "summa needs K = 10 divisible into 6 equal panels on a 2x3 grid (K a multiple of 6)",
        ),
        (
            ["gemv", "--algo", "pipeline", "--groups", "2"],
            "--groups applies to the ktree algorithm only",
        ),
        (
            ["gemv", "--groups", "5"],
            "groups must be between 1 and the 4 PEs along y, got 5",
        ),
        (
            ["gemm", "--device", "wse9"],
            "unknown device 'wse9'; presets: wse2, wse3, test-small, test-tiny (override "
            "parameters with e.g. wse2:colors=16)",
        ),
        (
            ["gemm", "--device", "wse2:colors=many"],
            "device parameter colors must be a int, got 'many'",
        ),
        (
            ["gemm", "--device", "test-tiny", "--grid", "5x5"],
            "@meshgemm needs a 5x5 grid, but test-tiny has 4x4 PEs",
        ),
        (
            ["gemm", "--trace", "t.json", "--trace-pes", "9,9"],
            "PE (9, 9) is outside the 4x4 grid",
        ),
        (
            # MeshGEMM holds 6 colors at a router (3 per interleaved shift, one route per
            # color); test-tiny has 8 - 3 reserved = 5 usable.
            ["gemm", "--device", "test-tiny"],
            "'mesh.shift' along y needs more than the 5 usable colors of test-tiny at some "
            "router (colors 0..4 are taken); use fewer concurrent collectives, a smaller K, "
            "or relay mode (mesh-route{relay=true} / --relay)",
        ),
        (
            # 9 - 3 = 6 usable colors fit MeshGEMM, so the SRAM check is next.
            ["gemm", "--device", "test-tiny:colors=9", *SIZES_256],
            "SRAM overflow in @meshgemm: every PE (e.g. PE (0, 0)) needs ",
        ),
        (
            # Relaying lifts the color budget, not the SRAM one.
            ["gemm", "--device", "test-tiny", "--relay", *SIZES_256],
            "SRAM overflow in @meshgemm: every PE (e.g. PE (0, 0)) needs ",
        ),
    ],
)
def test_bench_bad_options_are_one_clean_error(
    args: list[str], message: str, cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.chdir(tmp_path)
    code, out, err = cli.run(["bench", *args, "--json"])
    assert code == 1
    assert out == ""
    assert err.startswith(f"error: {message}")
    assert err.count("\n") == 1
    assert "Traceback" not in err
    assert not (tmp_path / "t.json").exists(), "no trace file after a failed run"


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["gemm", "--algo", "strassen"],
            "Invalid value for '--algo': 'strassen' is not one of",
        ),
        (["gemv", "--algo", "tree"], "Invalid value for '--algo': 'tree' is not one of"),
        (["gemm", "--mode", "fast"], "Invalid value for '--mode': 'fast' is not one of"),
        (["gemm", "--m", "many"], "Invalid value for '--m': 'many' is not a valid integer"),
        (["gemm", "--bogus"], "No such option '--bogus'"),
        (["conv"], "No such command 'conv'"),
    ],
)
def test_bench_usage_errors(args: list[str], message: str, cli: Any):
    code, out, err = cli.run(["bench", *args])
    assert code == 2
    assert out == ""
    assert message in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "args, message",
    [
        (["gemm", "--m", "-3"], "m must be a positive size, got -3"),
        (["gemm", "--k", "0"], "k must be a positive size, got 0"),
        (["gemv", "--n", "-1"], "n must be a positive size, got -1"),
        (
            ["gemv", "--k", "0"],
            "k (the K-tree's number of phases) must be >= 1, got 0",
        ),
        (
            ["gemv", "--k", "1", "--groups", "2"],
            "--groups 2 needs --k >= 2 (with k = 1 there is one group)",
        ),
    ],
    ids=[
        "gemm-m-negative",
        "gemm-k-zero",
        "gemv-n-negative",
        "gemv-k-zero",
        "gemv-k1-groups",
    ],
)
def test_bench_bad_sizes_are_one_clean_error(args: list[str], message: str, cli: Any):
    code, out, err = cli.run(["bench", *args, "--json"])
    assert code == 1
    assert out == ""
    assert err == f"error: {message}\n"


def test_bench_errors_without_traceback_in_a_real_process(cli: Any):
    plmr = cli.script("plmr")
    done = subprocess.run(
        [str(plmr), "bench", "gemm", "--grid", "3x4", "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr == (
        "error: on a 3x4 grid K must be a multiple of lcm(3, 4) = 12, got 64\n"
    )
    done = subprocess.run(
        [str(plmr), "bench", "gemv", "--grid", "4x4", "--m", "8", "--n", "8", "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert REPORT_KEYS <= set(cli.one_json_object(done.stdout))


# ---------------------------------------------------------------------------------------
# plmr run on a mesh program
# ---------------------------------------------------------------------------------------


@pytest.fixture
def mesh_program(tmp_path: Path) -> Path:
    path = tmp_path / "meshgemm.mlir"
    path.write_text(str(gemm("meshgemm", 12, 9, 6, (3, 3), "wse2").module))
    return path


def test_run_mesh_program_prints_the_report(mesh_program: Path, cli: Any):
    code, out, err = cli.run(["run", str(mesh_program)])
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "@meshgemm on random inputs (seed 0):"
    assert lines[1].startswith("  out0: 12x6 float32 [")
    assert lines[2] == "program @meshgemm on wse2 3x3 (functional mode)"
    for label in ("time", "compute", "comm", "idle", "traffic", "SRAM peak", "routes"):
        assert any(line.startswith(f"  {label} ") for line in lines), label
    # Each interleaved shift of a 3-PE line takes 3 colors (one route per color); the
    # x and y shifts meet at the middle router: 6.
    assert "  routes      6 of 21 colors per router" in lines


def test_run_mesh_program_result_is_the_product(
    mesh_program: Path, tmp_path: Path, cli: Any
):
    rng = np.random.default_rng(5)
    a = rng.standard_normal((12, 9)).astype(np.float32)
    b = rng.standard_normal((9, 6)).astype(np.float32)
    np.savez(tmp_path / "in.npz", arg0=a, arg1=b)
    out = tmp_path / "out.npz"
    code, _, err = cli.run(
        [
            "run",
            str(mesh_program),
            "--inputs",
            str(tmp_path / "in.npz"),
            "--output",
            str(out),
        ]
    )
    assert code == 0, err
    with np.load(out) as data:
        np.testing.assert_allclose(data["out0"], a @ b, rtol=1e-4, atol=1e-5)


def test_run_mesh_program_writes_report_and_trace(
    mesh_program: Path, tmp_path: Path, cli: Any
):
    report, trace = tmp_path / "report.json", tmp_path / "trace.json"
    code, out, err = cli.run(
        [
            "run",
            str(mesh_program),
            "--mode",
            "timing",
            "--device",
            "wse3",
            "--report",
            str(report),
            "--trace",
            str(trace),
        ]
    )
    assert code == 0, err
    assert "(timing mode: results are placeholders)" in out
    assert "program @meshgemm on wse3 3x3 (timing mode)" in out
    assert f"  report      written to {report}" in out
    assert f"  trace       written to {trace}" in out
    data = json.loads(report.read_text())
    assert REPORT_KEYS <= set(data)
    assert data["device"] == "wse3"
    assert data["mode"] == "timing"
    assert data["grid"] == [3, 3]
    assert f"{data['cycles']:,.0f} cycles" in out
    doc = json.loads(trace.read_text())
    events = doc["traceEvents"]
    assert isinstance(events, list)
    threads = [e for e in events if e["ph"] == "M"]
    assert [t["args"]["name"] for t in threads] == ["PE (0, 0)", "PE (1, 0)", "PE (2, 0)"]
    spans = [e for e in events if e["ph"] == "X"]
    assert {"tile.dot", "mesh.shift"} <= {e["name"] for e in spans}
    for e in spans:
        assert {"name", "ph", "pid", "tid", "ts", "dur"} <= set(e)
        assert e["dur"] >= 0
        assert 0 <= e["tid"] < len(threads)
    # The last span ends when the program does (on the traced PEs, at most).
    end = max(e["args"]["end_cycle"] for e in spans)
    assert end <= data["cycles"] * (1 + 1e-6)


def test_run_mesh_program_errors(mesh_program: Path, tmp_path: Path, cli: Any):
    report = tmp_path / "report.json"
    code, _, err = cli.run(
        ["run", str(mesh_program), "--device", "wse2:width=2", "--report", str(report)]
    )
    assert code == 1
    assert err == "error: @meshgemm needs a 3x3 grid, but wse2 has 994x2 PEs\n"
    assert not report.exists()
    code, _, err = cli.run(["run", str(mesh_program), "--mode", "fast"])
    assert code == 2
    assert "Invalid value for '--mode'" in err
    code, _, err = cli.run(["run", str(mesh_program), "--trace-pes", "7,7", "--trace", "t"])
    assert code == 1
    assert err == "error: PE (7, 7) is outside the 3x3 grid\n"


# ---------------------------------------------------------------------------------------
# plmr bench decode|prefill --config / --exact
# ---------------------------------------------------------------------------------------

CONFIGS = Path(__file__).resolve().parents[2] / "examples" / "configs"

SMALL_CONFIG: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 64,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 128,
    "num_hidden_layers": 3,
    "vocab_size": 256,
    "max_position_embeddings": 16,
}


def config_file(tmp_path: Path, data: Any, text: str | None = None) -> Path:
    path = tmp_path / "model.json"
    path.write_text(json.dumps(data) if text is None else text)
    return path


def test_llm_bench_reads_a_config(tmp_path: Path, cli: Any):
    path = config_file(tmp_path, SMALL_CONFIG)
    code, out, err = cli.run(
        [
            "bench",
            "prefill",
            "--config",
            str(path),
            "--grid",
            "2x2",
            "--tokens",
            "4",
            "--json",
        ]
    )
    assert code == 0, err
    data = cli.one_json_object(out)
    assert data["model"] == "model"
    assert data["n_layers"] == 3
    assert data["spmds_per_layer"] == len(data["layer_nests"]) > 0
    assert data["allreduces_per_layer"] > 0
    assert data["hand_composed_cycles"] == pytest.approx(
        sum(p["total_cycles"] for p in data["hand_composed"]["parts"])
    )
    assert 0 < data["compute_floor_cycles"] < data["hand_composed_cycles"]
    assert data["compiled_over_hand_composed"] == pytest.approx(
        data["layer_cycles"] / data["hand_composed_cycles"]
    )
    assert data["exact"] is False


def test_llm_bench_text_summary_has_the_layer_and_reference(cli: Any):
    code, out, err = cli.run(
        ["bench", "decode", "--model", "tiny", "--grid", "2x2", "--exact"]
    )
    assert code == 0, err
    assert "mesh.spmd and" in out
    assert "by nest" in out
    assert "hand-composed" in out
    assert "compute floor" in out
    code, out, _ = cli.run(
        ["bench", "decode", "--model", "tiny", "--grid", "2x2", "--no-reference"]
    )
    assert code == 0
    assert "hand-composed" not in out


@pytest.mark.parametrize(
    ("data", "text", "message"),
    [
        ({"hidden_size": 64}, None, "missing keys 'num_attention_heads'"),
        ({**SMALL_CONFIG, "num_key_value_heads": 3}, None, "'num_key_value_heads' 3"),
        (None, '{"hidden_size": 64,', "not valid JSON (line 1"),
    ],
)
def test_llm_bench_bad_configs_are_one_clean_error(
    tmp_path: Path, data: Any, text: str | None, message: str, cli: Any
):
    path = config_file(tmp_path, data, text)
    code, out, err = cli.run(["bench", "decode", "--config", str(path), "--json"])
    assert code == 1
    assert out == ""
    assert err.startswith(f"error: {path}: ")
    assert message in err
    assert "Traceback" not in err


def test_llm_bench_model_or_config(cli: Any):
    path = CONFIGS / "llama2-13b.json"
    code, out, err = cli.run(["bench", "decode", "--model", "tiny", "--config", str(path)])
    assert code == 1
    assert out == ""
    assert err == "error: give either --model or --config, not both\n"
    code, _, err = cli.run(["bench", "decode", "--config", "absent.json"])
    assert code == 1
    assert "cannot read the model config absent.json" in err


def test_llm_bench_config_error_in_a_real_process(tmp_path: Path, cli: Any):
    path = config_file(tmp_path, {**SMALL_CONFIG, "num_attention_heads": 5})
    plmr = cli.script("plmr")
    done = subprocess.run(
        [str(plmr), "bench", "prefill", "--config", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1
    assert done.stdout == ""
    assert "'hidden_size' 64 is not a multiple of 'num_attention_heads' 5" in done.stderr
    assert str(path) in done.stderr
    assert "Traceback" not in done.stderr
