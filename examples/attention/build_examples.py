"""
Builds the attention examples of plmr's fusion (Neptune) level.

Run it from the repository root:

    .venv/bin/python examples/attention/build_examples.py

It writes, next to this file, ten graph-level attention variants (the benchmark suite of
the Neptune paper, scaled to run in seconds):

- prefill (many queries): `prefill_global`, `prefill_causal`, `prefill_alibi`,
  `prefill_gqa` (two query heads per KV head), `prefill_softcap` (`c·tanh(s/c)`),
  `prefill_window` (causal sliding window);
- decode (one query, a long KV cache): `decode_causal`, `decode_alibi`, `decode_gqa`,
  `decode_softcap`;

and `attention_div.onnx` / `attention_div.mlir`: attention as an ONNX exporter writes it
(Transpose + MatMul + Div + Add of a mask input + Softmax + MatMul), imported with
`plmr import`. Masks add `-1e9·relu(j - i)` (a large, finite penalty per masked position)
so that fully masked blocks stay finite.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = Path(__file__).resolve().parent

MASK = -1.0e9
"""Penalty per position a masked score is past the allowed range (finite)."""


@dataclass(frozen=True)
class Variant:
    """One attention operator: shapes and what it does to the scores."""

    name: str
    heads: int
    kv_heads: int
    queries: int
    keys: int
    dim: int
    causal: bool = False
    alibi: bool = False
    softcap: float | None = None
    window: int | None = None

    @property
    def group(self) -> int:
        return self.heads // self.kv_heads


VARIANTS = (
    Variant("prefill_global", 2, 2, 64, 64, 16),
    Variant("prefill_causal", 2, 2, 64, 64, 16, causal=True),
    Variant("prefill_alibi", 2, 2, 64, 64, 16, causal=True, alibi=True),
    Variant("prefill_gqa", 4, 2, 64, 64, 16, causal=True),
    Variant("prefill_softcap", 2, 2, 64, 64, 16, causal=True, softcap=50.0),
    Variant("prefill_window", 2, 2, 64, 64, 16, causal=True, window=16),
    Variant("decode_causal", 2, 2, 1, 256, 16, causal=True),
    Variant("decode_alibi", 2, 2, 1, 256, 16, causal=True, alibi=True),
    Variant("decode_gqa", 4, 2, 1, 256, 16, causal=True),
    Variant("decode_softcap", 2, 2, 1, 256, 16, causal=True, softcap=50.0),
)


def _f(x: float) -> str:
    """A float literal MLIR accepts (always with a dot or an exponent)."""
    text = f"{x:.17g}"
    return text if any(c in text for c in ".e") else f"{text}.0"


def _t(shape: tuple[int, ...]) -> str:
    return f"tensor<{'x'.join(map(str, shape))}{'x' if shape else ''}f32>"


def _dense(values: np.ndarray) -> str:
    def fmt(a: np.ndarray) -> str:
        if a.ndim == 0:
            return f"{float(a):.8e}"
        return "[" + ", ".join(fmt(x) for x in a) + "]"

    return f"dense<{fmt(values)}>"


class _Program:
    """Collects graph ops as text, naming values."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def op(self, name: str, text: str) -> str:
        self.lines.append(f"  %{name} = {text}")
        return f"%{name}"

    def constant(self, name: str, values: np.ndarray) -> str:
        return self.op(name, f"graph.constant {_dense(values)} : {_t(values.shape)}")


