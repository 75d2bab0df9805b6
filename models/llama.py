"""
A LLaMA-style decoder: configuration presets, seeded random weights, a plain numpy
implementation (the oracle), and builders of the `graph`-level prefill and decode-step
programs that plmr compiles.

The model: token embedding (looked up by the host), then per layer
`h = x + Attn(RMSNorm(x))`, `x' = h + FFN(RMSNorm(h))` with grouped-query attention
(`n_heads` query heads share `n_kv_heads` K/V heads), rotary position embedding applied
as a table multiply (`q·cos + rotate_half(q)·sin`, computed on the halves of a head), a
causal mask, and a SwiGLU FFN `W2(silu(W1 x) ⊙ W3 x)`; a final RMSNorm and the LM head.

`ProgramBuilder` writes the prefill and decode programs that plmr compiles. By default
heads are a tensor dimension, as frameworks write the model and ONNX exports spell it
(`models/llama_heads.py`: batched projections, reshape / transpose, batched GQA attention):

- prefill(x[L, dim], mask[L, L], cos[L, hd], sin[L, hd]) ->
  (logits[1, vocab] of the last token, then per layer K[Hkv, 1, L, hd] and V[Hkv, 1, L, hd])
- decode(x[1, dim], mask[1, S], cos[1, hd], sin[1, hd], per layer the caches
  K[Hkv, S, hd] and V[Hkv, S, hd]) -> (logits[1, vocab], the new K and V rows)

`form="per-head"` writes the baseline instead: one matmul per head and projection, RoPE
on the halves of a head, K as two halves.

The decode step attends over the cache (positions masked by `mask`) and the new token
itself, combining the two softmax parts exactly (max, then exp-sums), so the cache never
grows inside the program: the host, or the wafer's KV-cache program, stores the new rows.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from plmr.errors import PlmrError
from plmr.models.llama_config import PRESETS, LlamaConfig, get_config
from plmr.models.llama_heads import HeadsBuilder, rotate_half_matrix
from plmr.models.text import Text, hexdump, tensor_type

F32 = npt.NDArray[np.float32]

NEG = -1.0e9
"""The additive mask of a position a query must not see."""


# ---------------------------------------------------------------------------------------
# Weights
# ---------------------------------------------------------------------------------------


def random_weights(config: LlamaConfig, seed: int = 0) -> dict[str, F32]:
    """Seeded random weights, scaled like a trained model's (no downloads)."""
    if config.dim * config.vocab > 64 * 1024 * 1024:
        raise PlmrError(
            f"{config.name} is too large for random weights here; its programs take the "
            "weights as arguments (timing mode)"
        )
    rng = np.random.default_rng(seed)
    c, hd = config, config.head_dim

    def mat(rows: int, cols: int) -> F32:
        return (rng.standard_normal((rows, cols)) / math.sqrt(rows)).astype(np.float32)

    def norm(n: int) -> F32:
        return (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)

    w: dict[str, F32] = {"embed": rng.standard_normal((c.vocab, c.dim)).astype(np.float32)}
    for layer in range(c.n_layers):
        p = f"l{layer}"
        w[f"{p}.attn_norm"] = norm(c.dim)
        for h in range(c.n_heads):
            w[f"{p}.wq{h}"] = mat(c.dim, hd)
            w[f"{p}.wo{h}"] = mat(hd, c.dim)
        for g in range(c.n_kv_heads):
            w[f"{p}.wk{g}"] = mat(c.dim, hd)
            w[f"{p}.wv{g}"] = mat(c.dim, hd)
        w[f"{p}.ffn_norm"] = norm(c.dim)
        w[f"{p}.w1"] = mat(c.dim, c.ffn_dim)
        w[f"{p}.w3"] = mat(c.dim, c.ffn_dim)
        w[f"{p}.w2"] = mat(c.ffn_dim, c.dim)
    w["norm"] = norm(c.dim)
    w["head"] = mat(c.dim, c.vocab)
    return w


