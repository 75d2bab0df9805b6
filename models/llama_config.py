"""
The sizes of a LLaMA-style model (`LlamaConfig`) and the presets plmr knows by name
(`tiny`, `llama3-8b`, `llama2-13b`, `qwen2-72b`); `models/llama.py` builds the model's
weights, its numpy oracle and its programs from them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

from plmr.errors import PlmrError

if TYPE_CHECKING:
    from plmr.lowering.kv_cache import ModelConfig


@dataclass(frozen=True)
class LlamaConfig:
    """The sizes of a LLaMA-style model."""

    name: str
    dim: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    ffn_dim: int
    vocab: int
    max_seq: int
    """The KV cache's capacity (prompt plus generated tokens)."""
    rope_theta: float = 500000.0
    norm_eps: float = 1e-5
    head_dim_override: int = 0
    """The head dimension when it is not dim / n_heads (models padded for a grid)."""

    def __post_init__(self) -> None:
        if not self.head_dim_override and self.dim % self.n_heads:
            raise PlmrError(f"{self.name}: dim {self.dim} is not a multiple of the heads")
        if self.n_heads % self.n_kv_heads:
            raise PlmrError(f"{self.name}: {self.n_heads} heads do not group into KV heads")
        if self.head_dim % 2:
            raise PlmrError(f"{self.name}: rotary embedding needs an even head dimension")

    @property
    def head_dim(self) -> int:
        return self.head_dim_override or self.dim // self.n_heads

    def padded(self, multiple: int) -> LlamaConfig:
        """
        The model with `dim`, `ffn_dim`, `vocab` and the cache padded up to multiples of
        `multiple` (as WaferLLM pads to the grid size), heads unchanged: timing runs.
        """

        def up(v: int) -> int:
            return -(-v // multiple) * multiple

        return dataclasses.replace(
            self,
            name=f"{self.name} (padded to {multiple})",
            dim=up(self.dim),
            ffn_dim=up(self.ffn_dim),
            vocab=up(self.vocab),
            max_seq=up(self.max_seq),
            head_dim_override=self.head_dim,
        )

    def model_config(self) -> ModelConfig:
        """The sizes the KV-cache capacity model (`lowering/kv_cache.py`) takes."""
        from plmr.lowering.kv_cache import ModelConfig

        return ModelConfig(
            self.name,
            self.dim,
            self.n_layers,
            self.n_heads,
            self.n_kv_heads,
            self.ffn_dim,
            self.vocab,
        )

    @property
    def group(self) -> int:
        """Query heads per KV head."""
        return self.n_heads // self.n_kv_heads


PRESETS: dict[str, LlamaConfig] = {
    "tiny": LlamaConfig(
        "tiny",
        dim=64,
        n_layers=2,
        n_heads=4,
        n_kv_heads=2,
        ffn_dim=128,
        vocab=256,
        max_seq=32,
    ),
    "llama3-8b": LlamaConfig(
        "llama3-8b",
        dim=4096,
        n_layers=32,
        n_heads=32,
        n_kv_heads=8,
        ffn_dim=14336,
        vocab=128256,
        max_seq=8192,
    ),
    # Llama-2-13b-hf's config.json.
    "llama2-13b": LlamaConfig(
        "llama2-13b",
        dim=5120,
        n_layers=40,
        n_heads=40,
        n_kv_heads=40,
        ffn_dim=13824,
        vocab=32000,
        max_seq=4096,
        rope_theta=10000.0,
        norm_eps=1e-5,
    ),
    # Qwen2-72B-Instruct's config.json (its QKV biases are left out).
    "qwen2-72b": LlamaConfig(
        "qwen2-72b",
        dim=8192,
        n_layers=80,
        n_heads=64,
        n_kv_heads=8,
        ffn_dim=29568,
        vocab=152064,
        max_seq=32768,
        rope_theta=1000000.0,
        norm_eps=1e-6,
    ),
    # Llama-3.1-70B's config.json (its llama3 RoPE scaling of long contexts left out).
    "llama3.1-70b": LlamaConfig(
        "llama3.1-70b",
        dim=8192,
        n_layers=80,
        n_heads=64,
        n_kv_heads=8,
        ffn_dim=28672,
        vocab=128256,
        max_seq=131072,
        rope_theta=500000.0,
        norm_eps=1e-5,
    ),
    # Llama-3.1-405B's config.json (likewise).
    "llama3.1-405b": LlamaConfig(
        "llama3.1-405b",
        dim=16384,
        n_layers=126,
        n_heads=128,
        n_kv_heads=8,
        ffn_dim=53248,
        vocab=128256,
        max_seq=131072,
        rope_theta=500000.0,
        norm_eps=1e-5,
    ),
}


def get_config(name: str) -> LlamaConfig:
    config = PRESETS.get(name)
    if config is None:
        raise PlmrError(f"unknown model '{name}' (presets: {', '.join(PRESETS)})")
    return config


__all__ = ["PRESETS", "LlamaConfig", "get_config"]
