"""
LLaMA decoders as ONNX graphs written with `onnx.helper`, their random weights in an
external data file, as `torch.onnx.export(..., external_data=True)` writes them.

`write_llama_onnx(path, config)` builds the graph of `config.layers` decoder layers
(token embedding, RMSNorm, grouped-query attention with rotary embeddings, on every
feature of a head or, with `rotary_dim`, on the first ones only, and a causal mask,
SwiGLU feed-forward, final norm, LM head) for one prompt of `config.seq` tokens and
writes its weights, one tensor at a time, to `path.data`: generating a LLaMA3-8B-wide
layer (0.94 GB of weights) never holds more than one weight in memory. The graphs feed
the import-size benchmark, the tests of weights by reference and of partial rotary
embeddings on the wafer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import onnx
from onnx import TensorProto, helper, numpy_helper

Array = npt.NDArray[Any]

EXTERNAL_MIN_BYTES = 1024
"""Weights larger than this are written to the external data file (smaller ones inline)."""


@dataclass(frozen=True)
class LlamaOnnxConfig:
    """The shape of a generated LLaMA decoder."""

    hidden: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int
    seq: int = 8
    layers: int = 1
    eps: float = 1e-5
    seed: int = 0
    embedding: bool = True
    """Whether the graph starts from token ids (a table lookup) or from their embeddings."""
    rotary_dim: int | None = None
    """Partial rotary embeddings (GPT-NeoX, Phi, StableLM): RoPE turns the first
    `rotary_dim` features of each head and passes the others through; None: all of them."""
    past: int = 0
    """A decode step: the tokens already in the KV cache (each layer's keys and values are
    inputs `past_key_values.{i}.key|value` of `past` positions, the new `seq` tokens at
    positions `past, past + 1, ...` attend to them; the caches with the new tokens appended
    are outputs `present.{i}.key|value`), as Hugging Face exports a step with a cache."""
    present: bool = False
    """Whether a prompt's graph (`past` 0) outputs its caches too (a decode step always does)."""
    position_inputs: bool = False
    """Whether the positions are inputs, as Hugging Face exports a decode step:
    `position_ids [1, seq]` (RoPE's tables `Cos`/`Sin` of `position_ids · inv_freq`,
    computed at run time) and `attention_mask [1, past + seq]` (1 = attend; the additive
    mask `(1 − attention_mask)·(−1e9)` on top of the causal one); otherwise the positions
    `past, past + 1, ...` are constants of the graph."""

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def rotary(self) -> int:
        """The features of a head that RoPE turns."""
        return self.head_dim if self.rotary_dim is None else self.rotary_dim

    def weight_bytes(self) -> int:
        """The bytes of all weights (float32)."""
        h, f, v, kv = self.hidden, self.ffn, self.vocab, self.kv_heads * self.head_dim
        layer = 2 * h * h + 2 * h * kv + 3 * h * f + 2 * h
        return 4 * (self.layers * layer + (2 if self.embedding else 1) * v * h + h)


LLAMA3_8B_LAYER = LlamaOnnxConfig(hidden=4096, heads=32, kv_heads=8, ffn=14336, vocab=2048)
"""One LLaMA3-8B-wide layer with a 2,048-token vocabulary (0.94 GB of weights)."""


