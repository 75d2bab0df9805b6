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
from dataclasses import dataclass, field
from typing import cast

from xdsl.builder import Builder, ImplicitBuilder
from xdsl.context import Context
from xdsl.dialects import arith
from xdsl.dialects.builtin import (
    AnyFloat,
    DenseIntOrFPElementsAttr,
    FloatAttr,
    IndexType,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    TensorType,
)
from xdsl.ir import Attribute, Block, BlockArgument, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint

from plmr.dialects.loop import (
    REMARK_ATTR,
    IteratorKind,
    NestOp,
    ReadOp,
    YieldOp,
    build_nest,
    value_element,
)
from plmr.errors import PlmrError
from plmr.passes.neptune import nests as N
from plmr.passes.neptune.repair import Repair, RepairRefused, derive_repair
from plmr.passes.neptune.symbolic import Expr, Symbol, emit, sp, to_sympy
from plmr.runtime.loop_ops import combiner_of

P = IteratorKind.PARALLEL
R = IteratorKind.REDUCTION

STRATEGIES = ("auto", "rolling", "split-k")

_KIND_OF: dict[type[Operation], str] = {
    arith.AddfOp: "add",
    arith.MulfOp: "mul",
    arith.MaximumfOp: "max",
    arith.MinimumfOp: "min",
}


class _Refused(Exception):
    """Fusion of one pair is not possible; the reason becomes a remark."""


@dataclass
class _Term:
    """The update `acc ⊕ g` of a single-result reduction nest."""

    nest: NestOp
    combine: Operation
    kind: str
    g: SSAValue


def _term(nest: NestOp) -> _Term | None:
    if len(nest.res) != 1:
        return None
    ops = combiner_of(nest)
    if ops is None or type(ops[0]) not in _KIND_OF:
        return None
    comb = ops[0]
    acc = nest.accumulators[0]
    g = comb.operands[1] if comb.operands[0] is acc else comb.operands[0]
    return _Term(nest, comb, _KIND_OF[type(comb)], g)


@dataclass
class _Match:
    """How a target nest reads the results of an unfinished producer nest."""

    producer: NestOp
    reads: list[ReadOp]
    sigma: dict[int, int]
    """Producer parallel position -> target dimension."""


@dataclass
class _Split:
    """A split-K group: the chunk-local fused nest and the global combine nests."""

    loc: NestOp
    chunks: int
    extent: int
    partial: dict[SSAValue, int] = field(default_factory=dict[SSAValue, int])
    """Global result -> index of its chunk-local partial among `loc`'s results."""


def _identity(kind: str, elt: Attribute) -> float:
    if kind == "add":
        return 0.0
    if kind == "mul":
        return 1.0
    import numpy as np

    bits = elt.bitwidth if isinstance(elt, AnyFloat) else 32
    dtype = {16: np.float16, 64: np.float64}.get(bits, np.float32)
    info = np.finfo(dtype)
    return float(info.min if kind == "max" else info.max)


def _constant_value(v: SSAValue) -> float | None:
    op = v.owner
    if isinstance(op, arith.ConstantOp) and isinstance(op.value, FloatAttr):
        return op.value.value.data
    return None


