"""
Model sizes from a Hugging Face `config.json` (`plmr bench decode|prefill --config`).

The keys read are the LLaMA/Qwen2 vocabulary of `transformers`:

| key | `LlamaConfig` field | required |
|---|---|---|
| `hidden_size` | `dim` | yes |
| `num_attention_heads` | `n_heads` | yes |
| `num_key_value_heads` | `n_kv_heads` | no (default: `num_attention_heads`) |
| `intermediate_size` | `ffn_dim` | yes |
| `num_hidden_layers` | `n_layers` | yes |
| `vocab_size` | `vocab` | yes |
| `head_dim` | `head_dim_override` | no (default: `hidden_size / num_attention_heads`) |
| `rope_theta` | `rope_theta` | no (default 10000, as `transformers`) |
| `rms_norm_eps` | `norm_eps` | no (default 1e-6, as `transformers`) |
| `max_position_embeddings` | `max_seq` | no (default 4096) |

Other keys (`architectures`, `torch_dtype`, `rope_scaling`, ...) are ignored. A missing
required key, a value of the wrong type or sizes that do not fit together (heads that do
not divide the width or do not group into KV heads, an odd head dimension) are one
`PlmrError` naming the key and the file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from plmr.errors import PlmrError
from plmr.models.llama import LlamaConfig

REQUIRED = (
    "hidden_size",
    "num_attention_heads",
    "intermediate_size",
    "num_hidden_layers",
    "vocab_size",
)
"""The keys a config must have."""

DEFAULT_ROPE_THETA = 10000.0
DEFAULT_NORM_EPS = 1e-6
DEFAULT_MAX_POSITIONS = 4096


def _int(data: dict[str, Any], key: str, where: str) -> int:
    value = data[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise PlmrError(f"{where}: '{key}' must be a positive integer, got {value!r}")
    return value


def _float(data: dict[str, Any], key: str, where: str, default: float) -> float:
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise PlmrError(f"{where}: '{key}' must be a positive number, got {value!r}")
    return float(value)


def config_from_hf(data: Any, where: str, name: str) -> LlamaConfig:
    """
    The `LlamaConfig` of a parsed `config.json` (`where` names the file in errors,
    `name` becomes the model's name).
    """
    if not isinstance(data, dict):
        raise PlmrError(f"{where}: expected a JSON object of model sizes")
    fields: dict[str, Any] = dict(data)  # pyright: ignore[reportUnknownArgumentType]
    missing = [k for k in REQUIRED if k not in fields]
    if missing:
        raise PlmrError(
            f"{where}: missing key{'s' if len(missing) > 1 else ''} "
            f"{', '.join(repr(k) for k in missing)} (a Hugging Face config.json needs "
            f"{', '.join(REQUIRED)})"
        )
    dim = _int(fields, "hidden_size", where)
    heads = _int(fields, "num_attention_heads", where)
    kv_heads = (
        _int(fields, "num_key_value_heads", where)
        if "num_key_value_heads" in fields
        else heads
    )
    head_dim = _int(fields, "head_dim", where) if fields.get("head_dim") is not None else 0
    if not head_dim and dim % heads:
        raise PlmrError(
            f"{where}: 'hidden_size' {dim} is not a multiple of 'num_attention_heads' "
            f"{heads} (give 'head_dim')"
        )
    if heads % kv_heads:
        raise PlmrError(
            f"{where}: 'num_attention_heads' {heads} is not a multiple of "
            f"'num_key_value_heads' {kv_heads}"
        )
    if (head_dim or dim // heads) % 2:
        raise PlmrError(
            f"{where}: the head dimension {head_dim or dim // heads} is odd ('head_dim' or "
            "'hidden_size' / 'num_attention_heads'); rotary embedding needs it even"
        )
    max_seq = (
        _int(fields, "max_position_embeddings", where)
        if "max_position_embeddings" in fields
        else DEFAULT_MAX_POSITIONS
    )
    return LlamaConfig(
        name,
        dim=dim,
        n_layers=_int(fields, "num_hidden_layers", where),
        n_heads=heads,
        n_kv_heads=kv_heads,
        ffn_dim=_int(fields, "intermediate_size", where),
        vocab=_int(fields, "vocab_size", where),
        max_seq=max_seq,
        rope_theta=_float(fields, "rope_theta", where, DEFAULT_ROPE_THETA),
        norm_eps=_float(fields, "rms_norm_eps", where, DEFAULT_NORM_EPS),
        head_dim_override=head_dim if head_dim and head_dim != dim // heads else 0,
    )


def load_hf_config(path: Path | str) -> LlamaConfig:
    """Reads a `config.json`; the model is named after the file (`qwen2-72b.json`)."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise PlmrError(f"cannot read the model config {p}: {e.strerror or e}") from e
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise PlmrError(
            f"{p}: not valid JSON (line {e.lineno}, column {e.colno}: {e.msg})"
        ) from e
    name = p.stem if p.stem != "config" else p.parent.name or p.stem
    return config_from_hf(data, str(p), name)


def to_hf(config: LlamaConfig) -> dict[str, Any]:
    """The `config.json` keys of a model (what `config_from_hf` reads back)."""
    out: dict[str, Any] = {
        "hidden_size": config.dim,
        "num_attention_heads": config.n_heads,
        "num_key_value_heads": config.n_kv_heads,
        "intermediate_size": config.ffn_dim,
        "num_hidden_layers": config.n_layers,
        "vocab_size": config.vocab,
        "rope_theta": config.rope_theta,
        "rms_norm_eps": config.norm_eps,
        "max_position_embeddings": config.max_seq,
    }
    if config.head_dim_override:
        out["head_dim"] = config.head_dim
    return out


__all__ = ["REQUIRED", "config_from_hf", "load_hf_config", "to_hf"]
