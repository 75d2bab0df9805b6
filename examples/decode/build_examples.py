"""
Builds a tiny decoder's prefill and decode-step ONNX exports, in the form torch.onnx and
Optimum give them, and the greedy tokens ONNX's own evaluator generates with them.

Regenerate from the repository root (onnx and numpy only):

    .venv/bin/python examples/decode/build_examples.py

The model (seeded random weights): width 32, 2 layers, 4 query heads over 2 KV heads
(grouped-query attention, `repeat_kv` as Unsqueeze, Expand and Reshape), head dimension 8,
RMSNorm, rotary embeddings (`rotate_half` as Slice, Neg and Concat; the cos/sin tables of
32 positions are constants gathered at `position_ids`), SwiGLU 64, vocabulary 64. Next to
this file it writes:

- `tiny_prefill.onnx`: `input_ids`, `position_ids`, `attention_mask` `[1, 4]` in;
  `logits [1, 4, 64]` and per layer `present.N.key` / `present.N.value [1, 2, 4, 8]` out
  (causal attention over the prompt);
- `tiny_decode.onnx`: `input_ids`, `position_ids` `[1, 1]`, `attention_mask [1, 32]` and
  per layer `past_key_values.N.key` / `past_key_values.N.value [1, 2, 31, 8]` in;
  `logits [1, 1, 64]` and `present.N.key` / `present.N.value [1, 2, 32, 8]` out, with
  `present = Concat(past, new, axis=2)`;
- `tiny_tokens.npz`: `prompt` (4 token ids) and `tokens`: the greedy tokens of the
  prefill and 20 decode steps, run by `onnx.reference.ReferenceEvaluator` with the caches
  kept by the host: the past holds the valid rows first and zeros after them, and the
  attention mask marks the valid rows and the new one (the last).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

EPS = 1e-5
THETA = 10000.0
NEG = -1e9
STEPS = 20

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Sizes:
    """The model's sizes; `prompt` is the prefill's length, `seq` the decode step's S."""

    dim: int = 32
    layers: int = 2
    heads: int = 4
    kv_heads: int = 2
    ffn: int = 64
    vocab: int = 64
    prompt: int = 4
    seq: int = 32
    positions: int = 32

    @property
    def head_dim(self) -> int:
        return self.dim // self.heads

    @property
    def group(self) -> int:
        return self.heads // self.kv_heads


TINY = Sizes()


def weights(
    seed: int = 0, sz: Sizes = TINY
) -> dict[str, np.ndarray[Any, np.dtype[np.float32]]]:
    rng = np.random.default_rng(seed)

    def rand(*shape: int, scale: float) -> np.ndarray[Any, np.dtype[np.float32]]:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    w = {"embed": rand(sz.vocab, sz.dim, scale=1.0)}
    for i in range(sz.layers):
        w[f"l{i}.attn_norm"] = (1.0 + rand(sz.dim, scale=0.1)).astype(np.float32)
        w[f"l{i}.wq"] = rand(sz.dim, sz.heads * sz.head_dim, scale=sz.dim**-0.5)
        w[f"l{i}.wk"] = rand(sz.dim, sz.kv_heads * sz.head_dim, scale=sz.dim**-0.5)
        w[f"l{i}.wv"] = rand(sz.dim, sz.kv_heads * sz.head_dim, scale=sz.dim**-0.5)
        w[f"l{i}.wo"] = rand(sz.heads * sz.head_dim, sz.dim, scale=sz.dim**-0.5)
        w[f"l{i}.ffn_norm"] = (1.0 + rand(sz.dim, scale=0.1)).astype(np.float32)
        w[f"l{i}.w1"] = rand(sz.dim, sz.ffn, scale=sz.dim**-0.5)
        w[f"l{i}.w3"] = rand(sz.dim, sz.ffn, scale=sz.dim**-0.5)
        w[f"l{i}.w2"] = rand(sz.ffn, sz.dim, scale=sz.ffn**-0.5)
    w["norm"] = (1.0 + rand(sz.dim, scale=0.1)).astype(np.float32)
    w["head"] = rand(sz.dim, sz.vocab, scale=sz.dim**-0.5)
    inv = 1.0 / THETA ** (np.arange(0, sz.head_dim, 2, dtype=np.float64) / sz.head_dim)
    angles = np.outer(np.arange(sz.positions, dtype=np.float64), inv)
    angles = np.concatenate([angles, angles], axis=-1)
    w["cos_table"] = np.cos(angles).astype(np.float32)
    w["sin_table"] = np.sin(angles).astype(np.float32)
    return w


