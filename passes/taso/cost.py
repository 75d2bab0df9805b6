"""
An analytic per-op cost on a wafer-scale mesh (the PLMR machine model), in cycles.

Every op runs on the block of cores its partitioning uses and pays:

- **compute** on those cores: elements · work / (cores · `simd_fp16`) for elementwise and
  normalization ops (matmuls, and convs as implicit GEMMs, below);
- **data movement** its partitioning implies: a matmul runs as the mesh lowering runs it,
  in `16 x 16` output blocks and reduction chunks, the blocks of one dimension spread
  over each grid axis, each block product priced as the runtime's PE dot
  (`block_product`, the formula of `plmr.target.op_cost`), a split reduction paying
  the partitioner's allreduce (`2·log2(p)` messages); a
  transpose moves the data corner to corner across its block; a concat or split moves
  each core's share one hop; reductions cross the block; a broadcast operand is
  multicast;
- a fixed **launch overhead** (op setup, one message start, one synchronization across the
  block), so fusing or merging ops pays.

The mapping of a matmul's blocks (which dimension goes over which axis, and the
reduction chunk) is chosen to minimize its cost. Context
matters as it does on the machine: ops whose operands are all constants are folded at
compile time (cost 0); a unary activation or `scale` right after a single-use matmul or
conv runs in its epilogue (compute only), and so does an elementwise op of a computed
value, which the loop level's map fusion puts into a neighbouring op's nest; a transpose of the last two dimensions that
only feeds matmuls is a `transpose_a`/`transpose_b` flag (cost 0). The graph cost is the
sum over ops, as in TASO.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache

from xdsl.dialects.builtin import f32

from plmr.dialects.graph import unary_meanings
from plmr.errors import PlmrError
from plmr.passes.taso.dag import Dag, Node
from plmr.passes.taso.ops import Params, Shape, param_int, param_ints
from plmr.target.device import Device
from plmr.target.op_cost import block_product_cycles, scalar_body_cost

EPILOGUE_KINDS = frozenset({"relu", "scale", "sigmoid", "tanh", "gelu", "silu", "neg"})
"""Unary ops a matmul or conv applies to its result before storing it."""
PRODUCER_KINDS = frozenset({"matmul", "conv2d"})
ELEMENT_WORK = {
    "add": 1.0,
    "sub": 1.0,
    "mul": 1.0,
    "div": 4.0,
    "scale": 1.0,
    "relu": 1.0,
    "neg": 1.0,
    "sqrt": 4.0,
    "exp": 8.0,
    "erf": 10.0,
    "sigmoid": 10.0,
    "tanh": 10.0,
    "silu": 11.0,
    "gelu": 14.0,
    "opaque:graph.softmax": 12.0,
    "opaque:graph.layernorm": 8.0,
    "opaque:graph.rmsnorm": 6.0,
    "opaque:graph.reduce": 1.0,
    "opaque:graph.log": 8.0,
    "opaque:graph.cos": 8.0,
    "opaque:graph.sin": 8.0,
    "opaque:graph.pow": 10.0,
    "opaque:graph.reciprocal": 4.0,
    **{
        f"opaque:graph.{name}": 1.0
        for name in (
            "where",
            "cmp",
            "not",
            "and",
            "or",
            "xor",
            "cast",
            "abs",
            "floor",
            "ceil",
            "maximum",
            "minimum",
        )
    },
}
"""Cycles of SIMD work per element (transcendentals need several)."""
# An op that carries its meaning costs what its scalar body does as a `tile.map` body.
ELEMENT_WORK.update(
    {
        f"opaque:{cls.name}": float(scalar_body_cost(meaning.body, f32))
        for cls, meaning in unary_meanings().items()
    }
)
MOVE_KINDS = frozenset(
    {
        "concat",
        "split",
        "opaque:graph.reshape",
        "opaque:graph.gather",
        "opaque:graph.slice",
        "opaque:graph.expand",
        "opaque:graph.pad",
        "opaque:graph.gather_elements",
    }
)
"""Ops that only move data: priced as one copy of their result."""
SHAPED_KINDS = frozenset({"matmul", "conv2d", "pool", "transpose"}) | MOVE_KINDS
"""Ops priced by their shapes rather than per element."""
REDUCING = frozenset(
    {
        "opaque:graph.softmax",
        "opaque:graph.layernorm",
        "opaque:graph.rmsnorm",
        "opaque:graph.reduce",
    }
)
FUSIBLE = frozenset(
    {k for k in ELEMENT_WORK if k not in REDUCING and not k.startswith("opaque:")}
)
"""Elementwise ops that the loop level fuses into a neighbouring nest."""


BLOCK = 16
"""The output block of a matmul (`convert-loop-to-tile`'s first parallel tile)."""
REDUCTION_CHUNKS = (16, 8, 4)
"""Reduction chunks `convert-loop-to-tile` tries."""
_AXIS_CHOICES: tuple[tuple[str | None, str | None], ...] = tuple(
    (a, b)
    for a in ("m", "n", "k", None)
    for b in ("m", "n", "k", None)
    if a is None or a != b
)
"""Which dimension's blocks go over the grid's rows (y) and columns (x)."""


def _size(shape: Shape) -> int:
    return math.prod(shape)


class CostModel:
    """
    Per-op cycle costs for one device, on its whole wafer or on the `rows × cols` grid
    of cores a program is compiled for (`grid`).
    """

    def __init__(self, device: Device, grid: tuple[int, int] | None = None):
        self.device = device
        rows, cols = grid if grid is not None else (device.height, device.width)
        if rows < 1 or cols < 1:
            raise PlmrError(f"cost model: the grid must be at least 1x1, got {rows}x{cols}")
        self.rows, self.cols = min(rows, device.height), min(cols, device.width)
        self.cores = self.rows * self.cols
        self._matmul = lru_cache(maxsize=None)(self._matmul_uncached)
        self._nodes: dict[tuple[object, ...], float] = {}
        """Op costs by kind, parameters, shapes and context (graphs of different
        searches reuse node ids, so the key is the node's content)."""

    # -- building blocks -------------------------------------------------------------------

    def launch(self, cores: int) -> float:
        """Fixed cost of one op on `cores` cores: setup, one message, one block-wide sync."""
        d = self.device
        side = math.sqrt(max(cores, 1))
        return (
            d.op_overhead_cycles
            + d.send_overhead_cycles
            + d.step_overhead_cycles
            + 2 * side * d.hop_cycles
        )

    def cores_for(self, elements: int) -> int:
        """Cores an elementwise op on `elements` values spreads over (at least 1 each)."""
        return max(1, min(self.cores, elements))

    def elementwise(self, elements: int, work: float) -> float:
        cores = self.cores_for(elements)
        return math.ceil(elements / cores) * work / self.device.simd_fp16

    def message(self, elements: float, hops: float = 1.0) -> float:
        """One message between PEs (the mesh planner's: latency, hops, payload)."""
        return self.device.message_cycles(elements, hops)

    def block_product(self, rows: int, k: int, n: int) -> float:
        """
        One block product on a PE as the mesh runtime times it (`target.op_cost`): a
        vector instruction per scalar of the left block, streaming a row of `n`.
        """
        return block_product_cycles(self.device, rows, k, n)

    def _matmul_uncached(self, batch: int, m: int, k: int, n: int) -> float:
        """
        The matmul as the mesh runs it: `convert-loop-to-tile` cuts the output into
        `BLOCK x BLOCK` blocks and the reduction into chunks, `convert-tile-to-mesh`
        spreads the blocks of at most one dimension over each grid axis; a PE runs its
        blocks one after the other (so a wider matmul is no faster than its parts once
        every PE has a block), and a reduction split over an axis pays the planner's
        allreduce (`2·log2(p)` messages of the PE's output).
        """
        rows = batch * m
        tm, tn = min(BLOCK, rows), min(BLOCK, n)
        blocks = {"m": math.ceil(rows / tm), "n": math.ceil(n / tn)}
        best = math.inf
        for chunk in REDUCTION_CHUNKS:
            tk = min(chunk, k)
            blocks["k"] = math.ceil(k / tk)
            one = self.block_product(tm, tk, tn)
            for on_y, on_x in _AXIS_CHOICES:
                split = {"m": 1, "n": 1, "k": 1}
                if on_y is not None:
                    split[on_y] = min(self.rows, blocks[on_y])
                if on_x is not None:
                    split[on_x] = min(self.cols, blocks[on_x])
                mine = {d: math.ceil(blocks[d] / split[d]) for d in ("m", "n", "k")}
                cost = mine["m"] * mine["n"] * mine["k"] * one
                cost += self.launch(split["m"] * split["n"] * split["k"])
                if split["k"] > 1:
                    stages = 2 * max(1, math.ceil(math.log2(split["k"])))
                    cost += stages * self.message(mine["m"] * tm * mine["n"] * tn)
                best = min(best, cost)
        return best

    def matmul(self, batch: int, m: int, k: int, n: int) -> float:
        return self._matmul(batch, m, k, n)

    def transpose(self, elements: int) -> float:
        d = self.device
        cores = self.cores_for(elements)
        side = math.sqrt(cores)
        traffic = elements * d.elem_bytes / (2 * side * d.link_bytes_per_cycle)
        return traffic + 2 * side * d.hop_cycles + self.launch(cores)

    def move(self, elements: int) -> float:
        """Every core forwards its share one hop (concat, split, reshape, gather)."""
        d = self.device
        cores = self.cores_for(elements)
        share = math.ceil(elements / cores) * d.elem_bytes / d.link_bytes_per_cycle
        return share + d.hop_cycles + d.op_overhead_cycles

    # -- per op ----------------------------------------------------------------------------

    def op_cost(
        self,
        kind: str,
        params: Params,
        in_shapes: Sequence[Shape],
        out_shapes: Sequence[Shape],
        *,
        folded: bool = False,
        epilogue: bool = False,
        absorbed: bool = False,
    ) -> float:
        """Cycles of one op; the flags give its context (see the module docstring)."""
        if kind in ("arg", "const") or folded or absorbed:
            return 0.0
        d = self.device
        out_elems = sum(_size(s) for s in out_shapes)
        if kind == "matmul":
            a, b = in_shapes
            out = out_shapes[0]
            m, n = out[-2], out[-1]
            k = a[-2] if params[0] else a[-1]
            batch = _size(out[:-2])
            del b
            return self.matmul(batch, m, k, n)
        if kind == "conv2d":
            x, w = in_shapes[0], in_shapes[1]
            out = out_shapes[0]
            groups = param_int(kind, params, 3, "groups")
            m_rows = out[0] * out[2] * out[3]
            k = w[1] * w[2] * w[3]
            halo = (w[2] - 1 + w[3] - 1) * x[1] * d.elem_bytes / d.link_bytes_per_cycle
            return self.matmul(groups, m_rows, k, out[1] // groups) + halo
        if kind == "pool":
            kernel = param_ints(kind, params, 1, "kernel")
            work = float(kernel[0] * kernel[1])
            x = in_shapes[0]
            halo = (
                (kernel[0] + kernel[1] - 2) * x[1] * d.elem_bytes / d.link_bytes_per_cycle
            )
            return (
                self.elementwise(out_elems, work)
                + halo
                + self.launch(self.cores_for(out_elems))
            )
        if kind == "transpose":
            return self.transpose(out_elems)
        if kind in MOVE_KINDS:
            return self.move(out_elems)
        work = ELEMENT_WORK.get(kind, 2.0)
        in_elems = max((_size(s) for s in in_shapes), default=out_elems)
        elems = max(out_elems, in_elems)
        compute = self.elementwise(elems, work)
        if epilogue:
            return compute
        cores = self.cores_for(elems)
        cost = compute + self.launch(cores)
        if len(in_shapes) == 2 and _size(in_shapes[0]) != _size(in_shapes[1]):
            small = min(_size(in_shapes[0]), _size(in_shapes[1]))
            cost += (
                math.ceil(small / cores) * d.elem_bytes / d.link_bytes_per_cycle
                + 2 * math.sqrt(cores) * d.hop_cycles
            )
        if kind in REDUCING:
            cost += 2 * math.sqrt(cores) * d.hop_cycles + d.step_overhead_cycles
        return cost

    # -- per graph -------------------------------------------------------------------------

    def node_cost(self, dag: Dag, nid: int, folded: set[int]) -> float:
        node = dag.nodes[nid]
        in_shapes = tuple(dag.shape(v) for v in node.operands)
        flags = (
            nid in folded,
            self.is_epilogue(dag, node, folded),
            self.is_absorbed(dag, nid, node),
        )
        key = (node.kind, node.params, in_shapes, node.shapes, *flags)
        found = self._nodes.get(key)
        if found is None:
            found = self.op_cost(
                node.kind,
                node.params,
                in_shapes,
                node.shapes,
                folded=flags[0],
                epilogue=flags[1],
                absorbed=flags[2],
            )
            self._nodes[key] = found
        return found

    def is_epilogue(
        self, dag: Dag, node: Node, folded: set[int] | frozenset[int] = frozenset()
    ) -> bool:
        """
        Whether `node` runs inside another op's loop nest (compute only): a unary op
        right after a single-use matmul or conv, or an elementwise op of a computed
        value (the map fusion of the loop level puts it in its producer's or its
        consumer's nest).
        """
        if node.kind in FUSIBLE and any(
            dag.nodes[o[0]].kind not in ("arg", "const") and o[0] not in folded
            for o in node.operands
        ):
            return True
        if node.kind not in EPILOGUE_KINDS or len(node.operands) != 1:
            return False
        src = node.operands[0][0]
        return dag.nodes[src].kind in PRODUCER_KINDS and len(dag.users()[src]) == 1

    def is_absorbed(self, dag: Dag, nid: int, node: Node) -> bool:
        if node.kind != "transpose":
            return False
        perm = param_ints(node.kind, node.params, 0, "perm")
        rank = len(perm)
        if rank < 2 or perm != (*range(rank - 2), rank - 1, rank - 2):
            return False
        users = dag.users()[nid]
        return (
            bool(users)
            and all(
                dag.nodes[u].kind == "matmul" and dag.nodes[u].params == (False, False)
                for u, _ in users
            )
            and not dag.is_output((nid, 0))
        )

    def folded_nodes(self, dag: Dag) -> set[int]:
        """Ops computed from constants only (folded at compile time)."""
        folded: set[int] = set()
        for nid in dag.order():
            node = dag.nodes[nid]
            if node.kind == "const":
                folded.add(nid)
            elif (
                node.kind != "arg"
                and node.operands
                and all(o[0] in folded for o in node.operands)
            ):
                folded.add(nid)
        return folded

    def graph_cost(self, dag: Dag) -> float:
        folded = self.folded_nodes(dag)
        return sum(self.node_cost(dag, nid, folded) for nid in dag.nodes)

    def seconds(self, cycles: float) -> float:
        return cycles / self.device.clock_hz
