"""
Tests of `neptune-fuse`: differential (reference semantics before and after, random
inputs) on every bundled example, the fused structures (online softmax, FlashAttention,
FlashDecoding), the strategy choice, attention in the forms ONNX exporters write, remarks
for what cannot be repaired, and errors for bad options.
"""

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, StringAttr

from plmr.dialects.context import load_module, make_context, parse_module
from plmr.dialects.loop import REMARK_ATTR, NestOp, ReadOp
from plmr.errors import PlmrError
from plmr.frontend.onnx import import_onnx
from plmr.lowering.graph_to_loop import ConvertGraphToLoopPass
from plmr.passes.kv_state import kv_state
from plmr.passes.neptune.fuse import NeptuneFusePass
from plmr.passes.pipeline import CompileOptions, graph_passes, loop_passes
from plmr.runtime.reference import evaluate_function
from plmr.runtime.running import random_inputs, select_function
from plmr.validate.check_each import CheckOptions, check_passes

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = sorted((ROOT / "examples" / "onnx").glob("*.mlir")) + sorted(
    (ROOT / "examples" / "graph").glob("*.mlir")
)


def nests(module: ModuleOp) -> list[NestOp]:
    fn = select_function(module, None)
    return [op for op in fn.body.block.ops if isinstance(op, NestOp)]


def fuse_and_compare(
    module: ModuleOp, **options: str | int | bool
) -> tuple[ModuleOp, int, int]:
    """Lowers and fuses; checks the result; returns the module and nest counts."""
    fn = select_function(module, None)
    name = fn.sym_name.data
    args = random_inputs(fn, 0)
    want = evaluate_function(module, name, args)
    ConvertGraphToLoopPass().apply(Context(), module)
    before = len(nests(module))
    NeptuneFusePass(remarks=False, **options).apply(Context(), module)  # pyright: ignore
    module.verify()
    got = evaluate_function(module, name, args)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5 * float(np.abs(w).max()))
    return module, before, len(nests(module))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_fusion_preserves_the_semantics_of_every_example(path: Path):
    fuse_and_compare(load_module(path))


SOFTMAX = """
func.func @main(%s: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %p = graph.softmax %s : tensor<4x8xf32>
  func.return %p : tensor<4x8xf32>
}
"""


def test_softmax_becomes_the_online_softmax():
    module, before, after = fuse_and_compare(parse_module(SOFTMAX))
    assert (before, after) == (4, 2)
    fused = nests(module)[0]
    assert [r.name_hint for r in fused.res] == ["p_max", "p_sum"]
    assert "math.exp" in str(fused)


def test_attention_becomes_flash_attention():
    module, before, after = fuse_and_compare(
        load_module(ROOT / "examples" / "graph" / "softmax_attention.mlir")
    )
    assert (before, after) == (7, 2)
    fused = nests(module)[0]
    assert [str(t) for t in fused.res.types] == [
        "tensor<16xf32>",
        "tensor<16xf32>",
        "tensor<16x32xf32>",
    ]
    inner = [op for op in fused.body.block.ops if isinstance(op, NestOp)]
    assert [n.is_reduction for n in inner] == [True, False]  # Q·Kᵀ, then acc update


DECODE = """
func.func @main(%q: tensor<2x1x8xf32>, %k: tensor<2x64x8xf32>, %v: tensor<2x64x8xf32>) -> tensor<2x1x8xf32> {
  %s = graph.matmul %q, %k transpose_b : (tensor<2x1x8xf32>, tensor<2x64x8xf32>) -> tensor<2x1x64xf32>
  %p = graph.softmax %s : tensor<2x1x64xf32>
  %o = graph.matmul %p, %v : (tensor<2x1x64xf32>, tensor<2x64x8xf32>) -> tensor<2x1x8xf32>
  func.return %o : tensor<2x1x8xf32>
}
"""


def test_auto_picks_split_k_for_decode():
    module, _, after = fuse_and_compare(parse_module(DECODE))
    assert after == 5
    chunked = nests(module)[0]
    assert chunked.extents == (2, 1, 4, 16)
    assert chunked.dims[2].name_hint == "chunk"