def rope_tables(config: LlamaConfig, positions: Sequence[int]) -> tuple[F32, F32]:
    """cos and sin rows `[len(positions), head_dim]` of the rotary embedding."""
    hd = config.head_dim
    inv = config.rope_theta ** (-np.arange(0, hd // 2, dtype=np.float64) * 2 / hd)
    angles = np.outer(np.asarray(positions, np.float64), inv)
    angles = np.concatenate([angles, angles], axis=1)
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


def rope_half_tables(config: LlamaConfig, positions: Sequence[int]) -> tuple[F32, F32]:
    """The programs' cos and sin inputs `[len(positions), head_dim / 2]`."""
    cos, sin = rope_tables(config, positions)
    half = config.head_dim // 2
    return np.ascontiguousarray(cos[:, :half]), np.ascontiguousarray(sin[:, :half])


def causal_mask(length: int) -> F32:
    return np.triu(np.full((length, length), NEG, np.float32), k=1)


def cache_mask(config: LlamaConfig, valid: int, tokens: int = 1) -> F32:
    """
    The decode step's mask over the cache, a row per new token: the first `valid`
    positions are visible to the first token, and each further token sees one more (the
    slot of the token before it).
    """
    m = np.full((tokens, config.max_seq), NEG, np.float32)
    for i in range(tokens):
        m[i, : valid + i] = 0.0
    return m


def cache_slot(config: LlamaConfig, position: int, tokens: int = 1) -> F32:
    """
    The decode step's one-hot `slot` rows over the cache (heads form): the free
    positions `position`, `position + 1`, ... that the new tokens' K and V take in the
    step's attention (the mask there is 0).
    """
    if tokens < 1:
        raise PlmrError(f"a decode step takes at least one new token, got {tokens}")
    if position < 0 or position + tokens > config.max_seq:
        raise PlmrError(
            f"the new tokens' cache slots {position}..{position + tokens - 1} are outside "
            f"the cache of {config.max_seq} positions; the cache is full"
        )
    s = np.zeros((tokens, config.max_seq), np.float32)
    s[np.arange(tokens), position + np.arange(tokens)] = 1.0
    return s


def decode_cache_args(cache: KVCache, config: LlamaConfig) -> list[F32]:
    """The decode program's cache arguments (heads form): K and V `[Hkv, S, hd]` per layer."""
    out: list[F32] = []
    for layer in range(config.n_layers):
        out.append(np.stack(cache.k[layer]))
        out.append(np.stack(cache.v[layer]))
    return out


def split_kv_rows(
    rows: Sequence[F32], config: LlamaConfig
) -> tuple[list[list[F32]], list[list[F32]]]:
    """The programs' K and V results (heads form, `[Hkv, 1, n, hd]` per layer) per KV head."""

    def heads(a: F32) -> list[F32]:
        return [np.ascontiguousarray(a[g, 0]) for g in range(config.n_kv_heads)]

    return [heads(rows[2 * i]) for i in range(config.n_layers)], [
        heads(rows[2 * i + 1]) for i in range(config.n_layers)
    ]


# ---------------------------------------------------------------------------------------
# The numpy model (the oracle)
# ---------------------------------------------------------------------------------------


def _rmsnorm(x: F32, w: F32, eps: float) -> F32:
    return (x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w).astype(
        np.float32
    )


def _silu(x: F32) -> F32:
    return (x / (1.0 + np.exp(-x))).astype(np.float32)


def _softmax(s: F32) -> F32:
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)).astype(np.float32)


@dataclass
class KVCache:
    """K and V per layer and KV head, `[max_seq, head_dim]` each, and the valid length."""

    k: list[list[F32]]
    v: list[list[F32]]
    length: int = 0

    @staticmethod
    def empty(config: LlamaConfig) -> KVCache:
        def zeros() -> list[list[F32]]:
            return [
                [np.zeros((config.max_seq, config.head_dim), np.float32)]
                * config.n_kv_heads
                for _ in range(config.n_layers)
            ]

        return KVCache(zeros(), zeros())

    def kv(self, layer: int, g: int) -> tuple[F32, F32]:
        return self.k[layer][g], self.v[layer][g]

    def store(self, k_rows: list[list[F32]], v_rows: list[list[F32]]) -> None:
        """Appends the rows of K and V (`[n, head_dim]`) after the valid ones."""
        n = k_rows[0][0].shape[0]
        if self.length + n > self.k[0][0].shape[0]:
            raise PlmrError(
                f"the KV cache holds {self.k[0][0].shape[0]} tokens; cannot add {n} more "
                f"after {self.length}"
            )
        for layer, (ks, vs) in enumerate(zip(k_rows, v_rows, strict=True)):
            for g, (kr, vr) in enumerate(zip(ks, vs, strict=True)):
                k = self.k[layer][g].copy()
                v = self.v[layer][g].copy()
                k[self.length : self.length + n] = kr
                v[self.length : self.length + n] = vr
                self.k[layer][g], self.v[layer][g] = k, v
        self.length += n


