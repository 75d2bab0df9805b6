"""
`convert-tile-to-mesh`: 2D mesh partitioning of a whole tile-level program.

Every function becomes a `mesh.program` on a P×Q grid. Each top-level tile nest (a chain
of `parallel` `tile.for` loops around a block body) becomes one `mesh.spmd`:

- **Parallel loops → mesh axes.** Up to two parallel loops are mapped to `y` and `x`; a
  loop of T blocks can go to an axis of n PEs when n divides T, and each PE then runs
  the T/n blocks of its contiguous share. The nest's outputs are distributed accordingly
  (`#mesh.layout<[y, x]>` for a row × column output), unmapped dimensions stay whole.
- **Reductions → allreduces or shifts.** The main reduction loop of the block body
  becomes either
  - an **allreduce** along a free axis (its range split over the axis, each PE reducing
    its share, then `mesh.allreduce` with the `gemv` algorithm, K-tree by default) —
    WaferLLM's MeshGEMV, possible when every accumulator is combined by a plain
    `add` / `max` / `min`; or
  - **rotation**: the operands indexed by the reduction are cut into chunks that
    circulate on rings — along `x` for operands that follow the row loop, along `y` for
    those that follow the column loop — and every step combines one chunk (any combine,
    e.g. FlashAttention's rolling update). With both kinds present this is Cannon's
    algorithm with lcm(P, Q) chunks placed pre-aligned (skewed); `gemm = meshgemm` uses
    WaferLLM's interleaved rings (every step ≤ 2 hops), `cannon` a torus, `summa`
    broadcasts the owners' chunks instead of shifting.
- **Layouts.** Operands are placed at scatter time in the layout the nest reads them in,
  so weights read transposed (`tile.dot ... transpose_b`) are placed pre-transposed
  and no transpose ever runs on the mesh. When a value produced by an earlier nest is
  needed in another layout, the change is explicit at the head of the consumer: a dim
  split over one axis and wanted over the other comes from the diagonal PE of each line
  (a one-block sum); an operand Cannon needs pre-skewed, already split one chunk per PE,
  passes once round the ring and each PE keeps its chunk; otherwise an all-gather along
  the axis (an allreduce of the zero-padded blocks), then each PE takes its part. The
  mapping of each nest is chosen by a cost estimate (compute per PE,
  messages, layout changes) among the feasible ones, which is what makes consecutive
  GEMVs reduce along alternating axes, as WaferLLM does.
- **SRAM.** The blocks each PE holds for a nest must fit the device's SRAM; if no
  mapping fits, the pass fails with the bytes needed and available.

Element-wise and row-wise work (softmax, norms, activations) runs where its data lives:
it is part of a nest's block body and runs on the PE that owns the block.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from xdsl.builder import Builder
from xdsl.context import Context
from xdsl.dialects import arith, func, tensor
from xdsl.dialects.builtin import (
    ArrayAttr,
    IndexType,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    TensorType,
)
from xdsl.ir import Attribute, Block, BlockArgument, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint

from plmr.dialects import mesh, tile
from plmr.dialects.graph import static_shape
from plmr.errors import PlmrError
from plmr.runtime.device import Device, get_device
from plmr.runtime.interpreter import op_cycles
from plmr.runtime.sram import spmd_sram

GEMM_CHOICES = ("meshgemm", "cannon", "summa")
GEMV_CHOICES = ("ktree", "pipeline", "ring")

_PLAIN = {"add": "sum", "max": "max", "min": "min"}
_IDENTITY = {"sum": 0.0, "max": -3.0e38, "min": 3.0e38}

Layout = tuple[str, ...]
"""Per tensor dim: `y`, `x` or `-` (whole)."""


# ---------------------------------------------------------------------------------------
# Options
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Options:
    grid: tuple[int, int]
    device: Device
    device_spec: str
    gemm: str = "meshgemm"
    gemv: str = "ktree"
    k: int = 2
    groups: int = 0
    """K-tree groups of the first phase (0: the default, about √n)."""

    def n(self, axis: str) -> int:
        return self.grid[0] if axis == "y" else self.grid[1]


def _other(axis: str) -> str:
    return "x" if axis == "y" else "y"


# ---------------------------------------------------------------------------------------
# Nest analysis
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Composite:
    """An index `outer · scale + inner` (a split-K chunk and the position inside it)."""

    outer: SSAValue
    scale: int
    inner: SSAValue


@dataclass
class Load:
    op: tile.LoadOp
    source: SSAValue
    indices: tuple[SSAValue | Composite | None, ...]
    """Per dim: the loop variable indexing it directly, a composite, or None."""


@dataclass
class Nest:
    """One top-level tile nest and what it reads and writes."""

    top: tile.ForOp
    chain: list[tile.ForOp]
    reduction: tile.ForOp | None
    loads: list[Load]
    stores: dict[int, list[tile.StoreOp]]
    """Output index -> the stores writing it (in the innermost parallel body)."""
    flops: float
    globals: list[SSAValue]
    """Func-level tensors the nest reads (loads and non-empty output inits)."""
    wholes: list[SSAValue] = field(default_factory=lambda: [])
    """Func-level tensors used whole inside the nest (not through tile.load)."""

    @property
    def reduction_var(self) -> SSAValue | None:
        return None if self.reduction is None else self.reduction.induction_var

    @property
    def outputs(self) -> Sequence[SSAValue]:
        return list(self.top.res)


def _is_global(value: SSAValue, fn_block: Block) -> bool:
    if isinstance(value, BlockArgument):
        return value.owner is fn_block
    return value.owner.parent_block() is fn_block


def _root_of(value: SSAValue, chain: Sequence[tile.ForOp]) -> int | None:
    """The output index whose iter_arg chain `value` belongs to, if any."""
    for loop in chain:
        block = loop.body.block
        if isinstance(value, BlockArgument) and value.owner is block and value.index >= 1:
            return value.index - 1
    return None


def _trip_flops(op: Operation) -> float:
    total = 0.0
    for inner in op.walk():
        if isinstance(inner, tile.TileOp) and not isinstance(inner, tile.ForOp):
            trips = 1
            parent = inner.parent_op()
            while parent is not None and parent is not op.parent_op():
                if isinstance(parent, tile.ForOp):
                    trips *= parent.trip_count
                parent = parent.parent_op()
            total += inner.cost().flops * trips
    return total


def _constant_index(value: SSAValue) -> int | None:
    owner = value.owner
    if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
        return owner.value.value.data
    return None


def _composite(value: SSAValue, loops: dict[SSAValue, tile.ForOp]) -> Composite | None:
    """Recognises `addi(muli(outer, C), inner)` with `inner` ranging over [0, C)."""
    add = value.owner
    if not isinstance(add, arith.AddiOp):
        return None
    for mul_v, inner in ((add.lhs, add.rhs), (add.rhs, add.lhs)):
        mul = mul_v.owner
        if inner not in loops or not isinstance(mul, arith.MuliOp):
            continue
        for outer, c in ((mul.lhs, mul.rhs), (mul.rhs, mul.lhs)):
            scale = _constant_index(c)
            if outer not in loops or scale is None:
                continue
            lp_in, lp_out = loops[inner], loops[outer]
            if (
                lp_in.lb.value.data == 0
                and lp_in.ub.value.data == scale
                and lp_out.step.value.data == 1
            ):
                return Composite(outer, scale, inner)
    return None


def analyze_nest(top: tile.ForOp, fn_block: Block) -> Nest:
    if top.kind.data == tile.LoopKind.REDUCTION:
        # A whole-tensor reduction (e.g. a norm's sum of squares): no parallel loop.
        return _finish_nest(top, [], top, fn_block)
    chain = [top]
    while True:
        inner = [
            o
            for o in chain[-1].body.block.ops
            if isinstance(o, tile.ForOp) and o.kind.data == tile.LoopKind.PARALLEL
        ]
        if len(inner) != 1:
            break
        chain.append(inner[0])
    body = chain[-1].body.block
    reductions = [
        o
        for o in body.ops
        if isinstance(o, tile.ForOp) and o.kind.data == tile.LoopKind.REDUCTION
    ]
    reduction = max(reductions, key=_trip_flops) if reductions else None
    return _finish_nest(top, chain, reduction, fn_block)


def _finish_nest(
    top: tile.ForOp, chain: list[tile.ForOp], reduction: tile.ForOp | None, fn_block: Block
) -> Nest:
    loads: list[Load] = []
    stores: dict[int, list[tile.StoreOp]] = {}
    globals_: list[SSAValue] = []
    loops = {
        loop.induction_var: loop for loop in top.walk() if isinstance(loop, tile.ForOp)
    }
    wholes: list[SSAValue] = []
    for op in top.walk():
        for operand in op.operands:
            if (
                isinstance(operand.type, TensorType)
                and _is_global(operand, fn_block)
                and not isinstance(op, tile.ForOp)
                and not (isinstance(op, tile.LoadOp) and operand is op.source)
                and not isinstance(operand.owner, tensor.EmptyOp)
            ):
                # A small tensor used whole (e.g. a scalar): every PE holds all of it.
                if operand not in wholes:
                    wholes.append(operand)
                if operand not in globals_:
                    globals_.append(operand)
        if isinstance(op, tile.LoadOp) and _is_global(op.source, fn_block):
            idx = tuple(v if v in loops else _composite(v, loops) for v in op.offsets)
            loads.append(Load(op, op.source, idx))
            if op.source not in globals_:
                globals_.append(op.source)
        if isinstance(op, tile.StoreOp):
            dest: SSAValue = op.dest
            while isinstance(dest.owner, tile.StoreOp):
                dest = dest.owner.dest
            root = _root_of(dest, chain)
            if root is None:
                continue
            stores.setdefault(root, []).append(op)
    for init in top.iter_args:
        if not isinstance(init.owner, tensor.EmptyOp) and init not in globals_:
            globals_.append(init)
    return Nest(top, chain, reduction, loads, stores, _trip_flops(top), globals_, wholes)


# ---------------------------------------------------------------------------------------
# Mappings
# ---------------------------------------------------------------------------------------


@dataclass
class Mapping:
    """How one nest runs on the grid."""

    axes: dict[str, tile.ForOp]
    """Mesh axis -> the loop split over it (a parallel loop, or the reduction loop)."""
    mode: str
    """`local`, `allreduce` (reduction split over a free axis) or `rotate`."""
    paths: dict[SSAValue, str] = field(default_factory=lambda: {})
    """Rotation: operand tensor -> the axis its chunks circulate on."""
    chunks: int = 0
    layouts: dict[SSAValue, Layout] = field(default_factory=lambda: {})
    """Required layout of every global operand (unskewed part)."""
    outputs: list[Layout] = field(default_factory=lambda: [])
    cost: float = 0.0
    sram: int = 0

    def axis_of(self, loop: tile.ForOp) -> str | None:
        for a, lp in self.axes.items():
            if lp is loop:
                return a
        return None


@dataclass(frozen=True)
class NestPlan:
    """The mapping chosen for one nest: what `plmr compile --explain` prints."""

    name: str
    """The SSA name of the nest's first result."""
    loops: tuple[tuple[str, int], ...]
    """The nest's parallel loops, then its reduction: (name, blocks)."""
    axes: tuple[tuple[str, str], ...]
    """(mesh axis, loop name) for every split loop."""
    mode: str
    """`local`, `allreduce` or `rotate`."""
    estimate: float
    """The cost model's cycles for the nest on the critical PE."""
    spmd: mesh.SpmdOp

    def mapping(self) -> str:
        """`i1(2816) -> x, i2(840) -> y [allreduce]`."""
        axis = {loop: a for a, loop in self.axes}
        loops = ", ".join(
            f"{name}({blocks})" + (f" -> {axis[name]}" if name in axis else "")
            for name, blocks in self.loops
        )
        return f"{loops} [{self.mode}]"


