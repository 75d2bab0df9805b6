"""
The `tile` dialect: what one core runs (Neptune's tile IR).

Values are static-shape builtin `tensor`s. A tensor that a function receives lives in
global memory (the host, or the rest of the wafer); `tile.load` copies a block of it into
the core's SRAM and `tile.store` writes a block back. Everything else computes on blocks
in SRAM: `tile.dot`, `tile.reduce`, elementwise `tile.map` (a named kind, or an
`arith`/`math` body on scalars), `tile.broadcast`, `tile.cast`, `tile.transpose`,
`tile.reshape` and `tile.fill`. `tile.for` is a counted loop with static bounds whose
iteration arguments carry blocks from one iteration to the next; it is marked `parallel`
(iterations independent, e.g. one output block each) or `reduction` (iterations combine
into the carried values, e.g. a K loop of a matmul or a KV loop of attention).

`tile.lookup` runs on the host, not on a core: the rows of a host tensor selected by host
ids (a token embedding), of which only the rows reach the wafer.

The work of every op (flops and SRAM bytes read and written) and its cycles on a device
are the machine model's, `plmr.target.op_cost`: the dialect holds no cost.

The ops live in one module per role, all part of this one `Tile` dialect (import them from
here): `tile_base` (`TileOp`, `nbytes`), `tile_memory` (fill, load, store, lookup),
`tile_compute` (dot, reduce, cast, select), `tile_layout` (broadcast, transpose, reshape)
and `tile_regions` (map, for and their yield).
"""

from __future__ import annotations

from xdsl.ir import Dialect
from xdsl.traits import IsTerminator, Pure, RecursiveMemoryEffect

from plmr.dialects.graph_shapes import static_shape
from plmr.dialects.tile_base import (
    TileOp,
    nbytes,
)
from plmr.dialects.tile_compute import (
    CastOp,
    DotOp,
    ReduceKind,
    ReduceKindAttr,
    ReduceOp,
    SelectOp,
    dot_shape,
)
from plmr.dialects.tile_layout import (
    BroadcastOp,
    ReshapeOp,
    TransposeOp,
)
from plmr.dialects.tile_memory import (
    FillOp,
    LoadOp,
    LookupOp,
    StoreOp,
    lookup_shape,
)
from plmr.dialects.tile_regions import (
    BINARY_KINDS,
    UNARY_KINDS,
    ForOp,
    LoopKind,
    LoopKindAttr,
    MapOp,
    YieldOp,
    free_values,
)

Tile = Dialect(
    "tile",
    [
        FillOp,
        LoadOp,
        StoreOp,
        DotOp,
        ReduceOp,
        MapOp,
        YieldOp,
        BroadcastOp,
        CastOp,
        TransposeOp,
        SelectOp,
        ReshapeOp,
        ForOp,
        LookupOp,
    ],
    [LoopKindAttr, ReduceKindAttr],
)


__all__ = [
    "BINARY_KINDS",
    "UNARY_KINDS",
    "BroadcastOp",
    "CastOp",
    "DotOp",
    "FillOp",
    "ForOp",
    "IsTerminator",
    "LoadOp",
    "LookupOp",
    "LoopKind",
    "LoopKindAttr",
    "MapOp",
    "Pure",
    "RecursiveMemoryEffect",
    "ReduceKind",
    "ReduceKindAttr",
    "ReduceOp",
    "ReshapeOp",
    "SelectOp",
    "StoreOp",
    "Tile",
    "TileOp",
    "TransposeOp",
    "YieldOp",
    "dot_shape",
    "free_values",
    "lookup_shape",
    "nbytes",
    "static_shape",
]