class Graph:
    """Nodes and initializers of one export, with fresh names."""

    def __init__(self, sz: Sizes) -> None:
        self.sz = sz
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.count = 0

    def const(self, name: str, value: np.ndarray[Any, Any]) -> str:
        self.inits.append(numpy_helper.from_array(value, name))
        return name

    def ints(self, values: list[int]) -> str:
        self.count += 1
        return self.const(f"shape_{self.count}", np.asarray(values, np.int64))

    def scalar(self, value: float) -> str:
        self.count += 1
        return self.const(f"scalar_{self.count}", np.asarray(value, np.float32))

    def op(self, op_type: str, *inputs: str, out: str | None = None, **attrs: Any) -> str:
        self.count += 1
        name = out or f"{op_type.lower()}_{self.count}"
        self.nodes.append(
            helper.make_node(
                op_type, list(inputs), [name], name=f"node_{self.count}", **attrs
            )
        )
        return name

    def rmsnorm(self, x: str, weight: str) -> str:
        square = self.op("Mul", x, x)
        mean = self.op("ReduceMean", square, self.ints([-1]), keepdims=1)
        root = self.op("Sqrt", self.op("Add", mean, self.scalar(EPS)))
        return self.op("Mul", self.op("Div", x, root), weight)

    def heads(self, x: str, length: int, n: int) -> str:
        """[1, L, n·hd] -> [1, n, L, hd]."""
        r = self.op("Reshape", x, self.ints([1, length, n, self.sz.head_dim]))
        return self.op("Transpose", r, perm=[0, 2, 1, 3])

    def rope(self, x: str, cos: str, sin: str) -> str:
        sz = self.sz
        half = sz.head_dim // 2
        first = self.op("Slice", x, self.ints([0]), self.ints([half]), self.ints([3]))
        second = self.op(
            "Slice", x, self.ints([half]), self.ints([sz.head_dim]), self.ints([3])
        )
        rotated = self.op("Concat", self.op("Neg", second), first, axis=3)
        return self.op("Add", self.op("Mul", x, cos), self.op("Mul", rotated, sin))

    def repeat_kv(self, x: str, length: int) -> str:
        """[1, Hkv, S, hd] -> [1, H, S, hd] (transformers' repeat_kv)."""
        sz = self.sz
        u = self.op("Unsqueeze", x, self.ints([2]))
        e = self.op("Expand", u, self.ints([1, sz.kv_heads, sz.group, length, sz.head_dim]))
        return self.op("Reshape", e, self.ints([1, sz.heads, length, sz.head_dim]))