class _Writer:
    """Adds nodes and initializers; large weights go to the data file as they are made."""

    def __init__(self, data_path: Path, seed: int):
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[TensorProto] = []
        self.data_path = data_path
        self.data = data_path.open("wb")
        self.rng = np.random.default_rng(seed)
        self.count = 0
        self.outputs: list[tuple[str, str]] = []
        """Outputs besides the logits (the present caches): (name, value)."""

    def fresh(self, hint: str) -> str:
        self.count += 1
        return f"{hint}_{self.count}"

    def node(self, op: str, inputs: list[str], hint: str, **attrs: Any) -> str:
        out = self.fresh(hint)
        self.nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    def const(self, name: str, arr: Array) -> str:
        arr = np.ascontiguousarray(arr)
        if arr.nbytes <= EXTERNAL_MIN_BYTES:
            self.inits.append(numpy_helper.from_array(arr, name))
            return name
        offset = self.data.tell()
        arr = np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<"))
        self.data.write(arr.reshape(-1).view(np.uint8).data)
        t = TensorProto()
        t.name = name
        t.data_type = helper.np_dtype_to_tensor_dtype(arr.dtype)
        t.dims.extend(arr.shape)
        t.data_location = TensorProto.EXTERNAL
        for key, value in (
            ("location", self.data_path.name),
            ("offset", str(offset)),
            ("length", str(arr.nbytes)),
        ):
            entry = t.external_data.add()
            entry.key, entry.value = key, value
        self.inits.append(t)
        return name

    def weight(self, name: str, shape: tuple[int, ...], scale: float) -> str:
        arr = self.rng.standard_normal(shape, dtype=np.float32)
        arr *= np.float32(scale)
        return self.const(name, arr)

    def ints(self, name: str, values: list[int]) -> str:
        return self.const(name, np.asarray(values, dtype=np.int64))


def _rmsnorm(w: _Writer, x: str, weight: str, eps: str, axes: str) -> str:
    sq = w.node("Mul", [x, x], "sq")
    ms = w.node("ReduceMean", [sq, axes], "ms", keepdims=1)
    r = w.node("Sqrt", [w.node("Add", [ms, eps], "ms_eps")], "rms")
    normed = w.node("Mul", [x, w.node("Reciprocal", [r], "inv_rms")], "normed")
    return w.node("Mul", [normed, weight], "scaled")


def _rope(w: _Writer, x: str, cos: str, sin: str, half: dict[str, str]) -> str:
    """
    `x·cos + rotate_half(x)·sin` over the last axis; with partial rotary, over its first
    `rotary` features, the others passed through (`Concat(rope(x[..., :r]), x[..., r:])`,
    as the GPT-NeoX family exports it).
    """
    whole = x
    if "pass" in half:
        x = w.node("Slice", [whole, half["zero"], half["end"], half["axis"]], "x_rot")
    lo = w.node("Slice", [x, half["zero"], half["half"], half["axis"]], "lo")
    hi = w.node("Slice", [x, half["half"], half["end"], half["axis"]], "hi")
    rotated = w.node("Concat", [w.node("Neg", [hi], "neg_hi"), lo], "rot", axis=-1)
    a = w.node("Mul", [x, cos], "x_cos")
    roped = w.node("Add", [a, w.node("Mul", [rotated, sin], "rot_sin")], "roped")
    if "pass" not in half:
        return roped
    kept = w.node("Slice", [whole, half["end"], half["pass"], half["axis"]], "x_pass")
    return w.node("Concat", [roped, kept], "roped_partial", axis=-1)