class NumpyLlama:
    """The model in plain numpy: what the compiled programs must reproduce."""

    def __init__(self, config: LlamaConfig, weights: dict[str, F32]):
        self.c = config
        self.w = weights
        self.r = rotate_half_matrix(config.head_dim)

    def _rope(self, x: F32, cos: F32, sin: F32) -> F32:
        return (x * cos + (x @ self.r) * sin).astype(np.float32)

    def forward(
        self, x: F32, positions: Sequence[int], cache: KVCache
    ) -> tuple[F32, list[list[F32]], list[list[F32]]]:
        """Runs the layers on embeddings `x` at `positions` after the cached tokens."""
        c, w = self.c, self.w
        cos, sin = rope_tables(c, positions)
        n = x.shape[0]
        scale = 1.0 / math.sqrt(c.head_dim)
        ks: list[list[F32]] = []
        vs: list[list[F32]] = []
        for layer in range(c.n_layers):
            p = f"l{layer}"
            a = _rmsnorm(x, w[f"{p}.attn_norm"], c.norm_eps)
            k_new = [self._rope(a @ w[f"{p}.wk{g}"], cos, sin) for g in range(c.n_kv_heads)]
            v_new = [a @ w[f"{p}.wv{g}"] for g in range(c.n_kv_heads)]
            ks.append(k_new)
            vs.append(v_new)
            out = np.zeros_like(x)
            for h in range(c.n_heads):
                g = h // c.group
                q = self._rope(a @ w[f"{p}.wq{h}"], cos, sin)
                k = np.concatenate([cache.k[layer][g][: cache.length], k_new[g]])
                v = np.concatenate([cache.v[layer][g][: cache.length], v_new[g]])
                s = (q @ k.T) * scale
                s[:, cache.length :] += causal_mask(n)
                out += (_softmax(s) @ v) @ w[f"{p}.wo{h}"]
            h_ = (x + out).astype(np.float32)
            f = _rmsnorm(h_, w[f"{p}.ffn_norm"], c.norm_eps)
            x = (h_ + (_silu(f @ w[f"{p}.w1"]) * (f @ w[f"{p}.w3"])) @ w[f"{p}.w2"]).astype(
                np.float32
            )
        last = _rmsnorm(x[-1:], w["norm"], c.norm_eps)
        return (last @ w["head"]).astype(np.float32), ks, vs

    def generate(self, prompt: Sequence[int], steps: int) -> list[int]:
        """Greedy decoding: the prompt in one prefill, then `steps` decode steps."""
        cache = KVCache.empty(self.c)
        x = self.w["embed"][np.asarray(prompt)]
        logits, ks, vs = self.forward(x, range(len(prompt)), cache)
        cache.store(ks, vs)
        out: list[int] = []
        for _ in range(steps):
            token = int(np.argmax(logits[0]))
            out.append(token)
            logits, ks, vs = self.forward(self.w["embed"][[token]], [cache.length], cache)
            cache.store(ks, vs)
        return out


# ---------------------------------------------------------------------------------------
# graph programs
# ---------------------------------------------------------------------------------------


Attend = Callable[[Text, "Pair", "Pair", str, int, int], str]
"""Builds one head's attention output from (text, q halves, k halves, v, layer, kv head)."""

Pair = tuple[str, str]
"""The two halves of a rotated head vector (RoPE rotates the halves into each other)."""


