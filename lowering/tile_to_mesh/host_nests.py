"""
Small nests of positions computed on the host: `convert-tile-to-mesh` leaves a tile nest
at the top of the `mesh.program` (not in a `mesh.spmd`) when everything it reads is an
integer argument (a position, token ids; not state kept on the wafer), a constant that is
not a weight, or the result of another such nest, and its results are small
(`HOST_NEST_ELEMENTS`) floats (a table; not a slot or mask over the cache's rows, whose
size grows with the cache) that the wafer reads (not results of the program). The runtime
runs it with the tile semantics where the program starts and streams its results onto the
wafer like an input, each in the layout its readers want, and counts their bytes on the
host link.

A decode step's RoPE tables are such a nest: `cos`/`sin` of `position_ids · inv_freq`,
128 values each for a head dimension of 128. Computed on the wafer they were spread over
one axis and every nest that rotates a head gathered them whole (an allreduce of 256
values over 420 PEs per layer: 2,630 cycles); from the host they arrive where each reader
wants them, as plmr's own decode program receives its tables. A mask over the whole cache
(4,096 positions) stays on the wafer: a step's host traffic must not grow with its cache.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import cast

from xdsl.dialects import arith, func, tensor
from xdsl.dialects.builtin import AnyFloat, IntegerType, TensorType
from xdsl.ir import BlockArgument, Operation, SSAValue

from plmr.dialects import tile
from plmr.dialects.graph import element_type
from plmr.dialects.graph_weights import WEIGHT_ATTR

HOST_NEST_ELEMENTS = 1024
"""The most elements a host nest's results hold together (and each value it reads)."""


def _elements(v: SSAValue) -> int:
    t = v.type
    return math.prod(t.get_shape()) if isinstance(t, TensorType) else 1


def is_host_nest(
    nest: tile.ForOp, host: Mapping[SSAValue, SSAValue], state: Sequence[SSAValue]
) -> bool:
    """
    Whether `nest` (a top-level tile nest) runs on the host: it reads only integer
    arguments (positions, ids; not `state`), constants that are not weights, and the
    results of earlier host nests, each of at most `HOST_NEST_ELEMENTS` elements, and its
    results hold at most that many together. A nest reading an activation or a weight
    stays on the wafer, however small.
    """
    if sum(_elements(r) for r in nest.results) > HOST_NEST_ELEMENTS:
        return False
    if not all(_floats(r) for r in nest.results):
        return False  # a slot or mask over the cache's rows: it grows with the cache
    if any(isinstance(u.operation, func.ReturnOp) for r in nest.results for u in r.uses):
        return False  # a result of the program: the program computes it
    for v in tile.free_values(nest):
        if v in state or _elements(v) > HOST_NEST_ELEMENTS:
            return False
        if not (v in host and _host_derived(v)) and not _copied(v):
            return False
    return True


def _floats(v: SSAValue) -> bool:
    return isinstance(v.type, TensorType) and isinstance(element_type(v), AnyFloat)


def _host_derived(v: SSAValue) -> bool:
    """An integer argument, a constant that is not a weight, or a host nest's result."""
    owner = v.owner
    if isinstance(v, BlockArgument):
        return isinstance(v.type, TensorType) and isinstance(element_type(v), IntegerType)
    if isinstance(owner, arith.ConstantOp):
        return WEIGHT_ATTR not in owner.attributes
    return isinstance(owner, tile.ForOp)


def _copied(v: SSAValue) -> bool:
    """Whether `v` is made from nothing (a constant, a fill, an empty tensor): copied."""
    owner = v.owner
    if isinstance(owner, arith.ConstantOp):
        return WEIGHT_ATTR not in owner.attributes
    if isinstance(owner, tensor.EmptyOp):
        return True
    return isinstance(owner, tile.FillOp) and not owner.operands


def host_nest(
    nest: tile.ForOp, host: Mapping[SSAValue, SSAValue]
) -> tuple[list[Operation], list[tuple[SSAValue, SSAValue]]]:
    """
    The ops that compute `nest` on the host, reading the program's host values (`host`
    maps the function's values to them; the scalar constants it reads are copied
    first), and the pairs (function result, program result) of its results.
    """
    made: list[Operation] = []
    mapper: dict[SSAValue, SSAValue] = {}
    for v in tile.free_values(nest):
        if v in host:
            mapper[v] = host[v]
        elif _copied(v):
            copy = cast(Operation, v.owner).clone()
            made.append(copy)
            mapper[v] = copy.results[0]
    clone = nest.clone(value_mapper=mapper)
    made.append(clone)
    for old, new in zip(nest.results, clone.results, strict=True):
        new.name_hint = old.name_hint
    return made, list(zip(nest.results, clone.results, strict=True))


__all__ = ["HOST_NEST_ELEMENTS", "host_nest", "is_host_nest"]