@pytest.mark.parametrize(("strategy", "count"), [("rolling", 2), ("split-k", 5)])
def test_the_strategy_can_be_forced(strategy: str, count: int):
    _, _, after = fuse_and_compare(parse_module(DECODE), strategy=strategy, chunks=8)
    assert after == count
    _, _, after = fuse_and_compare(
        load_module(ROOT / "examples" / "graph" / "softmax_attention.mlir"),
        strategy=strategy,
    )
    assert after == count


@pytest.mark.parametrize(
    "path",
    [
        ROOT / "examples" / "onnx" / "attention.mlir",
        ROOT / "examples" / "attention" / "attention_div.mlir",
    ],
    ids=lambda p: p.name,
)
def test_attention_imported_from_onnx_fuses(path: Path):
    module, _, _ = fuse_and_compare(load_module(path))
    fused = [n for n in nests(module) if len(n.res) == 3]
    assert len(fused) == 1
    assert [len(n.res) for n in nests(module)].count(1) == len(nests(module)) - 1


LAYERNORM = """
func.func @main(%x: tensor<4x16xf32>, %g: tensor<16xf32>) -> tensor<4x16xf32> {
  %y = graph.layernorm %x, %g : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  func.return %y : tensor<4x16xf32>
}
"""


def test_no_repair_leaves_a_remark(capsys: pytest.CaptureFixture[str]):
    module = parse_module(LAYERNORM)
    ConvertGraphToLoopPass().apply(Context(), module)
    NeptuneFusePass().apply(Context(), module)
    remarks = [
        n.attributes[REMARK_ATTR] for n in nests(module) if REMARK_ATTR in n.attributes
    ]
    assert len(nests(module)) == 3
    assert len(remarks) == 1
    assert isinstance(remarks[0], StringAttr)
    assert "mixes the unfinished y_sum" in remarks[0].data
    assert "neptune-fuse: remark: not fused" in capsys.readouterr().err


def test_fusing_twice_changes_nothing_more():
    module, _, after = fuse_and_compare(parse_module(SOFTMAX))
    text = str(module)
    NeptuneFusePass(remarks=False).apply(Context(), module)
    assert len(nests(module)) == after
    assert str(module) == text


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"strategy": "fastest"}, "unknown strategy 'fastest'"),
        ({"chunks": 0}, "chunks must be positive"),
        ({"strategy": "split-k", "chunks": 3}, "chunk count divides"),
    ],
)
def test_bad_options_are_errors(options: dict[str, str | int], message: str):
    module = parse_module(SOFTMAX)
    ConvertGraphToLoopPass().apply(Context(), module)
    with pytest.raises(PlmrError, match=message):
        NeptuneFusePass(**options).apply(Context(), module)  # pyright: ignore


def test_functions_are_fused_independently():
    module = parse_module(SOFTMAX.replace("@main", "@a") + SOFTMAX.replace("@main", "@b"))
    ConvertGraphToLoopPass().apply(Context(), module)
    NeptuneFusePass(remarks=False).apply(Context(), module)
    for fn in module.ops:
        assert isinstance(fn, func.FuncOp)
        assert sum(isinstance(op, NestOp) for op in fn.body.block.ops) == 2


STORED_KEYS = """
func.func @main(%q: tensor<16x32xf32>, %k: tensor<64x32xf32>, %c: tensor<64x32xf32>,
                %v: tensor<64x32xf32>) -> (tensor<16x32xf32>, tensor<64x32xf32>) {
  %kr = graph.mul %k, %c : (tensor<64x32xf32>, tensor<64x32xf32>) -> tensor<64x32xf32>
  %s = graph.matmul %q, %kr transpose_b : (tensor<16x32xf32>, tensor<64x32xf32>) -> tensor<16x64xf32>
  %p = graph.softmax %s axis = 1 : tensor<16x64xf32>
  %o = graph.matmul %p, %v : (tensor<16x64xf32>, tensor<64x32xf32>) -> tensor<16x32xf32>
  %kk = graph.relu %kr : tensor<64x32xf32>
  %w = graph.matmul %q, %kk transpose_b : (tensor<16x32xf32>, tensor<64x32xf32>) -> tensor<16x64xf32>
  %u = graph.matmul %w, %v : (tensor<16x64xf32>, tensor<64x32xf32>) -> tensor<16x32xf32>
  %out = graph.add %o, %u : (tensor<16x32xf32>, tensor<16x32xf32>) -> tensor<16x32xf32>
  func.return %out, %kr : tensor<16x32xf32>, tensor<64x32xf32>
}
"""


