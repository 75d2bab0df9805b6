"""
`plmr compile --explain`: per nest of a compiled program, the mapping the partitioner
chose (loops -> mesh axes), its collectives, and the cost model's estimate next to the
cycles the nest's `mesh.spmd` takes in the simulator (timing mode, critical path).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import cast

import numpy as np
import numpy.typing as npt
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import Attribute

from plmr.dialects import mesh
from plmr.lowering.tile_to_mesh import NestPlan
from plmr.models.nests import run_nests
from plmr.runtime.mesh_machine import find_program
from plmr.target.device import Device


@dataclass(frozen=True)
class ExplainRow:
    """One nest: its plan (None for straight-line code) and its simulated cycles."""

    index: int
    name: str
    mapping: str
    collectives: str
    estimate: float | None
    cycles: float
    allreduces: int


def collectives(spmd: mesh.SpmdOp) -> str:
    """`allreduce x ×2, shift y`: the communication ops of a nest (in the IR)."""
    counts: Counter[str] = Counter()
    for op in spmd.walk():
        if isinstance(op, mesh.AllreduceOp | mesh.ReduceOp | mesh.BroadcastOp):
            within = "" if op.segment is None else f" segment {op.segment.value.data}"
            counts[f"{op.name.removeprefix('mesh.')} {op.axis.data}{within}"] += 1
        elif isinstance(op, mesh.AllgatherOp):
            counts[f"allgather {op.axis.data}"] += 1
        elif isinstance(op, mesh.DiagonalBroadcastOp):
            counts[f"diagonal broadcast {op.axis.data}"] += 1
        elif isinstance(op, mesh.ShiftOp):
            counts[f"shift {op.axis.data}"] += 1
        elif isinstance(op, mesh.SendOp):
            counts["send"] += 1
    return ", ".join(f"{k} ×{n}" if n > 1 else k for k, n in counts.items()) or "-"


def _zeros(t: Attribute) -> npt.NDArray[np.float32]:
    """An input of type `t` (timing mode reads only its shape)."""
    if isinstance(t, TensorType):
        return np.zeros(tuple(cast(TensorType[Attribute], t).get_shape()), np.float32)
    return np.zeros((), np.float32)


def explain(
    module: ModuleOp, plans: list[NestPlan], device: Device, relay: bool = False
) -> list[ExplainRow]:
    """Simulates the compiled `module` (timing mode) and pairs each nest with its plan."""
    program = find_program(module, None)
    inputs = [_zeros(a.type) for a in program.body.block.args]
    _, times = run_nests(module, inputs, device, relay=relay)
    nests = [op for op in program.body.block.ops if isinstance(op, mesh.SpmdOp)]
    plan_of = {id(p.spmd): p for p in plans}
    rows: list[ExplainRow] = []
    for spmd, t in zip(nests, times, strict=True):
        plan = plan_of.get(id(spmd))
        rows.append(
            ExplainRow(
                t.index,
                t.name,
                plan.mapping() if plan else "(straight-line code, replicated)",
                collectives(spmd),
                plan.estimate if plan else None,
                t.cycles,
                sum(isinstance(op, mesh.AllreduceOp) for op in spmd.walk()),
            )
        )
    return rows


def format_explain(rows: list[ExplainRow]) -> str:
    """The rows as a table, with totals."""
    lines = [
        "| # | nest | mapping (loop(blocks) -> axis) | collectives | estimate | simulated |",
        "|---:|---|---|---|---:|---:|",
    ]
    for r in rows:
        est = "-" if r.estimate is None else f"{r.estimate:,.0f}"
        lines.append(
            f"| {r.index} | %{r.name} | {r.mapping} | {r.collectives} | {est} | "
            f"{r.cycles:,.0f} |"
        )
    estimated = sum(r.estimate or 0.0 for r in rows)
    simulated = sum(r.cycles for r in rows)
    lines.append(
        f"\n{len(rows)} nests (mesh.spmd), {sum(r.allreduces for r in rows)} allreduces; "
        f"estimate {estimated:,.0f} cycles, simulated {simulated:,.0f} cycles"
    )
    return "\n".join(lines) + "\n"


__all__ = ["ExplainRow", "collectives", "explain", "format_explain"]
