"""The hand-written `graph` examples compute what a plain numpy model computes."""

from pathlib import Path

import numpy as np

from plmr.dialects.context import load_module
from plmr.runtime.running import random_inputs, run_function, select_function
from plmr.target.interface import arg_names

EXAMPLES = Path(__file__).resolve().parent.parent.parent / "examples" / "graph"


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _rmsnorm(x: np.ndarray, g: np.ndarray) -> np.ndarray:
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + 1e-6) * g


def test_decoder_block_matches_numpy():
    module = load_module(EXAMPLES / "decoder_block.mlir")
    fn = select_function(module, None)
    args = random_inputs(fn, seed=5)
    a = {n: v.astype(np.float64) for n, v in zip(arg_names(fn), args, strict=True)}
    assert arg_names(fn)[:2] == ["token_ids", "embedding"]
    assert args[0].max() < 64  # ids were drawn in range for the gather
    (got,) = run_function(module, fn, args)

    x = a["embedding"][args[0]]
    h = _rmsnorm(x, a["arg9"])
    q, k, v = (h @ a[w] for w in ("arg2", "arg3", "arg4"))
    heads = [slice(0, 8), slice(8, 16)]
    causal = np.triu(np.full((8, 8), -1e9), 1)
    attn = np.concatenate(
        [_softmax(q[:, s] @ k[:, s].T / np.sqrt(8) + causal) @ v[:, s] for s in heads],
        axis=1,
    )
    r1 = x + attn @ a["arg5"]
    h2 = _rmsnorm(r1, a["arg10"])
    gate, up = h2 @ a["arg6"], h2 @ a["arg7"]
    want = r1 + (gate / (1 + np.exp(-gate)) * up) @ a["arg8"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)


def test_softmax_attention_matches_numpy():
    module = load_module(EXAMPLES / "softmax_attention.mlir")
    fn = select_function(module, None)
    q, k, v = random_inputs(fn, seed=2)
    (got,) = run_function(module, fn, [q, k, v])
    want = _softmax(q.astype(np.float64) @ k.T / np.sqrt(32)) @ v
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
