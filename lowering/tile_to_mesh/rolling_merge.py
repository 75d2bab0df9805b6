"""
Splitting a rolling-update reduction over a mesh axis (Neptune's split-K update).

A rolling-update nest (FlashAttention's form, which `neptune-fuse` derives) carries a
running maximum `m` and accumulators repaired by `exp(m − m')` when the maximum moves:

    m' = max(m, X)                 X independent of the accumulators
    a' = a · exp(m − m') + T(m')   T linear in terms exp(· − m')

Each PE can then run the loop over its own share of the reduction, and the PEs' partial
results merge exactly (Neptune's split-K repair, FlashDecoding's combine):

    M = max_p m_p,    a = Σ_p a_p · exp(m_p − M)

which is one `max` allreduce of the maxima, a local rescaling and one `sum` allreduce per
repaired accumulator. `rolling_roles` recognises such loops; `emit_merge` builds the
combine after a PE's share of the loop.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.builder import Builder
from xdsl.ir import Block, Operation, SSAValue

from plmr.dialects import mesh, tile
from plmr.dialects.graph import static_shape
from plmr.lowering.tile_to_mesh.analysis import depends_on as _depends_on

_LINEAR_UNARY = (tile.ReshapeOp,)


@dataclass(frozen=True)
class RollingRole:
    """How one accumulator of a rolling loop merges across PEs."""

    kind: str
    """`max` (a running maximum) or `scaled` (repaired by the maximum's move)."""
    maximum: int = -1
    """`scaled`: the index of the running maximum that repairs it."""
    factor_shape: tuple[int, ...] = ()
    """`scaled`: the shape the repair factor is reshaped to before the product."""


def _map(op: Operation | Block | None, kind: str) -> tile.MapOp | None:
    if isinstance(op, tile.MapOp) and op.kind_name == kind:
        return op
    return None


def _strip_reshapes(value: SSAValue) -> SSAValue:
    while isinstance(value.owner, tile.ReshapeOp):
        value = value.owner.input
    return value


def _linear_in_exp(value: SSAValue, new_max: SSAValue, accs: set[SSAValue]) -> bool:
    """
    Whether `value` is linear in terms `exp(z − m')` (m' = `new_max`), with every other
    input free of the accumulators: then T(m'') = T(m') · exp(m' − m'').
    """
    if not _depends_on(value, {new_max}):
        return False
    owner = value.owner
    if isinstance(owner, _LINEAR_UNARY):
        return _linear_in_exp(owner.input, new_max, accs)
    if isinstance(owner, tile.ReduceOp):
        return owner.kind.data.value == "sum" and _linear_in_exp(owner.input, new_max, accs)
    if isinstance(owner, tile.MapOp) and owner.kind_name == "exp":
        sub = _map(owner.inputs[0].owner, "sub")
        if sub is None:
            return False
        z, m = sub.inputs
        return _strip_reshapes(m) is new_max and not _depends_on(z, accs | {new_max})
    if isinstance(owner, tile.DotOp | tile.MapOp):
        if isinstance(owner, tile.MapOp) and owner.kind_name != "mul":
            return False
        ins = list(owner.operands)
        dependent = [v for v in ins if _depends_on(v, accs | {new_max})]
        if len(dependent) != 1:
            return False
        return _linear_in_exp(dependent[0], new_max, accs)
    return False


def _scaled_role(
    acc: SSAValue,
    out: SSAValue,
    accs: Sequence[SSAValue],
    new_max: dict[int, SSAValue],
    acc_set: set[SSAValue],
) -> RollingRole | None:
    """`out = acc · exp(m − m') + T(m')` with `m` a running maximum, T linear."""
    add = _map(out.owner, "add")
    if add is None or len(add.inputs) != 2:
        return None
    first, second = add.inputs
    for p, t in ((first, second), (second, first)):
        mul = _map(p.owner, "mul")
        if mul is None or len(mul.inputs) != 2:
            continue
        left, right = mul.inputs
        for a, f in ((left, right), (right, left)):
            if a is not acc:
                continue
            ex = _map(_strip_reshapes(f).owner, "exp")
            sub = None if ex is None else _map(ex.inputs[0].owner, "sub")
            if sub is None:
                continue
            old, new = sub.inputs
            j = next((j for j, v in new_max.items() if v is new), None)
            if j is None or old is not accs[j]:
                continue
            if _depends_on(t, {acc}) or not _linear_in_exp(t, new, acc_set):
                continue
            return RollingRole("scaled", j, tuple(static_shape(f, "factor")))
    return None


def rolling_roles(red: tile.ForOp) -> list[RollingRole] | None:
    """The merge role of every accumulator of `red`, or None if it is not rolling."""
    block = red.body.block
    last = block.last_op
    if not isinstance(last, tile.YieldOp):
        return None
    accs = list(block.args[1:])
    acc_set: set[SSAValue] = set(accs)
    roles: list[RollingRole | None] = [None] * len(accs)
    new_max: dict[int, SSAValue] = {}
    for i, (acc, out) in enumerate(zip(accs, last.values, strict=True)):
        mx = _map(out.owner, "max")
        if mx is None or len(mx.inputs) != 2:
            continue
        a, b = mx.inputs
        other = b if a is acc else a if b is acc else None
        if other is None or _depends_on(other, acc_set):
            continue
        init = red.iter_args[i].owner
        if not isinstance(init, tile.FillOp) or init.value.value.data > -1e38:
            continue
        roles[i] = RollingRole("max")
        new_max[i] = out
    if not new_max:
        return None
    for i, (acc, out) in enumerate(zip(accs, last.values, strict=True)):
        if roles[i] is not None:
            continue
        init = red.iter_args[i].owner
        if not isinstance(init, tile.FillOp) or init.value.value.data != 0.0:
            return None
        role = _scaled_role(acc, out, accs, new_max, acc_set)
        if role is None:
            return None
        roles[i] = role
    if not any(r.kind == "scaled" for r in roles if r is not None):
        return None
    return [r for r in roles if r is not None]


def emit_merge(
    b: Builder,
    roles: Sequence[RollingRole],
    partial: Sequence[SSAValue],
    axis: str,
    algorithm: str,
    k: int,
    groups: int | None,
) -> list[SSAValue]:
    """The merged accumulators of the PEs along `axis` from each PE's `partial` ones."""
    merged: list[SSAValue] = list(partial)
    factors: dict[int, SSAValue] = {}
    for i, role in enumerate(roles):
        if role.kind != "max":
            continue
        m = b.insert(mesh.AllreduceOp("max", partial[i], axis, algorithm, k, groups))
        merged[i] = m.result
        diff = b.insert(tile.MapOp([partial[i], m.result], "sub")).result
        factors[i] = b.insert(tile.MapOp([diff], "exp")).result
    for i, role in enumerate(roles):
        if role.kind != "scaled":
            continue
        f = factors[role.maximum]
        if tuple(static_shape(f, "factor")) != role.factor_shape:
            f = b.insert(tile.ReshapeOp(f, role.factor_shape)).result
        scaled = b.insert(tile.MapOp([partial[i], f], "mul")).result
        merged[i] = b.insert(
            mesh.AllreduceOp("sum", scaled, axis, algorithm, k, groups)
        ).result
    return merged


__all__ = ["RollingRole", "emit_merge", "rolling_roles"]