def test_a_stored_map_is_read_not_recomputed():
    module, _, _ = fuse_and_compare(parse_module(STORED_KEYS))
    by_name = {r.name_hint: n for n in nests(module) for r in n.results}
    # %kr is returned, so it stays a nest that the reductions read; %kk is not, so it
    # is recomputed inside its reader.
    assert "kr" in by_name
    assert "kk" not in by_name
    kr = by_name["kr"].results[0]
    reads = [op for op in module.walk() if isinstance(op, ReadOp) and op.source is kr]
    assert len(reads) >= 2  # the attention's scores and the recomputed relu


def test_a_mask_of_minus_1e9_stays_inside_the_exponential():
    """
    A one-layer decode step whose mask is built on the wafer, `(1 - valid)·(-1e9)`
    (`graph-kv-state`): sympy writes `exp(s - 1e9)` as `exp(-1e9)·exp(s)`, and pulling
    the constant out of the reduction built `0·inf`, NaN in every logit. The factor is
    now left in place; the fused step equals the unfused one on random inputs.
    """
    path = ROOT / "examples" / "decode" / "build_examples.py"
    spec = importlib.util.spec_from_file_location("decode_examples_fuse", path)
    assert spec is not None
    assert spec.loader is not None
    ex = importlib.util.module_from_spec(spec)
    sys.modules["decode_examples_fuse"] = ex
    spec.loader.exec_module(ex)
    sz = ex.Sizes(layers=1)
    module = import_onnx(ex.build("decode", ex.weights(0, sz), sz))
    kv_state(module)
    opts = CompileOptions(grid=(2, 4), substitute=False)
    checks = check_passes(
        make_context(),
        module,
        [*graph_passes(opts), *loop_passes(opts)],
        CheckOptions(),
    )
    fused = [c for c in checks if c.spec.startswith("neptune-fuse")]
    assert len(fused) == 1
    assert fused[0].error is not None
    assert fused[0].error <= 1e-4


NON_FINITE = """
func.func @main(%a: tensor<8x4xf32>, %b: tensor<8x4xf32>) -> tensor<8x8xf32> {
  %z = arith.constant 0.000000e+00 : f32
  %n = loop.nest (%i, %j, %k) to (8, 8, 4) [parallel, parallel, reduction]
      init(%acc = %z : f32) -> tensor<8x8xf32> {
    %x = loop.read %a[%j, %k] : tensor<8x4xf32>
    %c = arith.constant CONST : f32
    %d = arith.subf %x, %c : f32
    %y = loop.read %b[%i, %k] : tensor<8x4xf32>
    %p = arith.mulf %y, %y : f32
    %m = arith.maximumf %d, %p : f32
    %s = arith.addf %acc, %m : f32
    loop.yield %s : f32
  }
  func.return %n : tensor<8x8xf32>
}
"""


@pytest.mark.parametrize(
    ("const", "want"),
    [("0x7FC00000", "nan"), ("0x7F800000", "finite"), ("0xFF800000", "inf")],
)
def test_non_finite_constants_are_left_as_they_are(const: str, want: str):
    """
    A NaN or ±inf constant in a body (the fuzzer's `x - NaN` under a `maximumf`) is a
    leaf of the symbolic form: sympy cannot order NaN, so modelling it stopped the pass
    with a ValueError. The fused program computes what the unfused one does.
    """
    module = parse_module(NON_FINITE.replace("CONST", const))
    fn = select_function(module, None)
    args = random_inputs(fn, 0)
    before = evaluate_function(module, "main", args)
    NeptuneFusePass(remarks=False).apply(Context(), module)  # pyright: ignore
    module.verify()
    after = evaluate_function(module, "main", args)
    np.testing.assert_array_equal(after[0], before[0])
    first = float(before[0].reshape(-1)[0])
    assert (str(first) if not np.isfinite(first) else "finite") == want
