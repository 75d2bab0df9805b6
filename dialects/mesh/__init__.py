"""
The `mesh` dialect: programs for a 2D mesh of processing elements (PEs).

A `mesh.program` names its device (`#mesh.device<"wse2">`) and a grid of `[rows, cols]`
PEs. Host tensors enter with `mesh.scatter`, which places them under a layout
(`#mesh.layout<[y, x]>`: tensor dim 0 is split over the mesh's y axis, dim 1 over x;
`-` keeps a dim whole; axes no dim uses hold replicas; `band x W` puts two dims on one
axis, the first over bands of W PEs and the second within each band), and leave with
`mesh.gather`.
`mesh.spmd` is the per-core program: its block receives the core's coordinates and its
local blocks, computes with `tile` ops, and communicates with collectives —
`mesh.shift` (on a linear, torus or interleaved ring), `mesh.broadcast`, `mesh.reduce`,
`mesh.allreduce` (K-tree, pipeline or ring; the last three also within segments of
consecutive PEs) — or point to point with `mesh.send` /
`mesh.recv` on a color. `mesh.run` runs a program from a host function: a model whose
repeated layers were outlined runs one layer's program once per layer. `mesh-route` lowers collectives to colors and explicit route
rules (`mesh.route`): which routers forward which color from which port to which ports.
"""

from __future__ import annotations

from xdsl.ir import Dialect

from plmr.dialects.mesh.attrs import (
    LAYOUT_MODES,
    SKEW_RINGS,
    Algorithm,
    AlgorithmAttr,
    Axis,
    AxisAttr,
    CombineKind,
    CombineKindAttr,
    DeviceAttr,
    DistType,
    LayoutAttr,
    Port,
    PortAttr,
    Ring,
    RingAttr,
    axis_size,
    block_shape,
    i64_attr,
    split_counts,
)
from plmr.dialects.mesh.comm import (
    AllgatherOp,
    AllreduceOp,
    BroadcastOp,
    CommOp,
    DiagonalBroadcastOp,
    RecvOp,
    ReduceOp,
    RouteOp,
    SendOp,
    ShiftOp,
    segment_of,
)
from plmr.dialects.mesh.program import (
    GatherOp,
    ProgramOp,
    ReturnOp,
    ScatterOp,
    SpmdOp,
    YieldOp,
    enclosing_program,
    grid_of,
)
from plmr.dialects.mesh.sequence import RunOp, runs_programs

__all__ = [
    "LAYOUT_MODES",
    "SKEW_RINGS",
    "Algorithm",
    "AlgorithmAttr",
    "AllgatherOp",
    "AllreduceOp",
    "Axis",
    "AxisAttr",
    "BroadcastOp",
    "CombineKind",
    "CombineKindAttr",
    "CommOp",
    "DeviceAttr",
    "DiagonalBroadcastOp",
    "DistType",
    "GatherOp",
    "LayoutAttr",
    "Mesh",
    "Port",
    "PortAttr",
    "ProgramOp",
    "RecvOp",
    "ReduceOp",
    "ReturnOp",
    "Ring",
    "RingAttr",
    "RouteOp",
    "RunOp",
    "ScatterOp",
    "SendOp",
    "ShiftOp",
    "SpmdOp",
    "YieldOp",
    "axis_size",
    "block_shape",
    "enclosing_program",
    "grid_of",
    "i64_attr",
    "runs_programs",
    "segment_of",
    "split_counts",
]

Mesh = Dialect(
    "mesh",
    [
        ProgramOp,
        ReturnOp,
        ScatterOp,
        GatherOp,
        SpmdOp,
        YieldOp,
        ShiftOp,
        BroadcastOp,
        DiagonalBroadcastOp,
        AllreduceOp,
        AllgatherOp,
        ReduceOp,
        SendOp,
        RecvOp,
        RouteOp,
        RunOp,
    ],
    [
        AxisAttr,
        RingAttr,
        CombineKindAttr,
        AlgorithmAttr,
        PortAttr,
        DeviceAttr,
        LayoutAttr,
        DistType,
    ],
)
