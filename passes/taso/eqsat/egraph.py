"""
A saturated e-graph read back from egglog, with the costs of its e-nodes.

`read_egraph` turns egglog's frozen tables into plain classes and nodes (ints), and
`node_costs` prices every node with the wafer cost model: the context the per-op model
needs (operands all constant, a unary op in a matmul's epilogue, a transpose absorbed into
a matmul) is read off the e-graph as an estimate; the extracted graph is then priced
exactly as a whole.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from egglog.bindings import EGraph, Value

from plmr.passes.taso.cost import EPILOGUE_KINDS, FUSIBLE, PRODUCER_KINDS, CostModel
from plmr.passes.taso.eqsat.encode import Keys
from plmr.passes.taso.ops import Params, Shape, param_int, param_ints

CONSTRUCTORS = ("Arg", "Const", "Ident", "N1", "N2", "N3", "N4", "Scale", "Split", "Res")


@dataclass(frozen=True)
class ENode:
    """One e-node: constructor, its integer fields, and child classes."""

    op: str
    fields: tuple[int, ...]
    children: tuple[int, ...]


@dataclass
class Classes:
    """The e-graph as classes of nodes, with shapes, provenance and let-bound globals."""

    nodes: list[ENode] = field(default_factory=lambda: list[ENode]())
    node_class: list[int] = field(default_factory=lambda: list[int]())
    members: dict[int, list[int]] = field(default_factory=lambda: dict[int, list[int]]())
    shapes: dict[int, Shape] = field(default_factory=lambda: dict[int, Shape]())
    via: dict[int, int] = field(default_factory=lambda: dict[int, int]())
    globals: dict[str, int] = field(default_factory=lambda: dict[str, int]())

    def size(self) -> int:
        return len(self.nodes)


def read_egraph(eg: EGraph) -> Classes:
    """The classes and nodes of an egglog e-graph (constructors of `encode.PRELUDE`)."""
    frozen = eg.freeze()
    ids: dict[Value, int] = {}

    def cid(v: Value) -> int:
        found = ids.get(v)
        if found is None:
            found = len(ids)
            ids[v] = found
        return found

    out = Classes()
    # Shape terms: egglog value -> dimensions.
    dims: dict[Value, Shape] = {}
    for name, fn in frozen.functions.items():
        if fn.output_sort == "Shape" and name.startswith("S") and name[1:].isdigit():
            for row in fn.rows:
                dims[row.output] = tuple(eg.value_to_i64(x) for x in row.inputs)
    shape_values: list[tuple[int, Value]] = []
    sh_rows: list[tuple[int, Value]] = []
    for name, fn in frozen.functions.items():
        if name in CONSTRUCTORS:
            for row in fn.rows:
                ints: list[int] = []
                children: list[int] = []
                for v, sort in zip(row.inputs, fn.input_sorts, strict=True):
                    if sort == "i64":
                        ints.append(eg.value_to_i64(v))
                    elif sort == "Shape":
                        shape_values.append((len(out.nodes), v))
                    else:
                        children.append(cid(v))
                c = cid(row.output)
                out.nodes.append(ENode(name, tuple(ints), tuple(children)))
                out.node_class.append(c)
                out.members.setdefault(c, []).append(len(out.nodes) - 1)
        elif name == "sh":
            sh_rows.extend((cid(row.inputs[0]), row.output) for row in fn.rows)
        elif name == "via":
            for row in fn.rows:
                out.via[cid(row.inputs[0])] = eg.value_to_i64(row.output)
        elif name.startswith("$") and not fn.input_sorts and fn.rows:
            out.globals[name] = cid(fn.rows[0].output)
    for c, v in sh_rows:
        out.shapes[c] = dims[v]
    for n, v in shape_values:
        node = out.nodes[n]
        out.nodes[n] = ENode(node.op, (*node.fields, *dims[v]), node.children)
    return out


def node_kind(node: ENode, keys: Keys) -> tuple[str, Params]:
    """The `(kind, params)` of an op node (Arg, Const, Ident and Res are not ops)."""
    if node.op == "Scale":
        return "scale", (keys.factors[node.fields[0]],)
    if node.op == "Split":
        axis, s0, s1 = node.fields
        return "split", (axis, (s0, s1))
    return keys.keys[node.fields[0]]


def split_shapes(params: Params, shape: Shape) -> tuple[Shape, ...]:
    axis = param_int("split", params, 0, "axis")
    sizes = param_ints("split", params, 1, "sizes")
    return tuple(
        tuple(int(s) if i == axis else d for i, d in enumerate(shape)) for s in sizes
    )


@dataclass(frozen=True)
class Priced:
    """Per-node estimated costs (`math.inf`: not usable) and the constant classes."""

    cost: list[float]
    out_shapes: list[tuple[Shape, ...]]
    constant: set[int]


def node_costs(
    g: Classes,
    keys: Keys,
    model: CostModel,
    multi_shapes: Mapping[tuple[str, Params], tuple[Shape, ...]],
    constant_concats_only: bool = False,
    discounts: Mapping[int, tuple[bool, bool]] | None = None,
) -> Priced:
    """
    Prices every node; nodes whose operand shapes are unknown cannot be used. With
    `discounts` (node -> (epilogue, absorbed), the context the input graph gives its own
    nodes), only those nodes run in an epilogue or are absorbed into a matmul; otherwise
    the context is guessed from the e-graph.
    """
    # Constant classes: a constant, or an op of constants only (folded when compiled).
    constant: set[int] = set()
    changed = True
    while changed:
        changed = False
        for n, node in enumerate(g.nodes):
            c = g.node_class[n]
            if c in constant or node.op == "Arg":
                continue
            if node.op in ("Const", "Ident") or (
                node.children and all(ch in constant for ch in node.children)
            ):
                constant.add(c)
                changed = True
    producers = {
        g.node_class[n]
        for n, node in enumerate(g.nodes)
        if node.op.startswith("N") and keys.keys[node.fields[0]][0] in PRODUCER_KINDS
    }
    matmul_users: set[int] = set()
    for n, node in enumerate(g.nodes):
        if node.op == "N2" and keys.keys[node.fields[0]][0] == "matmul":
            matmul_users.update(node.children)
    args = {g.node_class[n] for n, node in enumerate(g.nodes) if node.op == "Arg"}
    costs: list[float] = []
    outs: list[tuple[Shape, ...]] = []
    for n, node in enumerate(g.nodes):
        c = g.node_class[n]
        if node.op in ("Arg", "Const", "Ident", "Res"):
            shape = g.shapes.get(c)
            costs.append(0.0 if shape is not None or node.op == "Res" else math.inf)
            outs.append(() if shape is None else (shape,))
            continue
        in_shapes = [g.shapes.get(ch) for ch in node.children]
        kind, params = node_kind(node, keys)
        if any(s is None for s in in_shapes):
            costs.append(math.inf)
            outs.append(())
            continue
        ins = [s for s in in_shapes if s is not None]
        if node.op == "Split":
            out_shapes = split_shapes(params, ins[0])
        elif c in g.shapes:
            out_shapes = (g.shapes[c],)
        elif (kind, params) in multi_shapes:
            out_shapes = multi_shapes[(kind, params)]
        else:
            costs.append(math.inf)
            outs.append(())
            continue
        outs.append(out_shapes)
        if constant_concats_only and kind == "concat" and c not in constant:
            costs.append(math.inf)
            continue
        folded = all(ch in constant for ch in node.children)
        fused = kind in FUSIBLE and any(
            ch not in constant and ch not in args for ch in node.children
        )
        if discounts is not None:
            epilogue, absorbed = discounts.get(n, (False, False))
            epilogue = epilogue or fused
        else:
            epilogue = fused or (
                kind in EPILOGUE_KINDS
                and len(node.children) == 1
                and node.children[0] in producers
            )
            absorbed = False
            if kind == "transpose":
                perm = param_ints(kind, params, 0, "perm")
                rank = len(perm)
                absorbed = (
                    rank >= 2
                    and perm == (*range(rank - 2), rank - 1, rank - 2)
                    and c in matmul_users
                )
        costs.append(
            model.op_cost(
                kind,
                params,
                ins,
                out_shapes,
                folded=folded,
                epilogue=epilogue,
                absorbed=absorbed,
            )
        )
    return Priced(costs, outs, constant)