class Fuser:
    """Fuses the reduction chains of one function body."""

    def __init__(self, block: Block, strategy: str, chunks: int, remarks: bool):
        self.block = block
        self.strategy = strategy
        self.chunks = chunks
        self.remarks = remarks
        self.fused: list[NestOp] = []
        self.splits: list[_Split] = []

    # -- driver ---------------------------------------------------------------------

    def run(self) -> None:
        N.hoist_constants(self.block)
        N.inline_maps(self.block)
        if self._delay_normalisation():
            N.inline_maps(self.block)
        for nest in N.top_nests(self.block):
            if nest.parent is None or not nest.is_reduction or nest in self.fused:
                continue
            try:
                self._fuse_reader(nest)
            except _Refused as e:
                self.remark(nest, str(e))
        for nest in list(self.fused):
            if nest.parent is not None:
                self._tidy(nest)
        N.inline_maps(self.block)
        N.dce(self.block)

    def remark(self, nest: NestOp, message: str) -> None:
        nest.attributes[REMARK_ATTR] = StringAttr(message)
        if self.remarks:
            print(f"neptune-fuse: remark: {message}", file=sys.stderr)

    # -- step 2: delay normalisation -------------------------------------------------

    def _delay_normalisation(self) -> bool:
        changed = False
        for nest in N.top_nests(self.block):
            term = _term(nest)
            if term is None or term.kind != "add":
                continue
            changed |= self._pull_out_factor(term)
        return changed

    def _pull_out_factor(self, term: _Term) -> bool:
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
        factor = sp.Mul(*fixed)
        reads_reduction = any(
            self._reads_reduction(leaves[s], nest)
            for s in factor.free_symbols
            if isinstance(s, sp.Symbol)
        )
        if not reads_reduction:
            return False
        elt = value_element(nest.res.types[0])
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
            _clone_slice(body_ops, needed, mapping)
            env = {s: mapping.get(v, v) for s, v in leaves.items() if v in needed}
            total = sp.Symbol("total", real=True)
            env[total] = ReadOp(result, list(d)).result
            return [emit(total * factor, env, elt)]

        body_ops = list(nest.body.block.ops)
        with ImplicitBuilder(Builder(InsertPoint.after(nest))):
            scaled = build_nest(extents, [P] * len(extents), [], scale).res[0]
        result.replace_uses_with_if(
            scaled, lambda use: not _inside(use.operation, scaled.owner)
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
        term = _term(target)
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
            raise _Refused(
                f"the reduction computing {_name(target)} reads several unfinished "
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

    def _matches(self, target: NestOp) -> list[_Match]:
        """The unfinished producers `target` reads, and how."""
        red_extents = [target.extents[i] for i in target.reduction_dims]
        glob = {v for s in self.splits for v in s.partial}
        found: dict[NestOp, _Match] = {}
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
                raise _Refused(
                    f"the reduction computing {_name(target)} reads an unfinished result "
                    "inside a nested nest"
                )
            match = found.setdefault(src, _Match(src, [], sigma))
            if match.sigma != sigma:
                raise _Refused(
                    f"the reduction computing {_name(target)} reads {_name(src)} at "
                    "different points"
                )
            match.reads.append(op)
        for src in unaligned & set(found):
            # Fused, this read would see the producer's unfinished result.
            raise _Refused(
                f"the reduction computing {_name(target)} reads {_name(src)} at "
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
            if src.parallel_extents[p] == 1 and _is_zero(idx):
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

    def _split_of(self, matches: Sequence[_Match]) -> _Split | None:
        splits = {
            id(s): s for m in matches for s in self.splits if m.reads[0].source in s.partial
        }
        if not splits:
            return None
        if len(splits) != 1 or any(
            not any(r.source in s.partial for s in splits.values() for r in m.reads)
            for m in matches
        ):
            raise _Refused("the reduction reads unfinished results of different groups")
        return next(iter(splits.values()))

    def _choose(self, producer: NestOp) -> str:
        red = producer.reduction_dims
        extent = producer.extents[red[0]] if len(red) == 1 else 0
        divisible = extent > 0 and extent % self.chunks == 0 and extent // self.chunks >= 1
        if self.strategy == "split-k":
            if not divisible:
                raise PlmrError(
                    f"neptune-fuse: split-k needs one reduction dimension whose extent "
                    f"the chunk count divides; {_name(producer)} has reduction extents "
                    f"{[producer.extents[i] for i in red]} and chunks={self.chunks}"
                )
            return "split-k"
        if self.strategy == "rolling" or self.chunks < 2:
            return "rolling"
        queries = producer.parallel_extents[-1] if producer.parallel_extents else 1
        decode = queries <= 4 and extent >= 16 * queries and divisible
        return "split-k" if decode else "rolling"

    # -- rolling update ---------------------------------------------------------------

    def _derive(self, term: _Term, match: _Match) -> tuple[Repair, list[int], Expr]:
        """The repair of `term` against the producer results it reads."""
        body = term.nest.body.block
        x_reads: dict[SSAValue, ReadOp] = {r.result: r for r in match.reads}
        tainted = N.depends_on(body, x_reads)
        symbols: dict[SSAValue, Symbol] = {}
        order: list[int] = []
        xs: list[Symbol] = []
        results = list(match.producer.res)
        names: set[str] = set()

        def fresh(v: SSAValue, fallback: str) -> Symbol:
            """A symbol named after the value (or the tensor it reads), for messages."""
            owner = v.owner
            base = v.name_hint or (
                owner.source.name_hint if isinstance(owner, ReadOp) else None
            )
            name = base or fallback
            while name in names:
                name += "'"
            names.add(name)
            return sp.Symbol(name, real=True)

        def leaf(v: SSAValue) -> Expr:
            if v in x_reads:
                k = N.position_of(results, x_reads[v].source)
                if k not in order:
                    order.append(k)
                    xs.append(fresh(results[k], f"x{k}"))
                return xs[order.index(k)]
            if v in tainted:
                op = v.owner
                what = op.name if isinstance(op, Operation) else "a block argument"
                raise _Refused(
                    f"the term of {_name(term.nest)} uses the unfinished "
                    f"{_name(match.producer)} through '{what}', which the repair "
                    "derivation does not model"
                )
            if v not in symbols:
                symbols[v] = fresh(v, f"u{len(symbols)}")
            return symbols[v]

        g = to_sympy(term.g, leaf)
        try:
            repair = derive_repair(g, xs, term.kind)
        except RepairRefused as e:
            raise _Refused(
                f"not fused into the reduction computing {_name(match.producer)}: "
                f"{e.reason}"
            ) from e
        return repair, order, g

    def _fuse_rolling(
        self, producer: NestOp, term: _Term, match: _Match
    ) -> tuple[NestOp, Repair, list[int]]:
        """
        Fuses `term.nest` into `producer` (rolling update); returns the new nest, the
        repair and which producer results the repair's unfinished values are.
        """
        target = term.nest
        repair, order, _ = self._derive(term, match)
        for k in order:
            if isinstance(producer.yield_op.values.types[k], TensorType):
                raise _Refused(
                    f"{_name(target)} reads the tensor-valued unfinished result "
                    f"{_name_value(producer.res[k])}"
                )
        identity = _identity(term.kind, value_element(target.inits[0].type))
        if _constant_value(target.inits[0]) != identity:
            raise _Refused(
                f"the reduction computing {_name(target)} does not start from the "
                f"identity of {term.kind}"
            )
        where = self._placement(producer, target)
        sigma = match.sigma
        image = set(sigma.values())
        extra = [d for d in target.parallel_dims if d not in image]
        elt = value_element(target.accumulators[0].type)
        extra_extents = [target.extents[d] for d in extra]
        acc_type: Attribute = TensorType(elt, extra_extents) if extra else elt
        with ImplicitBuilder(Builder(InsertPoint.before(where))):
            init = self._init(target.inits[0], acc_type, elt)
        n_prod = len(producer.res)
        block = Block(arg_types=[*producer.body.block.arg_types, acc_type])
        old_args = list(producer.body.block.args)
        mapping_p: dict[SSAValue, SSAValue] = dict(zip(old_args, block.args, strict=False))
        for old_arg, new_arg in zip(old_args, block.args, strict=False):
            new_arg.name_hint = old_arg.name_hint
        block.args[-1].name_hint = target.accumulators[0].name_hint
        with ImplicitBuilder(block):
            new_vals = N.clone_body(producer, mapping_p)
            mapping_t: dict[SSAValue, SSAValue] = {}
            for p, d in sigma.items():
                mapping_t[target.dims[d]] = block.args[producer.parallel_dims[p]]
            for a, b in zip(target.reduction_dims, producer.reduction_dims, strict=True):
                mapping_t[target.dims[a]] = block.args[b]
            results = list(producer.res)
            for r in match.reads:
                mapping_t[r.result] = new_vals[N.position_of(results, r.source)]
            old = [block.args[producer.rank + k] for k in order]
            new = [new_vals[k] for k in order]
            t_arg = block.args[-1]
            skip = [*match.reads, term.combine]
            if not extra:
                N.clone_body(target, mapping_t, skip)
                new_acc = self._update(term, repair, t_arg, old, new, mapping_t)
            else:
                inner = Block(arg_types=[IndexType()] * len(extra))
                with ImplicitBuilder(inner):
                    for d, arg in zip(extra, inner.args, strict=True):
                        mapping_t[target.dims[d]] = arg
                    N.clone_body(target, mapping_t, skip)
                    t_el = ReadOp(t_arg, list(inner.args)).result
                    YieldOp(self._update(term, repair, t_el, old, new, mapping_t))
                new_acc = NestOp(
                    extra_extents, [P] * len(extra), [], [acc_type], inner
                ).res[0]
            YieldOp(*new_vals, new_acc)
        layout = [sigma[p] for p in range(len(producer.parallel_dims))] + extra
        res_type: Attribute = target.res.types[0]
        if layout:
            res_type = TensorType(elt, [target.extents[d] for d in layout])
        fused = NestOp(
            producer.extents,
            producer.kinds,
            [*producer.inits, init],
            [*producer.res.types, res_type],
            block,
        )
        Builder(InsertPoint.before(where)).insert(fused)
        for i in range(n_prod):
            fused.res[i].name_hint = producer.res[i].name_hint
        fused.res[n_prod].name_hint = target.res[0].name_hint
        for res, acc in zip(fused.res, fused.accumulators, strict=True):
            if res.name_hint:
                acc.name_hint = f"{res.name_hint}_acc"
        result: SSAValue = fused.res[n_prod]
        if layout != list(target.parallel_dims):
            result = self._permute(fused, n_prod, layout, target)
        target.res[0].replace_all_uses_with(result)
        target.detach()
        target.erase()
        return fused, repair, order

    def _update(
        self,
        term: _Term,
        repair: Repair,
        t: SSAValue,
        old: Sequence[SSAValue],
        new: Sequence[SSAValue],
        mapping: dict[SSAValue, SSAValue],
    ) -> SSAValue:
        """`h(t, old, new) ⊕ g` (under the current implicit builder)."""
        g = mapping.get(term.g, term.g)
        h = _emit_repair(repair, term.kind, t, old, new)
        return type(term.combine)(h, g).results[0]  # pyright: ignore[reportCallIssue]

    def _init(self, init: SSAValue, acc_type: Attribute, elt: Attribute) -> SSAValue:
        """The initial value of a (possibly tensor-valued) accumulator."""
        if not isinstance(acc_type, TensorType):
            return init
        value = _constant_value(init)
        assert value is not None
        tensor_type = cast(TensorType[AnyFloat], acc_type)
        return arith.ConstantOp(
            DenseIntOrFPElementsAttr.from_list(tensor_type, [value])
        ).result

    def _placement(self, producer: NestOp, target: NestOp) -> NestOp:
        """Where the fused nest can go: at the producer, or else at the target."""
        produced = set(producer.res)
        outside = N.external_values(target) - produced
        if all(N.defined_before(v, producer) for v in outside):
            return producer
        uses = [u.operation for r in producer.res for u in r.uses]
        tops = [_top(op, self.block) for op in uses]
        if all(op is target or N.position(op) > N.position(target) for op in tops):
            return target
        raise _Refused(
            f"{_name(target)} reads values computed after {_name(producer)}, which is "
            "read before it: the nests cannot be placed together"
        )

    def _permute(
        self, fused: NestOp, k: int, layout: list[int], target: NestOp
    ) -> SSAValue:
        """A map nest giving result `k` of `fused` the target's dimension order."""
        order = list(target.parallel_dims)
        extents = [target.extents[d] for d in order]
        src = fused.res[k]

        def body(d: Sequence[BlockArgument], a: Sequence[BlockArgument]) -> list[SSAValue]:
            idx = [d[order.index(dim)] for dim in layout]
            return [ReadOp(src, idx).result]

        with ImplicitBuilder(Builder(InsertPoint.after(fused))):
            return build_nest(extents, [P] * len(extents), [], body).res[0]

    def _replace_fused(self, old: NestOp, new: NestOp) -> None:
        for i, r in enumerate(old.res):
            r.replace_all_uses_with(new.res[i])
        if old in self.fused:
            self.fused.remove(old)
        for split in self.splits:
            if split.loc is old:
                split.loc = new
        self.fused.append(new)
        old.detach()
        old.erase()

    # -- split-K update ----------------------------------------------------------------

    def _privatize(self, nest: NestOp, chunks: int) -> NestOp:
        """`nest` with its reduction split into `chunks` parallel chunks (built, not inserted)."""
        (rj,) = nest.reduction_dims
        extent = nest.extents[rj]
        size = extent // chunks
        par = nest.parallel_dims
        extents = [*(nest.extents[i] for i in par), chunks, size]
        kinds = [P] * (len(par) + 1) + [R]
        block = Block(arg_types=[IndexType()] * len(extents) + list(nest.inits.types))
        mapping: dict[SSAValue, SSAValue] = {
            nest.dims[i]: block.args[k] for k, i in enumerate(par)
        }
        c, j1 = block.args[len(par)], block.args[len(par) + 1]
        for acc, arg in zip(nest.accumulators, block.args[len(extents) :], strict=True):
            mapping[acc] = arg
        for k, i in enumerate(par):
            block.args[k].name_hint = nest.dims[i].name_hint
        c.name_hint, j1.name_hint = "chunk", nest.dims[rj].name_hint
        for acc, arg in zip(nest.accumulators, block.args[len(extents) :], strict=True):
            arg.name_hint = acc.name_hint
        with ImplicitBuilder(block):
            base = arith.MuliOp(c, N.index_constant(size)).result
            mapping[nest.dims[rj]] = arith.AddiOp(base, j1).result
            YieldOp(*N.clone_body(nest, mapping))
        types = [
            TensorType(value_element(t), [*nest.parallel_extents, chunks])
            for t in nest.yield_op.values.types
        ]
        return NestOp(extents, kinds, list(nest.inits), types, block)

    def _start_split(self, producer: NestOp) -> _Split:
        """Privatises `producer` and adds the global combine of its chunk results."""
        term = _term(producer)
        if term is None:
            raise _Refused(f"{_name(producer)} is not a simple reduction to split")
        chunks = self.chunks
        (rj,) = producer.reduction_dims
        loc = self._privatize(producer, chunks)
        Builder(InsertPoint.before(producer)).insert(loc)
        loc.res[0].name_hint = (producer.res[0].name_hint or "r") + "_chunk"
        npar = len(producer.parallel_dims)
        kind_op = type(term.combine)

        def body(d: Sequence[BlockArgument], a: Sequence[BlockArgument]) -> list[SSAValue]:
            part = ReadOp(loc.res[0], list(d)).result
            return [kind_op(a[0], part).results[0]]  # pyright: ignore[reportCallIssue]

        with ImplicitBuilder(Builder(InsertPoint.before(producer))):
            glob = build_nest(
                [*producer.parallel_extents, chunks],
                [P] * npar + [R],
                [producer.inits[0]],
                body,
                scalar_results=not isinstance(producer.res.types[0], TensorType),
            )
        glob.res[0].name_hint = producer.res[0].name_hint
        producer.res[0].replace_all_uses_with(glob.res[0])
        producer.detach()
        producer.erase()
        split = _Split(loc, chunks, producer.extents[rj], {glob.res[0]: 0})
        self.splits.append(split)
        self.fused.append(loc)
        return split

    def _extend_split(self, split: _Split, term: _Term, matches: list[_Match]) -> None:
        """Fuses `term.nest` into a split group: chunk-local rolling update + combine."""
        target = term.nest
        if len(target.reduction_dims) != 1:
            raise _Refused(f"{_name(target)} has several reduction dimensions")
        sigma = matches[0].sigma
        if any(m.sigma != sigma for m in matches):
            raise _Refused(
                f"{_name(target)} reads the unfinished results at different points"
            )
        local = self._privatize(target, split.chunks)
        Builder(InsertPoint.before(target)).insert(local)
        c = local.dims[len(target.parallel_dims)]
        # Chunk-local reads of the chunk-local partials.
        par_pos = {d: k for k, d in enumerate(target.parallel_dims)}
        loc_reads: list[ReadOp] = []
        for op in list(local.body.walk()):
            if isinstance(op, ReadOp) and op.source in split.partial:
                k = split.partial[op.source]
                new = ReadOp(split.loc.res[k], [*op.indices, c])
                Builder(InsertPoint.before(op)).insert(new)
                op.result.replace_all_uses_with(new.result)
                op.detach()
                op.erase()
                loc_reads.append(new)
        local_term = _term(local)
        assert local_term is not None
        local_sigma = {p: par_pos[d] for p, d in sigma.items()} | {
            len(sigma): len(target.parallel_dims)
        }
        match = _Match(split.loc, loc_reads, local_sigma)
        old_loc = split.loc
        fused, repair, order = self._fuse_rolling(old_loc, local_term, match)
        self._replace_fused(old_loc, fused)
        k_t = len(fused.res) - 1
        fused.res[k_t].name_hint = f"{target.res[0].name_hint or 'r'}_chunk"
        # The global combine: acc ⊕ h(t_c, x_c, x).
        partial_of = {k: v for v, k in split.partial.items()}
        globals_ = [partial_of[k] for k in order]
        npar = len(target.parallel_dims)
        image = set(sigma.values())
        extra = [d for d in target.parallel_dims if d not in image]
        layout = [sigma[p] for p in range(len(sigma))]
        kind_op = type(term.combine)

        def body(d: Sequence[BlockArgument], a: Sequence[BlockArgument]) -> list[SSAValue]:
            dim = {t: d[i] for i, t in enumerate(target.parallel_dims)}
            cc = d[npar]
            t_idx = [dim[x] for x in layout] + [cc] + [dim[x] for x in extra]
            t_c = ReadOp(fused.res[k_t], t_idx).result
            x_idx = [dim[x] for x in layout]
            old = [ReadOp(fused.res[k], [*x_idx, cc]).result for k in order]
            new = [ReadOp(g, x_idx).result for g in globals_]
            h = _emit_repair(repair, term.kind, t_c, old, new)
            return [kind_op(a[0], h).results[0]]  # pyright: ignore[reportCallIssue]

        with ImplicitBuilder(Builder(InsertPoint.before(target))):
            glob = build_nest(
                [*target.parallel_extents, split.chunks],
                [P] * npar + [R],
                [target.inits[0]],
                body,
                scalar_results=not isinstance(target.res.types[0], TensorType),
            )
        glob.res[0].name_hint = target.res[0].name_hint
        target.res[0].replace_all_uses_with(glob.res[0])
        target.detach()
        target.erase()
        split.partial[glob.res[0]] = k_t

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


def _emit_repair(
    repair: Repair, kind: str, t: SSAValue, old: Sequence[SSAValue], new: Sequence[SSAValue]
) -> SSAValue:
    """`h(t, old, new)` as ops; guarded where `h` divides by an unfinished value."""
    if repair.is_identity:
        return t
    env: dict[Symbol, SSAValue] = {repair.t: t}
    env.update(zip(repair.old, old, strict=True))
    env.update(zip(repair.new, new, strict=True))
    elt = t.type
    h = emit(repair.h, env, elt)
    denominator = sp.fraction(sp.together(repair.h))[1]
    if kind in ("add", "mul") and denominator.free_symbols & set(repair.old):
        # Neptune's `Select(j > 0, h, t)`: the first partial needs no repair, and h
        # may divide by the initial value there.
        ident = arith.ConstantOp(FloatAttr(_identity(kind, elt), elt)).result  # pyright: ignore
        first = arith.CmpfOp(t, ident, "oeq").result
        h = arith.SelectOp(first, t, h).result
    return h


def _is_zero(v: SSAValue) -> bool:
    op = v.owner
    return (
        isinstance(op, arith.ConstantOp)
        and isinstance(op.value, IntegerAttr)
        and op.value.value.data == 0
    )


def _inside(op: Operation, ancestor: Operation | None) -> bool:
    current: Operation | None = op
    while current is not None:
        if current is ancestor:
            return True
        current = current.parent_op()
    return False


def _top(op: Operation, block: Block) -> Operation:
    """The ancestor of `op` (or `op`) that sits directly in `block`."""
    while op.parent_block() is not block:
        parent = op.parent_op()
        assert parent is not None
        op = parent
    return op


def _clone_slice(
    ops: Sequence[Operation], values: Sequence[SSAValue], mapping: dict[SSAValue, SSAValue]
) -> None:
    """Clones, in order, the ops of `ops` that `values` depend on (implicit builder)."""
    needed: set[Operation] = set()
    work = [v.owner for v in values if isinstance(v.owner, Operation)]
    op_set = set(ops)
    while work:
        op = work.pop()
        if op in needed or op not in op_set:
            continue
        needed.add(op)
        for v in N.external_values(op):
            if isinstance(v.owner, Operation):
                work.append(v.owner)
    for op in ops:
        if op in needed:
            N.clone_op(op, mapping)


def _name(nest: NestOp) -> str:
    return _name_value(nest.res[0]) if nest.res else "a nest"


def _name_value(v: SSAValue) -> str:
    return f"%{v.name_hint}" if v.name_hint else "a nest"


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
            raise PlmrError(
                f"neptune-fuse: unknown strategy '{self.strategy}' "
                f"(expected one of {', '.join(STRATEGIES)})"
            )
        if self.chunks < 1:
            raise PlmrError(f"neptune-fuse: chunks must be positive, got {self.chunks}")
        for block in N.function_blocks(op):
            Fuser(block, self.strategy, self.chunks, self.remarks).run()
