"""
What the tests of the graph rewrites share: their FileCheck inputs run on random inputs
before and after the rewrite, the Hugging Face exports compared with torch, and small
LLaMA exports written and imported.

A test module that sets `FILECHECK_INPUT` (a file under tests/filecheck/passes) gets its
tests taking `filecheck_chunk` run once per `// -----` chunk of that file.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

from plmr.frontend.onnx import import_onnx_file
from plmr.models.llama_onnx import LlamaOnnxConfig, write_llama_onnx
from plmr.runtime.reference import Array, evaluate_function
from plmr.runtime.running import functions, random_inputs, select_function

ROOT = Path(__file__).resolve().parents[2]
FILECHECK = ROOT / "tests" / "filecheck" / "passes"
HF = ROOT / "examples" / "hf"


def filecheck_chunks(name: str) -> list[str]:
    """The `// -----` chunks of the FileCheck input `name`."""
    return (FILECHECK / name).read_text().split("// -----")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "filecheck_chunk" not in metafunc.fixturenames:
        return
    texts = filecheck_chunks(metafunc.module.FILECHECK_INPUT)
    ids = [f"chunk{i}" for i in range(len(texts))]
    metafunc.parametrize("filecheck_chunk", texts, ids=ids)


@dataclass
class Semantics:
    """Every function of a module evaluated on random inputs (seed: its position)."""

    args: dict[str, list[Array]]
    results: dict[str, list[Array]]

    @staticmethod
    def of(module: ModuleOp) -> Semantics:
        names = [fn.sym_name.data for fn in functions(module)]
        args = {
            n: random_inputs(select_function(module, n), i) for i, n in enumerate(names)
        }
        return Semantics(args, {n: evaluate_function(module, n, args[n]) for n in names})

    def assert_kept(self, module: ModuleOp, rtol: float = 1e-5) -> None:
        """`module` (rewritten) gives the same results, type for type, within `rtol`."""
        for name, before in self.results.items():
            after = evaluate_function(module, name, self.args[name])
            assert len(after) == len(before)
            for a, b in zip(before, after, strict=True):
                assert a.shape == b.shape
                assert a.dtype == b.dtype
                np.testing.assert_allclose(
                    b, a, rtol=rtol, atol=rtol * float(np.abs(a).max())
                )


class RewriteCheck:
    """The checks of a graph rewrite (the `rewrite_check` fixture)."""

    chunks = staticmethod(filecheck_chunks)
    semantics = staticmethod(Semantics.of)

    @staticmethod
    def torch_outputs(
        module: ModuleOp,
        export: str,
        outputs: Sequence[str] | None = None,
        rtol: float = 1e-4,
    ) -> None:
        """
        The main function of `module` on the stored inputs of `examples/hf/<export>.npz`
        (by argument name) gives torch's `outputs` (default: the logits and the caches)
        within `rtol` of each one's largest magnitude (at least 1).
        """
        fn = select_function(module, None)
        names = [a.name_hint for a in fn.body.block.args]
        with np.load(HF / f"{export}.npz") as data:
            args = [np.asarray(data[n]) for n in names]
            keys = outputs or [k for k in data if k == "logits" or k.startswith("present")]
            want = [np.asarray(data[k]) for k in keys]
        got = evaluate_function(module, fn.sym_name.data, args)
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            assert g.shape == w.shape
            bound = rtol * max(1.0, float(np.max(np.abs(w))))
            assert float(np.max(np.abs(g - w))) <= bound


@pytest.fixture
def rewrite_check() -> type[RewriteCheck]:
    """`RewriteCheck`: FileCheck chunks, semantics kept, torch's outputs."""
    return RewriteCheck


def import_llama_export(directory: Path, config: LlamaOnnxConfig) -> ModuleOp:
    """
    `config` exported to `directory` (named by its layer count, random weights in
    external data) and imported: every projection a weight by reference.
    """
    path = directory / f"llama{config.layers}.onnx"
    write_llama_onnx(path, config)
    return import_onnx_file(str(path))


@pytest.fixture(scope="session")
def llama_export() -> Callable[[Path, LlamaOnnxConfig], ModuleOp]:
    """`llama_export(directory, config)`: `import_llama_export`."""
    return import_llama_export