def attention_mlir(v: Variant) -> str:
    """The `graph` program of one variant."""
    b, hk, g, n, m, d = 1, v.kv_heads, v.group, v.queries, v.keys, v.dim
    grouped = g > 1
    q_shape = (b, hk, g, n, d) if grouped else (b, hk, n, d)
    kv_shape = (b, hk, m, d)
    s_shape = (*q_shape[:-1], m)
    o_shape = q_shape
    p = _Program()
    k, vv = "%k", "%v"
    if grouped:
        k = p.op("kg", f"graph.reshape %k : {_t(kv_shape)} -> {_t((b, hk, 1, m, d))}")
        vv = p.op("vg", f"graph.reshape %v : {_t(kv_shape)} -> {_t((b, hk, 1, m, d))}")
    kt = _t((b, hk, 1, m, d)) if grouped else _t(kv_shape)
    s = p.op(
        "s", f"graph.matmul %q, {k} transpose_b : ({_t(q_shape)}, {kt}) -> {_t(s_shape)}"
    )
    s = p.op("ss", f"graph.scale {s} by {_f(1 / math.sqrt(d))} : {_t(s_shape)}")
    if v.softcap is not None:
        c = v.softcap
        s = p.op("sc0", f"graph.scale {s} by {_f(1 / c)} : {_t(s_shape)}")
        s = p.op("sc1", f"graph.tanh {s} : {_t(s_shape)}")
        s = p.op("sc", f"graph.scale {s} by {_f(c)} : {_t(s_shape)}")
    # Positions: queries are the last n of the m keys (decode: the newest token).
    if v.causal or v.alibi or v.window:
        pq = p.constant("pos_q", np.arange(m - n, m, dtype=np.float32).reshape(n, 1))
        pk = p.constant("pos_k", np.arange(m, dtype=np.float32).reshape(1, m))
        dist = p.op(
            "dist", f"graph.sub {pk}, {pq} : ({_t((1, m))}, {_t((n, 1))}) -> {_t((n, m))}"
        )
        if v.alibi:
            slopes = np.array(
                [2.0 ** (-8.0 * (h + 1) / v.heads) for h in range(v.heads)], np.float32
            )
            sl_shape = (hk, g, 1, 1) if grouped else (hk, 1, 1)
            sl = p.constant("slopes", slopes.reshape(sl_shape))
            bias_shape = (*sl_shape[:-2], n, m)
            bias = p.op(
                "alibi",
                f"graph.mul {sl}, {dist} : ({_t(sl_shape)}, {_t((n, m))}) -> {_t(bias_shape)}",
            )
            s = p.op(
                "sb",
                f"graph.add {s}, {bias} : ({_t(s_shape)}, {_t(bias_shape)}) -> {_t(s_shape)}",
            )
        penalty = p.op("future", f"graph.relu {dist} : {_t((n, m))}")
        if v.window:
            back = p.op("back", f"graph.neg {dist} : {_t((n, m))}")
            limit = p.constant("limit", np.array(1.0 - v.window, np.float32))
            old = p.op(
                "old0",
                f"graph.add {back}, {limit} : ({_t((n, m))}, {_t(())}) -> {_t((n, m))}",
            )
            old = p.op("old", f"graph.relu {old} : {_t((n, m))}")
            penalty = p.op(
                "outside",
                f"graph.add {penalty}, {old} : ({_t((n, m))}, {_t((n, m))}) -> {_t((n, m))}",
            )
        mask = p.op("mask", f"graph.scale {penalty} by {MASK:.1e} : {_t((n, m))}")
        s = p.op(
            "sm", f"graph.add {s}, {mask} : ({_t(s_shape)}, {_t((n, m))}) -> {_t(s_shape)}"
        )
    prob = p.op("p", f"graph.softmax {s} : {_t(s_shape)}")
    vt = _t((b, hk, 1, m, d)) if grouped else _t(kv_shape)
    out = p.op("o", f"graph.matmul {prob}, {vv} : ({_t(s_shape)}, {vt}) -> {_t(o_shape)}")
    kind = "decode" if n == 1 else "prefill"
    header = (
        f"// {v.name}: {kind} attention, {v.heads} query heads / {v.kv_heads} KV heads, "
        f"{n} queries, {m} keys, head dim {d}"
    )
    extras = [
        x
        for x, on in (
            ("causal mask", v.causal),
            ("ALiBi", v.alibi),
            (f"softcap {v.softcap}", v.softcap is not None),
            (f"window {v.window}", v.window is not None),
        )
        if on
    ]
    if extras:
        header += f" ({', '.join(extras)})"
    args = (
        f'%q: {_t(q_shape)} {{plmr.name = "q"}}, %k: {_t(kv_shape)} {{plmr.name = "k"}}, '
        f'%v: {_t(kv_shape)} {{plmr.name = "v"}}'
    )
    body = "\n".join(p.lines)
    return (
        f"{header}\n// Generated by examples/attention/build_examples.py.\n"
        f'func.func @main({args}) -> ({_t(o_shape)} {{plmr.name = "o"}}) {{\n'
        f"{body}\n  func.return {out} : {_t(o_shape)}\n}}\n"
    )


