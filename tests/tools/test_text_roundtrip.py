"""
Programs with infinities and NaN, through files at every step: `plmr import` to a file,
`plmr compile` of that file to a file, `plmr run` of the compiled file, compared with
ONNX's reference evaluator (`onnx.reference`). A compiled file once held
`dense<[0xff800000, ...]>` that read back as 4.29e9: an additive `-inf` mask then gave
a wrong softmax with exit status 0.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

Array = npt.NDArray[Any]

BACKEND = Path(onnx.__file__).resolve().parent / "backend" / "test" / "data"


def _mask_model(mask: Array) -> onnx.ModelProto:
    """y = softmax(x + mask) over the last axis: an additive attention mask."""
    shape = list(mask.shape)
    graph = helper.make_graph(
        [
            helper.make_node("Add", ["x", "mask"], ["s"]),
            helper.make_node("Softmax", ["s"], ["y"], axis=-1),
        ],
        "masked_softmax",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
        [numpy_helper.from_array(mask.astype(np.float32), "mask")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _masks() -> dict[str, Array]:
    some = np.zeros((4, 4), np.float32)
    some[0, 0] = some[1, 3] = some[2, 1] = -np.inf
    some[3, :3] = -np.inf
    minimum = np.zeros((4, 4), np.float32)
    minimum[:, ::2] = np.finfo(np.float32).min
    nan = np.zeros((4, 4), np.float32)
    nan[2, 2] = np.nan
    nan[0, 1] = -0.0
    return {
        "some-inf": some,
        "all-inf-splat": np.full((4, 4), -np.inf, np.float32),
        "finfo-min": minimum,
        "nan": nan,
    }


def _same(got: Array, want: Array) -> None:
    """Equal within 1e-5, NaN where the reference has NaN, infinities equal."""
    assert got.shape == want.shape
    assert np.array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, equal_nan=True)


@pytest.mark.parametrize("name", sorted(_masks()))
def test_masked_softmax_compiled_to_a_file_matches_onnx(
    name: str, cli: Any, tmp_path: Path
):
    mask = _masks()[name]
    model = _mask_model(mask)
    onnx.save(model, tmp_path / "m.onnx")
    x = np.random.default_rng(0).standard_normal(mask.shape).astype(np.float32)
    np.savez(tmp_path / "x.npz", x=x)
    (want,) = ReferenceEvaluator(model).run(None, {"x": x})

    code, _, err = cli.run(
        ["import", str(tmp_path / "m.onnx"), "-o", str(tmp_path / "m.mlir")]
    )
    assert code == 0, err
    code, _, err = cli.run(
        [
            "compile",
            str(tmp_path / "m.mlir"),
            "--grid",
            "2x2",
            "--no-substitute",
            "-o",
            str(tmp_path / "o.mlir"),
        ]
    )
    assert code == 0, err
    for program in ("m.mlir", "o.mlir"):
        out = tmp_path / f"{program}.npz"
        code, _, err = cli.run(
            [
                "run",
                str(tmp_path / program),
                "--inputs",
                str(tmp_path / "x.npz"),
                "--output",
                str(out),
            ]
        )
        assert code == 0, err
        with np.load(out) as results:
            _same(results["y"], np.asarray(want))


def test_the_compiled_file_reads_an_infinity_as_an_infinity(cli: Any, tmp_path: Path):
    onnx.save(_mask_model(_masks()["some-inf"]), tmp_path / "m.onnx")
    assert (
        cli.run(["import", str(tmp_path / "m.onnx"), "-o", str(tmp_path / "m.mlir")])[0]
        == 0
    )
    argv = ["compile", str(tmp_path / "m.mlir"), "--grid", "2x2", "--no-substitute"]
    assert cli.run([*argv, "-o", str(tmp_path / "o.mlir")])[0] == 0
    text = (tmp_path / "o.mlir").read_text()
    # The bit pattern of -inf, which the parser reads as a bit pattern.
    assert "0xff800000" in text
    assert "4.28657869e+09" not in text


@pytest.mark.parametrize(
    "model",
    [
        "test_MaxPool1d_stride_padding_dilation",
        "test_MaxPool2d_stride_padding_dilation",
        "test_MaxPool3d_stride_padding",
    ],
)
def test_padded_max_pool_imported_to_a_file_runs(model: str, cli: Any, tmp_path: Path):
    """The padding of a max-pool is `graph.pad ... value = -inf`, printed and read back."""
    folder = BACKEND / "pytorch-converted" / model
    proto = onnx.load(str(folder / "model.onnx"))
    data = folder / "test_data_set_0"
    x = numpy_helper.to_array(onnx.load_tensor(str(data / "input_0.pb")))
    want = numpy_helper.to_array(onnx.load_tensor(str(data / "output_0.pb")))
    code, _, err = cli.run(
        ["import", str(folder / "model.onnx"), "-o", str(tmp_path / "m.mlir")]
    )
    assert code == 0, err
    assert "value = 0xfff0000000000000" in (tmp_path / "m.mlir").read_text()
    np.savez(tmp_path / "x.npz", **{proto.graph.input[0].name: x})
    out = tmp_path / "y.npz"
    code, _, err = cli.run(
        [
            "run",
            str(tmp_path / "m.mlir"),
            "--inputs",
            str(tmp_path / "x.npz"),
            "--output",
            str(out),
        ]
    )
    assert code == 0, err
    with np.load(out) as results:
        (got,) = [results[k] for k in results.files]
    np.testing.assert_allclose(got, want, rtol=1e-6)
