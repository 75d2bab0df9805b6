"""Shared by the tests of the graph rewrites: FileCheck inputs, semantics kept, torch's outputs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from plmr.dialects.context import make_context
from plmr.runtime.reference import evaluate_function
from plmr.runtime.running import functions, random_inputs, select_function

ROOT = Path(__file__).resolve().parents[2]
HF = ROOT / "examples" / "hf"


class Rewrites:
    """What a rewrite's tests check: its FileCheck inputs, random inputs, HF exports."""

    @staticmethod
    def chunks(name: str) -> list[object]:
        """The `// -----` chunks of `tests/filecheck/passes/NAME.mlir`, as parameters."""
        path = ROOT / "tests" / "filecheck" / "passes" / f"{name}.mlir"
        texts = path.read_text().split("// -----")
        return [pytest.param(t, id=f"chunk{i}") for i, t in enumerate(texts)]

    @staticmethod
    def assert_keeps_semantics(module: ModuleOp, rewrite: ModulePass) -> None:
        """Every function of `module` gives the same results on random inputs after `rewrite`."""
        names = [fn.sym_name.data for fn in functions(module)]
        args = {
            n: random_inputs(select_function(module, n), i) for i, n in enumerate(names)
        }
        before = {n: evaluate_function(module, n, args[n]) for n in names}
        rewrite.apply(make_context(), module)
        module.verify()
        for n in names:
            after = evaluate_function(module, n, args[n])
            assert len(after) == len(before[n])
            for a, b in zip(before[n], after, strict=True):
                assert a.shape == b.shape
                assert a.dtype == b.dtype
                scale = float(np.abs(a).max())
                np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-5 * scale)

    @staticmethod
    def assert_torch_outputs(module: ModuleOp, export: str) -> None:
        """`@main` of `module` gives torch's stored logits and caches of `examples/hf/EXPORT`."""
        fn = select_function(module, None)
        names = [a.name_hint for a in fn.body.block.args]
        with np.load(HF / f"{export}.npz") as data:
            args = [np.asarray(data[n]) for n in names]
            want = [
                np.asarray(data[k])
                for k in data
                if k == "logits" or k.startswith("present")
            ]
        got = evaluate_function(module, fn.sym_name.data, args)
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            assert g.shape == w.shape
            scale = max(1.0, float(np.max(np.abs(w))))
            assert float(np.max(np.abs(g - w))) <= 1e-4 * scale


@pytest.fixture
def rewrites() -> type[Rewrites]:
    """The shared checks of the graph rewrites' tests (`Rewrites`)."""
    return Rewrites