def reference(v: Variant, q: np.ndarray, k: np.ndarray, vv: np.ndarray) -> np.ndarray:
    """The variant's semantics in numpy (float64), for checking the programs."""
    n, m = v.queries, v.keys
    if v.group > 1:
        k, vv = k[:, :, None], vv[:, :, None]
    s = np.matmul(q.astype(np.float64), np.swapaxes(k, -1, -2)) / math.sqrt(v.dim)
    if v.softcap is not None:
        s = v.softcap * np.tanh(s / v.softcap)
    dist = np.arange(m)[None, :] - np.arange(m - n, m)[:, None]
    if v.alibi:
        slopes = np.array([2.0 ** (-8.0 * (h + 1) / v.heads) for h in range(v.heads)])
        shape = (v.kv_heads, v.group, 1, 1) if v.group > 1 else (v.heads, 1, 1)
        s = s + slopes.reshape(shape) * dist
    if v.causal or v.alibi or v.window:
        penalty = np.maximum(dist, 0)
        if v.window:
            penalty = penalty + np.maximum(-dist + 1 - v.window, 0)
        s = s + MASK * penalty
    p = np.exp(s - s.max(-1, keepdims=True))
    p = p / p.sum(-1, keepdims=True)
    return np.matmul(p, vv)


def attention_div_onnx(heads: int = 2, seq: int = 16, dim: int = 8) -> onnx.ModelProto:
    """Attention as exported: Transpose, MatMul, Div by sqrt(d), Add mask, Softmax, MatMul."""
    shape = [1, heads, seq, dim]
    inputs = [
        helper.make_tensor_value_info("q", TensorProto.FLOAT, shape),
        helper.make_tensor_value_info("k", TensorProto.FLOAT, shape),
        helper.make_tensor_value_info("v", TensorProto.FLOAT, shape),
        helper.make_tensor_value_info("mask", TensorProto.FLOAT, [1, 1, seq, seq]),
    ]
    outputs = [helper.make_tensor_value_info("o", TensorProto.FLOAT, shape)]
    nodes = [
        helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2], name="transpose_k"),
        helper.make_node("MatMul", ["q", "kt"], ["scores"], name="qk"),
        helper.make_node("Div", ["scores", "sqrt_d"], ["scaled"], name="scale"),
        helper.make_node("Add", ["scaled", "mask"], ["masked"], name="add_mask"),
        helper.make_node("Softmax", ["masked"], ["probs"], axis=3, name="softmax"),
        helper.make_node("MatMul", ["probs", "v"], ["o"], name="pv"),
    ]
    sqrt_d = numpy_helper.from_array(np.array(math.sqrt(dim), np.float32), "sqrt_d")
    graph = helper.make_graph(nodes, "attention_div", inputs, outputs, [sqrt_d])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def main() -> None:
    from plmr.dialects.printing import module_text
    from plmr.frontend.onnx import import_onnx

    for v in VARIANTS:
        path = HERE / f"{v.name}.mlir"
        path.write_text(attention_mlir(v))
        print(f"wrote {path.relative_to(HERE.parent.parent)}")
    model = attention_div_onnx()
    onnx.save(model, str(HERE / "attention_div.onnx"))
    (HERE / "attention_div.mlir").write_text(module_text(import_onnx(model)))
    print("wrote examples/attention/attention_div.onnx and attention_div.mlir")


if __name__ == "__main__":
    main()
