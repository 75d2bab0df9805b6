"""
The rewrite patterns of `graph-canonicalize`, by role: `simplify` (no-op removal,
constant folding), `norms` (RMSNorm and LayerNorm spelled out op by op), `attention`
(SDPA's NaN guard, grouped-query attention's repeated K/V heads) and `rope` (RoPE's
`rotate_half`). `match` holds the matching helpers they share.
"""
