"""
`graph-outline-layers`: repeated layers of a graph function become one body function and
one `func.call` per layer, each call passing that layer's weights.

A decoder's layers are the same subgraph up to their weights. The pass lists a
function's computing ops in order (every op but `graph.weight`, `graph.constant` and the
terminator: the *leaves*), finds the longest run of consecutive copies of one sequence
(the most ops covered; then the shortest period, so four layers are four copies and not
two of two; then the earliest start), and checks that the copies are the same subgraph:
every op has the same name, properties, attributes and result types as its counterpart
in the first copy, and an operand defined inside a copy is defined at the same place in
every copy. An operand defined outside its copy (the hidden state from the op or layer
before, a RoPE table computed once, a weight) becomes an argument of the body, one per
distinct tuple of values over the copies; a leaf that is the same in every copy (the
same weight reference, or a constant of equal value) is cloned into the body instead.
A result that is used outside its copy becomes a result of the body.

```mlir
%r0 = func.call @main.layer(%x, %w0) {plmr.layer = 0 : i64} : (...) -> tensor<4x8xf32>
%r1 = func.call @main.layer(%r0, %w1) {plmr.layer = 1 : i64} : (...) -> tensor<4x8xf32>
```

When no run repeats in the function's order, the same search runs on the order in which
every op follows its latest operand at once (`hoisted_order`): an exporter that computes
a value all layers share inside the first layer (a RoPE table unsqueezed, a padding mask)
leaves that value out of the other layers, and this order moves it before the layers.

Copies that differ in structure are not merged: the function stays as it is. `layers=N`
asks for exactly N copies and is an error when the function does not hold them;
`min-ops` is the smallest body outlined (8 ops).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, StringAttr, i64
from xdsl.ir import Block, Operation, OpResult, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from plmr.dialects import graph
from plmr.errors import PassOptionError, PlmrError
from plmr.target.interface import LAYER_ATTR

BODY_ATTR = "plmr.layer_body"
"""Marks a function made by graph-outline-layers (unit attribute-like: the layer count)."""
LEAVES = (graph.ConstantOp, graph.WeightOp)
MAX_TRIES = 8
"""Candidate repeats checked (most ops covered first) before giving up."""


@dataclass(frozen=True)
class Repeat:
    """`count` copies of `period` computing ops from position `start` of a function."""

    start: int
    period: int
    count: int


def computing_ops(block: Block) -> list[Operation]:
    """The ops of `block` that compute: not leaves, not the terminator."""
    return [op for op in block.ops if not isinstance(op, (*LEAVES, func.ReturnOp))]


def _signature(op: Operation) -> int:
    """A hash of what two copies of an op must share (operands' types, not values)."""
    if op.regions:
        return hash(("unique", id(op)))
    return hash(
        (
            op.name,
            tuple(sorted((k, str(v)) for k, v in op.properties.items())),
            tuple(sorted((k, str(v)) for k, v in op.attributes.items())),
            tuple(str(t) for t in op.result_types),
            tuple(str(t) for t in op.operand_types),
        )
    )


def candidates(ops: list[Operation], min_ops: int) -> list[Repeat]:
    """Runs of >= 2 consecutive copies of >= `min_ops` ops, best first."""
    sigs = np.array([_signature(op) for op in ops], dtype=np.int64)
    n = len(sigs)
    found: list[tuple[int, int, int, Repeat]] = []
    for p in range(max(1, min_ops), n // 2 + 1):
        eq = sigs[: n - p] == sigs[p:]
        m = len(eq)
        idx = np.arange(m)
        # The first mismatch at or after each position: a run of equal pairs up to it.
        stops = np.where(eq, m, idx)
        next_stop = np.minimum.accumulate(stops[::-1])[::-1]
        runs = next_stop - idx
        counts = 1 + runs // p
        cover = np.where(counts >= 2, counts * p, 0)
        best = int(np.argmax(cover))
        if cover[best] == 0:
            continue
        found.append((-int(cover[best]), p, best, Repeat(best, p, int(counts[best]))))
    found.sort(key=lambda c: c[:3])
    return [c[3] for c in found]


def _same_leaf(values: list[SSAValue]) -> Operation | None:
    """The leaf all `values` are (equal weight references or constant values), else None."""
    first = values[0].owner
    if not isinstance(first, LEAVES):
        return None
    for v in values[1:]:
        op = v.owner
        if (
            not isinstance(op, LEAVES)
            or op.name != first.name
            or op.properties != first.properties
            or v.type != values[0].type
        ):
            return None
    return first


def _body_name(values: Sequence[SSAValue], layer0: str) -> str | None:
    """`model.layers.N.mlp.up` from the layers' `model.layers.0.mlp.up`, ..."""
    hints = [v.name_hint for v in values]
    if any(h is None for h in hints):
        return layer0 or None
    parts = [re.split(r"(\d+)", h or "") for h in hints]
    if any(len(p) != len(parts[0]) for p in parts):
        return layer0 or None
    out: list[str] = []
    for i, piece in enumerate(parts[0]):
        column = [p[i] for p in parts]
        out.append(piece if len(set(column)) == 1 else "N")
    return "".join(out)


@dataclass
class _Plan:
    """How the copies map onto one body."""

    slots: list[tuple[int, int]]
    """External operands: (op position in a copy, operand index), one per body argument."""
    leaves: dict[tuple[int, int], Operation]
    """External operands that are the same leaf in every copy (cloned into the body)."""
    outputs: list[tuple[int, int]]
    """Results used outside their copy: (op position, result index)."""


def _plan(blocks: list[list[Operation]]) -> _Plan | None:
    """The body's arguments and results, or None if the copies differ in structure."""
    first = blocks[0]
    where = [{op: j for j, op in enumerate(b)} for b in blocks]
    external: dict[tuple[SSAValue, ...], tuple[int, int]] = {}
    arg_of: dict[tuple[int, int], tuple[int, int]] = {}
    leaves: dict[tuple[int, int], Operation] = {}
    for j, op0 in enumerate(first):
        for b in blocks[1:]:
            op = b[j]
            if (
                op.name != op0.name
                or op.properties != op0.properties
                or op.attributes != op0.attributes
                or list(op.result_types) != list(op0.result_types)
                or len(op.operands) != len(op0.operands)
            ):
                return None
        for m in range(len(op0.operands)):
            values = [b[j].operands[m] for b in blocks]
            inside = [
                where[i].get(v.owner) if isinstance(v.owner, Operation) else None
                for i, v in enumerate(values)
            ]
            if inside[0] is not None or any(k is not None for k in inside):
                if len(set(inside)) != 1 or len({_result_index(v) for v in values}) != 1:
                    return None
                continue
            leaf = _same_leaf(values)
            if leaf is not None:
                leaves[(j, m)] = leaf
                continue
            key = tuple(values)
            arg_of[(j, m)] = external.setdefault(key, (j, m))
    slots = list(dict.fromkeys(arg_of.values()))
    outputs: list[tuple[int, int]] = []
    for j, op0 in enumerate(first):
        for r in range(len(op0.results)):
            for i, b in enumerate(blocks):
                value = b[j].results[r]
                if any(where[i].get(use.operation) is None for use in value.uses):
                    outputs.append((j, r))
                    break
    if not outputs:
        return None
    return _Plan(slots, leaves, outputs)


def _has_layer_weights(blocks: list[list[Operation]], plan: _Plan) -> bool:
    """Whether some argument of the body is a leaf that differs between layers."""
    for j, m in plan.slots:
        if all(isinstance(b[j].operands[m].owner, LEAVES) for b in blocks):
            return True
    return False


def _build_body(name: str, blocks: list[list[Operation]], plan: _Plan) -> func.FuncOp:
    first = blocks[0]
    arg_values = [[b[j].operands[m] for b in blocks] for j, m in plan.slots]
    block = Block(arg_types=[vals[0].type for vals in arg_values])
    for arg, vals in zip(block.args, arg_values, strict=True):
        hint = _body_name(vals, vals[0].name_hint or "")
        if hint:
            arg.name_hint = hint
    mapping: dict[SSAValue, SSAValue] = {}
    slot_arg = dict(zip(plan.slots, block.args, strict=True))
    cloned_leaves: dict[Operation, SSAValue] = {}
    for j, op in enumerate(first):
        operands: list[SSAValue] = []
        for m, v in enumerate(op.operands):
            if v in mapping:
                operands.append(mapping[v])
                continue
            leaf = plan.leaves.get((j, m))
            if leaf is not None:
                if leaf not in cloned_leaves:
                    clone = leaf.clone()
                    block.add_op(clone)
                    cloned_leaves[leaf] = clone.results[0]
                    copies = [b[j].operands[m] for b in blocks]
                    clone.results[0].name_hint = _body_name(copies, v.name_hint or "")
                operands.append(cloned_leaves[leaf])
                continue
            # An argument: the slot that stands for this operand's tuple of values.
            key = tuple(b[j].operands[m] for b in blocks)
            for slot, vals in zip(plan.slots, arg_values, strict=True):
                if tuple(vals) == key:
                    operands.append(slot_arg[slot])
                    break
            else:  # pragma: no cover - every external operand has a slot
                raise AssertionError("operand without a body argument")
        clone = op.clone()
        clone.operands = operands
        block.add_op(clone)
        for r, (old, new) in enumerate(zip(op.results, clone.results, strict=True)):
            mapping[old] = new
            copies = [b[j].results[r] for b in blocks]
            new.name_hint = _body_name(copies, old.name_hint or "")
    results = [mapping[first[j].results[r]] for j, r in plan.outputs]
    block.add_op(func.ReturnOp(*results))
    body = func.FuncOp(
        name,
        (list(block.arg_types), [v.type for v in results]),
        Region(block),
        visibility="private",
    )
    body.attributes[BODY_ATTR] = IntegerAttr(len(blocks), i64)
    return body


def _replace(
    fn: func.FuncOp, body: func.FuncOp, blocks: list[list[Operation]], plan: _Plan
) -> None:
    """One call per copy, after the copy's last op; the copies and unused leaves erased."""
    callee = body.sym_name.data
    used_leaves: set[Operation] = set()
    for i, ops in enumerate(blocks):
        args = [ops[j].operands[m] for j, m in plan.slots]
        call = func.CallOp(callee, args, [t for t in body.function_type.outputs.data])
        call.attributes[LAYER_ATTR] = IntegerAttr(i, i64)
        Rewriter.insert_op(call, InsertPoint.after(ops[-1]))
        members = set(ops)
        for (j, r), new in zip(plan.outputs, call.results, strict=True):
            old = ops[j].results[r]
            if old.name_hint:
                new.name_hint = old.name_hint
            for use in list(old.uses):
                if use.operation not in members:
                    use.operation.operands[use.index] = new
        for op in ops:
            for v in op.operands:
                if isinstance(v.owner, LEAVES):
                    used_leaves.add(v.owner)
        for op in reversed(ops):
            Rewriter.erase_op(op)
    for leaf in used_leaves:
        if not leaf.results[0].uses:
            Rewriter.erase_op(leaf)


def hoisted_order(ops: list[Operation], rounds: int = 4) -> list[Operation]:
    """
    `ops` in a dependence order where every op follows its latest operand at once
    (ties in their original order): an exporter computes a value the layers share (a
    RoPE table unsqueezed, a padding mask) in the first layer that needs it, and this
    order moves it before that layer, so that every layer is the same sequence. Each
    round places the ops after their operands' places in the previous round.
    """
    orig = {op: i for i, op in enumerate(ops)}
    order = ops
    for _ in range(rounds):
        pos = {op: i for i, op in enumerate(order)}

        def key(op: Operation) -> tuple[int, int]:
            defs = [
                pos[v.owner]
                for v in op.operands
                if isinstance(v.owner, Operation) and v.owner in pos
            ]
            return (max(defs, default=-1), orig[op])

        new = sorted(ops, key=key)
        if new == order:
            break
        order = new
    return order


def _reorder(fn: func.FuncOp, order: list[Operation]) -> None:
    """Puts `fn`'s leaves first, then its computing ops in `order`, then the return."""
    block = fn.body.block
    terminator = block.last_op
    assert terminator is not None
    leaves = [op for op in block.ops if isinstance(op, LEAVES)]
    for op in [*leaves, *order]:
        op.detach()
        block.insert_op_before(op, terminator)


def _outline(
    fn: func.FuncOp, module: ModuleOp, ops: list[Operation], min_ops: int, layers: int
) -> tuple[func.FuncOp, list[list[Operation]], _Plan] | None:
    tried = 0
    for rep in candidates(ops, min_ops):
        if layers and rep.count != layers:
            continue
        tried += 1
        if tried > MAX_TRIES:
            break
        blocks = [
            ops[rep.start + i * rep.period : rep.start + (i + 1) * rep.period]
            for i in range(rep.count)
        ]
        plan = _plan(blocks)
        if plan is None or not _has_layer_weights(blocks, plan):
            continue
        name = _free_name(module, f"{fn.sym_name.data}.layer")
        return _build_body(name, blocks, plan), blocks, plan
    return None


def outline_function(
    fn: func.FuncOp, module: ModuleOp, min_ops: int = 8, layers: int = 0
) -> func.FuncOp | None:
    """Outlines `fn`'s repeated layers (see the module docstring); returns the body."""
    ops = computing_ops(fn.body.block)
    found = _outline(fn, module, ops, min_ops, layers)
    if found is None:
        hoisted = hoisted_order(ops)
        if hoisted != ops:
            found = _outline(fn, module, hoisted, min_ops, layers)
            if found is not None:
                _reorder(fn, hoisted)
    if found is not None:
        body, blocks, plan = found
        _replace(fn, body, blocks, plan)
        Rewriter.insert_op(body, InsertPoint.after(fn))
        return body
    if layers:
        raise PlmrError(
            f"graph-outline-layers: @{fn.sym_name.data}: layers={layers} was asked, but "
            f"the function holds no {layers} consecutive copies of one subgraph of at "
            f"least {min_ops} ops that differ only in their weights; drop `layers` to "
            "outline what repeats, or check that every layer has the same structure"
        )
    return None


def _result_index(value: SSAValue) -> int:
    return value.index if isinstance(value, OpResult) else -1


def _free_name(module: ModuleOp, base: str) -> str:
    names: set[str] = set()
    for op in module.ops:
        sym = op.properties.get("sym_name")
        if isinstance(sym, StringAttr):
            names.add(sym.data)
    name, k = base, 1
    while name in names:
        name, k = f"{base}{k}", k + 1
    return name


@dataclass(frozen=True)
class GraphOutlineLayersPass(ModulePass):
    """
    Outlines repeated layers of every graph function into one body function called once
    per layer (see the module docstring): `min-ops` (smallest body, 8), `layers` (the
    number of copies required; 0: whatever repeats).
    """

    name = "graph-outline-layers"

    min_ops: int = 8
    layers: int = 0

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.min_ops < 1:
            raise PassOptionError(f"{self.name}: min-ops must be >= 1, got {self.min_ops}")
        if self.layers < 0 or self.layers == 1:
            raise PassOptionError(
                f"{self.name}: layers must be 0 (any) or >= 2, got {self.layers}"
            )
        fns = [
            f
            for f in op.ops
            if isinstance(f, func.FuncOp)
            and f.body.blocks
            and BODY_ATTR not in f.attributes
        ]
        for fn in fns:
            if any(o.name.startswith("graph.") for o in fn.walk()):
                outline_function(fn, op, self.min_ops, self.layers)


__all__ = [
    "BODY_ATTR",
    "LAYER_ATTR",
    "GraphOutlineLayersPass",
    "Repeat",
    "candidates",
    "computing_ops",
    "hoisted_order",
    "outline_function",
]
