"""
The search graph of `taso-substitute`: an immutable DAG of `(kind, params)` nodes.

The backtracking search creates thousands of candidate graphs, so it does not clone xDSL
IR: a `Dag` maps node ids to frozen `Node`s, and a rewrite copies that map, adds the new
nodes and gives fresh ids to every node downstream of the change. An id therefore always
means the same node, which lets structural hashes and costs be cached per id in the shared
`DagContext`. `import_function` builds a `Dag` from a `func.func` (matmul transpose flags
become explicit transposes, so rules see them); `export_function` writes one back.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, TensorType
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.rewriter import Rewriter
from xdsl.utils.hints import isa

from plmr.dialects import graph
from plmr.dialects.narrow import terminator
from plmr.passes.taso.ops import Params, Shape, build_op, op_key, param_int
from plmr.values import constant_attr, dense_to_numpy

Val = tuple[int, int]
"""A value of the DAG: (node id, result index)."""


@dataclass(frozen=True)
class Node:
    """One op: `arg` (function argument), `const`, a substitution kind or an opaque op."""

    kind: str
    params: Params
    operands: tuple[Val, ...]
    shapes: tuple[Shape, ...]
    elt: Attribute


@dataclass
class DagContext:
    """What all graphs of one search share: id counter, constants, opaque ops, caches."""

    next_id: int = 0
    constants: list[DenseIntOrFPElementsAttr[Any] | np.ndarray[Any, Any]] = field(
        default_factory=lambda: list[DenseIntOrFPElementsAttr[Any] | np.ndarray[Any, Any]]()
    )
    opaque: dict[int, Operation] = field(default_factory=lambda: dict[int, Operation]())
    names: dict[int, list[str | None]] = field(
        default_factory=lambda: dict[int, list[str | None]]()
    )
    hashes: dict[int, int] = field(default_factory=lambda: dict[int, int]())
    identity: dict[int, bool] = field(default_factory=lambda: dict[int, bool]())

    def fresh(self) -> int:
        self.next_id += 1
        return self.next_id - 1

    def node_hash(self, dag: Dag, nid: int) -> int:
        """The structural hash of a node (its operands' hashes must be known)."""
        found = self.hashes.get(nid)
        if found is not None:
            return found
        node = dag.nodes[nid]
        hashes = self.hashes
        h = hash(
            (node.kind, node.params, tuple((hashes[o[0]], o[1]) for o in node.operands))
        )
        hashes[nid] = h
        return h

    def constant(self, node: Node) -> DenseIntOrFPElementsAttr[Any] | np.ndarray[Any, Any]:
        return self.constants[param_int(node.kind, node.params, 1, "constant index")]

    def const_value(self, node: Node) -> np.ndarray[Any, Any]:
        raw = self.constant(node)
        if isinstance(raw, DenseIntOrFPElementsAttr):
            return dense_to_numpy(raw)
        return raw

    def is_identity(self, dag: Dag, nid: int) -> bool:
        """Whether a `const` node is an identity matrix or identity conv kernel."""
        found = self.identity.get(nid)
        if found is not None:
            return found
        node = dag.nodes[nid]
        shape = node.shapes[0]
        ok = False
        if (len(shape) == 2 and shape[0] == shape[1]) or (
            len(shape) == 4 and shape[0] == shape[1] and shape[2] % 2 and shape[3] % 2
        ):
            from plmr.passes.taso.rules import identity_array

            value = self.const_value(node)
            ok = bool(np.array_equal(value, identity_array(shape, value.dtype)))
        self.identity[nid] = ok
        return ok


@dataclass
class Dag:
    """One candidate graph: nodes by id, the function's results, and the rewrites so far."""

    ctx: DagContext
    nodes: dict[int, Node]
    outputs: tuple[Val, ...]
    applied: tuple[str, ...] = ()
    _users: dict[int, list[tuple[int, int]]] | None = None
    _order: list[int] | None = None
    _by_kind: dict[str, list[int]] | None = None

    def users(self) -> dict[int, list[tuple[int, int]]]:
        """Node id -> (user id, operand index) for every use."""
        if self._users is None:
            users: dict[int, list[tuple[int, int]]] = {nid: [] for nid in self.nodes}
            for nid, node in self.nodes.items():
                for i, (src, _) in enumerate(node.operands):
                    users[src].append((nid, i))
            self._users = users
        return self._users

    def value_users(self, val: Val) -> list[tuple[int, int]]:
        """(user id, operand index) for every use of one result."""
        users = self.users()[val[0]]
        if len(self.nodes[val[0]].shapes) == 1:
            return users
        return [(u, i) for u, i in users if self.nodes[u].operands[i] == val]

    def is_output(self, val: Val) -> bool:
        return val in self.outputs

    def order(self) -> list[int]:
        """Node ids in a topological order (operands first)."""
        if self._order is None:
            seen: set[int] = set()
            out: list[int] = []
            for root in sorted(self.nodes):
                if root in seen:
                    continue
                stack: list[tuple[int, int]] = [(root, 0)]
                seen.add(root)
                while stack:
                    nid, i = stack.pop()
                    ops = self.nodes[nid].operands
                    if i < len(ops):
                        stack.append((nid, i + 1))
                        child = ops[i][0]
                        if child not in seen:
                            seen.add(child)
                            stack.append((child, 0))
                    else:
                        out.append(nid)
            self._order = out
        return self._order

    def by_kind(self) -> dict[str, list[int]]:
        if self._by_kind is None:
            index: dict[str, list[int]] = {}
            for nid, node in self.nodes.items():
                index.setdefault(node.kind, []).append(nid)
            self._by_kind = index
        return self._by_kind

    def shape(self, val: Val) -> Shape:
        return self.nodes[val[0]].shapes[val[1]]

    def op_count(self) -> int:
        return sum(1 for n in self.nodes.values() if n.kind not in ("arg", "const"))

    def kind_count(self, kind: str) -> int:
        return len(self.by_kind().get(kind, []))

    def graph_hash(self) -> int:
        """A hash of the computation (equal for graphs that differ only in node ids)."""
        ctx = self.ctx
        total = 0
        for nid in self.order():
            total = (total + ctx.node_hash(self, nid)) & 0xFFFFFFFFFFFFFFFF
        outs = tuple((ctx.node_hash(self, v[0]), v[1]) for v in self.outputs)
        return hash((total, outs))

    def descendants(self, roots: Iterable[int]) -> set[int]:
        users = self.users()
        seen: set[int] = set()
        stack = list(roots)
        while stack:
            nid = stack.pop()
            for u, _ in users[nid]:
                if u not in seen:
                    seen.add(u)
                    stack.append(u)
        return seen

    def rewrite(
        self,
        new_nodes: dict[int, Node],
        replace: dict[Val, Val],
        rule: str | None,
    ) -> Dag:
        """
        A new graph with `new_nodes` added, every use of a key of `replace` redirected,
        everything downstream re-created under fresh ids, and dead nodes dropped.
        """
        ctx = self.ctx
        nodes = dict(self.nodes)
        nodes.update(new_nodes)
        mapping = dict(replace)
        for nid in self.order():
            node = self.nodes[nid]
            if not any(o in mapping for o in node.operands):
                continue
            fresh = ctx.fresh()
            nodes[fresh] = Node(
                node.kind,
                node.params,
                tuple(mapping.get(o, o) for o in node.operands),
                node.shapes,
                node.elt,
            )
            if nid in ctx.names:
                ctx.names[fresh] = ctx.names[nid]
            for r in range(len(node.shapes)):
                mapping[(nid, r)] = (fresh, r)
        outputs = tuple(mapping.get(o, o) for o in self.outputs)
        live: set[int] = set()
        stack = [o[0] for o in outputs] + [
            nid for nid, n in nodes.items() if n.kind == "arg"
        ]
        while stack:
            nid = stack.pop()
            if nid in live:
                continue
            live.add(nid)
            stack.extend(o[0] for o in nodes[nid].operands)
        return Dag(
            ctx,
            {nid: n for nid, n in nodes.items() if nid in live},
            outputs,
            self.applied if rule is None else (*self.applied, rule),
        )

    def simplify(self) -> Dag:
        """
        The graph without concat/split round trips: `concat(split(x))` of all pieces in
        order is `x`, and `split(concat(a, b))` at the concat's boundary is `(a, b)`.
        """
        dag = self
        for _ in range(8):
            replace: dict[Val, Val] = {}
            for nid, node in dag.nodes.items():
                if node.kind == "concat":
                    src = node.operands[0][0]
                    producer = dag.nodes[src]
                    if (
                        producer.kind == "split"
                        and producer.params[0] == node.params[0]
                        and node.operands
                        == tuple((src, r) for r in range(len(producer.shapes)))
                    ):
                        replace[(nid, 0)] = producer.operands[0]
                elif node.kind == "split":
                    producer = dag.nodes[node.operands[0][0]]
                    axis = param_int(node.kind, node.params, 0, "axis")
                    if (
                        producer.kind == "concat"
                        and producer.params[0] == axis
                        and node.params[1]
                        == tuple(dag.shape(o)[axis] for o in producer.operands)
                    ):
                        for r, o in enumerate(producer.operands):
                            replace[(nid, r)] = o
            if not replace:
                return dag
            dag = dag.rewrite({}, replace, None)
            dag.graph_hash()
        return dag


# ---------------------------------------------------------------------------------------
# From and to xDSL
# ---------------------------------------------------------------------------------------


def _swap_last(rank: int) -> tuple[int, ...]:
    return (*range(rank - 2), rank - 1, rank - 2)


def _tensor(value: SSAValue) -> tuple[Shape, Attribute] | None:
    t = value.type
    if not isa(t, TensorType[Attribute]) or any(d < 0 for d in t.get_shape()):
        return None
    return t.get_shape(), t.element_type


def import_function(fn: func.FuncOp, ctx: DagContext) -> Dag | None:
    """The DAG of a single-block function of static-shaped tensors (None otherwise)."""
    if len(fn.body.blocks) != 1:
        return None
    block = fn.body.block
    nodes: dict[int, Node] = {}
    vals: dict[SSAValue, Val] = {}

    def add(node: Node, names: Sequence[str | None] = ()) -> int:
        nid = ctx.fresh()
        nodes[nid] = node
        if names:
            ctx.names[nid] = list(names)
        return nid

    for i, arg in enumerate(block.args):
        info = _tensor(arg)
        if info is None:
            return None
        vals[arg] = (add(Node("arg", (i,), (), (info[0],), info[1])), 0)
    outputs: tuple[Val, ...] | None = None
    for op in block.ops:
        if isinstance(op, func.ReturnOp):
            outputs = tuple(vals[v] for v in op.arguments)
            break
        infos = [_tensor(r) for r in op.results]
        if any(info is None for info in infos) or op.regions:
            return None
        shapes = tuple(info[0] for info in infos if info is not None)
        elt = infos[0][1] if infos and infos[0] is not None else None
        names = [r.name_hint for r in op.results]
        operands = [vals[v] for v in op.operands]
        if elt is None:
            return None
        if isinstance(op, graph.ConstantOp):
            ctx.constants.append(op.value)
            nid = add(
                Node("const", ("value", len(ctx.constants) - 1), (), shapes, elt), names
            )
        elif isinstance(op, graph.MatmulOp) and (op.transpose_a or op.transpose_b):
            for k, flag in enumerate((op.transpose_a, op.transpose_b)):
                if flag is not None:
                    src = operands[k]
                    rank = len(nodes[src[0]].shapes[src[1]])
                    shape = nodes[src[0]].shapes[src[1]]
                    perm = _swap_last(rank)
                    t = add(
                        Node(
                            "transpose",
                            (perm,),
                            (src,),
                            (tuple(shape[p] for p in perm),),
                            elt,
                        )
                    )
                    operands[k] = (t, 0)
            nid = add(Node("matmul", (False, False), tuple(operands), shapes, elt), names)
        elif isinstance(op, graph.ConcatOp) and len(operands) > 2:
            # Binary concats, as in the rules: concat(concat(a, b), c).
            axis = op.axis.value.data % len(shapes[0])
            acc = operands[0]
            for k, nxt in enumerate(operands[1:], start=2):
                a, b = nodes[acc[0]].shapes[acc[1]], nodes[nxt[0]].shapes[nxt[1]]
                shape = tuple(
                    x + y if i == axis else x for i, (x, y) in enumerate(zip(a, b))
                )
                last = k == len(operands)
                acc = (
                    add(
                        Node("concat", (axis,), (acc, nxt), (shape,), elt),
                        names if last else (),
                    ),
                    0,
                )
            nid = acc[0]
        elif isinstance(op, graph.SplitOp) and len(op.results) > 2:
            # Binary splits: split(x) -> (p0, rest), split(rest) -> (p1, rest2), ...
            axis = op.axis.value.data % len(shapes[0])
            sizes = list(op.sizes.get_values())
            src = operands[0]
            for k, res in enumerate(op.results[:-2]):
                rest = sum(sizes[k + 1 :])
                in_shape = nodes[src[0]].shapes[src[1]]
                pieces = tuple(
                    tuple(n if i == axis else d for i, d in enumerate(in_shape))
                    for n in (sizes[k], rest)
                )
                nid = add(
                    Node("split", (axis, (sizes[k], rest)), (src,), pieces, elt),
                    [res.name_hint, None],
                )
                vals[res] = (nid, 0)
                src = (nid, 1)
            in_shape = nodes[src[0]].shapes[src[1]]
            nid = add(
                Node("split", (axis, tuple(sizes[-2:])), (src,), shapes[-2:], elt),
                names[-2:],
            )
            vals[op.results[-2]] = (nid, 0)
            vals[op.results[-1]] = (nid, 1)
            continue
        else:
            key = op_key(op)
            if key is None:
                oid = len(ctx.opaque)
                ctx.opaque[oid] = op
                nid = add(
                    Node(f"opaque:{op.name}", (oid,), tuple(operands), shapes, elt), names
                )
            else:
                nid = add(Node(key[0], key[1], tuple(operands), shapes, elt), names)
        for r, res in enumerate(op.results):
            vals[res] = (nid, r)
    if outputs is None:
        return None
    return Dag(ctx, nodes, outputs)


def export_function(dag: Dag, fn: func.FuncOp) -> None:
    """Replaces the body of `fn` (the function `dag` was imported from) by `dag`."""
    ctx = dag.ctx
    block: Block = fn.body.block
    vals: dict[Val, SSAValue] = {}
    new_ops: list[Operation] = []
    for nid in dag.order():
        node = dag.nodes[nid]
        if node.kind == "arg":
            vals[(nid, 0)] = block.args[param_int(node.kind, node.params, 0, "argument")]
            continue
        operands = [vals[o] for o in node.operands]
        if node.kind == "const":
            raw = ctx.constant(node)
            attr = (
                raw
                if isinstance(raw, DenseIntOrFPElementsAttr)
                else constant_attr(raw, node.elt)
            )
            op: Operation = graph.ConstantOp(attr)
        elif node.kind.startswith("opaque:"):
            op = ctx.opaque[param_int(node.kind, node.params, 0, "opaque index")].clone()
            op.operands = operands
        else:
            op = build_op(node.kind, node.params, operands)
        for r, res in enumerate(op.results):
            names = ctx.names.get(nid)
            if names is not None and r < len(names):
                res.name_hint = names[r]
            vals[(nid, r)] = res
        new_ops.append(op)
    ret = terminator(block, func.ReturnOp)
    old = [op for op in block.ops if op is not ret]
    for op in new_ops:
        block.insert_op_before(op, ret)
    ret.operands = [vals[o] for o in dag.outputs]
    for op in reversed(old):
        Rewriter.erase_op(op, safe_erase=False)