def _layer(w: _Writer, c: LlamaOnnxConfig, i: int, x: str, k: dict[str, str]) -> str:
    h, hd, nh, nkv, s = c.hidden, c.head_dim, c.heads, c.kv_heads, c.seq
    p = f"model.layers.{i}."
    scale = 1.0 / math.sqrt(h)
    ones = np.ones(h, dtype=np.float32)
    n1 = _rmsnorm(w, x, w.const(p + "input_layernorm.weight", ones), k["eps"], k["axes"])
    q = w.node(
        "MatMul", [n1, w.weight(p + "self_attn.q_proj.weight", (h, nh * hd), scale)], "q"
    )
    kk = w.node(
        "MatMul", [n1, w.weight(p + "self_attn.k_proj.weight", (h, nkv * hd), scale)], "k"
    )
    v = w.node(
        "MatMul", [n1, w.weight(p + "self_attn.v_proj.weight", (h, nkv * hd), scale)], "v"
    )

    def heads(t: str, n: int, name: str) -> str:
        r = w.node("Reshape", [t, w.ints(w.fresh("shape"), [1, s, n, hd])], name)
        return w.node("Transpose", [r], f"{name}_t", perm=[0, 2, 1, 3])

    def repeat(t: str, name: str) -> str:
        """The KV heads repeated for their groups of query heads: [1, nh, t, hd]."""
        if nkv == nh:
            return t
        n = c.past + s
        r = w.node("Reshape", [t, w.ints(w.fresh("shape"), [1, nkv, 1, n, hd])], name)
        group = w.ints(w.fresh("shape"), [1, nkv, nh // nkv, n, hd])
        e = w.node("Expand", [r, group], f"{name}_e")
        return w.node("Reshape", [e, w.ints(w.fresh("shape"), [1, nh, n, hd])], f"{name}_r")

    qh = _rope(w, heads(q, nh, "qh"), k["cos"], k["sin"], k)
    kh = _rope(w, heads(kk, nkv, "kh"), k["cos"], k["sin"], k)
    vh = heads(v, nkv, "vh")
    if c.past:
        kh = w.node("Concat", [f"past_key_values.{i}.key", kh], "kcat", axis=2)
        vh = w.node("Concat", [f"past_key_values.{i}.value", vh], "vcat", axis=2)
    if c.past or c.present:
        w.outputs += [(f"present.{i}.key", kh), (f"present.{i}.value", vh)]
    kh, vh = repeat(kh, "krep"), repeat(vh, "vrep")
    kt = w.node("Transpose", [kh], "kt", perm=[0, 1, 3, 2])
    scores = w.node("Mul", [w.node("MatMul", [qh, kt], "qk"), k["attn_scale"]], "scores")
    probs = w.node(
        "Softmax", [w.node("Add", [scores, k["mask"]], "masked")], "probs", axis=-1
    )
    o = w.node("Transpose", [w.node("MatMul", [probs, vh], "pv")], "o_t", perm=[0, 2, 1, 3])
    o = w.node("Reshape", [o, w.ints(w.fresh("shape"), [1, s, h])], "o")
    o = w.node(
        "MatMul", [o, w.weight(p + "self_attn.o_proj.weight", (nh * hd, h), scale)], "attn"
    )
    x = w.node("Add", [x, o], "res1")
    n2 = _rmsnorm(
        w, x, w.const(p + "post_attention_layernorm.weight", ones), k["eps"], k["axes"]
    )
    gate = w.node(
        "MatMul", [n2, w.weight(p + "mlp.gate_proj.weight", (h, c.ffn), scale)], "gate"
    )
    up = w.node("MatMul", [n2, w.weight(p + "mlp.up_proj.weight", (h, c.ffn), scale)], "up")
    act = w.node("Mul", [gate, w.node("Sigmoid", [gate], "sig")], "silu")
    down_w = w.weight(p + "mlp.down_proj.weight", (c.ffn, h), 1.0 / math.sqrt(c.ffn))
    down = w.node("MatMul", [w.node("Mul", [act, up], "gated"), down_w], "down")
    return w.node("Add", [x, down], "res2")


def _position_tables(w: _Writer, c: LlamaOnnxConfig, inv: Array, k: dict[str, str]) -> None:
    """RoPE's tables and the mask from the `position_ids` and `attention_mask` inputs."""
    pos = w.node("Cast", ["position_ids"], "pos_f", to=TensorProto.FLOAT)
    col = w.node("Reshape", [pos, w.ints("pos_shape", [c.seq, 1])], "pos_col")
    freqs = w.node("MatMul", [col, w.const("inv_freq", inv.reshape(1, -1))], "freqs")
    angles = w.node("Concat", [freqs, freqs], "angles", axis=-1)
    k["cos"] = w.node("Cos", [angles], "rope_cos")
    k["sin"] = w.node("Sin", [angles], "rope_sin")
    valid = w.node("Cast", ["attention_mask"], "mask_f", to=TensorProto.FLOAT)
    one = w.const("mask_one", np.asarray(1.0, dtype=np.float32))
    low = w.const("mask_min", np.asarray(-1e9, dtype=np.float32))
    pad = w.node("Mul", [w.node("Sub", [one, valid], "masked_out"), low], "pad_mask")
    k["mask"] = w.node("Add", [k["mask"], pad], "attn_mask")


def write_llama_onnx(path: Path, config: LlamaOnnxConfig) -> Path:
    """
    Writes the decoder of `config` to `path` (an `.onnx` file) and its weights to
    `path` + `.data` beside it; returns the data file's path.
    """
    c = config
    if c.hidden % c.heads or c.heads % c.kv_heads or c.rotary % 2:
        raise ValueError(f"inconsistent LLaMA configuration {c}")
    if not 0 < c.rotary <= c.head_dim:
        raise ValueError(f"rotary_dim {c.rotary} is not in 1..head_dim ({c.head_dim})")
    data_path = path.with_name(path.name + ".data")
    w = _Writer(data_path, c.seed)
    try:
        hd, s, rd, past = c.head_dim, c.seq, c.rotary, c.past
        inv = 1.0 / (10000.0 ** (np.arange(0, rd, 2, dtype=np.float64) / rd))
        angles = np.outer(np.arange(past, past + s, dtype=np.float64), inv)
        angles = np.concatenate([angles, angles], axis=-1)
        mask = np.triu(np.full((s, past + s), -1e9, dtype=np.float32), k=past + 1)
        k = {
            "eps": w.const("eps", np.asarray(c.eps, dtype=np.float32)),
            "axes": w.ints("norm_axes", [-1]),
            "zero": w.ints("rope_zero", [0]),
            "half": w.ints("rope_half", [rd // 2]),
            "end": w.ints("rope_end", [rd]),
            "axis": w.ints("rope_axis", [-1]),
            "mask": w.const("causal_mask", mask),
            "attn_scale": w.const("attn_scale", np.asarray(hd**-0.5, dtype=np.float32)),
        }
        if c.position_inputs:
            _position_tables(w, c, inv.astype(np.float32), k)
        else:
            k["cos"] = w.const("rope_cos", np.cos(angles).astype(np.float32))
            k["sin"] = w.const("rope_sin", np.sin(angles).astype(np.float32))
        if rd < hd:
            k["pass"] = w.ints("rope_pass_end", [hd])
        if c.embedding:
            table = w.weight("model.embed_tokens.weight", (c.vocab, c.hidden), 1.0)
            x = w.node("Gather", [table, "input_ids"], "embed", axis=0)
        else:
            x = "inputs_embeds"
        for i in range(c.layers):
            x = _layer(w, c, i, x, k)
        ones = np.ones(c.hidden, dtype=np.float32)
        x = _rmsnorm(w, x, w.const("model.norm.weight", ones), k["eps"], k["axes"])
        head = w.weight("lm_head.weight", (c.hidden, c.vocab), 1.0 / math.sqrt(c.hidden))
        w.nodes.append(helper.make_node("MatMul", [x, head], ["logits"], name="lm_head"))
    finally:
        w.data.close()
    source = (
        helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, c.seq])
        if c.embedding
        else helper.make_tensor_value_info(
            "inputs_embeds", TensorProto.FLOAT, [1, c.seq, c.hidden]
        )
    )
    caches = [
        helper.make_tensor_value_info(
            f"past_key_values.{i}.{kind}",
            TensorProto.FLOAT,
            [1, c.kv_heads, c.past, c.head_dim],
        )
        for i in range(c.layers if c.past else 0)
        for kind in ("key", "value")
    ]
    positions = (
        [
            helper.make_tensor_value_info("position_ids", TensorProto.INT64, [1, c.seq]),
            helper.make_tensor_value_info(
                "attention_mask", TensorProto.INT64, [1, c.past + c.seq]
            ),
        ]
        if c.position_inputs
        else []
    )
    present_shape = [1, c.kv_heads, c.past + c.seq, c.head_dim]
    w.nodes.extend(helper.make_node("Identity", [v], [n]) for n, v in w.outputs)
    graph = helper.make_graph(
        w.nodes,
        "llama",
        [source, *positions, *caches],
        [
            helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, c.seq, c.vocab]),
            *(
                helper.make_tensor_value_info(n, TensorProto.FLOAT, present_shape)
                for n, _ in w.outputs
            ),
        ],
        w.inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    path.write_bytes(model.SerializeToString())
    return data_path


__all__ = ["LLAMA3_8B_LAYER", "LlamaOnnxConfig", "write_llama_onnx"]
