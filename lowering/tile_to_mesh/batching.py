"""
Fewer collectives and fewer `mesh.spmd`s for `convert-tile-to-mesh`:

- **Deferred allreduce** (`deferrable`): a nest whose reduction is split over an axis
  (MeshGEMV) and sits inside parallel loops that stay on the PE (e.g. the query heads of a
  KV head) would allreduce its accumulators once per local block. When the reduction's
  results are only stored, every PE along the axis writes the same positions of its
  output blocks, so one allreduce of each output block at the end of the nest gives the
  same values: one collective of the PE's whole share instead of one per block (the
  cost model picks it when the fewer, larger messages are cheaper).
- **Straight-line code folded into nests**: the `tile.fill` that only starts a nest's
  accumulator (`initial_fill`) runs inside that nest, and the straight-line ops right
  after a nest that use only values every PE holds whole (`epilogue`: a scalar result
  reshaped and stored, a softmax's running maximum combined with another scalar) run at
  the end of its `mesh.spmd`, instead of each run of such code being a replicated
  `mesh.spmd` of its own.

```mlir
// before: one allreduce per local block     // after: one per output block
tile.for %g = 0 to 4 ... parallel {          %o = tile.for %g = 0 to 4 ... parallel {
  %acc = tile.for %k ... reduction {...}        %acc = tile.for %k ... reduction {...}
  %s = mesh.allreduce sum %acc axis x           tile.store %acc, ...
  tile.store %s, ...                          }
}                                             %s = mesh.allreduce sum %o axis x
```
"""

from __future__ import annotations

from collections.abc import Container, Sequence

from xdsl.dialects import arith, tensor
from xdsl.dialects.builtin import TensorType
from xdsl.ir import Operation, SSAValue

from plmr.dialects import tile
from plmr.lowering.tile_to_mesh.analysis import Layout, Nest, initial_fill


def _stored_only(value: SSAValue, stores: Container[Operation]) -> bool:
    """Whether `value` reaches nothing but (the stored block of) `stores`, via reshapes."""
    for use in value.uses:
        op = use.operation
        if isinstance(op, tile.ReshapeOp):
            if not _stored_only(op.result, stores):
                return False
        elif not (op in stores and use.index == 0):
            return False
    return True


def _reduced_from(value: SSAValue, red: tile.ForOp) -> int | None:
    """Which result of `red` `value` is (through reshapes), if any."""
    while isinstance(value.owner, tile.ReshapeOp):
        value = value.owner.input
    for i, r in enumerate(red.res):
        if r is value:
            return i
    return None


def deferrable(nest: Nest, kinds: Sequence[str] | None) -> list[str] | None:
    """
    The combine of each output of `nest` when its allreduce can wait for the end of the
    nest (None if not): the reduction's accumulators are plain (`kinds`, from
    `plain_accumulators`), it sits in the innermost parallel body, its results are only
    stored (possibly reshaped), every store of every output stores one of them, and the
    outputs start empty.
    """
    red = nest.reduction
    if red is None or kinds is None or not nest.chain:
        return None
    if red.parent_op() is not nest.chain[-1]:
        return None
    stores = {st for sts in nest.stores.values() for st in sts}
    if not all(_stored_only(r, stores) for r in red.res):
        return None
    out: list[str] = []
    for k, init in enumerate(nest.top.iter_args):
        if not isinstance(init.owner, tensor.EmptyOp):
            return None
        found = {_reduced_from(st.block, red) for st in nest.stores.get(k, [])}
        if not found or None in found:
            return None
        combines = {kinds[i] for i in found if i is not None}
        if len(combines) != 1:
            return None
        out.append(combines.pop())
    return out


def starts_a_nest(op: Operation) -> bool:
    """Whether `op` is a fill that `initial_fill` moves into the nest it starts."""
    if not isinstance(op, tile.FillOp):
        return False
    return any(
        isinstance(u.operation, tile.ForOp)
        and initial_fill(op.result, u.operation) is not None
        for u in op.result.uses
    )


def epilogue(
    top: tile.ForOp, outputs: Sequence[Layout], held: set[SSAValue]
) -> list[Operation]:
    """
    The straight-line tile ops right after the nest `top` that use only its outputs held
    whole (`outputs`: their layouts), values of earlier nests every PE holds whole
    (`held`), constants and empty tensors, up to the first op that uses anything else.
    """
    whole = {
        r for r, lay in zip(top.res, outputs, strict=True) if all(a == "-" for a in lay)
    } | held
    taken: list[Operation] = []
    op = top.next_op
    while op is not None:
        if isinstance(op, arith.ConstantOp | tensor.EmptyOp):
            op = op.next_op
            continue
        if not isinstance(op, tile.TileOp) or isinstance(op, tile.ForOp):
            break
        tensors = [v for v in op.operands if isinstance(v.type, TensorType)]
        if not all(v in whole or isinstance(v.owner, tensor.EmptyOp) for v in tensors):
            break
        taken.append(op)
        whole.update(op.results)
        op = op.next_op
    return taken


__all__ = ["deferrable", "epilogue", "initial_fill", "starts_a_nest"]
