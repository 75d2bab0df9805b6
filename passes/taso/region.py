"""
The region of a graph program that a substitution changed, cut out as a program of its
own, so that the mesh guard of `taso-substitute` prices the ops the rewrite touched
instead of lowering the whole program twice.

Two versions of a function (before and after the substitutions) are compared op by op:

- **from the inputs**, every value gets a value number from its op (name, properties,
  attributes, result types) and its operands' numbers; an op of one version whose
  results are numbered as the other version's are is *shared* (the unchanged prefix);
- **from the outputs**, the returned values are paired position by position and an
  op pair producing a pair of values with the same op (name, properties, attributes,
  result types, result index) is *matched*, and so are its operands, recursively (the
  unchanged suffix, which reads the rewritten values instead of the original ones).

What is neither shared nor matched is the *changed region* of each version. Around it
the cut keeps a margin of context: the ops producing the region's inputs (which leave
them in the layouts the region reads) and the ops reading its outputs (which pay for
the layouts the region leaves), the same ops on both sides. Constants the cut reads are
copied in (a substitution's concatenated weights fold), other outside values become
arguments of the cut function.

The cut is refused (`None`: the caller prices the whole programs) when the two
versions cannot be paired: different functions or signatures, ops with regions, or a
value of the suffix paired with two different values.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from xdsl.dialects import func
from xdsl.dialects.builtin import FunctionType, ModuleOp
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue

from plmr.dialects import graph


def _head(op: Operation) -> Hashable:
    """What makes two ops the same op, their operands aside."""
    return (
        op.name,
        tuple(sorted(op.properties.items())),
        tuple(sorted(op.attributes.items())),
        tuple(r.type for r in op.results),
    )


def _value_numbers(
    fn: func.FuncOp, table: dict[Hashable, int]
) -> dict[SSAValue, int] | None:
    """Each value of `fn` numbered by its op and operands (None: an op has regions)."""
    numbers: dict[SSAValue, int] = {}
    for i, arg in enumerate(fn.body.block.args):
        numbers[arg] = table.setdefault(("arg", i, arg.type), len(table))
    for op in fn.body.block.ops:
        if op.regions:
            return None
        if isinstance(op, func.ReturnOp):
            continue
        key = (_head(op), tuple(numbers[v] for v in op.operands))
        for j, r in enumerate(op.results):
            numbers[r] = table.setdefault((key, j), len(table))
    return numbers


def _changed(
    before: func.FuncOp, after: func.FuncOp
) -> tuple[set[Operation], set[Operation], dict[Operation, Operation]] | None:
    """
    The ops of `before` and of `after` that are neither shared nor matched, and the
    twin of each other op of `before` in `after`; None if the versions cannot be
    paired.
    """
    table: dict[Hashable, int] = {}
    nb = _value_numbers(before, table)
    na = _value_numbers(after, table)
    if nb is None or na is None:
        return None
    shared_b = set(nb.values()) & set(na.values())
    ret_b, ret_a = before.body.block.last_op, after.body.block.last_op
    if not isinstance(ret_b, func.ReturnOp) or not isinstance(ret_a, func.ReturnOp):
        return None
    if len(ret_b.operands) != len(ret_a.operands):
        return None
    pairs: dict[SSAValue, SSAValue] = {}
    partner: dict[Operation, Operation] = {}
    stack = list(zip(ret_b.operands, ret_a.operands, strict=True))
    while stack:
        vb, va = stack.pop()
        if nb[vb] == na[va]:
            continue
        known = pairs.get(vb)
        if known is not None:
            if known is not va:
                return None
            continue
        pairs[vb] = va
        ob, oa = vb.owner, va.owner
        if not isinstance(ob, Operation) or not isinstance(oa, Operation):
            continue
        if _head(ob) != _head(oa) or len(ob.operands) != len(oa.operands):
            continue
        if ob.results.index(vb) != oa.results.index(va):
            continue
        if partner.setdefault(ob, oa) is not oa:
            return None
        stack.extend(zip(ob.operands, oa.operands, strict=True))
    if len(set(partner.values())) != len(partner):
        return None

    def region(fn: func.FuncOp, numbers: dict[SSAValue, int], matched: set[Operation]):
        return {
            op
            for op in fn.body.block.ops
            if not isinstance(op, func.ReturnOp)
            and op not in matched
            and not all(numbers[r] in shared_b for r in op.results)
        }

    ops_b = region(before, nb, set(partner))
    ops_a = region(after, na, set(partner.values()))
    # Each op outside the regions has its twin on the other side: its partner in the
    # suffix, or the op of the prefix that numbers its results alike.
    by_number = {
        na[op.results[0]]: op
        for op in after.body.block.ops
        if op.results and op not in ops_a
    }
    twin = dict(partner)
    for op in before.body.block.ops:
        if op.results and op not in ops_b and op not in twin:
            other = by_number.get(nb[op.results[0]])
            if other is None:
                return None
            twin[op] = other
    return ops_b, ops_a, twin


def _with_margin(ops: set[Operation]) -> set[Operation]:
    """`ops` with the producers of their inputs and the readers of their outputs."""
    out = set(ops)
    for op in ops:
        for v in op.operands:
            if isinstance(v.owner, Operation):
                out.add(v.owner)
        for r in op.results:
            for use in r.uses:
                if not isinstance(use.operation, func.ReturnOp):
                    out.add(use.operation)
    return out


def _cut(fn: func.FuncOp, ops: set[Operation]) -> func.FuncOp:
    """A function computing `ops` of `fn` (in order) from its outside values."""
    block = Block()
    values: dict[SSAValue, SSAValue] = {}
    body: list[Operation] = []
    for op in fn.body.block.ops:
        if op not in ops:
            continue
        operands: list[SSAValue] = []
        for v in op.operands:
            mapped = values.get(v)
            if mapped is None:
                owner = v.owner
                if isinstance(owner, graph.ConstantOp):
                    constant = owner.clone()
                    body.append(constant)
                    mapped = constant.results[0]
                else:
                    mapped = block.insert_arg(v.type, len(block.args))
                    mapped.name_hint = v.name_hint
                values[v] = mapped
            operands.append(mapped)
        clone = op.clone()
        clone.operands = operands
        for old, new in zip(op.results, clone.results, strict=True):
            new.name_hint = old.name_hint
            values[old] = new
        body.append(clone)
    outputs = [
        values[r]
        for op in fn.body.block.ops
        if op in ops
        for r in op.results
        if any(use.operation not in ops for use in r.uses)
    ]
    block.add_ops([*body, func.ReturnOp(*outputs)])
    inputs: Sequence[Attribute] = [a.type for a in block.args]
    results: Sequence[Attribute] = [v.type for v in outputs]
    return func.FuncOp(
        fn.sym_name.data, FunctionType.from_lists(inputs, results), Region(block)
    )


MARGIN = 2
"""Ops of context kept around the changed ones, in steps along operands and uses."""


def changed_regions(
    before: ModuleOp, after: ModuleOp, margin: int = MARGIN
) -> tuple[ModuleOp, ModuleOp] | None:
    """
    The changed regions of `after` against `before` (see the module docstring), one
    function per changed function, as two modules; None if the versions cannot be
    paired (the caller prices the whole programs). Neither module is changed.
    """
    fns_b = [op for op in before.ops if isinstance(op, func.FuncOp)]
    fns_a = [op for op in after.ops if isinstance(op, func.FuncOp)]
    if [f.sym_name.data for f in fns_b] != [f.sym_name.data for f in fns_a]:
        return None
    cut_b: list[Operation] = []
    cut_a: list[Operation] = []
    for fb, fa in zip(fns_b, fns_a, strict=True):
        if fb.function_type != fa.function_type or not fb.body.blocks:
            return None
        changed = _changed(fb, fa)
        if changed is None:
            return None
        ops_b, ops_a, twin = changed
        if not ops_b and not ops_a:
            continue
        with_b, with_a = set(ops_b), set(ops_a)
        for _ in range(margin):
            with_b, with_a = _with_margin(with_b), _with_margin(with_a)
            # The margin is the same ops on both sides.
            if any(op not in twin for op in with_b - ops_b):
                return None
            with_a |= {twin[op] for op in with_b - ops_b}
            with_b |= {b for b, a in twin.items() if a in with_a - ops_a}
        cut_b.append(_cut(fb, with_b))
        cut_a.append(_cut(fa, with_a))
    return ModuleOp(cut_b), ModuleOp(cut_a)


__all__ = ["changed_regions"]