def _loop_name(loop: tile.ForOp) -> str:
    return loop.induction_var.name_hint or "?"


def _extent_ok(loop: tile.ForOp, n: int) -> bool:
    """
    Whether `loop` can be split over an axis of `n` PEs: evenly, or unevenly when each
    PE's share of blocks is exactly its block of the padded layout (`ceil(extent / n)`
    elements, e.g. blocks of one element); the PEs past the end then work on padding,
    which their stores and accumulations ignore (`_NestEmitter`).
    """
    if loop.lb.value.data != 0 or n < 2:
        return False
    trips = loop.trip_count
    if trips % n == 0:
        return True
    step = loop.step.value.data
    return -(-trips // n) * step == -(-(trips * step) // n)


def _uneven(loop: tile.ForOp, n: int) -> bool:
    """Whether splitting `loop` over `n` PEs leaves some PEs blocks of padding."""
    return loop.trip_count % n != 0


def _plain_accumulators(red: tile.ForOp) -> list[str] | None:
    """The combine kind of each accumulator if all are plain (acc ⊕ independent term)."""
    block = red.body.block
    last = block.last_op
    assert isinstance(last, tile.YieldOp)
    kinds: list[str] = []
    accs = list(block.args[1:])
    for i, acc in enumerate(accs):
        uses = [u.operation for u in acc.uses]
        if len(uses) != 1 or not isinstance(uses[0], tile.MapOp):
            return None
        m = uses[0]
        kind = m.kind.data if m.kind is not None else ""
        if kind not in _PLAIN or len(m.inputs) != 2:
            return None
        if last.values[i] is not m.result:
            return None
        other = m.inputs[1] if m.inputs[0] is acc else m.inputs[0]
        if _depends_on(other, set(accs)):
            return None
        init = red.iter_args[i].owner
        if not isinstance(init, tile.FillOp):
            return None
        value = init.value.value.data
        want = _IDENTITY[_PLAIN[kind]]
        if (want == 0.0 and value != 0.0) or (want != 0.0 and abs(value) < 1e38):
            return None
        if (want < 0) != (value < 0) and want != 0.0:
            return None
        kinds.append(_PLAIN[kind])
    return kinds


def _depends_on(value: SSAValue, targets: set[SSAValue]) -> bool:
    seen: set[SSAValue] = set()
    stack = [value]
    while stack:
        v = stack.pop()
        if v in targets:
            return True
        if v in seen:
            continue
        seen.add(v)
        if isinstance(v.owner, Operation):
            stack.extend(v.owner.operands)
    return False


def _var_uses_ok(var: SSAValue, nest: Nest, allow_other: bool) -> bool:
    """Whether `var` indexes loads only directly (and other uses are allowed or absent)."""
    load_ops = {ld.op for ld in nest.loads}
    for use in var.uses:
        op = use.operation
        if isinstance(op, tile.LoadOp) and op in load_ops:
            continue
        if isinstance(op, tile.StoreOp):
            continue
        if not allow_other:
            return False
    return True


class _Planner:
    def __init__(self, nest: Nest, opts: Options, placed: dict[SSAValue, Layout]):
        self.nest = nest
        self.opts = opts
        self.placed = placed

    # -- layouts ----------------------------------------------------------------------

    def _output_layouts(self, axes: dict[str, tile.ForOp]) -> list[Layout] | None:
        layouts: list[Layout] = []
        par = {a: lp for a, lp in axes.items() if lp.kind.data == tile.LoopKind.PARALLEL}
        for k, out in enumerate(self.nest.outputs):
            shape = static_shape(out, "output")
            dims = ["-"] * len(shape)
            for a, loop in par.items():
                hits: set[int] = set()
                for st in self.nest.stores.get(k, []):
                    blk = static_shape(st.block, "block")
                    found = [
                        j
                        for j, v in enumerate(st.offsets)
                        if v is loop.induction_var
                        and blk[j] == loop.step.value.data
                        and shape[j] == loop.ub.value.data
                    ]
                    if len(found) != 1:
                        return None
                    hits.add(found[0])
                if len(hits) != 1:
                    return None
                dims[hits.pop()] = a
            layouts.append(tuple(dims))
        return layouts

    def _load_layout(self, ld: Load, axes: dict[str, tile.ForOp]) -> Layout:
        shape = static_shape(ld.source, "source")
        blk = static_shape(ld.op.result, "block")
        dims = ["-"] * len(shape)
        mapped = {lp.induction_var for lp in axes.values()}
        for a, loop in axes.items():
            for j, v in enumerate(ld.indices):
                direct = (
                    v is loop.induction_var
                    and blk[j] == loop.step.value.data
                    and shape[j] == loop.ub.value.data
                )
                n = self.opts.n(a)
                chunked = (
                    isinstance(v, Composite)
                    and v.outer is loop.induction_var
                    and v.inner not in mapped
                    and shape[j] == loop.trip_count * v.scale
                    and -(-loop.trip_count // n) * v.scale == -(-shape[j] // n)
                )
                if direct or chunked:
                    dims[j] = a if a not in dims else "-"
        return tuple(dims)

    def _merge(self, layouts: dict[SSAValue, list[Layout]]) -> dict[SSAValue, Layout]:
        out: dict[SSAValue, Layout] = {}
        for src, ls in layouts.items():
            first = ls[0]
            out[src] = tuple(
                d if all(layout[j] == d for layout in ls) else "-"
                for j, d in enumerate(first)
            )
        return out

    # -- candidates -------------------------------------------------------------------

    def candidates(self) -> list[Mapping]:
        nest, opts = self.nest, self.opts
        par_choices: dict[str, list[tile.ForOp | None]] = {}
        for a in ("y", "x"):
            par_choices[a] = [None] + [lp for lp in nest.chain if _extent_ok(lp, opts.n(a))]
        result: list[Mapping] = []
        for ly in par_choices["y"]:
            for lx in par_choices["x"]:
                if ly is not None and ly is lx:
                    continue
                axes = {a: lp for a, lp in (("y", ly), ("x", lx)) if lp is not None}
                outs = self._output_layouts(axes)
                if outs is None:
                    continue
                result.append(self._finish(Mapping(dict(axes), "local", outputs=outs)))
                red = nest.reduction
                if red is None:
                    continue
                free = [a for a in ("y", "x") if a not in axes]
                kinds = _plain_accumulators(red)
                for a in free:
                    if kinds is not None and _extent_ok(red, opts.n(a)):
                        m = Mapping({**axes, a: red}, "allreduce", outputs=outs)
                        result.append(self._finish(m))
                even = all(not _uneven(lp, opts.n(a)) for a, lp in axes.items())
                if axes and even:
                    rot = self._rotation(axes, outs)
                    if rot is not None:
                        result.append(self._finish(rot))
        return result

    def _rotation(self, axes: dict[str, tile.ForOp], outs: list[Layout]) -> Mapping | None:
        nest, opts = self.nest, self.opts
        red = nest.reduction
        assert red is not None
        if red.lb.value.data != 0:
            return None
        r = red.induction_var
        if not _var_uses_ok(r, nest, allow_other=False):
            return None
        py, px = axes.get("y"), axes.get("x")
        paths: dict[SSAValue, str] = {}
        loose: list[SSAValue] = []
        for ld in nest.loads:
            if r not in ld.indices:
                continue
            shape = static_shape(ld.source, "source")
            blk = static_shape(ld.op.result, "block")
            dims = [j for j, v in enumerate(ld.indices) if v is r]
            if len(dims) != 1:
                return None
            j = dims[0]
            if blk[j] != red.step.value.data or shape[j] != red.ub.value.data:
                return None
            uses_y = py is not None and py.induction_var in ld.indices
            uses_x = px is not None and px.induction_var in ld.indices
            if uses_y and uses_x:
                return None
            path = "x" if uses_y else "y" if uses_x else ""
            if not path:
                loose.append(ld.source)
                continue
            if paths.get(ld.source, path) != path:
                return None
            paths[ld.source] = path
        used = set(paths.values())
        default = "y" if "y" in used or (not used and px is not None) else "x"
        for src in loose:
            if paths.get(src, default) != default:
                return None
            paths[src] = default
        if not paths:
            return None
        used = set(paths.values())
        chunks = math.lcm(*(opts.n(a) for a in used))
        if chunks < 2 or red.trip_count % chunks:
            return None
        # Every read of a rotated operand must index it by the reduction.
        for ld in nest.loads:
            if ld.source in paths and r not in ld.indices:
                return None
        return Mapping(dict(axes), "rotate", paths=paths, chunks=chunks, outputs=outs)

    # -- costing ----------------------------------------------------------------------

    def _finish(self, m: Mapping) -> Mapping:
        nest, opts = self.nest, self.opts
        per_load: dict[SSAValue, list[Layout]] = {}
        for ld in nest.loads:
            axes = {a: lp for a, lp in m.axes.items()}
            layout = self._load_layout(ld, axes)
            if m.mode == "rotate" and ld.source in m.paths:
                j = next(j for j, v in enumerate(ld.indices) if v is nest.reduction_var)
                layout = tuple(
                    m.paths[ld.source] if i == j else d for i, d in enumerate(layout)
                )
            per_load.setdefault(ld.source, []).append(layout)
        for k, init in enumerate(nest.top.iter_args):
            if init in nest.globals:
                per_load.setdefault(init, []).append(m.outputs[k])
        for whole in nest.wholes:
            per_load.setdefault(whole, []).append(
                tuple("-" for _ in static_shape(whole, "value"))
            )
        m.layouts = self._merge(per_load)
        if m.mode == "rotate":
            for src, path in m.paths.items():
                if path not in m.layouts[src]:
                    m.cost = math.inf
                    return m
        # SRAM: every operand block, every output block, rotation double buffers.
        grid = opts.grid
        sram = 0
        for src, layout in m.layouts.items():
            sram += _block_bytes(src, layout, grid)
            if m.mode == "rotate" and src in m.paths:
                sram += _block_bytes(src, layout, grid)
        for out, layout in zip(nest.outputs, m.outputs, strict=True):
            sram += _block_bytes(out, layout, grid)
        m.sram = sram
        m.cost = self._estimate(m)
        return m

    def _per_pe_trips(self, op: Operation, m: Mapping) -> int:
        """How many times one PE runs `op` under mapping `m`."""
        trips = 1
        stop = self.nest.top.parent_op()
        parent = op.parent_op()
        while parent is not None and parent is not stop:
            if isinstance(parent, tile.ForOp):
                t = parent.trip_count
                axis = m.axis_of(parent)
                if axis is not None:
                    t = -(-t // self.opts.n(axis))
                trips *= t
            parent = parent.parent_op()
        return trips

    def _estimate(self, m: Mapping) -> float:
        """Estimated cycles of the nest on the critical PE: compute plus messages."""
        nest, opts = self.nest, self.opts
        dev, grid = opts.device, opts.grid
        ratio = dev.elem_bytes / 4
        link = dev.link_bytes_per_cycle
        latency = dev.send_overhead_cycles + dev.recv_overhead_cycles + 2 * dev.ramp_cycles

        def message(nbytes: float, hops: float = 1.0) -> float:
            return latency + hops * dev.hop_cycles + nbytes * ratio / link

        compute = 0.0
        for op in nest.top.walk():
            if op is nest.top or isinstance(op, tile.ForOp | tile.YieldOp):
                continue
            compute += self._per_pe_trips(op, m) * op_cycles(dev, op)
        comm = 0.0
        red = nest.reduction
        if red is not None and m.mode != "local":
            count = self._per_pe_trips(red, m)
            accs = sum(_bytes(v) for v in red.iter_args)
            if m.mode == "allreduce":
                axis = m.axis_of(red)
                assert axis is not None
                stages = 2 * max(1, math.ceil(math.log2(opts.n(axis))))
                comm += count * stages * message(accs)
            else:
                chunk = sum(
                    _block_bytes(s, m.layouts[s], grid) * opts.n(p) / m.chunks
                    for s, p in m.paths.items()
                )
                if opts.gemm == "summa":
                    n = max(opts.n(p) for p in m.paths.values())
                    comm += count * m.chunks * message(chunk, n / 2)
                else:
                    comm += count * (m.chunks - 1) * message(chunk, 2.0)
        for src, layout in m.layouts.items():
            have = self.placed.get(src)
            if have is None:
                # Host operands arrive over the PE's link when they are placed.
                comm += _block_bytes(src, layout, grid) * ratio / link
                continue
            if have == layout and src not in m.paths:
                continue
            full = math.prod(static_shape(src, "source")) * 4
            skewed = src in m.paths and _cannon_skew(m, opts)
            block = _block_bytes(src, layout, grid)
            for j, a in enumerate(have):
                if a == "-":
                    continue
                stages = 2 * max(1, math.ceil(math.log2(opts.n(a))))
                if (
                    skewed
                    and layout[j] == a == m.paths[src]
                    and _ring_realignable((a, "", m.chunks), opts)
                ):
                    comm += opts.n(a) * message(block, 2.0)
                elif not skewed and _diagonal_move(have, layout, j, opts, src):
                    comm += stages * message(block)
                else:
                    comm += stages * message(full)
        return compute + comm

    def ranked(self) -> list[Mapping]:
        """The mappings whose blocks fit SRAM, cheapest first (ties: more PEs used)."""
        every = self.candidates()
        options = [
            m for m in every if m.cost < math.inf and m.sram <= self.opts.device.sram_bytes
        ]
        if not options:
            raise PlmrError(self._no_fit_message(every))
        return sorted(options, key=lambda m: (round(m.cost, 3), -len(m.axes)))

    def _no_fit_message(self, every: Sequence[Mapping]) -> str:
        nest, opts = self.nest, self.opts
        grid = opts.grid
        best = min(every, key=lambda m: m.sram)
        name = nest.outputs[0].name_hint or "?"
        where = ", ".join(
            f"{a} = %{lp.induction_var.name_hint or '?'}" for a, lp in best.axes.items()
        )
        hint = ""
        if not best.axes:
            counts = ", ".join(
                f"%{lp.induction_var.name_hint or '?'}: {lp.trip_count}"
                for lp in nest.chain
            )
            hint = (
                f" (no loop's block count ({counts}) is a multiple of the {grid[0]} or "
                f"{grid[1]} PEs of an axis)"
            )
        return (
            f"convert-tile-to-mesh: the nest computing %{name} does not fit a "
            f"{grid[0]}x{grid[1]} grid of {opts.device.name}: its smallest per-PE "
            f"placement ({where or 'no loop split'}) needs {best.sram} bytes of SRAM, a "
            f"PE has {opts.device.sram_bytes}{hint}; use a larger grid, smaller tiles or "
            "a device with more SRAM"
        )


def _diagonal_move(
    have: Sequence[str], want: Sequence[str], j: int, opts: Options, src: SSAValue
) -> bool:
    """
    Dim `j` is split over one axis and wanted over the other, which the value does not
    use, on a square grid: each PE's block is on the diagonal of its line
    (`_NestEmitter._from_diagonal`), so one block moves, not a strip.
    """
    a = have[j]
    if a == "-":
        return False
    o = _other(a)
    return (
        want[j] == o
        and o not in have
        and opts.n(a) == opts.n(o)
        and static_shape(src, "source")[j] % opts.n(a) == 0
    )


def _cannon_skew(m: Mapping, opts: Options) -> bool:
    """Operands rotating in both directions are placed pre-skewed (SUMMA broadcasts)."""
    return m.mode == "rotate" and len(set(m.paths.values())) == 2 and opts.gemm != "summa"


def _ring_realignable(skew: tuple[str, str, int], opts: Options) -> bool:
    """Cannon's skew on a square grid with one chunk per PE: a ring pass realigns it."""
    axis, _, chunks = skew
    if not axis:
        return False
    n = opts.n(axis)
    return n == opts.n(_other(axis)) == chunks and n > 1


def _bytes(value: SSAValue) -> int:
    return math.prod(static_shape(value, "value")) * 4


def _block_bytes(value: SSAValue, layout: Layout, grid: tuple[int, int]) -> int:
    shape = static_shape(value, "value")
    per = [
        s if a == "-" else -(-s // (grid[0] if a == "y" else grid[1]))
        for s, a in zip(shape, layout, strict=True)
    ]
    return math.prod(per) * 4


# ---------------------------------------------------------------------------------------
# Emission
# ---------------------------------------------------------------------------------------


def _index(b: Builder, value: int) -> SSAValue:
    return b.insert(arith.ConstantOp(IntegerAttr(value, IndexType()))).result


def _mul(b: Builder, x: SSAValue, c: int) -> SSAValue:
    if c == 1:
        return x
    return b.insert(arith.MuliOp(x, _index(b, c))).result


def _add(b: Builder, x: SSAValue, y: SSAValue) -> SSAValue:
    return b.insert(arith.AddiOp(x, y)).result


def _ring_pos(b: Builder, coord: SSAValue, ring: str, n: int) -> SSAValue:
    """The logical ring position of a physical coordinate (inverse of the ring order)."""
    if ring == "torus" or n < 3:
        return coord
    evens = (n + 1) // 2
    last_odd = n - 1 if n % 2 == 0 else n - 2
    two = _index(b, 2)
    half = b.insert(arith.DivUIOp(coord, two)).result
    back = b.insert(arith.SubiOp(_index(b, last_odd), coord)).result
    odd = _add(b, _index(b, evens), b.insert(arith.DivUIOp(back, two)).result)
    parity = b.insert(arith.RemUIOp(coord, two)).result
    is_even = b.insert(arith.CmpiOp(parity, _index(b, 0), "eq")).result
    return b.insert(arith.SelectOp(is_even, half, odd)).result


def _dist(value: SSAValue, layout: Layout, skew: str = "", ring: str = "", chunks: int = 0):
    t = value.type
    assert isinstance(t, TensorType)
    return mesh.DistType(
        t,  # pyright: ignore[reportUnknownArgumentType]
        mesh.LayoutAttr(list(layout), skew=skew, ring=ring, chunks=chunks),
    )


@dataclass
class _Placed:
    """A value on the grid: its mesh value and layout."""

    value: SSAValue
    layout: Layout


class _Lowering:
    def __init__(self, fn: func.FuncOp, opts: Options):
        self.fn = fn
        self.opts = opts
        self.block = fn.body.block
        self.placed: dict[SSAValue, _Placed] = {}
        self.scattered: dict[tuple[SSAValue, Layout, str], SSAValue] = {}
        self.host: dict[SSAValue, SSAValue] = {}
        self.cost = 0.0
        """The estimated cycles of the chosen mappings, summed over the nests."""
        self.plans: list[NestPlan] = []

    # -- program ----------------------------------------------------------------------

    def run(self) -> mesh.ProgramOp:
        fn, opts = self.fn, self.opts
        ft = fn.function_type
        program = mesh.ProgramOp(
            fn.sym_name.data,
            list(ft.inputs.data),
            list(ft.outputs.data),
            opts.device_spec,
            opts.grid,
        )
        from plmr.tools.running import (
            ARG_NAMES_ATTR,
            RESULT_NAMES_ATTR,
            arg_names,
            result_names,
        )

        program.attributes[ARG_NAMES_ATTR] = ArrayAttr(
            [StringAttr(n) for n in arg_names(fn)]
        )
        program.attributes[RESULT_NAMES_ATTR] = ArrayAttr(
            [StringAttr(n) for n in result_names(fn)]
        )
        pblock = program.body.block
        for old, new in zip(self.block.args, pblock.args, strict=True):
            new.name_hint = old.name_hint
            self.host[old] = new
        self.builder = Builder(InsertPoint.at_end(pblock))
        straight: list[Operation] = []
        for op in self.block.ops:
            if isinstance(op, arith.ConstantOp):
                if isinstance(op.result.type, TensorType):
                    clone = self.builder.insert(op.clone())
                    clone.result.name_hint = op.result.name_hint
                    self.host[op.result] = clone.result
                continue
            if isinstance(op, tensor.EmptyOp):
                continue
            if isinstance(op, tile.TileOp) and not isinstance(op, tile.ForOp):
                # Straight-line block code between nests: one replicated spmd per run.
                straight.append(op)
                continue
            if straight:
                _StraightEmitter(self, straight).emit()
                straight = []
            if isinstance(op, tile.ForOp):
                self._nest(op)
                continue
            if isinstance(op, func.ReturnOp):
                outs = [self._gathered(v) for v in op.arguments]
                self.builder.insert(mesh.ReturnOp(*outs))
                continue
            remark = op.attributes.get("loop.remark")
            why = f" ({remark.data})" if isinstance(remark, StringAttr) else ""
            raise PlmrError(
                f"convert-tile-to-mesh: '{op.name}' at the top of @{fn.sym_name.data} "
                "cannot be placed on the mesh (expected tile nests; a 'loop.nest' here "
                f"was left untiled by convert-loop-to-tile){why}"
            )
        # Placements made for mappings that were then rejected.
        for dead in [o for o in pblock.ops if isinstance(o, mesh.ScatterOp)]:
            if not dead.result.uses:
                dead.detach()
                dead.erase()
        return program

    def _gathered(self, value: SSAValue) -> SSAValue:
        placed = self.placed.get(value)
        if placed is None:
            layout = tuple("-" for _ in static_shape(value, "result"))
            dist = self.scatter(value, layout)
        else:
            dist = placed.value
        return self.builder.insert(mesh.GatherOp(dist)).result

    def scatter(
        self,
        value: SSAValue,
        layout: Layout,
        skew: str = "",
        ring: str = "",
        chunks: int = 0,
    ) -> SSAValue:
        key = (value, layout, f"{skew}/{ring}/{chunks}")
        found = self.scattered.get(key)
        if found is not None:
            return found
        host = self.host[value]
        op = self.builder.insert(
            mesh.ScatterOp(host, _dist(value, layout, skew, ring, chunks).layout)
        )
        if value.name_hint:
            op.result.name_hint = value.name_hint
        self.scattered[key] = op.result
        return op.result

    # -- one nest ---------------------------------------------------------------------

    def _nest(self, top: tile.ForOp) -> None:
        nest = analyze_nest(top, self.block)
        planner = _Planner(nest, self.opts, {v: p.layout for v, p in self.placed.items()})
        sram = self.opts.device.sram_bytes
        needed: list[int] = []
        for m in planner.ranked():
            spmd = _NestEmitter(self, nest, m).emit()
            # The block estimate leaves out the body's temporaries: measure the peak.
            peak = spmd_sram(spmd, self.opts.device).peak_bytes
            if peak <= sram:
                self.cost += m.cost
                loops = [*nest.chain, *([nest.reduction] if nest.reduction else [])]
                self.plans.append(
                    NestPlan(
                        nest.outputs[0].name_hint or "?",
                        tuple((_loop_name(lp), lp.trip_count) for lp in loops),
                        tuple((a, _loop_name(lp)) for a, lp in sorted(m.axes.items())),
                        m.mode,
                        m.cost,
                        spmd,
                    )
                )
                return
            needed.append(peak)
            for out in nest.outputs:
                del self.placed[out]
            spmd.detach()
            spmd.erase()
        name = nest.outputs[0].name_hint or "?"
        grid = self.opts.grid
        raise PlmrError(
            f"convert-tile-to-mesh: the nest computing %{name} does not fit a "
            f"{grid[0]}x{grid[1]} grid of {self.opts.device.name}: its smallest per-PE "
            f"placement needs {min(needed)} bytes of SRAM, a PE has {sram}; use a larger "
            "grid, smaller tiles or a device with more SRAM"
        )


@dataclass
class _Operand:
    """How the PE holds one global tensor inside the spmd body."""

    layout: Layout
    block: SSAValue
    skewed: bool = False


class _NestEmitter:
    def __init__(self, low: _Lowering, nest: Nest, m: Mapping):
        self.low = low
        self.nest = nest
        self.m = m
        self.opts = low.opts
        # Cannon's pre-alignment; SUMMA broadcasts from the owners instead.
        self.skew = _cannon_skew(m, self.opts)
        self.ring = "interleaved" if self.opts.gemm == "meshgemm" else "torus"
        self.loads = {ld.op: ld for ld in nest.loads}

    def _skew_of(self, src: SSAValue) -> tuple[str, str, int]:
        if not self.skew or src not in self.m.paths:
            return ("", "", 0)
        return (self.m.paths[src], self.ring, self.m.chunks)

    def emit(self) -> mesh.SpmdOp:
        low, nest, m, opts = self.low, self.nest, self.m, self.opts
        inputs: list[SSAValue] = []
        wants: list[tuple[SSAValue, Layout, tuple[str, str, int]]] = []
        for src in nest.globals:
            layout = m.layouts[src]
            skew = self._skew_of(src)
            placed = low.placed.get(src)
            if placed is None:
                inputs.append(low.scatter(src, layout, *skew))
            else:
                inputs.append(placed.value)
            wants.append((src, layout, skew))
        out_types = [_dist(o, lay) for o, lay in zip(nest.outputs, m.outputs, strict=True)]
        arg_types: list[Attribute] = [IndexType(), IndexType()]
        for v in inputs:
            d = v.type
            assert isinstance(d, mesh.DistType)
            arg_types.append(TensorType(d.tensor.element_type, d.block_shape(opts.grid)))
        body = Block(arg_types=arg_types)
        b = Builder(InsertPoint.at_end(body))
        self.b = b
        self.entry = Builder(InsertPoint.at_start(body))
        self.coord = {"y": body.args[0], "x": body.args[1]}
        body.args[0].name_hint = "py"
        body.args[1].name_hint = "px"
        self.operands: dict[SSAValue, _Operand] = {}
        self.vmap: dict[SSAValue, SSAValue] = {}
        self.local: dict[SSAValue, SSAValue] = {}
        self.guards: list[SSAValue] = []
        """Conditions of the enclosing loops split unevenly: this block is not padding."""
        for (src, layout, skew), value, arg in zip(
            wants, inputs, body.args[2:], strict=True
        ):
            d = value.type
            assert isinstance(d, mesh.DistType)
            have = tuple(d.layout.axes)
            already = (
                have == layout
                and (d.layout.skew.data, d.layout.ring.data, d.layout.chunks.data) == skew
            )
            block: SSAValue = arg
            if not already:
                block = self._relayout(src, arg, have, layout, skew)
            self.operands[src] = _Operand(layout, block, bool(skew[0]))
            if src in nest.wholes:
                self.vmap[src] = block
        results = self._emit_loop(
            nest.top, [self._init(k) for k in range(len(nest.outputs))]
        )
        b.insert(mesh.YieldOp(*results))
        spmd = low.builder.insert(mesh.SpmdOp(inputs, out_types, Region(body)))
        for k, (old, new) in enumerate(zip(nest.outputs, spmd.outputs, strict=True)):
            new.name_hint = old.name_hint
            low.placed[old] = _Placed(new, m.outputs[k])
        return spmd

    # -- layouts ----------------------------------------------------------------------

    def _relayout(
        self,
        src: SSAValue,
        blk: SSAValue,
        have: Layout,
        want: Layout,
        skew: tuple[str, str, int],
    ) -> SSAValue:
        """Turns this PE's block under `have` into its block under `want` (+ skew)."""
        b, opts = self.b, self.opts
        shape = static_shape(src, "source")
        cur = list(have)
        value = blk
        skew_done = False
        for j, a in enumerate(have):
            if a == "-" or (want[j] == a and skew[0] != a):
                continue
            if want[j] == a and _ring_realignable(skew, opts):
                # Already split over the skew axis, one chunk per PE: the blocks pass
                # once round the ring and each PE keeps the one it starts with.
                value = self._realigned(src, value, j, skew)
                skew_done = True
                continue
            if not skew[0] and _diagonal_move(tuple(cur), want, j, opts, src):
                # Split over a, wanted over the other axis (and replicated along it): the
                # PE at position coord[o] along a holds this PE's block. It alone puts it
                # in, the others zeros, and a one-block sum along a delivers it.
                value = self._from_diagonal(src, value, cur, j, a)
                cur[j] = _other(a)
                continue
            # All-gather dim j along a: place the block in a zero tensor, sum along a
            # (over the padded length when the axis does not divide the dim).
            cur_shape = self._shape(shape, cur)
            full = list(cur_shape)
            owners = -(-shape[j] // cur_shape[j])
            full[j] = cur_shape[j] * owners
            zero = b.insert(tile.FillOp(0.0, TensorType(_elt(src), full))).result
            offs = [_index(b, 0) for _ in shape]
            offs[j] = _mul(b, self.coord[a], cur_shape[j])
            if owners < opts.n(a):
                # The PEs past the last block hold padding only: they add zeros.
                owner = b.insert(
                    arith.CmpiOp(self.coord[a], _index(b, owners), "ult")
                ).result
                offs[j] = b.insert(arith.SelectOp(owner, offs[j], _index(b, 0))).result
                stored = b.insert(tile.StoreOp(value, zero, offs)).result
                placed = b.insert(tile.SelectOp(owner, stored, zero)).result
            else:
                placed = b.insert(tile.StoreOp(value, zero, offs)).result
            value = b.insert(
                mesh.AllreduceOp(
                    "sum", placed, a, self.opts.gemv, self.opts.k, _groups(self.opts, a)
                )
            ).result
            if full[j] != shape[j]:
                exact = list(full)
                exact[j] = shape[j]
                zeros = [_index(b, 0) for _ in shape]
                value = b.insert(tile.LoadOp(value, zeros, exact)).result
            cur[j] = "-"
        # Take this PE's part of the dims now whole (of their padded length).
        offs = [_index(b, 0) for _ in shape]
        target = list(cur)
        padded = self._shape(shape, cur)
        taken = False
        for j, a in enumerate(want):
            if a == "-" or cur[j] == a or skew[0] == a:
                continue
            size = -(-shape[j] // opts.n(a))
            owners = -(-shape[j] // size)
            offs[j] = _mul(b, self.coord[a], size)
            if owners < opts.n(a):
                # The PEs past the last block take padding (the first block's place).
                owner = b.insert(
                    arith.CmpiOp(self.coord[a], _index(b, owners), "ult")
                ).result
                offs[j] = b.insert(arith.SelectOp(owner, offs[j], _index(b, 0))).result
            padded[j] = size * owners
            target[j] = a
            taken = True
        if taken:
            whole = self._shape(shape, cur)
            if padded != whole:
                buf = b.insert(tile.FillOp(0.0, TensorType(_elt(src), padded))).result
                zeros = [_index(b, 0) for _ in shape]
                value = b.insert(tile.StoreOp(value, buf, zeros)).result
            value = b.insert(tile.LoadOp(value, offs, self._shape(shape, target))).result
            cur = target
        if skew[0] and not skew_done:
            value = self._skewed(src, value, cur, skew)
        return value

    def _realigned(
        self, src: SSAValue, blk: SSAValue, j: int, skew: tuple[str, str, int]
    ) -> SSAValue:
        """
        Cannon's pre-skew of a value split over the skew axis (PE at position c holds
        chunk c): PE (a, o) needs chunk (r(a) + r(o)) mod n, r the ring position. The
        blocks move n - 1 times one step round the ring; after t steps the PE at ring
        position p holds the block that started at ring position p - t, so it keeps the
        one with t = (p - r(chunk)) mod n. Two blocks of SRAM, n - 1 one-step shifts.
        """
        b, opts = self.b, self.opts
        axis, ring, chunks = skew
        n = opts.n(axis)
        ring = _ring_for(ring, n)
        pos_a = _ring_pos(b, self.coord[axis], ring, n)
        pos_o = _ring_pos(b, self.coord[_other(axis)], ring, n)
        want = b.insert(arith.RemUIOp(_add(b, pos_a, pos_o), _index(b, chunks))).result
        back = _add(b, pos_a, _index(b, n))
        t_keep = b.insert(
            arith.RemUIOp(
                b.insert(arith.SubiOp(back, _ring_pos(b, want, ring, n))).result,
                _index(b, n),
            )
        ).result
        shape = static_shape(blk, "block")
        rows = shape[j]
        double = list(shape)
        double[j] = 2 * rows
        body = Block(arg_types=[IndexType(), blk.type, blk.type])
        inner = Builder(InsertPoint.at_end(body))
        step, moving, kept = body.args
        # kept' = moving if step == t_keep else kept: both in one buffer, one load.
        zero = inner.insert(tile.FillOp(0.0, TensorType(_elt(src), double))).result
        at = [_index(inner, 0) for _ in shape]
        at[j] = _index(inner, rows)
        both = inner.insert(tile.StoreOp(kept, zero, [_index(inner, 0) for _ in shape]))
        both = inner.insert(tile.StoreOp(moving, both.result, at)).result
        take = inner.insert(arith.CmpiOp(step, t_keep, "eq")).result
        offs = [_index(inner, 0) for _ in shape]
        offs[j] = inner.insert(
            arith.SelectOp(take, _index(inner, rows), _index(inner, 0))
        ).result
        new_kept = inner.insert(tile.LoadOp(both, offs, shape)).result
        new_moving = inner.insert(mesh.ShiftOp(moving, axis, ring)).result
        inner.insert(tile.YieldOp(new_moving, new_kept))
        loop = b.insert(tile.ForOp(0, n, 1, "reduction", [blk, blk], Region(body)))
        return loop.res[1]

    def _from_diagonal(
        self, src: SSAValue, blk: SSAValue, cur: list[str], j: int, a: str
    ) -> SSAValue:
        """
        Every PE gets the block of the PE on its line along `a` whose position equals
        its own coordinate on the other axis: `[a]` -> `[other]` for dim `j`.
        """
        b = self.b
        shape = self._shape(static_shape(src, "source"), cur)
        rows = shape[j]
        double = list(shape)
        double[j] = 2 * rows
        zero = b.insert(tile.FillOp(0.0, TensorType(_elt(src), double))).result
        at = [_index(b, 0) for _ in shape]
        at[j] = _index(b, rows)
        both = b.insert(tile.StoreOp(blk, zero, at)).result
        same = b.insert(arith.CmpiOp(self.coord[a], self.coord[_other(a)], "eq")).result
        offs = [_index(b, 0) for _ in shape]
        offs[j] = b.insert(arith.SelectOp(same, _index(b, rows), _index(b, 0))).result
        part = b.insert(tile.LoadOp(both, offs, shape)).result
        return b.insert(
            mesh.AllreduceOp(
                "sum", part, a, self.opts.gemv, self.opts.k, _groups(self.opts, a)
            )
        ).result

    def _skewed(
        self, src: SSAValue, full: SSAValue, cur: list[str], skew: tuple[str, str, int]
    ) -> SSAValue:
        """Cuts this PE's chunks of the skewed dim out of a block holding it whole."""
        b, opts = self.b, self.opts
        axis, ring, chunks = skew
        other = _other(axis)
        shape = static_shape(src, "source")
        j = self.m.layouts[src].index(axis)
        n_a, n_o = opts.n(axis), opts.n(other)
        per_a, per_o = chunks // n_a, chunks // n_o
        size = shape[j] // chunks
        target = list(cur)
        target[j] = axis
        out_shape = self._shape(shape, target)
        pos_a = _ring_pos(b, self.coord[axis], ring, n_a)
        pos_o = _ring_pos(b, self.coord[other], ring, n_o)
        base = _add(b, _mul(b, pos_a, per_a), _mul(b, pos_o, per_o))
        buf = b.insert(tile.FillOp(0.0, TensorType(_elt(src), out_shape))).result
        chunk_shape = list(out_shape)
        chunk_shape[j] = size
        for u in range(per_a):
            c = b.insert(
                arith.RemUIOp(_add(b, base, _index(b, u)), _index(b, chunks))
            ).result
            offs = [_index(b, 0) for _ in shape]
            offs[j] = _mul(b, c, size)
            piece = b.insert(tile.LoadOp(full, offs, chunk_shape)).result
            at = [_index(b, 0) for _ in shape]
            at[j] = _index(b, u * size)
            buf = b.insert(tile.StoreOp(piece, buf, at)).result
        return buf

    def _shape(self, shape: Sequence[int], layout: Sequence[str]) -> list[int]:
        return [
            s if a == "-" else -(-s // self.opts.n(a))
            for s, a in zip(shape, layout, strict=True)
        ]

    # -- loops ------------------------------------------------------------------------

    def _init(self, k: int) -> SSAValue:
        init = self.nest.top.iter_args[k]
        if init in self.operands:
            return self.operands[init].block
        shape = self._shape(static_shape(init, "init"), self.m.outputs[k])
        return self.b.insert(tile.FillOp(0.0, TensorType(_elt(init), shape))).result

    def _emit_loop(self, loop: tile.ForOp, inits: list[SSAValue]) -> list[SSAValue]:
        m, opts = self.m, self.opts
        axis = m.axis_of(loop)
        if loop is self.nest.reduction and m.mode == "rotate":
            return self._emit_rotation(loop, inits)
        lb, ub, step = loop.lb.value.data, loop.ub.value.data, loop.step.value.data
        uneven = axis is not None and _uneven(loop, opts.n(axis))
        if axis is not None:
            lb, ub = 0, -(-loop.trip_count // opts.n(axis)) * step
        body = Block(arg_types=[IndexType(), *(v.type for v in inits)])
        outer = self.b
        self.b = Builder(InsertPoint.at_end(body))
        old = loop.body.block
        iv = body.args[0]
        iv.name_hint = old.args[0].name_hint
        valid: SSAValue | None = None
        if axis is not None:
            origin = _mul(self.b, self.coord[axis], ub)
            index = _add(self.b, origin, iv)
            if uneven:
                # Past the end: padding. Clamp the index for whatever reads it whole,
                # and ignore the block (stores and accumulations below).
                end = loop.ub.value.data
                valid = self.b.insert(
                    arith.CmpiOp(index, _index(self.b, end), "ult")
                ).result
                last = _index(self.b, end - step)
                index = self.b.insert(arith.SelectOp(valid, index, last)).result
                self.guards.append(valid)
            self.vmap[old.args[0]] = index
            self.local[old.args[0]] = iv
        else:
            self.vmap[old.args[0]] = iv
        for o, n in zip(old.args[1:], body.args[1:], strict=True):
            self.vmap[o] = n
        self._emit_ops(old.ops)
        if valid is not None:
            self.guards.pop()
            if loop.kind.data == tile.LoopKind.REDUCTION:
                # A block of padding leaves the accumulators as they were.
                yield_op = body.last_op
                assert isinstance(yield_op, tile.YieldOp)
                kept = [
                    self.b.insert(tile.SelectOp(valid, new, prev)).result
                    for new, prev in zip(yield_op.values, body.args[1:], strict=True)
                ]
                yield_op.detach()
                yield_op.erase()
                self.b.insert(tile.YieldOp(*kept))
        self.b = outer
        new = self.b.insert(tile.ForOp(lb, ub, step, loop.kind.data, inits, Region(body)))
        results = list(new.res)
        if axis is not None and loop is self.nest.reduction and m.mode == "allreduce":
            kinds = _plain_accumulators(loop)
            assert kinds is not None
            results = [
                self.b.insert(
                    mesh.AllreduceOp(kind, r, axis, opts.gemv, opts.k, _groups(opts, axis))
                ).result
                for kind, r in zip(kinds, results, strict=True)
            ]
        for o, n in zip(loop.res, results, strict=True):
            self.vmap[o] = n
        return list[SSAValue](results)

    def _emit_rotation(self, loop: tile.ForOp, inits: list[SSAValue]) -> list[SSAValue]:
        """The reduction as steps over circulating chunks (Cannon / MeshGEMM / SUMMA)."""
        m, opts = self.m, self.opts
        chunks = m.chunks
        size = loop.ub.value.data // chunks
        rotating = list(m.paths)
        bufs = [self.operands[s].block for s in rotating]
        summa = opts.gemm == "summa"
        n_acc = len(inits)

        def inner(
            views: dict[SSAValue, SSAValue], accs: Sequence[SSAValue]
        ) -> list[SSAValue]:
            saved = {s: self.operands[s] for s in rotating}
            for s in rotating:
                self.operands[s] = _Operand(self.operands[s].layout, views[s], False)
            body = Block(arg_types=[IndexType(), *(v.type for v in accs)])
            outer = self.b
            self.b = Builder(InsertPoint.at_end(body))
            old = loop.body.block
            body.args[0].name_hint = old.args[0].name_hint
            self.local[old.args[0]] = body.args[0]
            for o, nv in zip(old.args[1:], body.args[1:], strict=True):
                self.vmap[o] = nv
            self._emit_ops(old.ops)
            self.b = outer
            new = self.b.insert(
                tile.ForOp(
                    0, size, loop.step.value.data, "reduction", list(accs), Region(body)
                )
            )
            self.operands.update(saved)
            return list(new.res)

        def chunk_view(src: SSAValue, buf: SSAValue, at: SSAValue | None) -> SSAValue:
            shape = static_shape(buf, "buffer")
            j = self.m.layouts[src].index(self.m.paths[src])
            view = list(shape)
            view[j] = size
            if view == list(shape) and at is None:
                return buf
            offs = [_index(self.b, 0) for _ in shape]
            if at is not None:
                offs[j] = at
            return self.b.insert(tile.LoadOp(buf, offs, view)).result

        steps = Block(
            arg_types=[IndexType(), *(v.type for v in inits), *(v.type for v in bufs)]
        )
        outer = self.b
        self.b = Builder(InsertPoint.at_end(steps))
        u = steps.args[0]
        u.name_hint = "step"
        accs = list(steps.args[1 : 1 + n_acc])
        cur = list(steps.args[1 + n_acc :])
        views: dict[SSAValue, SSAValue] = {}
        moved: list[SSAValue] = []
        if summa:
            for s, buf in zip(rotating, cur, strict=True):
                axis = m.paths[s]
                per = chunks // opts.n(axis)
                slot = self.b.insert(arith.RemUIOp(u, _index(self.b, per))).result
                root = self.b.insert(arith.DivUIOp(u, _index(self.b, per))).result
                panel = chunk_view(s, buf, _mul(self.b, slot, size))
                views[s] = self.b.insert(mesh.BroadcastOp(panel, axis, root)).result
            moved = list[SSAValue](cur)
        else:
            for s, buf in zip(rotating, cur, strict=True):
                axis = m.paths[s]
                ring = _ring_for(self.ring, opts.n(axis))
                moved.append(self._rotate(s, buf, size, axis, ring))
                views[s] = chunk_view(s, buf, None)
        results = inner(views, accs)
        self.b.insert(tile.YieldOp(*results, *moved))
        self.b = outer
        count = chunks if summa else chunks - 1
        loop_op = self.b.insert(
            tile.ForOp(0, count, 1, "reduction", [*inits, *bufs], Region(steps))
        )
        results = list(loop_op.res[:n_acc])
        if not summa:
            last = list(loop_op.res[n_acc:])
            views = {
                s: chunk_view(s, buf, None) for s, buf in zip(rotating, last, strict=True)
            }
            results = inner(views, results)
        for o, n in zip(loop.res, results, strict=True):
            self.vmap[o] = n
        return list[SSAValue](results)

    def _rotate(
        self, src: SSAValue, buf: SSAValue, size: int, axis: str, ring: str
    ) -> SSAValue:
        """Sends the buffer's last chunk to the ring successor and shifts the rest up."""
        b = self.b
        shape = static_shape(buf, "buffer")
        j = self.m.layouts[src].index(self.m.paths[src])
        count = shape[j] // size
        if count == 1:
            return b.insert(mesh.ShiftOp(buf, axis, ring)).result
        zero = [_index(b, 0) for _ in shape]
        last_at = list(zero)
        last_at[j] = _index(b, (count - 1) * size)
        chunk = list(shape)
        chunk[j] = size
        head_shape = list(shape)
        head_shape[j] = shape[j] - size
        last = b.insert(tile.LoadOp(buf, last_at, chunk)).result
        head = b.insert(tile.LoadOp(buf, zero, head_shape)).result
        arrived = b.insert(mesh.ShiftOp(last, axis, ring)).result
        fresh = b.insert(tile.FillOp(0.0, TensorType(_elt(buf), shape))).result
        at_head = list(zero)
        at_head[j] = _index(b, size)
        moved = b.insert(tile.StoreOp(head, fresh, at_head)).result
        return b.insert(tile.StoreOp(arrived, moved, zero)).result

    # -- ops --------------------------------------------------------------------------

    def _value(self, v: SSAValue) -> SSAValue:
        got = self.vmap.get(v)
        if got is not None:
            return got
        owner = v.owner
        if isinstance(owner, arith.ConstantOp) and owner.parent_block() is self.low.block:
            if isinstance(v.type, TensorType):
                raise PlmrError(
                    "convert-tile-to-mesh: a tensor constant is used whole inside a nest"
                )
            # Hoisted to the start of the body so that every scope sees it.
            clone = self.entry.insert(owner.clone())
            self.vmap[v] = clone.result
            return clone.result
        raise PlmrError(
            f"convert-tile-to-mesh: value %{v.name_hint or '?'} is used inside a nest but "
            "defined outside it"
        )

    def _emit_ops(self, ops: Iterable[Operation]) -> None:
        for op in ops:
            if isinstance(op, tile.YieldOp):
                self.b.insert(tile.YieldOp(*(self._value(v) for v in op.values)))
                continue
            if isinstance(op, tile.ForOp):
                inits = [self._value(v) for v in op.iter_args]
                self._emit_loop(op, inits)
                continue
            if isinstance(op, tile.LoadOp) and op.source in self.operands:
                self._emit_load(op)
                continue
            if isinstance(op, tile.StoreOp) and self._output_of(op) is not None:
                self._emit_store(op)
                continue
            for operand in op.operands:
                self._value(operand)
            clone = op.clone(value_mapper=self.vmap)
            self.b.insert(clone)
            for o, n in zip(op.results, clone.results, strict=True):
                n.name_hint = o.name_hint
                self.vmap[o] = n

    def _index_for(self, v: SSAValue, distributed: bool) -> SSAValue:
        if distributed:
            local = self.local.get(v)
            if local is None:
                raise PlmrError(
                    "convert-tile-to-mesh: internal error: a distributed dim is indexed "
                    "by a loop that is not split"
                )
            return local
        return self._value(v)

    def _emit_load(self, op: tile.LoadOp) -> None:
        operand = self.operands[op.source]
        info = self.loads[op]
        offs: list[SSAValue] = []
        for v, idx, a in zip(op.offsets, info.indices, operand.layout, strict=True):
            if a != "-" and isinstance(idx, Composite):
                outer = self._index_for(idx.outer, True)
                offs.append(
                    _add(self.b, _mul(self.b, outer, idx.scale), self._value(idx.inner))
                )
            else:
                offs.append(self._index_for(v, a != "-"))
        padding = None if op.padding is None else op.padding.value.data
        shape = static_shape(op.result, "r")
        new = self.b.insert(tile.LoadOp(operand.block, offs, shape, padding))
        new.result.name_hint = op.result.name_hint
        self.vmap[op.result] = new.result

    def _output_of(self, op: tile.StoreOp) -> int | None:
        for k, stores in self.nest.stores.items():
            if op in stores:
                return k
        return None

    def _emit_store(self, op: tile.StoreOp) -> None:
        k = self._output_of(op)
        assert k is not None
        layout = self.m.outputs[k]
        offs = [
            self._index_for(v, a != "-") for v, a in zip(op.offsets, layout, strict=True)
        ]
        dest = self._value(op.dest)
        new = self.b.insert(tile.StoreOp(self._value(op.block), dest, offs))
        result = new.result
        if self.guards:
            # Inside a block of padding the output keeps its (zero) padding.
            cond = self.guards[0]
            for g in self.guards[1:]:
                cond = self.b.insert(arith.AndIOp(cond, g)).result
            result = self.b.insert(tile.SelectOp(cond, result, dest)).result
        result.name_hint = op.result.name_hint
        self.vmap[op.result] = result


def _groups(opts: Options, axis: str) -> int | None:
    """The K-tree's groups along `axis` (None: the collective's default)."""
    if opts.gemv != "ktree" or opts.groups <= 0 or opts.k < 2:
        return None
    return min(opts.groups, opts.n(axis))


class _StraightEmitter(_NestEmitter):
    """
    Tile ops at the top of a function (blocks small enough to need no loop): they run on
    every PE on whole, replicated tensors.
    """

    def __init__(self, low: _Lowering, ops: list[Operation]):
        self.low = low
        self.ops = ops
        self.opts = low.opts
        self.m = Mapping({}, "local")
        self.loads = {}
        self.skew = False
        self.ring = "torus"

    def emit(self) -> mesh.SpmdOp:
        low, opts = self.low, self.opts
        inside = {r for op in self.ops for r in op.results}
        globals_: list[SSAValue] = []
        empties: list[SSAValue] = []
        for op in self.ops:
            for inner in op.walk():
                for v in inner.operands:
                    if v in inside or not isinstance(v.type, TensorType):
                        continue
                    if not _is_global(v, low.block):
                        continue
                    if isinstance(v.owner, tensor.EmptyOp):
                        if v not in empties:
                            empties.append(v)
                    elif v not in globals_:
                        globals_.append(v)
        outputs = [
            r
            for op in self.ops
            for r in op.results
            if isinstance(r.type, TensorType)
            and any(u.operation not in self.ops for u in r.uses)
        ]
        inputs: list[SSAValue] = []
        for src in globals_:
            whole = tuple("-" for _ in static_shape(src, "input"))
            placed = low.placed.get(src)
            inputs.append(low.scatter(src, whole) if placed is None else placed.value)
        arg_types: list[Attribute] = [IndexType(), IndexType()]
        for v in inputs:
            d = v.type
            assert isinstance(d, mesh.DistType)
            arg_types.append(TensorType(d.tensor.element_type, d.block_shape(opts.grid)))
        body = Block(arg_types=arg_types)
        self.b = Builder(InsertPoint.at_end(body))
        self.entry = Builder(InsertPoint.at_start(body))
        self.coord = {"y": body.args[0], "x": body.args[1]}
        body.args[0].name_hint = "py"
        body.args[1].name_hint = "px"
        self.vmap = {}
        self.local = {}
        self.operands = {}
        for src, value, arg in zip(globals_, inputs, body.args[2:], strict=True):
            d = value.type
            assert isinstance(d, mesh.DistType)
            whole = tuple("-" for _ in static_shape(src, "input"))
            have = tuple(d.layout.axes)
            block: SSAValue = arg
            if have != whole:
                block = self._relayout(src, arg, have, whole, ("", "", 0))
            self.vmap[src] = block
        for e in empties:
            self.vmap[e] = self.b.insert(
                tile.FillOp(0.0, TensorType(_elt(e), static_shape(e, "empty")))
            ).result
        self._emit_ops(self.ops)
        self.b.insert(mesh.YieldOp(*(self.vmap[o] for o in outputs)))
        out_types = [_dist(o, tuple("-" for _ in static_shape(o, "r"))) for o in outputs]
        spmd = low.builder.insert(mesh.SpmdOp(inputs, out_types, Region(body)))
        for old, new in zip(outputs, spmd.outputs, strict=True):
            new.name_hint = old.name_hint
            low.placed[old] = _Placed(new, tuple("-" for _ in static_shape(old, "r")))
        return spmd

    def _output_of(self, op: tile.StoreOp) -> int | None:
        del op
        return None


def _ring_for(ring: str, n: int) -> str:
    return "torus" if ring == "interleaved" and n < 3 else ring


def _elt(value: SSAValue) -> Attribute:
    t = value.type
    assert isinstance(t, TensorType)
    return t.element_type  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]


# ---------------------------------------------------------------------------------------
# The pass
# ---------------------------------------------------------------------------------------


def parse_options(
    grid: Sequence[int], device: str, gemm: str, gemv: str, k: int, groups: int = 0
) -> Options:
    if len(grid) != 2 or any(g <= 0 for g in grid):
        raise PlmrError(
            f"convert-tile-to-mesh: grid must be two positive sizes ROWS,COLS, got {list(grid)}"
        )
    if gemm not in GEMM_CHOICES:
        raise PlmrError(
            f"convert-tile-to-mesh: unknown gemm '{gemm}' (choose {', '.join(GEMM_CHOICES)})"
        )
    if gemv not in GEMV_CHOICES:
        raise PlmrError(
            f"convert-tile-to-mesh: unknown gemv '{gemv}' (choose {', '.join(GEMV_CHOICES)})"
        )
    if k < 1:
        raise PlmrError(f"convert-tile-to-mesh: k must be >= 1, got {k}")
    if groups < 0:
        raise PlmrError(f"convert-tile-to-mesh: groups must be >= 0, got {groups}")
    dev = get_device(device)
    if grid[0] > dev.height or grid[1] > dev.width:
        raise PlmrError(
            f"convert-tile-to-mesh: a {grid[0]}x{grid[1]} grid does not fit {dev.name} "
            f"({dev.height}x{dev.width} PEs)"
        )
    return Options((grid[0], grid[1]), dev, device, gemm, gemv, k, groups)


def lower_module(
    module: ModuleOp, opts: Options, plans: list[NestPlan] | None = None
) -> float:
    """
    Replaces every function of `module` by its mesh program (all or nothing) and returns
    the estimated cycles of the chosen mappings; `plans` receives each nest's mapping.
    """
    fns = [op for op in module.ops if isinstance(op, func.FuncOp) and op.body.blocks]
    if not fns:
        already = any(isinstance(op, mesh.ProgramOp) for op in module.ops)
        raise PlmrError(
            "convert-tile-to-mesh: the module has no function to partition"
            + (" (it is already a mesh program: run it with plmr run)" if already else "")
        )
    lowerings = [_Lowering(fn, opts) for fn in fns]
    programs = [(fn, low.run()) for fn, low in zip(fns, lowerings, strict=True)]
    if plans is not None:
        for low in lowerings:
            plans.extend(low.plans)
    for fn, program in programs:
        Builder(InsertPoint.before(fn)).insert(program)
        fn.detach()
        fn.erase()
    return sum(low.cost for low in lowerings)


@dataclass(frozen=True)
class ConvertTileToMeshPass(ModulePass):
    """
    Partitions tile programs over a 2D grid of PEs (see the module docstring):
    `grid = ROWS,COLS`, `device`, `gemm = meshgemm|cannon|summa` (how reductions
    rotate), `gemv = ktree|pipeline|ring` (the allreduce algorithm), `k` (K-tree phases),
    `groups` (K-tree groups of the first phase; 0 = about √n).
    """

    name = "convert-tile-to-mesh"

    grid: tuple[int, ...] = (4, 4)
    device: str = "wse2"
    gemm: str = "meshgemm"
    gemv: str = "ktree"
    k: int = 2
    groups: int = 0

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        opts = parse_options(
            self.grid, self.device, self.gemm, self.gemv, self.k, self.groups
        )
        lower_module(op, opts)


__all__ = [
    "GEMM_CHOICES",
    "GEMV_CHOICES",
    "ConvertTileToMeshPass",
    "NestPlan",
    "Options",
    "lower_module",
    "parse_options",
]
