"""
The rewrite patterns of `graph-canonicalize`, by role: `simplify` (no-op removal,
constant folding, reshapes and transposes), `norms` (RMSNorm and LayerNorm spelled out
op by op), `activations` (SiLU and GELU spelled out), `attention` (SDPA's NaN guard,
grouped-query attention's repeated K/V heads) and `rope` (RoPE's `rotate_half`).
`match` holds the matching helpers they share.
"""