def build(
    kind: str, w: dict[str, np.ndarray[Any, np.dtype[np.float32]]], sz: Sizes = TINY
) -> onnx.ModelProto:
    """The prefill (`kind = "prefill"`) or decode-step export."""
    g = Graph(sz)
    for name, value in w.items():
        g.const(name, value)
    length = sz.prompt if kind == "prefill" else 1
    seq = sz.prompt if kind == "prefill" else sz.seq
    inputs = [
        helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, length]),
        helper.make_tensor_value_info("position_ids", TensorProto.INT64, [1, length]),
        helper.make_tensor_value_info("attention_mask", TensorProto.INT64, [1, seq]),
    ]
    outputs = [
        helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, length, sz.vocab])
    ]
    x = g.op("Gather", "embed", "input_ids", axis=0)
    cos = g.op(
        "Unsqueeze", g.op("Gather", "cos_table", "position_ids", axis=0), g.ints([1])
    )
    sin = g.op(
        "Unsqueeze", g.op("Gather", "sin_table", "position_ids", axis=0), g.ints([1])
    )
    # Additive mask: 0 where attention_mask is 1, NEG where it is 0 (and above the diagonal).
    mask = g.op("Cast", "attention_mask", to=TensorProto.FLOAT)
    mask = g.op("Mul", g.op("Sub", g.scalar(1.0), mask), g.scalar(NEG))
    mask = g.op("Reshape", mask, g.ints([1, 1, 1, seq]))
    if kind == "prefill":
        causal = np.triu(np.full((sz.prompt, sz.prompt), NEG, np.float32), 1)
        mask = g.op(
            "Add", mask, g.const("causal", causal.reshape(1, 1, sz.prompt, sz.prompt))
        )
    for i in range(sz.layers):
        h = g.rmsnorm(x, f"l{i}.attn_norm")
        q = g.rope(g.heads(g.op("MatMul", h, f"l{i}.wq"), length, sz.heads), cos, sin)
        k = g.rope(g.heads(g.op("MatMul", h, f"l{i}.wk"), length, sz.kv_heads), cos, sin)
        v = g.heads(g.op("MatMul", h, f"l{i}.wv"), length, sz.kv_heads)
        names = {"key": k, "value": v}
        present: dict[str, str] = {}
        for part, new in names.items():
            out = f"present.{i}.{part}"
            if kind == "prefill":
                present[part] = g.op("Identity", new, out=out)
            else:
                past = f"past_key_values.{i}.{part}"
                inputs.append(
                    helper.make_tensor_value_info(
                        past, TensorProto.FLOAT, [1, sz.kv_heads, sz.seq - 1, sz.head_dim]
                    )
                )
                present[part] = g.op("Concat", past, new, axis=2, out=out)
            outputs.append(
                helper.make_tensor_value_info(
                    out, TensorProto.FLOAT, [1, sz.kv_heads, seq, sz.head_dim]
                )
            )
        keys = g.repeat_kv(present["key"], seq)
        values = g.repeat_kv(present["value"], seq)
        scores = g.op("MatMul", q, g.op("Transpose", keys, perm=[0, 1, 3, 2]))
        scores = g.op("Add", g.op("Mul", scores, g.scalar(sz.head_dim**-0.5)), mask)
        probs = g.op("Softmax", scores, axis=-1)
        o = g.op("Transpose", g.op("MatMul", probs, values), perm=[0, 2, 1, 3])
        o = g.op("Reshape", o, g.ints([1, length, sz.dim]))
        x = g.op("Add", x, g.op("MatMul", o, f"l{i}.wo"))
        h = g.rmsnorm(x, f"l{i}.ffn_norm")
        gate = g.op("MatMul", h, f"l{i}.w1")
        silu = g.op("Mul", gate, g.op("Sigmoid", gate))
        ffn = g.op("Mul", silu, g.op("MatMul", h, f"l{i}.w3"))
        x = g.op("Add", x, g.op("MatMul", ffn, f"l{i}.w2"))
    g.op("MatMul", g.rmsnorm(x, "norm"), "head", out="logits")
    graph = helper.make_graph(g.nodes, f"tiny_{kind}", inputs, outputs, g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 9
    onnx.checker.check_model(model, full_check=True)
    return model


def reference_tokens(
    prefill: onnx.ModelProto,
    decode: onnx.ModelProto,
    prompt: list[int],
    steps: int,
    sz: Sizes = TINY,
) -> list[int]:
    """Greedy tokens of the prefill and `steps` decode steps, the caches kept by the host."""
    pre = ReferenceEvaluator(prefill)
    dec = ReferenceEvaluator(decode)
    n = len(prompt)
    feeds = {
        "input_ids": np.asarray([prompt], np.int64),
        "position_ids": np.arange(n, dtype=np.int64)[None],
        "attention_mask": np.ones((1, n), np.int64),
    }
    out: list[Any] = list(pre.run(None, feeds))
    names = [o.name for o in prefill.graph.output]
    caches = {
        name.replace("present", "past_key_values"): np.zeros(
            (1, sz.kv_heads, sz.seq - 1, sz.head_dim), np.float32
        )
        for name in names[1:]
    }
    for name, value in zip(names[1:], out[1:], strict=True):
        caches[name.replace("present", "past_key_values")][:, :, :n] = value
    tokens = [int(np.argmax(out[0][0, -1]))]
    for step in range(steps):
        pos = n + step
        mask = np.zeros((1, sz.seq), np.int64)
        mask[0, :pos] = 1
        mask[0, -1] = 1
        feeds = {
            "input_ids": np.asarray([[tokens[-1]]], np.int64),
            "position_ids": np.asarray([[pos]], np.int64),
            "attention_mask": mask,
            **caches,
        }
        out = list(dec.run(None, feeds))
        if pos < sz.seq - 1:
            for name, value in zip(names[1:], out[1:], strict=True):
                past = caches[name.replace("present", "past_key_values")]
                past[:, :, pos] = value[:, :, -1]
        tokens.append(int(np.argmax(out[0][0, -1])))
    return tokens


def main() -> None:
    w = weights()
    prefill, decode = build("prefill", w), build("decode", w)
    onnx.save(prefill, HERE / "tiny_prefill.onnx")
    onnx.save(decode, HERE / "tiny_decode.onnx")
    prompt = [3, 14, 15, 9]
    tokens = reference_tokens(prefill, decode, prompt, STEPS)
    np.savez(
        HERE / "tiny_tokens.npz",
        prompt=np.asarray(prompt, np.int64),
        tokens=np.asarray(tokens, np.int64),
    )
    print("tokens", tokens)


if __name__ == "__main__":
    main()
