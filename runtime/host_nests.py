"""
The host's share of a mesh program: the ops `convert-tile-to-mesh` leaves at the top of a
`mesh.program` outside any `mesh.spmd` to compute small values of host tensors there (a
decode step's RoPE tables from its position), run with the tile semantics when the
program reaches them. Their results reach the wafer through `mesh.scatter`, like inputs.
"""

from __future__ import annotations

from typing import Any

from xdsl.dialects import arith, tensor
from xdsl.ir import Operation, SSAValue

from plmr.dialects import tile
from plmr.runtime.reference import ReferenceEvaluator

HOST_OPS = (tile.ForOp, tile.FillOp, arith.ConstantOp, tensor.EmptyOp)
"""The ops a program's host nests are made of, at the program's top level."""


def is_host_op(op: Operation) -> bool:
    """Whether the mesh runtime runs `op` on the host (`run_host_op`)."""
    return isinstance(op, HOST_OPS)


def run_host_op(op: Operation, env: dict[SSAValue, Any]) -> None:
    """Runs `op` on the host with the values of `env`, where it records its results."""
    ev = ReferenceEvaluator()
    ev.push_scope()
    try:
        ev.set_values((v, env[v]) for v in tile.free_values(op) if v in env)
        results = ev.call_impl(op, [env[v] for v in op.operands])
    finally:
        ev.pop_scope()
    for value, result in zip(op.results, results, strict=True):
        env[value] = result


def computed_on_host(value: SSAValue) -> bool:
    """Whether `value` is the result of a host nest (its bytes stream in like an input)."""
    return isinstance(value.owner, tile.ForOp)


__all__ = ["HOST_OPS", "computed_on_host", "is_host_op", "run_host_op"]
