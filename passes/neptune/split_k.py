"""
The split-K update of `neptune-fuse` (FlashDecoding): the reduction is split into
independent chunks, each fused by rolling update, then combined with the repair.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.builder import Builder, ImplicitBuilder
from xdsl.dialects import arith
from xdsl.dialects.builtin import (
    IndexType,
    TensorType,
)
from xdsl.ir import Block, BlockArgument, SSAValue
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
    R,
    Refused,
    Split,
    Term,
    emit_repair,
    nest_name,
    term_of,
)
from plmr.passes.neptune.rolling import RollingUpdate


class SplitKUpdate(RollingUpdate):
    """The split-K update of `neptune-fuse`: chunk-local rolling updates, then a combine."""

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

    def _start_split(self, producer: NestOp) -> Split:
        """Privatises `producer` and adds the global combine of its chunk results."""
        term = term_of(producer)
        if term is None:
            raise Refused(f"{nest_name(producer)} is not a simple reduction to split")
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
        Rewriter.replace_op(producer, [], [glob.res[0]])
        split = Split(loc, chunks, producer.extents[rj], {glob.res[0]: 0})
        self.splits.append(split)
        self.fused.append(loc)
        return split

    def _extend_split(self, split: Split, term: Term, matches: list[Match]) -> None:
        """Fuses `term.nest` into a split group: chunk-local rolling update + combine."""
        target = term.nest
        if len(target.reduction_dims) != 1:
            raise Refused(f"{nest_name(target)} has several reduction dimensions")
        sigma = matches[0].sigma
        if any(m.sigma != sigma for m in matches):
            raise Refused(
                f"{nest_name(target)} reads the unfinished results at different points"
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
                Rewriter.replace_op(op, [], [new.result])
                loc_reads.append(new)
        local_term = term_of(local)
        assert local_term is not None
        local_sigma = {p: par_pos[d] for p, d in sigma.items()} | {
            len(sigma): len(target.parallel_dims)
        }
        match = Match(split.loc, loc_reads, local_sigma)
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
            h = emit_repair(repair, term.kind, t_c, old, new)
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
        Rewriter.replace_op(target, [], [glob.res[0]])
        split.partial[glob.res[0]] = k_t
