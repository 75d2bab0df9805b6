"""
`neptune-fuse`: fuses chains of reductions that read each other's results (Neptune's
rolling update and split-K update).

A reduction nest `T` whose term reads the result of an earlier reduction `R` (at the
same parallel point, over a reduction of the same extent) normally has to wait for `R`
to finish. The pass fuses `T` into `R`'s nest anyway, so that `T` reads `R`'s value *as
it is so far*, and repairs every earlier partial result of `T` with the proved repair
`h` (`passes.neptune.repair`) each time `R`'s value changes:

    X_t  =  h(X_t, r, r')  ⊕  g(r', u)          (r = R before this step, r' = after)

Applied to softmax this is the online softmax; applied to attention (max → exp-sum →
P·V, in that order) it is FlashAttention's recurrence. The steps:

1. inline every elementwise (map) nest into the nests that read it, except a map that
   is stored anyway (a function result) or read by more than three nests (a residual
   read by every projection of the next layer): those are read, not recomputed;
2. *delay normalisation*: a sum whose term has a factor that does not change along the
   reduction and reads another reduction's result (`Σ_j p[i,j]·v[j,d]` with
   `p = e / l[i]`) is rewritten as `(Σ_j e·v) / l[i]` (FlashAttention's late division);
3. for every reduction, in program order, that reads unfinished reductions: derive and
   prove the repair, then fuse by rolling update (one nest: the reduction runs once,
   carrying every accumulator; a result with extra dimensions, like P·V's head
   dimension, is carried as a tensor computed by a nested nest) or by split-K update
   (the reduction is split into `chunks` independent chunks, each fused by rolling
   update, then combined with the repair: `Σ_c l_c · exp(m_c − m)`);
4. in the fused nests: hoist invariant ops out of nested nests, merge common
   subexpressions, and recompute the producers they read element by element (the
   scores `Q·Kᵀ`) inside them instead of materialising them.

When no repair exists (a variance with a running mean) the nests stay unfused and the
reader gets a `loop.remark` attribute saying why (also printed to stderr unless
`remarks=false`).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.builder import Builder, ImplicitBuilder
from xdsl.context import Context
from xdsl.dialects.builtin import (
    ModuleOp,
    StringAttr,
)
from xdsl.ir import BlockArgument, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint

from plmr.dialects.loop import (
    REMARK_ATTR,
    NestOp,
    ReadOp,
    build_nest,
    value_element,
)
from plmr.errors import PassOptionError, PlmrError
from plmr.passes.neptune import nests as N
from plmr.passes.neptune.fusion import (
    Match,
    P,
    Refused,
    Split,
    Term,
    clone_slice,
    inside,
    is_zero,
    nest_name,
    term_of,
)
from plmr.passes.neptune.split_k import SplitKUpdate
from plmr.passes.neptune.symbolic import (
    Expr,
    Symbol,
    emit,
    representable,
    sp,
    to_sympy,
)

STRATEGIES = ("auto", "rolling", "split-k")


class Fuser(SplitKUpdate):
    """Fuses the reduction chains of one function body."""

    # -- driver ---------------------------------------------------------------------

    def run(self) -> None:
        N.hoist_constants(self.block)
        N.fold_scalar_constant_reads(self.block)
        N.inline_maps(self.block)
        if self._delay_normalisation():
            N.inline_maps(self.block)
        for nest in N.top_nests(self.block):
            if nest.parent is None or not nest.is_reduction or nest in self.fused:
                continue
            try:
                self._fuse_reader(nest)
            except Refused as e:
                self.remark(nest, str(e))
        for nest in list(self.fused):
            if nest.parent is not None:
                self._tidy(nest)
        N.inline_maps(self.block)
        N.dce(self.block)
        N.merge_sibling_maps(self.block)

    def remark(self, nest: NestOp, message: str) -> None:
        nest.attributes[REMARK_ATTR] = StringAttr(message)
        if self.remarks:
            print(f"neptune-fuse: remark: {message}", file=sys.stderr)

    # -- step 2: delay normalisation -------------------------------------------------

    def _delay_normalisation(self) -> bool:
        changed = False
        for nest in N.top_nests(self.block):
            term = term_of(nest)
            if term is None or term.kind != "add":
                continue
            changed |= self._pull_out_factor(term)
        return changed

    def _pull_out_factor(self, term: Term) -> bool:
        nest = term.nest
        body = nest.body.block
        varying = N.depends_on(body, [nest.dims[i] for i in nest.reduction_dims])
        leaves: dict[Symbol, SSAValue] = {}

        def leaf(v: SSAValue) -> Expr:
            s = sp.Symbol(f"u{len(leaves)}", real=True)
            leaves[s] = v
            return s

        known: dict[Expr, SSAValue] = {}
        g = to_sympy(term.g, leaf, known=known)
        if not isinstance(g, sp.Mul):
            return False
        fixed: list[Expr] = []
        rest: list[Expr] = []
        for f in g.args:
            values = [leaves[s] for s in f.free_symbols if isinstance(s, sp.Symbol)]
            (rest if any(v in varying for v in values) else fixed).append(f)
        if not rest or not fixed or not nest.parallel_dims:
            return False
        elt = value_element(nest.res.types[0])
        if not representable(g, elt):
            return False
        factor = sp.Mul(*fixed)
        reads_reduction = any(
            self._reads_reduction(leaves[s], nest)
            for s in factor.free_symbols
            if isinstance(s, sp.Symbol)
        )
        if not reads_reduction:
            return False
        with ImplicitBuilder(Builder(InsertPoint.before(term.combine))):
            new_g = emit(sp.Mul(*rest), known, elt)
        term.combine.operands = [new_g if v is term.g else v for v in term.combine.operands]
        # The factor, per parallel point, in a map nest after the reduction.
        par = nest.parallel_dims
        extents = nest.parallel_extents
        result = nest.res[0]
        needed = [leaves[s] for s in factor.free_symbols if isinstance(s, sp.Symbol)]

        def scale(d: Sequence[BlockArgument], a: Sequence[BlockArgument]) -> list[SSAValue]:
            mapping: dict[SSAValue, SSAValue] = {
                nest.dims[i]: d[k] for k, i in enumerate(par)
            }
            clone_slice(body_ops, needed, mapping)
            env = {s: mapping.get(v, v) for s, v in leaves.items() if v in needed}
            total = sp.Symbol("total", real=True)
            env[total] = ReadOp(result, list(d)).result
            return [emit(total * factor, env, elt)]

        body_ops = list(nest.body.block.ops)
        with ImplicitBuilder(Builder(InsertPoint.after(nest))):
            scaled = build_nest(extents, [P] * len(extents), [], scale).res[0]
        result.replace_uses_with_if(
            scaled, lambda use: not inside(use.operation, scaled.owner)
        )
        scaled.name_hint = result.name_hint
        result.name_hint = f"{result.name_hint or 'sum'}_unscaled"
        N.dce(nest.body.block)
        return True

    def _reads_reduction(self, value: SSAValue, reader: NestOp) -> bool:
        op = value.owner
        if not isinstance(op, ReadOp):
            return False
        src = op.source.owner
        return isinstance(src, NestOp) and src is not reader and src.is_reduction

    # -- step 3: fusing a reader into its producers ------------------------------------

    def _fuse_reader(self, target: NestOp) -> None:
        term = term_of(target)
        if term is None:
            return
        matches = self._matches(target)
        if not matches:
            return
        producers = {m.producer for m in matches}
        split = self._split_of(matches)
        if split is not None:
            self._extend_split(split, term, matches)
            return
        if len(producers) != 1:
            raise Refused(
                f"the reduction computing {nest_name(target)} reads several unfinished "
                "reductions that are not fused with each other"
            )
        (match,) = matches
        producer = match.producer
        strategy = "rolling" if producer in self.fused else self._choose(producer)
        if strategy == "split-k":
            split = self._start_split(producer)
            self._extend_split(split, term, self._matches(target))
            return
        fused, _, _ = self._fuse_rolling(producer, term, match)
        self._replace_fused(producer, fused)

    def _matches(self, target: NestOp) -> list[Match]:
        """The unfinished producers `target` reads, and how."""
        red_extents = [target.extents[i] for i in target.reduction_dims]
        glob = {v for s in self.splits for v in s.partial}
        found: dict[NestOp, Match] = {}
        unaligned: set[NestOp] = set()
        """Producers also read at points that are not a projection of `target`'s dims."""
        for op in target.body.walk():
            if not isinstance(op, ReadOp):
                continue
            src = op.source.owner
            if not isinstance(src, NestOp) or src is target or not src.is_reduction:
                continue
            if src.parent_block() is not self.block:
                continue
            if op.source in glob:
                extents_ok = any(
                    op.source in s.partial and red_extents == [s.extent]
                    for s in self.splits
                )
            else:
                extents_ok = [src.extents[i] for i in src.reduction_dims] == red_extents
            sigma = self._sigma(target, src, op)
            if sigma is None or not extents_ok:
                if extents_ok:
                    unaligned.add(src)
                continue
            if op.parent_op() is not target:
                raise Refused(
                    f"the reduction computing {nest_name(target)} reads an unfinished result "
                    "inside a nested nest"
                )
            match = found.setdefault(src, Match(src, [], sigma))
            if match.sigma != sigma:
                raise Refused(
                    f"the reduction computing {nest_name(target)} reads {nest_name(src)} at "
                    "different points"
                )
            match.reads.append(op)
        for src in unaligned & set(found):
            # Fused, this read would see the producer's unfinished result.
            raise Refused(
                f"the reduction computing {nest_name(target)} reads {nest_name(src)} at "
                "different points"
            )
        return list(found.values())

    def _sigma(self, target: NestOp, src: NestOp, read: ReadOp) -> dict[int, int] | None:
        """Producer parallel position -> target parallel dim, if the read is a projection."""
        dims = list(target.dims)
        par = set(target.parallel_dims)
        sigma: dict[int, int] = {}
        broadcast: list[int] = []
        if len(read.indices) != len(src.parallel_extents):
            # The value read is not indexed by the producer's parallel dims one to one.
            return None
        for p, idx in enumerate(read.indices):
            if src.parallel_extents[p] == 1 and is_zero(idx):
                broadcast.append(p)
                continue
            if idx not in dims:
                return None
            d = N.position_of(dims, idx)
            if d not in par or d in sigma.values():
                return None
            if target.extents[d] != src.parallel_extents[p]:
                return None
            sigma[p] = d
        # An extent-1 position read at 0 pairs with an unused extent-1 target dim.
        for p in broadcast:
            free = [
                d
                for d in target.parallel_dims
                if target.extents[d] == 1 and d not in sigma.values()
            ]
            if not free:
                return None
            sigma[p] = free[0]
        return dict(sorted(sigma.items()))

    def _split_of(self, matches: Sequence[Match]) -> Split | None:
        splits = {
            id(s): s for m in matches for s in self.splits if m.reads[0].source in s.partial
        }
        if not splits:
            return None
        if len(splits) != 1 or any(
            not any(r.source in s.partial for s in splits.values() for r in m.reads)
            for m in matches
        ):
            raise Refused("the reduction reads unfinished results of different groups")
        return next(iter(splits.values()))

    def _choose(self, producer: NestOp) -> str:
        red = producer.reduction_dims
        extent = producer.extents[red[0]] if len(red) == 1 else 0
        divisible = extent > 0 and extent % self.chunks == 0 and extent // self.chunks >= 1
        if self.strategy == "split-k":
            if not divisible:
                raise PlmrError(
                    f"neptune-fuse: split-k needs one reduction dimension whose extent "
                    f"the chunk count divides; {nest_name(producer)} has reduction extents "
                    f"{[producer.extents[i] for i in red]} and chunks={self.chunks}"
                )
            return "split-k"
        if self.strategy == "rolling" or self.chunks < 2:
            return "rolling"
        queries = producer.parallel_extents[-1] if producer.parallel_extents else 1
        decode = queries <= 4 and extent >= 16 * queries and divisible
        return "split-k" if decode else "rolling"

    # -- step 4: tidying fused nests -----------------------------------------------------

    def _tidy(self, nest: NestOp) -> None:
        body = nest.body.block
        N.hoist_invariants(nest)
        N.cse(body)
        points = math.prod(nest.extents)
        for op in list(body.ops):
            if not isinstance(op, ReadOp) or op.parent is None:
                continue
            src = op.source.owner
            if not isinstance(src, NestOp) or src.parent_block() is not self.block:
                continue
            if not src.is_reduction or src in self.fused:
                continue
            if math.prod(src.parallel_extents) != points:
                continue
            if not all(N.only_read(r) for r in src.res):
                continue
            readers = [r for res in src.res for r in N.read_uses(res)]
            if any(r.parent_op() not in self.fused for r in readers):
                continue
            for r in readers:
                N.inline_reduction_read(src, r)
            src.detach()
            src.erase()
        N.hoist_invariants(nest)
        N.cse(body)
        N.dce(body)


@dataclass(frozen=True)
class NeptuneFusePass(ModulePass):
    """
    Fuses reductions that read unfinished reductions (Neptune): rolling update
    (FlashAttention), split-K update (FlashDecoding), with sympy-proved repairs.
    """

    name = "neptune-fuse"

    strategy: str = "auto"
    """`rolling`, `split-k`, or `auto` (split-K for one query and a long reduction)."""

    chunks: int = 4
    """The number of chunks of a split-K update."""

    remarks: bool = True
    """Print the reasons for not fusing to stderr (they are also `loop.remark`s)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.strategy not in STRATEGIES:
            raise PassOptionError(
                f"neptune-fuse: unknown strategy '{self.strategy}' "
                f"(expected one of {', '.join(STRATEGIES)})"
            )
        if self.chunks < 1:
            raise PassOptionError(
                f"neptune-fuse: chunks must be positive, got {self.chunks}"
            )
        for block in N.function_blocks(op):
            Fuser(block, self.strategy, self.chunks, self.remarks).run()
