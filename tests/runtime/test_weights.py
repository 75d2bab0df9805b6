"""
Weights files (`plmr.weight_io`) and weights by reference at run time: safetensors
written and read bit-exact (checked against the safetensors library), memory-mapped
reads, one clear error per missing or mismatched file, and a timing run that never opens
the files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file
from xdsl.dialects.builtin import ModuleOp

from plmr.dialects.context import make_context, parse_module
from plmr.errors import PlmrError
from plmr.passes.pipeline import CompileOptions, compile_module
from plmr.runtime.running import run_entry, select_entry
from plmr.weight_io import SafetensorsWriter, TensorRequest, WeightFiles

RNG = np.random.default_rng(0)
ARRAYS: dict[str, Any] = {
    "f32": RNG.standard_normal((3, 5)).astype(np.float32),
    "f16": RNG.standard_normal((7,)).astype(np.float16),
    "f64": RNG.standard_normal((2, 2, 2)).astype(np.float64),
    "i64": RNG.integers(-9, 9, (4, 3)).astype(np.int64),
    "i32": RNG.integers(-9, 9, (5,)).astype(np.int32),
    "bool": RNG.integers(0, 2, (6,)).astype(np.bool_),
}


def _request(path: Path, name: str, arr: Any, offset: int | None = None) -> TensorRequest:
    return TensorRequest(path, name, arr.dtype, arr.shape, offset)


def test_written_safetensors_read_by_the_library(tmp_path: Path):
    path = tmp_path / "w.safetensors"
    writer = SafetensorsWriter(path)
    for name, arr in ARRAYS.items():
        writer.add_array(name, arr)
    writer.write()
    stored = load_file(str(path))
    assert sorted(stored) == sorted(ARRAYS)
    for name, arr in ARRAYS.items():
        assert stored[name].dtype == arr.dtype
        np.testing.assert_array_equal(stored[name], arr)


def test_library_safetensors_mapped_bit_exact(tmp_path: Path):
    path = tmp_path / "w.safetensors"
    save_file(ARRAYS, str(path))
    files = WeightFiles()
    for name, arr in ARRAYS.items():
        got = files.map(_request(path, name, arr))
        assert isinstance(got, np.memmap)
        assert not got.flags.writeable
        assert got.dtype == arr.dtype
        np.testing.assert_array_equal(got, arr)


def test_raw_data_at_offsets(tmp_path: Path):
    path = tmp_path / "m.onnx.data"
    a, b = ARRAYS["f32"], ARRAYS["i64"]
    path.write_bytes(a.tobytes() + b"\0" * 4 + b.tobytes())
    files = WeightFiles()
    np.testing.assert_array_equal(files.map(_request(path, "a", a, 0)), a)
    np.testing.assert_array_equal(files.map(_request(path, "b", b, a.nbytes + 4)), b)


def test_a_rewritten_file_is_read_again(tmp_path: Path):
    path = tmp_path / "w.safetensors"
    files = WeightFiles()
    save_file({"a": np.zeros(4, np.float32)}, str(path))
    req = TensorRequest(path, "a", np.dtype("<f4"), (4,))
    np.testing.assert_array_equal(files.map(req), np.zeros(4))
    save_file({"b": np.zeros(2, np.float32), "a": np.ones(4, np.float32)}, str(path))
    np.testing.assert_array_equal(files.map(req), np.ones(4))


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("missing", r"weights file .*w.safetensors does not exist; re-run `plmr import`"),
        ("name", r"has no tensor of that name \(it holds 1\)"),
        ("shape", r"holds it as F32 \[3, 5\], the program expects F32 \[5, 3\]"),
        ("dtype", r"holds it as F32 \[3, 5\], the program expects I32 \[3, 5\]"),
        ("truncated", r"is truncated \(the tensor ends at byte \d+, the file has \d+\)"),
        ("header", r"is not a safetensors file \(header size \d+ bytes\)"),
        ("json", r"has a corrupt safetensors header"),
        ("raw", r"needs bytes \[8, 68\) but the file holds 60"),
    ],
)
def test_a_bad_file_is_one_error(tmp_path: Path, case: str, message: str):
    path = tmp_path / "w.safetensors"
    a = ARRAYS["f32"]
    save_file({"a": a}, str(path))
    req = _request(path, "a", a)
    if case == "missing":
        path.unlink()
    elif case == "name":
        req = _request(path, "b", a)
    elif case == "shape":
        req = TensorRequest(path, "a", a.dtype, (5, 3))
    elif case == "dtype":
        req = TensorRequest(path, "a", np.dtype("<i4"), a.shape)
    elif case == "truncated":
        path.write_bytes(path.read_bytes()[:-4])
    elif case == "header":
        path.write_bytes(b"\xff" * 16)
    elif case == "json":
        path.write_bytes(b"\x04\0\0\0\0\0\0\0{{{{")
    else:
        path = tmp_path / "m.onnx.data"
        path.write_bytes(a.tobytes())
        req = _request(path, "a", a, 8)
    with pytest.raises(PlmrError, match=message) as info:
        WeightFiles().map(req)
    text = str(info.value)
    assert str(path) in text
    assert "'a'" in text or "'b'" in text


PROGRAM = """\
func.func @main(%x: tensor<4x16xf32>) -> tensor<4x32xf32> {
  %w = graph.weight "fc.weight" in "FILE" : tensor<16x32xf32>
  %b = graph.weight "fc.bias" in "FILE" : tensor<32xf32>
  %y = graph.matmul %x, %w : (tensor<4x16xf32>, tensor<16x32xf32>) -> tensor<4x32xf32>
  %z = graph.add %y, %b : (tensor<4x32xf32>, tensor<32xf32>) -> tensor<4x32xf32>
  func.return %z : tensor<4x32xf32>
}
"""


def _program(path: Path) -> tuple[ModuleOp, dict[str, Any]]:
    values = {
        "fc.weight": RNG.standard_normal((16, 32)).astype(np.float32),
        "fc.bias": RNG.standard_normal(32).astype(np.float32),
    }
    save_file(values, str(path))
    return parse_module(PROGRAM.replace("FILE", str(path))), values


def test_compiled_program_runs_from_the_file_and_timing_never_opens_it(tmp_path: Path):
    path = tmp_path / "mlp.safetensors"
    module, values = _program(path)
    x = RNG.standard_normal((4, 16)).astype(np.float32)
    want = x @ values["fc.weight"] + values["fc.bias"]
    fn = select_entry(module, None)
    (graph_level,), _ = run_entry(module, fn, [x])
    np.testing.assert_array_equal(
        graph_level, (x @ values["fc.weight"]) + values["fc.bias"]
    )
    compile_module(make_context(), module, CompileOptions(grid=(2, 2)))
    program = select_entry(module, None)
    (got,), _ = run_entry(module, program, [x])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    path.unlink()
    _, report = run_entry(module, program, [x], mode="timing")
    assert report is not None
    assert report.cycles > 0
    with pytest.raises(PlmrError, match=r"weight 'fc.(weight|bias)'.*does not exist"):
        run_entry(module, program, [x])