class PerHeadBuilder:
    """
    Writes the prefill and decode programs of a model (weights inline or as arguments).

    RoPE works on the halves of each head: `q_lo' = q_lo·cos - q_hi·sin` and
    `q_hi' = q_hi·cos + q_lo·sin` (= `q·cos + rotate_half(q)·sin`), so Q and K are
    computed as halves (`W[:, :hd/2]`, `W[:, hd/2:]`) and a score is
    `q_lo'·k_lo'ᵀ + q_hi'·k_hi'ᵀ`: no permutation matrix and no concatenation. The cos and
    sin inputs are the half tables `[n, hd/2]`; K comes out (and the decode step's cache
    goes in) as its two halves.
    """

    def __init__(self, config: LlamaConfig, weights: dict[str, F32] | None):
        self.c = config
        self.w = weights

    def _array(self, key: str) -> F32:
        assert self.w is not None
        half = self.c.head_dim // 2
        base, _, part = key.rpartition("_")
        if part in ("lo", "hi") and base in self.w:
            full = self.w[base]
            return full[:, :half] if part == "lo" else full[:, half:]
        return self.w[key]

    def _weights(
        self, t: Text, args: list[str], layers: Sequence[int], head: bool = True
    ) -> dict[str, str]:
        c = self.c
        hd, half = c.head_dim, c.head_dim // 2
        shapes: dict[str, tuple[int, ...]] = {}
        for layer in layers:
            p = f"l{layer}"
            shapes[f"{p}.attn_norm"] = (c.dim,)
            for h in range(c.n_heads):
                shapes[f"{p}.wq{h}_lo"] = (c.dim, half)
                shapes[f"{p}.wq{h}_hi"] = (c.dim, half)
                shapes[f"{p}.wo{h}"] = (hd, c.dim)
            for g in range(c.n_kv_heads):
                shapes[f"{p}.wk{g}_lo"] = (c.dim, half)
                shapes[f"{p}.wk{g}_hi"] = (c.dim, half)
                shapes[f"{p}.wv{g}"] = (c.dim, hd)
            shapes[f"{p}.ffn_norm"] = (c.dim,)
            shapes[f"{p}.w1"] = (c.dim, c.ffn_dim)
            shapes[f"{p}.w3"] = (c.dim, c.ffn_dim)
            shapes[f"{p}.w2"] = (c.ffn_dim, c.dim)
        if head:
            shapes["norm"] = (c.dim,)
            shapes["head"] = (c.dim, c.vocab)
        names: dict[str, str] = {}
        for key, shape in shapes.items():
            ssa = "%" + key.replace(".", "_")
            t.types[ssa] = tensor_type(*shape)
            names[key] = ssa
            if self.w is None:
                args.append(f'{ssa}: {tensor_type(*shape)} {{plmr.name = "{key}"}}')
            else:
                t.lines.append(
                    f'    {ssa} = graph.constant dense<"{hexdump(self._array(key))}"> : '
                    f"{tensor_type(*shape)}"
                )
        return names

    def _rope(self, t: Text, lo: str, hi: str, cos: str, sin: str) -> Pair:
        rt = t.types[lo]
        new_lo = t.binary(
            "sub", t.binary("mul", lo, cos, rt), t.binary("mul", hi, sin, rt), rt
        )
        new_hi = t.binary(
            "add", t.binary("mul", hi, cos, rt), t.binary("mul", lo, sin, rt), rt
        )
        return new_lo, new_hi

    def _rotated(
        self, t: Text, a: str, w: dict[str, str], key: str, n: int, cos: str, sin: str
    ) -> Pair:
        half = self.c.head_dim // 2
        lo = t.matmul(a, w[f"{key}_lo"], tensor_type(n, half))
        hi = t.matmul(a, w[f"{key}_hi"], tensor_type(n, half))
        return self._rope(t, lo, hi, cos, sin)

    def _scores(self, t: Text, q: Pair, k: Pair, rtype: str) -> str:
        lo = t.matmul(q[0], k[0], rtype, transpose_b=True)
        hi = t.matmul(q[1], k[1], rtype, transpose_b=True)
        return t.binary("add", lo, hi, rtype)

    def _layer(
        self,
        t: Text,
        x: str,
        layer: int,
        n: int,
        w: dict[str, str],
        cos: str,
        sin: str,
        attend: Attend,
    ) -> tuple[str, list[Pair], list[str]]:
        c = self.c
        hd = c.head_dim
        p = f"l{layer}"
        a = t.rmsnorm(x, w[f"{p}.attn_norm"], c.norm_eps)
        ks = [
            self._rotated(t, a, w, f"{p}.wk{g}", n, cos, sin) for g in range(c.n_kv_heads)
        ]
        vs = [t.matmul(a, w[f"{p}.wv{g}"], tensor_type(n, hd)) for g in range(c.n_kv_heads)]
        out: str | None = None
        for h in range(c.n_heads):
            g = h // c.group
            q = self._rotated(t, a, w, f"{p}.wq{h}", n, cos, sin)
            o = attend(t, q, ks[g], vs[g], layer, g)
            y = t.matmul(o, w[f"{p}.wo{h}"], tensor_type(n, c.dim))
            out = y if out is None else t.binary("add", out, y, tensor_type(n, c.dim))
        assert out is not None
        h_ = t.binary("add", x, out, tensor_type(n, c.dim))
        f = t.rmsnorm(h_, w[f"{p}.ffn_norm"], c.norm_eps)
        up = t.matmul(f, w[f"{p}.w1"], tensor_type(n, c.ffn_dim))
        gate = t.matmul(f, w[f"{p}.w3"], tensor_type(n, c.ffn_dim))
        act = t.binary("mul", t.unary("silu", up), gate, tensor_type(n, c.ffn_dim))
        down = t.matmul(act, w[f"{p}.w2"], tensor_type(n, c.dim))
        return t.binary("add", h_, down, tensor_type(n, c.dim)), ks, vs

    def _inputs(self, t: Text, n: int, s_len: int) -> list[str]:
        c = self.c
        half = c.head_dim // 2
        shapes = (
            ("x", (n, c.dim)),
            ("mask", (n, s_len)),
            ("cos", (n, half)),
            ("sin", (n, half)),
        )
        args: list[str] = []
        for name, shape in shapes:
            args.append(f'%{name}: {tensor_type(*shape)} {{plmr.name = "{name}"}}')
            t.types[f"%{name}"] = tensor_type(*shape)
        return args

    def _kv_results(
        self, layer: int, ks: list[Pair], vs: list[str], n: int
    ) -> list[tuple[str, str, str]]:
        half, hd = self.c.head_dim // 2, self.c.head_dim
        out: list[tuple[str, str, str]] = []
        for g, (k, v) in enumerate(zip(ks, vs, strict=True)):
            out.append((k[0], f"k_l{layer}_g{g}_lo", tensor_type(n, half)))
            out.append((k[1], f"k_l{layer}_g{g}_hi", tensor_type(n, half)))
            out.append((v, f"v_l{layer}_g{g}", tensor_type(n, hd)))
        return out

    def prefill(
        self, length: int, layers: Sequence[int] | None = None, head: bool = True
    ) -> str:
        """The prefill program of a prompt of `length` tokens (MLIR text)."""
        c = self.c
        hd = c.head_dim
        layers = list(range(c.n_layers)) if layers is None else list(layers)
        t = Text()
        args = self._inputs(t, length, length)
        w = self._weights(t, args, layers, head)
        scale = 1.0 / math.sqrt(hd)

        def attend(t: Text, q: Pair, k: Pair, v: str, layer: int, g: int) -> str:
            s = self._scores(t, q, k, tensor_type(length, length))
            s = t.binary("add", t.scale(s, scale), "%mask", tensor_type(length, length))
            return t.matmul(t.unary("softmax", s), v, tensor_type(length, hd))

        x = "%x"
        results: list[tuple[str, str, str]] = []
        for layer in layers:
            x, ks, vs = self._layer(t, x, layer, length, w, "%cos", "%sin", attend)
            results += self._kv_results(layer, ks, vs, length)
        if not head:
            return t.func(
                "prefill", args, [(x, "hidden", tensor_type(length, c.dim)), *results]
            )
        if length > 1:
            # The last position, picked by a one-hot row: a GEMV, which the mesh maps
            # like any other (a row split at an offset would need the whole tensor).
            pick = np.zeros((1, length), np.float32)
            pick[0, -1] = 1.0
            one_hot = t.op(
                "last_pos",
                f'graph.constant dense<"{hexdump(pick)}"> : {tensor_type(1, length)}',
                tensor_type(1, length),
            )
            last = t.matmul(one_hot, x, tensor_type(1, c.dim))
        else:
            last = x
        logits = t.matmul(
            t.rmsnorm(last, w["norm"], c.norm_eps), w["head"], tensor_type(1, c.vocab)
        )
        return t.func(
            "prefill", args, [(logits, "logits", tensor_type(1, c.vocab)), *results]
        )

    def decode(self, layers: Sequence[int] | None = None, head: bool = True) -> str:
        """One decode step over a cache of `max_seq` positions (MLIR text)."""
        c = self.c
        hd, half, s_len = c.head_dim, c.head_dim // 2, c.max_seq
        layers = list(range(c.n_layers)) if layers is None else list(layers)
        t = Text()
        args = self._inputs(t, 1, s_len)
        for layer in layers:
            for g in range(c.n_kv_heads):
                for key, width in (
                    (f"kcache_l{layer}_g{g}_lo", half),
                    (f"kcache_l{layer}_g{g}_hi", half),
                    (f"vcache_l{layer}_g{g}", hd),
                ):
                    args.append(
                        f'%{key}: {tensor_type(s_len, width)} {{plmr.name = "{key}"}}'
                    )
                    t.types[f"%{key}"] = tensor_type(s_len, width)
        w = self._weights(t, args, layers, head)
        scale = 1.0 / math.sqrt(hd)

        def attend(t: Text, q: Pair, k: Pair, v: str, layer: int, g: int) -> str:
            kc = (f"%kcache_l{layer}_g{g}_lo", f"%kcache_l{layer}_g{g}_hi")
            vc = f"%vcache_l{layer}_g{g}"
            sc = self._scores(t, q, kc, tensor_type(1, s_len))
            sc = t.binary("add", t.scale(sc, scale), "%mask", tensor_type(1, s_len))
            sn = t.scale(self._scores(t, q, k, tensor_type(1, 1)), scale)
            mc = t.reduce("max", sc, tensor_type(1, 1))
            # m = max(mc, sn) = sn + relu(mc - sn)
            m = t.binary(
                "add",
                sn,
                t.unary("relu", t.binary("sub", mc, sn, tensor_type(1, 1))),
                tensor_type(1, 1),
            )
            pc = t.unary("exp", t.binary("sub", sc, m, tensor_type(1, s_len)))
            pn = t.unary("exp", t.binary("sub", sn, m, tensor_type(1, 1)))
            total = t.binary(
                "add", t.reduce("sum", pc, tensor_type(1, 1)), pn, tensor_type(1, 1)
            )
            o = t.binary(
                "add",
                t.matmul(pc, vc, tensor_type(1, hd)),
                t.binary("mul", pn, v, tensor_type(1, hd)),
                tensor_type(1, hd),
            )
            return t.binary("div", o, total, tensor_type(1, hd))

        x = "%x"
        results: list[tuple[str, str, str]] = []
        for layer in layers:
            x, ks, vs = self._layer(t, x, layer, 1, w, "%cos", "%sin", attend)
            results += self._kv_results(layer, ks, vs, 1)
        if not head:
            return t.func("decode", args, [(x, "hidden", tensor_type(1, c.dim)), *results])
        logits = t.matmul(
            t.rmsnorm(x, w["norm"], c.norm_eps), w["head"], tensor_type(1, c.vocab)
        )
        return t.func(
            "decode", args, [(logits, "logits", tensor_type(1, c.vocab)), *results]
        )


