"""What the tests of the Hugging Face exports share: their files, stored values and check."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

from plmr.values import Array

HF = Path(__file__).resolve().parents[2] / "examples" / "hf"


class HfExports:
    """The exports under `examples/hf/`, read by ONNX name, and the comparison with torch."""

    @staticmethod
    def names(name: str) -> tuple[list[str], list[str]]:
        """The export's input and output names."""
        model = onnx.load(str(HF / f"{name}.onnx"))
        return [v.name for v in model.graph.input], [v.name for v in model.graph.output]

    @staticmethod
    def stored(name: str) -> tuple[dict[str, Array], dict[str, Array]]:
        """The stored inputs and torch's outputs of an export, by ONNX name."""
        inputs, outputs = HfExports.names(name)
        with np.load(HF / f"{name}.npz") as data:
            assert sorted(data.files) == sorted(inputs + outputs)
            return (
                {k: np.asarray(data[k]) for k in inputs},
                {k: np.asarray(data[k]) for k in outputs},
            )

    @staticmethod
    def assert_close(got: dict[str, Array], want: dict[str, Array], rtol: float) -> None:
        """Every output within `rtol` of torch's largest magnitude, as float32."""
        assert list(got) == list(want)
        for key, w in want.items():
            g = got[key]
            assert g.shape == w.shape, (key, g.shape, w.shape)
            assert g.dtype == np.float32, (key, g.dtype)
            scale = float(np.max(np.abs(w)))
            assert scale > 0.1, key
            err = float(np.max(np.abs(g.astype(np.float64) - w)))
            assert err <= rtol * scale, (
                f"{key}: max abs diff {err:.3g}, max |torch| {scale:.3g}"
            )


@pytest.fixture
def hf() -> type[HfExports]:
    """The exports' names, stored values and comparison (`HfExports`)."""
    return HfExports
