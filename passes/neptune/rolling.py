"""
The rolling update of `neptune-fuse` (FlashAttention's recurrence): the reduction runs
once, carrying every accumulator, and repairs the reader's partial results each step.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from xdsl.builder import Builder, ImplicitBuilder
from xdsl.dialects import arith
from xdsl.dialects.builtin import (
    AnyFloat,
    DenseIntOrFPElementsAttr,
    IndexType,
    TensorType,
)
from xdsl.ir import Attribute, Block, BlockArgument, Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from plmr.dialects.loop import (
    NestOp,
    ReadOp,
    YieldOp,
    build_nest,
    value_element,
)
from plmr.passes.neptune import nests as N
from plmr.passes.neptune.fusion import (
    Match,
    P,
    Refused,
    Split,
    Term,
    constant_value,
    emit_repair,
    identity_element,
    nest_name,
    top_op,
    value_name,
)
from plmr.passes.neptune.repair import Repair, RepairRefused, derive_repair
from plmr.passes.neptune.symbolic import Expr, Symbol, sp, to_sympy


class RollingUpdate:
    """The rolling update of `neptune-fuse`: one nest carries every accumulator."""

    def __init__(self, block: Block, strategy: str, chunks: int, remarks: bool):
        self.block = block
        self.strategy = strategy
        self.chunks = chunks
        self.remarks = remarks
        self.fused: list[NestOp] = []
        self.splits: list[Split] = []

    def _derive(self, term: Term, match: Match) -> tuple[Repair, list[int], Expr]:
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
                raise Refused(
                    f"the term of {nest_name(term.nest)} uses the unfinished "
                    f"{nest_name(match.producer)} through '{what}', which the repair "
                    "derivation does not model"
                )
            if v not in symbols:
                symbols[v] = fresh(v, f"u{len(symbols)}")
            return symbols[v]

        g = to_sympy(term.g, leaf)
        try:
            repair = derive_repair(g, xs, term.kind)
        except RepairRefused as e:
            raise Refused(
                f"not fused into the reduction computing {nest_name(match.producer)}: "
                f"{e.reason}"
            ) from e
        return repair, order, g

    def _fuse_rolling(
        self, producer: NestOp, term: Term, match: Match
    ) -> tuple[NestOp, Repair, list[int]]:
        """
        Fuses `term.nest` into `producer` (rolling update); returns the new nest, the
        repair and which producer results the repair's unfinished values are.
        """
        target = term.nest
        repair, order, _ = self._derive(term, match)
        for k in order:
            if isinstance(producer.yield_op.values.types[k], TensorType):
                raise Refused(
                    f"{nest_name(target)} reads the tensor-valued unfinished result "
                    f"{value_name(producer.res[k])}"
                )
        identity = identity_element(term.kind, value_element(target.inits[0].type))
        if constant_value(target.inits[0]) != identity:
            raise Refused(
                f"the reduction computing {nest_name(target)} does not start from the "
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
        Rewriter.replace_op(target, [], [result])
        return fused, repair, order

    def _update(
        self,
        term: Term,
        repair: Repair,
        t: SSAValue,
        old: Sequence[SSAValue],
        new: Sequence[SSAValue],
        mapping: dict[SSAValue, SSAValue],
    ) -> SSAValue:
        """`h(t, old, new) ⊕ g` (under the current implicit builder)."""
        g = mapping.get(term.g, term.g)
        h = emit_repair(repair, term.kind, t, old, new)
        return type(term.combine)(h, g).results[0]  # pyright: ignore[reportCallIssue]

    def _init(self, init: SSAValue, acc_type: Attribute, elt: Attribute) -> SSAValue:
        """The initial value of a (possibly tensor-valued) accumulator."""
        if not isinstance(acc_type, TensorType):
            return init
        value = constant_value(init)
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
        tops = [top_op(op, self.block) for op in uses]
        if all(op is target or N.position(op) > N.position(target) for op in tops):
            return target
        raise Refused(
            f"{nest_name(target)} reads values computed after {nest_name(producer)}, which is "
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
        Rewriter.replace_op(old, [], list(new.res[: len(old.res)]))
        if old in self.fused:
            self.fused.remove(old)
        for split in self.splits:
            if split.loc is old:
                split.loc = new
        self.fused.append(new)