FORMS = ("heads", "per-head")


class ProgramBuilder:
    """
    Writes the prefill and decode programs of a model (weights inline or as arguments),
    in one of two forms:

    - `heads` (default): heads are a tensor dimension (`models/llama_heads.py`):
      batched projections over per-head weights, reshapes and transposes, batched
      attention. K and V come out as `[Hkv, 1, n, hd]` (the group axis of GQA); the decode step takes the caches as `[Hkv, S, hd]` and the
      full cos / sin tables `[n, hd]`.
      `one_projection`: Q, rotated Q, K, rotated K and V in one GEMV (large grids).
    - `per-head`: one matmul per head and projection, RoPE on the halves (the baseline;
      K comes out as two halves per KV head, cos / sin are the half tables).
    """

    def __init__(
        self,
        config: LlamaConfig,
        weights: dict[str, F32] | None,
        form: str = "heads",
        one_projection: bool = False,
    ):
        if form not in FORMS:
            raise PlmrError(f"unknown program form '{form}' ({', '.join(FORMS)})")
        self.form = form
        self._impl = (
            HeadsBuilder(config, weights, one_projection)
            if form == "heads"
            else PerHeadBuilder(config, weights)
        )

    def prefill(
        self, length: int, layers: Sequence[int] | None = None, head: bool = True
    ) -> str:
        """The prefill program of a prompt of `length` tokens (MLIR text)."""
        return self._impl.prefill(length, layers, head)

    def decode(
        self, layers: Sequence[int] | None = None, head: bool = True, tokens: int = 1
    ) -> str:
        """
        One decode step over a cache of `max_seq` positions (MLIR text); `tokens` new
        tokens at once (the heads form only), with the logits of each.
        """
        if tokens < 1:
            raise PlmrError(f"a decode step takes at least one new token, got {tokens}")
        if tokens == 1:
            return self._impl.decode(layers, head)
        if not isinstance(self._impl, HeadsBuilder):
            raise PlmrError(
                f"a decode step over {tokens} new tokens is written in the heads form "
                "only; use --form heads"
            )
        return self._impl.decode(layers, head, tokens)


__all__ = [
    "FORMS",
    "PRESETS",
    "KVCache",
    "LlamaConfig",
    "NumpyLlama",
    "PerHeadBuilder",
    "ProgramBuilder",
    "cache_mask",
    "cache_slot",
    "causal_mask",
    "decode_cache_args",
    "get_config",
    "random_weights",
    "rope_half_tables",
    "rope_tables",
    "rotate_half_matrix",
    "split_kv_rows",
]
