"""
The LLaMA programs with heads as a tensor dimension, as frameworks write them and ONNX
exports spell them.

Per layer: the projections of all heads at once as batched GEMVs over per-head weights
(`a[1, 1, n, dim] @ Wq[Hkv, 2G, dim, hd] -> [Hkv, 2G, n, hd]`: the G query heads of a
KV head and their rotations `Wq·R` in one GEMV, sliced after along the group axis; K, V
and the rotated `Wk·R` with one head per group; R is the signed permutation of
`rotate_half`, so they are exact). With `one_projection` (the benchmarks' choice on large
grids, where the head dimension splits over an axis), Q, rotated Q, K, rotated K and V
are one GEMV over `Wqkv[Hkv, 2G + 3, dim, hd]`, sliced after (V, a result of the
program, is then copied out of its slice by a local nest); on small grids, where the
heads split over the axes, the slices would move to other layouts. A prefill with
`one_projection` reads only Q's, K's and V's blocks of `Wqkv` and rotates Q and K as
exports write it, `rotate_half(t) = Concat(Neg(t[..., h/2:]), t[..., :h/2])`: a
permutation of each row on the PE holding it, where a projection by `W·R` would cost
as much as Q's own (`plmr compile` leaves a prefill's rotations unfolded on large
grids, `graph-fold-rotate-half{max-rows}`). Then RoPE as
`q·cos + (q·R)·sin` on the head dimension, grouped-query attention as batched matmuls
that broadcast the K/V heads (`[Hkv, G, L, hd] × [Hkv, 1, S, hd]`), the output
projection per head (`o[Hkv, G, n, hd] @ Wo[Hkv, G, hd, dim]`) summed over the group
axis, then over the KV heads, and the SwiGLU FFN with up and gate as one batched GEMV
over stacked weights (`[2, dim, ffn]`).

The decode step reads the new token's K and V as part of the cache: at the free
position `slot` (one-hot, visible in `mask`) the cache reads `cache·(1 − slot) +
slot ⊗ row`, so the scores, the softmax and P·V run over one sequence of positions.
Its output projection is one reduction over the head dimension and the heads,
`Σ_{d,h,g} o[h,g,d]·Wo[h,g,d,:]` (written `[hd, Hkv, G]`-major so that the head
dimension is the outer reduction the mesh splits; the heads reduce on each PE before
the allreduce).

- prefill(x[L, dim], mask[L, L], cos[L, hd], sin[L, hd]) ->
  (logits[1, vocab], then per layer K[Hkv, 1, L, hd] (rotated) and V[Hkv, 1, L, hd])
- decode(x[k, dim], mask[k, S], slot[k, S], cos[k, hd], sin[k, hd], then per layer the
  caches K[Hkv, S, hd] and V[Hkv, S, hd]) -> (logits[k, vocab], per layer the new K and
  V rows `[Hkv, 1, k, hd]`): one new token (k = 1), or k of them at once (the
  verification step of speculative decoding), token i at the one-hot slot `slot[i]`,
  seeing what `mask[i]` shows (the cache and the new tokens up to itself)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from plmr.models.text import F32, Text, hexdump, tensor_type

if TYPE_CHECKING:
    from plmr.models.llama_config import LlamaConfig


def rotate_half_matrix(hd: int) -> F32:
    """R with `x @ R = [-x2, x1]` for `x = [x1, x2]` (the two halves)."""
    half = hd // 2
    r = np.zeros((hd, hd), np.float32)
    for j in range(half):
        r[j + half, j] = -1.0
        r[j, j + half] = 1.0
    return r


def layer_shapes(c: LlamaConfig, one_projection: bool) -> dict[str, tuple[int, ...]]:
    """The weights of one layer of the heads program (name suffix -> shape)."""
    hd, hkv, g = c.head_dim, c.n_kv_heads, c.group
    projections: dict[str, tuple[int, ...]] = (
        {"wqkv": (hkv, 2 * g + 3, c.dim, hd)}
        if one_projection
        else {
            "wq": (hkv, 2 * g, c.dim, hd),
            "wk": (hkv, 1, c.dim, hd),
            "wv": (hkv, 1, c.dim, hd),
            "wkr": (hkv, 1, c.dim, hd),
        }
    )
    return {
        "attn_norm": (c.dim,),
        **projections,
        "wo": (hkv, g, hd, c.dim),
        "ffn_norm": (c.dim,),
        "w13": (2, c.dim, c.ffn_dim),
        "w2": (c.ffn_dim, c.dim),
    }


def fused_weights(
    c: LlamaConfig, w: dict[str, F32], layer: int, one_projection: bool
) -> dict[str, F32]:
    """One layer's weights of the heads program from the per-head weights."""
    p = f"l{layer}"
    r = rotate_half_matrix(c.head_dim)
    hkv, g = c.n_kv_heads, c.group

    def heads(name: str, count: int, per: int, rot: bool) -> F32:
        mats = [
            w[f"{p}.{name}{h}"] @ r if rot else w[f"{p}.{name}{h}"] for h in range(count)
        ]
        return np.stack(mats).reshape(count // per, per, c.dim, c.head_dim)

    wq = heads("wq", c.n_heads, g, False)
    wk = heads("wk", hkv, 1, False)
    wv = heads("wv", hkv, 1, False)
    wqr = heads("wq", c.n_heads, g, True)
    wkr = heads("wk", hkv, 1, True)
    projections = (
        # Per KV head: its G query heads, their rotations, K, rotated K and V.
        {"wqkv": np.concatenate([wq, wqr, wk, wkr, wv], axis=1)}
        if one_projection
        # Per KV head: its G query heads, then their rotations; K, V, rotated K.
        else {"wq": np.concatenate([wq, wqr], axis=1), "wk": wk, "wv": wv, "wkr": wkr}
    )
    return {
        "attn_norm": w[f"{p}.attn_norm"],
        **projections,
        "wo": np.stack([w[f"{p}.wo{h}"] for h in range(c.n_heads)]).reshape(
            hkv, g, c.head_dim, c.dim
        ),
        "ffn_norm": w[f"{p}.ffn_norm"],
        # The FFN's up (W1) and gate (W3) projections, one batched GEMV.
        "w13": np.stack([w[f"{p}.w1"], w[f"{p}.w3"]]),
        "w2": w[f"{p}.w2"],
    }


class HeadsBuilder:
    """Writes the prefill and decode programs with heads as a dimension."""

    def __init__(
        self,
        config: LlamaConfig,
        weights: dict[str, F32] | None,
        one_projection: bool = False,
    ):
        self.c = config
        self.w = weights
        self.one_projection = one_projection
        """Q, rotated Q, K, rotated K and V in one GEMV (else Q with rotated Q, then
        K, V and rotated K apart)."""

    def _weights(
        self, t: Text, args: list[str], layers: Sequence[int], head: bool
    ) -> dict[str, str]:
        c = self.c
        names: dict[str, str] = {}
        for layer in layers:
            fused = (
                None
                if self.w is None
                else fused_weights(c, self.w, layer, self.one_projection)
            )
            for key, shape in layer_shapes(c, self.one_projection).items():
                name = f"l{layer}.{key}"
                names[name] = t.value(
                    name, shape, args, None if fused is None else fused[key]
                )
        if head:
            for key, shape in (("norm", (c.dim,)), ("head", (c.dim, c.vocab))):
                names[key] = t.value(
                    key, shape, args, None if self.w is None else self.w[key]
                )
        return names

    def _inputs(self, t: Text, n: int, s_len: int, slot: bool) -> list[str]:
        hd = self.c.head_dim
        args: list[str] = []
        shapes = [("x", (n, self.c.dim)), ("mask", (n, s_len))]
        if slot:
            shapes.append(("slot", (n, s_len)))
        shapes += [("cos", (n, hd)), ("sin", (n, hd))]
        for name, shape in shapes:
            t.value(name, shape, args, None)
        return args

    def _rope(self, t: Text, x: str, xr: str, n: int) -> str:
        """`x·cos + (x·R)·sin` over `[Hkv, G, n, hd]` (cos, sin broadcast over heads)."""
        hd = self.c.head_dim
        cos = t.reshape("%cos", (1, 1, n, hd))
        sin = t.reshape("%sin", (1, 1, n, hd))
        rt = t.types[x]
        return t.binary(
            "add", t.binary("mul", x, cos, rt), t.binary("mul", xr, sin, rt), rt
        )

    def _rotate_half(self, t: Text, x: str) -> str:
        """`rotate_half(x) = [-x2, x1]` on the last axis, as exports spell it."""
        rt = t.types[x]
        half = self.c.head_dim // 2
        x1, x2 = t.slices(x, 3, (half, half))
        neg = t.unary("neg", x2)
        ht = t.types[x1]
        return t.op("rot", f"graph.concat {neg}, {x1} axis = 3 : ({ht}, {ht}) -> {rt}", rt)

    def _layer(
        self,
        t: Text,
        x: str,
        layer: int,
        n: int,
        w: dict[str, str],
        attend: Attend,
        rotate: bool = False,
    ) -> tuple[str, str, str]:
        """
        One layer. `rotate` (a prefill, with `one_projection`): Q, K and V projected,
        their rotations computed as exports write them (`rotate_half`), not projected.
        """
        c = self.c
        hd, hkv = c.head_dim, c.n_kv_heads
        p = f"l{layer}"
        a = t.rmsnorm(x, w[f"{p}.attn_norm"], c.norm_eps)
        a4 = t.reshape(a, (1, 1, n, c.dim))
        g = c.group
        if self.one_projection and rotate:
            # A prefill: Q, K and V projected, then rotated as exports write it
            # (`rotate_half`); the rotated weights' blocks are not read.
            wq, _, wk, _, wv = t.slices(w[f"{p}.wqkv"], 1, (g, g, 1, 1, 1))
            q = t.matmul(a4, wq, tensor_type(hkv, g, n, hd))
            k, v = (t.matmul(a4, wx, tensor_type(hkv, 1, n, hd)) for wx in (wk, wv))
            qr, kr = self._rotate_half(t, q), self._rotate_half(t, k)
        elif self.one_projection:
            # Per KV head: its query heads, their rotations (x·Wq·R), K, the rotated K
            # and V in one batched GEMV, split after along the group axis.
            qkv = t.matmul(a4, w[f"{p}.wqkv"], tensor_type(hkv, 2 * g + 3, n, hd))
            q, qr, k, kr, v = t.slices(qkv, 1, (g, g, 1, 1, 1))
        else:
            # The query heads and their rotations of each KV head in one batched GEMV,
            # split after along the group axis; K, V and the rotated K apart.
            qq = t.matmul(a4, w[f"{p}.wq"], tensor_type(hkv, 2 * g, n, hd))
            q, qr = t.slices(qq, 1, (g, g))
            k, v, kr = (
                t.matmul(a4, w[f"{p}.{key}"], tensor_type(hkv, 1, n, hd))
                for key in ("wk", "wv", "wkr")
            )
        q = self._rope(t, q, qr, n)
        k = self._rope(t, k, kr, n)
        o = attend(t, q, k, v, layer)
        # Σ over heads of o[head] @ Wo[head]: the heads' outputs merge in the sum.
        if n == 1:
            # Σ over the head dimension and the heads in one nest, the head dimension
            # outermost: the mesh splits it over an axis and allreduces the PEs' sums
            # over their heads once (a value per output column, not one per head).
            od = t.transpose(t.reshape(o, (hkv, g, hd, 1)), (2, 0, 1, 3))
            wo = t.transpose(w[f"{p}.wo"], (2, 0, 1, 3))
            prod = t.binary("mul", od, wo, tensor_type(hd, hkv, g, c.dim))
            out = t.reshape(
                t.reduce_axes("sum", prod, (0, 1, 2), tensor_type(c.dim)), (1, c.dim)
            )
        else:
            per_head = t.matmul(o, w[f"{p}.wo"], tensor_type(hkv, c.group, n, c.dim))
            per_kv = t.reduce_axes("sum", per_head, (1,), tensor_type(hkv, n, c.dim))
            out = t.reduce_axes("sum", per_kv, (0,), tensor_type(n, c.dim))
        h_ = t.binary("add", x, out, tensor_type(n, c.dim))
        f = t.rmsnorm(h_, w[f"{p}.ffn_norm"], c.norm_eps)
        both = t.matmul(
            t.reshape(f, (1, n, c.dim)), w[f"{p}.w13"], tensor_type(2, n, c.ffn_dim)
        )
        up, gate = (t.reshape(part, (n, c.ffn_dim)) for part in t.slices(both, 0, (1, 1)))
        act = t.binary("mul", t.unary("silu", up), gate, tensor_type(n, c.ffn_dim))
        down = t.matmul(act, w[f"{p}.w2"], tensor_type(n, c.dim))
        return (
            t.binary("add", h_, down, tensor_type(n, c.dim)),
            k,
            v,
        )

    def _head(self, t: Text, x: str, n: int, w: dict[str, str], every: bool = False) -> str:
        """The logits of the last position, or of every position (`every`)."""
        c = self.c
        if every:
            normed = t.rmsnorm(x, w["norm"], c.norm_eps)
            return t.matmul(normed, w["head"], tensor_type(n, c.vocab))
        last = x
        if n > 1:
            # The last position, picked by a one-hot row: a GEMV.
            pick = np.zeros((1, n), np.float32)
            pick[0, -1] = 1.0
            one_hot = t.op(
                "last_pos",
                f'graph.constant dense<"{hexdump(pick)}"> : {tensor_type(1, n)}',
                tensor_type(1, n),
            )
            last = t.matmul(one_hot, x, tensor_type(1, c.dim))
        normed = t.rmsnorm(last, w["norm"], c.norm_eps)
        return t.matmul(normed, w["head"], tensor_type(1, c.vocab))

    def _program(
        self,
        name: str,
        n: int,
        s_len: int,
        layers: Sequence[int],
        head: bool,
        attend: Attend,
        caches: bool,
        every: bool = False,
    ) -> str:
        c = self.c
        kv = (c.n_kv_heads, 1, n, c.head_dim)
        t = Text()
        args = self._inputs(t, n, s_len, caches)
        if caches:
            for layer in layers:
                for kind in ("kcache", "vcache"):
                    t.value(
                        f"{kind}_l{layer}", (c.n_kv_heads, s_len, c.head_dim), args, None
                    )
        w = self._weights(t, args, layers, head)
        x = "%x"
        results: list[tuple[str, str, str]] = []
        for layer in layers:
            x, k, v = self._layer(t, x, layer, n, w, attend, rotate=not caches)
            results.append((k, f"k_l{layer}", tensor_type(*kv)))
            results.append((v, f"v_l{layer}", tensor_type(*kv)))
        if head:
            rows = n if every else 1
            first = (self._head(t, x, n, w, every), "logits", tensor_type(rows, c.vocab))
        else:
            first = (x, "hidden", tensor_type(n, c.dim))
        return t.func(name, args, [first, *results])

    def prefill(
        self, length: int, layers: Sequence[int] | None = None, head: bool = True
    ) -> str:
        """The prefill program of a prompt of `length` tokens (MLIR text)."""
        c = self.c
        hd, hkv, g = c.head_dim, c.n_kv_heads, c.group
        scale = 1.0 / math.sqrt(hd)

        def attend(t: Text, q: str, k: str, v: str, layer: int) -> str:
            del layer
            st = tensor_type(hkv, g, length, length)
            s = t.matmul(q, k, st, transpose_b=True)
            s = t.binary("add", t.scale(s, scale), "%mask", st)
            return t.matmul(t.unary("softmax", s), v, tensor_type(hkv, g, length, hd))

        chosen = list(range(c.n_layers)) if layers is None else list(layers)
        return self._program("prefill", length, length, chosen, head, attend, False)

    def decode(
        self, layers: Sequence[int] | None = None, head: bool = True, tokens: int = 1
    ) -> str:
        """
        One decode step over a cache of `max_seq` positions (MLIR text): one new token,
        or `tokens` of them (speculative decoding's verification step), each at its own
        slot of the cache, attending to the cache and to the new tokens before it (as
        `%mask` says), with the logits of every new token.
        """
        c = self.c
        hd, hkv, g, s_len = c.head_dim, c.n_kv_heads, c.group, c.max_seq
        n = tokens
        scale = 1.0 / math.sqrt(hd)

        def attend(t: Text, q: str, k: str, v: str, layer: int) -> str:
            # The new tokens' K and V enter the cache's read at their free slots
            # (`%slot`, a one-hot row per token, visible in `%mask`): the scores, the
            # softmax and P·V run over one sequence of positions, and the fusion inlines
            # the map into the reads.
            unit = tensor_type(1, 1, 1, 1)
            ones = t.op("one", f"graph.constant dense<1.0> : {unit}", unit)
            seq = tensor_type(hkv, 1, s_len, hd)
            if n == 1:
                slots = [t.reshape("%slot", (1, 1, s_len, 1))]
                taken = slots[0]
            else:
                # Every slot taken by one of the new tokens; token j's row lands at its
                # slot through the broadcast product slot_j ⊗ row_j: elementwise, so
                # the fusion inlines the append into the scores' and P·V's reads.
                taken = t.reshape(
                    t.reduce_axes("sum", "%slot", (0,), tensor_type(s_len)),
                    (1, 1, s_len, 1),
                )
                slots = [
                    t.reshape(part, (1, 1, s_len, 1))
                    for part in t.slices("%slot", 0, [1] * n)
                ]
            keep = t.binary("sub", ones, taken, tensor_type(1, 1, s_len, 1))

            def with_new(cache: str, row: str) -> str:
                # cache·(1 − slots) + Σ_j slot_j ⊗ row_j: exact whatever the slots hold.
                c4 = t.reshape(cache, (hkv, 1, s_len, hd))
                placed = t.binary("mul", c4, keep, seq)
                rows = [row] if n == 1 else t.slices(row, 2, [1] * n)
                for slot, one_row in zip(slots, rows, strict=True):
                    placed = t.binary(
                        "add", placed, t.binary("mul", slot, one_row, seq), seq
                    )
                return placed

            kc = with_new(f"%kcache_l{layer}", k)
            vc = with_new(f"%vcache_l{layer}", v)
            one = tensor_type(hkv, g, n, 1)
            row = tensor_type(hkv, g, n, s_len)
            out = tensor_type(hkv, g, n, hd)
            sc = t.matmul(q, kc, row, transpose_b=True)
            sc = t.binary("add", t.scale(sc, scale), "%mask", row)
            m = t.reduce("max", sc, one)
            p = t.unary("exp", t.binary("sub", sc, m, row))
            total = t.reduce("sum", p, one)
            return t.binary("div", t.matmul(p, vc, out), total, out)

        chosen = list(range(c.n_layers)) if layers is None else list(layers)
        return self._program("decode", n, s_len, chosen, head, attend, True, n > 1)


if TYPE_CHECKING:
    from collections.abc import Callable

    Attend = Callable[[Text, str, str, str, int], str]
    """Builds the attention output `[Hkv, G, n, hd]` from q, k, v and the layer."""
