"""
Read views for `convert-tile-to-mesh`: a nest that reads one tensor through loads that
index a dimension by different loops — FlashAttention's RoPE tables, read at the query
rows `[i, d]` and at the key rows `[j, d]`, or the output of merged Q/K/V projections,
whose query columns are read at the rows `i` and whose key and value columns at the rows
`j` — reads it through one view per indexing, each placed on its own in the layout its
loads need.

The planner gives each operand of a nest one layout, a dimension split over an axis only
where all its loads agree (`Planner._merge`), so without views such a tensor would be
held whole by every PE (a 4,096-token RoPE table: 2 MB per PE). With views, the query
rows' view is split as the queries are and the key rows' view as the keys are: a host
tensor is scattered once per view, a tensor computed on the wafer is moved into each
view's layout at the head of the nest (`relayout`).

```mlir
%a = tile.load %cos[%i, %c0] : tensor<64x8xf32> -> tensor<4x8xf32>
%b = tile.load %cos[%j, %c0] : tensor<64x8xf32> -> tensor<4x8xf32>
// becomes
%cos_1 = tensor.extract_slice %cos[0, 0] [64, 8] [1, 1] : tensor<64x8xf32> to tensor<64x8xf32>
%a = tile.load %cos[%i, %c0] : tensor<64x8xf32> -> tensor<4x8xf32>
%b = tile.load %cos_1[%j, %c0] : tensor<64x8xf32> -> tensor<4x8xf32>
```
"""

from __future__ import annotations

from xdsl.dialects import tensor
from xdsl.ir import Block, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from plmr.dialects import tile
from plmr.dialects.graph import static_shape
from plmr.lowering.tile_to_mesh.analysis import composite, is_global

Signature = tuple[SSAValue | None, ...]
"""Per dimension of a load: the loop that indexes it (directly or as a chunk), or None."""


def _indexing_loop(index: SSAValue, loops: dict[SSAValue, tile.ForOp]) -> SSAValue | None:
    """The loop variable a load index follows: itself, or the chunk of `chunk·C + inner`."""
    if index in loops:
        return index
    found = composite(index, loops)
    return None if found is None else found.outer


def _signature(load: tile.LoadOp, loops: dict[SSAValue, tile.ForOp]) -> Signature:
    return tuple(_indexing_loop(v, loops) for v in load.offsets)


def _conflict(a: Signature, b: Signature) -> bool:
    """Whether two loads index some dimension by two different loops."""
    return any(x is not None and y is not None and x is not y for x, y in zip(a, b))


def _merge(a: Signature, b: Signature) -> Signature:
    """The loops of both (which do not conflict): each dimension's loop, if either has one."""
    return tuple(x if x is not None else y for x, y in zip(a, b))


def split_read_views(block: Block) -> dict[SSAValue, SSAValue]:
    """
    Gives the loads of a tensor that index one of its dimensions by different loops, in
    each top-level nest of a function body, one view per indexing. The loads are put in
    groups, in order, each load in the first group none of whose loads it conflicts with
    (a group keeps the loops of all its loads, so that no two loads of a group conflict):
    the first group reads the tensor, each other group a view of it
    (`tensor.extract_slice` of the whole tensor, inserted before the nest). Returns each
    view's source.
    """
    views: dict[SSAValue, SSAValue] = {}
    rewriter = Rewriter()
    for top in [op for op in block.ops if isinstance(op, tile.ForOp)]:
        loops = {lp.induction_var: lp for lp in top.walk() if isinstance(lp, tile.ForOp)}
        by_source: dict[SSAValue, list[tile.LoadOp]] = {}
        for load in top.walk():
            if not isinstance(load, tile.LoadOp):
                continue
            src = load.source
            if not is_global(src, block) or isinstance(src.owner, tensor.EmptyOp):
                continue
            by_source.setdefault(src, []).append(load)
        for src, loads in by_source.items():
            groups: list[tuple[Signature, SSAValue]] = [(_signature(loads[0], loops), src)]
            for load in loads[1:]:
                sig = _signature(load, loops)
                k = next(
                    (k for k, (g, _) in enumerate(groups) if not _conflict(g, sig)), None
                )
                if k is not None:
                    merged, value = groups[k]
                    groups[k] = (_merge(merged, sig), value)
                    if value is not src:
                        load.operands = [value, *load.offsets]
                    continue
                shape = static_shape(src, "source")
                op = tensor.ExtractSliceOp.from_static_parameters(
                    src, [0] * len(shape), list(shape)
                )
                rewriter.insert_op(op, InsertPoint.before(top))
                if src.name_hint:
                    op.result.name_hint = src.name_hint
                views[op.result] = src
                groups.append((sig, op.result))
                load.operands = [op.result, *load.offsets]
    return views
