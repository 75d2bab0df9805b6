"""
The analysis of `convert-loop-to-tile`: which dimensions of a nest are blocked and by how
much, whether its reads can be blocked, and the combining ops of its reductions (with the
proof a rolling update distributes, `repair.check_laws`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Literal

from xdsl.dialects import arith
from xdsl.ir import Attribute, BlockArgument, Operation, SSAValue

from plmr.dialects.loop import (
    NestOp,
    ReadOp,
    value_shape,
)
from plmr.errors import PlmrError
from plmr.lowering.loop_to_tile.blocks import INDEX_OPS as _INDEX_OPS
from plmr.lowering.loop_to_tile.blocks import Combine as _Combine
from plmr.lowering.loop_to_tile.blocks import Dim, Untileable, digit
from plmr.lowering.loop_to_tile.blocks import Plan as _Plan
from plmr.lowering.loop_to_tile.blocks import arguments as _arguments
from plmr.lowering.loop_to_tile.blocks import defined_in as _defined_in
from plmr.lowering.loop_to_tile.blocks import is_const as _is_const
from plmr.lowering.loop_to_tile.blocks import nests_in as _nests_in
from plmr.lowering.loop_to_tile.blocks import taint as _taint
from plmr.lowering.loop_to_tile.padding import padding_values
from plmr.passes.neptune import nests as N
from plmr.passes.neptune.repair import RepairRefused, check_laws
from plmr.passes.neptune.symbolic import Expr, Symbol, sp, to_sympy
from plmr.runtime.loop_ops import combiner_of

_KIND: dict[type[Operation], str] = {
    arith.AddfOp: "add",
    arith.AddiOp: "add",
    arith.MulfOp: "mul",
    arith.MaximumfOp: "max",
    arith.MinimumfOp: "min",
}
"""Combining ops a blocked reduction can use, and their `tile` names."""


def _large(t: Attribute) -> bool:
    """A tensor worth reusing: at least two dimensions longer than 1."""
    return sum(1 for d in value_shape(t) if d > 1) >= 2


WHOLE_BLOCKS = 32
"""With `fit` and a grid: a dimension no axis can split, of at most this many blocks, is
kept whole."""

SPLIT_FRACTION = 8
"""With `fit` and a grid: a dimension shorter than an axis is split in blocks of one
element (one per PE, the rest of the axis idle) when it occupies at least
`1 / SPLIT_FRACTION` of the axis's PEs (a head dimension of 128 on 420 PEs), and kept
whole when it is smaller than that on every axis (8 heads)."""


BAND_MIN_WIDTH = 4
"""The fewest PEs of a band: with `bands`, an axis must offer that many per block of a
dimension kept whole as too small (`Analysis._too_small`) for it to be cut in blocks of 1
(a loop over bands); the mesh partitioner puts a loop over bands no narrower."""


class Analysis:
    def __init__(
        self,
        nest: NestOp,
        sizes: tuple[int, int],
        order: Iterator[int],
        dims: dict[SSAValue, Dim] | None = None,
        fit: bool = False,
        grid: Sequence[int] = (),
        bands: bool = False,
        spread: bool = False,
    ):
        self.nest = nest
        self.sizes = sizes
        self.fit = fit
        self.grid = tuple(grid)
        self.bands = bands
        self.spread = spread
        self.order = order
        self.dims: dict[SSAValue, Dim] = {} if dims is None else dims
        self._padding: dict[ReadOp, float] | Literal[False] | None = False
        self.padded: bool | None = None
        """Whether `padding()` finds one, when known already (the memo's `padded`)."""

    def run(self) -> _Plan:
        nest = self.nest
        blocks = self._top_blocks()
        for i, (arg, e) in enumerate(zip(nest.dims, nest.extents, strict=True)):
            self.dims[arg] = Dim(
                arg.name_hint or f"d{i}", e, blocks[i], next(self.order), True
            )
        for inner in _nests_in(nest)[1:]:
            for arg, e in zip(inner.dims, inner.extents, strict=True):
                self.dims[arg] = Dim(arg.name_hint or "n", e, e, next(self.order), False)
        self._legalise_reads()
        combines = self._combines()
        if combines is None:
            for i in nest.reduction_dims:
                self.dims[nest.dims[i]].block = 1
            combines = self._combines(blocked=False)
            if combines is None:
                raise Untileable("its reduction is not of the form acc ⊕ g")
        self._check_divisible()
        plan = _Plan(self.dims, combines, pads=self.padding() or {})
        for k, acc in enumerate(nest.accumulators):
            vshape = value_shape(acc.type)
            plan.value_dims[k] = [
                Dim(f"v{k}_{a}", e, e, next(self.order), False)
                for a, e in enumerate(vshape)
            ]
        return plan

    # -- block sizes ------------------------------------------------------------------

    def padding(self) -> dict[ReadOp, float] | None:
        """
        With `fit`: the padding of each read along the innermost reduction dimension
        under which a padded last block leaves every accumulator as it is
        (`padding.padding_values`), or None (its blocks must divide it).
        """
        if self._padding is not False:
            return self._padding
        found: dict[ReadOp, float] | None = None
        nest = self.nest
        red = nest.reduction_dims
        if self.fit and red and nest.extents[red[-1]] > 1:
            terms: list[tuple[str, SSAValue]] = []
            for acc, y in zip(nest.accumulators, nest.yield_op.values, strict=True):
                if y is acc:
                    continue
                located = self._locate(acc, y)
                if located is None:
                    terms = []
                    break
                op, _, g, _ = located
                terms.append((_KIND[type(op)], g))
            if terms:
                found = padding_values(nest, nest.dims[red[-1]], terms)
        self._padding = found
        return found

    def top_blocks(self) -> list[int]:
        """
        The block of each dimension of the nest before its reads and combines are
        checked: everything of the sizes, `fit`, the grid and `bands` the rest of the
        analysis uses (the key of `memo`).
        """
        return self._top_blocks()

    def _top_blocks(self) -> list[int]:
        nest = self.nest
        p, r = self.sizes
        blocks = [1] * nest.rank
        red = nest.reduction_dims
        if red:
            pad = self.padded if self.padded is not None else self.padding() is not None
            blocks[red[-1]] = self._block(r, nest.extents[red[-1]], pad=pad)
        par = list(nest.parallel_dims)
        reads = [
            op for op in nest.walk() if isinstance(op, ReadOp) and _large(op.source.type)
        ]
        deps = [_arguments(op.indices) for op in reads]
        chosen = [
            i
            for i in par
            if nest.extents[i] > 1 and any(nest.dims[i] not in d for d in deps)
        ]
        if self.bands:
            # A dimension too short for every axis goes over bands of PEs even where a
            # few-row operand (a k-token step's `[k, dim]`) is reused along it.
            chosen = [i for i in chosen if not self._band_only(nest.extents[i])]
        if not red:
            chosen = sorted(set(chosen) | set(par[-2:]))
        elif not chosen and par:
            chosen = par[-1:]
        for i in chosen:
            blocks[i] = self._block(p, nest.extents[i], pad=True)
        banded = False
        for i in par:
            if i not in chosen and self._too_small(nest.extents[i]):
                blocks[i] = nest.extents[i]
                if not banded and self._bandable(nest.extents[i]):
                    # The outermost: a loop of blocks of 1 the mesh can put over bands.
                    blocks[i] = 1
                    banded = True
        self._keep_spare_whole(blocks, p if not red else max(p, r))
        return blocks

    def _band_only(self, extent: int) -> bool:
        return self._too_small(extent) and self._bandable(extent)

    def _bandable(self, extent: int) -> bool:
        """With `bands`: an axis has room for `extent` bands of `BAND_MIN_WIDTH` PEs."""
        return self.bands and any(n // extent >= BAND_MIN_WIDTH for n in self.grid)

    def _keep_spare_whole(self, blocks: list[int], size: int) -> None:
        """
        With `fit` and a grid: a dimension cut in blocks of 1 to spread it over an axis
        (a head dimension of 128 on 480 PEs) is kept whole when two other dimensions
        (parallel, or the reduction) split evenly over the two axes: the mapping takes
        those, the short one stays on every PE, and as blocks of 1 it would be a loop of
        one-column products and allreduces (a prefill projection `[L, hd]` over `K`:
        one block of 128 is 12.7 k cycles on 480², 128 blocks of 1 are 27.4 k).
        """
        axes = [n for n in self.grid if n > 1]
        if not self.fit or len(axes) != 2:
            return
        ext = self.nest.extents

        def even(i: int, padded: bool) -> bool:
            # Split evenly, or (`padded`) in one padded block per PE (4,096 over 480: 9).
            return any(
                (ext[i] // blocks[i]) % n == 0
                or (padded and blocks[i] == -(-ext[i] // n) > 1)
                for n in axes
            )

        for i, e in enumerate(ext):
            if blocks[i] != 1 or e <= 1 or e >= min(axes) or e > WHOLE_BLOCKS * size:
                continue
            # A dimension cut in ones to spread over an axis (not one too short for
            # that, cut in ones for bands) stays whole beside padded splits too.
            spread = e * SPLIT_FRACTION >= min(axes)
            others = [j for j in range(len(ext)) if j != i and ext[j] > 1]
            if sum(even(j, spread) for j in others) >= 2:
                blocks[i] = e

    def _too_small(self, extent: int) -> bool:
        """
        With `fit` and a grid: a dimension that no axis divides and that would occupy
        fewer than `1 / SPLIT_FRACTION` of every axis's PEs (8 heads on 420 PEs) is kept
        whole: a split would leave almost every PE idle, and whole, its blocks are one
        batched op on the PE instead of a loop of small ones.
        """
        axes = [n for n in self.grid if n > 1]
        if not self.fit or not axes or extent <= 1:
            return False
        if any(extent % n == 0 for n in axes):
            return False
        return all(extent * SPLIT_FRACTION < n for n in axes)

    def _block(self, size: int, extent: int, pad: bool = False) -> int:
        """
        The block of a dimension: `size` (at most the extent); with `fit`, the largest
        divisor of the extent that is at most `size`. With `fit` and a grid, the largest
        such divisor whose block count a mesh axis divides (so that the loop can be
        split over it); failing that, blocks of 1 for a dimension shorter than an axis
        but at least `1 / SPLIT_FRACTION` of it (a head dimension of 128 on 420 PEs: one
        element on each of 128 PEs); failing that, a dimension of at most `WHOLE_BLOCKS`
        blocks is one block (a head of 128 on 1,024 PEs: one block instead of 32
        allreduces); failing that, the largest divisor whose blocks split unevenly over
        an axis, each PE's share its block of the padded layout (`ceil(extent / n)`
        elements: 11,264 columns over 420 PEs, 27 blocks of 1). With `spread`, a
        dimension at least as long as an axis splits unevenly so before it is kept
        whole (an LM head of 128 columns on 3x3: 43 per PE, where whole it does not fit
        a PE's SRAM). With `pad` (a parallel dimension, or a reduction whose padding
        leaves its combine as it is), a PE's run of padded-layout blocks is one padded
        block instead: `ceil(extent / n)` elements, the last block ending past the
        extent (its loads padded; a parallel dimension's stores clipped), so that an
        uneven split costs one block operation per PE (256 on 14 PEs: 14 blocks of 19,
        not 19 blocks of 1 per PE).
        """
        if not self.fit or extent <= size:
            return min(size, extent)
        divisors = [d for d in range(1, size + 1) if extent % d == 0]
        axes = [n for n in self.grid if n > 1]
        if not axes:
            return max(divisors)
        split = [d for d in divisors if any((extent // d) % n == 0 for n in axes)]
        if split:
            return max(split)
        padded = [
            d
            for d in divisors
            if any(-(-(extent // d) // n) * d == -(-extent // n) for n in axes)
        ]
        if any(extent < n <= extent * SPLIT_FRACTION for n in axes):
            return 1
        spreads = self.spread and any(extent >= n for n in axes)
        if extent <= WHOLE_BLOCKS * size and not (spreads and padded):
            return extent
        fitted = self._fitted(size, extent) if pad else None
        if fitted is not None and fitted > max(padded, default=0):
            return fitted
        if padded:
            return max(padded)
        return max(divisors)

    def _fitted(self, size: int, extent: int) -> int | None:
        """
        The padded block of `extent` over the longest axis it spans: `ceil(extent / n)`
        elements when that fits `size` and does not divide the extent (a divisor is
        an even split, chosen before).
        """
        spanned = [n for n in self.grid if 1 < n <= extent]
        if not spanned:
            return None
        block = -(-extent // max(spanned))
        if block > size or block < 2 or extent % block == 0:
            return None
        return block

    def _check_divisible(self) -> None:
        """
        Refuses a top dimension whose block does not divide its extent, except, with
        `fit`, a parallel one: its last block is padded (the code generator pads every
        load of a dimension whose block does not divide, with the load's own padding or
        zero, and clips every store), and a padded element of a parallel dimension is
        computed apart from the others and never stored. A reduction dimension is
        padded only where a padding of its reads leaves every accumulator as it is
        (`padding.padding_values`: zeros for a sum of products, `-inf` for a maximum).
        """
        nest = self.nest
        padded: set[SSAValue] = (
            {nest.dims[i] for i in nest.parallel_dims} if self.fit else set()
        )
        red = nest.reduction_dims
        if red and self.padding() is not None:
            padded.add(nest.dims[red[-1]])
        for arg, d in self.dims.items():
            if arg in padded:
                continue
            if d.top and d.block > 1 and d.extent % d.block:
                raise PlmrError(
                    f"convert-loop-to-tile: tile size {d.block} does not divide the "
                    f"extent {d.extent} of dimension %{d.name} of {_describe(self.nest)}"
                )

    # -- reads ------------------------------------------------------------------------

    def _legalise_reads(self) -> None:
        """Unblocks dimensions until every read is a block load (or raises)."""
        changed = True
        while changed:
            changed = False
            for op in self.nest.walk():
                if not isinstance(op, ReadOp):
                    continue
                bad = self.read_problem(op)
                if bad is None:
                    continue
                if not bad:
                    raise Untileable(
                        f"it reads {op.source.type} at indices it cannot block"
                    )
                for d in bad:
                    if not d.top:
                        raise Untileable("an index uses a nested dimension in arithmetic")
                    d.block = 1
                changed = True

    def legal_reads(self, nest: NestOp) -> bool:
        """Whether every read of `nest` (with the current dims) is a block load."""
        return all(
            self.read_problem(op) is None for op in nest.walk() if isinstance(op, ReadOp)
        )

    def read_problem(self, op: ReadOp) -> list[Dim] | None:
        """None if `op` can be a block load; else the dims to unblock (empty: never)."""
        if not _defined_in(op.source, self.nest):
            if op.padding is not None:
                # Blocks of one element along every dimension an index uses other than
                # as a shift: a padded load at a computed offset along those axes (a
                # strided or dilated window), a shifted window along the others (a
                # concatenation's second part read at `d - offset`).
                padded = [
                    d
                    for i in op.indices
                    if not _shifted(i, self.dims)
                    for d in self._axis_dims(i)
                ]
                if padded:
                    return padded
            used: list[Dim] = []
            for i in op.indices:
                aff = self._affine(i)
                if aff is False:
                    return self._misplaced(i) or self._axis_dims(i)
                if aff is None:
                    continue
                if aff in used:
                    return [aff]
                used.append(aff)
            return None
        # A tensor value of a body: its value axes are indexed by nested dimensions.
        for i in op.indices:
            if i in self.dims and not self.dims[i].top:
                continue
            if _is_const(i, 0):
                continue
            return []
        return None

    def _misplaced(self, v: SSAValue) -> list[Dim]:
        """Axis dims of an index used other than as a `+` term (or all but one of those)."""
        terms: list[Dim] = []
        bad: list[Dim] = []

        def walk(x: SSAValue) -> None:
            if x in self.dims:
                if self.dims[x].axis:
                    terms.append(self.dims[x])
                return
            op = x.owner
            if isinstance(op, arith.AddiOp):
                walk(op.lhs)
                walk(op.rhs)
            elif isinstance(op, arith.SubiOp):
                walk(op.lhs)
                bad.extend(self._axis_dims(op.rhs))
            else:
                bad.extend(self._axis_dims(x))

        walk(v)
        return bad + terms[:-1]

    def _axis_dims(self, v: SSAValue) -> list[Dim]:
        out: list[Dim] = []
        for arg in _arguments([v]):
            d = self.dims.get(arg)
            if d is not None and d.axis:
                out.append(d)
        return out

    def _affine(self, v: SSAValue) -> Dim | Literal[False] | None:
        """The axis dim of `dim + scalar`, None for a scalar, False if neither."""
        if v in self.dims:
            d = self.dims[v]
            return d if d.axis else None
        if isinstance(v, BlockArgument):
            return False
        op = v.owner
        if isinstance(op, arith.ConstantOp):
            return None
        if isinstance(op, arith.AddiOp):
            a, b = self._affine(op.lhs), self._affine(op.rhs)
            if a is False or b is False or (a is not None and b is not None):
                return False
            return a if a is not None else b
        if isinstance(op, arith.SubiOp):
            a, b = self._affine(op.lhs), self._affine(op.rhs)
            if a is False or b is not None:
                return False
            return a
        found = digit(v, self.dims)
        if found is not None:
            d, along = found
            return d if along else None
        if isinstance(op, _INDEX_OPS):
            if any(self._affine(x) is not None for x in op.operands):
                return False
            return None
        return False

    # -- reductions -------------------------------------------------------------------

    def _combines(self, blocked: bool = True) -> dict[Operation, _Combine] | None:
        """The combining op of every reduction in the nest, or None if one is not blockable."""
        out: dict[Operation, _Combine] = {}
        for inner in _nests_in(self.nest)[1:]:
            if not inner.is_reduction:
                continue
            ops = combiner_of(inner)
            if ops is None or any(type(o) not in _KIND for o in ops):
                raise Untileable("a nested reduction is not of the form acc ⊕ g")
            for o, acc in zip(ops, inner.accumulators, strict=True):
                g = o.operands[1] if o.operands[0] is acc else o.operands[0]
                dims: list[SSAValue] = [inner.dims[i] for i in inner.reduction_dims]
                out[o] = _Combine(_KIND[type(o)], acc, g, dims, acc)
        nest = self.nest
        if not nest.is_reduction:
            return out
        red: list[SSAValue] = [nest.dims[i] for i in nest.reduction_dims]
        found = self._top_combines(red, blocked)
        if found is None:
            return None
        out.update(found)
        return out

    def _top_combines(
        self, red: list[SSAValue], blocked: bool
    ) -> dict[Operation, _Combine] | None:
        nest = self.nest
        body = nest.body.block
        accs = list(nest.accumulators)
        found: dict[Operation, _Combine] = {}
        news: dict[SSAValue, int] = {}
        # Over reduction dimensions of one element the body runs once, from the initial
        # value: any yield is a map of it (a rank-0 map nest ignores its accumulator).
        once = all(nest.extents[i] == 1 for i in nest.reduction_dims)
        for k, (acc, y) in enumerate(zip(accs, nest.yield_op.values, strict=True)):
            located = self._locate(acc, y)
            if located is None and once:
                continue
            if located is None:
                return None
            op, h, g, t = located
            found[op] = _Combine(_KIND[type(op)], h, g, red, t)
            news[op.results[0]] = k
        barrier: set[SSAValue] = {o.results[0] for o in found}
        varying = _taint(body, set(red), barrier)
        stale = _taint(body, set(accs), barrier)
        for op, c in found.items():
            if c.g in stale:
                return None
            if not blocked:
                continue
            if c.h in varying:
                return None
            if not self._proved(c, op, accs, news, varying):
                return None
        return found

    def _locate(
        self, acc: BlockArgument, y: SSAValue
    ) -> tuple[Operation, SSAValue, SSAValue, SSAValue] | None:
        """The combining op of accumulator `acc` (yielded as `y`): op, h, g, t."""
        if isinstance(y.owner, NestOp):
            inner = y.owner
            if inner.is_reduction or len(inner.res) != 1:
                return None
            inner_y = inner.yield_op.values[0]
            op = inner_y.owner
            if not isinstance(op, Operation) or type(op) not in _KIND:
                return None
            reads = [
                r for r in inner.body.walk() if isinstance(r, ReadOp) and r.source is acc
            ]
            if len(reads) != 1 or list(reads[0].indices) != list(inner.dims):
                return None
            t = reads[0].result
            h_side = [x for x in op.operands if _reaches(x, t)]
            if len(h_side) != 1:
                return None
            h = h_side[0]
            g = op.operands[1] if op.operands[0] is h else op.operands[0]
            return op, h, g, t
        op = y.owner
        if not isinstance(op, Operation) or type(op) not in _KIND:
            return None
        h_side = [x for x in op.operands if _reaches(x, acc)]
        if len(h_side) != 1:
            return None
        h = h_side[0]
        g = op.operands[1] if op.operands[0] is h else op.operands[0]
        return op, h, g, acc

    def _proved(
        self,
        c: _Combine,
        op: Operation,
        accs: list[BlockArgument],
        news: dict[SSAValue, int],
        varying: set[SSAValue],
    ) -> bool:
        """Whether the repair `h` of a combine is proved to allow block updates."""
        t = sp.Symbol("t", real=True)
        old_syms: dict[int, Symbol] = {}
        new_syms: dict[int, Symbol] = {}
        leaves: dict[SSAValue, Symbol] = {}
        acc_index: dict[SSAValue, int] = {a: k for k, a in enumerate(accs)}

        def leaf(v: SSAValue) -> Expr:
            if v is c.t:
                return t
            if v in acc_index and value_shape(v.type) == ():
                k = acc_index[v]
                return old_syms.setdefault(k, sp.Symbol(f"x{k}", real=True))
            if v in news:
                k = news[v]
                return new_syms.setdefault(k, sp.Symbol(f"x{k}_new", real=True))
            if (
                v in varying
                or v in acc_index
                or (isinstance(v.owner, ReadOp) and v.owner.source in acc_index)
            ):
                raise RepairRefused("h reads what it cannot repair")
            return leaves.setdefault(v, sp.Symbol(f"u{len(leaves)}", real=True))

        try:
            h = to_sympy(c.h, leaf, news)
            if h == t:
                return True
            keys = sorted(set(old_syms) | set(new_syms))
            old = [old_syms.get(k, sp.Symbol(f"x{k}", real=True)) for k in keys]
            new = [new_syms.get(k, sp.Symbol(f"x{k}_new", real=True)) for k in keys]
            check_laws(h, t, old, new, c.kind)
        except RepairRefused:
            return False
        return True


def _reaches(v: SSAValue, target: SSAValue) -> bool:
    """
    Whether `v` is `target` or computed from it (through ops and nested bodies). Only
    values defined inside the op whose body defines `target` can be computed from it,
    so the search stops at the others instead of walking the program before the nest.
    """
    scope = target.owner.parent_op()
    seen: set[SSAValue] = set()
    work = [v]
    while work:
        x = work.pop()
        if x in seen:
            continue
        seen.add(x)
        if x is target:
            return True
        if scope is not None and not _defined_in(x, scope):
            continue
        op = x.owner
        if isinstance(op, Operation):
            work.extend(N.external_values(op) if op.regions else op.operands)
    return False


def _shifted(v: SSAValue, dims: dict[SSAValue, Dim]) -> bool:
    """`dim`, `dim ± constant` or a constant: a padded read of a window (a padded tensor)."""
    if v in dims or isinstance(v.owner, arith.ConstantOp):
        return True
    op = v.owner
    if not isinstance(op, arith.AddiOp | arith.SubiOp):
        return False
    lhs_const, rhs_const = (isinstance(x.owner, arith.ConstantOp) for x in op.operands)
    if op.lhs in dims and rhs_const:
        return True
    return isinstance(op, arith.AddiOp) and lhs_const and op.rhs in dims


def _describe(nest: NestOp) -> str:
    names = [f"%{r.name_hint}" for r in nest.res if r.name_hint]
    return f"the nest computing {', '.join(names)}" if names else "an unnamed nest"
