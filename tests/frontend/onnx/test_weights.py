"""
Weights by reference at import: large initializers become `graph.weight`s (the model's
external data in place, or a safetensors file written beside the program), their bytes
are never read at import, and the values are bit-exact where they are read.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator
from safetensors.numpy import load_file
from xdsl.dialects.builtin import ModuleOp

from plmr.dialects import graph
from plmr.dialects.graph_weights import weight_ops
from plmr.errors import PlmrError
from plmr.frontend.onnx import WeightsOptions, import_onnx_file
from plmr.runtime.reference import evaluate_function
from plmr.runtime.weights import load_weight

Array = Any


def _mlp(kit: Any, rng: np.random.Generator) -> tuple[onnx.ModelProto, dict[str, Array]]:
    """x @ Transpose(w1) + b, relu, @ w2: two large weights, a small bias."""
    inits = {
        "w1": rng.standard_normal((48, 32)).astype(np.float32),  # 6 KiB
        "b": rng.standard_normal(48).astype(np.float32),  # 192 B
        "w2": rng.standard_normal((48, 40)).astype(np.float32),  # 7.5 KiB
    }
    nodes = [
        helper.make_node("Transpose", ["w1"], ["w1t"], perm=[1, 0]),
        helper.make_node("MatMul", ["x", "w1t"], ["h"]),
        helper.make_node("Add", ["h", "b"], ["hb"]),
        helper.make_node("Relu", ["hb"], ["r"]),
        helper.make_node("MatMul", ["r", "w2"], ["out"]),
    ]
    x = rng.standard_normal((4, 32)).astype(np.float32)
    return kit.model(nodes, {"x": x}, ["out"], inits), {"x": x, **inits}


def _save_external(model: onnx.ModelProto, path: Path) -> Path:
    onnx.save(
        model,
        str(path),
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location=path.name + ".data",
        size_threshold=1024,
    )
    return path.with_name(path.name + ".data")


def _run(module: ModuleOp, x: Array) -> Array:
    (out,) = evaluate_function(module, "main", [x])
    return out


def _refs(module: ModuleOp) -> dict[str, Any]:
    return {ref.name: ref for _, ref in weight_ops(module)}


def test_external_data_is_referenced_in_place(kit: Any, tmp_path: Path):
    model, values = _mlp(kit, np.random.default_rng(0))
    data = _save_external(model, tmp_path / "mlp.onnx")
    module = import_onnx_file(str(tmp_path / "mlp.onnx"))
    refs = _refs(module)
    assert sorted(refs) == ["w1", "w2"]  # the 192-byte bias stays inline
    for name, ref in refs.items():
        assert ref.file == str(data.resolve())
        assert ref.offset is not None
        got = load_weight(ref)
        assert isinstance(got, np.memmap)
        np.testing.assert_array_equal(got, values[name])  # bit-exact
    assert sum(isinstance(op, graph.ConstantOp) for op in module.walk()) == 1
    want = ReferenceEvaluator(str(tmp_path / "mlp.onnx")).run(None, {"x": values["x"]})[0]
    np.testing.assert_allclose(_run(module, values["x"]), want, rtol=1e-5, atol=1e-5)


def test_a_weight_is_not_read_at_import(kit: Any, tmp_path: Path):
    """The transpose of a weight stays an op; the values come from the file at run time."""
    model, values = _mlp(kit, np.random.default_rng(1))
    data = _save_external(model, tmp_path / "mlp.onnx")
    module = import_onnx_file(str(tmp_path / "mlp.onnx"))
    transposes = [op for op in module.walk() if isinstance(op, graph.TransposeOp)]
    assert len(transposes) == 1
    assert isinstance(transposes[0].input.owner, graph.WeightOp)
    # New bytes in the data file after import: the program computes with them.
    raw = np.fromfile(data, dtype="<f4")
    np.negative(raw).tofile(data)
    x = values["x"]
    r = np.maximum(x @ -values["w1"].T + values["b"], 0)
    np.testing.assert_allclose(_run(module, x), r @ -values["w2"], rtol=1e-5, atol=1e-5)


def test_embedded_weights_go_to_a_safetensors_file(kit: Any, tmp_path: Path):
    model, values = _mlp(kit, np.random.default_rng(2))
    onnx.save(model, str(tmp_path / "mlp.onnx"))
    out = tmp_path / "out" / "mlp.safetensors"
    out.parent.mkdir()
    module = import_onnx_file(str(tmp_path / "mlp.onnx"), weights=WeightsOptions(out=out))
    refs = _refs(module)
    assert sorted(refs) == ["w1", "w2"]
    assert all(r.file == str(out.resolve()) and r.offset is None for r in refs.values())
    stored = load_file(str(out))  # the safetensors library reads what plmr wrote
    assert sorted(stored) == ["w1", "w2"]
    for name in ("w1", "w2"):
        np.testing.assert_array_equal(stored[name], values[name])
        np.testing.assert_array_equal(load_weight(refs[name]), values[name])
    want = ReferenceEvaluator(model).run(None, {"x": values["x"]})[0]
    np.testing.assert_allclose(_run(module, values["x"]), want, rtol=1e-5, atol=1e-5)


def test_inline_limit_and_no_file(kit: Any, tmp_path: Path):
    model, _ = _mlp(kit, np.random.default_rng(3))
    onnx.save(model, str(tmp_path / "mlp.onnx"))
    # Without a file to write, embedded initializers stay inline.
    module = import_onnx_file(str(tmp_path / "mlp.onnx"))
    assert not _refs(module)
    # Above the limit only.
    out = tmp_path / "w.safetensors"
    options = WeightsOptions(inline_limit=7000, out=out)
    module = import_onnx_file(str(tmp_path / "mlp.onnx"), weights=options)
    assert sorted(_refs(module)) == ["w2"]


def test_folded_constants_above_the_limit_go_to_the_file(kit: Any, tmp_path: Path):
    """A node without a handler reads the weight (here Hardmax, folded at import)."""
    rng = np.random.default_rng(4)
    table = rng.standard_normal((64, 16)).astype(np.float32)
    nodes = [
        helper.make_node("Hardmax", ["table"], ["onehot"], axis=1),
        helper.make_node("MatMul", ["x", "onehot"], ["out"]),
    ]
    x = rng.standard_normal((2, 64)).astype(np.float32)
    model = kit.model(nodes, {"x": x}, ["out"], {"table": table})
    _save_external(model, tmp_path / "m.onnx")
    out = tmp_path / "m.safetensors"
    module = import_onnx_file(str(tmp_path / "m.onnx"), weights=WeightsOptions(out=out))
    refs = _refs(module)
    assert sorted(refs) == ["onehot"]
    want = ReferenceEvaluator(str(tmp_path / "m.onnx")).run(None, {"x": x})[0]
    np.testing.assert_array_equal(
        load_file(str(out))["onehot"],
        (table == table.max(1, keepdims=True)).astype(np.float32),
    )
    np.testing.assert_allclose(_run(module, x), want, rtol=1e-6)


def test_truncated_external_data_is_one_error(kit: Any, tmp_path: Path):
    model, _ = _mlp(kit, np.random.default_rng(5))
    data = _save_external(model, tmp_path / "mlp.onnx")
    data.write_bytes(data.read_bytes()[:1000])
    with pytest.raises(
        PlmrError, match=r"initializer 'w\d'.*beyond the end of .*mlp.onnx.data"
    ):
        import_onnx_file(str(tmp_path / "mlp.onnx"))


def test_nothing_is_written_when_the_import_fails(kit: Any, tmp_path: Path):
    rng = np.random.default_rng(6)
    w = rng.standard_normal((32, 32)).astype(np.float32)
    nodes = [kit.node("MatMul", ["x", "w"]), helper.make_node("Hardmax", ["out"], ["y"])]
    x = rng.standard_normal((2, 32)).astype(np.float32)
    model = kit.model(nodes, {"x": x}, ["y"], {"w": w})
    onnx.save(model, str(tmp_path / "m.onnx"))
    out = tmp_path / "m.safetensors"
    with pytest.raises(PlmrError, match="Hardmax"):
        import_onnx_file(str(tmp_path / "m.onnx"), weights=WeightsOptions(out=out))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]


_MEASURE = textwrap.dedent(
    """
    import json, sys, time, tracemalloc
    from plmr.dialects.printing import module_text
    from plmr.frontend.onnx import import_onnx_file
    tracemalloc.start()
    start = time.perf_counter()
    text = module_text(import_onnx_file(sys.argv[1]))
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1]
    print(json.dumps({"seconds": seconds, "peak": peak, "ir": len(text)}))
    """
)


def test_a_wide_layer_imports_in_little_time_and_memory(tmp_path: Path):
    """
    A LLaMA layer of hidden size 1536 (FFN 4096, 12/4 heads, vocabulary 2048): 126 MB of
    weights in external data. The import (in a fresh process) allocates well under a
    tenth of that and prints kilobytes of IR.
    """
    from plmr.models.llama_onnx import LlamaOnnxConfig, write_llama_onnx

    config = LlamaOnnxConfig(hidden=1536, heads=12, kv_heads=4, ffn=4096, vocab=2048)
    path = tmp_path / "layer.onnx"
    data = write_llama_onnx(path, config)
    assert data.stat().st_size >= config.weight_bytes() - 64 * 1024 > 120e6
    proc = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(path)], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    measured = json.loads(proc.stdout)
    assert measured["ir"] < 64 * 1024, measured
    assert measured["peak"] < 8e6, measured  # bytes allocated at most, weights: 126e6
    assert measured["seconds"] < 30, measured


def test_the_ir_of_a_layer_does_not_grow_with_its_width(tmp_path: Path):
    """
    The same decoder step (a token over a cache of 16 positions) at hidden sizes 384 and
    1536: 4 times the width, about 10 times the weights (by reference at both widths), an
    IR no larger.
    """
    from plmr.dialects.printing import module_text
    from plmr.models.llama_onnx import LlamaOnnxConfig, write_llama_onnx

    texts: list[str] = []
    for hidden in (384, 1536):
        config = LlamaOnnxConfig(
            hidden=hidden, heads=4, kv_heads=2, ffn=1024, vocab=512, seq=1, past=16
        )
        path = tmp_path / f"h{hidden}.onnx"
        write_llama_onnx(path, config)
        module = import_onnx_file(str(path))
        assert len(list(weight_ops(module))) >= 12  # 9 in the layer, embedding, norm, head
        texts.append(module_text(module))
    narrow, wide = texts
    assert len(wide) < 16 * 1024
    # Wider, the rotary tables (head_dim 384) go by reference too: no larger an IR.
    assert len(wide) <= 1.05 * len(narrow), (len(narrow), len(wide))
